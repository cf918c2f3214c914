"""Conv + batchnorm (+ relu) folding, for inference.

In eval mode a batchnorm is an affine map per channel: ``y = (x - mean) / sqrt(var + eps) * g + b``.
Applied to a convolution's output it can be folded into the convolution's weights and bias:
``w' = w * s``, ``b' = (b - mean) * s + beta`` with ``s = g / sqrt(var + eps)``; one op less,
one intermediate less. That arithmetic is a stage of its own, ``fold_conv_bn``, which the pass calls
(a notebook swaps it with ``tensorcraft.substitute(fold_conv_bn=...)``). A ReLU that is the batchnorm's only reader joins too, applied in place
on the convolution's fresh output (``functional.conv2d_relu``). Needs constant weights and
statistics: only in a frozen graph. fx's counterpart: ``torch.fx.experimental.optimization.fuse``.
"""
from __future__ import annotations

import torch

from .. import functional
from ...stages import swappable
from ..ir import Graph, Node

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
        return graph.param_value(x)
    raise LookupError


@swappable
def fold_conv_bn(weight: torch.Tensor, bias: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor,
                 gamma: torch.Tensor, beta: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight ``[out, in, kh, kw]`` and bias ``[out]`` of one convolution that computes conv -> batchnorm
    (eval mode): each output channel's filter and bias scaled by ``gamma / sqrt(var + eps)``, the mean moved
    into the bias. ``bias`` is zeros where the conv has none; ``gamma``/``beta`` ones/zeros without affine."""
    scale = gamma / torch.sqrt(running_var + eps)
    return weight * scale.reshape(-1, *([1] * (weight.dim() - 1))), (bias - running_mean) * scale + beta


@swappable
def fold_conv_batchnorm(graph: Graph) -> Graph:
    graph = graph.copy()
    users = graph.users()
    for bn in list(graph.nodes):
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
            new_w, new_b = fold_conv_bn(w, cb if cb is not None else torch.zeros_like(mean), mean, var,
                                        gamma if gamma is not None else torch.ones_like(var),
                                        beta if beta is not None else torch.zeros_like(mean), b["eps"])
        wn, bnode = graph.constant(new_w, f"{conv.name}_folded_weight"), graph.constant(new_b, f"{conv.name}_folded_bias")
        rest = (c["stride"], c["padding"], c["dilation"], c["groups"])
        relu = users[bn][0] if len(users[bn]) == 1 else None
        if relu is not None and relu.op == "relu" and relu.kind == "call" and relu.args[:1] == (bn,) \
                and not any(relu.kwargs.values()) and len(relu.args) == 1:
            fused = graph.create("call", "conv2d_relu", functional.conv2d_relu, (c["input"], wn, bnode, *rest),
                                 name=relu.name, shape=relu.shape, dtype=relu.dtype, device=relu.device)
            graph.replace(relu, [wn, bnode, fused])
        else:
            fused = graph.create("call", "conv2d", torch.nn.functional.conv2d, (c["input"], wn, bnode, *rest),
                                 name=bn.name, shape=bn.shape, dtype=bn.dtype, device=bn.device)
            graph.replace(bn, [wn, bnode, fused])
        graph.remove([n for n in (bn, conv) if n in graph.nodes])
    return graph
