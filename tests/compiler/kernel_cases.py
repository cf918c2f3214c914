"""Hypothesis strategies for random Kernels, shared by the kernel generator tests (C, Triton).

A kernel is a random DAG of the ops in kernel.UNARY / kernel.BINARY over 1-3 inputs that broadcast
at random, with pointwise and last-axis-reduced outputs. Ops with a restricted domain get their
arguments moved into it by the statements that a careful user would write: log, sqrt, rsqrt, the
base of pow and every denominator see ``abs(v) + 0.5``, the exponent of pow sees ``tanh(v)``, exp
sees ``minimum(v, 4)``. So every value stays finite and a mismatch is a bug, not a rounding story.
"""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from tensorcraft.compiler.codegen.kernel import BINARY, DTYPES, REDUCTIONS, UNARY, Buffer, Kernel, Output, Stmt

POSITIVE_ARG = {"log", "sqrt", "rsqrt", "reciprocal"}
EXP_ARG = {"exp"}


class _Builder:
    def __init__(self) -> None:
        self.stmts: list[Stmt] = []

    def add(self, op: str, *args) -> str:
        name = f"t{len(self.stmts)}"
        self.stmts.append(Stmt(name, op, tuple(args)))
        return name

    def positive(self, v: str) -> str:
        return self.add("add", self.add("abs", v), self.add("const", 0.5))


@st.composite
def kernels(draw, max_rank: int = 3, max_dim: int = 5, max_ops: int = 8) -> Kernel:
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    rank = draw(st.integers(0, max_rank))
    shape = tuple(draw(st.integers(1, max_dim)) for _ in range(rank))
    n_inputs = draw(st.integers(1, 3))
    inputs = tuple(Buffer(f"in{i}", tuple(draw(st.sampled_from((n, 1))) for n in shape)) for i in range(n_inputs))
    b = _Builder()
    values = [b.add("load", buf.name) for buf in inputs]
    for _ in range(draw(st.integers(1, max_ops))):
        kind = draw(st.sampled_from(("unary", "binary", "unary", "binary", "const")))
        if kind == "const":
            values.append(b.add("const", draw(st.sampled_from((0.0, 1.0, -2.5, 0.1, 3.0)))))
            continue
        a = values[-1] if draw(st.booleans()) else draw(st.sampled_from(values))   # mostly a chain
        if kind == "unary":
            op = draw(st.sampled_from(sorted(UNARY)))
            if op in POSITIVE_ARG:
                a = b.positive(a)
            if op in EXP_ARG:
                a = b.add("minimum", a, b.add("const", 4.0))
            values.append(b.add(op, a))
        else:
            op = draw(st.sampled_from(sorted(BINARY)))
            c = draw(st.sampled_from(values))
            if op == "div":
                c = b.positive(c)
            if op == "pow":
                a, c = b.positive(a), b.add("tanh", c)
            values.append(b.add(op, a, c))
    # outputs: the last value and up to 2 others, each stored or (if there is an axis) reduced
    chosen = [values[-1], *draw(st.lists(st.sampled_from(values[:-1] or values), max_size=2, unique=True))]
    chosen = list(dict.fromkeys(chosen))
    reductions = sorted(REDUCTIONS) if rank else []
    outputs = tuple(Output(f"out{i}", v, draw(st.sampled_from([None, *reductions]))) for i, v in enumerate(chosen))
    return Kernel(f"k_{dtype}_{len(b.stmts)}", shape, inputs, tuple(b.stmts), outputs, dtype)


def compact_kernel(shape, input_shapes, ops, outputs, dtype="float32"):
    """A kernel from a compact description: loads of each input, then ops as (name, op, args)."""
    stmts = [Stmt(f"v{i}", "load", (f"x{i}",)) for i in range(len(input_shapes))]
    stmts += [Stmt(name, op, tuple(args)) for name, op, *args in ops]
    inputs = tuple(Buffer(f"x{i}", s) for i, s in enumerate(input_shapes))
    return Kernel("k", shape, inputs, tuple(stmts), tuple(Output(*o) for o in outputs), dtype)


def random_inputs(kernel: Kernel, seed: int, device: str = "cpu") -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    dtype = DTYPES[kernel.dtype]
    return [(torch.randn(b.shape, generator=gen, dtype=torch.float64) * 2).to(dtype).to(device)
            for b in kernel.inputs]


def empty_outputs(kernel: Kernel, device: str = "cpu") -> list[torch.Tensor]:
    """Outputs filled with NaN, so an element the kernel forgets to write shows up."""
    return [torch.full(kernel.output_shape(o), float("nan"), dtype=DTYPES[kernel.dtype], device=device)
            for o in kernel.outputs]


def assert_matches(kernel: Kernel, got: list[torch.Tensor], expected: list[torch.Tensor]) -> None:
    """Equal to dtype tolerance, relative to the size of the values involved (NaN equals NaN)."""
    rtol = 2e-5 if kernel.dtype == "float32" else 1e-11
    for o, g, e in zip(kernel.outputs, got, expected):
        g, e = g.cpu(), e.cpu()
        finite = e[torch.isfinite(e)]
        scale = max(1.0, float(finite.abs().max())) if finite.numel() else 1.0
        torch.testing.assert_close(g, e, rtol=rtol, atol=rtol * scale, equal_nan=True,
                                   msg=lambda m, o=o: f"output {o.name} of\n{kernel}\n{m}")
