"""Notebook 05's checks: the learner's stages run inside tensorcraft's pipeline, and shortcuts are caught."""
import einops
import pytest
import torch

import tensorcraft as tc
from tensorcraft import stages
from solution_cells import solution
from grader.checks import nb05_rearrange as checks
from grader.checks.report import FAIL, RAISED, GroupOutcome, flat
from grader.mutants import mutants_for
from tensorcraft.einops import pattern
from tensorcraft.einops.ops import rearrange as library_rearrange



def library_stage(name):
    """The solution notebook's answer for the stage ``name`` (the library's own function is out of reach
    while a check runs, under any name)."""
    return solution("05_rearrange", name)


correct_rearrange = solution("05_rearrange", "rearrange")   # a right answer to exercise 3


def counting(fn, log):
    """``fn`` recording its calls, raising einops' error type as the exercises ask (the library raises its own)."""
    def stage(*args, **kwargs):
        if stages.substitutions_active():  # called by the pipeline, not by the check directly
            log.append(args[1] if len(args) > 1 else args[0])
        try:
            return fn(*args, **kwargs)
        except tc.EinopsError as error:
            raise einops.EinopsError(str(error)) from None
    return stage


@pytest.mark.parametrize("exercise, library", [(checks.PARSE_EXPRESSION, library_stage("parse_expression")),
                                               (checks.MAKE_PLAN, library_stage("make_plan"))])
def test_a_stage_exercise_runs_the_learners_stage_inside_the_pipeline(exercise, library):
    log = []
    report = exercise.run(counting(library, log))
    assert not report.failed, report.text()
    pipeline_cases = sum(len(g.cases) for g in exercise.public() if "substitute" in g.title)
    assert len(log) >= pipeline_cases > 0


def test_the_rearrange_check_runs_the_learners_function_inside_the_layer():
    log = []
    rearrange = counting(correct_rearrange, log)  # a stand-in for a correct answer
    layer_cases = [case.args[1] for group in checks.REARRANGE.public() for case in group.cases
                   if checks.LAYER in case.args]
    report = checks.REARRANGE.run(rearrange)
    assert not report.failed, report.text()
    assert set(layer_cases) <= set(log)


@pytest.mark.parametrize("delegate", [
    lambda x, p, **n: einops.rearrange(x, p, **n),
    lambda x, p, **n: tc.rearrange(x, p, **n),
    lambda x, p, **n: library_rearrange(x, p, **n),
    lambda x, p, **n: tc.repeat(x, p, **n),  # a rearrange is a repeat that adds no axis
    lambda x, p, **n: tc.einops.ops.apply(x, p, "rearrange", n),
    lambda x, p, **n: library_rearrange.library(x, p, **n),
])
def test_delegating_to_einops_or_tensorcraft_fails_every_group(delegate):
    report = checks.REARRANGE.run(delegate)
    ran = [outcome for outcome in report.outcomes if outcome.device == "cpu"]
    assert ran and len(report.failed) == len(ran)
    assert "asks you to do without" in flat(report.text())


def test_an_einops_parse_is_compared_with_einops_own_parser():
    assert checks._einops_parse("b (h 2) ... 1") == (("b",), ("h", checks.Anonymous(2)), "...", ())
    assert checks._ours(pattern.parse_expression("b (h 2) ... 1")) == checks._einops_parse("b (h 2) ... 1")


def first_failure(exercise, fn):
    report = exercise.run(fn)
    assert report.failed, report.text()
    return report.failed[0]


def test_a_stages_library_function_held_in_advance_is_caught():
    held = pattern.parse_expression.library
    failure = first_failure(checks.PARSE_EXPRESSION, lambda text: held(text))
    assert "parse_expression.library" in failure.detail


def test_a_case_that_must_raise_names_the_rule_it_breaks():
    """A parser that accepts a zero-length anonymous axis: the hint states einops' rule, not the generic hint."""
    def parse(text):
        if text == "(h 0)":
            return pattern.Expression(text=text, dims=(("h", pattern.AnonymousAxis(0)),))
        return library_stage("parse_expression")(text)  # right everywhere else
    failure = first_failure(checks.PARSE_EXPRESSION, parse)
    assert "must raise" in failure.detail and "(h 0)" in failure.detail
    assert "positive" in failure.hint and failure.hint != checks.PARSE_EXPRESSION.hint


@pytest.mark.parametrize("raised, named", [(ValueError, "not ValueError"), (tc.EinopsError, "tensorcraft's")])
def test_the_wrong_error_type_is_named(raised, named):
    def rearrange(x, p, **n):
        try:
            return correct_rearrange(x, p, **n)
        except einops.EinopsError as error:
            raise raised(str(error)) from None
    failure = first_failure(checks.REARRANGE, rearrange)
    assert named in failure.hint and "einops.EinopsError" in failure.hint


@pytest.mark.parametrize("wrong, hint_says", [
    (lambda x, p, **n: torch.tensor(correct_rearrange(x, p, **n).tolist(), dtype=x.dtype), "autograd"),
    (lambda x, p, **n: correct_rearrange(x, p, **n) if x.ndim else x.reshape(*[]), "reshape(*shape)"),
    (lambda x, p, **n: correct_rearrange(x, p.replace("(h 2) c", "(h 1) c"), **n), "on either side"),
])
def test_wrong_answers_found_in_review_are_rejected_with_their_hint(wrong, hint_says):
    assert hint_says in first_failure(checks.REARRANGE, wrong).hint


def test_a_name_repeated_inside_a_group_is_rejected_in_public():
    parse = checks.EXERCISES["parse_expression"]
    wrong = next(m.fn for m in mutants_for(parse.id) if m.name == "parse_allows_duplicates_in_groups")
    report = parse.run(wrong, cuda_available=False)
    [first, *_] = report.failed
    assert "a (b a)" in first.detail and "inside a group too" in first.hint


def test_a_runtime_error_hint_names_view_only_when_the_message_says_so():
    def raised(message: str) -> GroupOutcome:
        return GroupOutcome("cpu", "g", 1, FAIL, f"case 1 of 1: inputs x raised RuntimeError: {message}",
                            case=1, reason=RAISED, error="RuntimeError")
    assert checks._specific_hint(checks.Group("g", []), raised("permute(): duplicate dims are not allowed.")) is None
    assert ".view" not in checks.RUNTIME_HINT and "invalid for input" not in checks.RUNTIME_HINT
    assert checks._specific_hint(checks.Group("g", []), raised("view size is not compatible with input tensor's "
                                                               "size and stride")) == checks.VIEW_HINT
