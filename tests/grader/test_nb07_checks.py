"""Notebook 07's checks: their ground truth (torch.fx, Dynamo) agrees with the library's own stages,
an answer written independently passes, delegating is refused, the pipeline really calls the
learner's stage, and a known mistake is named by its hint."""
import pickle

import pytest
import torch

import tensorcraft
from grader.checks import nb07_graph_capture as nb07
from grader.checks.compare import mismatch
from grader.checks.nb07_graph_capture import EXERCISES, dynamo_breaks, fx_truth, random_program, zoo_program
from grader.checks.programs import Program
from grader.mutants import mutants_for
from solution_cells import solution
from tensorcraft.compiler.capture import capture as library_capture
from tensorcraft.compiler.guards import check_input as library_check_input
from tensorcraft.compiler.opnames import refusal as library_refusal

CAPTURE, INPUT_GUARD, REFUSAL = EXERCISES["capture"], EXERCISES["input_guard"], EXERCISES["refusal"]
LIBRARY = {"capture": library_capture.library, "input_guard": library_check_input.library,
           "refusal": library_refusal.library}


def wrong(exercise, name):
    """The registered mutant ``name`` of ``exercise`` (a patch of the library's stage)."""
    return next(m.fn for m in mutants_for(exercise.id) if m.name == name)


# Correct answers: the solution notebook's own cells (the one copy of each answer).
tracer = solution("07_graph_capture", "capture")
guard = solution("07_graph_capture", "input_guard")
refusal = solution("07_graph_capture", "refusal")


@pytest.mark.parametrize("name", ["capture", "input_guard", "refusal"])
def test_the_library_stage_matches_the_real_tools_ground_truth(name):
    """The reference (torch.fx, Dynamo) and the library's own stage in the same pipeline agree on
    every public case and on a hidden draw: the checks ask for what the real tools do."""
    exercise = EXERCISES[name]
    groups = exercise.public() + exercise.hidden(torch.Generator().manual_seed(11))
    for group in groups:
        for case in group.cases:
            problem = mismatch(exercise.reference(*case.args), exercise.call(LIBRARY[name], *case.args))
            assert problem is None, f"{name}, {group.title}, {case.note}: {problem}"


@pytest.mark.parametrize("exercise, answer", [(CAPTURE, tracer), (INPUT_GUARD, guard), (REFUSAL, refusal)])
def test_an_independent_answer_passes_public_and_hidden(exercise, answer):
    assert not exercise.run(answer).failed
    assert not exercise.run(answer, hidden=True, seed=5).failed


@pytest.mark.parametrize("exercise, delegate", [
    (CAPTURE, lambda fn, args=(), kwargs=None, module=None: library_capture.library(fn, args, kwargs, module)),
    (CAPTURE, lambda fn, args=(), kwargs=None, module=None: torch.fx.symbolic_trace(fn) and tracer(fn, args, kwargs, module)),
    (INPUT_GUARD, lambda name, value, remembered: library_check_input.library(name, value, remembered)),
    (REFUSAL, lambda op, args, kwargs: library_refusal.library(op, args, kwargs)),
])
def test_delegating_to_the_library_stage_or_to_fx_is_refused(exercise, delegate):
    report = exercise.run(delegate)
    assert report.failed and all("asks you to do without" in o.detail for o in report.failed)


def test_each_stage_is_called_by_the_pipeline():
    calls = {"capture": 0, "input_guard": 0, "refusal": 0}

    def counting(name, fn):
        def spy(*args):
            calls[name] += 1
            return fn(*args)
        return spy

    x = torch.randn(3, 4, dtype=torch.float64)
    CAPTURE.call(counting("capture", tracer), Program(("return x.sin()",)), x, x + 1)
    INPUT_GUARD.call(counting("input_guard", guard), [(x, 2), (x, 2)])
    REFUSAL.call(counting("refusal", refusal), "arithmetic", x)
    # capture once; the guard once per flat input (x and k) of the second call; refusal once per torch call
    assert calls == {"capture": 1, "input_guard": 2, "refusal": calls["refusal"]} and calls["refusal"] >= 3


def test_a_guard_that_ignores_the_dtype_is_named_by_its_hint():
    report = INPUT_GUARD.run(wrong(INPUT_GUARD, "guard_ignores_dtype"))
    failed = [o for o in report.failed if o.title == "tensor changes that must recompile"]
    assert failed and "compare the dtype too" in failed[0].hint


def test_a_tracer_that_skips_inplace_calls_is_named_by_its_hint():
    report = CAPTURE.run(wrong(CAPTURE, "capture_skips_inplace_calls"))
    failed = [o for o in report.failed if o.title.startswith("in-place updates")]
    assert failed and "in-place call" in failed[0].hint


def test_fx_names_match_captures_for_reflected_and_inplace_operators():
    """`2 - x` is rsub and `t += 1`, `t.relu_()` are add and relu in both: fx_truth normalises fx's names."""
    def program(x):
        t = 2 - x
        t += 1
        t.relu_()
        return t * x

    x = torch.randn(3, 2)
    ops, params = fx_truth(program, x)
    captured = library_capture(program, (x,))
    assert ops == [n.op for n in captured.graph.nodes if n.kind == "call"] == ["rsub", "add", "relu", "mul"]
    assert params == []


def test_dynamo_breaks_on_values_but_not_on_shapes():
    x = torch.randn(4, 3)
    assert dynamo_breaks("branch on a value", x) and not dynamo_breaks("branch on the shape", x)


@pytest.mark.parametrize("name", sorted(nb07.BREAKING) + sorted(nb07.WHOLE))
def test_dynamos_verdict_on_a_program_is_the_programs_whatever_the_input(name):
    """What lets the checks ask Dynamo once per program (``truths.shared``): its verdict on the public
    input holds on the sizes (1-5 rows, 2-5 columns) and signs the hidden cases draw."""
    verdict = dynamo_breaks(name)
    assert verdict == (name in nb07.BREAKING)
    g = torch.Generator().manual_seed(3)
    for x in (-torch.rand(1, 2, generator=g), torch.rand(5, 5, generator=g), torch.randn(2, 4, generator=g) * 4,
              torch.zeros(3, 2)):
        assert dynamo_breaks(name, x) == verdict, f"{name} on {tuple(x.shape)}"


def test_a_guard_substitute_keeps_tensorcraft_compiling_once_per_kind():
    compiled = tensorcraft.compile(lambda x: x + 1, backend="python")
    with tensorcraft.substitute(check_input=guard):
        for _ in range(3):
            compiled(torch.randn(2))
    assert compiled.stats.compiles == 1 and compiled.stats.cache_hits == 2


def test_a_guard_that_compares_contiguity_only_is_named_by_its_hint():
    """A transposed input and a broadcast view are both non-contiguous: Dynamo recompiles, so must the guard."""
    report = INPUT_GUARD.run(wrong(INPUT_GUARD, "guard_compares_contiguity_only"))
    failed = [o for o in report.failed if o.title == "tensor changes that must recompile"]
    assert failed and "not value.is_contiguous()" in failed[0].hint


@pytest.mark.parametrize("mistake", ["refusal_misses_masks_inside_a_tuple", "refusal_refuses_every_tensor_index"])
def test_index_refusal_mistakes_are_named_by_their_hints(mistake):
    """x[:, mask] must be refused and x[int_tensor] recorded, as Dynamo does."""
    fn = wrong(REFUSAL, mistake)
    report = REFUSAL.run(fn)
    hint = next(m.hint for m in mutants_for(REFUSAL.id) if m.name == mistake)
    assert report.failed and any(o.hint == hint for o in report.failed)


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_public_cases_reject_every_mutant_and_show_it_its_own_hint(exercise):
    """Issue 20's rules: a tick in the notebook means full marks (the public cases reject every mutant not
    marked hidden-only), and one mistake gets one diagnosis (its own hint, on its first failing group)."""
    from mutant_rules import problems
    assert problems(EXERCISES[exercise]) == []


@pytest.mark.parametrize("exercise, name, edits, mistake", [
    (CAPTURE, "capture", (("if id(tensor) in self.names:", "if False:"),), "capture_bakes_parameters_in"),
    (INPUT_GUARD, "input_guard", (("if is_now != was:", 'if field != "dtype" and is_now != was:'),),
     "guard_ignores_dtype"),
    (REFUSAL, "refusal", (('if op == "getitem" and len(args) > 1:', "if False:"),), "refusal_misses_boolean_masks"),
])
def test_a_mistake_written_into_the_solution_cell_is_named_by_its_mutants_hint(exercise, name, edits, mistake):
    """The mutants are patches of the library's stages, the learner writes the notebook's: the same
    mistake made in the solution cell still gets that mutant's hint."""
    report = exercise.run(solution("07_graph_capture", name, edits))
    hint = next(m.hint for m in mutants_for(exercise.id) if m.name == mistake)
    assert report.failed and report.failed[0].hint == hint


def test_a_program_takes_a_python_number_by_name_and_a_model_program_is_built_afresh():
    number_first = Program(("v0 = x * k", "return v0.sin()"), ("k", "x"), numbers=(("k", 3.0),))
    x = torch.randn(3, 4, dtype=torch.float64)
    assert number_first.arguments(x)[0] == 3.0 and number_first.arguments(x)[1] is x
    torch.testing.assert_close(number_first(*number_first.arguments(x)), (x * 3.0).sin())
    again = pickle.loads(pickle.dumps(number_first))  # its function made already: pickled without it
    torch.testing.assert_close(again(*again.arguments(x)), (x * 3.0).sin())
    mlp = zoo_program("mlp", (4, 8, 2), 0)
    first, second = mlp.build("cpu"), mlp.build("cpu")
    assert first is not second and not first.training and first.fc1.weight.dtype == torch.float64
    torch.testing.assert_close(first.fc1.weight, second.fc1.weight)  # the same seed: the same weights


def test_random_programs_are_drawn_by_the_seed_with_in_place_and_several_result_steps():
    bodies = [random_program(torch.Generator().manual_seed(seed)).body for seed in range(30)]
    assert bodies[3] == random_program(torch.Generator().manual_seed(3)).body and len(set(bodies)) == 30
    lines = [line for body in bodies for line in body]
    assert any(line.endswith(("_()", "+= 1.5", ".mul_(0.5)")) for line in lines)
    assert any(".chunk(2, dim=-1)" in line for line in lines)
    numbered = random_program(torch.Generator().manual_seed(0), k=0.5)
    assert numbered.params == ("k", "x") and numbered.body[0] == "x = x * k"
