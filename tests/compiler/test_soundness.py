"""Soundness: a compiled call gives eager's answer on every call, or falls back loudly (issue 21).

Each case calls the compiled function several times while something it depends on changes between
calls (an argument inside a container built by the program, a Python value read by a helper it
calls, an attribute of an object reached through a global...) and compares every answer with eager.
A refusal is fine when explain() gives its reason; a stale answer is not.
"""
from __future__ import annotations

import collections
import dataclasses
import types

import pytest
import torch

import tensorcraft

from available_backends import backend_params

P = collections.namedtuple("P", "a b")


def _agree(compiled, fn, *args):
    torch.testing.assert_close(compiled(*args), fn(*args))


@pytest.mark.parametrize("backend", backend_params())
def test_a_namedtuple_built_inside_the_function_is_not_baked(backend):
    def f(x, y):
        return torch.stack(P(x * 2, y + 1)).sum(0)
    compiled = tensorcraft.compile(f, backend=backend)
    for _ in range(3):
        x, y = torch.randn(4), torch.randn(4)
        _agree(compiled, f, x, y)


@dataclasses.dataclass
class Pair:
    a: torch.Tensor
    b: torch.Tensor


class _Tuple(tuple):
    """A tuple subclass that is no namedtuple: no pytree knows how to rebuild it."""


def test_a_container_capture_cannot_map_is_refused_with_a_reason():
    def f(x, y):
        return torch.stack(_Tuple((x * 2, y))).sum(0)

    compiled = tensorcraft.compile(f, backend="python")
    for _ in range(3):
        _agree(compiled, f, torch.randn(3), torch.randn(3))
    assert compiled.stats.compiles == 0 and "a _Tuple passed to a torch call" in compiled.explain()


HELPER_SCALE = 2.0


def _helper(v):
    return v * HELPER_SCALE


def _calls_helper(x):
    return _helper(x) + 1


@pytest.mark.parametrize("backend", backend_params())
def test_a_global_read_by_a_called_helper_is_guarded(backend):
    global HELPER_SCALE
    compiled = tensorcraft.compile(_calls_helper, backend=backend)
    x = torch.randn(5)
    try:
        for scale in (2.0, 3.0, 3.0, -1.0):
            HELPER_SCALE = scale
            _agree(compiled, _calls_helper, x)
        assert "HELPER_SCALE" in compiled.explain()
    finally:
        HELPER_SCALE = 2.0


def _make_closure_helper(k):
    def helper(v):
        return v * k
    def set_k(value):
        nonlocal k
        k = value
    return helper, set_k


CLOSURE_HELPER, SET_K = _make_closure_helper(2.0)


def test_a_closure_cell_of_a_called_helper_is_guarded():
    def f(x):
        return CLOSURE_HELPER(x).sin()
    compiled = tensorcraft.compile(f, backend="python")
    x = torch.randn(5)
    try:
        for k in (2.0, 5.0, 5.0, 0.5):
            SET_K(k)
            _agree(compiled, f, x)
    finally:
        SET_K(2.0)


def test_a_function_argument_whose_closure_changes_is_guarded():
    helper, set_k = _make_closure_helper(2.0)

    def f(x, g):
        return g(x) + 1
    compiled = tensorcraft.compile(f, backend="python")
    x = torch.randn(5)
    for k in (2.0, 7.0, 7.0):
        set_k(k)
        _agree(compiled, f, x, helper)


CONFIG = types.SimpleNamespace(scale=2.0, shift=1.0)


@dataclasses.dataclass
class Settings:
    scale: float = 2.0


SETTINGS = Settings()


def test_attributes_of_a_global_object_are_guarded():
    def f(x):
        return x * CONFIG.scale + CONFIG.shift + SETTINGS.scale
    compiled = tensorcraft.compile(f, backend="python")
    x = torch.randn(5)
    try:
        for scale in (2.0, 4.0, 4.0):
            CONFIG.scale = scale
            SETTINGS.scale = scale + 1
            _agree(compiled, f, x)
    finally:
        CONFIG.scale, SETTINGS.scale = 2.0, 2.0


class _Scaler:
    def __init__(self):
        self.factor = 2.0

    def apply(self, v):
        return v * self.factor


SCALER = _Scaler()


def test_an_attribute_read_by_a_method_of_a_global_object_is_guarded():
    def f(x):
        return SCALER.apply(x) - 1
    compiled = tensorcraft.compile(f, backend="python")
    x = torch.randn(5)
    try:
        for factor in (2.0, 3.0, 3.0):
            SCALER.factor = factor
            _agree(compiled, f, x)
    finally:
        SCALER.factor = 2.0


def test_an_object_held_by_a_module_attribute_is_guarded_through_its_attributes():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.cfg = types.SimpleNamespace(scale=2.0)

        def forward(self, x):
            return self.lin(x) * self.cfg.scale

    model = M().eval()
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(2, 4)
    with torch.no_grad():
        for scale in (2.0, 3.0, 3.0):
            model.cfg.scale = scale
            torch.testing.assert_close(compiled(x), model(x))


def test_a_substituted_stage_is_not_taken_for_a_function_of_the_program():
    """Functions the recording itself calls (a substitute for a stage, a closure) are not the program's:
    their closure cells are not the program's state, and do not make the call run eagerly."""
    from tensorcraft.compiler.opnames import refusal as library_refusal
    verdicts = []

    def spy(op, args, kwargs):  # a closure over `verdicts`, as the grader's spies are
        verdicts.append(op)
        return library_refusal.library(op, args, kwargs)

    def f(x):
        return torch.relu(x) * 3 + x.mean()
    compiled = tensorcraft.compile(f, backend="python")
    with torch.no_grad(), tensorcraft.substitute(refusal=spy):
        _agree(compiled, f, torch.randn(4, 3))
    assert verdicts and compiled.stats.compiles == 1, compiled.explain()


def test_a_dataclass_argument_is_walked_and_its_tensors_are_inputs():
    """A dataclass argument is a pytree (registered by tensorcraft.trees): its tensors are placeholders,
    guarded like any input, and its plain fields by value."""
    def f(x, p):
        return x * p.a + p.b
    compiled = tensorcraft.compile(f, backend="python")
    x = torch.randn(3)
    for a, b in ((torch.randn(3), torch.randn(3)), (torch.randn(3), torch.randn(3)), (torch.randn(2, 3), 1.0)):
        _agree(compiled, f, x, Pair(a, b))
    assert compiled.stats.compiles >= 2


def test_slices_with_tensor_bounds_are_walked():
    def f(x):
        n = x.shape[0] // 2
        return x[1:n + 1] * 2
    compiled = tensorcraft.compile(f, backend="python")
    for rows in (6, 6, 8):
        _agree(compiled, f, torch.randn(rows, 3))


@dataclasses.dataclass
class _Program:
    fn: object

    def __call__(self, *inputs):
        return self.fn(*inputs)


def test_a_callable_object_is_followed_to_the_closure_it_calls():
    k = 2.0

    def network(x):
        return x * k
    program = _Program(network)
    compiled = tensorcraft.compile(program, backend="python")
    x = torch.randn(3)
    for k in (2.0, 3.0, 3.0):  # noqa: B007 - the closure reads it
        _agree(compiled, program, x)
    assert compiled.stats.compiles == 2, compiled.explain()
