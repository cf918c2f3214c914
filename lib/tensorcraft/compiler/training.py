"""Gradients for compiled code that contains fused kernels: forward runs the generated code, backward recomputes.

By default a graph compiled with gradients has no fused kernels (``passes.GRADIENT_PASSES``): its
wrapper calls torch for every op (attention as torch's scaled_dot_product_attention, which has a
backward of its own) and autograd records them as eager would. When fusion is asked for
anyway (``passes=[..., "fusion"]``), our kernels have no backward of their own, so the compiled
forward is wrapped in a `torch.autograd.Function`: its forward runs the generated code (no autograd
graph is built, no intermediates are kept); its backward re-runs the *captured* graph (before any
optimization) eagerly under autograd and asks autograd for the gradients. Gradients are eager's by
construction, at the cost of one extra forward in backward (a form of activation checkpointing).
No double backward.

Where a training step's time goes without fusion (``python -m benchmarks compile --model transformer``
prints it per kind of op): on the 4-block transformer, matmuls are about two thirds; the rest is
torch's own attention, GELU, layer norm and copies, plus autograd's bookkeeping per recorded op.
Inductor wins its ~10% on 2 threads there, by fusing that rest (layer norm with the residual add,
GELU's backward with the bias gradient's sum) under one backward of its own.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import torch

from .interpret import interpret
from .ir import Graph


class _Recompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, forward: Callable, graph: Graph, layout: tuple, *tensors: torch.Tensor):
        ctx.graph, ctx.layout = graph, layout
        ctx.save_for_backward(*tensors)
        outputs = tuple(forward(tensors))
        ctx.mark_non_differentiable(*[o for o in outputs if not o.dtype.is_floating_point and not o.is_complex()])
        return outputs

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grad_outputs):
        tensors = ctx.saved_tensors
        flat_template, tensor_positions, param_names = ctx.layout
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_(t.requires_grad) for t in tensors]
            n_inputs = len(tensor_positions)
            flat = list(flat_template)
            for pos, leaf in zip(tensor_positions, leaves[:n_inputs]):
                flat[pos] = leaf
            params = dict(zip(param_names, leaves[n_inputs:]))
            outputs = interpret(ctx.graph, flat, params)
            pairs = [(o, g) for o, g in zip(outputs, grad_outputs)
                     if isinstance(o, torch.Tensor) and o.requires_grad and g is not None]
            wanted = [leaf for leaf in leaves if leaf.requires_grad]
            grads = torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs], allow_unused=True) \
                if pairs and wanted else [None] * len(wanted)
        it = iter(grads)
        return (None, None, None, *[next(it) if leaf.requires_grad else None for leaf in leaves])


def need_grad(*groups: Iterable[Any]) -> bool:
    """Whether a call must record gradients (and so run through the autograd wrapper): grad mode is on
    and some input or module tensor requires grad. The one place this is decided, for both front-ends."""
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                           for group in groups for t in group)


def run_with_gradients(forward: Callable[[Sequence[torch.Tensor]], Sequence[Any]], captured: Graph,
                       flat_inputs: Sequence[Any], param_names: Sequence[str],
                       params: Sequence[torch.Tensor]) -> list[Any]:
    """Run ``forward`` (taking the flat tensors: inputs then module tensors) so that autograd can
    differentiate it through a recompute of ``captured``."""
    positions = tuple(i for i, v in enumerate(flat_inputs) if isinstance(v, torch.Tensor))
    template = tuple(None if isinstance(v, torch.Tensor) else v for v in flat_inputs)
    tensors = [flat_inputs[i] for i in positions] + list(params)
    outputs = _Recompute.apply(forward, captured, (template, positions, tuple(param_names)), *tensors)
    return list(outputs)
