"""The compiler's intermediate representation: a `Graph` of `Node`s in topological order.

Small on purpose (an fx.Graph without the tracing machinery): every node is one value with a
kind, an op name, a callable target, arguments that may refer to earlier nodes, and the shape,
dtype and device the value had when it was captured. Every pass reads and writes this.

Node kinds:
    placeholder  an input of the compiled function (attrs["index"]: position among the flat inputs)
    param        a parameter or buffer of the module, read at every call (target: its qualified name)
    constant     a tensor baked into the graph (target: the tensor), e.g. a folded value
    call         a torch call (target: the callable; op: its canonical name, e.g. "add", "linear")
    kernel       a fused group (target: a codegen.kernel.Kernel; args: its input nodes); its outputs
                 are read by `getitem` call nodes
    output       the last node; args: the flat list of returned nodes
"""
from __future__ import annotations

import builtins
import keyword
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

# Names generated code uses for itself; node names never take them.
RESERVED = {"torch", "operator", "tensorcraft", "forward", "math", "functional"} | set(dir(builtins)) \
    | set(keyword.kwlist)
KINDS = ("placeholder", "param", "constant", "call", "kernel", "output")


@dataclass(eq=False)
class Node:
    """One value of the program. Identity matters (eq=False): two nodes are never 'equal'."""
    name: str
    kind: str
    op: str
    target: Any = None
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    shape: tuple[int, ...] | None = None
    dtype: torch.dtype | None = None
    device: torch.device | None = None
    attrs: dict = field(default_factory=dict)

    @property
    def inputs(self) -> list[Node]:
        """The nodes this node reads, in argument order, each once."""
        seen: dict[int, Node] = {}
        for value in _leaves((self.args, self.kwargs)):
            if isinstance(value, Node):
                seen.setdefault(id(value), value)
        return list(seen.values())

    @property
    def nbytes(self) -> int:
        """Size of the value in bytes (0 for non-tensor values or multi-output nodes)."""
        if self.shape is None or self.dtype is None:
            return 0
        numel = 1
        for d in self.shape:
            numel *= d
        return numel * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"%{self.name}"


def _leaves(value: Any) -> Iterator[Any]:
    """Walk nested tuples / lists / dicts / slices of arguments and yield the leaves."""
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, slice):
        yield from _leaves((value.start, value.stop, value.step))
    else:
        yield value


def map_args(value: Any, fn: Callable[[Node], Any]) -> Any:
    """Rebuild nested arguments with every Node replaced by fn(node)."""
    if isinstance(value, Node):
        return fn(value)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(map_args(v, fn) for v in value)
    if isinstance(value, tuple):  # namedtuple
        return type(value)(*(map_args(v, fn) for v in value))
    if isinstance(value, list):
        return [map_args(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_args(v, fn) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(map_args(value.start, fn), map_args(value.stop, fn), map_args(value.step, fn))
    return value


class Graph:
    """Nodes in topological order, plus how to unflatten the outputs (a pytree spec).

    `frozen` says whether parameters may be treated as constants (inference: no gradients needed,
    guarded by the parameters' versions); passes that fold parameters check it.
    """

    def __init__(self, frozen: bool = False) -> None:
        self.nodes: list[Node] = []
        self.output_spec: Any = None  # torch.utils._pytree.TreeSpec of the returned structure
        self.frozen = frozen
        self._names: dict[str, int] = {}
        self._used: set[str] = set()

    # -- building -----------------------------------------------------------------------------
    def fresh_name(self, base: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base).strip("_") or "v"
        if base[0].isdigit():
            base = "v" + base
        count = self._names.get(base, 0)
        name = base if count == 0 else f"{base}_{count}"
        while name in self._used or name in RESERVED:
            count += 1
            name = f"{base}_{count}"
        self._names[base] = count + 1
        self._used.add(name)
        return name

    def add(self, kind: str, op: str, target: Any = None, args: tuple = (), kwargs: dict | None = None,
            *, name: str | None = None, shape=None, dtype=None, device=None, attrs: dict | None = None) -> Node:
        if kind not in KINDS:
            raise ValueError(f"unknown node kind {kind!r}; expected one of {KINDS}")
        node = Node(self.fresh_name(name or op), kind, op, target, tuple(args), dict(kwargs or {}),
                    tuple(shape) if shape is not None else None, dtype, device, dict(attrs or {}))
        self.nodes.append(node)
        return node

    def add_like(self, value: Any, kind: str, op: str, target: Any = None, args: tuple = (),
                 kwargs: dict | None = None, *, name: str | None = None, attrs: dict | None = None) -> Node:
        """Add a node whose shape/dtype/device are read from an example value (a tensor or not)."""
        meta = tensor_meta(value)
        return self.add(kind, op, target, args, kwargs, name=name, attrs=attrs, **meta)

    # -- reading ------------------------------------------------------------------------------
    @property
    def placeholders(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "placeholder"]

    @property
    def params(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "param"]

    @property
    def output(self) -> Node:
        if not self.nodes or self.nodes[-1].kind != "output":
            raise ValueError("graph has no output node (it must be the last node)")
        return self.nodes[-1]

    def users(self) -> dict[Node, list[Node]]:
        """For every node, the nodes that read it (in order)."""
        result: dict[Node, list[Node]] = {n: [] for n in self.nodes}
        for n in self.nodes:
            for i in n.inputs:
                result[i].append(n)
        return result

    def copy(self) -> Graph:
        """A new graph with new nodes (same targets): passes work on copies, never in place."""
        new = Graph(frozen=self.frozen)
        new.output_spec = self.output_spec
        new._names = dict(self._names)
        new._used = set(self._used)
        mapping: dict[Node, Node] = {}
        for n in self.nodes:
            clone = Node(n.name, n.kind, n.op, n.target, map_args(n.args, mapping.__getitem__),
                         map_args(n.kwargs, mapping.__getitem__), n.shape, n.dtype, n.device, dict(n.attrs))
            mapping[n] = clone
            new.nodes.append(clone)
        return new

    def replace_all_uses(self, old: Node, new: Node) -> None:
        for n in self.nodes:
            if old in n.inputs:
                n.args = map_args(n.args, lambda a: new if a is old else a)
                n.kwargs = map_args(n.kwargs, lambda a: new if a is old else a)

    def count(self, kind: str | None = None, op: str | None = None) -> int:
        return sum(1 for n in self.nodes if (kind is None or n.kind == kind) and (op is None or n.op == op))

    def lint(self) -> None:
        """Raise ValueError if a node reads a node that is not defined before it."""
        defined: set[int] = set()
        for n in self.nodes:
            for i in n.inputs:
                if id(i) not in defined:
                    raise ValueError(f"node {n.name} reads {i.name}, which is not defined before it")
            defined.add(id(n))
        self.output  # noqa: B018  (raises if missing)

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __str__(self) -> str:
        return format_table(self)

    def _repr_pretty_(self, p, cycle) -> None:  # IPython prints the table
        p.text(str(self))


def returned_storages(graph: Graph) -> set[str]:
    """Names of the nodes whose memory the caller receives: the outputs and what they are views of."""
    by_name = {n.name: n for n in graph.nodes}
    returned: set[str] = set()
    for out in graph.output.inputs:
        name = out.name
        while name in by_name and name not in returned:
            returned.add(name)
            name = by_name[name].attrs.get("aliases")
    return returned


def tensor_meta(value: Any) -> dict:
    if isinstance(value, torch.Tensor):
        return {"shape": tuple(value.shape), "dtype": value.dtype, "device": value.device}
    return {"shape": None, "dtype": None, "device": None}


def format_arg(value: Any) -> str:
    """A short, readable rendering of one argument for the table."""
    if isinstance(value, Node):
        return value.name
    if isinstance(value, (tuple, list)):
        inner = ", ".join(format_arg(v) for v in value)
        return f"({inner}{',' if len(value) == 1 and isinstance(value, tuple) else ''})" \
            if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, torch.Tensor):
        return f"tensor{list(value.shape)}"
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    return repr(value)


def format_table(graph: Graph) -> str:
    """The graph as a table: one row per node (name, kind, op, arguments, shape, dtype)."""
    rows = [("name", "kind", "op", "args", "shape", "dtype")]
    for n in graph.nodes:
        if n.kind == "kernel":
            args = ", ".join(i.name for i in n.args)
        elif n.kind == "param":
            args = str(n.target)
        else:
            parts = [format_arg(a) for a in n.args] + [f"{k}={format_arg(v)}" for k, v in n.kwargs.items()]
            args = ", ".join(parts)
        if len(args) > 48:
            args = args[:45] + "..."
        shape = "" if n.shape is None else str(list(n.shape))
        dtype = "" if n.dtype is None else str(n.dtype).replace("torch.", "")
        rows.append((n.name, n.kind, n.op, args, shape, dtype))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


GETITEM = operator.getitem
