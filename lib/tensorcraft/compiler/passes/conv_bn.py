"""Conv + batchnorm (+ relu) folding, for inference.

In eval mode a batchnorm is an affine map per channel: ``y = (x - mean) / sqrt(var + eps) * g + b``.
Applied to a convolution's output it can be folded into the convolution's weights and bias:
``w' = w * s``, ``b' = (b - mean) * s + beta`` with ``s = g / sqrt(var + eps)``; one op less,
one intermediate less. A ReLU that is the batchnorm's only reader joins too, applied in place
on the convolution's fresh output (``functional.conv2d_relu``). Needs constant weights and
statistics: only in a frozen graph. fx's counterpart: ``torch.fx.experimental.optimization.fuse``.
"""
from __future__ import annotations

import torch

from .. import functional
from ..ir import Graph, Node, map_args

_CONV_ARGS = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
_CONV_DEFAULTS = {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1}
_BN_ARGS = ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps")
_BN_DEFAULTS = {"weight": None, "bias": None, "training": False, "momentum": 0.1, "eps": 1e-5}


def _bind(node: Node, names: tuple, defaults: dict) -> dict:
    bound = dict(defaults)
    bound.update(zip(names, node.args))
    bound.update(node.kwargs)
    return bound


def _value(x, graph: Graph):
    """The tensor behind a constant (or, in a frozen graph, a parameter) node; None otherwise."""
    if x is None:
        return None
    if isinstance(x, Node) and x.kind == "constant":
        return x.target
    if isinstance(x, Node) and x.kind == "param" and graph.frozen:
        return x.attrs["value"]
    raise LookupError


def fold_conv_batchnorm(graph: Graph) -> Graph:
    graph = graph.copy()
    users = graph.users()
    replace: dict[Node, list[Node]] = {}  # batchnorm (or relu) node -> its replacement nodes
    drop: set[Node] = set()
    for bn in graph.nodes:
        if bn.kind != "call" or bn.op != "batch_norm":
            continue
        b = _bind(bn, _BN_ARGS, _BN_DEFAULTS)
        conv = b["input"]
        if b["training"] or not isinstance(conv, Node) or conv.op != "conv2d" or users[conv] != [bn]:
            continue
        c = _bind(conv, _CONV_ARGS, _CONV_DEFAULTS)
        if isinstance(c["padding"], str):
            continue
        try:
            w, cb = _value(c["weight"], graph), _value(c["bias"], graph)
            mean, var = _value(b["running_mean"], graph), _value(b["running_var"], graph)
            gamma, beta = _value(b["weight"], graph), _value(b["bias"], graph)
        except LookupError:
            continue  # weights or statistics are not constants here
        if mean is None or var is None:
            continue
        with torch.no_grad():
            scale = (gamma if gamma is not None else torch.ones_like(var)) / torch.sqrt(var + b["eps"])
            new_w = w * scale.reshape(-1, *([1] * (w.dim() - 1)))
            new_b = ((cb if cb is not None else torch.zeros_like(mean)) - mean) * scale \
                + (beta if beta is not None else torch.zeros_like(mean))
        wn = Node(graph.fresh_name(f"{conv.name}_folded_weight"), "constant", "constant", new_w, (), {},
                  tuple(new_w.shape), new_w.dtype, new_w.device)
        bnode = Node(graph.fresh_name(f"{conv.name}_folded_bias"), "constant", "constant", new_b, (), {},
                     tuple(new_b.shape), new_b.dtype, new_b.device)
        rest = (c["stride"], c["padding"], c["dilation"], c["groups"])
        relu = users[bn][0] if len(users[bn]) == 1 else None
        if relu is not None and relu.op == "relu" and relu.kind == "call" and relu.args[:1] == (bn,) \
                and not any(relu.kwargs.values()) and len(relu.args) == 1:
            fused = Node(relu.name, "call", "conv2d_relu", functional.conv2d_relu, (c["input"], wn, bnode, *rest), {},
                         relu.shape, relu.dtype, relu.device, {"aliases": None})
            replace[relu] = [wn, bnode, fused]
            drop.add(bn)
        else:
            fused = Node(bn.name, "call", "conv2d", torch.nn.functional.conv2d, (c["input"], wn, bnode, *rest), {},
                         bn.shape, bn.dtype, bn.device, {"aliases": None})
            replace[bn] = [wn, bnode, fused]
        drop.add(conv)
    new_nodes: list[Node] = []
    for node in graph.nodes:
        if node in replace:
            new_nodes += replace[node]
        elif node not in drop:
            new_nodes.append(node)
    renamed = {old: nodes[-1] for old, nodes in replace.items()}
    for node in new_nodes:
        node.args = map_args(node.args, lambda a: renamed.get(a, a))
        node.kwargs = map_args(node.kwargs, lambda a: renamed.get(a, a))
    graph.nodes = new_nodes
    return graph
