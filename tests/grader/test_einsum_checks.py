"""The checks of notebooks 01 and 02: ground truth from torch, and the learner's stage inside tc.einsum."""
from collections import Counter

import pytest
import torch

from grader.checks import nb01_einsum_notation as nb01
from grader.checks.report import flat
from grader.checks import nb02_einsum_parsing as nb02
from grader.mutants import mutants_for
from tensorcraft.einstein.infer import infer_output as library_infer_output


def test_torchs_implicit_output_is_read_back_from_the_shape():
    # the order-of-appearance answer would be 'idk'; uppercase sorts first; ellipsis dimensions lead
    for inputs, expected in [("ijd,jk", "dik"), ("aB", "Ba"), ("Z...a", "...Za"), ("ii", ""), ("...,...", "...")]:
        output, result = nb02._torch_implicit_output(inputs)
        assert output == expected
        assert torch.equal(result, torch.einsum(inputs, *nb02._labelled_operands(inputs)[0]))


def test_the_infer_output_check_runs_the_learners_function_inside_tc_einsum():
    seen = Counter()

    def spy(inputs):
        seen[inputs] += 1
        counts = Counter(inputs.replace("...", "").replace(",", ""))
        return ("..." if "..." in inputs else "") + "".join(sorted(c for c, n in counts.items() if n == 1))

    report = nb02.INFER_OUTPUT.run(spy, cuda_available=False)
    assert not report.failed
    # once called directly, once by the parser inside tc.einsum
    assert seen["ijd,jk"] == 2 and seen["...ij,...jk"] == 2


def test_calling_the_librarys_own_stage_is_forbidden():
    report = nb02.INFER_OUTPUT.run(lambda inputs: library_infer_output.library(inputs), cuda_available=False)
    assert report.failed and "uses tensorcraft.einstein.infer_output (through the name" in flat(report.text())


def test_an_answer_the_pipeline_cannot_use_fails_with_the_pipelines_error():
    report = nb02.INFER_OUTPUT.run(lambda inputs: "ij->k", cuda_available=False)
    assert report.failed
    assert "expected 'ik', got 'ij->k'" in flat(report.text())
    answer, result = nb02.run_infer_output(lambda inputs: "ij->k", "ij,jk")
    assert answer == "ij->k" and result.startswith("tc.einsum with your infer_output raised EinsumError")


def test_a_validator_verdict_is_diagnosed_by_the_mutant_that_shares_it():
    def strips_spaces(equation, ndims):
        equation = equation.replace(" ", "")
        if any(not (c.isascii() and c.isalpha()) and c not in ",.->" for c in equation):
            raise ValueError("bad character")
        if "- >" in equation:
            raise ValueError("unreachable")

    report = nb02.VALIDATE_EQUATION.run(strips_spaces, cuda_available=False)
    assert report.failed
    assert "do not remove all spaces" in flat(report.text())


@pytest.mark.parametrize("exercise", [*nb01.EXERCISES.values(), *nb02.EXERCISES.values()], ids=lambda e: e.id)
def test_hidden_cases_are_repeatable_and_every_group_has_cases(exercise):
    first = exercise.hidden(torch.Generator().manual_seed(3))
    again = exercise.hidden(torch.Generator().manual_seed(3))
    assert [g.title for g in first] == [g.title for g in again]
    for a, b in zip(first, again):
        assert len(a.cases) > 0
        assert [repr(c.args) for c in a.cases] == [repr(c.args) for c in b.cases]


def test_validate_groups_hold_what_torch_says():
    groups = nb02.VALIDATE_EQUATION.hidden(torch.Generator().manual_seed(1))
    for group in groups:
        expected = nb02.REJECTED if "rejects" in group.title else nb02.ACCEPTED
        for case in group.cases:
            equation, ndims = case.args
            try:
                torch.einsum(equation, *[torch.zeros((2,) * n) for n in ndims])
                verdict = nb02.ACCEPTED
            except (RuntimeError, ValueError):
                verdict = nb02.REJECTED
            assert verdict == expected, case.args


# ---------------------------------------------------------------- wrong answers that once passed


def _solution_equations():
    from solution_cells import solution
    return solution("01_einsum_notation", "equations")()


def test_an_equation_without_arrow_fails_even_where_implicit_mode_gives_the_result():
    table = _solution_equations() | {"matmul_bt": "ik,jk"}   # implicit 'ik,jk' is 'ij': the right result
    report = nb01.EQUATIONS.run(lambda: table, cuda_available=False)
    assert report.failed and "with no '->'" in report.text()


def test_output_shape_must_be_a_tuple_of_ints():
    def as_list(equation, *shapes):
        inputs, output = equation.replace(" ", "").split("->")
        size = {c: n for term, shape in zip(inputs.split(","), shapes) for c, n in zip(term, shape)}
        return [size[c] for c in output]

    report = nb01.OUTPUT_SHAPE.run(as_list, cuda_available=False)
    assert report.failed and "must return a tuple of ints" in report.text()
    assert not nb01.OUTPUT_SHAPE.run(lambda *a: tuple(as_list(*a)), cuda_available=False).failed


def test_output_shape_cases_tell_b_from_B():
    lowered = lambda equation, *shapes: tuple(  # noqa: E731
        dict(zip("".join(equation.lower().split("->")[0].split(",")), [n for s in shapes for n in s]))[c]
        for c in equation.lower().split("->")[1])
    report = nb01.OUTPUT_SHAPE.run(lowered, cuda_available=False)
    assert any("uppercase and lowercase" in o.title for o in report.failed)
    hidden = nb01.OUTPUT_SHAPE.hidden(torch.Generator().manual_seed(0))
    assert any(c.isupper() for group in hidden[-1:] for case in group.cases for c in case.args[0])


def test_attention_must_compute_both_products_with_einsum():
    import math

    def with_bmm(q, k, v):
        b, h, n, d = q.shape
        scores = torch.bmm(q.reshape(b * h, n, d), k.reshape(b * h, -1, d).transpose(1, 2)) / math.sqrt(d)
        return torch.bmm(torch.softmax(scores, -1), v.reshape(b * h, -1, v.shape[-1])).reshape(b, h, n, -1)

    report = nb01.ATTENTION.run(with_bmm, cuda_available=False)
    assert report.failed and "called einsum 0 times" in report.text()

    from torch import einsum as bound_before_the_check   # an alias still counts

    def aliased(q, k, v):
        scores = bound_before_the_check("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
        return bound_before_the_check("bhqk,bhke->bhqe", torch.softmax(scores, -1), v)

    assert not nb01.ATTENTION.run(aliased, cuda_available=False).failed

    import tensorcraft as tc

    def with_tc(q, k, v):
        scores = tc.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
        return tc.einsum("bhqk,bhke->bhqe", torch.softmax(scores, -1), v)

    assert not nb01.ATTENTION.run(with_tc, cuda_available=False).failed


def test_label_sizes_size_0_against_1_is_0_as_in_torch():
    groups = nb02.LABEL_SIZES.public() + nb02.LABEL_SIZES.hidden(torch.Generator().manual_seed(2))
    empty = [c for g in groups if "size 0" in g.title for c in g.cases]
    assert len(empty) >= 5
    for case in empty:
        expected = nb02._torch_label_sizes(*case.args)
        if expected != nb02.REJECTED:
            assert 0 in expected.values()
    by_max = next(m for m in mutants_for("nb02_einsum_parsing.label_sizes") if m.name == "label_sizes_broadcast_by_max")
    report = nb02.LABEL_SIZES.run(by_max.fn, hidden=True, seed=2, cuda_available=False)
    assert "a letter of size 0 in one operand and 1 in the other" in [o.title for o in report.failed]


def test_a_validator_that_raises_runtime_error_is_told_to_raise_value_error():
    def like_torch(equation, ndims):
        raise RuntimeError("einsum(): invalid subscript")

    report = nb02.VALIDATE_EQUATION.run(like_torch, cuda_available=False)
    assert "this exercise asks for ValueError" in report.text()


def test_a_path_searchs_report_is_refused_where_it_holds_the_answer():
    """opt_einsum's contract_path reports the output's letters and every letter's length: forbidden in
    01's output_shape and 02's infer_output and label_sizes (their statements say so)."""
    import opt_einsum

    def output_shape(equation, *shapes):
        info = opt_einsum.contract_path(equation, *shapes, shapes=True)[1]
        return tuple(info.size_dict[c] for c in info.output_subscript)

    def label_sizes(equation, *shapes):
        return dict(opt_einsum.contract_path(equation, *shapes, shapes=True)[1].size_dict)

    for exercise, answer in ((nb01.OUTPUT_SHAPE, output_shape), (nb02.EXERCISES["label_sizes"], label_sizes)):
        [first, *_] = exercise.run(answer, cuda_available=False).failed
        assert "opt_einsum.contract_path" in first.detail
        assert "contract_path is forbidden here" in first.hint


def test_the_library_stage_kept_in_a_dict_is_named_not_a_recursion_error():
    import tensorcraft.einstein
    kept = {"infer": tensorcraft.einstein.infer_output}
    [first, *_] = nb02.INFER_OUTPUT.run(lambda inputs: kept["infer"](inputs), cuda_available=False).failed
    assert "RecursionError" not in first.detail
    assert "called the library's own infer_output" in first.detail
    assert "forbidden under any name" in first.hint


def test_the_attention_hint_describes_the_steps_without_the_code_of_the_answer():
    report = nb01.ATTENTION.run(lambda q, k, v: torch.einsum("bhqd,bhkd->bhqk", q, k).softmax(-1).einsum(
        "bhqk,bhkd->bhqd", v) if False else torch.einsum(
        "bhqk,bhkd->bhqd", torch.einsum("bhqd,bhkd->bhqk", q, k).softmax(-1), v), cuda_available=False)
    hint = report.failed[0].hint
    assert "einsum(" not in hint and "bhqd" not in hint and "softmax" in hint


def test_a_mutant_that_fails_an_earlier_case_of_the_group_is_not_the_diagnosis():
    """' ij->' is rejected both by an answer that refuses spaces and by one that refuses an empty output;
    the learner's answer accepted 'i j , j k -> i k' before it, so the spaces hint would name a mistake
    they did not make."""
    from solution_cells import solution
    validate = solution("02_einsum_parsing", "validate_equation")
    spaces = next(m for m in mutants_for("nb02_einsum_parsing.validate_equation") if m.name == "validate_rejects_spaces")

    def refuses_an_empty_output(equation, ndims):
        if equation.strip().endswith("->"):
            raise ValueError("empty output")
        validate(equation, ndims)
    [first, *_] = nb02.EXERCISES["validate_equation"].run(refuses_an_empty_output, cuda_available=False).failed
    assert "empty output" in first.detail and first.hint != spaces.hint


def test_right_letters_returned_as_a_list_are_told_to_join_them():
    """No mutant holds the right letters in a list (it would be the answer, one ''.join away): the kind of
    the result names the mistake."""
    from collections import Counter

    def as_list(inputs):
        counts = Counter(inputs.replace("...", "").replace(",", ""))
        return (["..."] if "..." in inputs else []) + sorted(c for c, n in counts.items() if n == 1)
    [first, *_] = nb02.EXERCISES["infer_output"].run(as_list, cuda_available=False).failed
    assert first.hint == "return a string, not a list of its pieces: join them with ''.join(...)"
