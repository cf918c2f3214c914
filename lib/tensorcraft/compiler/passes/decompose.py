"""Decomposition: composite ops become the elementwise ops and reductions fusion can see.

    softmax(x, -1)      m = amax(x, -1, keepdim)  e = exp(x - m)  out = e / sum(e, -1, keepdim)
    log_softmax(x, -1)  s = x - amax(x)           out = s - log(sum(exp(s)))
    layer_norm(x, (D,), w, b, eps)
                        d = x - mean(x)  out = d * rsqrt(mean(d * d) + eps) * w + b

This is what Inductor does first (its "decompositions"): fewer, simpler ops, so that a
handful of kernels cover a softmax or a layer norm. It is not in the default pipeline: on the CPU,
torch's own softmax and layer_norm (one vectorised pass each) beat the three or four small kernels
they become here (``python -m benchmarks compile --model transformer``); ask for it by name. Only last-axis forms are rewritten, and
only in float32 / float64: for float16 and bfloat16, eager accumulates in float32, while the
decomposed ops would square and sum in 16 bits (a layer norm of values near 1000 overflows to
inf and returns zeros), so those are left to torch.
"""
from __future__ import annotations

from typing import Any

import torch

from ...stages import swappable
from ..ir import Graph, Node


def _arg(node: Node, index: int, name: str, default: Any = None) -> Any:
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


class _Emitter:
    """Creates the replacement nodes, with shapes derived from the input's."""

    def __init__(self, graph: Graph, like: Node) -> None:
        self.graph, self.like, self.nodes = graph, like, []

    def call(self, op: str, target, *args, reduced: bool = False, **kwargs) -> Node:
        shape = tuple(self.like.shape[:-1]) + (1,) if reduced else tuple(self.like.shape)
        node = self.graph.create("call", op, target, args, kwargs, shape=shape, dtype=self.like.dtype,
                                 device=self.like.device)
        self.nodes.append(node)
        return node


_FULL_PRECISION = (torch.float32, torch.float64)


def _last_axis(node: Node, dim: Any) -> bool:
    rank = len(node.shape or ())
    return isinstance(dim, int) and rank > 0 and dim in (-1, rank - 1)


def _softmax(graph: Graph, node: Node, log: bool) -> list[Node] | None:
    x, dim = node.args[0], _arg(node, 1, "dim")
    dtype = node.kwargs.get("dtype", node.args[2] if len(node.args) > 2 and not isinstance(node.args[2], int) else None)
    if not isinstance(x, Node) or not _last_axis(x, dim) or dtype is not None or x.dtype != node.dtype \
            or x.dtype not in _FULL_PRECISION:
        return None
    e = _Emitter(graph, x)
    m = e.call("amax", torch.amax, x, -1, reduced=True, keepdim=True)
    s = e.call("sub", torch.sub, x, m)
    ex = e.call("exp", torch.exp, s)
    z = e.call("sum", torch.sum, ex, -1, reduced=True, keepdim=True)
    if log:
        lz = e.call("log", torch.log, z, reduced=True)
        e.call("sub", torch.sub, s, lz)
    else:
        e.call("div", torch.div, ex, z)
    return e.nodes


def _layer_norm(graph: Graph, node: Node) -> list[Node] | None:
    x, shape = node.args[0], _arg(node, 1, "normalized_shape")
    weight, bias, eps = _arg(node, 2, "weight"), _arg(node, 3, "bias"), _arg(node, 4, "eps", 1e-5)
    if not isinstance(x, Node) or x.shape is None or len(tuple(shape)) != 1 or tuple(shape)[0] != x.shape[-1] \
            or x.dtype not in _FULL_PRECISION:
        return None
    e = _Emitter(graph, x)
    mu = e.call("mean", torch.mean, x, -1, reduced=True, keepdim=True)
    d = e.call("sub", torch.sub, x, mu)
    sq = e.call("mul", torch.mul, d, d)
    var = e.call("mean", torch.mean, sq, -1, reduced=True, keepdim=True)
    ve = e.call("add", torch.add, var, float(eps), reduced=True)
    r = e.call("rsqrt", torch.rsqrt, ve, reduced=True)
    y = e.call("mul", torch.mul, d, r)
    if weight is not None:
        y = e.call("mul", torch.mul, y, weight)
    if bias is not None:
        e.call("add", torch.add, y, bias)
    return e.nodes


@swappable
def decompose(graph: Graph) -> Graph:
    graph = graph.copy()
    for node in list(graph.nodes):
        replacement = None
        if node.kind == "call" and node.op in ("softmax", "log_softmax"):
            replacement = _softmax(graph, node, log=node.op == "log_softmax")
        elif node.kind == "call" and node.op == "layer_norm":
            replacement = _layer_norm(graph, node)
        if replacement is not None:
            graph.replace(node, replacement)
    return graph
