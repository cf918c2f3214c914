"""Memory planning: when does each value die, and which buffers can be reused?

Liveness: a value is live from the node that makes it to its last reader; a view keeps the
storage it looks into alive (``node.aliases``, recorded by the graph builder and kept right by
the graph's own methods); graph outputs live to the end. The wrapper deletes each value right
after its last use. Everything here is keyed by `Node`.

Reuse: the buffers the compiled code allocates itself (fused-kernel outputs) are drawn from a
small set of *slots*; a slot whose value has died is handed to the next kernel output of the
same dtype and device that fits. Slots are allocated once, when the code is loaded, and kept
across calls (no fresh pages each call). Values returned to the caller never live in a slot.

This is an analysis: it returns a MemoryPlan and leaves the graph as it is. Two stages can be
swapped: ``storage_lifetimes`` (liveness) and ``plan_memory`` (slots); ``frees_at_last_use`` and
``measure_peaks`` are the bookkeeping around them, and ``memory_timeline`` the bytes held at each step.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...stages import swappable
from ..ir import Graph, Node
from ..plans import MemoryPlan, Slot, _kb, is_kernel_output  # noqa: F401 (the plan's data)


def allocates(node: Node) -> bool:
    """Does computing this node create a new tensor (rather than a view or an outside tensor)?"""
    return node.kind == "call" and node.shape is not None and node.aliases is None and node.nbytes > 0


@swappable
def storage_lifetimes(graph: Graph) -> dict[Node, int]:
    """The last node index at which each storage (a node no view chain goes past) is still needed."""
    end = len(graph.nodes)
    lifetime = {n: i for i, n in enumerate(graph.nodes)}
    for i, n in enumerate(graph.nodes):
        for inp in n.inputs:
            lifetime[inp.storage] = max(lifetime[inp.storage], i)
    for out in graph.output.inputs:
        lifetime[out.storage] = end
    return lifetime


def frees_at_last_use(graph: Graph) -> tuple[dict[Node, int], dict[int, list[Node]]]:
    """(last reader of each value, values to delete after each node): what the wrapper's ``del`` lines
    say. Returned values are never deleted."""
    last_use: dict[Node, int] = {}
    for i, n in enumerate(graph.nodes):
        for inp in n.inputs:
            last_use[inp] = i
    outputs = set(graph.output.inputs)
    frees_after: dict[int, list[Node]] = {}
    for node, i in last_use.items():
        if i < len(graph.nodes) - 1 and node not in outputs:
            frees_after.setdefault(i, []).append(node)
    return last_use, frees_after


@swappable
def plan_memory(graph: Graph) -> MemoryPlan:
    """Liveness, frees at last use, and slot assignment for fused-kernel outputs."""
    plan = MemoryPlan()
    plan.last_use, plan.frees_after = frees_at_last_use(graph)
    lifetime = storage_lifetimes(graph)
    index = {n: i for i, n in enumerate(graph.nodes)}
    returned = {o.storage for o in graph.output.inputs}
    busy_until: dict[int, int] = {}  # slot -> last index its current value is needed
    for n in graph.nodes:
        if not is_kernel_output(n):
            continue
        if n in returned:
            plan.fresh.add(n)
            continue
        numel = n.nbytes // n.dtype.itemsize
        written_at = index[n.args[0]]  # the kernel writes its outputs while reading its inputs
        free = [s for s, until in busy_until.items() if until < written_at
                and plan.slots[s].dtype == n.dtype and plan.slots[s].device == n.device]
        fitting = [s for s in free if plan.slots[s].numel >= numel]
        if fitting:
            slot = min(fitting, key=lambda s: plan.slots[s].numel)
        elif free:  # grow the biggest free slot instead of adding one
            slot = max(free, key=lambda s: plan.slots[s].numel)
            plan.slots[slot].numel = numel
        else:
            plan.slots.append(Slot(numel, n.dtype, n.device))
            slot = len(plan.slots) - 1
        plan.slot_of[n] = slot
        busy_until[slot] = lifetime[n]
    return measure_peaks(graph, plan)


@dataclass
class Timeline:
    """Bytes held after each node of a graph runs, three ways (one number per node)."""
    unplanned: list[int]   # every value a call allocates kept to the end
    eager: list[int]       # each value freed after its last use, nothing reused
    planned: list[int]     # the plan's slots, held for the whole call, plus the other values freed at last use


def memory_timeline(graph: Graph, plan: MemoryPlan) -> Timeline:
    """How many bytes the allocated values take at each step, without and with ``plan``. Inputs and
    parameters belong to the caller and are not counted; views share their storage's bytes."""
    lifetime = storage_lifetimes(graph)
    allocating = [(i, n) for i, n in enumerate(graph.nodes) if allocates(n)]
    slot_bytes = sum(s.nbytes for s in plan.slots)
    timeline = Timeline([], [], [])
    for step in range(len(graph.nodes)):
        made = [n for i, n in allocating if i <= step]
        live = [n for i, n in allocating if i <= step <= lifetime[n]]
        timeline.unplanned.append(sum(n.nbytes for n in made))
        timeline.eager.append(sum(n.nbytes for n in live))
        timeline.planned.append(slot_bytes + sum(n.nbytes for n in live if n not in plan.slot_of))
    return timeline


def measure_peaks(graph: Graph, plan: MemoryPlan) -> MemoryPlan:
    """Fill in the plan's three byte counts (unplanned total, eager peak, planned peak) and return it."""
    timeline = memory_timeline(graph, plan)
    plan.unplanned_bytes = max(timeline.unplanned, default=0)
    plan.eager_peak_bytes = max(timeline.eager, default=0)
    plan.planned_peak_bytes = max(timeline.planned, default=0)
    return plan
