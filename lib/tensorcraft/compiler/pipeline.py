"""The whole compiler after capture, stage by stage: passes -> memory plan -> kernels -> wrapper -> load.

Every stage is a plain function over plain values, so a notebook can run them one at a time, or
replace one (``compile_graph(graph, passes=[my_dce, ...])``, ``compile_graph(graph, planner=my_plan)``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from .codegen import backends
from .codegen.wrapper import WrapperCode, generate_wrapper
from .ir import Graph
from .passes import DEFAULT_PASSES, resolve_passes
from .passes.memory_plan import MemoryPlan, plan_memory
from . import runtime

Pass = Callable[[Graph], Graph]


@dataclass
class CompiledGraph:
    """One compiled graph: every intermediate result kept, for inspection."""
    captured: Graph
    optimized: Graph
    plan: MemoryPlan
    code: WrapperCode
    backend: str
    fn: Callable[..., tuple]
    notes: list[str] = field(default_factory=list)

    @property
    def source(self) -> str:
        """The generated wrapper and kernels."""
        return self.code.full_source()

    def __call__(self, flat_inputs: Sequence[Any], params: dict[str, torch.Tensor]) -> list[Any]:
        return runtime.run(self.fn, self.code, flat_inputs, [params[name] for name in self.code.param_names])


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


def compile_kernels(graph: Graph, backend: str | Callable | None) -> tuple[dict[str, Any], str, list[str]]:
    """Compile every kernel node with the backend; the default backend falls back to python, noted."""
    device = graph_device(graph)
    chosen = backend or backends.default_backend(device)
    notes: list[str] = []
    compiled: dict[str, Any] = {}
    for node in graph.nodes:
        if node.kind != "kernel":
            continue
        try:
            compiled[node.target.name] = backends.compile_with(chosen, node.target)
        except backends.BackendUnavailable as error:
            if backend is not None:  # asked for by name: say so, do not substitute
                raise
            notes.append(f"{error}; using the python backend instead")
            chosen = "python"
            compiled[node.target.name] = backends.compile_with(chosen, node.target)
    return compiled, backends.backend_name(chosen), notes


def compile_graph(graph: Graph, backend: str | Callable | None = None, passes: Sequence[Pass | str] | None = None,
                  debug: bool = False, planner: Callable[[Graph], MemoryPlan] = plan_memory,
                  wrapper: Callable[..., WrapperCode] = generate_wrapper) -> CompiledGraph:
    """Optimize ``graph`` (a captured Graph, left unchanged) and turn it into a callable.

    Every stage can be replaced: ``passes`` (a list of Graph -> Graph functions or names),
    ``backend`` (a name or a compile_kernel function), ``planner`` and ``wrapper``.
    """
    optimized = run_passes(graph.copy(), DEFAULT_PASSES if passes is None else passes)
    plan = planner(optimized)
    kernels, chosen, notes = compile_kernels(optimized, backend)
    code = wrapper(optimized, plan, kernels)
    fn = runtime.load(code)
    result = CompiledGraph(graph, optimized, plan, code, chosen, fn, notes)
    if debug:
        print(f"==== captured graph ({len(graph)} nodes) ====\n{graph}\n")
        print(f"==== optimized graph ({len(optimized)} nodes) ====\n{optimized}\n")
        print(f"==== {plan.summary()} ====\n")
        print(f"==== generated code (backend: {chosen}) ====\n{result.source}")
        for note in notes:
            print(f"note: {note}")
    return result
