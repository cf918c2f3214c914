"""tensorcraft.plan_cache: an lru_cache on the eager path, skipped under a substitute or a trace."""
import pytest

from tensorcraft import plan_cache as module
from tensorcraft import stages
from tensorcraft.plan_cache import cache_bypassed, plan_cache


def _counted():
    calls = []

    @plan_cache(maxsize=8)
    def plan(pattern, shape):
        calls.append((pattern, shape))
        return (pattern, shape)

    return plan, calls


def test_eager_calls_are_planned_once():
    plan, calls = _counted()
    assert plan("a b", (2, 3)) == plan("a b", (2, 3)) == ("a b", (2, 3))
    assert len(calls) == 1
    assert plan.cache_info().hits == 1
    assert plan.cached("a b", (2, 3)) == ("a b", (2, 3)) and len(calls) == 1
    plan.uncached("a b", (2, 3))
    assert len(calls) == 2


def test_unhashable_arguments_are_planned_without_the_cache():
    plan, calls = _counted()
    assert plan("a b", [2, 3]) == ("a b", [2, 3])
    plan("a b", [2, 3])
    assert len(calls) == 2 and plan.cache_info().currsize == 0


@stages.swappable(name="_test_plan_cache_stage")
def _stage():
    return "library"


def test_a_substitute_bypasses_the_cache():
    plan, calls = _counted()
    plan("a", (1,))
    assert not cache_bypassed()
    with stages.substitute(_test_plan_cache_stage=lambda: "learner"):
        assert cache_bypassed()
        plan("a", (1,))
        plan("a", (1,))
    assert len(calls) == 3 and plan.cache_info().hits == 0
    plan("a", (1,))
    assert len(calls) == 3


def test_a_trace_by_torch_compile_bypasses_the_cache(monkeypatch):
    """While Dynamo traces, torch.compiler.is_compiling() is True: no cache is read or filled."""
    plan, calls = _counted()
    monkeypatch.setattr(module, "_compiling", lambda: True)
    plan("a", (1,))
    plan("a", (1,))
    assert len(calls) == 2 and plan.cache_info().currsize == 0


def test_compiling_is_false_in_eager_code():
    pytest.importorskip("torch")
    assert module.compiling() is False and module._compiling() is False
