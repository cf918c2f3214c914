"""Checks for notebook 09 (operator fusion and memory planning).

Every exercise is one stage of ``tensorcraft.compile``, and every check runs the **whole compiler**
with the learner's stage substituted in (``tensorcraft.substitute``), on small programs given as
source text: the compiled program must return what eager PyTorch returns. On top of that:

* ``group_fusible``: each group is checked for legality (fusible ops only, one iteration shape, no
  reader of a reduction inside the reduction's group, no cycle, no outside reader before the kernel
  runs), and the compiled program must run at most as many ops as the notebook's rules reach
  (counted with the library's own grouping, recomputation off: ``group_fusible(recompute=False)``);
* ``storage_lifetimes``: the step until which each storage is needed, against the library's;
* ``plan_memory``: no slot is handed to a value while the slot's value is still needed, slots have
  the value's dtype, device and at least its size, returned values never live in a slot; it uses
  the fewest slots possible (the most values alive at once, an interval-graph colouring) and the
  planned peak stays within what that many slots need.

While the learner's code runs, the library's own version of the stage is a tripwire.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from tensorcraft.compiler.ir import Graph, Node
from tensorcraft.compiler.passes import fusion
from tensorcraft.compiler.passes.memory_plan import (MemoryPlan, allocates, is_kernel_output, memory_timeline,
                                                      plan_memory, storage_lifetimes)

from .exercise import Case, Exercise, Group
from .programs import Program
from .programs import draw as draw_program
from .seed import draw, pick
from .spy import Recorder
from .stages import StageRun, run_stage

FUSION = "tensorcraft.compiler.passes.fusion"
MEMORY = "tensorcraft.compiler.passes.memory_plan"


# ---------------------------------------------------------------- programs: source text -> function


def program(body: tuple[str, ...], rows: int = 4, cols: int = 6) -> Program:
    """A program ``f(x, b, w, y)`` of this notebook: x and y are [rows, cols], b is [cols] (it broadcasts),
    w is [cols, cols] (scaled so that products stay near 1)."""
    return Program(body, ("x", "b", "w", "y"), ((rows, cols), (cols,), (cols, cols), (rows, cols)),
                   (1, 1, cols ** 0.5, 1))


def show_program(program: Program, inputs: tuple, *_: Any) -> str:
    """A case as the learner reads it: the function's source on one line, and its inputs' shapes."""
    return program.show(inputs)


def _eager(program: Program, inputs: tuple) -> tuple:
    """The program's eager results, each paired with its float64 twin (``Program.truth``)."""
    truth = program.truth(*inputs)
    return tuple(truth) if isinstance(truth, (tuple, list)) else (truth,)


def _compiled(program: Program, inputs: tuple, stage: str = "plan_memory", fn: Callable | None = None,
              **recorder: Any) -> tuple[tuple, Graph, MemoryPlan, StageRun]:
    """Run ``program`` through tensorcraft.compile with ``fn`` as ``stage`` (recorded: ``stages.run_stage``;
    by default the library's planner): (outputs, the optimized graph and its memory plan as the planner was
    given and answered them, the run)."""
    planner = None if stage == "plan_memory" else Recorder(plan_memory.library, "plan_memory")
    run = run_stage(stage, fn or plan_memory.library, program.fn, inputs, compile_with={"backend": "python"},
                    grad=False, also={"plan_memory": planner} if planner else None, **recorder)
    planned = (planner or run).last
    out = run.result
    return (tuple(out) if isinstance(out, tuple) else (out,)), planned.args[0], planned.returned, run


# ---------------------------------------------------------------- exercise 1: group_fusible


class FusionRuleBroken(ValueError):
    """A group the fusion pass cannot turn into one kernel."""


class OpaqueOpFused(FusionRuleBroken):
    pass


class ReductionReadInItsGroup(FusionRuleBroken):
    pass


class FusionCycle(FusionRuleBroken):
    pass


class ReaderBeforeKernel(FusionRuleBroken):
    pass


class WrongIterationShape(FusionRuleBroken):
    pass


def ops_run(graph: Graph) -> int:
    """Kernels plus the torch calls left, not counting views and the reads of a kernel's outputs."""
    return sum(1 for n in graph.nodes if n.kind == "kernel" or
               (n.kind == "call" and n.aliases is None and not is_kernel_output(n)))


def _path_back(start: Node, members: set[Node], users: dict[Node, list[Node]]) -> list[Node] | None:
    """A path start -> (nodes outside the group) -> a member, or None."""
    todo = [(u, [start, u]) for u in users[start] if u not in members]
    seen: set[Node] = set()
    while todo:
        node, path = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        for u in users[node]:
            if u in members:
                return path + [u]
            todo.append((u, path + [u]))
    return None


def check_groups(graph: Graph, groups: Any) -> list[fusion.Group]:
    """Raise a FusionRuleBroken that names the nodes when a group cannot be one kernel; else the groups,
    each with its members in graph order (the order the kernel computes them in)."""
    if not isinstance(groups, (list, tuple)) or not all(isinstance(g, fusion.Group) for g in groups):
        raise TypeError(f"group_fusible must return a list of fusion.Group, got {groups!r:.80}")
    index = {n: i for i, n in enumerate(graph.nodes)}
    users = graph.users()
    owner: dict[Node, int] = {}
    for k, group in enumerate(groups):
        for n in group.members:
            if n not in index:
                raise FusionRuleBroken(f"group {k} holds {n.name}, which is not a node of this graph")
            if n in owner:
                raise FusionRuleBroken(f"{n.name} is in two groups ({owner[n]} and {k}); a node goes in one kernel")
            owner[n] = k
    for k, group in enumerate(groups):
        group.members.sort(key=index.__getitem__)
        members = set(group.members)
        for n in group.members:
            meaning = fusion.classify(n)
            if meaning is None:
                raise OpaqueOpFused(f"group {k} holds {n.name} ({n.op}): classify() says it cannot go in a kernel")
            space = tuple(meaning.operands[0].shape) if meaning.reduce else tuple(n.shape)
            if space != tuple(group.shape) or n.dtype != group.dtype:
                raise WrongIterationShape(f"group {k} iterates over {list(group.shape)} ({group.dtype}), but {n.name} "
                                          f"({n.op}) iterates over {list(space)} ({n.dtype})")
            for i in n.inputs:
                if i in members and fusion.classify(i).reduce is not None:
                    raise ReductionReadInItsGroup(f"group {k}: {n.name} ({n.op}) reads {i.name}, a {i.op} of the "
                                                  "same group, which is only known when the whole kernel is done")
        for n in group.members:
            path = _path_back(n, members, users)
            if path is not None:
                raise FusionCycle(f"group {k} makes a cycle: " + " -> ".join(f"{p.name} ({p.op})" for p in path)
                                  + f"; the kernel would need {path[-2].name} before it runs and "
                                  f"{path[-2].name} needs the kernel")
        last = max(index[n] for n in group.members)
        for n in group.members:
            early = [u for u in users[n] if u not in members and index[u] < last]
            if early:
                raise ReaderBeforeKernel(f"group {k}: {early[0].name} ({early[0].op}) reads {n.name} at step "
                                         f"{index[early[0]]}, but the kernel runs at step {last}, where its last "
                                         f"member {group.members[-1].name} is")
    return list(groups)


def _rule_grouping(graph: Graph) -> list[fusion.Group]:
    return fusion.group_fusible.library(graph, recompute=False)


def _grouping_case(program: Program, g: torch.Generator, note: str = "") -> Case:
    inputs = program.inputs(g)
    _, graph, _, _ = _compiled(program, inputs, "group_fusible", _rule_grouping)
    return Case((program, inputs, ops_run(graph)), note or repr(program))


def _grouping_reference(program: Program, inputs: tuple, target: int) -> tuple:
    return _eager(program, inputs), f"at most {target} ops run"


def _run_with_grouping(learner: Callable, program: Program, inputs: tuple, target: int) -> tuple:
    """tensorcraft.compile with the learner's group_fusible; each grouping is checked before it is used."""
    out, graph, _, _ = _compiled(program, inputs, "group_fusible", learner, then=check_groups)
    ran = ops_run(graph)
    return out, (f"at most {target} ops run" if ran <= target else f"{ran} ops run")


CHAIN = program(("return F.gelu(x * 2.0 + b) * 0.5 - 1.0",))
OPAQUE = program(("h = torch.tanh(x @ w + b) * 3.0", "return torch.sigmoid(h @ w) + 1.0"))
ROWS = program(("e = torch.exp(x - 1.0)", "s = e.sum(-1, keepdim=True)", "return e / s"))
NORM = program(("m = (x * 2.0).mean(-1, keepdim=True)", "d = x * 2.0 - m",
                "return d * torch.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5)"))
CYCLE = program(("a = torch.tanh(x + b)", "m = a @ w", "return a * m + 1.0"))
SIDE = program(("a = torch.tanh(x + b)", "m = a @ w", "z = a * 2.0 + 1.0", "return m, z"))
SECOND_INPUT = program(("t = torch.relu(y) * 2.0", "m = x @ w", "return torch.sigmoid(m + t) * 0.5"))


def _grouping_public() -> list[Group]:
    g = torch.Generator().manual_seed(9)
    return [
        Group("elementwise chains, with a broadcast bias", [
            _grouping_case(CHAIN, g, "gelu(x * 2 + b) * 0.5 - 1: one kernel"),
            _grouping_case(program(("return torch.abs(torch.sin(y) + b * 3.0)",), 3, 5), g),
        ]),
        Group("matmuls are opaque: they stay torch calls and cut the chains", [
            _grouping_case(OPAQUE, g, "tanh(x @ w + b) * 3, then sigmoid(h @ w) + 1: two kernels, two matmuls"),
            _grouping_case(SECOND_INPUT, g, "the chain continues through the second input of an add"),
        ]),
        Group("a last-axis reduction ends its group", [
            _grouping_case(ROWS, g, "exp(x - 1), its row sums, and the division that reads them"),
            _grouping_case(NORM, g, "a layer norm written out: two means"),
        ]),
        Group("no cycles, no reader before the kernel", [
            _grouping_case(CYCLE, g, "a = tanh(x + b); m = a @ w; a * m + 1: joining a would be a cycle"),
            _grouping_case(SIDE, g, "a is read by a matmul before a * 2 + 1: the group of a is sealed"),
        ]),
    ]


UNARY = ("torch.tanh({})", "torch.sigmoid({})", "torch.relu({})", "torch.exp(-torch.abs({}))", "F.gelu({})",
         "torch.sin({})")
# the steps of a random program (programs.draw): a unary op twice as often as the others
STEPS = (
    lambda g, v, values: pick(g, UNARY).format(v),
    lambda g, v, values: pick(g, UNARY).format(v),
    lambda g, v, values: f"{v} * {pick(g, (0.5, 2.0, -1.5))} + {pick(g, (1.0, -0.25))}",
    lambda g, v, values: f"{v} + b",
    lambda g, v, values: f"{v} {pick(g, '+-*')} {pick(g, values)}",
    lambda g, v, values: f"torch.tanh({v} @ w)",                                   # opaque: cuts a chain
    lambda g, v, values: f"{v} - {v}.{pick(g, ('sum', 'mean', 'amax'))}(-1, keepdim=True)",  # a reduction read back
    lambda g, v, values: f"({v} * 2.0).reshape(-1).view({v}.shape) + 1.0",         # views
    lambda g, v, values: f"(torch.exp({v}.double() * 0.5) - 1.0).float()",         # a float64 stretch
)


def _one_or_two_returned(g: torch.Generator, values: list[str]) -> str:
    extra = values[2 + draw(g, len(values) - 2)]
    return values[-1] + (f", {extra}" if extra != values[-1] and draw(g, 2) else "")


def random_program(g: torch.Generator, steps: int | None = None, doubles: bool = True) -> Program:
    """A random straight-line program over x, b, w, y: unary ops, scalars, the broadcast bias, adds
    of two values, matmuls, last-axis reductions read back by a broadcast, views, float64 stretches."""
    drawn = draw_program(g, STEPS if doubles else STEPS[:-1], steps or 4 + draw(g, 6), params=("x", "b", "w", "y"),
                         start=("x", "y"), returns=_one_or_two_returned)
    return program(drawn.body, 2 + draw(g, 4), 3 + draw(g, 6))


def _grouping_hidden(g: torch.Generator) -> list[Group]:
    return [
        Group("random programs", [_grouping_case(random_program(g), g) for _ in range(12)]),
        Group("reductions, cycles, second inputs",
              [_grouping_case(p, g) for p in (ROWS, NORM, CYCLE, SIDE, SECOND_INPUT)]),
    ]


GROUP_FUSIBLE = Exercise(
    id="nb09_fusion_memory.group_fusible",
    reference=_grouping_reference,
    public=_grouping_public,
    hidden=_grouping_hidden,
    hint="walk graph.nodes in order; a node whose classify() is not None joins the group of the first input it "
         "may join (same iteration shape, dtype and device; it reads no reduction of that group; the group is "
         "not sealed), else it starts a group; then every group it reads but did not join is sealed; return the "
         "groups of two or more members",
    forbidden=(f"{FUSION}.group_fusible.library", f"{FUSION}._can_join", f"{FUSION}._recompute_closure"),
    given=(f"{FUSION}.classify",),
    extra_hints={
        OpaqueOpFused: "only a node whose classify(node) is not None may go in a group: elementwise ops and "
                       "last-axis sums/means/maxima; a matmul, a reshape or a conversion stays a torch call",
        ReductionReadInItsGroup: "a reduction's value exists only once its whole row is done: a node that reads "
                                 "a reduction may not join the reduction's group (start a new one)",
        FusionCycle: "a group is one kernel that runs at one moment: once a node outside the group (a matmul) has "
                     "read one of its values, the group is sealed; joining it later makes a cycle",
        ReaderBeforeKernel: "the kernel runs where the group's last member was: once a node outside the group has "
                            "read one of its values, the group is sealed and no later node may join it",
        WrongIterationShape: "a group has one iteration shape: an elementwise node's own shape, a reduction's "
                             "input shape; a node may join only a group with its shape, dtype and device",
        RecursionError: "your function calls the stage group_fusible itself, which now calls yours: "
                        "write the grouping with classify and Group alone",
        TypeError: "return a list of fusion.Group objects: Group(id, shape, dtype, device), members appended in order",
    },
    call=_run_with_grouping,
    show=show_program,
    parts=("the compiled program's results", "the number of ops the compiled program runs"),
    truth_once=True,           # the library's stage on each public case: computed once per grading worker (checks/truths.py)
)


def check_group_fusible(group_fusible, hidden: bool = False) -> None:
    """Check ``group_fusible(graph) -> list[Group]`` inside tensorcraft.compile: legal groups, eager's
    results, and no more ops than the notebook's rules reach."""
    GROUP_FUSIBLE.check(group_fusible, hidden=hidden)


# ---------------------------------------------------------------- exercise 2: storage_lifetimes


def _lifetime_lines(graph: Graph, lifetime: Any) -> list[str]:
    """'name: step' for every node that owns its memory, in graph order (what the check compares)."""
    if not isinstance(lifetime, dict):
        raise TypeError(f"storage_lifetimes must return a dict {{node: step}}, got {lifetime!r:.80}")
    lines = []
    for n in graph.nodes:
        if n.kind == "output" or n.aliases is not None:
            continue
        step = lifetime.get(n)
        lines.append(f"{n.name} ({n.op}) needed until step {step}" if isinstance(step, int)
                     else f"{n.name} ({n.op}) missing from your dict")
    return lines


def _lifetimes_reference(program: Program, inputs: tuple) -> tuple:
    _, graph, _, _ = _compiled(program, inputs)
    return _eager(program, inputs), _lifetime_lines(graph, storage_lifetimes.library(graph))


def _run_with_lifetimes(learner: Callable, program: Program, inputs: tuple) -> tuple:
    """tensorcraft.compile with the learner's liveness (the library's planner reuses slots by it); the
    lifetimes compared are those it answered for the graph the planner was given."""
    out, graph, _, run = _compiled(program, inputs, "storage_lifetimes", learner)
    answered = [call.returned for call in run.calls if call.args and call.args[0] is graph]
    return out, _lifetime_lines(graph, answered[-1] if answered else learner(graph))


VIEWS = program(("h = torch.tanh(x * 2.0 + b)", "v = h.reshape(-1)", "z = torch.sigmoid(x @ w) * 3.0", "q = z @ w",
                 "return v.view(x.shape) * q + 1.0"))
ROWS_THEN_MORE = program(("e = torch.exp(x - 1.0)", "s = e.sum(-1, keepdim=True)", "r = torch.sigmoid(e / s)",
                          "return torch.tanh(r @ w)"))
RETURNED_VIEW = program(("h = torch.exp(x - 1.0) * 2.0", "s = torch.tanh(h @ w) + 1.0", "return s * 2.0, h.t()"))
UNUSED = program(("a = torch.relu(x) + 1.0", "unused = a * 3.0", "return torch.tanh(a @ w) * 2.0"))


def _lifetimes_case(program: Program, g: torch.Generator, note: str = "") -> Case:
    return Case((program, program.inputs(g)), note or repr(program))


def _lifetimes_public() -> list[Group]:
    g = torch.Generator().manual_seed(90)
    return [
        Group("values read by later nodes", [
            _lifetimes_case(OPAQUE, g, "two kernels and two matmuls"),
            _lifetimes_case(CYCLE, g, "a value read twice: its last reader counts"),
        ]),
        Group("views keep the storage they look into alive", [
            _lifetimes_case(VIEWS, g, "h is read through the views v and v.view(...)"),
        ]),
        Group("returned values live to the end", [
            _lifetimes_case(RETURNED_VIEW, g, "h is returned through the view h.t()"),
            _lifetimes_case(SIDE, g, "two values returned"),
        ]),
    ]


def _lifetimes_hidden(g: torch.Generator) -> list[Group]:
    return [Group("random programs", [_lifetimes_case(random_program(g), g) for _ in range(12)]),
            Group("views and returned views", [_lifetimes_case(p, g) for p in (VIEWS, RETURNED_VIEW)])]


STORAGE_LIFETIMES = Exercise(
    id="nb09_fusion_memory.storage_lifetimes",
    reference=_lifetimes_reference,
    public=_lifetimes_public,
    hidden=_lifetimes_hidden,
    hint="start every node at its own index; for every node i and every input, raise the entry of input.storage "
         "(not of the input itself) to i; then every value the output node reads lives until len(graph.nodes), "
         "again through .storage",
    forbidden=(f"{MEMORY}.storage_lifetimes.library",),
    extra_hints={
        RecursionError: "your function calls the stage storage_lifetimes itself, which now calls yours: "
                        "walk graph.nodes yourself",
        KeyError: "your dict must hold every node of the graph (start with {node: its index})",
        TypeError: "return a dict that maps each Node to an int step",
    },
    call=_run_with_lifetimes,
    show=show_program,
    parts=("the compiled program's results", "the last step of each storage ('name: step')"),
    truth_once=True,           # the library's stage on each public case: computed once per grading worker (checks/truths.py)
)


def check_storage_lifetimes(storage_lifetimes, hidden: bool = False) -> None:
    """Check ``storage_lifetimes(graph) -> {node: step}`` inside tensorcraft.compile."""
    STORAGE_LIFETIMES.check(storage_lifetimes, hidden=hidden)


# ---------------------------------------------------------------- exercise 3: plan_memory


class BadPlan(ValueError):
    """A memory plan that would corrupt values or allocate wrongly."""


class LiveBufferReused(BadPlan):
    pass


class SlotTooSmall(BadPlan):
    pass


class SlotOfAnotherKind(BadPlan):
    pass


class ReturnedValueInSlot(BadPlan):
    pass


def check_plan(graph: Graph, plan: Any) -> MemoryPlan:
    """Raise a BadPlan naming the values when the plan is unsafe; else return it."""
    if not isinstance(plan, MemoryPlan):
        raise TypeError(f"plan_memory must return a MemoryPlan, got {plan!r:.80}")
    index = {n: i for i, n in enumerate(graph.nodes)}
    lifetime = storage_lifetimes.library(graph)
    returned = {o.storage for o in graph.output.inputs}
    placed = sorted(plan.slot_of, key=lambda n: index.get(n, -1))
    for n in placed:
        slot = plan.slot_of[n]
        if n not in index or not is_kernel_output(n):
            raise BadPlan(f"slot_of holds {n.name}, which is not a kernel output of this graph "
                          "(only the buffers fused kernels write are planned)")
        if n in returned:
            raise ReturnedValueInSlot(f"{n.name} is returned to the caller but sits in slot {slot}: the next call "
                                      "would overwrite what the caller holds")
        if not isinstance(slot, int) or not 0 <= slot < len(plan.slots):
            raise BadPlan(f"slot_of[{n.name}] is {slot!r}, but plan.slots has {len(plan.slots)} slots")
        s, numel = plan.slots[slot], math.prod(n.shape)
        if s.dtype != n.dtype or torch.device(s.device) != torch.device(n.device):
            raise SlotOfAnotherKind(f"{n.name} is {n.dtype} on {n.device}, but slot {slot} holds {s.dtype} on "
                                    f"{s.device}")
        if s.numel < numel:
            raise SlotTooSmall(f"{n.name} has {numel} elements, but slot {slot} holds {s.numel}")
    for k, a in enumerate(placed):
        for b in placed[k + 1:]:
            written = index[b.args[0]]  # b's kernel writes b while it reads its inputs
            if plan.slot_of[a] == plan.slot_of[b] and lifetime[a] >= written:
                when = ("at that very step (the kernel reads a while it writes b)" if lifetime[a] == written
                        else f"until step {lifetime[a]}")
                raise LiveBufferReused(f"slot {plan.slot_of[a]}: {b.name} is written at step {written}, but "
                                       f"{a.name}, in the same slot, is needed {when}")
    return plan


def _placeable(graph: Graph) -> list[Node]:
    returned = {o.storage for o in graph.output.inputs}
    return [n for n in graph.nodes if is_kernel_output(n) and n not in returned]


def _kind(dtype: torch.dtype, device: Any) -> str:
    return f"{str(dtype).removeprefix('torch.')} on {torch.device(device)}"


def fewest_slots(graph: Graph) -> dict[tuple[torch.dtype, torch.device], list[int]]:
    """For each (dtype, device) of the kernel buffers a plan may place: as many sizes (elements, largest
    first) as values of that kind are alive at once at the busiest step. That count is the fewest slots
    any safe plan needs (liveness intervals colour like an interval graph: greedy reuse reaches it), and
    slots sized by the largest values are the most such a plan ever needs."""
    index = {n: i for i, n in enumerate(graph.nodes)}
    lifetime = storage_lifetimes.library(graph)
    by_kind: dict[tuple[torch.dtype, torch.device], list[Node]] = {}
    for n in _placeable(graph):
        by_kind.setdefault((n.dtype, torch.device(n.device)), []).append(n)
    fewest = {}
    for kind, values in by_kind.items():
        busiest = max(sum(1 for n in values if index[n.args[0]] <= step <= lifetime[n])
                      for step in range(len(graph.nodes)))
        fewest[kind] = sorted((math.prod(n.shape) for n in values), reverse=True)[:busiest]
    return fewest


def _peak_bound(graph: Graph) -> int:
    """The planned peak of a plan with the fewest slots, each no bigger than needed (an upper bound)."""
    slot_bytes = sum(sum(sizes) * dtype.itemsize for (dtype, _), sizes in fewest_slots(graph).items())
    placeable = set(_placeable(graph))
    lifetime = storage_lifetimes.library(graph)
    others = [(i, n) for i, n in enumerate(graph.nodes) if allocates(n) and n not in placeable]
    return slot_bytes + max((sum(n.nbytes for i, n in others if i <= step <= lifetime[n])
                             for step in range(len(graph.nodes))), default=0)


def _slot_lines(graph: Graph, plan: MemoryPlan) -> list[str]:
    """'N slot(s) for float32 on cpu' for each kind of slot the plan has or needs."""
    counts = {_kind(*kind): 0 for kind in fewest_slots(graph)}
    for s in plan.slots:
        counts[_kind(s.dtype, s.device)] = counts.get(_kind(s.dtype, s.device), 0) + 1
    return [f"{count} slot(s) for {kind}" for kind, count in sorted(counts.items())]


def _plan_reference(program: Program, inputs: tuple) -> tuple:
    _, graph, _, _ = _compiled(program, inputs)
    slots = [f"{count} slot(s) for {kind}"
             for kind, count in sorted((_kind(*k), len(sizes)) for k, sizes in fewest_slots(graph).items())]
    return _eager(program, inputs), slots, f"planned peak at most {_peak_bound(graph)} bytes"


def _run_with_planner(learner: Callable, program: Program, inputs: tuple) -> tuple:
    """tensorcraft.compile with the learner's plan_memory; the plan is checked before the wrapper uses it."""
    out, graph, plan, _ = _compiled(program, inputs, "plan_memory", learner, then=check_plan)
    peak, bound = max(memory_timeline(graph, plan).planned, default=0), _peak_bound(graph)
    return out, _slot_lines(graph, plan), (f"planned peak at most {bound} bytes" if peak <= bound
                                           else f"planned peak {peak} bytes")


MIXED = program(("h = torch.tanh(x * 2.0 + b)", "s = h.sum(-1, keepdim=True) * 0.5", "m = h @ w",
                 "t = torch.sigmoid(m - s) + 1.0", "u = torch.tanh(t @ w) * 2.0", "return u @ w"))
DOUBLES = program(("d = (torch.exp(x.double()) + 1.0) * 0.5", "h = torch.tanh(d.float() @ w) + 1.0",
                   "e = torch.sin(h.double() @ w.double()) * 2.0", "return torch.relu(e.float() @ w) * 3.0"))
SMALL_THEN_BIG = program(("s = (torch.tanh(x) * 2.0).sum(-1, keepdim=True)", "m = s @ w[:1]",
                          "return torch.sigmoid(m * 2.0 + 1.0) @ w"))
LONG_CHAIN = program(tuple("x = torch.tanh(x * 2.0 + 1.0) @ w" for _ in range(5)) + ("return x",))


def _plan_case(program: Program, g: torch.Generator, note: str = "") -> Case:
    return Case((program, program.inputs(g)), note or repr(program))


def _plan_public() -> list[Group]:
    g = torch.Generator().manual_seed(900)
    return [
        Group("a chain of kernels needs one slot", [
            _plan_case(LONG_CHAIN, g, "five times tanh(x * 2 + 1) @ w: each buffer dies when the next is written"),
        ]),
        Group("values still needed keep their slot", [
            _plan_case(CYCLE, g, "a is read again after the matmul"),
            _plan_case(ROWS_THEN_MORE, g, "the kernel of r reads e and s while it writes r"),
            _plan_case(VIEWS, g, "h is read later through a view, after z is written"),
        ]),
        Group("slots of the right dtype and size; returned values stay out", [
            _plan_case(MIXED, g, "a [rows, 1] sum buffer, then [rows, cols] buffers"),
            _plan_case(SMALL_THEN_BIG, g, "a [rows, 1] buffer dies; the only free slot must grow for a [rows, cols] one"),
            _plan_case(DOUBLES, g, "float64 and float32 kernels"),
            _plan_case(RETURNED_VIEW, g, "h is returned (through a view)"),
        ]),
    ]


def _plan_meta() -> list[Group]:
    g = torch.Generator().manual_seed(901)
    return [Group("on the meta device: slots on the values' device (shapes only, no GPU needed)",
                  [_plan_case(MIXED, g, "a [rows, 1] sum buffer, then [rows, cols] buffers, on meta tensors")])]


def _plan_hidden(g: torch.Generator) -> list[Group]:
    return [Group("random programs", [_plan_case(random_program(g, 6 + draw(g, 6)), g) for _ in range(12)]),
            Group("sizes, dtypes, views", [_plan_case(p, g) for p in (MIXED, DOUBLES, VIEWS, ROWS_THEN_MORE,
                                                                      SMALL_THEN_BIG)])]


PLAN_MEMORY = Exercise(
    id="nb09_fusion_memory.plan_memory",
    reference=_plan_reference,
    public=_plan_public,
    hidden=_plan_hidden,
    hint="for each kernel output in graph order: a returned value goes to plan.fresh; otherwise take a slot whose "
         "value's lifetime ended before this kernel's step (strictly), of the same dtype and device: the smallest "
         "that fits, else grow the largest free one, else add a slot; remember until when the slot is busy",
    forbidden=(f"{MEMORY}.plan_memory.library",),
    given=(f"{MEMORY}.frees_at_last_use", f"{MEMORY}.measure_peaks"),
    extra_hints={
        LiveBufferReused: "a slot is free for a new value only after the step of its current value's last use: "
                          "compare lifetime[old] < step of the kernel that writes the new value (strictly: at the "
                          "last use's own step the kernel still reads the old value), and use storage_lifetimes, "
                          "which keeps views and returned values alive",
        SlotTooSmall: "a slot must hold the whole value: take a free slot with slot.numel >= the value's number of "
                      "elements, or grow the largest free slot (slot.numel = numel), or add a slot",
        SlotOfAnotherKind: "a slot holds one dtype on one device: reuse only a free slot whose dtype and device are "
                           "the value's",
        ReturnedValueInSlot: "a value the caller receives (graph.output's inputs, and what their views look into) "
                             "must get fresh memory: put it in plan.fresh, never in a slot",
        BadPlan: "plan.slot_of maps kernel outputs (is_kernel_output) to indexes into plan.slots",
        RecursionError: "your function calls the stage plan_memory itself, which now calls yours",
        TypeError: "return the MemoryPlan (the last line of the template returns measure_peaks(graph, plan))",
    },
    call=_run_with_planner,
    show=show_program,
    parts=("the compiled program's results", "the slots of your plan", "the planned peak"),
    on_meta=_plan_meta,
    truth_once=True,           # the library's stage on each public case: computed once per grading worker (checks/truths.py)
)


def check_plan_memory(plan_memory, hidden: bool = False) -> None:
    """Check ``plan_memory(graph) -> MemoryPlan`` inside tensorcraft.compile: never a live buffer reused,
    the fewest slots, the planned peak, and eager's results."""
    PLAN_MEMORY.check(plan_memory, hidden=hidden)


EXERCISES = {exercise.name: exercise for exercise in (GROUP_FUSIBLE, STORAGE_LIFETIMES, PLAN_MEMORY)}
