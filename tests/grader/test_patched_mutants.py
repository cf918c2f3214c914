"""Mutants written as patches of the library's own source (``grader.mutants.patched``): the library
stays the one copy of each right answer, a patch that no longer applies fails ``grader check`` naming
the mutant, and a patch that changes nothing is refused (it would be a second copy of the answer)."""
import pytest
import torch

from grader.instructor import selfcheck
from grader.checks.exercise import Case, Exercise, Group
from grader.mutants import REGISTRY, PatchError, patched
from tensorcraft import stages
from tensorcraft.compiler.passes import fusion, memory_plan
from tensorcraft.compiler.passes.memory_plan import storage_lifetimes

FAKE = "nb99_fake.patched"


@pytest.fixture(autouse=True)
def _forget_fake_mutants():
    yield
    REGISTRY.pop(FAKE, None)


def _graph():
    from tensorcraft.compiler.capture import capture
    def f(x):
        v = torch.tanh(x).reshape(-1)
        return v.sum() + 1.0
    return capture(f, (torch.randn(2, 3),)).graph


def test_a_patch_changes_the_reference_and_leaves_the_library_as_it_was():
    stage_before, library_before = memory_plan.storage_lifetimes, memory_plan.storage_lifetimes.library
    wrong = patched(FAKE, "ignores_views", storage_lifetimes,
                    ("lifetime[inp.storage] = max(lifetime[inp.storage], i)", "lifetime[inp] = max(lifetime[inp], i)"),
                    hint="views")
    assert wrong.problem is None and [m.name for m in REGISTRY[FAKE]] == ["ignores_views"]
    graph = _graph()
    right = storage_lifetimes(graph)
    theirs = wrong(graph)
    assert theirs != right   # the tanh's storage is read through its view later than the tanh itself
    assert memory_plan.storage_lifetimes is stage_before and storage_lifetimes.library is library_before
    assert stages._LIBRARY["storage_lifetimes"] is library_before   # @swappable was not run again
    assert storage_lifetimes(graph) == right


def test_a_patch_may_edit_a_helper_the_reference_calls():
    wrong = patched(FAKE, "fuses_through_sealed_groups", fusion.group_fusible,
                    (fusion._can_join, "if g.sealed or ", "if "), hint="sealed")
    assert wrong.problem is None
    assert fusion._can_join.__code__.co_filename.endswith("fusion.py")   # the module's own helper is untouched


@pytest.mark.parametrize("old, found", [("no such text", 0), ("lifetime[inp.storage]", 2)])
def test_a_patch_whose_old_text_is_not_there_exactly_once_fails_when_called_and_in_grader_check(monkeypatch, old, found):
    wrong = patched(FAKE, "stale", storage_lifetimes, (old, "x"), hint="stale")
    assert f"found {found} times" in wrong.problem
    with pytest.raises(PatchError, match="stale"):
        wrong(_graph())
    exercise = Exercise(id=FAKE, reference=torch.square, hint="square",
                        public=lambda: [Group("values", [Case((torch.tensor(2.0),))])],
                        hidden=lambda g: [Group("values", [Case((torch.tensor(3.0),))])])
    monkeypatch.setattr(selfcheck, "checks_module", lambda assignment: type("M", (), {"EXERCISES": {"patched": exercise}}))
    verdict = selfcheck.NotebookVerdict("99_fake")
    selfcheck.check_mutants("99_fake", verdict)
    assert any(p.startswith("mutant stale of nb99_fake.patched is a patch of "
                            "tensorcraft.compiler.passes.memory_plan.storage_lifetimes that no longer applies")
               for p in verdict.problems)


@pytest.mark.parametrize("old, new", [("end = len(graph.nodes)", "end = len(graph.nodes)"),
                                      ("end = len(graph.nodes)", "end = len( graph.nodes )  # same")])
def test_a_patch_that_changes_nothing_is_refused(old, new):
    """An identity patch would be a working copy of the answer, importable by a learner."""
    wrong = patched(FAKE, "identity", storage_lifetimes, (old, new), hint="none")
    assert "change nothing" in wrong.problem
    with pytest.raises(PatchError):
        wrong(_graph())


def test_a_plain_function_can_be_patched_too():
    from tensorcraft.compiler.capture import capture
    def f(x):
        t = torch.tanh(x)
        return t, t.sum() * 2.0
    graph = capture(f, (torch.randn(2, 3),)).graph
    wrong = patched(FAKE, "frees_returned_values", memory_plan.frees_at_last_use,
                    ("if i < len(graph.nodes) - 1 and node not in outputs:", "if True:"), hint="returned")
    assert wrong.problem is None
    tanh = next(n for n in graph.nodes if n.op == "tanh")
    _, right = memory_plan.frees_at_last_use(graph)
    _, theirs = wrong(graph)
    assert tanh not in {n for ns in right.values() for n in ns}
    assert tanh in {n for ns in theirs.values() for n in ns}


def test_a_patch_without_edits_is_refused():
    wrong = patched(FAKE, "unchanged", storage_lifetimes, hint="none", adapt=lambda edited, graph: edited(graph))
    assert "no edit" in wrong.problem


def test_a_helper_the_reference_does_not_call_cannot_be_edited():
    wrong = patched(FAKE, "elsewhere", storage_lifetimes, (memory_plan.allocates, "node.nbytes > 0", "True"), hint="x")
    assert "that storage_lifetimes calls" in wrong.problem


def test_a_patch_may_edit_a_class_the_reference_uses_and_leaves_unedited_classes_as_they_are():
    """capture's recorder is a class of capture's module: edited, it is recompiled in the mutant's own
    namespace; the module's class, and the unedited dataclass capture returns, stay the module's own."""
    from tensorcraft.compiler import capture as capture_module
    recorder_code = capture_module._Recorder.node_for.__code__
    wrong = patched(FAKE, "bakes_parameters", capture_module.capture,
                    (capture_module._Recorder, "qual = self.module_names.get(id(tensor))", "qual = None"), hint="params")
    assert wrong.problem is None
    layer = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    with torch.no_grad():   # a constant that requires grad is refused: the check captures without gradients
        right, theirs = capture_module.capture(layer, (x,), module=layer), wrong(layer, (x,), module=layer)
    assert isinstance(theirs, capture_module.Captured)
    assert [n.kind for n in right.graph.nodes].count("param") == 2
    assert [n.kind for n in theirs.graph.nodes].count("param") == 0 and len(theirs.constants) == 2
    assert capture_module._Recorder.node_for.__code__ is recorder_code
