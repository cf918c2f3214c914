"""Runtime: load generated wrapper source (exec) and run it with the call's inputs and parameters."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from .codegen.wrapper import WrapperCode


def load(code: WrapperCode, name: str = "forward") -> Callable[..., tuple]:
    """Execute the wrapper's source in a fresh namespace and return its function.

    The source is compiled under a file name that shows up in tracebacks, so an error inside
    generated code points at the generated line.
    """
    namespace = dict(code.namespace)
    exec(compile(code.source, f"<tensorcraft wrapper {name}>", "exec"), namespace)
    return namespace[name]


def run(fn: Callable[..., tuple], code: WrapperCode, flat_inputs: Sequence[Any],
        params: Sequence[torch.Tensor]) -> list[Any]:
    """Call a loaded wrapper: tensor inputs in placeholder order, then the module tensors."""
    return list(fn(*[flat_inputs[i] for i in code.placeholder_indices], *params))
