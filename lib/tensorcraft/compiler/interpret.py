"""The meaning of a Graph: run it node by node with eager torch (no code generation).

Used as the reference in tests, by the training path to recompute a forward under autograd,
and by anyone who wants to check that a pass kept the meaning of a graph.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import torch

from .codegen.kernel import Kernel, evaluate
from .ir import Graph, Node, map_args


def interpret(graph: Graph, inputs: Sequence[Any],
              params: Mapping[str, torch.Tensor] | Callable[[str], torch.Tensor] | None = None) -> list[Any]:
    """Run ``graph`` on the flat inputs; ``params`` maps a param node's qualified name to its tensor.

    Returns the flat list of outputs (unflatten with ``graph.output_spec``).
    """
    params = {} if params is None else params
    lookup = params.__getitem__ if isinstance(params, Mapping) else params
    env: dict[Node, Any] = {}
    read = lambda node: env[node]  # noqa: E731
    for node in graph.nodes:
        if node.kind == "placeholder":
            env[node] = inputs[node.attrs["index"]]
        elif node.kind == "param":
            env[node] = lookup(node.target)
        elif node.kind == "constant":
            env[node] = node.target
        elif node.kind == "kernel":
            kernel: Kernel = node.target
            env[node] = evaluate(kernel, *(prepare_kernel_input(env[i], b.shape) for i, b in zip(node.args, kernel.inputs)))
        elif node.kind == "call":
            env[node] = node.target(*map_args(node.args, read), **map_args(node.kwargs, read))
        else:  # output
            return [env[a] if isinstance(a, Node) else a for a in node.args]
    raise ValueError("graph has no output node")


def prepare_kernel_input(value: torch.Tensor | float, shape: tuple[int, ...]) -> torch.Tensor:
    """Give a kernel input the rank and layout the Kernel contract asks for (contiguous, same rank)."""
    value = torch.as_tensor(value)
    if tuple(value.shape) != tuple(shape):
        value = value.reshape(shape)
    return value.contiguous()
