"""How each step of a plan is spelled for numpy arrays and for torch tensors.

`compile_steps(plan, array_type)` turns a backend-neutral `Plan` into a tuple of
``(function, argument)`` pairs; running a plan is then just ``x = function(x, argument)`` for each
pair. The functions are the ones einops calls (``permute``, ``amax``, ``expand``...), so results match
einops to the bit.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

from tensorcraft.einops.errors import EinopsError, describe_call
from tensorcraft.einops.recipe import Plan
from tensorcraft.plan_cache import plan_cache

Step = tuple[Callable[[Any, Any], Any], Any]


def _one_axis_at_a_time(method: str) -> Callable:
    """Reduce the axes one call each, last axis first: torch.prod accepts a single dim, and einops
    reduces any/all/prod this way; doing the same keeps dtypes and values identical to einops'."""
    def reduce(x, axes):
        for axis in reversed(axes):
            x = getattr(x, method)(axis)
        return x
    reduce.__name__ = f"{method}_one_axis_at_a_time"
    return reduce


def _numpy_reshape(x, shape: tuple[int, ...]):
    """A method call, not ``np.ndarray.reshape``: after a full reduction numpy hands back a scalar."""
    return x.reshape(shape)


def _numpy_tile(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Repeat the new length-1 axes up to ``shape``, as einops does with ``np.tile``: numpy's repeat
    returns a fresh array (``np.broadcast_to(...).copy()`` gives the same values, twice as slowly)."""
    return np.tile(x, tuple(target if size == 1 else 1 for size, target in zip(x.shape, shape)))


def _not_floating(plan: Plan, dtype) -> EinopsError:
    call = describe_call(plan.recipe.operation, plan.recipe.pattern, plan.input_shape, dict(plan.axes_lengths))
    return EinopsError(f"{call}: mean needs floating-point values, got {dtype} (einops refuses it too)")


def _numpy_require_float(x: np.ndarray, plan: Plan) -> np.ndarray:
    if x.dtype.kind != "f":
        raise _not_floating(plan, x.dtype)
    return x


def numpy_operations() -> dict[str, Callable]:
    return {
        "stack": np.stack, "concat": np.concatenate,
        "reshape": _numpy_reshape,
        "permute": np.ndarray.transpose,
        "expand": _numpy_tile,
        "require_float": _numpy_require_float,
        "min": np.ndarray.min, "max": np.ndarray.max, "sum": np.ndarray.sum, "mean": np.ndarray.mean,
        "prod": np.ndarray.prod, "any": np.ndarray.any, "all": np.ndarray.all,
    }


def torch_operations() -> dict[str, Callable]:
    import torch

    floats = {torch.float16, torch.float32, torch.float64, torch.bfloat16}

    def require_float(x: torch.Tensor, plan: Plan) -> torch.Tensor:
        if x.dtype not in floats:
            raise _not_floating(plan, x.dtype)
        return x

    return {
        "stack": torch.stack, "concat": torch.cat,
        "reshape": torch.Tensor.reshape,
        "permute": torch.Tensor.permute,
        "expand": torch.Tensor.expand,
        "require_float": require_float,
        "min": torch.Tensor.amin, "max": torch.Tensor.amax, "sum": torch.Tensor.sum,
        "mean": torch.Tensor.mean,
        "prod": _one_axis_at_a_time("prod"), "any": _one_axis_at_a_time("any"),
        "all": _one_axis_at_a_time("all"),
    }


@plan_cache(maxsize=None)
def operations_for(array_type: type) -> dict[str, Callable]:
    """The step functions for numpy arrays or torch tensors (any device, any subclass)."""
    torch = sys.modules.get("torch")  # a torch tensor exists only if torch was imported
    if issubclass(array_type, np.ndarray):
        return numpy_operations()
    if torch is not None and issubclass(array_type, torch.Tensor):
        return torch_operations()
    raise EinopsError(f"expected a numpy array or a torch tensor (or a list of them), "
                      f"got {array_type.__module__}.{array_type.__qualname__}")


def compile_steps(plan: Plan, array_type: type) -> tuple[Step, ...]:
    """The plan as ``(function, argument)`` pairs, ready for ``x = function(x, argument)``."""
    ops = operations_for(array_type)
    operation = plan.recipe.operation
    steps: list[Step] = []
    if plan.init_shape is not None:
        steps.append((ops["reshape"], plan.init_shape))
    if plan.permutation is not None:
        steps.append((ops["permute"], plan.permutation))
    if plan.reduced_axes:
        if callable(operation):
            steps.append((operation, plan.reduced_axes))
        else:
            if operation == "mean":  # as einops: no mean of integers (torch refuses, numpy would cast)
                steps.append((ops["require_float"], plan))
            steps.append((ops[operation], plan.reduced_axes))
    if plan.expanded_shape is not None:
        steps.append((ops["reshape"], plan.unsqueezed_shape))
        steps.append((ops["expand"], plan.expanded_shape))
    if plan.final_shape is not None:
        steps.append((ops["reshape"], plan.final_shape))
    return tuple(steps)
