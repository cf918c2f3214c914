"""The data passed between the stages below ``ir``: what fusion makes for codegen, what the memory
planner makes for the wrapper.

    Kernel (with Buffer, Stmt, Output)   one fused group, made by ``passes/fusion``, read by every
                                         generator in ``codegen/``; the contract itself is described in
                                         ``codegen/kernel`` (its meaning: ``evaluate``)
    MemoryPlan (with Slot)               which values die where and which kernel outputs share slots,
                                         made by ``passes/memory_plan``, read by ``codegen/wrapper``

Plain values only, no behaviour beyond checking themselves: with them here, ``passes/`` and
``codegen/`` both import downwards (to this module and ``ir``), never each other.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from .ir import Node

# Elementwise ops a kernel may contain, with their meaning in torch. Generators map each name to
# their own language; an op missing from a generator is a bug in that generator.
UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "sin": torch.sin,
    "cos": torch.cos,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "gelu": lambda x: 0.5 * x * (1.0 + torch.erf(x * (1.0 / math.sqrt(2.0)))),  # exact (erf) form
    "silu": lambda x: x * torch.sigmoid(x),
    "erf": torch.erf,
    "reciprocal": torch.reciprocal,
}
BINARY: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "pow": torch.pow,
}
# Reductions over the last axis of the iteration space (keepdim: that axis becomes 1).
REDUCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sum": lambda v: v.sum(-1, keepdim=True),
    "mean": lambda v: v.mean(-1, keepdim=True),
    "max": lambda v: v.amax(-1, keepdim=True),
    "min": lambda v: v.amin(-1, keepdim=True),
}
DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass(frozen=True)
class Buffer:
    """A kernel input: same rank as the iteration space, each dim equal to it or 1 (broadcast)."""
    name: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Stmt:
    """``name = op(args)``. op is "load" (args: input name), "const" (args: a float),
    or a UNARY / BINARY op (args: names of earlier statements)."""
    name: str
    op: str
    args: tuple


@dataclass(frozen=True)
class Output:
    """Store ``value`` into buffer ``name``: at every point, or reduced over the last axis."""
    name: str
    value: str
    reduce: str | None = None


@dataclass(frozen=True)
class Kernel:
    name: str
    shape: tuple[int, ...]
    inputs: tuple[Buffer, ...]
    stmts: tuple[Stmt, ...]
    outputs: tuple[Output, ...]
    dtype: str = "float32"

    def __post_init__(self) -> None:
        validate(self)

    def output_shape(self, output: Output) -> tuple[int, ...]:
        if output.reduce is None:
            return self.shape
        return self.shape[:-1] + (1,)

    def __str__(self) -> str:
        lines = [f"kernel {self.name} over {list(self.shape)} ({self.dtype})"]
        lines += [f"  in  {b.name}{list(b.shape)}" for b in self.inputs]
        for s in self.stmts:
            args = ", ".join(str(a) for a in s.args)
            lines.append(f"  {s.name} = {s.op}({args})")
        for o in self.outputs:
            how = f"{o.reduce} over last axis of " if o.reduce else ""
            lines.append(f"  out {o.name} = {how}{o.value}")
        return "\n".join(lines)


def validate(kernel: Kernel) -> None:
    """Raise ValueError naming the statement at fault, so generators can trust what they read."""
    if kernel.dtype not in DTYPES:
        raise ValueError(f"kernel {kernel.name}: dtype {kernel.dtype!r} not in {sorted(DTYPES)}")
    inputs = {b.name: b for b in kernel.inputs}
    for b in kernel.inputs:
        if len(b.shape) != len(kernel.shape) or any(d not in (1, n) for d, n in zip(b.shape, kernel.shape)):
            raise ValueError(f"kernel {kernel.name}: input {b.name}{list(b.shape)} does not broadcast "
                             f"to the iteration space {list(kernel.shape)} with the same rank")
    defined: set[str] = set()
    for s in kernel.stmts:
        if s.name in defined or s.name in inputs:
            raise ValueError(f"kernel {kernel.name}: {s.name!r} is defined twice")
        if s.op == "load":
            if len(s.args) != 1 or s.args[0] not in inputs:
                raise ValueError(f"kernel {kernel.name}: {s.name} loads {s.args}, not one input name")
        elif s.op == "const":
            if len(s.args) != 1 or not isinstance(s.args[0], (int, float)):
                raise ValueError(f"kernel {kernel.name}: {s.name} = const{s.args} needs one number")
        elif s.op in UNARY or s.op in BINARY:
            arity = 1 if s.op in UNARY else 2
            if len(s.args) != arity or any(a not in defined for a in s.args):
                raise ValueError(f"kernel {kernel.name}: {s.name} = {s.op}{s.args} needs {arity} "
                                 "earlier statement names")
        else:
            raise ValueError(f"kernel {kernel.name}: unknown op {s.op!r} in {s.name}")
        defined.add(s.name)
    if not kernel.outputs:
        raise ValueError(f"kernel {kernel.name}: no outputs")
    for o in kernel.outputs:
        if o.value not in defined:
            raise ValueError(f"kernel {kernel.name}: output {o.name} stores undefined value {o.value!r}")
        if o.reduce is not None and (o.reduce not in REDUCTIONS or not kernel.shape):
            raise ValueError(f"kernel {kernel.name}: output {o.name} has bad reduction {o.reduce!r}")


@dataclass
class Slot:
    numel: int
    dtype: torch.dtype
    device: torch.device

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize


@dataclass
class MemoryPlan:
    slot_of: dict[Node, int] = field(default_factory=dict)        # kernel-output node -> slot index
    fresh: set[Node] = field(default_factory=set)                 # kernel outputs allocated each call
    slots: list[Slot] = field(default_factory=list)
    last_use: dict[Node, int] = field(default_factory=dict)       # node -> index of its last reader
    frees_after: dict[int, list[Node]] = field(default_factory=dict)  # node index -> values to delete
    unplanned_bytes: int = 0      # every intermediate in its own buffer, none freed
    eager_peak_bytes: int = 0     # freed at last use, never reused (what eager achieves)
    planned_peak_bytes: int = 0   # with slots (held for the whole call) + everything else freed at last use

    def summary(self) -> str:
        return (f"memory plan: {len(self.slots)} reusable slot(s) ({_kb(sum(s.nbytes for s in self.slots))}), "
                f"{len(self.slot_of)} kernel buffer(s) placed in them; peak {_kb(self.planned_peak_bytes)} planned, "
                f"{_kb(self.eager_peak_bytes)} freeing at last use, {_kb(self.unplanned_bytes)} unplanned")


def _kb(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


def is_kernel_output(node: Node) -> bool:
    return node.kind == "call" and node.op == "getitem" and isinstance(node.args[0], Node) \
        and node.args[0].kind == "kernel"
