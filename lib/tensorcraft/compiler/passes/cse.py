"""Common-subexpression elimination: the same call on the same values is computed once.

Two call nodes are the same when their target and their arguments are the same (earlier nodes
by identity, everything else by value). Capture refuses impure calls (randomness, in-place
updates), so merging never changes the result. Two values that are both returned stay apart:
eager gives the caller two tensors, and one updated in place must not change the other.
fx's counterpart:
``torch.fx.passes.dialect.common.cse_pass.CSEPass``.
"""
from __future__ import annotations

from typing import Any

from ... import trees
from ...stages import swappable
from ..ir import Graph, Node, returned_storages


def _key(value: Any) -> Any:
    """A hashable stand-in for an argument (the structure, then each leaf: a node by identity, the
    rest by type and value); raises TypeError for what cannot be compared."""
    leaves, spec = trees.flatten(value)
    key = (spec, tuple(("node", id(v)) if isinstance(v, Node) else (type(v).__name__, v) for v in leaves))
    hash(key)
    return key


@swappable
def eliminate_common_subexpressions(graph: Graph) -> Graph:
    graph = graph.copy()
    seen: dict[Any, Node] = {}
    duplicates: list[Node] = []
    returned = returned_storages(graph)
    for node in graph.nodes:
        if node.kind == "call":
            try:
                key = (id(node.target), _key(node.args), _key(node.kwargs))
            except TypeError:
                key = None
        elif node.kind == "constant":
            key = ("constant", id(node.target))
        else:
            key = None
        if key is None:
            continue
        survivor = seen.setdefault(key, node)
        if survivor is node or (node in returned and survivor in returned):
            continue
        if node in returned:  # the survivor is returned now
            returned.add(survivor)
        graph.replace_all_uses(node, survivor)  # readers and views of the duplicate: the survivor's now
        duplicates.append(node)
    graph.remove(duplicates)
    return graph
