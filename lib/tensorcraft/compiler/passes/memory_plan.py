"""Memory planning: when does each value die, and which buffers can be reused?

Liveness: a value is live from the node that makes it to its last reader; a view keeps the
storage it looks into alive (capture records aliasing in ``node.attrs["aliases"]``); graph
outputs live to the end. The wrapper deletes each name right after its last use.

Reuse: the buffers the compiled code allocates itself (fused-kernel outputs) are drawn from a
small set of *slots*; a slot whose value has died is handed to the next kernel output of the
same dtype and device that fits. Slots are allocated once, when the code is loaded, and kept
across calls (no fresh pages each call). Values returned to the caller never live in a slot.

This is an analysis: it returns a MemoryPlan and leaves the graph as it is.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..ir import Graph, Node


@dataclass
class Slot:
    numel: int
    dtype: torch.dtype
    device: torch.device

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize


@dataclass
class MemoryPlan:
    slot_of: dict[str, int] = field(default_factory=dict)       # kernel-output node name -> slot index
    fresh: set[str] = field(default_factory=set)                 # kernel outputs allocated each call
    slots: list[Slot] = field(default_factory=list)
    last_use: dict[str, int] = field(default_factory=dict)       # node name -> index of its last reader
    frees_after: dict[int, list[str]] = field(default_factory=dict)  # node index -> names to delete
    unplanned_bytes: int = 0      # every intermediate in its own buffer, none freed
    eager_peak_bytes: int = 0     # freed at last use, never reused (what eager achieves)
    planned_peak_bytes: int = 0   # with slots (held for the whole call) + everything else freed at last use
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"memory plan: {len(self.slots)} reusable slot(s) ({_kb(sum(s.nbytes for s in self.slots))}), "
                f"{len(self.slot_of)} kernel buffer(s) placed in them; peak {_kb(self.planned_peak_bytes)} planned, "
                f"{_kb(self.eager_peak_bytes)} freeing at last use, {_kb(self.unplanned_bytes)} unplanned"
                + "".join(f"; {note}" for note in self.notes))


def _kb(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


def is_kernel_output(node: Node) -> bool:
    return node.kind == "call" and node.op == "getitem" and isinstance(node.args[0], Node) \
        and node.args[0].kind == "kernel"


def allocates(node: Node) -> bool:
    """Does computing this node create a new tensor (rather than a view or an outside tensor)?"""
    return node.kind in ("call",) and node.shape is not None and not node.attrs.get("aliases") \
        and node.nbytes > 0


def storage_lifetimes(graph: Graph) -> tuple[dict[str, int], dict[str, str]]:
    """(last index at which each storage root is needed, root of each node)."""
    index = {n.name: i for i, n in enumerate(graph.nodes)}
    by_name = {n.name: n for n in graph.nodes}
    end = len(graph.nodes)
    last_use = {n.name: index[n.name] for n in graph.nodes}
    for i, n in enumerate(graph.nodes):
        for inp in n.inputs:
            last_use[inp.name] = max(last_use[inp.name], i)
    for out in graph.output.inputs:
        last_use[out.name] = end

    def root(name: str) -> str:
        while by_name[name].attrs.get("aliases") in by_name:
            name = by_name[name].attrs["aliases"]
        return name

    roots = {n.name: root(n.name) for n in graph.nodes}
    lifetime = dict(last_use)
    for name, r in roots.items():
        lifetime[r] = max(lifetime[r], last_use[name])
    return lifetime, roots


def plan_memory(graph: Graph) -> MemoryPlan:
    """Liveness, frees at last use, and slot assignment for fused-kernel outputs."""
    plan = MemoryPlan()
    lifetime, roots = storage_lifetimes(graph)
    nodes = graph.nodes
    end = len(nodes)
    # names to delete after their last reader (outputs are returned, not deleted)
    for i, n in enumerate(nodes):
        for inp in n.inputs:
            plan.last_use[inp.name] = i
    returned = {roots[o.name] for o in graph.output.inputs}
    for name, i in plan.last_use.items():
        if i < end - 1 and name not in {o.name for o in graph.output.inputs}:
            plan.frees_after.setdefault(i, []).append(name)

    names = {n.name for n in nodes}
    unknown_alias = [n.name for n in nodes if n.attrs.get("aliases") and n.attrs["aliases"] not in names]
    if unknown_alias:  # a pass lost track of what a view looks into: reuse nothing rather than guess
        plan.notes.append(f"no buffer reuse: {unknown_alias[0]} is a view of a value no longer in the graph")
    index_of = {n.name: i for i, n in enumerate(nodes)}
    busy_until: dict[int, int] = {}  # slot -> last index its current value is needed
    for i, n in enumerate(nodes):
        if not is_kernel_output(n):
            continue
        if n.name in returned or unknown_alias:
            plan.fresh.add(n.name)
            continue
        numel = n.nbytes // n.dtype.itemsize
        written_at = index_of[n.args[0].name]  # the kernel writes its outputs while reading its inputs
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
        plan.slot_of[n.name] = slot
        busy_until[slot] = lifetime[n.name]

    # bytes: unplanned total, eager-style peak, planned peak
    allocating = [n for n in nodes if allocates(n)]
    plan.unplanned_bytes = sum(n.nbytes for n in allocating)
    slot_bytes = sum(s.nbytes for s in plan.slots)
    born = {n.name: idx for idx, n in enumerate(nodes)}
    eager_peak = planned_peak = 0
    for i in range(end):
        live = [n for n in allocating if born[n.name] <= i <= lifetime[n.name]]
        eager_live = sum(n.nbytes for n in live)
        planned_live = slot_bytes + sum(n.nbytes for n in live if n.name not in plan.slot_of)
        eager_peak, planned_peak = max(eager_peak, eager_live), max(planned_peak, planned_live)
    plan.eager_peak_bytes, plan.planned_peak_bytes = eager_peak, planned_peak
    return plan
