"""The compiler's intermediate representation: a `Graph` of `Node`s in topological order.

Small on purpose (an fx.Graph without the tracing machinery): every node is one value with a
kind, an op name, a callable target, arguments that may refer to earlier nodes, and the shape,
dtype and device the value had when it was captured. Every stage reads this; passes write it.

Node kinds:
    placeholder  an input of the compiled function (attrs["index"]: position among the flat inputs)
    param        a parameter or buffer of the module, read at every call (target: its qualified name;
                 attrs["value"]: the tensor at capture, what constant folding may use in a frozen graph)
    constant     a tensor baked into the graph (target: the tensor), e.g. a folded value
    call         a torch call (target: the callable; op: its canonical name, e.g. "add", "linear")
    kernel       a fused group (target: a codegen.kernel.Kernel; args: its input nodes); its outputs
                 are read by `getitem` call nodes (attrs["fused"]: the ops it computes, for people)
    output       the last node; args: the flat list of returned values

The rules, which every stage may rely on:
  1. Order: a node reads only nodes before it; the output node is last (``lint`` checks both).
  2. References, not names: a node's inputs, the node a view looks into (``node.aliases``), and
     every analysis (liveness, memory slots) hold `Node` objects. A name is for people and for the
     identifiers of generated code; names are unique within a graph.
  3. Only the graph's methods change the node list: ``add`` / ``create`` + ``insert_before``,
     ``replace`` (new nodes in place of one), ``replace_all_uses``, ``remove``. They keep every
     ``args`` and every ``aliases`` pointing at nodes in the graph (``remove`` refuses to drop a
     node something still reads or looks into).
  4. Values are pure: capture (through ``builder.GraphBuilder``) refuses randomness and turns an
     in-place update of an intermediate into its functional form, so any pass may drop, merge or
     reorder calls as long as rule 1 holds.
  5. A pass takes a graph and returns a graph; it works on ``graph.copy()`` and never changes the
     graph it was given (the captured graph stays what capture recorded).
"""
from __future__ import annotations

import builtins
import keyword
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import torch

from .. import trees

# Names generated code uses for itself; node names never take them.
RESERVED = {"torch", "operator", "tensorcraft", "forward", "math", "functional"} | set(dir(builtins)) \
    | set(keyword.kwlist)
KINDS = ("placeholder", "param", "constant", "call", "kernel", "output")


@trees.keep_whole
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
    aliases: Node | None = None   # a view: the node whose memory this value shares (one of its inputs)
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

    @property
    def storage(self) -> Node:
        """The node that owns this value's memory: itself, or what its view chain looks into."""
        node = self
        while node.aliases is not None:
            node = node.aliases
        return node

    def __repr__(self) -> str:
        return f"%{self.name}"


def _leaves(value: Any) -> list[Any]:
    """The leaves of nested arguments (the one walker: ``tensorcraft.trees``)."""
    return trees.leaves(value)


def map_args(value: Any, fn: Callable[[Node], Any]) -> Any:
    """Rebuild nested arguments with every Node replaced by fn(node)."""
    return trees.map_leaves(lambda v: fn(v) if isinstance(v, Node) else v, value)


class Graph:
    """Nodes in topological order, plus how to unflatten the outputs (a pytree spec).

    `frozen` says whether parameters may be treated as constants (inference: no gradients needed,
    guarded by the parameters' versions); passes that fold parameters check it.
    """

    def __init__(self, frozen: bool = False) -> None:
        self.nodes: list[Node] = []
        self.output_spec: Any = None  # torch.utils._pytree.TreeSpec of the returned structure
        self.frozen = frozen
        self.baked: set[str] = set()  # params whose values a pass baked in (the guards compare them)
        self.origin: dict[Node, Node] = {}  # node of a copy -> the node it copies, in the first graph copied
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

    def create(self, kind: str, op: str, target: Any = None, args: tuple = (), kwargs: dict | None = None,
               *, name: str | None = None, shape=None, dtype=None, device=None, aliases: Node | None = None,
               attrs: dict | None = None) -> Node:
        """A new node with a fresh name, not yet placed: put it in with ``insert_before`` or ``replace``."""
        if kind not in KINDS:
            raise ValueError(f"unknown node kind {kind!r}; expected one of {KINDS}")
        return Node(self.fresh_name(name or op), kind, op, target, tuple(args), dict(kwargs or {}),
                    tuple(shape) if shape is not None else None, dtype, device, aliases, dict(attrs or {}))

    def add(self, kind: str, op: str, target: Any = None, args: tuple = (), kwargs: dict | None = None,
            **details: Any) -> Node:
        """Create a node (see ``create``) and append it: how front-ends record, in program order."""
        node = self.create(kind, op, target, args, kwargs, **details)
        self.nodes.append(node)
        return node

    def add_like(self, value: Any, kind: str, op: str, target: Any = None, args: tuple = (),
                 kwargs: dict | None = None, **details: Any) -> Node:
        """Add a node whose shape/dtype/device are read from an example value (a tensor or not)."""
        return self.add(kind, op, target, args, kwargs, **details, **tensor_meta(value))

    def constant(self, value: torch.Tensor, name: str = "const") -> Node:
        """A new, unplaced constant node holding ``value``."""
        return self.create("constant", "constant", value, name=name, **tensor_meta(value))

    # -- changing -----------------------------------------------------------------------------
    def insert_before(self, anchor: Node, nodes: Sequence[Node]) -> None:
        """Place new nodes just before ``anchor``, in the order given."""
        at = self._index(anchor)
        self.nodes[at:at] = list(nodes)

    def replace_all_uses(self, old: Node, new: Node) -> None:
        """Every reader of ``old`` reads ``new`` instead, and every view of ``old`` looks into ``new``."""
        swap = lambda a: new if a is old else a  # noqa: E731
        for n in self.nodes:
            if n.aliases is old:
                n.aliases = new
            if old in n.inputs:
                n.args, n.kwargs = map_args(n.args, swap), map_args(n.kwargs, swap)

    def replace(self, old: Node, nodes: Sequence[Node], value: Node | None = None) -> None:
        """Put ``nodes`` where ``old`` is, make ``value`` (default: the last of them) stand for it
        everywhere (uses and views), and remove ``old``. Whether a new node is itself a view
        (``aliases``) is for the pass that creates it to say."""
        self.insert_before(old, nodes)
        self.replace_all_uses(old, nodes[-1] if value is None else value)
        self.remove([old])

    def remove(self, nodes: Sequence[Node]) -> None:
        """Drop nodes that nothing left in the graph reads or looks into (ValueError otherwise)."""
        gone = {id(n) for n in nodes}
        for n in self.nodes:
            if id(n) in gone:
                continue
            for i in n.inputs:
                if id(i) in gone:
                    raise ValueError(f"cannot remove {i.name}: {n.name} still reads it")
            if n.aliases is not None and id(n.aliases) in gone:
                raise ValueError(f"cannot remove {n.aliases.name}: {n.name} is a view of it")
        self.nodes = [n for n in self.nodes if id(n) not in gone]

    def _index(self, node: Node) -> int:
        for i, n in enumerate(self.nodes):
            if n is node:
                return i
        raise ValueError(f"{node.name} is not in this graph")

    def param_value(self, node: Node) -> torch.Tensor:
        """The tensor of a param node, for a pass that bakes it into the code (a frozen graph only);
        the name goes into ``baked``, so the guards compare that tensor's values at every call."""
        if node.kind != "param" or not self.frozen:
            raise ValueError(f"{node.name}: only a param node of a frozen graph can be baked in")
        self.baked.add(node.target)
        return node.attrs["value"]

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
        """A new graph with new nodes (same targets): passes work on copies, never in place. The copy's
        ``origin`` maps each new node to the one it copies (through copies of copies, to the first
        graph's): how a later stage finds a captured node's counterpart without matching names."""
        new = Graph(frozen=self.frozen)
        new.output_spec = self.output_spec
        new.baked = set(self.baked)
        new._names = dict(self._names)
        new._used = set(self._used)
        mapping: dict[Node, Node] = {}
        for n in self.nodes:
            clone = Node(n.name, n.kind, n.op, n.target, map_args(n.args, mapping.__getitem__),
                         map_args(n.kwargs, mapping.__getitem__), n.shape, n.dtype, n.device,
                         None if n.aliases is None else mapping[n.aliases], dict(n.attrs))
            mapping[n] = clone
            new.origin[clone] = self.origin.get(n, n)
            new.nodes.append(clone)
        return new

    def count(self, kind: str | None = None, op: str | None = None) -> int:
        return sum(1 for n in self.nodes if (kind is None or n.kind == kind) and (op is None or n.op == op))

    def lint(self) -> None:
        """Raise ValueError where a rule of the module docstring is broken: a node reads (or is a view
        of) a node not defined before it, two nodes share a name, or the output is not last."""
        defined: set[int] = set()
        names: set[str] = set()
        for n in self.nodes:
            for i in n.inputs:
                if id(i) not in defined:
                    raise ValueError(f"node {n.name} reads {i.name}, which is not defined before it")
            if n.aliases is not None and id(n.aliases) not in defined:
                raise ValueError(f"node {n.name} is a view of {n.aliases.name}, which is not defined before it")
            if n.name in names:
                raise ValueError(f"two nodes are called {n.name}")
            defined.add(id(n))
            names.add(n.name)
        self.output  # noqa: B018  (raises if missing)

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __str__(self) -> str:
        return format_table(self)

    def _repr_pretty_(self, p, cycle) -> None:  # IPython prints the table
        p.text(str(self))


def returned_storages(graph: Graph) -> set[Node]:
    """The nodes whose memory the caller receives: the outputs and every node their views look into."""
    returned: set[Node] = set()
    for out in graph.output.inputs:
        node: Node | None = out
        while node is not None and node not in returned:
            returned.add(node)
            node = node.aliases
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

