"""`Rearrange` and `Reduce` as torch modules, for ``nn.Sequential``.

A layer checks its pattern when it is built (as einops does: for every rank an ellipsis allows,
up to 7 extra dimensions), so a typo fails at model construction, not at the first batch. It holds
no parameters: its ``state_dict`` is empty, like einops'.

Under ``torch.jit.trace`` and ``torch.compile`` a layer is recorded as its tensor operations.
``torch.jit.script`` accepts a model holding these layers, but runs their ``forward`` as a Python
call (it is ``@torch.jit.ignore``: our planning code is Python, not TorchScript), so that scripted
model cannot be exported with ``torch.jit.save``; einops' own layers can.
"""
# no `from __future__ import annotations`: torch.jit.script reads forward's annotations as real types

import warnings

import torch

from tensorcraft.einops.errors import EinopsError
from tensorcraft.einops.ops import rearrange, reduce
from tensorcraft.einops.pattern import parse_expression, split_pattern
from tensorcraft.einops.recipe import make_recipe


def _check_pattern(layer: torch.nn.Module, operation, axes_lengths: dict) -> None:
    """Build the recipe for each rank the pattern accepts; raise EinopsError naming the layer."""
    try:
        left = parse_expression(split_pattern(layer.pattern)[0])
        n_named = len(left.dims) - 1 if left.has_ellipsis else len(left.dims)
        ranks = range(n_named, n_named + 8) if left.has_ellipsis else [n_named]
        for ndim in ranks:
            make_recipe(layer.pattern, operation, ndim, tuple(axes_lengths))
    except EinopsError as error:
        raise EinopsError(f"while building {layer!r}: {error}") from None


def _run(operation, x: torch.Tensor, /, *arguments, **axes_lengths) -> torch.Tensor:
    """``operation(x, *arguments, **axes_lengths)``, quietly under torch.jit.trace.

    ``operation`` is the library's `rearrange` or `reduce` itself, so that a stage substituted with
    ``tensorcraft.substitute(reduce=...)`` runs inside the layer too.

    While tracing, sizes are tensors, so that the traced reshapes follow the input's shape (a
    traced model accepts another batch size, as einops' does). Our shape checks then read those
    tensors as bools, which torch reports with a TracerWarning each; the checks only validate
    the example input, so those warnings say nothing useful here.
    """
    if not torch.jit.is_tracing():
        return operation(x, *arguments, **axes_lengths)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        return operation(x, *arguments, **axes_lengths)


def _arguments(axes_lengths: dict) -> str:
    return "".join(f", {name}={length}" for name, length in axes_lengths.items())


class Rearrange(torch.nn.Module):
    """``Rearrange("b c h w -> b (c h w)")``: the layer form of `rearrange`."""

    pattern: str
    axes_lengths: dict[str, int]  # typed, so that torch.jit.script keeps it even when empty

    def __init__(self, pattern: str, **axes_lengths: int) -> None:
        super().__init__()
        self.pattern = pattern
        self.axes_lengths = axes_lengths
        _check_pattern(self, "rearrange", axes_lengths)

    @torch.jit.ignore
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _run(rearrange, x, self.pattern, **self.axes_lengths)

    def extra_repr(self) -> str:
        return repr(self.pattern) + _arguments(self.axes_lengths)


class Reduce(torch.nn.Module):
    """``Reduce("b c (h 2) (w 2) -> b c h w", "max")``: the layer form of `reduce`."""

    pattern: str
    reduction: str
    axes_lengths: dict[str, int]

    def __init__(self, pattern: str, reduction: str, **axes_lengths: int) -> None:
        super().__init__()
        self.pattern = pattern
        self.reduction = reduction
        self.axes_lengths = axes_lengths
        _check_pattern(self, reduction, axes_lengths)

    @torch.jit.ignore
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _run(reduce, x, self.pattern, self.reduction, **self.axes_lengths)

    def extra_repr(self) -> str:
        return f"{self.pattern!r}, {self.reduction!r}" + _arguments(self.axes_lengths)
