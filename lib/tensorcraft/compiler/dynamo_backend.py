"""A torch.compile backend: Dynamo captures, tensorcraft optimizes and generates the code.

    torch.compile(model, backend=tensorcraft.compiler.dynamo_backend)

Dynamo reads the Python bytecode (so it handles control flow with graph breaks and guards far
better than our capture) and hands over an ``fx.GraphModule`` plus example inputs. We convert
that fx graph into our Graph (`graph_from_fx`: one of our nodes per fx node, shapes taken by
running the fx graph once on the examples) and run the same passes and code generation as
`tensorcraft.compile`. (``tensorcraft.compiler.dynamo_backend`` is this function: the package
re-exports it under the module's name.)
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Sequence

import torch
import torch.fx
from torch.utils import _pytree as pytree

from . import opnames
from .ir import Graph, Node
from .pipeline import compile_graph
from .training import run_with_gradients


class _Converter(torch.fx.Interpreter):
    """Runs the fx graph on real example inputs and records one of our nodes per fx node."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.built = Graph()
        self.ours: dict[torch.fx.Node, Any] = {}  # fx node -> our Node, or a plain value
        self.placeholder_index = 0

    def _map(self, value: Any) -> Any:
        return torch.fx.node.map_arg(value, lambda n: self.ours[n])

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
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
        return result

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
    env = {id(ours): fx for fx, ours in converter.ours.items() if isinstance(ours, Node)}
    ptr = result.untyped_storage().data_ptr() if result.untyped_storage().nbytes() else None
    for value in pytree.tree_leaves((args, kwargs)):
        if isinstance(value, Node) and ptr is not None and id(value) in env:
            real = converter.env.get(env[id(value)])
            if isinstance(real, torch.Tensor) and real.untyped_storage().nbytes() and \
                    real.untyped_storage().data_ptr() == ptr:
                return value.name
    return None


def graph_from_fx(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Graph:
    """Our Graph for an fx GraphModule, with shapes from one run on ``example_inputs``."""
    converter = _Converter(gm)
    with torch.no_grad():
        converter.run(*example_inputs)
    return converter.built


def dynamo_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *, backend: str | None = None,
                   passes: Sequence | None = None, debug: bool = False) -> Callable[..., Any]:
    """The function torch.compile calls with each graph Dynamo captured; returns what runs it."""
    graph = graph_from_fx(gm, example_inputs)
    compiled = compile_graph(graph, backend=backend, passes=passes, debug=debug)
    params = {n.target: n.attrs["value"] for n in graph.params}
    param_names = list(params)
    tensor_outputs = [i for i, a in enumerate(graph.output.args) if isinstance(a, Node)]

    def run(*args: Any) -> Any:
        flat = list(args)
        needs_grad = torch.is_grad_enabled() and (
            any(isinstance(a, torch.Tensor) and a.requires_grad for a in flat)
            or any(p.requires_grad for p in params.values()))
        if needs_grad:
            def forward(tensors):
                inner = list(flat)
                positions = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor)]
                n = len(positions)
                for pos, t in zip(positions, tensors[:n]):
                    inner[pos] = t
                outs = compiled(inner, dict(zip(param_names, tensors[n:])))
                return [outs[i] for i in tensor_outputs]
            values = run_with_gradients(forward, graph, flat, param_names, list(params.values()))
            outs = list(graph.output.args)
            for i, v in zip(tensor_outputs, values):
                outs[i] = v
        else:
            outs = compiled(flat, params)
        return pytree.tree_unflatten(outs, graph.output_spec)

    run.compiled = compiled  # type: ignore[attr-defined]  (for inspection: run.compiled.source)
    return run
