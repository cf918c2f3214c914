"""Known-wrong answers to notebook 09's exercises (group_fusible, storage_lifetimes, plan_memory).

Each is the notebook's solution with one rule changed, as a learner might get it wrong.
"""
import math

import torch

from tensorcraft.compiler.passes.fusion import Group, classify
from tensorcraft.compiler.passes.memory_plan import (MemoryPlan, Slot, frees_at_last_use, is_kernel_output,
                                                      measure_peaks, storage_lifetimes)

from . import mutant

GROUP_FUSIBLE = "nb09_fusion_memory.group_fusible"
STORAGE_LIFETIMES = "nb09_fusion_memory.storage_lifetimes"
PLAN_MEMORY = "nb09_fusion_memory.plan_memory"


# ---------------------------------------------------------------- group_fusible


def _group(graph, *, fusible=classify, space_of=None, reads_reduction=True, seals=True, candidates=None):
    """The notebook's grouping; each keyword switches one rule to a wrong version."""
    groups, group_of = [], {}
    for node in graph.nodes:
        meaning = fusible(node)
        if meaning is not None:
            space = space_of(node, meaning) if space_of else (
                tuple(meaning.operands[0].shape) if meaning.reduce else tuple(node.shape))
            chosen = None
            for i in (candidates(node) if candidates else node.inputs):
                g = group_of.get(i)
                if g is None or (seals and g.sealed) or g.shape != space or g.dtype != node.dtype \
                        or g.device != node.device:
                    continue
                if reads_reduction and any(group_of.get(j) is g and getattr(fusible(j), "reduce", None) is not None
                                           for j in node.inputs):
                    continue
                chosen = g
                break
            if chosen is None:
                chosen = Group(len(groups), space, node.dtype, node.device)
                groups.append(chosen)
            chosen.members.append(node)
            group_of[node] = chosen
        for i in node.inputs:
            if i in group_of and group_of[i] is not group_of.get(node):
                group_of[i].sealed = True
    return [g for g in groups if len(g.members) >= 2]


@mutant(GROUP_FUSIBLE, hint="a node that reads a reduction cannot join the reduction's group: the sum of a row is "
        "known only when the kernel has gone through the whole row, so e / e.sum(-1) needs a second kernel")
def fuses_across_a_reduction(graph):
    return _group(graph, reads_reduction=False)


@mutant(GROUP_FUSIBLE, hint="a group whose value a node outside it (a matmul) has read is sealed: joining it later "
        "makes a cycle (the kernel needs the matmul, the matmul needs the kernel) or puts the kernel after its reader")
def fuses_through_an_opaque_op(graph):
    return _group(graph, seals=False)


class _AnyCall:
    def __init__(self, node):
        self.reduce, self.operands = None, list(node.inputs)


@mutant(GROUP_FUSIBLE, hint="a matmul (or a reshape, or a dtype conversion) is not elementwise: classify(node) "
        "returns None for it and it stays a torch call; only nodes classify() accepts go in a kernel")
def fuses_every_call_of_the_same_shape(graph):
    return _group(graph, fusible=lambda n: classify(n) or (_AnyCall(n) if n.kind == "call" and n.shape
                                                          and n.inputs and n.op not in ("getitem",) else None))


@mutant(GROUP_FUSIBLE, hint="a reduction iterates over its input's shape, not over its own ([rows, cols], "
        "not [rows, 1]): with its own shape it never joins the chain that feeds it")
def reduction_iterates_over_its_own_shape(graph):
    return _group(graph, space_of=lambda node, meaning: tuple(node.shape))


@mutant(GROUP_FUSIBLE, hint="broadcasting is fine inside a kernel: x + b with b of shape [cols] iterates over x's "
        "shape, so it joins the group of x (the kernel reads b with a stride of 0 along the rows)")
def refuses_broadcast_inputs(graph):
    def same_shape_only(node):
        meaning = classify(node)
        if meaning and meaning.reduce is None and any(tuple(i.shape) != tuple(node.shape) for i in node.inputs):
            return None
        return meaning
    return _group(graph, fusible=same_shape_only)


@mutant(GROUP_FUSIBLE, hint="a node may join the group of any of its inputs, the first one whose group accepts "
        "it: in sigmoid(x @ w + t) the add's first input is a matmul, but its second input's group can take it")
def looks_only_at_the_first_input(graph):
    return _group(graph, candidates=lambda node: node.inputs[:1])


# ---------------------------------------------------------------- storage_lifetimes


def _lifetimes(graph, *, through_views=True, outputs_to_end=True, combine=max):
    lifetime = {node: i for i, node in enumerate(graph.nodes)}
    first = {}
    for i, node in enumerate(graph.nodes):
        for value in node.inputs:
            owner = value.storage if through_views else value
            first.setdefault(owner, i)
            lifetime[owner] = combine(lifetime[owner], i) if combine is max else first[owner]
    if outputs_to_end:
        for value in graph.output.inputs:
            lifetime[value.storage if through_views else value] = len(graph.nodes)
    return lifetime


@mutant(STORAGE_LIFETIMES, hint="a view shares the memory of the value it looks into: a reader of the view needs "
        "that storage, so raise lifetime[value.storage], not lifetime[value]")
def ignores_views(graph):
    return _lifetimes(graph, through_views=False)


@mutant(STORAGE_LIFETIMES, hint="a value the function returns is still needed after the last node: the caller "
        "holds it, so it lives until len(graph.nodes), past the output node's own step")
def returned_values_die_at_the_output(graph):
    return _lifetimes(graph, outputs_to_end=False)


@mutant(STORAGE_LIFETIMES, hint="a value lives until its last reader, not its first: keep the largest step "
        "(max) over all the nodes that read it")
def first_reader_ends_the_life(graph):
    return _lifetimes(graph, combine=min)


# ---------------------------------------------------------------- plan_memory


def _plan(graph, *, free_when=lambda until, written_at: until < written_at, same_kind=True, fits=True,
          reuse=True, returned_out=True, lifetime_of=None, grows=True, device_of=lambda node: node.device):
    plan = MemoryPlan()
    plan.last_use, plan.frees_after = frees_at_last_use(graph)
    lifetime = lifetime_of(graph, plan) if lifetime_of else storage_lifetimes(graph)
    step = {node: i for i, node in enumerate(graph.nodes)}
    returned = {value.storage for value in graph.output.inputs}
    busy_until = {}
    for node in graph.nodes:
        if not is_kernel_output(node):
            continue
        if returned_out and node in returned:
            plan.fresh.add(node)
            continue
        numel = math.prod(node.shape)
        written_at = step[node.args[0]]
        free = [s for s, until in busy_until.items() if reuse and free_when(until, written_at) and
                (not same_kind or (plan.slots[s].dtype == node.dtype and plan.slots[s].device == node.device))]
        fitting = [s for s in free if plan.slots[s].numel >= numel or not fits]
        if fitting:
            slot = min(fitting, key=lambda s: plan.slots[s].numel)
        elif free:
            slot = max(free, key=lambda s: plan.slots[s].numel)
            if grows:
                plan.slots[slot].numel = numel
        else:
            plan.slots.append(Slot(numel, node.dtype, device_of(node)))
            slot = len(plan.slots) - 1
        plan.slot_of[node] = slot
        busy_until[slot] = lifetime.get(node, step[node])
    return measure_peaks(graph, plan)


@mutant(PLAN_MEMORY, hint="at the step of its last use a value is still being read: the kernel that runs there "
        "reads it while it writes its outputs, so the slot is free only after that step (until < step, not <=)")
def reuses_at_the_last_use_itself(graph):
    return _plan(graph, free_when=lambda until, written_at: until <= written_at)


@mutant(PLAN_MEMORY, hint="a slot is memory of one dtype on one device: a float64 value does not fit in a float32 "
        "slot of the same number of elements; reuse only slots of the value's dtype and device")
def ignores_the_dtype(graph):
    return _plan(graph, same_kind=False)


@mutant(PLAN_MEMORY, hint="when no free slot is large enough you take the largest free one, good, but it must "
        "then grow to the value's size (slot.numel = numel): a [rows, 1] slot cannot hold a later [rows, cols] value")
def never_grows_a_slot(graph):
    return _plan(graph, grows=False)


@mutant(PLAN_MEMORY, hint="a free slot must be large enough: a [rows, cols] value does not fit where a [rows, 1] "
        "sum lived; take one that fits, or grow the largest free slot")
def ignores_the_size(graph):
    return _plan(graph, fits=False)


@mutant(PLAN_MEMORY, hint="a slot is created on the CPU whatever the values' device: on a GPU model the "
        "kernels would write into CPU memory; create each slot on its value's device (node.device)")
def slots_on_the_cpu(graph):
    return _plan(graph, device_of=lambda node: torch.device("cpu"))


@mutant(PLAN_MEMORY, hint="the point of the plan is reuse: a slot whose value has died can hold the next kernel "
        "output; a new slot for every buffer saves nothing")
def never_reuses(graph):
    return _plan(graph, reuse=False)


@mutant(PLAN_MEMORY, hint="a returned value belongs to the caller: if it sat in a slot, the next call would "
        "overwrite it; returned values (and what their views look into) go to plan.fresh")
def puts_returned_values_in_slots(graph):
    return _plan(graph, returned_out=False)


@mutant(PLAN_MEMORY, hint="last_use says when a name is last read, not when its memory is free: a view of the "
        "value may be read later, and returned values live on; use storage_lifetimes(graph)")
def frees_at_the_last_read_of_the_name(graph):
    return _plan(graph, lifetime_of=lambda graph, plan: plan.last_use)
