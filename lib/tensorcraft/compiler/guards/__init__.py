"""Guards: the conditions under which a compiled entry is still valid for a new call.

A compiled graph bakes in everything it saw: shapes, strides, dtypes, devices, non-tensor
arguments, whether gradients were needed, autocast and the default dtype, the module's training
flag, the Python values the program read besides its arguments, and (when parameters were folded
into constants) the parameters' values. Before reusing an entry, every one of those is compared;
the first mismatch is the reason for a recompile, and explain() shows it. Three parts:

    inputs   the flat arguments: ``describe_input`` remembers a ``TensorMeta`` per tensor, a value per
             plain argument, the object per other argument; ``check_input`` (a stage) compares one
    values   the Python values read besides the arguments (globals and closure cells of every function
             the call ran through, attributes reached through them, module state), each with the
             typed source it is read from; ``plain_values`` finds them and refuses what it cannot watch
    fast     all of it at once for the common call where nothing changed (``ValuesUnchanged``,
             ``params_unchanged``)

Version counters alone do not see every change: ``p.data.mul_(2)`` and batchnorm's
running-statistics update in training mode leave ``p._version`` as it was, so a graph that folded
parameters also keeps a copy of each one and compares values (one ``torch.equal`` per parameter per
call: the price of folding safely). On the 4-block transformer of benchmarks/compile.py the
checks cost tens of microseconds per call (``python -m benchmarks compile`` prints it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Sequence

import torch

from ...stages import swappable
from .fast import ValuesUnchanged, params_unchanged
from .inputs import (ObjectInput, PlainInput, TensorMeta, _difference, _input_matches, check_input,  # noqa: F401
                     describe_input, show_input)
from .values import (AttrSource, ClosureSource, GlobalSource, HooksSource, PlainValue, Source,  # noqa: F401
                     SubmodulesSource, Unguardable, plain_values)


@dataclass
class Guards:
    spec: Any                      # pytree structure of (args, kwargs)
    inputs: list[tuple]            # describe_input of each flat input
    names: list[str]               # readable name of each flat input (for messages)
    grad_enabled: bool
    training: bool | None          # the module's flag (None for functions)
    params: list[tuple[int, int, bool, int | None]]  # per module tensor: id, data_ptr, requires_grad, version if frozen
    param_names: list[str]
    constants: list[tuple[torch.Tensor, int]]   # baked tensors and the version they were baked at
    snapshots: list[torch.Tensor | None] | None = None  # copies of the module tensors whose values were baked in
    values: list[PlainValue] = field(default_factory=list)  # Python values read besides the arguments
    constant_snapshots: list[torch.Tensor] | None = None  # copies of the baked tensors, when some were folded
    autocast: tuple = ()           # autocast_state() at capture: it changes the dtypes every op returns
    default_dtype: torch.dtype = torch.float32  # torch.get_default_dtype() at capture

    def __post_init__(self) -> None:
        self.unchanged = ValuesUnchanged(self.values)
        # the module tensors' guards as one tuple per property, compared at once (check_guards)
        self._param_ids = tuple(pid for pid, *_ in self.params)
        self._param_ptrs = tuple(ptr for _, ptr, *_ in self.params)
        self._param_grads = tuple(rg for *_, rg, _ in self.params)
        self._param_versions = tuple(v for *_, v in self.params) \
            if any(v is not None for *_, v in self.params) else None

    def __str__(self) -> str:
        parts = [show_input(name, d) for name, d in zip(self.names, self.inputs)]
        parts.append(f"grad_enabled={self.grad_enabled}")
        if any(on for _, on, _ in self.autocast):
            parts.append(_show_autocast(self.autocast))
        if self.training is not None:
            parts.append(f"training={self.training}")
        if self.values:
            parts.append(f"{len(self.values)} Python values unchanged ({', '.join(v.name for v in self.values[:3])}"
                         f"{', ...' if len(self.values) > 3 else ''})")
        if self.snapshots and any(c is not None for c in self.snapshots):
            parts.append(f"{sum(c is not None for c in self.snapshots)} module tensors hold the values they were "
                         "folded with")
        elif any(v is not None for *_, v in self.params):
            parts.append(f"{len(self.params)} module tensors unchanged (frozen)")
        return "; ".join(parts)


@swappable
def check_guards(guards: Guards, flat: Sequence[Any], spec: Any, training: bool | None,
                 params: Sequence[torch.Tensor]) -> str | None:
    """None if the entry guarded by ``guards`` can run these inputs; otherwise the first failed guard,
    in words. ``params``: the module tensors the entry reads, in ``guards.param_names`` order."""
    if spec is not guards.spec and spec != guards.spec:
        return f"the structure of the arguments changed ({spec} != {guards.spec})"
    if torch.is_grad_enabled() != guards.grad_enabled:
        return f"grad mode changed: torch.is_grad_enabled() is {torch.is_grad_enabled()}, was {guards.grad_enabled}"
    if torch.get_default_dtype() != guards.default_dtype:  # torch.zeros(3) follows it
        return f"default dtype changed: {torch.get_default_dtype()}, was {guards.default_dtype}"
    if autocast_state() != guards.autocast:
        return f"autocast changed: {_show_autocast(autocast_state())}, was {_show_autocast(guards.autocast)}"
    if training != guards.training:
        return f"training mode changed: module.training is {training}, was {guards.training}"
    for name, value, expected in zip(guards.names, flat, guards.inputs):
        why = check_input(name, value, expected)
        if why is not None:
            return why
    if not params_unchanged(guards, params):  # then find the first difference, in words
        for name, tensor, (pid, ptr, requires_grad, version) in zip(guards.param_names, params, guards.params):
            if id(tensor) != pid:
                return f"module tensor {name} was replaced by another tensor"
            if tensor.data_ptr() != ptr:  # `.data = ...`, module.to(...): same object, new memory
                return f"module tensor {name} now holds different memory (.data was replaced or moved)"
            if tensor.requires_grad != requires_grad:
                return f"module tensor {name}: requires_grad is {tensor.requires_grad}, was {requires_grad}"
            if version is not None and tensor._version != version:
                return f"module tensor {name} changed in place since it was folded into constants"
    for name, tensor, copy in zip(guards.param_names, params, guards.snapshots or ()):
        if copy is not None and not torch.equal(tensor, copy):  # changed without a version bump (p.data, batchnorm stats)
            return f"module tensor {name} holds other values than when it was folded into constants"
    for tensor, version in guards.constants:
        if tensor._version != version:
            return f"a captured constant tensor{list(tensor.shape)} changed in place"
    for tensor, copy in zip((t for t, _ in guards.constants), guards.constant_snapshots or ()):
        if not torch.equal(tensor, copy):
            return f"a captured constant tensor{list(tensor.shape)} holds other values than when it was folded"
    for value in guards.values if not guards.unchanged() else guards.unchanged.rest:
        if value.items is None and value.read() is value.value:  # the same object: unchanged (the fast path)
            continue
        why = value.changed()
        if why is not None:
            return why
    return None


_AUTOCAST_DEVICES = ("cpu", "cuda")


def autocast_state() -> tuple:
    """(device, enabled, dtype) for each device type autocast knows: the dtypes ops return depend on it."""
    return tuple((d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _AUTOCAST_DEVICES)


def _show_autocast(state: tuple) -> str:
    on = [f"{d} {str(dtype).replace('torch.', '')}" for d, enabled, dtype in state if enabled]
    return f"autocast on ({', '.join(on)})" if on else "autocast off"


def build_guards(flat: Sequence[Any], spec: Any, names: Sequence[str], training: bool | None,
                 param_names: Sequence[str], params: Sequence[torch.Tensor], frozen: bool,
                 constants: Sequence[torch.Tensor] = (), baked: Collection[str] = (), folded_constants: bool = False,
                 values: Sequence[PlainValue] = ()) -> Guards:
    """Remember what this call looked like. ``baked``: the module tensors whose values the compiled code
    baked in; ``folded_constants``: it baked in values computed from the captured constants (the
    values of both are compared at every call)."""
    snapshots = [t.detach().clone() if name in baked else None for name, t in zip(param_names, params)] \
        if baked else None
    constant_snapshots = [t.detach().clone() for t in constants] if folded_constants else None
    return Guards(spec, [describe_input(v) for v in flat], list(names), torch.is_grad_enabled(), training,
                  [(id(t), t.data_ptr(), t.requires_grad, t._version if frozen else None) for t in params],
                  list(param_names),
                  [(t, t._version) for t in constants], snapshots, list(values), constant_snapshots,
                  autocast_state(), torch.get_default_dtype())
