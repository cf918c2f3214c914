"""Notebook 09's checks: correct stages pass, the library's own stage is out of reach, the learner's
function really runs inside tensorcraft.compile, and the legality tests name the broken rule."""
import pytest
import torch

from grader.checks import nb09_fusion_memory as checks
from grader.checks.compare import mismatch
from grader.checks.nb09_fusion_memory import EXERCISES
from grader.mutants import mutants_for
from solution_cells import solution
from tensorcraft.compiler.passes import fusion
from tensorcraft.compiler.passes.memory_plan import plan_memory, storage_lifetimes

GROUP, LIFETIMES, PLAN = EXERCISES["group_fusible"], EXERCISES["storage_lifetimes"], EXERCISES["plan_memory"]
CORRECT = {name: solution("09_fusion_memory", f"my_{name}") for name in EXERCISES}  # the notebook's own answers
WRONG = {m.name: m.fn for e in EXERCISES.values() for m in mutants_for(e.id)}


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_a_correct_stage_passes_public_and_hidden(name):
    exercise = EXERCISES[name]
    assert not exercise.run(CORRECT[name]).failed
    assert not exercise.run(CORRECT[name], hidden=True, seed=5).failed


def test_the_hidden_cases_change_with_the_seed():
    def notes(seed):
        return [c.note for g in GROUP.hidden(torch.Generator().manual_seed(seed)) for c in g.cases]
    assert notes(1) != notes(2)


@pytest.mark.parametrize("name, library", [
    ("group_fusible", lambda g: fusion.group_fusible.library(g, recompute=False)),
    ("storage_lifetimes", lambda g: storage_lifetimes.library(g)),
    ("plan_memory", lambda g: plan_memory.library(g)),
])
def test_delegating_to_the_librarys_stage_is_refused(name, library):
    report = EXERCISES[name].run(library)
    assert report.failed and "asks you to do without" in report.failed[0].detail


def test_calling_the_stage_itself_recurses_and_is_explained():
    report = PLAN.run(lambda graph: plan_memory(graph))
    assert report.failed and "calls the stage plan_memory itself" in report.failed[0].hint


def test_the_learners_grouping_is_what_the_compiler_fuses():
    calls = []

    def spy(graph):
        calls.append(len(graph))
        return []  # fuse nothing: legal, the same results, more operations
    program, inputs, target = GROUP.public()[0].cases[0].args
    out, ops = GROUP.call(spy, program, inputs, target)
    assert calls and ops != f"at most {target} ops run"
    torch.testing.assert_close(out, program.eager(*inputs))


def test_a_grouping_that_fuses_more_than_the_rules_is_accepted_when_legal():
    """Sideways fusion (two chains that read the same input, then their sum) beats the rules' count."""
    program = checks.program(("p = torch.tanh(x) * 2.0", "q = torch.sin(x) + 1.0", "return p * q"))
    g = torch.Generator().manual_seed(0)
    case = checks._grouping_case(program, g)

    def everything(graph):
        group = fusion.Group(0, tuple(graph.placeholders[0].shape), torch.float32, torch.device("cpu"))
        group.members = [n for n in graph.nodes if fusion.classify(n) is not None]
        return [group]
    expected = GROUP.reference(*case.args)
    got = GROUP.call(everything, *case.args)
    assert got[1] == f"at most {case.args[2]} ops run" and mismatch(expected, got) is None


def _graph(program):
    inputs = program.inputs(torch.Generator().manual_seed(0))
    return checks._compiled(program, inputs)[1], inputs


def test_the_legality_test_names_each_broken_rule():
    from tensorcraft.compiler.capture import capture
    cyclic = capture(checks.CYCLE.fn, checks.CYCLE.inputs(torch.Generator().manual_seed(0))).graph
    with pytest.raises(checks.FusionCycle, match="tanh .* -> matmul .* -> mul"):
        checks.check_groups(cyclic, WRONG["fuses_through_an_opaque_op"](cyclic))
    rows = capture(checks.ROWS.fn, checks.ROWS.inputs(torch.Generator().manual_seed(0))).graph
    with pytest.raises(checks.ReductionReadInItsGroup, match="reads sum"):
        checks.check_groups(rows, WRONG["fuses_across_a_reduction"](rows))
    side = capture(checks.SIDE.fn, checks.SIDE.inputs(torch.Generator().manual_seed(0))).graph
    with pytest.raises(checks.ReaderBeforeKernel, match="matmul"):
        checks.check_groups(side, WRONG["fuses_through_an_opaque_op"](side))
    with pytest.raises(checks.OpaqueOpFused, match="matmul"):
        checks.check_groups(side, [fusion.Group(0, (4, 6), torch.float32, torch.device("cpu"),
                                                [n for n in side.nodes if n.op in ("tanh", "matmul")])])
    legal = fusion.group_fusible.library(cyclic, recompute=False)
    assert checks.check_groups(cyclic, legal) == legal


def test_the_plan_test_catches_reuse_at_the_last_use_itself():
    graph, _ = _graph(checks.ROWS_THEN_MORE)
    with pytest.raises(checks.LiveBufferReused, match="at that very step"):
        checks.check_plan(graph, WRONG["reuses_at_the_last_use_itself"](graph))
    checks.check_plan(graph, plan_memory.library(graph))  # the rule with a strict < is safe


@pytest.mark.parametrize("seed", range(6))
def test_fewest_slots_is_what_greedy_reuse_reaches_on_random_programs(seed):
    """The sweep (most values alive at once) and the library's greedy planner are independent ways
    to the same number: interval graphs are coloured optimally by greedy in order of start."""
    program = checks.random_program(torch.Generator().manual_seed(seed), 10)
    graph, inputs = _graph(program)
    plan = plan_memory.library(graph)
    fewest = checks.fewest_slots(graph)
    for (dtype, device), sizes in fewest.items():
        assert len(sizes) == sum(1 for s in plan.slots if s.dtype == dtype and torch.device(s.device) == device)
    torch.testing.assert_close(checks._compiled(program, inputs)[0], program.eager(*inputs))


def test_every_exercise_has_the_mutants_the_brief_names():
    names = {m.name for e in EXERCISES.values() for m in mutants_for(e.id)}
    assert {"fuses_across_a_reduction", "fuses_through_an_opaque_op", "reuses_at_the_last_use_itself",
            "ignores_the_dtype", "ignores_the_size", "ignores_views"} <= names


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_public_cases_reject_every_mutant_and_show_it_its_own_hint(exercise):
    """Issue 20's rules: a tick in the notebook means full marks (the public cases reject every mutant not
    marked hidden-only), and one mistake gets one diagnosis (its own hint, on its first failing group)."""
    from mutant_rules import problems
    assert problems(EXERCISES[exercise]) == []
