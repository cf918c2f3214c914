"""Notebook 03's checks: the 'is it loops' reader of generated source, and the count's ground truth."""
import pytest
import torch
from hypothesis import given

from einstein_cases import cases
from grader.checks.nb03_einsum_loops import (NotLoopsError, _count_reference, random_equation,
                                              require_loops)
from tensorcraft.einstein.loops import count_iterations, loop_code

explicit_letters = cases(max_operands=3, max_size=3, max_labels=3, ellipsis=False, spaces=False)


@given(explicit_letters)
def test_the_library_generator_passes_the_loop_reader(case):
    equation = case.equation if "->" in case.equation else case.equation + "->"
    require_loops(loop_code(equation, *case.shapes), equation)


@pytest.mark.parametrize("body, why", [
    ("return torch.einsum('ij,jk->ik', op0, op1)", "einsum"),
    ("return op0 @ op1", "@ operator"),
    ("return torch.matmul(op0, op1)", "matmul"),
    ("import numpy\n    return op0", "imports 'numpy'"),
    ("import opt_einsum\n    return op0", "imports 'opt_einsum'"),
    ("return (op0[:, :, None] * op1[None]).sum(1)", "'sum'"),
    ("out = torch.zeros(2, 4)\n    for i in range(2):\n        out[i] = op0[i] * op1[0]\n    return out", "1 for loop"),
])
def test_the_loop_reader_rejects_what_is_not_loops(body, why):
    source = f"import torch\n\ndef einsum_loops_generated(op0, op1):\n    {body}\n"
    with pytest.raises(NotLoopsError, match=why):
        require_loops(source, "ij,jk->ik")


def test_the_count_reference_agrees_with_the_library_on_random_equations():
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        equation, shapes = random_equation(g, max_points=500)
        assert _count_reference(equation, *shapes) == count_iterations(equation, *shapes)


def test_a_label_of_sizes_0_and_1_is_empty_in_every_hidden_draw():
    from grader.checks.nb03_einsum_loops import EINSUM_LOOPS, LOOP_CODE, empty_dimension_case

    for seed in range(20):
        equation, shapes = empty_dimension_case(torch.Generator().manual_seed(seed))
        operands = [torch.ones(s) for s in shapes]
        sizes = {}
        for term, shape in zip(equation.split("->")[0].split(","), shapes):
            for label, size in zip(term, shape):
                sizes.setdefault(label, set()).add(size)
        assert {0, 1} in sizes.values()                         # a label with sizes 0 and 1
        torch.einsum(equation, *operands)                        # which torch accepts
    for exercise in (EINSUM_LOOPS, LOOP_CODE):
        titles = [g.title for g in exercise.public() + exercise.hidden(torch.Generator().manual_seed(0))]
        assert sum("0" in t and "1" in t for t in titles) == 2, titles


def _through_generated_function(equation, *operands):
    from tensorcraft.einstein import loops
    return loops.generated_function(equation, *[tuple(op.shape) for op in operands])(*operands)


_KEPT = {}


def _through_kept_library_generator(equation, *operands):
    namespace = {}
    exec(_KEPT["loop_code"](equation, *[tuple(op.shape) for op in operands]), namespace)
    return namespace["einsum_loops_generated"](*operands)


@pytest.mark.parametrize("answer, called", [(_through_generated_function, "generated_function"),
                                            (_through_kept_library_generator, "the library's own loop_code")])
def test_the_loops_the_library_generates_are_no_answer_to_einsum_loops(answer, called):
    """The library's code generator writes the loops einsum_loops asks for: an answer that runs them (by
    generated_function, or the generator itself kept under a name of its own) fails, naming the call."""
    from grader.checks.nb03_einsum_loops import EINSUM_LOOPS
    from tensorcraft.einstein import loops
    _KEPT["loop_code"] = loops.loop_code.library
    operands = (torch.randn(2, 3), torch.randn(3, 4))
    assert torch.allclose(answer("ij,jk->ik", *operands), torch.einsum("ij,jk->ik", *operands))  # outside a check
    report = EINSUM_LOOPS.run(answer, cuda_available=False)
    assert len(report.failed) == len(EINSUM_LOOPS.public()) + len(EINSUM_LOOPS.on_meta())  # every group, meta's too
    assert called in report.failed[0].detail
