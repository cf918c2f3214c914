"""Notebook 08's checks: other correct answers pass, delegating to torch.fx / torch's fusion is refused, the
learner's pass is the one the compiler runs, and the wrong answers the issue names are rejected with their hints."""
import pytest
import torch
import torch.fx
from torch.nn.utils.fusion import fuse_conv_bn_weights

from grader.checks.nb08_graph_passes import EXERCISES
from grader.mutants import mutants_for
from tensorcraft.compiler.passes import constant_folding, cse, dce

DCE, CSE = EXERCISES["eliminate_dead_code"], EXERCISES["eliminate_common_subexpressions"]
FOLD, FOLD_CONV_BN = EXERCISES["fold_constants"], EXERCISES["fold_conv_bn"]


def dce_until_nothing_changes(graph):
    """A correct DCE written differently: remove unread calls, constants and params until none is left."""
    graph = graph.copy()
    while True:
        users = graph.users()
        dead = [n for n in graph.nodes if n.kind in ("call", "constant", "param") and not users[n]]
        if not dead:
            return graph
        graph.remove(dead)


def fold_conv_bn_with_rsqrt(weight, bias, running_mean, running_var, gamma, beta, eps):
    """A correct fold written differently: rsqrt and einsum."""
    scale = gamma * torch.rsqrt(running_var + eps)
    return torch.einsum("oihw,o->oihw", weight, scale), beta + scale * (bias - running_mean)


def test_answers_written_differently_pass_public_and_hidden():
    for exercise, answer in ((DCE, dce_until_nothing_changes), (FOLD_CONV_BN, fold_conv_bn_with_rsqrt)):
        assert not exercise.run(answer).failed
        assert not exercise.run(answer, hidden=True, seed=5).failed


def test_the_library_passes_pass_every_check():
    for exercise, answer in ((CSE, cse.eliminate_common_subexpressions.library),
                             (FOLD, constant_folding.fold_constants.library)):
        for seed in (0, 1):
            assert not exercise.run(answer, hidden=True, seed=seed).failed


def test_delegating_to_torch_fx_or_torch_is_refused():
    def fx_dce(graph):
        torch.fx.Graph().eliminate_dead_code()
        return graph

    report = DCE.run(fx_dce)
    assert report.failed and "asks you to do without" in report.failed[0].detail
    report = FOLD_CONV_BN.run(lambda w, b, m, v, g, beta, eps: fuse_conv_bn_weights(w, b, m, v, eps, g, beta))
    assert report.failed and "asks you to do without" in report.failed[0].detail
    report = DCE.run(lambda graph: dce.eliminate_dead_code(graph))
    assert report.failed and "asks you to do without" in report.failed[0].detail


def test_the_compiler_runs_the_learners_pass():
    seen = []

    def spy(graph):
        seen.append(len(graph))
        return dce.eliminate_dead_code.library(graph)

    case = DCE.public()[0].cases[0]
    DCE.call(spy, *case.args)
    assert len(seen) == 1
    calls = []

    def fold_spy(*args):
        calls.append(args[-1])
        return fold_conv_bn_with_rsqrt(*args)

    case = FOLD_CONV_BN.public()[0].cases[0]
    FOLD_CONV_BN.call(fold_spy, *case.args)
    assert len(calls) == 2  # once directly, once from inside the conv+batchnorm pass of tc.compile


def test_fold_conv_bn_cases_cover_both_dtypes_and_larger_eps():
    cases = [c for g in FOLD_CONV_BN.public() for c in g.cases]
    assert {c.args[0].dtype for c in cases} == {torch.float32, torch.float64}
    assert any(c.args[-1] >= 0.1 for c in cases) and any(not c.args[1].any() for c in cases)
    hidden = [c for g in FOLD_CONV_BN.hidden(torch.Generator().manual_seed(3)) for c in g.cases]
    assert {c.args[0].dtype for c in hidden} == {torch.float32, torch.float64}


def _mutant(exercise, name):
    return next(m for m in mutants_for(exercise.id) if m.name == name)


def test_the_named_wrong_answers_are_rejected_with_their_hints():
    named = [(DCE, ["dce_removes_the_output", "dce_one_sweep", "dce_drops_unread_placeholders"]),
             (CSE, ["cse_ignores_plain_arguments", "cse_ignores_keywords", "cse_merges_returned_values",
                    "cse_forgets_the_survivor_is_returned", "cse_compares_other_arguments_by_type"]),
             (FOLD, ["fold_when_any_input_is_known", "fold_ignores_frozen", "fold_returned_values",
                     "fold_bakes_parameters_unguarded"]),
             (FOLD_CONV_BN, ["fold_conv_bn_eps_outside_sqrt", "fold_conv_bn_forgets_the_conv_bias",
                            "fold_conv_bn_scales_the_input_axis", "fold_conv_bn_divides_by_var"])]
    crash = {"dce_removes_the_output", "fold_when_any_input_is_known"}  # the graph or the fold raises
    for exercise, names in named:
        for name in names:
            wrong = _mutant(exercise, name)
            failed = exercise.run(wrong.fn).failed
            assert failed, name
            if name not in crash:
                assert any(o.hint == wrong.hint for o in failed), (name, [o.hint for o in failed])


def test_hidden_cases_change_with_the_seed():
    def programs(seed):
        return [c.args[0] for g in DCE.hidden(torch.Generator().manual_seed(seed)) for c in g.cases]
    assert programs(1) != programs(2) and programs(1) == programs(1)


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_public_cases_reject_every_mutant_and_show_it_its_own_hint(exercise):
    """Issue 20's rules: a tick in the notebook means full marks (the public cases reject every mutant not
    marked hidden-only), and one mistake gets one diagnosis (its own hint, on its first failing group)."""
    from mutant_rules import problems
    assert problems(EXERCISES[exercise]) == []
