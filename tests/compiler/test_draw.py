"""The graph picture: one box per node, one arrow per edge."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402

import tensorcraft  # noqa: E402
from tensorcraft.compiler.draw import draw_graph, layout  # noqa: E402
from tensorcraft.compiler.examples import model_zoo  # noqa: E402


def test_draw_has_a_box_per_node_and_an_arrow_per_edge():
    model, shape = model_zoo()["norm_softmax"]
    compiled = tensorcraft.compile(model.eval(), backend="python")
    with torch.no_grad():
        compiled(torch.randn(shape))
    for graph in (compiled.compiled.captured, compiled.compiled.optimized):
        ax = draw_graph(graph, title="g")
        boxes = [t.get_text().split("\n")[0] for t in ax.texts if t.get_text()]
        arrows = [t for t in ax.texts if type(t).__name__ == "Annotation"]
        assert boxes == [n.name for n in graph.nodes]
        assert len(arrows) == sum(len(n.inputs) for n in graph.nodes)
        positions = layout(graph)
        for n in graph.nodes:  # every input is drawn above its reader
            assert all(positions[i][1] > positions[n][1] for i in n.inputs)
        matplotlib.pyplot.close("all")
