"""The graph's own methods keep references right; both front-ends build through the one builder."""
from __future__ import annotations

import operator

import pytest
import torch

from tensorcraft.compiler.builder import GraphBuilder, Refused
from tensorcraft.compiler.capture import capture
from tensorcraft.compiler.dynamo_backend import graph_from_fx
from tensorcraft.compiler.passes.cse import eliminate_common_subexpressions
from tensorcraft.compiler.passes.memory_plan import plan_memory


def _viewed_twice(x):
    a = x * 2
    b = x * 2          # the same value: CSE merges it into a
    v = b.t()          # a view of the duplicate
    return v + a


def test_views_are_node_references_the_same_from_both_front_ends():
    x = torch.randn(4, 4)
    ours = capture(_viewed_twice, (x,)).graph
    theirs = graph_from_fx(torch.fx.symbolic_trace(_viewed_twice), [x])
    for graph in (ours, theirs):
        view = next(n for n in graph.nodes if n.op == "t")
        assert view.aliases is view.args[0] and view.aliases.op == "mul"
        assert [n.op for n in graph.nodes if n.kind == "call"] == ["mul", "mul", "t", "add"]


def test_replacing_a_node_moves_its_readers_and_its_views():
    graph = capture(_viewed_twice, (torch.randn(4, 4),)).graph
    first, duplicate = [n for n in graph.nodes if n.op == "mul"]
    merged = eliminate_common_subexpressions(graph)
    view = next(n for n in merged.nodes if n.op == "t")
    kept = next(n for n in merged.nodes if n.op == "mul")
    assert merged.count(op="mul") == 1 and view.aliases is kept and view.args[0] is kept
    assert graph.count(op="mul") == 2 and next(n for n in graph.nodes if n.op == "t").aliases is duplicate  # untouched


def test_remove_refuses_a_node_that_is_still_read_or_viewed():
    graph = capture(_viewed_twice, (torch.randn(4, 4),)).graph
    _, duplicate = [n for n in graph.nodes if n.op == "mul"]
    view = next(n for n in graph.nodes if n.op == "t")
    with pytest.raises(ValueError, match=f"{view.name} still reads it"):
        graph.remove([duplicate])
    view.args = (next(n for n in graph.nodes if n.op == "mul"),)  # a broken edit: reads one, views another
    with pytest.raises(ValueError, match=f"{view.name} is a view of it"):
        graph.remove([duplicate])


def test_lint_states_the_rules():
    graph = capture(_viewed_twice, (torch.randn(4, 4),)).graph
    graph.lint()
    view = next(n for n in graph.nodes if n.op == "t")
    view.aliases = graph.nodes[-2]  # a node defined after it
    with pytest.raises(ValueError, match="is a view of"):
        graph.lint()


def test_the_memory_plan_is_keyed_by_nodes():
    graph = capture(lambda x: (x * 2).exp() @ x, (torch.randn(4, 4),)).graph
    plan = plan_memory(graph)
    assert all(isinstance(k, type(graph.nodes[0])) for k in plan.last_use)
    assert all(n in graph.nodes for frees in plan.frees_after.values() for n in frees)


def test_the_builder_refuses_an_update_of_an_input_and_functionalizes_an_intermediate():
    builder = GraphBuilder()
    x = torch.randn(3)
    px = builder.placeholder(x, "x", 0)
    with pytest.raises(Refused, match="in-place update of an input"):
        builder.call(torch.Tensor.add_, (px, 1), {}, (x, 1), {})
    y, py, not_updated = builder.call(torch.mul, (px, 2), {}, (x, 2), {})
    assert not_updated is None
    recorded = builder.call(torch.Tensor.add_, (py, 1), {}, (y, 1), {})
    updated = recorded.updated  # the builder says what the call updated: front-ends do not re-derive it
    assert recorded.value is y and recorded.node is updated and recorded.produced() == [(y, updated)]
    assert updated.op == "add" and updated.args[0] is py and updated.aliases is None
    z, pz, _ = builder.call(torch.mul, (px, 3), {}, (x, 3), {})
    recorded = builder.call(operator.setitem, (pz, 0, 5.0), {}, (z, 0, 5.0), {})  # z[0] = 5.0 returns None
    assert recorded.value is None and recorded.produced() == [] and recorded.updated.args[0] is pz
    torch.testing.assert_close(y, x * 2 + 1)  # the program's own tensor was updated, as eager does


def test_a_copy_knows_the_node_each_of_its_nodes_copies_through_copies_of_copies():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    graph = capture(model, (torch.randn(3, 4),), module=model).graph
    twice = eliminate_common_subexpressions(graph.copy())  # a pass on a copy: a copy of a copy
    assert len(twice.origin) == len(twice.nodes) and all(n not in graph.nodes for n in twice.nodes)
    for node in twice.nodes:
        first = twice.origin[node]
        assert first in graph.nodes and (first.name, first.kind, first.op) == (node.name, node.kind, node.op)
    assert [twice.origin[p] for p in twice.params] == graph.params


def test_a_compiled_graph_passes_module_tensors_by_node_not_by_name():
    """A pass that renames the module tensors' nodes (and their qualified names) changes nothing:
    the optimized graph's params are matched to the captured ones by the node each copies."""
    from tensorcraft.compiler.pipeline import compile_graph
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    x = torch.randn(3, 4)
    graph = capture(model, (x,), module=model).graph

    def renames_params(g):
        g = g.copy()
        for node in reversed(g.params):  # names in the other order: a join by name would swap tensors
            node.target = f"renamed_{len(g.params) - g.params.index(node)}"
        return g
    compiled = compile_graph(graph, backend="python", passes=[renames_params, "fusion"])
    params = [dict(model.named_parameters())[p.target] for p in graph.params]
    with torch.no_grad():
        torch.testing.assert_close(compiled.run([x], params), model(x))
