"""The portable backend: a Kernel becomes readable Python that calls torch, one line per statement.

Not fast (each statement is a separate torch op, as in eager), but it runs everywhere and it
shows, line by line, what the C and Triton generators must compute.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .kernel import Kernel
from .literals import python_float
from ...stages import swappable

UNARY_SOURCE = {
    "neg": "torch.neg({})", "abs": "torch.abs({})", "exp": "torch.exp({})", "log": "torch.log({})",
    "sqrt": "torch.sqrt({})", "rsqrt": "torch.rsqrt({})", "sin": "torch.sin({})", "cos": "torch.cos({})",
    "tanh": "torch.tanh({})", "sigmoid": "torch.sigmoid({})", "relu": "torch.relu({})",
    "gelu": "torch.nn.functional.gelu({})", "silu": "torch.nn.functional.silu({})", "erf": "torch.erf({})",
    "reciprocal": "torch.reciprocal({})",
}
BINARY_SOURCE = {
    "add": "torch.add({}, {})", "sub": "torch.sub({}, {})", "mul": "torch.mul({}, {})",
    "div": "torch.div({}, {})", "maximum": "torch.maximum({}, {})", "minimum": "torch.minimum({}, {})",
    "pow": "torch.pow({}, {})",
}
REDUCTION_SOURCE = {"sum": "torch.sum", "mean": "torch.mean", "max": "torch.amax", "min": "torch.amin"}


@dataclass
class PythonKernel:
    """A compiled kernel: call it as ``run(*inputs, *outputs)``; ``source`` is what was executed."""
    kernel: Kernel
    source: str
    fn: Callable[..., None]

    def __call__(self, *tensors: torch.Tensor) -> None:
        self.fn(*tensors)


@swappable
def python_source(kernel: Kernel) -> str:
    """The Python source of ``kernel``: a function taking its inputs then its outputs."""
    params = [b.name for b in kernel.inputs] + [o.name for o in kernel.outputs]
    dtype = f"torch.{kernel.dtype}"
    device = params[len(kernel.inputs)]  # an output: always present, always on the kernel's device
    lines = [f"def {kernel.name}({', '.join(params)}):",
             f'    """{kernel.name}: {len(kernel.stmts)} statements over {list(kernel.shape)} ({kernel.dtype})."""']
    for s in kernel.stmts:
        if s.op == "load":
            expr = s.args[0]
        elif s.op == "const":
            expr = f"torch.full((), {python_float(s.args[0])}, dtype={dtype}, device={device}.device)"
        elif s.op in UNARY_SOURCE:
            expr = UNARY_SOURCE[s.op].format(*s.args)
        else:
            expr = BINARY_SOURCE[s.op].format(*s.args)
        lines.append(f"    {s.name} = {expr}")
    shape = tuple(kernel.shape)
    for o in kernel.outputs:
        if o.reduce is None:
            lines.append(f"    {o.name}.copy_({o.value})")
        else:
            lines.append(f"    {o.name}.copy_({REDUCTION_SOURCE[o.reduce]}({o.value}.expand({shape}), dim=-1, keepdim=True))")
    return "\n".join(lines) + "\n"


def compile_kernel(kernel: Kernel) -> PythonKernel:
    """Generate the source, exec it, and return the callable with its source attached."""
    source = python_source(kernel)
    namespace: dict = {"torch": torch}
    exec(compile(source, f"<tensorcraft kernel {kernel.name}>", "exec"), namespace)
    return PythonKernel(kernel, source, namespace[kernel.name])
