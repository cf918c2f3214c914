"""Known-wrong answers to notebook 09's exercises (group_fusible, storage_lifetimes, plan_memory).

Each is the library's own stage with one rule changed, as a learner might get it wrong: a patch of
its source (``grader.mutants.patched``), so that the library stays the one copy of the right answer.
``group_fusible``'s patches also switch off recomputation, which the notebook leaves out
(``recompute=False``: the rules a learner writes), and the notebook's rules know no cycle test apart
from sealing: without the seal, a cycle is what a learner gets.
"""
from tensorcraft.compiler.passes.fusion import _can_join, group_fusible
from tensorcraft.compiler.passes.memory_plan import plan_memory, storage_lifetimes

from . import patched

GROUP_FUSIBLE = "nb09_fusion_memory.group_fusible"
STORAGE_LIFETIMES = "nb09_fusion_memory.storage_lifetimes"
PLAN_MEMORY = "nb09_fusion_memory.plan_memory"


# ---------------------------------------------------------------- group_fusible

NOTEBOOK_RULES = ("recompute: bool = True", "recompute: bool = False")

patched(GROUP_FUSIBLE, "fuses_across_a_reduction", group_fusible, NOTEBOOK_RULES,
        (_can_join, "if meaning[i].reduce is not None:", "if False:"),
        hint="a node that reads a reduction cannot join the reduction's group: the sum of a row is "
        "known only when the kernel has gone through the whole row, so e / e.sum(-1) needs a second kernel")

patched(GROUP_FUSIBLE, "fuses_through_an_opaque_op", group_fusible, NOTEBOOK_RULES,
        (_can_join, "if g.sealed or ", "if "), (_can_join, "elif g.id in upstream.get(i, set()):", "elif False:"),
        hint="a group whose value a node outside it (a matmul) has read is sealed: joining it later "
        "makes a cycle (the kernel needs the matmul, the matmul needs the kernel) or puts the kernel after its reader")

patched(GROUP_FUSIBLE, "fuses_every_call_of_the_same_shape", group_fusible, NOTEBOOK_RULES,
        ("meaning = {n: classify(n) for n in graph.nodes}",
         "meaning = {n: classify(n) or (Elementwise('call', list(n.inputs)) if n.kind == 'call' and n.shape and "
         "n.inputs and n.op != 'getitem' else None) for n in graph.nodes}"),
        hint="a matmul (or a reshape, or a dtype conversion) is not elementwise: classify(node) "
        "returns None for it and it stays a torch call; only nodes classify() accepts go in a kernel")

patched(GROUP_FUSIBLE, "reduction_iterates_over_its_own_shape", group_fusible, NOTEBOOK_RULES,
        ("space = tuple(m.operands[0].shape) if m.reduce else tuple(node.shape)", "space = tuple(node.shape)"),
        hint="a reduction iterates over its input's shape, not over its own ([rows, cols], "
        "not [rows, 1]): with its own shape it never joins the chain that feeds it")

patched(GROUP_FUSIBLE, "refuses_broadcast_inputs", group_fusible, NOTEBOOK_RULES,
        ("meaning = {n: classify(n) for n in graph.nodes}",
         "meaning = {n: None if classify(n) and classify(n).reduce is None and "
         "any(tuple(i.shape) != tuple(n.shape) for i in n.inputs) else classify(n) for n in graph.nodes}"),
        hint="broadcasting is fine inside a kernel: x + b with b of shape [cols] iterates over x's "
        "shape, so it joins the group of x (the kernel reads b with a stride of 0 along the rows)")

patched(GROUP_FUSIBLE, "looks_only_at_the_first_input", group_fusible, NOTEBOOK_RULES,
        ("            for i in node.inputs:\n                g = group_of.get(i)\n                if g is not None and",
         "            for i in node.inputs[:1]:\n                g = group_of.get(i)\n                if g is not None and"),
        hint="a node may join the group of any of its inputs, the first one whose group accepts "
        "it: in sigmoid(x @ w + t) the add's first input is a matmul, but its second input's group can take it")


# ---------------------------------------------------------------- storage_lifetimes

patched(STORAGE_LIFETIMES, "ignores_views", storage_lifetimes,
        ("lifetime[inp.storage] = max(lifetime[inp.storage], i)", "lifetime[inp] = max(lifetime[inp], i)"),
        ("lifetime[out.storage] = end", "lifetime[out] = end"),
        hint="a view shares the memory of the value it looks into: a reader of the view needs "
        "that storage, so raise lifetime[value.storage], not lifetime[value]")

patched(STORAGE_LIFETIMES, "returned_values_die_at_the_output", storage_lifetimes,
        ("lifetime[out.storage] = end", "pass"),
        hint="a value the function returns is still needed after the last node: the caller "
        "holds it, so it lives until len(graph.nodes), past the output node's own step")

patched(STORAGE_LIFETIMES, "first_reader_ends_the_life", storage_lifetimes,
        ("for i, n in enumerate(graph.nodes):", "for i, n in reversed(list(enumerate(graph.nodes))):"),
        ("max(lifetime[inp.storage], i)", "i"),
        hint="a value lives until its last reader, not its first: keep the largest step "
        "(max) over all the nodes that read it")


# ---------------------------------------------------------------- plan_memory

patched(PLAN_MEMORY, "reuses_at_the_last_use_itself", plan_memory, ("if until < written_at", "if until <= written_at"),
        hint="at the step of its last use a value is still being read: the kernel that runs there "
        "reads it while it writes its outputs, so the slot is free only after that step (until < step, not <=)")

patched(PLAN_MEMORY, "ignores_the_dtype", plan_memory,
        ("and plan.slots[s].dtype == n.dtype and plan.slots[s].device == n.device]", "]"),
        hint="a slot is memory of one dtype on one device: a float64 value does not fit in a float32 "
        "slot of the same number of elements; reuse only slots of the value's dtype and device")

patched(PLAN_MEMORY, "never_grows_a_slot", plan_memory, ("plan.slots[slot].numel = numel", "pass"),
        hint="when no free slot is large enough you take the largest free one, good, but it must "
        "then grow to the value's size (slot.numel = numel): a [rows, 1] slot cannot hold a later [rows, cols] value")

patched(PLAN_MEMORY, "ignores_the_size", plan_memory, ("if plan.slots[s].numel >= numel]", "]"),
        hint="a free slot must be large enough: a [rows, cols] value does not fit where a [rows, 1] "
        "sum lived; take one that fits, or grow the largest free slot")

patched(PLAN_MEMORY, "slots_on_the_cpu", plan_memory, ("Slot(numel, n.dtype, n.device)", "Slot(numel, n.dtype, torch.device('cpu'))"),
        hint="a slot is created on the CPU whatever the values' device: on a GPU model the "
        "kernels would write into CPU memory; create each slot on its value's device (node.device)")

patched(PLAN_MEMORY, "never_reuses", plan_memory, ("for s, until in busy_until.items() if until", "for s, until in () if until"),
        hint="the point of the plan is reuse: a slot whose value has died can hold the next kernel "
        "output; a new slot for every buffer saves nothing")

patched(PLAN_MEMORY, "puts_returned_values_in_slots", plan_memory, ("if n in returned:", "if False:"),
        hint="a returned value belongs to the caller: if it sat in a slot, the next call would "
        "overwrite it; returned values (and what their views look into) go to plan.fresh")

patched(PLAN_MEMORY, "frees_at_the_last_read_of_the_name", plan_memory,
        ("lifetime = storage_lifetimes(graph)", "lifetime = plan.last_use"),
        ("busy_until[slot] = lifetime[n]", "busy_until[slot] = lifetime.get(n, index[n])"),
        hint="last_use says when a name is last read, not when its memory is free: a view of the "
        "value may be read later, and returned values live on; use storage_lifetimes(graph)")
