"""Random straight-line torch programs for differential tests of the compiler's passes.

A program is a list of steps over a growing list of values (x: [a, b], bias: [b], w: [b, b]);
`as_function` turns it into a plain Python function that eager torch, fx.symbolic_trace and
our capture can all run.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

UNARY = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu, "neg": torch.neg,
         "sin": torch.sin, "abs": torch.abs}
BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum}
REDUCE = {"sum": lambda v: v.sum(-1, keepdim=True), "mean": lambda v: v.mean(-1, keepdim=True),
          "amax": lambda v: v.amax(-1, keepdim=True)}
COMPOSITE = {"softmax": lambda v: v.softmax(-1), "layer_norm": lambda v: F.layer_norm(v, (v.shape[-1],)),
             "log_softmax": lambda v: F.log_softmax(v, -1)}


@st.composite
def programs(draw, max_steps: int = 10, elementwise_only: bool = False):
    """(steps, outputs): each step is (kind, name, operand indices, scalar)."""
    steps = []
    n_values = 3  # x, bias, w
    full = [0]    # indices of values with the full [a, b] shape
    kinds = ["unary", "binary", "scalar", "matmul"] + ([] if elementwise_only else ["reduce", "composite", "repeat"])
    for _ in range(draw(st.integers(1, max_steps))):
        kind = draw(st.sampled_from(kinds))
        repeatable = [s for s in steps if s[0] != "reduce"]
        if kind == "repeat" and not repeatable:
            continue
        if kind == "repeat":
            steps.append(draw(st.sampled_from(repeatable)))
        elif kind == "unary":
            steps.append(("unary", draw(st.sampled_from(sorted(UNARY))), (draw(st.sampled_from(full)),), None))
        elif kind == "binary":
            other = draw(st.sampled_from(full + ([1] if not elementwise_only else [])))
            steps.append(("binary", draw(st.sampled_from(sorted(BINARY))), (draw(st.sampled_from(full)), other), None))
        elif kind == "scalar":
            steps.append(("scalar", draw(st.sampled_from(["add", "mul", "sub"])), (draw(st.sampled_from(full)),),
                          draw(st.sampled_from([0.5, 2.0, -1.0]))))
        elif kind == "matmul":
            steps.append(("matmul", "matmul", (draw(st.sampled_from(full)), 2), None))
        elif kind == "reduce":
            src = draw(st.sampled_from(full))
            steps.append(("reduce", draw(st.sampled_from(sorted(REDUCE))), (src,), None))
            # a reduced value [a, 1] is then broadcast back against a full value
            steps.append(("binary", draw(st.sampled_from(["sub", "mul", "add"])), (draw(st.sampled_from(full)), n_values), None))
            n_values += 1
            full.append(n_values)
            n_values += 1
            continue
        else:
            steps.append(("composite", draw(st.sampled_from(sorted(COMPOSITE))), (draw(st.sampled_from(full)),), None))
        full.append(n_values)
        n_values += 1
    outputs = sorted(set([n_values - 1] + draw(st.lists(st.sampled_from(full), max_size=2))))
    return steps, outputs


def as_function(program):
    steps, outputs = program

    def f(x, bias, w):
        values = [x, bias, w]
        for kind, name, operands, scalar in steps:
            args = [values[i] for i in operands]
            if kind == "unary":
                values.append(UNARY[name](*args))
            elif kind == "binary":
                values.append(BINARY[name](*args))
            elif kind == "scalar":
                values.append(BINARY[name](args[0], scalar))
            elif kind == "matmul":
                values.append(torch.tanh(args[0] @ args[1]))
            elif kind == "reduce":
                values.append(REDUCE[name](*args))
            else:
                values.append(COMPOSITE[name](*args))
        return tuple(values[i] for i in outputs)
    return f


def example_inputs(a: int = 3, b: int = 5, dtype=torch.float32, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    drawn = (torch.randn(a, b, generator=g, dtype=dtype, device="cpu"), torch.randn(b, generator=g, dtype=dtype, device="cpu"),
             torch.randn(b, b, generator=g, dtype=dtype, device="cpu") / b ** 0.5)
    return tuple(x.to(torch.get_default_device()) for x in drawn)   # the GPU in a native Triton test (conftest)
