"""Dead-code elimination: drop every node whose value no output needs.

Walks backwards from the output, marking what is read; everything unmarked goes. Placeholders
stay (they are the function's signature). Capture refuses impure calls, so every recorded call
is safe to drop. fx's counterpart: ``GraphModule.graph.eliminate_dead_code()``.
"""
from __future__ import annotations

from ...stages import swappable
from ..ir import Graph, Node


@swappable
def eliminate_dead_code(graph: Graph) -> Graph:
    graph = graph.copy()
    live: set[Node] = set()
    for node in reversed(graph.nodes):
        if node.kind in ("output", "placeholder") or node in live:
            live.add(node)
            live.update(node.inputs)
    graph.remove([n for n in graph.nodes if n not in live])
    return graph
