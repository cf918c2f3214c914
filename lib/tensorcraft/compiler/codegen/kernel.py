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

from typing import Protocol

import torch

from ..plans import BINARY, DTYPES, REDUCTIONS, UNARY, Buffer, Kernel, Output, Stmt, validate  # noqa: F401 - the data of the contract


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
