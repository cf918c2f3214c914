"""The graph picture: one box per node, one arrow per edge, laid out by Graphviz (or the fallback)."""
from __future__ import annotations

import shutil

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

import tensorcraft  # noqa: E402
from tensorcraft.compiler import draw  # noqa: E402
from tensorcraft.compiler.capture import capture  # noqa: E402
from tensorcraft.compiler.draw import draw_graph, layout  # noqa: E402
from tensorcraft.compiler.examples import model_zoo  # noqa: E402

needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot is not installed (make setup installs Debian's graphviz)")


def _graphs():
    model, shape = model_zoo()["norm_softmax"]
    compiled = tensorcraft.compile(model.eval(), backend="python")
    with torch.no_grad():
        compiled(torch.randn(shape))
    return compiled.compiled.captured, compiled.compiled.optimized


def _check_picture(graph):
    ax = draw_graph(graph, title="g")
    boxes = [t.get_text().split("\n")[0] for t in ax.texts if t.get_text()]
    arrows = [t for t in ax.texts if type(t).__name__ == "Annotation"]
    assert boxes == [n.name for n in graph.nodes]
    assert len(arrows) == sum(len(n.inputs) for n in graph.nodes)
    positions = layout(graph)
    for n in graph.nodes:  # every input is drawn above its reader
        assert all(positions[i][1] > positions[n][1] for i in n.inputs)
    matplotlib.pyplot.close("all")


@needs_dot
def test_graphviz_lays_out_a_box_per_node_and_an_arrow_per_edge():
    for graph in _graphs():
        assert draw.graph_layout(graph).engine == "dot"
        _check_picture(graph)


def test_without_graphviz_the_row_layout_draws_the_same_and_says_so_once(monkeypatch, capsys):
    def missing(graph):
        raise ImportError("No module named 'graphviz'")
    monkeypatch.setattr(draw, "dot_layout", missing)
    monkeypatch.setattr(draw, "_noticed", False)
    for graph in _graphs():
        assert draw.graph_layout(graph).engine == "rows"
        _check_picture(graph)
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1 and "graphviz" in printed[0].lower() and "make setup" in printed[0]


def _boxes(ax):
    """Each node box's extent on the canvas, in pixels."""
    from matplotlib.patches import FancyBboxPatch
    ax.figure.canvas.draw()
    return [p.get_window_extent() for p in ax.patches if isinstance(p, FancyBboxPatch)]


@needs_dot
def test_a_large_graph_has_no_overlapping_boxes_and_no_label_wider_than_its_box():
    # notebook 08's largest drawing: a conv net captured with its parameters (23 nodes)
    cnn, shape = model_zoo()["cnn"]
    graph = capture(cnn.eval(), (torch.randn(shape),), module=cnn).graph
    assert len(graph) > 15
    fig, axes = matplotlib.pyplot.subplots(1, 2, figsize=(12, 6))
    for ax in (None, axes[0]):   # at its natural size, and shrunk into a smaller Axes
        ax = draw_graph(graph, ax=ax)
        boxes = _boxes(ax)
        assert len(boxes) == len(graph)
        for k, a in enumerate(boxes):
            assert not any(a.overlaps(b) for b in boxes[k + 1:])
        labels = [t.get_window_extent() for t in ax.texts if t.get_text()]
        for box, text in zip(boxes, labels):
            assert text.width <= box.width + 1 and text.height <= box.height + 1
    matplotlib.pyplot.close("all")
