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

from ...stages import swappable
from ..ir import Graph, Node, returned_storages


def _key(value: Any) -> Any:
    """A hashable stand-in for an argument; raises TypeError for what cannot be compared."""
    if isinstance(value, Node):
        return ("node", id(value))
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _key(v)) for k, v in value.items())))
    if isinstance(value, slice):
        return ("slice", _key(value.start), _key(value.stop), _key(value.step))
    hash(value)
    return (type(value).__name__, value)


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
