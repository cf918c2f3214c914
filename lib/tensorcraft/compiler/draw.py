"""Draw a Graph as a picture: one box per node, one arrow per edge from an input to its reader.

Graphviz's ``dot`` lays the graph out (inputs on top, each node one rank below its inputs, few
crossings, edges routed around the boxes), as torch.fx's drawer does; a graph of 40 nodes stays
readable. matplotlib then draws the boxes and the routed edges, so that a picture goes into any
Axes, next to others. Without Graphviz (Debian's ``graphviz`` package, which ``make setup``
installs, and the ``graphviz`` Python package) it says so in one line and draws one row per depth,
which is readable only for small graphs.

Colours say what a node is: inputs and parameters (grey), torch calls (blue), fused kernels
(orange), constants (green), the output (black outline).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .ir import Graph, Node

COLOURS = {"placeholder": "#d9d9d9", "param": "#eeeeee", "constant": "#c7e9c0", "call": "#c6dbef",
           "kernel": "#fdd0a2", "output": "#ffffff"}
FONT_SIZE = 7.0                  # points, at the layout's own size
FONT = "DejaVu Sans"             # matplotlib's default font: dot sizes the boxes for the text drawn in them
ROW_GAP, COLUMN_GAP = 66.0, 120.0  # points between rows and columns of the fallback drawing

_noticed = False                 # the fallback's notice is printed once per process


@dataclass
class Layout:
    """Where everything goes, in points, y pointing up (as both Graphviz and matplotlib have it)."""
    centres: dict[Node, tuple[float, float]]
    boxes: dict[Node, tuple[float, float]] = field(default_factory=dict)  # width, height; empty: sized by the text
    # one entry per edge (a node reading one input twice has two): input, reader, the points of the
    # line (cubic Bézier control points from Graphviz; two points, a straight line, in the fallback)
    # and the arrow's tip
    edges: list[tuple[Node, Node, list[tuple[float, float]], tuple[float, float]]] = field(default_factory=list)
    size: tuple[float, float] = (0.0, 0.0)
    engine: str = "dot"


def label(node: Node) -> str:
    if node.kind == "kernel":
        return f"{node.name}\n[{node.attrs.get('fused', '')}]"
    shape = "" if node.shape is None else f"\n{list(node.shape)}"
    op = "" if node.op in (node.kind, node.name) else f"\n{node.op}"
    return f"{node.name}{op}{shape}"


def _dot_source(graph: Graph) -> Any:
    import graphviz

    dot = graphviz.Digraph(graph_attr={"rankdir": "TB", "nodesep": "0.12", "ranksep": "0.28"},
                           node_attr={"shape": "box", "style": "rounded", "fontsize": str(FONT_SIZE),
                                      "fontname": FONT, "margin": "0.06,0.03", "width": "0.3", "height": "0.2"},
                           edge_attr={"arrowsize": "0.5"})
    ids = {node: f"n{k}" for k, node in enumerate(graph.nodes)}
    for node in graph.nodes:
        dot.node(ids[node], label(node).replace("\\", "\\\\").replace("\n", "\\n"))
    for node in graph.nodes:
        for source in node.inputs:
            dot.edge(ids[source], ids[node])
    return dot, ids


def _points(text: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in (p.split(",") for p in text.split())]


def dot_layout(graph: Graph) -> Layout:
    """The layout Graphviz's ``dot`` makes; raises ImportError or graphviz.ExecutableNotFound without Graphviz."""
    dot, ids = _dot_source(graph)
    drawn = json.loads(dot.pipe(format="json0", encoding="utf-8"))
    by_id = {ids[node]: node for node in graph.nodes}
    objects = drawn.get("objects", [])
    nodes = [by_id[o["name"]] for o in objects]
    result = Layout({}, size=tuple(float(v) for v in drawn["bb"].split(",")[2:]))  # type: ignore[arg-type]
    for node, o in zip(nodes, objects):
        result.centres[node] = _points(o["pos"])[0]
        result.boxes[node] = (72 * float(o["width"]), 72 * float(o["height"]))
    for e in drawn.get("edges", []):
        spline = e["pos"].split()
        tip = _points(spline[0][2:])[0] if spline[0].startswith("e,") else None
        line = _points(" ".join(p for p in spline if p[:2] not in ("e,", "s,")))
        result.edges.append((nodes[e["tail"]], nodes[e["head"]], line, tip or line[-1]))
    return result


def row_layout(graph: Graph) -> Layout:
    """The fallback without Graphviz: a node's row is its depth (the longest path from an input),
    nodes of one row side by side; arrows are straight lines."""
    depth: dict[Node, int] = {}
    for node in graph.nodes:
        depth[node] = 1 + max((depth[i] for i in node.inputs), default=-1)
    rows: dict[int, list[Node]] = {}
    for node in graph.nodes:
        rows.setdefault(depth[node], []).append(node)
    width = COLUMN_GAP * max(len(row) for row in rows.values()) if rows else COLUMN_GAP
    height = ROW_GAP * (len(rows) or 1)
    result = Layout({}, size=(width, height), engine="rows")
    for d, nodes in rows.items():
        for k, node in enumerate(nodes):
            result.centres[node] = (width / 2 + COLUMN_GAP * (k - (len(nodes) - 1) / 2), height - ROW_GAP * (d + 0.5))
    for node in graph.nodes:
        x, y = result.centres[node]
        for source in node.inputs:
            xs, ys = result.centres[source]
            result.edges.append((source, node, [(xs, ys - 0.25 * ROW_GAP), (x, y + 0.25 * ROW_GAP)],
                                 (x, y + 0.25 * ROW_GAP)))
    return result


def graph_layout(graph: Graph) -> Layout:
    """Graphviz's layout where Graphviz is installed; otherwise the row layout, said once."""
    global _noticed
    try:
        return dot_layout(graph)
    except Exception as error:  # no graphviz package, no `dot` executable, or dot failed
        if not _noticed:
            _noticed = True
            why = "the graphviz Python package is missing" if isinstance(error, ImportError) else \
                f"Graphviz's dot did not run: {type(error).__name__}"
            print(f"draw_graph: {why}; install Debian's graphviz (`make setup` does) for a readable layout. "
                  "Drawn with one row per depth instead.")
        return row_layout(graph)


def layout(graph: Graph) -> dict[Node, tuple[float, float]]:
    """(x, y) per node's centre, in points, y pointing up: an input is drawn above its readers."""
    return graph_layout(graph).centres


def _draw_edge(ax: Any, line: list[tuple[float, float]], tip: tuple[float, float], scale: float) -> None:
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path

    style = {"color": "#555555", "lw": 0.8 * min(scale, 1.0)}
    if len(line) >= 4 and (len(line) - 1) % 3 == 0:          # Graphviz's cubic Bézier pieces
        ax.add_patch(PathPatch(Path(line, [Path.MOVETO] + [Path.CURVE4] * (len(line) - 1)),
                               fill=False, **style))
        start = line[-1]
    else:                                                     # the fallback's straight line
        start = line[0]
    ax.annotate("", xy=tip, xytext=start, annotation_clip=False,
                arrowprops={"arrowstyle": "-|>", "shrinkA": 0, "shrinkB": 0,
                            "mutation_scale": 7 * min(scale, 1.0), **style})


def _axes_scale(ax: Any, size: tuple[float, float]) -> float:
    """How much smaller (or larger) than the layout's own size the Axes draws it, with equal aspect."""
    figure_width, figure_height = ax.figure.get_size_inches()
    box = ax.get_position()
    width, height = 72 * box.width * figure_width, 72 * box.height * figure_height
    return min(width / max(size[0], 1.0), height / max(size[1], 1.0))


def _inches(size: tuple[float, float]) -> tuple[float, float]:
    """A figure's size for a layout of ``size`` points: the layout, a margin, and a line for the title."""
    return max(1.5, size[0] / 72 + 0.3), max(1.0, size[1] / 72 + 0.6)


def figure_size(graph: Graph) -> tuple[float, float]:
    """Inches that show ``graph`` at its natural size (7-point labels): the size to give a figure."""
    return _inches(graph_layout(graph).size)


def draw_graph(graph: Graph, ax: Any = None, title: str | None = None) -> Any:
    """Draw ``graph`` on a matplotlib Axes (a new figure of the graph's natural size if None) and
    return the Axes. In an Axes smaller than the layout, labels shrink with it, so nothing overlaps."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    placed = graph_layout(graph)
    width, height = placed.size
    if ax is None:
        figure = plt.figure(figsize=_inches(placed.size))
        width_in, height_in = figure.get_size_inches()
        ax = figure.add_axes((0.15 / width_in, 0.15 / height_in, 1 - 0.3 / width_in, 1 - 0.6 / height_in))
    margin = 6.0
    ax.set_xlim(-margin, width + margin)
    ax.set_ylim(-margin, height + margin)
    ax.set_aspect("equal", adjustable="box")
    ax.axis("off")
    scale = _axes_scale(ax, (width + 2 * margin, height + 2 * margin))
    for _source, _reader, line, tip in placed.edges:
        _draw_edge(ax, line, tip, scale)
    for node in graph.nodes:
        x, y = placed.centres[node]
        edge = "black" if node.kind == "output" else "#777777"
        if node in placed.boxes:
            w, h = placed.boxes[node]
            ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle=f"round,pad=0,rounding_size={min(4.0, h / 3)}",
                                        fc=COLOURS[node.kind], ec=edge, lw=0.8 * min(scale, 1.0)))
            ax.text(x, y, label(node), ha="center", va="center", fontsize=FONT_SIZE * min(scale, 1.2),
                    fontfamily=FONT, linespacing=1.0)
        else:
            ax.text(x, y, label(node), ha="center", va="center", fontsize=FONT_SIZE * min(scale, 1.2),
                    bbox={"boxstyle": "round,pad=0.3", "fc": COLOURS[node.kind], "ec": edge})
    if title:
        ax.set_title(title)
    return ax
