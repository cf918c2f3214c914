"""Forbidden operations are caught however they are reached; numpy is caught where not allowed;
and a change to the grading code in the kernel is seen by the integrity fingerprint."""
import numpy as np
import pytest
import torch

from grader.kernel import integrity
from grader.checks import compare, exercise
from grader.checks.nb00_welcome import NORMALIZE_ROWS, OUTER
from grader.checks.ops import forbidden_ops
from grader.checks.tripwire import ForbiddenCallError, tripwires

_KEPT = {"outer": torch.outer}


class _Holder:
    method = None


_HOLDER = _Holder()
_HOLDER.method = torch.Tensor.outer

ROUTES = {
    "torch.ops.aten.outer": lambda a, b: torch.ops.aten.outer(a, b),
    "torch.ops.aten.outer.default": lambda a, b: torch.ops.aten.outer.default(a, b),
    "torch._C._VariableFunctions.outer": lambda a, b: torch._C._VariableFunctions.outer(a, b),
    "a reference kept in a dict": lambda a, b: _KEPT["outer"](a, b),
    "a method kept in an object": lambda a, b: _HOLDER.method(a, b),
    "torch.ops.aten.einsum": lambda a, b: torch.ops.aten.einsum("i,j->ij", [a, b]),
    "torch.tensordot": lambda a, b: torch.tensordot(a, b, dims=0),
    "np.outer on tensors": lambda a, b: torch.from_numpy(np.outer(a, b)),
    "np.outer on lists": lambda a, b: torch.tensor(np.outer(a.tolist(), b.tolist()), dtype=a.dtype),
    "switching the watch off": lambda a, b: (torch._C.DisableTorchFunction().__enter__(), torch.outer(a, b))[1],
}


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_to_a_forbidden_outer_product_fails(route):
    report = OUTER.run(ROUTES[route], cuda_available=False)
    assert report.failed, route
    assert any(word in report.failed[0].detail for word in ("outer", "einsum", "tensordot", "numpy", "DisableTorchFunction"))


def test_the_broadcasting_answers_pass_and_the_watch_ends_with_the_check():
    assert not OUTER.run(lambda a, b: a[:, None] * b[None, :], cuda_available=False).failed
    assert not OUTER.run(lambda a, b: a.unsqueeze(1) @ b.unsqueeze(0), cuda_available=False).failed
    assert not NORMALIZE_ROWS.run(lambda x: x / x.sum(dim=1, keepdim=True), cuda_available=False).failed
    a, b = torch.arange(3.0), torch.arange(2.0)
    assert torch.equal(torch.ops.aten.outer(a, b), a[:, None] * b[None, :])   # usable again
    assert np.outer(a, b).shape == (3, 2)


def test_an_operation_with_a_kernel_is_caught_at_dispatch_even_inside_another_function():
    a, b = torch.randn(2, 3), torch.randn(3, 4)
    with pytest.raises(ForbiddenCallError, match="'mm'"):
        with forbidden_ops(("mm",)):
            torch.tensordot(a, b, dims=1)     # tensordot's own kernel calls aten.mm
    with forbidden_ops(("mm",)):
        (a[:, :, None] * b[None, :, :]).sum(1)


def test_the_integrity_fingerprint_names_what_learner_code_changed(monkeypatch):
    _, digest = integrity.install("grader.checks.nb00_welcome")
    assert integrity.verify("n1") == ("n1", digest, [])
    with monkeypatch.context() as patch:
        patch.setattr(exercise, "mismatch", lambda expected, got: None)
        patch.setattr(exercise.Exercise, "check", lambda self, fn, hidden=False: None)
        patch.setattr(torch, "allclose", lambda *a, **k: True)
        patch.setattr(OUTER, "forbidden_ops", ())
        assert integrity.verify("n2")[0] == "n2"
        assert {"grader.checks.exercise.mismatch", "grader.checks.exercise.Exercise.check",
                "torch.allclose", "grader.checks.nb00_welcome.OUTER.forbidden_ops"} <= set(integrity.changes())
    with monkeypatch.context() as patch:
        patch.setitem(compare.TOLERANCES, "float32", (1.0, 1.0))
        assert integrity.verify("n3")[2] == ["grader.checks.compare.TOLERANCES"]
    with monkeypatch.context() as patch:
        patch.setattr("builtins.print", lambda *a, **k: None)
        assert integrity.verify("n4")[2] == ["builtins.print"]
    assert integrity.verify("n5") == ("n5", digest, [])


def test_a_class_whose_instance_is_copied_is_no_change_but_an_attribute_added_by_code_is(monkeypatch):
    """copy.copy of an instance makes copyreg cache ``__slotnames__`` on its class (notebook 07's
    OnMeta, copied with a case's arguments): Python's doing, not the learner's; the whole-course check
    scored 07's solution 7/10 for it."""
    import copy
    from grader.checks import nb07_graph_capture
    monkeypatch.delattr(nb07_graph_capture.OnMeta, "__slotnames__", raising=False)
    integrity.install("grader.checks.nb07_graph_capture")
    copy.copy(nb07_graph_capture.OnMeta(torch.zeros(1)))
    assert "__slotnames__" in vars(nb07_graph_capture.OnMeta) and integrity.changes() == []
    monkeypatch.setattr(nb07_graph_capture.OnMeta, "device", "cpu", raising=False)
    assert integrity.changes() == ["grader.checks.nb07_graph_capture.OnMeta"]


def test_torchs_own_rewrap_of_manual_seed_is_no_change_but_a_learners_is(monkeypatch):
    """Importing torch._dynamo (torch.compile does, at any cell) wraps torch.manual_seed in a
    lazy dynamo-disable wrapper: not the learner's doing. A wrapper around other code is."""
    original = torch.random.manual_seed
    monkeypatch.setattr(torch, "manual_seed", original)          # as before any dynamo import
    integrity.install("grader.checks.nb04_einsum_fast")
    monkeypatch.setattr(torch, "manual_seed", torch._disable_dynamo(original))
    assert integrity.changes() == []
    monkeypatch.setattr(torch, "manual_seed", torch._disable_dynamo(lambda seed: original(0)))
    assert integrity.changes() == ["torch.manual_seed"]
    fake = torch._disable_dynamo(lambda seed: original(0))
    fake.__wrapped__ = original                                  # a forged __wrapped__ is not believed
    monkeypatch.setattr(torch, "manual_seed", fake)
    assert integrity.changes() == ["torch.manual_seed"]


def test_the_library_stage_is_out_of_reach_under_any_name_while_the_pipeline_still_runs_it():
    """A stage's own function (``stage.library``), kept in a dict, found in the stage registry or in the
    stage's closure, fails while the check runs; the pipeline's own call to it (no substitute) runs."""
    import tensorcraft
    from tensorcraft import stages
    from tensorcraft.einstein import loops
    from grader.checks.nb03_einsum_loops import COUNT_ITERATIONS

    stage = loops.count_iterations
    original_code = stage.library.__code__
    kept = {"count": stage.library}
    cell = next(n for n, c in enumerate(stage.__closure__) if c.cell_contents is stage.library)
    routes = {"kept in a dict": lambda e, *s: kept["count"](e, *s),
              "the stage registry": lambda e, *s: stages._LIBRARY["count_iterations"](e, *s),
              "the stage's closure": lambda e, *s: stage.__closure__[cell].cell_contents(e, *s)}
    for route, fn in routes.items():
        report = COUNT_ITERATIONS.run(fn, cuda_available=False)
        assert report.failed and "the library's own count_iterations" in report.failed[0].detail, route
    a, b = torch.ones(2, 3), torch.ones(3, 4)
    with tripwires(("tensorcraft.einstein.loops.count_iterations.library",), "probe"):
        assert torch.equal(loops.einsum_by_definition("ij,jk->ik", a, b), a @ b)  # the pipeline's own call
        with tensorcraft.substitute(count_iterations=lambda e, *s: kept["count"](e, *s)):
            with pytest.raises(ForbiddenCallError, match="count_iterations"):
                loops.einsum_by_definition("ij,jk->ik", a, b)
    assert stage.library.__code__ is original_code and kept["count"]("ij,jk->ik", (2, 3), (3, 4)) == 24
