"""The memory plan's pieces on their own: frees at last use, the timeline and its peaks, liveness as a
swappable stage; and fusion's plain rules (``group_fusible(recompute=False)``)."""
from __future__ import annotations

import torch
from hypothesis import given, settings

import tensorcraft
from tensorcraft.compiler.capture import capture
from tensorcraft.compiler.interpret import interpret
from tensorcraft.compiler.passes.dce import eliminate_dead_code
from tensorcraft.compiler.passes.decompose import decompose
from tensorcraft.compiler.passes.fusion import fuse_elementwise, group_fusible
from tensorcraft.compiler.passes.memory_plan import (allocates, frees_at_last_use, is_kernel_output, memory_timeline,
                                                      plan_memory)

from random_programs import as_function, example_inputs, programs


def _fused(program):
    fn, inputs = as_function(program), example_inputs()
    return fuse_elementwise(eliminate_dead_code(decompose(capture(fn, inputs).graph)))


@settings(max_examples=40)
@given(programs())
def test_frees_come_after_the_last_reader_and_never_touch_outputs(program):
    graph = _fused(program)
    last_use, frees_after = frees_at_last_use(graph)
    outputs = set(graph.output.inputs)
    freed = [n for step in frees_after.values() for n in step]
    assert len(freed) == len(set(freed)) and not outputs & set(freed)
    for step, values in frees_after.items():
        for value in values:
            assert all(value not in n.inputs for n in graph.nodes[step + 1:])
            assert value in graph.nodes[step].inputs and last_use[value] == step


@settings(max_examples=40)
@given(programs())
def test_the_planned_timeline_never_holds_less_than_freeing_at_last_use(program):
    """Slots hold at least the values placed in them, one at a time: at every step the planned bytes
    are at least the eager ones, and the peaks are the maxima of the timeline."""
    graph = _fused(program)
    plan = plan_memory(graph)
    line = memory_timeline(graph, plan)
    assert all(p >= e for p, e in zip(line.planned, line.eager))
    assert line.unplanned[-1] == sum(n.nbytes for n in graph.nodes if allocates(n)) == plan.unplanned_bytes
    assert (plan.eager_peak_bytes, plan.planned_peak_bytes) == (max(line.eager), max(line.planned))
    assert line.unplanned == sorted(line.unplanned)  # nothing is ever freed without a plan


def test_the_planner_reads_liveness_through_the_storage_lifetimes_stage():
    def f(x, w):
        for _ in range(4):
            x = torch.tanh(x * 2 + 1) @ w
        return x
    graph = fuse_elementwise(capture(f, (torch.randn(8, 8), torch.randn(8, 8))).graph)
    assert len(plan_memory(graph).slots) == 1
    forever = lambda g: {n: len(g.nodes) for n in g.nodes}  # noqa: E731  every value lives to the end
    with tensorcraft.substitute(storage_lifetimes=forever):
        plan = plan_memory(graph)
    kernel_outputs = [n for n in graph.nodes if is_kernel_output(n)]
    assert len(plan.slots) == len(plan.slot_of) == len(kernel_outputs) == 4  # no slot ever reused


def test_without_recomputation_softmax_stores_the_exponentials_and_keeps_its_meaning():
    x = torch.randn(4, 16)
    graph = decompose(capture(lambda t: (t * 2).softmax(-1), (x,)).graph)
    assert any(g.recomputed for g in group_fusible(graph))
    plain = group_fusible(graph, recompute=False)
    assert plain and not any(g.recomputed for g in plain)
    with tensorcraft.substitute(group_fusible=lambda g: group_fusible.library(g, recompute=False)):
        fused = fuse_elementwise(graph)
    torch.testing.assert_close(interpret(fused, [x])[0], (x * 2).softmax(-1))
