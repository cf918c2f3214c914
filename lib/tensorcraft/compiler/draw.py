"""Draw a Graph as a picture: one box per node, arrows from inputs to readers, one row per depth.

Colours say what a node is: inputs and parameters (grey), torch calls (blue), fused kernels
(orange), constants (green), the output (black outline). matplotlib only.
"""
from __future__ import annotations

from typing import Any

from .ir import Graph, Node

COLOURS = {"placeholder": "#d9d9d9", "param": "#eeeeee", "constant": "#c7e9c0", "call": "#c6dbef",
           "kernel": "#fdd0a2", "output": "#ffffff"}


def layout(graph: Graph) -> dict[Node, tuple[float, float]]:
    """(x, y) per node: y is the longest path from an input (depth), x spreads nodes of one depth."""
    depth: dict[Node, int] = {}
    for node in graph.nodes:
        depth[node] = 1 + max((depth[i] for i in node.inputs), default=-1)
    rows: dict[int, list[Node]] = {}
    for node in graph.nodes:
        rows.setdefault(depth[node], []).append(node)
    positions = {}
    for d, nodes in rows.items():
        for k, node in enumerate(nodes):
            positions[node] = (k - (len(nodes) - 1) / 2, -d)
    return positions


def label(node: Node) -> str:
    if node.kind == "kernel":
        return f"{node.name}\n[{node.attrs.get('fused', '')}]"
    shape = "" if node.shape is None else f"\n{list(node.shape)}"
    op = "" if node.op in (node.kind, node.name) else f"\n{node.op}"
    return f"{node.name}{op}{shape}"


def draw_graph(graph: Graph, ax: Any = None, title: str | None = None) -> Any:
    """Draw ``graph`` on a matplotlib Axes (a new figure if None) and return the Axes."""
    import matplotlib.pyplot as plt

    positions = layout(graph)
    if ax is None:
        width = max(4.0, 2.2 * max(1, max(sum(1 for p in positions.values() if p[1] == y)
                                              for y in {p[1] for p in positions.values()})))
        _, ax = plt.subplots(figsize=(width, 1.1 * (1 + max(-p[1] for p in positions.values()))))
    for node in graph.nodes:
        x, y = positions[node]
        for i in node.inputs:
            xi, yi = positions[i]
            ax.annotate("", xy=(x, y + 0.25), xytext=(xi, yi - 0.25),
                        arrowprops={"arrowstyle": "->", "color": "#555555", "lw": 0.8})
        ax.text(x, y, label(node), ha="center", va="center", fontsize=7,
                bbox={"boxstyle": "round,pad=0.3", "fc": COLOURS[node.kind],
                      "ec": "black" if node.kind == "output" else "#777777"})
    xs = [p[0] for p in positions.values()]
    ys = [p[1] for p in positions.values()]
    ax.set_xlim(min(xs) - 1, max(xs) + 1)
    ax.set_ylim(min(ys) - 0.7, max(ys) + 0.7)
    ax.axis("off")
    if title:
        ax.set_title(title)
    return ax
