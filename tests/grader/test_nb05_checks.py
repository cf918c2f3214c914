"""Notebook 05's checks: the learner's stages run inside tensorcraft's pipeline, and shortcuts are caught."""
import einops
import pytest

import tensorcraft as tc
from tensorcraft import stages
from grader.checks import nb05_rearrange as checks
from tensorcraft.einops import pattern, recipe
from tensorcraft.einops.ops import rearrange as library_rearrange


LIBRARY_REARRANGE = library_rearrange.library  # the undecorated function: no tripwire watches it


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


@pytest.mark.parametrize("exercise, library", [(checks.PARSE_EXPRESSION, pattern.parse_expression.library),
                                               (checks.MAKE_PLAN, recipe.make_plan.library)])
def test_a_stage_exercise_runs_the_learners_stage_inside_the_pipeline(exercise, library):
    log = []
    report = exercise.run(counting(library, log))
    assert not report.failed, report.text()
    pipeline_cases = sum(len(g.cases) for g in exercise.public() if "substitute" in g.title)
    assert len(log) >= pipeline_cases > 0


def test_the_rearrange_check_runs_the_learners_function_inside_the_layer():
    log = []
    rearrange = counting(LIBRARY_REARRANGE, log)  # a stand-in for a correct answer
    layer_cases = [case.args[1] for group in checks.REARRANGE.public() for case in group.cases
                   if checks.LAYER in case.args]
    assert not checks.REARRANGE.run(rearrange).failed
    assert set(layer_cases) <= set(log)


@pytest.mark.parametrize("delegate", [
    lambda x, p, **n: einops.rearrange(x, p, **n),
    lambda x, p, **n: tc.rearrange(x, p, **n),
    lambda x, p, **n: library_rearrange(x, p, **n),
])
def test_delegating_to_einops_or_tensorcraft_fails_every_group(delegate):
    report = checks.REARRANGE.run(delegate)
    ran = [outcome for outcome in report.outcomes if outcome.device == "cpu"]
    assert ran and len(report.failed) == len(ran)
    assert "asks you to do without" in report.text()


def test_an_einops_parse_is_compared_with_einops_own_parser():
    assert checks._einops_parse("b (h 2) ... 1") == (("b",), ("h", checks.Anonymous(2)), "...", ())
    assert checks._ours(pattern.parse_expression("b (h 2) ... 1")) == checks._einops_parse("b (h 2) ... 1")
