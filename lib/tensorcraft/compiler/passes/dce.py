"""Dead-code elimination: drop every node whose value no output needs.

Walks backwards from the output, marking what is read; everything unmarked goes. Placeholders
stay (they are the function's signature). Capture refuses impure calls, so every recorded call
is safe to drop. fx's counterpart: ``GraphModule.graph.eliminate_dead_code()``.
"""
from __future__ import annotations

from ..ir import Graph


def eliminate_dead_code(graph: Graph) -> Graph:
    graph = graph.copy()
    live = set()
    for node in reversed(graph.nodes):
        if node.kind in ("output", "placeholder") or id(node) in live:
            live.add(id(node))
            live.update(id(i) for i in node.inputs)
    graph.nodes = [n for n in graph.nodes if id(n) in live]
    return graph
