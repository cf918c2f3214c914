"""The one graph builder: the only code that records a call into a `Graph`.

Both front-ends feed it: ``capture`` (a TorchFunctionMode that sees each torch call the program
makes) and ``dynamo_backend`` (an fx graph handed over by torch.compile, run node by node). A
front-end only maps its own values to nodes (tensor identity for capture, fx nodes for the
converter); the builder decides everything else, the same way for both:

  * it runs each call on the real values of the recording run and keeps every node's value, so
    shapes and dtypes are the ones the program produced;
  * it refuses what a replayed graph could not reproduce (randomness, reading tensor values into
    Python, writes into an ``out=`` tensor, batch norm updating running statistics...) by raising
    `Refused` with the reason;
  * it records an in-place update of an intermediate nobody else sees as its functional form
    (``t.add_(1)`` -> ``t2 = add(t, 1)``), and refuses one on an input, a parameter, a constant or
    memory another value shares;
  * it records which input a result is a view of, as a reference: ``node.aliases``;
  * it returns what it recorded as a `Recorded`: the value, its node(s), and — for an in-place
    call — the node that now holds the updated argument, so a front-end binds what it is told and
    never re-derives whether a call was in place.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, NamedTuple

import torch

from .. import trees
from . import functional, opnames
from .ir import Graph, Node

# Values a call may return besides tensors: baked into the graph as they are.
PLAIN_RESULTS = (torch.Tensor, int, float, bool, complex, str, type(None), torch.Size, torch.dtype,
                 torch.device, torch.memory_format, torch.layout)

# fx spells `x += y` with operator.iadd, `b[i] = v` with operator.setitem: their functional twins
_OPERATOR_TWINS = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
                   operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
                   operator.imod: operator.mod, operator.ipow: operator.pow, operator.imatmul: operator.matmul,
                   operator.iand: operator.and_, operator.ior: operator.or_, operator.ixor: operator.xor,
                   operator.setitem: functional.index_put}
_NOT_RUN = object()


class Refused(Exception):
    """The call cannot be recorded faithfully; the message says why. ``result`` is what the call
    returned when it already ran (else the front-end finishes it itself)."""

    def __init__(self, reason: str, result: Any = _NOT_RUN) -> None:
        super().__init__(reason)
        self.result = result

    @property
    def ran(self) -> bool:
        return self.result is not _NOT_RUN


class Recorded(NamedTuple):
    """What one ``GraphBuilder.call`` recorded."""
    value: Any               # what the call returned (the program goes on with it)
    node: Any                # a Node for one tensor, a tuple of Nodes (and plain values) for several, else the value
    updated: Node | None = None  # an in-place call: the node that now holds its first argument's value

    def produced(self) -> list[tuple[torch.Tensor, Node]]:
        """(tensor, node) for every tensor the call returned or updated: what a front-end binds."""
        pairs = []
        if isinstance(self.value, torch.Tensor) and isinstance(self.node, Node):
            pairs.append((self.value, self.node))
        elif isinstance(self.node, tuple):
            pairs += [(v, n) for v, n in zip(self.value, self.node) if isinstance(n, Node)]
        return pairs


def is_inplace(func: Callable, op: str, kwargs: dict) -> bool:
    """Does this call update its first argument (``add_``, ``x += 1``, ``relu(x, inplace=True)``, ``b[i] = v``)?"""
    return func in _OPERATOR_TWINS or opnames.is_inplace_name(op) or kwargs.get("inplace") is True


def functional_form(func: Callable, op: str, kwargs: dict) -> tuple[Callable, dict] | None:
    """The pure twin of an in-place call and its kwargs; None when there is none (``zero_``, ``copy_``)."""
    if func in _OPERATOR_TWINS:
        return _OPERATOR_TWINS[func], dict(kwargs)
    if op == "setitem_":
        return functional.index_put, dict(kwargs)
    if kwargs.get("inplace") is True:
        return func, {**kwargs, "inplace": False}
    pure = getattr(torch.Tensor, op[:-1], None)
    return (pure, dict(kwargs)) if callable(pure) else None


def _storage(value: Any) -> int | None:
    """The address of a tensor's memory (None for no tensor, a meta tensor or an empty storage)."""
    if not isinstance(value, torch.Tensor) or value.device.type == "meta":
        return None
    storage = value.untyped_storage()
    return storage.data_ptr() if storage.nbytes() else None


class GraphBuilder:
    """Records a program, call by call, into ``self.graph``; ``self.values`` keeps each node's value."""

    def __init__(self) -> None:
        self.graph = Graph()
        self.values: dict[Node, Any] = {}   # the value each node had in the recording run (kept alive)

    # -- what the program starts from ---------------------------------------------------------
    def placeholder(self, value: Any, name: str, index: int) -> Node:
        return self._keep(self.graph.add_like(value, "placeholder", "placeholder", name=name,
                                              attrs={"index": index}), value)

    def param(self, value: torch.Tensor, qualname: str) -> Node:
        return self._keep(self.graph.add_like(value, "param", "param", qualname, name=qualname,
                                              attrs={"value": value}), value)

    def constant(self, value: torch.Tensor) -> Node:
        return self._keep(self.graph.add_like(value, "constant", "constant", value, name="const"), value)

    def output(self, values: list, spec: Any) -> Node:
        node = self.graph.add("output", "output", args=tuple(values))
        self.graph.output_spec = spec
        return node

    # -- calls --------------------------------------------------------------------------------
    def call(self, func: Callable, args: Any, kwargs: dict, real_args: tuple, real_kwargs: dict, *,
             op: str | None = None, name: str | None = None) -> Recorded:
        """Run ``func(*real_args, **real_kwargs)`` and record it; ``args``/``kwargs`` are the same
        arguments with the front-end's nodes in place of its values.

        Returns a `Recorded`: the value, and a Node for a tensor, a tuple of Nodes (and plain values)
        for several results, the plain value itself otherwise. An in-place call records its functional
        form; ``Recorded.updated`` is its node, which now stands for the first argument. Raises Refused."""
        op = op or opnames.canonical_name(func)
        why = opnames.refusal(op, real_args, real_kwargs)
        if why is None and real_kwargs.get("out") is not None:
            why = f"out= argument: {op} writes into an existing tensor"
        if why is not None:
            raise Refused(why)
        if is_inplace(func, op, real_kwargs):
            return self._functionalize(func, op, args, kwargs, real_args, real_kwargs, name)
        result = func(*real_args, **real_kwargs)
        return Recorded(result, self._record(func, op, args, kwargs, result, name or op))

    def _record(self, func: Callable, op: str, args: Any, kwargs: dict, result: Any, name: str) -> Any:
        if isinstance(result, torch.Tensor):
            node = self.graph.add_like(result, "call", op, func, args, kwargs, name=name,
                                       aliases=self._alias(result, args, kwargs))
            return self._keep(node, result)
        leaves = trees.leaves(result) if isinstance(result, (tuple, list)) else [result]
        if not any(isinstance(v, torch.Tensor) for v in leaves):
            if not all(isinstance(v, PLAIN_RESULTS) for v in leaves):
                raise Refused(f"unsupported result: {op} returned a {type(result).__name__}", result)
            return result  # shapes, sizes, dtypes: plain values, baked in (the guards pin the shapes)
        if not isinstance(result, (tuple, list)) or not all(isinstance(v, PLAIN_RESULTS) for v in result):
            raise Refused(f"unsupported result: {op} returned a nested {type(result).__name__}", result)
        multi = self.graph.add("call", op, func, args, kwargs, name=name)
        items = []
        for i, value in enumerate(result):
            if isinstance(value, torch.Tensor):
                item = self.graph.add_like(value, "call", "getitem", operator.getitem, (multi, i),
                                           name=f"{multi.name}_{i}", aliases=self._alias(value, args, kwargs))
                items.append(self._keep(item, value))
            else:
                items.append(value)
        return tuple(items)

    def _functionalize(self, func, op, args, kwargs, real_args, real_kwargs, name) -> Recorded:
        """Record ``t.op_(...)`` on a fresh intermediate ``t`` as ``op(t, ...)``; refuse anything else."""
        target, target_node = real_args[0] if real_args else None, args[0] if args else None
        if not isinstance(target, torch.Tensor) or not isinstance(target_node, Node):
            raise Refused(f"in-place op {op} on something that is not a tensor of the graph")
        twin = functional_form(func, op, real_kwargs)
        if twin is None:
            raise Refused(f"in-place op {op} has no functional form")
        pure, pure_kwargs = twin
        address = _storage(target)
        sharing = [n for n, v in self.values.items() if n is not target_node and _storage(v) == address] \
            if address is not None else []
        if any(n.kind != "call" for n in [target_node, *sharing]):
            raise Refused(f"in-place update of an input or parameter: {op}")
        if target._is_view() or sharing:
            raise Refused(f"in-place update of a tensor that shares memory with a view: {op}")
        expected = pure(*real_args, **pure_kwargs)
        if not isinstance(expected, torch.Tensor) or expected.dtype != target.dtype or expected.shape != target.shape:
            got = expected.dtype if isinstance(expected, torch.Tensor) else type(expected).__name__
            raise Refused(f"in-place op {op} on a {target.dtype} tensor computes in {got}: "
                          "its functional form would change the dtype or the shape")
        result = func(*real_args, **real_kwargs)  # the program's own effect: later values stay faithful
        pure_op = opnames.canonical_name(pure)
        node = self.graph.add_like(target, "call", pure_op, pure, args, {**kwargs, **_changed(real_kwargs, pure_kwargs)},
                                   name=name or pure_op)
        self.values.pop(target_node, None)  # its memory now holds the new value only
        self._keep(node, target)
        return Recorded(result, node, updated=node)

    def _alias(self, result: torch.Tensor, args: Any, kwargs: Any) -> Node | None:
        """The input node whose memory ``result`` shares (a view of it), else None."""
        address = _storage(result)
        if address is None:
            return None
        for value in trees.leaves((args, kwargs)):
            if isinstance(value, Node) and value in self.values and _storage(self.values[value]) == address:
                return value
        return None

    def _keep(self, node: Node, value: Any) -> Node:
        self.values[node] = value
        return node


def _changed(before: dict, after: dict) -> dict:
    """The kwargs the functional form sets differently (``inplace=False``)."""
    return {k: v for k, v in after.items() if before.get(k, object()) is not v}
