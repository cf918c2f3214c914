"""Operator fusion: chains of elementwise ops (and one last-axis reduction at their end) -> one Kernel.

Eager torch runs ``gelu(x + b) * 2`` as three ops, each reading and writing a whole tensor.
A fused kernel reads x and b once and writes one result. This pass groups nodes greedily, in
topological order: an elementwise node joins the group of one of its inputs when

  * it has the group's iteration shape (its inputs broadcast to it),
  * it does not read a reduction of that group (a reduction's value exists only at the end),
  * none of its other inputs depends on the group (that would be a cycle),
  * no node outside the group has already read the group (the group is then "sealed": it
    must run before that reader).

A sum/mean/amax/amin over the last axis joins the group of its input the same way and becomes
a reduced output. Each group of two or more nodes becomes a `kernel` node carrying a
`codegen.kernel.Kernel`; the values other nodes still read become its outputs (`getitem` nodes
that keep the names of the values they replace). Single nodes stay torch calls.

Recomputation (as Inductor does for softmax): a node that reads a value from a group ending in
a reduction cannot join that group (the reduction is only known at its end), but instead of
reading the stored value it may *recompute* it from the group's inputs. So softmax becomes
three kernels that each read x and write only what the next needs: max, sum(exp(x - max)),
exp(x - max) / sum; no intermediate [n, d] tensor is written at all. A value is recomputed only
when that reads at most one full-size tensor the group does not read already (what loading the
value would cost): a residual stream ``x + a + b + ...`` is stored once, not summed again by
every later reader.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

import torch

from ..plans import Buffer, Kernel, Output, Stmt
from ..ir import Graph, Node
from ...stages import swappable
from .dce import eliminate_dead_code

UNARY_OPS = {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "gelu",
             "silu", "erf", "reciprocal"}
BINARY_OPS = {"add": ("add", False), "sub": ("sub", False), "mul": ("mul", False), "div": ("div", False),
              "maximum": ("maximum", False), "minimum": ("minimum", False), "pow": ("pow", False),
              "radd": ("add", True), "rsub": ("sub", True), "rmul": ("mul", True), "rdiv": ("div", True),
              "rpow": ("pow", True)}
REDUCTION_OPS = {"sum": "sum", "mean": "mean", "amax": "max", "amin": "min"}
KERNEL_DTYPES = {torch.float32: "float32", torch.float64: "float64"}


@dataclass
class Elementwise:
    """What a fusible node computes: a kernel op over operands (nodes or numbers), or a reduction."""
    op: str
    operands: list            # Node | float
    reduce: str | None = None
    keepdim: bool = True


def classify(node: Node) -> Elementwise | None:
    """The kernel meaning of a node, or None if it cannot be fused."""
    if node.kind != "call" or node.dtype not in KERNEL_DTYPES or node.shape is None:
        return None
    args, kwargs = list(node.args), dict(node.kwargs)
    if not args or not isinstance(args[0], Node) or args[0].dtype != node.dtype:
        return None
    if node.op in UNARY_OPS:
        extra = args[1:] + list(kwargs.values())
        allowed = [False, "none"]  # relu/silu inplace=False, gelu approximate="none"
        if any(v not in allowed for v in extra) or (node.op == "gelu" and "tanh" in extra):
            return None
        return Elementwise(node.op, [args[0]])
    if node.op == "square" and len(args) == 1 and not kwargs:
        return Elementwise("mul", [args[0], args[0]])
    if node.op in BINARY_OPS and len(args) == 2:
        if kwargs.get("alpha", 1) != 1 or kwargs.get("rounding_mode") is not None or \
                set(kwargs) - {"alpha", "rounding_mode"}:
            return None
        other = args[1]
        if isinstance(other, Node):
            if other.dtype != node.dtype or other.device != node.device or other.shape is None:
                return None
        elif isinstance(other, bool) or not isinstance(other, (int, float)):
            return None
        op, swapped = BINARY_OPS[node.op]
        return Elementwise(op, [other, args[0]] if swapped else [args[0], other])
    if node.op in REDUCTION_OPS:
        dim = kwargs.pop("dim", args[1] if len(args) > 1 else None)
        keepdim = kwargs.pop("keepdim", args[2] if len(args) > 2 else False)
        rank = len(args[0].shape or ())
        if isinstance(dim, (list, tuple)) and len(dim) == 1:
            dim = dim[0]
        if kwargs or len(args) > 3 or not isinstance(dim, int) or rank == 0 or dim not in (-1, rank - 1):
            return None
        return Elementwise(REDUCTION_OPS[node.op], [args[0]], reduce=REDUCTION_OPS[node.op], keepdim=bool(keepdim))
    return None


@dataclass
class Group:
    id: int
    shape: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    members: list[Node] = field(default_factory=list)
    sealed: bool = False
    recomputed: dict[Node, None] = field(default_factory=dict)  # values of other groups computed again here

    def has_reduction(self, meaning) -> bool:
        return any(meaning[m].reduce is not None for m in self.members)


@swappable
def group_fusible(graph: Graph, *, recompute: bool = True) -> list[Group]:
    """The groups worth a kernel (two or more nodes, or values recomputed), greedily in topological
    order by the rules of the module docstring. Reads the graph, changes nothing. ``recompute=False``:
    the plain rules alone, every value read from memory (what notebook 09 asks a learner to write)."""
    meaning = {n: classify(n) for n in graph.nodes}
    group_of: dict[Node, Group] = {}
    upstream: dict[Node, set[int]] = {}
    groups: list[Group] = []
    for node in graph.nodes:
        ups: set[int] = set()
        for i in node.inputs:
            ups |= upstream.get(i, set())
            if i in group_of:
                ups.add(group_of[i].id)
        upstream[node] = ups
        m = meaning[node]
        chosen = None
        if m is not None:
            space = tuple(m.operands[0].shape) if m.reduce else tuple(node.shape)
            for i in node.inputs:
                g = group_of.get(i)
                if g is not None and _can_join(node, m, g, space, group_of, meaning, upstream):
                    chosen = g
                    break
            if chosen is None:
                chosen = Group(len(groups), space, node.dtype, node.device)
                groups.append(chosen)
            chosen.members.append(node)
            group_of[node] = chosen
            for i in node.inputs if recompute else ():  # values of reduction groups: recompute, not reload
                g = group_of.get(i)
                if g is not None and g is not chosen and meaning[i].reduce is None and g.has_reduction(meaning):
                    more = _recompute_closure(i, chosen, meaning, group_of, upstream)
                    if more is not None:
                        chosen.recomputed.update(dict.fromkeys(more))
        for i in node.inputs:  # a reader outside a group seals it
            if i in group_of and group_of[i] is not chosen:
                group_of[i].sealed = True
    return [g for g in groups if len(g.members) >= 2 or g.recomputed]


@swappable
def fuse_elementwise(graph: Graph) -> Graph:
    """Replace each group of ``group_fusible`` by one kernel node."""
    graph = graph.copy()
    fused = group_fusible(graph)
    if not fused:
        return graph
    meaning = {n: classify(n) for n in graph.nodes}
    users = graph.users()
    group_of = {n: g for g in fused for n in g.members}

    def stored(n: Node) -> bool:
        """Does a reader outside n's group need n's value in memory (rather than recompute it)?"""
        for u in users[n]:
            g = group_of.get(u)
            if g is group_of[n]:
                continue
            if g is None or n not in g.recomputed:
                return True
        return False

    replaced: dict[Node, Node] = {}  # fused values -> the kernel output (or view) that now holds them
    for group in fused:
        graph.insert_before(group.members[-1], _build_kernel(graph, group, meaning, stored, replaced))
    graph.remove([n for g in fused for n in g.members])
    return eliminate_dead_code.library(graph)  # torch calls whose every reader now recomputes them


def _recompute_closure(value: Node, group: Group, meaning, group_of, upstream, limit: int = 12) -> list[Node] | None:
    """The nodes ``group`` must compute again to have ``value`` (producers first), or None if it cannot
    or should not: only elementwise nodes of the group's shape are recomputed; everything else is
    loaded, and a load must not depend on the group itself (a cycle). Recomputing must not read more
    memory than loading ``value`` would: at most one full-size tensor the group does not read yet
    (softmax's ``exp(x - max)`` from x: yes; a residual stream summed again from every layer: no)."""
    chosen: dict[Node, None] = {}
    loads: dict[Node, None] = {}

    def visit(x: Node) -> bool:
        if x in chosen or x in group.recomputed:
            return True
        if x in group.members:
            return meaning[x].reduce is None
        mx = meaning.get(x)
        if mx is None or mx.reduce is not None or x not in group_of or tuple(x.shape) != group.shape:
            loads[x] = None
            return group_of.get(x) is not group and group.id not in upstream.get(x, set())  # load it
        if not all(visit(o) for o in mx.operands if isinstance(o, Node)):
            return False
        chosen[x] = None
        return len(chosen) + len(group.recomputed) <= limit

    if not visit(value):
        return None
    inside = set(group.members) | set(group.recomputed)
    read = {i for n in inside for i in n.inputs if i not in inside}
    size = math.prod(group.shape)
    new_full_loads = [x for x in loads if x not in read and math.prod(x.shape or ()) == size]
    return list(chosen) if len(new_full_loads) <= 1 else None


def _can_join(node: Node, m: Elementwise, g: Group, space: tuple, group_of, meaning, upstream) -> bool:
    if g.sealed or g.shape != space or g.dtype != node.dtype or g.device != node.device:
        return False
    for i in node.inputs:
        if group_of.get(i) is g:
            if meaning[i].reduce is not None:
                return False
        elif g.id in upstream.get(i, set()):
            return False
    return True


def _build_kernel(graph: Graph, group: Group, meaning, stored, replaced: dict[Node, Node]) -> list[Node]:
    """The kernel node, its getitem outputs, and views for keepdim=False reductions."""
    rank = len(group.shape)
    inputs: list[Node] = []
    buffers: list[Buffer] = []
    stmts: list[Stmt] = []
    value: dict[Node, str] = {}

    def operand(x) -> str:
        if isinstance(x, Node) and x in group.recomputed:
            if x not in value:
                m = meaning[x]
                args = tuple(operand(o) for o in m.operands)
                value[x] = f"r{len(stmts)}"
                stmts.append(Stmt(value[x], m.op, args))
            return value[x]
        x = replaced.get(x, x) if isinstance(x, Node) else x
        if isinstance(x, Node) and x in value:
            return value[x]
        if isinstance(x, Node):  # an input from outside the group: load it once
            shape = (1,) * (rank - len(x.shape)) + tuple(x.shape)
            buffers.append(Buffer(f"in{len(inputs)}", shape))
            inputs.append(x)
            name = f"x{len(inputs) - 1}"
            stmts.append(Stmt(name, "load", (buffers[-1].name,)))
            value[x] = name
            return name
        name = f"c{len(stmts)}"
        stmts.append(Stmt(name, "const", (float(x),)))
        return name

    outputs: list[tuple[Output, Node]] = []
    for n in group.members:
        m = meaning[n]
        args = tuple(operand(x) for x in m.operands)
        escapes = stored(n)
        if m.reduce is not None:
            outputs.append((Output(f"out{len(outputs)}", args[0], m.reduce), n))
            continue
        name = f"v{len(stmts)}"
        stmts.append(Stmt(name, m.op, args))
        value[n] = name
        if escapes:
            outputs.append((Output(f"out{len(outputs)}", name), n))
    if not outputs:  # every reader recomputes this group's values: nothing left to run
        return []
    knode = graph.create("kernel", "kernel", None, tuple(inputs), name="fused", device=group.device,
                         attrs={"fused": ", ".join(n.op for n in group.members),
                                "recomputes": ", ".join(n.op for n in group.recomputed)})
    kernel = Kernel(knode.name, group.shape, tuple(buffers), tuple(stmts), tuple(o for o, _ in outputs),
                    KERNEL_DTYPES[group.dtype])
    knode.target = kernel  # the kernel is named as its node: the wrapper calls it by that name
    result = [knode]
    for index, (out, original) in enumerate(outputs):
        shape = kernel.output_shape(out)
        needs_view = tuple(original.shape) != tuple(shape)
        item = graph.create("call", "getitem", operator.getitem, (knode, index), name=f"{original.name}_out",
                            shape=shape, dtype=group.dtype, device=group.device)
        result.append(item)
        replacement = item
        if needs_view:
            replacement = graph.create("call", "view", torch.Tensor.view, (item, tuple(original.shape)),
                                       name=f"{original.name}_view", shape=original.shape, dtype=group.dtype,
                                       device=group.device, aliases=item)
            result.append(replacement)
        graph.replace_all_uses(original, replacement)
        replaced[original] = replacement
    return result
