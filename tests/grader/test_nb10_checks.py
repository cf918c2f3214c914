"""Notebook 10's checks: the library's own stages pass them, delegating to the library is refused,
the learner's stage really runs inside tc.compile, and the freeing rule reads the wrapper right."""
import pytest
import torch

import tensorcraft
from grader.checks.programs import Program
from grader.checks.nb10_code_generation import EXERCISES, NanFirst, free_problems, slot_problems
from grader.mutants import mutants_for
from solution_cells import solution
from tensorcraft.compiler.codegen import c as c_backend
from tensorcraft.compiler.codegen import python as python_backend
from tensorcraft.compiler.codegen import wrapper as wrapper_module
from tensorcraft.compiler.pipeline import compile_graph

PYTHON, C, WRAPPER = EXERCISES["python_source"], EXERCISES["c_source"], EXERCISES["generate_wrapper"]


# Correct answers: the solution notebook's own printers and wrapper (the one copy of each answer).
LIBRARY_PYTHON = solution("10_code_generation", "python_source")
C_ANSWER = solution("10_code_generation", "c_source")
WRAPPER_ANSWER = solution("10_code_generation", "generate_wrapper")


def test_correct_answers_pass_public_and_hidden():
    for exercise, answer in ((PYTHON, LIBRARY_PYTHON), (C, C_ANSWER), (WRAPPER, WRAPPER_ANSWER)):
        assert not exercise.run(answer).failed, exercise.name
        assert not exercise.run(answer, hidden=True, seed=7).failed, exercise.name


@pytest.mark.parametrize("seed", [99, 1938361668])
def test_a_compiled_result_that_rounds_otherwise_than_eager_after_a_cancellation_is_right(seed):
    """These seeds draw a network whose squares of large products leave a small value that the fused C
    kernel rounds otherwise than eager, by more than float32's tolerance: the solution lost the cell's
    points (seed 1938361668 was a learner's at grading) and was shown the hint of a mutant."""
    assert not WRAPPER.run(WRAPPER_ANSWER, hidden=True, seed=seed).failed


def test_the_librarys_wrapper_meets_the_freeing_rule():
    """The rule the check applies to the learner is the one the library's own wrapper follows."""
    for case in WRAPPER.public()[0].cases + WRAPPER.hidden(torch.Generator().manual_seed(3))[0].cases:
        program, *inputs = case.args
        compiled = tensorcraft.compile(program)
        compiled(*inputs)
        done = compile_graph(compiled.compiled.captured)
        assert free_problems(done.code.source, done.optimized, done.plan) == [], case.note
        assert slot_problems(done.code.source, done.plan) == [], case.note


def test_calling_the_librarys_stage_is_refused():
    for exercise, stage in ((PYTHON, python_backend.python_source), (C, c_backend.c_source)):
        report = exercise.run(lambda kernel, stage=stage: stage.library(kernel))
        assert report.failed and "asks you to do without" in report.failed[0].detail, exercise.name
    report = WRAPPER.run(lambda *args, library=wrapper_module.generate_wrapper.library: library(*args))
    assert report.failed and "asks you to do without" in report.failed[0].detail
    report = WRAPPER.run(lambda *args, stage=wrapper_module.generate_wrapper: stage(*args))
    assert report.failed and "asks you to do without" in report.failed[0].detail


def test_the_learners_kernel_is_compiled_and_run_by_tc_compile():
    seen = []

    def spy(kernel):
        seen.append(kernel.name)
        return LIBRARY_PYTHON(kernel)

    x, y = torch.randn(3, 4), torch.randn(4)
    program = Program(("return torch.sigmoid(a * 2.0 + b) * a",), ("a", "b"))
    got = PYTHON.call(spy, program, x, y)
    assert seen
    torch.testing.assert_close(got, program(x, y))


def test_an_unwritten_output_element_shows_as_nan():
    def forgets_the_last_output(kernel):
        source = LIBRARY_PYTHON(kernel)
        return source.replace(f"    {kernel.outputs[-1].name}.copy_(", "    (")
    report = PYTHON.run(forgets_the_last_output)
    assert report.failed and "nan" in report.failed[0].detail.lower()


def test_free_problems_names_values_kept_past_their_last_use():
    def mlp(x, w1, b1, w2):
        return (torch.tanh(x @ w1 + b1) * 0.5) @ w2

    args = (torch.randn(3, 4), torch.randn(4, 5), torch.randn(5), torch.randn(5, 2))
    compiled = tensorcraft.compile(mlp)
    compiled(*args)
    graph = compiled.compiled.captured
    done = compile_graph(graph)
    optimized, plan, source = done.optimized, done.plan, done.code.source
    assert free_problems(source, optimized, plan) == []
    dels = [line for line in source.splitlines() if line.strip().startswith("del ")]
    assert dels, source
    never = source.replace(dels[0], "    pass")
    assert any("never deleted" in p for p in free_problems(never, optimized, plan))
    lines = source.splitlines()
    late = [line for line in lines if line not in dels]
    at = next(i for i, line in enumerate(late) if line.strip().startswith("return"))
    late[at:at] = dels
    assert any("deleted only after" in p for p in free_problems("\n".join(late), optimized, plan))


def test_c_cases_never_run_on_cuda_even_where_a_gpu_is_present():
    report = C.run(C_ANSWER, cuda_available=True)
    assert {o.device for o in report.outcomes} == {"cpu"} and not report.failed


def test_nan_first_fills_outputs_before_the_kernel_runs():
    class Kernel:
        inputs = ("a",)

    seen = []
    NanFirst(Kernel, lambda a, out: seen.append(out.isnan().all().item()))(torch.zeros(2), torch.zeros(2))
    assert seen == [True]


def test_a_wrapper_that_ignores_the_memory_plans_slots_is_rejected():
    """Fresh torch.empty for a planned value computes the right numbers but throws the reuse away."""
    wrapper_ignores_the_slots = next(m.fn for m in mutants_for(WRAPPER.id) if m.name == "wrapper_ignores_the_slots")
    report = WRAPPER.run(wrapper_ignores_the_slots)
    assert report.failed and any("is not a view of _slot" in o.detail for o in report.failed)


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_public_cases_reject_every_mutant_and_show_it_its_own_hint(exercise):
    """Issue 20's rules: a tick in the notebook means full marks (the public cases reject every mutant not
    marked hidden-only), and one mistake gets one diagnosis (its own hint, on its first failing group)."""
    from mutant_rules import problems
    assert problems(EXERCISES[exercise]) == []


def test_a_wrapper_that_looks_kernels_up_by_name_is_told_they_are_keyed_by_node():
    def by_name(graph, plan, kernels, name="forward"):
        for node in graph.nodes:
            if node.kind == "kernel":
                kernels[node.target.name]  # the kernel's name: kernels is keyed by its node
        return WRAPPER_ANSWER(graph, plan, kernels, name)
    report = WRAPPER.run(by_name)
    assert report.failed and "keyed by the kernel node" in report.failed[0].hint, report.failed[0].hint


@pytest.mark.parametrize("exercise, name, edits, mistake", [
    (PYTHON, "python_source", (('lines.append(f"    {o.name}.copy_({value})")', 'lines.append(f"    {o.name} = {value}")'),),
     "python_rebinds_outputs"),
    (C, "c_source", (("i{d} < {n}; i{d}++", "i{d} < {n} - 1; i{d}++"),), "c_loop_bound_off_by_one"),
    (C, "c_source", (("value = c_float(s.args[0], dtype)", "value = f\"{s.args[0]!r}{'f' if dtype == torch.float32 else ''}\""),),
     "c_repr_constants"),   # a compile error, named by the compiler's errors wherever they are in the source
    (WRAPPER, "generate_wrapper", (("        if dead:", "        if False:"),), "wrapper_never_frees"),
])
def test_a_mistake_written_into_the_solution_cell_is_named_by_its_mutants_hint(exercise, name, edits, mistake):
    """The mutants are patches of the library's stages (its C printer collapses loops the notebook's
    does not), the learner writes the notebook's: the same mistake made in the solution cell still gets
    that mutant's hint."""
    report = exercise.run(solution("10_code_generation", name, edits))
    hint = next(m.hint for m in mutants_for(exercise.id) if m.name == mistake)
    assert report.failed and report.failed[0].hint == hint
