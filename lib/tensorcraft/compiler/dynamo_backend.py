"""A torch.compile backend: Dynamo captures, tensorcraft optimizes and generates the code.

    import tensorcraft.compiler.dynamo_backend
    torch.compile(model, backend=tensorcraft.compiler.dynamo_backend.backend)

Dynamo reads the Python bytecode (so it handles control flow with graph breaks and guards far
better than our capture) and hands over an ``fx.GraphModule`` plus example inputs. We convert
that fx graph into our Graph (`graph_from_fx`: one of our nodes per fx node, shapes taken by
running the fx graph once on the examples) and run the same passes and code generation as
`tensorcraft.compile`.

Dynamo hands a backend the graph as the program wrote it, mutations included (``x += 1``,
``b[0] = 1``, ``relu(x, inplace=True)``, batchnorm updating its running statistics) and random
calls too, while our passes assume pure ops (dead-code elimination would drop an ``add_`` nobody
reads, CSE would merge two ``rand_like``, constant folding would freeze a ``torch.rand``). As
capture does, an in-place op on a fresh intermediate that no view shares becomes its functional
form (``b.add_(1)`` -> ``b2 = add(b, 1)``, later readers of ``b`` read ``b2``). Any other
mutation, or randomness, and the graph is not compiled: it runs as Dynamo gave it, and the
returned function's ``reason`` says why. (Converting runs the graph on copies of the inputs, so
that it never mutates the caller's tensors.)
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Sequence

import torch
import torch.fx
from torch.utils import _pytree as pytree

from . import functional, opnames
from .ir import Graph, Node
from .pipeline import compile_graph


_PURE_OPERATORS = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
                   operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
                   operator.imod: operator.mod, operator.ipow: operator.pow, operator.imatmul: operator.matmul,
                   operator.iand: operator.and_, operator.ior: operator.or_, operator.ixor: operator.xor,
                   operator.setitem: functional.index_put}


class Refused(Exception):
    """The fx graph cannot be compiled faithfully; the message says why."""


def _is_inplace(n: torch.fx.Node) -> bool:
    return n.op in ("call_function", "call_method") and (
        n.target in _PURE_OPERATORS or opnames.is_inplace_name(opnames.canonical_name(n.target))
        or n.kwargs.get("inplace") is True)


def _pure_form(n: torch.fx.Node) -> tuple[Callable, dict] | None:
    """The functional twin of an in-place node and its kwargs (None when there is none: zero_, copy_)."""
    if n.target in _PURE_OPERATORS:
        return _PURE_OPERATORS[n.target], dict(n.kwargs)
    if n.kwargs.get("inplace") is True:
        return n.target, {**n.kwargs, "inplace": False}
    name = n.target if isinstance(n.target, str) else n.target.__name__
    pure = getattr(torch.Tensor, name[:-1], None)
    return (pure, dict(n.kwargs)) if callable(pure) else None


class _Converter(torch.fx.Interpreter):
    """Runs the fx graph on example inputs and records one of our nodes per fx node."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.built = Graph()
        self.ours: dict[torch.fx.Node, Any] = {}  # fx node -> our Node, or a plain value
        self.real: dict[int, Any] = {}  # id(our node) -> the value it had in this run (kept alive)
        self.placeholder_index = 0
        self.refused: str | None = None  # why conversion stopped (fx adds its own notes to the exception)

    def _map(self, value: Any) -> Any:
        return torch.fx.node.map_arg(value, lambda n: self.ours[n])

    def run_node(self, n: torch.fx.Node) -> Any:
        if _is_inplace(n):
            return self._functionalize(n)
        result = super().run_node(n)
        self._record(n, result)
        if isinstance(self.ours.get(n), Node):
            self.real[id(self.ours[n])] = result
        return result

    def _functionalize(self, n: torch.fx.Node) -> Any:
        """Record ``t.op_(...)`` on a fresh intermediate ``t`` as ``op(t, ...)``; refuse anything else."""
        try:
            return self._functional_twin(n)
        except Refused as refusal:
            self.refused = str(refusal)
            raise

    def _functional_twin(self, n: torch.fx.Node) -> Any:
        pure = _pure_form(n)
        target = n.args[0] if n.args else None
        if pure is None:
            raise Refused(f"in-place op without a functional form: {n.format_node()}")
        if not isinstance(target, torch.fx.Node) or target.op in ("placeholder", "get_attr"):
            raise Refused(f"the graph mutates an input or a parameter: {n.format_node()}")
        t = self.env[target]
        mine = id(self.ours[target])  # any other value on t's memory (x.contiguous() can return x itself)
        shared = [v for key, v in self.real.items() if key != mine and isinstance(v, torch.Tensor)
                  and v.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()]
        if t._is_view() or shared:
            raise Refused(f"in-place update of a tensor that shares memory with another: {n.format_node()}")
        fn, kwargs = pure
        args, real_kwargs = self.fetch_args_kwargs_from_env(n)
        expected = fn(*args, **{**real_kwargs, "inplace": False} if "inplace" in real_kwargs else real_kwargs)
        if not isinstance(expected, torch.Tensor) or expected.dtype != t.dtype or expected.shape != t.shape:
            raise Refused(f"the functional form of {n.format_node()} would change the dtype or shape")
        result = super().run_node(n)  # keeps the values of this run faithful to the program
        node = self.built.add_like(expected, "call", opnames.canonical_name(fn), fn, self._map(n.args),
                                   self._map(kwargs), name=n.name, attrs={"aliases": None})
        self.ours[n] = self.ours[target] = node  # later readers of t, or of the op's result, read the new value
        self.real.pop(mine, None)  # t's memory now holds the new value only
        self.real[id(node)] = t
        return result

    def _record(self, n: torch.fx.Node, result: Any) -> None:
        g = self.built
        if n.op == "placeholder":
            self.ours[n] = g.add_like(result, "placeholder", "placeholder", name=n.name,
                                      attrs={"index": self.placeholder_index})
            self.placeholder_index += 1
        elif n.op == "get_attr":
            self.ours[n] = g.add_like(result, "param", "param", n.target, name=n.target, attrs={"value": result}) \
                if isinstance(result, torch.Tensor) else result
        elif n.op in ("call_function", "call_method", "call_module"):
            self.ours[n] = self._call(n, result)
        elif n.op == "output":
            flat, spec = pytree.tree_flatten(self._map(n.args[0]))
            g.add("output", "output", args=tuple(flat))
            g.output_spec = spec

    def _call(self, n: torch.fx.Node, result: Any) -> Any:
        g = self.built
        args, kwargs = self._map(n.args), self._map(n.kwargs)
        if n.op == "call_method":
            target = getattr(torch.Tensor, n.target)
        elif n.op == "call_module":
            target = self.fetch_attr(n.target)
        else:
            target = n.target
        if target is operator.getitem and isinstance(args[0], (tuple, list)):
            return args[0][args[1]]  # reading one of a multi-output call's results, already a node
        op = opnames.canonical_name(n.target if n.op != "call_module" else type(target).__name__.lower())
        tensor_inputs = any(isinstance(v, Node) for v in pytree.tree_leaves((args, kwargs)))
        if not isinstance(result, (torch.Tensor, tuple, list)) or \
                (isinstance(result, (tuple, list)) and not any(isinstance(v, torch.Tensor) for v in result)):
            return result  # sizes and other plain values: baked in, as capture does
        if isinstance(result, torch.Tensor):
            node = g.add_like(result, "call", op, target, args, kwargs, name=n.name)
            node.attrs["aliases"] = _alias(result, args, kwargs, self)
            if not tensor_inputs:
                node.attrs["factory"] = True
            return node
        multi = g.add("call", op, target, args, kwargs, name=n.name)
        items = []
        for i, value in enumerate(result):
            if isinstance(value, torch.Tensor):
                item = g.add_like(value, "call", "getitem", operator.getitem, (multi, i), name=f"{n.name}_{i}")
                item.attrs["aliases"] = _alias(value, args, kwargs, self)
                items.append(item)
            else:
                items.append(value)
        return tuple(items)


def _alias(result: torch.Tensor, args, kwargs, converter: _Converter) -> str | None:
    """The input node whose storage the result shares, found from the real values."""
    ptr = result.untyped_storage().data_ptr() if result.untyped_storage().nbytes() else None
    for value in pytree.tree_leaves((args, kwargs)):
        if isinstance(value, Node) and ptr is not None:
            real = converter.real.get(id(value))
            if isinstance(real, torch.Tensor) and real.untyped_storage().nbytes() and \
                    real.untyped_storage().data_ptr() == ptr:
                return value.name
    return None


def graph_from_fx(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Graph:
    """Our Graph for an fx GraphModule, with shapes from one run on copies of ``example_inputs``.

    Raises Refused when the graph mutates something other than a fresh intermediate."""
    converter = _Converter(gm)
    copies = [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in example_inputs]
    with torch.no_grad():
        try:
            converter.run(*copies)
        except Refused:
            raise Refused(converter.refused) from None
    return converter.built


_UPDATES_RUNNING_STATS = {"batch_norm", "instance_norm"}  # with a True training flag (argument 5)


def reason_to_run_eagerly(gm: torch.fx.GraphModule) -> str | None:
    """Why this fx graph must not go through our passes, seen without running it (randomness, a write
    into an existing tensor, running statistics updated), else None. In-place ops are judged while
    converting (graph_from_fx), where the values show what shares memory."""
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method"):
            continue
        name = opnames.canonical_name(n.target)
        if n.kwargs.get("out") is not None:
            return f"the graph writes into an existing tensor: {n.format_node()}"
        if name in _UPDATES_RUNNING_STATS and n.kwargs.get("training", n.args[5] if len(n.args) > 5 else False) \
                and (n.kwargs.get("running_mean", n.args[1] if len(n.args) > 1 else None) is not None):
            return f"the graph updates running statistics in training mode: {n.format_node()}"
        try:
            why = opnames.refusal(name, n.args, n.kwargs)
        except TypeError:  # an argument is itself a graph value (p=some_node): cannot tell, so refuse
            why = f"{name} with computed arguments"
        if why is not None:
            return f"{why}: {n.format_node()}"
    return None


def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *, backend: str | Callable | None = None,
            passes: Sequence | None = None, debug: bool = False) -> Callable[..., Any]:
    """The function torch.compile calls with each graph Dynamo captured; returns what runs it."""
    why = reason_to_run_eagerly(gm)
    if why is None:
        try:
            graph = graph_from_fx(gm, example_inputs)
        except Refused as refusal:
            why = str(refusal)
    if why is not None:
        def run_eagerly(*args: Any) -> Any:
            return gm(*args)
        run_eagerly.compiled, run_eagerly.reason = None, why  # type: ignore[attr-defined]
        if debug:
            print(f"tensorcraft dynamo_backend: running this graph eagerly because {why}")
        return run_eagerly
    compiled = compile_graph(graph, backend=backend, passes=passes, debug=debug)
    params = [n.attrs["value"] for n in graph.params]

    def run(*args: Any) -> Any:
        need_grad = torch.is_grad_enabled() and (
            any(isinstance(a, torch.Tensor) and a.requires_grad for a in args) or any(p.requires_grad for p in params))
        return compiled.run(args, params, need_grad)

    run.compiled, run.reason = compiled, None  # type: ignore[attr-defined]  (for inspection: run.compiled.source)
    return run
