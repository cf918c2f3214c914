"""View merging: a view of a view becomes one view of the original tensor.

``tc.rearrange`` and ``tc.einsum`` are written as reshape -> permute -> reshape, and code that
chains them leaves views of views in a captured graph: ``reshape(reshape(x, s1), s2)`` is
``reshape(x, s2)``, and ``permute(permute(x, p), q)`` is ``permute(x, [p[i] for i in q])``. Each
merge is one torch call fewer in the generated wrapper; the inner view goes when nothing else
reads it (dead-code elimination). A merged node looks into ``x`` (``aliases``): when the chain
made a copy the claim only keeps ``x`` alive longer, which is safe for the memory plan.
"""
from __future__ import annotations

from typing import Sequence

import torch

from ...stages import swappable
from ..ir import Graph, Node

RESHAPES = ("reshape", "view")


def permutation_of(node: Node) -> tuple[int, ...]:
    """The order of a recorded permute, whichever way it was spelled (``x.permute(0, 2, 1)``,
    ``x.permute((0, 2, 1))``, ``torch.permute(x, dims=...)``), with negative dims made positive."""
    dims: Sequence[int] = node.kwargs.get("dims", node.args[1:])
    if len(dims) == 1 and isinstance(dims[0], (tuple, list, torch.Size)):
        dims = dims[0]
    rank = len(dims)
    return tuple(d % rank for d in dims)


def _is_view_of_view(node: Node, ops: tuple[str, ...]) -> bool:
    return node.kind == "call" and node.op in ops and bool(node.args) and isinstance(node.args[0], Node) \
        and node.args[0].kind == "call" and node.args[0].op in ops


@swappable
def merge_views(graph: Graph) -> Graph:
    """Every reshape/view of a reshape/view, and every permute of a permute, reads the inner
    view's input instead (one call where there were two)."""
    graph = graph.copy()
    for node in list(graph.nodes):
        if _is_view_of_view(node, RESHAPES):
            source = node.args[0].args[0]
            merged = graph.create("call", "reshape", torch.Tensor.reshape, (source, tuple(node.shape)),
                                  shape=node.shape, dtype=node.dtype, device=node.device, aliases=source)
        elif _is_view_of_view(node, ("permute",)):
            inner = node.args[0]
            outer_order, inner_order = permutation_of(node), permutation_of(inner)
            source = inner.args[0]
            merged = graph.create("call", "permute", torch.Tensor.permute,
                                  (source, tuple(inner_order[i] for i in outer_order)),
                                  shape=node.shape, dtype=node.dtype, device=node.device, aliases=source)
        else:
            continue
        graph.replace(node, [merged])
    return graph
