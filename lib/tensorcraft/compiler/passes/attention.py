"""Attention: ``softmax(q @ k^T * scale [masked_fill(mask, -inf)]) @ v`` becomes one fused call.

The scale may also be applied to the query first (``q * scale @ k^T``, as timm and nanoGPT write it):
it goes into the fused call's ``scale`` too, so the scaled copy of the query is never written.

Written out, attention is five torch calls that each write an [.., L, S] tensor of scores (the
product, the scaled scores, the masked scores, the weights). torch's
``scaled_dot_product_attention`` computes the same in one pass over blocks of keys, with its own
backward, so this pass helps inference and training alike. Inductor does the same
(``torch/_inductor/fx_passes/fuse_attention.py``). Matched only when each intermediate has this
chain as its only reader and none is returned, so nothing else needs the scores.

A query whose every key is masked gets NaN from eager's softmax but zeros from the fused kernel. A
mask baked into a frozen graph (the guards compare it by value) is checked here, once; any other
mask is checked at every call, by ``functional.attention``, which then runs the unfused ops.
"""
from __future__ import annotations

import math

import torch

from ...stages import swappable
from .. import functional
from ..ir import Graph, Node, returned_storages

sdpa = torch.nn.functional.scaled_dot_product_attention


def _only_reader(node: Node, reader: Node, users: dict[Node, list[Node]], returned: set[Node]) -> bool:
    return users[node] == [reader] and node not in returned and node.kind == "call"


def _softmax_input(node: Node) -> Node | None:
    """x when node is softmax(x) over the last axis, with no dtype change."""
    if node.op != "softmax" or node.shape is None or not node.args or not isinstance(node.args[0], Node):
        return None
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    extra = {k: v for k, v in node.kwargs.items() if k != "dim"}
    if len(node.args) > 2 or any(v is not None for k, v in extra.items() if k != "_stacklevel"):
        return None
    return node.args[0] if isinstance(dim, int) and dim in (-1, len(node.shape) - 1) else None


def _is_last_two_transpose(node: Node) -> bool:
    if node.op != "transpose" or len(node.args) != 3 or node.kwargs or node.shape is None:
        return False
    rank = len(node.shape)
    return {d % rank for d in node.args[1:] if isinstance(d, int)} == {rank - 2, rank - 1}


def _scaled(node: Node) -> tuple[Node, float] | None:
    """(x, factor) when node is ``x * factor``, ``factor * x`` or ``x / divisor`` by a plain number."""
    if node.op in ("mul", "rmul", "div") and len(node.args) == 2 and not node.kwargs \
            and isinstance(node.args[0], Node) and isinstance(node.args[1], (int, float)) \
            and not isinstance(node.args[1], bool) and node.args[1] != 0:
        return node.args[0], 1.0 / node.args[1] if node.op == "div" else float(node.args[1])
    return None


def match(p_v: Node, users: dict[Node, list[Node]], returned: set[Node]) -> dict | None:
    """The parts of an attention ending at the matmul ``p_v``, or None when it is not one."""
    if p_v.op != "matmul" or len(p_v.args) != 2 or p_v.kwargs or not all(isinstance(a, Node) for a in p_v.args):
        return None
    weights, v = p_v.args
    chain = [weights]
    if not _only_reader(weights, p_v, users, returned) or (scores := _softmax_input(weights)) is None:
        return None
    mask = None
    if scores.op == "masked_fill" and len(scores.args) == 3 and not scores.kwargs \
            and scores.args[2] == -math.inf and isinstance(scores.args[1], Node):
        if not _only_reader(scores, weights, users, returned):
            return None
        chain.append(scores)
        mask, reader, scores = scores.args[1], scores, scores.args[0]
    else:
        reader = weights
    scale = 1.0
    if (scaled := _scaled(scores)) is not None:
        if not _only_reader(scores, reader, users, returned):
            return None
        chain.append(scores)
        reader, (scores, scale) = scores, scaled
    q_k = scores
    if q_k.op != "matmul" or len(q_k.args) != 2 or q_k.kwargs or not _only_reader(q_k, reader, users, returned):
        return None
    q, k_t = q_k.args
    if not isinstance(q, Node) or not isinstance(k_t, Node) or not _is_last_two_transpose(k_t) \
            or not _only_reader(k_t, q_k, users, returned):
        return None
    k = k_t.args[0]
    chain += [q_k, k_t]
    if (scaled := _scaled(q)) is not None and _only_reader(q, q_k, users, returned) \
            and scaled[0].shape == q.shape and scaled[0].dtype == q.dtype:  # the query scaled first
        chain.append(q)
        q, scale = scaled[0], scale * scaled[1]
    tensors = (q, k, v)
    if any(t.shape is None or len(t.shape) < 3 or t.dtype is None or not t.dtype.is_floating_point
           or t.dtype != q.dtype or t.device != q.device for t in tensors):
        return None
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]) or q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        return None
    if mask is not None and (mask.dtype != torch.bool or mask.shape is None):
        return None
    return dict(q=q, k=k, v=v, mask=mask, scale=scale, chain=chain)


@swappable
def fuse_attention(graph: Graph) -> Graph:
    graph = graph.copy()
    users, returned = graph.users(), returned_storages(graph)
    for node in list(graph.nodes):
        found = match(node, users, returned)
        if found is None:
            continue
        q, k, v, mask, scale = (found[key] for key in ("q", "k", "v", "mask", "scale"))
        meta = dict(name="attention", shape=node.shape, dtype=node.dtype, device=node.device)
        new: list[Node] = []
        if mask is not None and mask.kind == "constant" and bool(mask.target.logical_not().any(-1).all()):
            # a baked mask (the guards compare it by value) that leaves every query a key: checked once, here
            new.append(graph.constant(mask.target.logical_not(), name=f"{mask.name}_keep"))
            mask = None
        if mask is None:
            kwargs = {"attn_mask": new[0]} if new else {}
            new.append(graph.create("call", "scaled_dot_product_attention", sdpa, (q, k, v), {**kwargs, "scale": scale},
                                    **meta))
        else:
            new.append(graph.create("call", "attention", functional.attention, (q, k, v, mask, scale), **meta))
        graph.replace(node, new)
        graph.remove(found["chain"])
        if new[0].kind == "constant" and not any(found["mask"] in n.inputs for n in graph.nodes):
            graph.remove([found["mask"]])  # replaced by its complement, and read by nothing else
        users = graph.users()
    return graph
