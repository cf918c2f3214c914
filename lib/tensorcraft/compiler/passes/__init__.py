"""Graph passes: each module holds one ``Graph -> Graph`` function, usable alone, swappable by name.

A pass works on ``graph.copy()`` and changes it only through the graph's methods (``replace``,
``replace_all_uses``, ``remove``, ``insert_before``), which keep inputs and views right (ir.py).

    dce.eliminate_dead_code              drop nodes nothing reads
    constant_folding.fold_constants      compute once what depends only on constants (and frozen params)
    cse.eliminate_common_subexpressions  one node for each repeated computation
    conv_bn.fold_conv_batchnorm          conv -> batchnorm (-> relu) into one conv, in eval mode
                                         (conv_bn.fold_conv_bn computes the folded weight and bias)
    decompose.decompose                  softmax / layer_norm into elementwise ops and reductions (by name only)
    views.merge_views                    a view of a view into one view of the original (by name only)
    attention.fuse_attention             matmul -> scale -> mask -> softmax -> matmul into one fused attention call
    fusion.fuse_elementwise              chains of elementwise ops (+ a last-axis reduction) into Kernels
                                         (fusion.group_fusible chooses the groups)
    memory_plan.plan_memory              (an analysis, not a pass) liveness and buffer reuse
"""
from __future__ import annotations

import importlib
from typing import Callable, Sequence

# name -> (module, function), in the order a pipeline runs them (DEFAULT_PASSES: a selection)
PASSES = {
    "conv_bn": ("conv_bn", "fold_conv_batchnorm"),
    "constant_folding": ("constant_folding", "fold_constants"),
    "decompose": ("decompose", "decompose"),
    "views": ("views", "merge_views"),
    "cse": ("cse", "eliminate_common_subexpressions"),
    "dce": ("dce", "eliminate_dead_code"),
    "attention": ("attention", "fuse_attention"),
    "fusion": ("fusion", "fuse_elementwise"),
}
# decompose is asked for by name: on CPU, torch's own softmax and layer_norm (one vectorised op each)
# beat the three or four small kernels they decompose into (benchmarks/compile.py --model transformer).
# attention runs after constant folding (a causal mask sliced from a buffer is a constant by then)
# and before fusion (which would otherwise take the scale into a kernel and break the pattern).
DEFAULT_PASSES = ["conv_bn", "constant_folding", "cse", "dce", "attention", "fusion"]
# With gradients our kernels would need a backward of their own: every op stays a torch call, so
# that autograd records it, and the gains are the flat generated wrapper (no module calls, no hooks)
# and fused attention (scaled_dot_product_attention has a backward of its own).
GRADIENT_PASSES = ["constant_folding", "cse", "dce", "attention"]


def get_pass(name: str) -> Callable:
    if name not in PASSES:
        raise ValueError(f"unknown pass {name!r}; known passes: {sorted(PASSES)}")
    module, function = PASSES[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


def resolve_passes(passes: Sequence[Callable | str]) -> list[Callable]:
    """Names become the pass functions; callables are used as they are."""
    return [get_pass(p) if isinstance(p, str) else p for p in passes]
