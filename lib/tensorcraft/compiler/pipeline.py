"""The whole compiler after capture, stage by stage: passes -> memory plan -> kernels -> wrapper -> load.

``compile_graph`` calls each stage by its public name, so a notebook can run them one at a time, pass
its own passes and kernel backend (``compile_graph(graph, passes=[my_dce, ...], backend=...)``), or
swap any other stage — the one way to — with ``tensorcraft.substitute(plan_memory=my_plan,
generate_wrapper=my_wrapper)``. The result, a
`CompiledGraph`, keeps every intermediate (captured and optimized graphs, plan, sources) and runs the
generated code, through the autograd wrapper of ``training`` when gradients are needed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from .. import trees
from .codegen import backends
from .codegen.wrapper import WrapperCode, generate_wrapper
from .ir import Graph, Node
from .passes import DEFAULT_PASSES, GRADIENT_PASSES, resolve_passes
from .passes.memory_plan import MemoryPlan, plan_memory
from .training import run_with_gradients

Pass = Callable[[Graph], Graph]


@dataclass
class CompiledGraph:
    """One compiled graph: every intermediate result kept, for inspection, and the loaded code."""
    captured: Graph
    optimized: Graph
    plan: MemoryPlan
    code: WrapperCode
    backend: str
    fn: Callable[..., tuple]
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # the wrapper takes the optimized graph's module tensors; run() is handed the captured graph's:
        # each optimized param node is found by the captured node it copies, not by its name
        position = {node: i for i, node in enumerate(self.captured.params)}
        unknown = [n.name for n in self.optimized.params if self.optimized.origin.get(n) not in position]
        if unknown:
            raise ValueError(f"the optimized graph reads module tensors the captured graph does not ({unknown}): "
                             "a pass must work on graph.copy() and never make param nodes of its own")
        self._param_positions = [position[self.optimized.origin[n]] for n in self.optimized.params]
        self._tensor_outputs = [i for i, a in enumerate(self.captured.output.args) if isinstance(a, Node)]
        self._has_kernels = self.optimized.count(kind="kernel") > 0
        self._single_output = self.captured.output_spec.is_leaf()  # the function returned one value

    @property
    def source(self) -> str:
        """The generated wrapper and kernels."""
        return self.code.full_source()

    @property
    def has_kernels(self) -> bool:
        return self._has_kernels

    @property
    def param_names(self) -> list[str]:
        """Qualified names of the module tensors the captured graph reads: what ``run`` takes as params."""
        return [n.target for n in self.captured.params]

    def run(self, flat_inputs: Sequence[Any], params: Sequence[torch.Tensor], need_grad: bool = False) -> Any:
        """Run the generated code on one call's flat inputs and module tensors (``param_names`` order);
        returns the call's result, unflattened. ``need_grad`` and fused kernels (which have no backward):
        through the recompute wrapper of training.py; without kernels autograd records the torch calls."""
        if not need_grad or not self.has_kernels:
            outs = self.fn(*[flat_inputs[i] for i in self.code.placeholder_indices],
                           *[params[i] for i in self._param_positions])
            return outs[0] if self._single_output else trees.unflatten(list(outs), self.captured.output_spec)
        positions = [i for i, v in enumerate(flat_inputs) if isinstance(v, torch.Tensor)]

        def forward(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:  # inputs, then module tensors
            inner = list(flat_inputs)
            for pos, t in zip(positions, tensors):
                inner[pos] = t
            module_tensors = tensors[len(positions):]
            outs = self.fn(*[inner[i] for i in self.code.placeholder_indices],
                           *[module_tensors[i] for i in self._param_positions])
            return [outs[i] for i in self._tensor_outputs]

        outs = list(self.captured.output.args)  # a Node where a tensor is returned, else the plain value
        values = run_with_gradients(forward, self.captured, flat_inputs, self.param_names, params)
        for i, t in zip(self._tensor_outputs, values):
            outs[i] = t
        return trees.unflatten(outs, self.captured.output_spec)

    def folds_values(self) -> bool:
        """Did the passes bake in values computed at compile time (from constants, or from parameters in
        a frozen graph)? Then the guards compare those tensors' values, not only their version counters."""
        captured = {id(n.target) for n in self.captured.nodes if n.kind == "constant"}
        return any(n.kind == "constant" and id(n.target) not in captured for n in self.optimized.nodes)


def graph_device(graph: Graph) -> torch.device:
    for node in graph.nodes:
        if node.device is not None:
            return node.device
    return torch.device("cpu")


def run_passes(graph: Graph, passes: Sequence[Pass | str]) -> Graph:
    for p in resolve_passes(passes):
        graph = p(graph)
        graph.lint()
    return graph


def compile_kernels(graph: Graph, backend: str | Callable | None) -> tuple[dict[Node, Any], str, list[str]]:
    """Compile every kernel node with the backend (kernel node -> compiled kernel); the default backend
    falls back to python, noted."""
    device = graph_device(graph)
    chosen = backend or backends.default_backend(device)
    notes: list[str] = []
    compiled: dict[Node, Any] = {}
    for node in graph.nodes:
        if node.kind != "kernel":
            continue
        try:
            compiled[node] = backends.compile_with(chosen, node.target)
        except backends.BackendUnavailable as error:
            if backend is not None:  # asked for by name: say so, do not substitute
                raise
            notes.append(f"{error}; using the python backend instead")
            chosen = "python"
            compiled[node] = backends.compile_with(chosen, node.target)
    return compiled, backends.backend_name(chosen), notes


def compile_graph(graph: Graph, backend: str | Callable | None = None, passes: Sequence[Pass | str] | None = None,
                  debug: bool = False, need_grad: bool = False) -> CompiledGraph:
    """Optimize ``graph`` (a captured Graph, left unchanged) and turn it into a callable.

    ``passes``: a list of Graph -> Graph functions or names (None: ``GRADIENT_PASSES`` when
    ``need_grad``, else ``DEFAULT_PASSES``); ``backend``: a name or a compile_kernel function. Any
    other stage is swapped with ``tensorcraft.substitute(plan_memory=..., generate_wrapper=...)``.
    """
    if passes is None:
        passes = GRADIENT_PASSES if need_grad else DEFAULT_PASSES
    optimized = run_passes(graph.copy(), passes)
    plan = plan_memory(optimized)
    kernels, chosen, notes = compile_kernels(optimized, backend)
    code = generate_wrapper(optimized, plan, kernels)
    fn = code.load()
    result = CompiledGraph(graph, optimized, plan, code, chosen, fn, notes)
    if debug:
        print(f"==== captured graph ({len(graph)} nodes) ====\n{graph}\n")
        print(f"==== optimized graph ({len(optimized)} nodes) ====\n{optimized}\n")
        print(f"==== {plan.summary()} ====\n")
        print(f"==== generated code (backend: {chosen}) ====\n{result.source}")
        for note in notes:
            print(f"note: {note}")
    return result
