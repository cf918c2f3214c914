"""The contract between the fusion pass and the kernel generators.

A `Kernel` is one fused group: straight-line elementwise code over a rectangular iteration space,
each output stored at every point or reduced over the last axis. It is described with plain Python
values (no torch graph, no fx), so that every generator (Python, C + OpenMP, Triton) reads the same
small thing, and a learner can write one by hand.

Calling convention of every compiled kernel: ``run(*inputs, *outputs)`` with torch tensors in the
order of ``Kernel.inputs`` then ``Kernel.outputs``; all contiguous, on one device, of the kernel's
dtype; outputs are preallocated by the caller (``Kernel.output_shape(o)``) and overwritten.
``evaluate`` below is the meaning of a kernel, written with torch ops: generators are tested
against it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

import torch

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


def evaluate(kernel: Kernel, *inputs: torch.Tensor) -> list[torch.Tensor]:
    """The meaning of a kernel in torch ops: what every generated kernel must compute."""
    dtype = DTYPES[kernel.dtype]
    env: dict[str, torch.Tensor] = {}
    by_name = dict(zip((b.name for b in kernel.inputs), inputs))
    device = inputs[0].device if inputs else torch.device("cpu")
    for s in kernel.stmts:
        if s.op == "load":
            env[s.name] = by_name[s.args[0]].to(dtype).expand(kernel.shape)
        elif s.op == "const":
            env[s.name] = torch.full(kernel.shape, float(s.args[0]), dtype=dtype, device=device)
        elif s.op in UNARY:
            env[s.name] = UNARY[s.op](env[s.args[0]])
        else:
            env[s.name] = BINARY[s.op](env[s.args[0]], env[s.args[1]])
    results = []
    for o in kernel.outputs:
        value = env[o.value]
        results.append(REDUCTIONS[o.reduce](value) if o.reduce else value.contiguous())
    return results


class CompiledKernel(Protocol):
    """What a generator returns: callable as ``run(*inputs, *outputs)``; ``source`` is readable."""
    source: str

    def __call__(self, *tensors: torch.Tensor) -> None: ...
