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

from .. import trees
from . import opnames
from ..stages import swappable
from .builder import GraphBuilder, Refused
from .ir import Graph
from .training import need_grad
from .pipeline import compile_graph




def _as_functional(module: torch.nn.Module, args: tuple) -> tuple[str, tuple] | None:
    """(name, args) of the functional call a stateful module makes, for the ``refusal`` stage to judge
    (a dropout draws a mask in training mode; a batch norm updates its running statistics)."""
    if isinstance(module, torch.nn.modules.dropout._DropoutNd):
        return "dropout", (args[0], module.p, module.training)
    if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
        training = module.training or (module.running_mean is None and module.running_var is None)
        return "batch_norm", (args[0], module.running_mean, module.running_var, module.weight, module.bias, training)
    return None


class _Converter(torch.fx.Interpreter):
    """Runs the fx graph on example inputs, handing every node to the graph builder."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.builder = GraphBuilder()
        self.ours: dict[torch.fx.Node, Any] = {}  # fx node -> our Node (or Nodes, or a plain value)
        self.placeholder_index = 0

    def _map(self, value: Any) -> Any:
        return torch.fx.node.map_arg(value, lambda n: self.ours[n])

    def run_node(self, n: torch.fx.Node) -> Any:
        if n.op not in ("call_function", "call_method", "call_module"):
            result = super().run_node(n)
            if n.op == "placeholder":
                self.ours[n] = self.builder.placeholder(result, n.name, self.placeholder_index)
                self.placeholder_index += 1
            elif n.op == "get_attr":
                self.ours[n] = self.builder.param(result, n.target) if isinstance(result, torch.Tensor) else result
            elif n.op == "output":
                flat, spec = trees.flatten(self._map(n.args[0]))
                self.builder.output(flat, spec)
            return result
        args, kwargs = self._map(n.args), self._map(n.kwargs)
        if n.target is operator.getitem and isinstance(args[0], (tuple, list)):  # one of several results
            self.ours[n] = args[0][args[1]]
            return super().run_node(n)
        real_args, real_kwargs = self.fetch_args_kwargs_from_env(n)
        if n.op == "call_method":
            func, op = getattr(torch.Tensor, n.target), opnames.canonical_name(n.target)
        elif n.op == "call_module":  # only in hand-traced graphs (Dynamo inlines modules)
            func, op = self.fetch_attr(n.target), type(self.fetch_attr(n.target)).__name__
            judged = _as_functional(func, real_args)
            why = opnames.refusal(*judged, {}) if judged is not None else None  # the `refusal` stage decides
            if why is not None:
                raise Refused(f"{op}: {why}: {n.format_node()}")
        else:
            func, op = n.target, opnames.canonical_name(n.target)
        try:
            recorded = self.builder.call(func, args, kwargs, real_args, real_kwargs, op=op, name=n.name)
        except Refused as refusal:
            raise Refused(f"{refusal}: {n.format_node()}") from None
        self.ours[n] = recorded.node
        if recorded.updated is not None:  # later readers of the updated tensor read the new value
            self.ours[n.args[0]] = recorded.updated
        return recorded.value


@swappable
def graph_from_fx(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Graph:
    """Our Graph for an fx GraphModule, recorded by running it once on copies of ``example_inputs``
    (so that it never mutates the caller's tensors). Raises Refused (see builder) with the reason."""
    converter = _Converter(gm)
    copies = [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in example_inputs]
    with torch.no_grad():
        try:
            converter.run(*copies)
        except Refused as refusal:  # fx appends its own notes to the message: keep ours only
            raise Refused(refusal.args[0]) from None
    return converter.builder.graph


def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *, backend: str | Callable | None = None,
            passes: Sequence | None = None, debug: bool = False) -> Callable[..., Any]:
    """The function torch.compile calls with each graph Dynamo captured; returns what runs it."""
    try:
        graph, why = graph_from_fx(gm, example_inputs), None
    except Refused as refusal:
        why = str(refusal)
    if why is not None:
        def run_eagerly(*args: Any) -> Any:
            return gm(*args)
        run_eagerly.compiled, run_eagerly.reason = None, why  # type: ignore[attr-defined]
        if debug:
            print(f"tensorcraft dynamo_backend: running this graph eagerly because {why}")
        return run_eagerly
    params = [n.attrs["value"] for n in graph.params]
    compiled = compile_graph(graph, backend=backend, passes=passes, debug=debug,
                             need_grad=need_grad(example_inputs, params))

    def run(*args: Any) -> Any:
        return compiled.run(args, params, need_grad(args, params))

    run.compiled, run.reason = compiled, None  # type: ignore[attr-defined]  (for inspection: run.compiled.source)
    return run
