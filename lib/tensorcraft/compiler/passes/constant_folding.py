"""Constant folding: compute once, at compile time, every value that depends only on constants.

In a frozen graph (inference: no gradients, module in eval mode) parameters count as constants
too, so ``self.weight.t()`` or ``torch.arange(n) * scale`` become tensors baked into the code.
The guards then check the parameters' version counters: an optimizer step or load_state_dict
invalidates the entry instead of silently using stale values. fx's counterpart:
``torch.fx.experimental.const_fold.split_const_subgraphs``.

A value returned to the caller (or a view of it) is never folded: eager hands out a fresh tensor
at every call, and a folded one would be the same tensor every time, so a caller that updates
its result in place (``out.add_(1)``) would change what the next call returns.
"""
from __future__ import annotations

from typing import Any

import torch

from ...stages import swappable
from ..ir import Graph, Node, map_args, returned_storages


@swappable
def fold_constants(graph: Graph) -> Graph:
    graph = graph.copy()
    known: dict[Node, Any] = {}
    returned = returned_storages(graph)
    for node in list(graph.nodes):
        if node.kind == "constant":
            known[node] = node.target
        elif node.kind == "param" and graph.frozen:
            known[node] = node.attrs["value"]
        elif node.kind == "call" and node not in returned and all(i in known for i in node.inputs):
            with torch.no_grad():
                value = node.target(*map_args(node.args, known.__getitem__), **map_args(node.kwargs, known.__getitem__))
            known[node] = value
            if isinstance(value, torch.Tensor):
                for i in node.inputs:
                    if i.kind == "param":
                        graph.param_value(i)  # its value is baked in now
                folded = graph.constant(value, name=node.name)
                known[folded] = value
                graph.replace(node, [folded])
    return graph
