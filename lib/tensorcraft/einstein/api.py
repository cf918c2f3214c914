"""`einsum`: parse -> infer -> path -> lower, with the plan cached per (equation, shapes).

The first call with a given equation and shapes parses, chooses a path and plans every
contraction (pure Python over shapes); later calls find the plan in a cache and pay only for
the tensor operations, which is what keeps small einsums close to torch.einsum's C++ speed.

Semantics are torch.einsum's, with deliberate extensions where torch fails:
operands of different dtypes are promoted to a common dtype (as numpy does), integer
results keep the operands' dtype (torch returns int64 after some sums and errors after
others), boolean operands work (sum of products read as OR of ANDs, as numpy does),
uint16/32/64 work (computed in int64, wrapping around as numpy's do), and numbers or
lists may stand next to tensors (they become tensors). An operand torch cannot hold
(None, a string, an object or long double array) raises EinsumError naming it.
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import torch

from tensorcraft.einstein.lower import PairPlan, SinglePlan, plan_pair, plan_single, run_pair, run_single
from tensorcraft.einstein.parse import EinsumError, Equation, parse_equation, split_arguments
from tensorcraft.einstein.path import Optimize, Path, checked_optimize, find_path
from tensorcraft.plan_cache import cache_bypassed, plan_cache

DEFAULT_OPTIMIZE = "auto"  # exhaustive ('optimal') up to 6 operands, greedy beyond: the plan is cached, so search once


@dataclass(frozen=True)
class Plan:
    """Everything `einsum` decided for one (equation, shapes): the path and one lowered plan per step."""

    equation: Equation
    path: Path
    steps: tuple[Union[SinglePlan, PairPlan], ...]

    def __str__(self) -> str:
        eq = self.equation
        lines = [f"einsum {eq.normalized!r} for shapes {', '.join(map(str, eq.shapes))}; path {self.path}"]
        for n, (positions, step) in enumerate(zip(self.path, self.steps)):
            lines.append(f"step {n}: operands {positions}")
            lines.append(str(step) if isinstance(step, PairPlan) else "  " + str(step))
        return "\n".join(lines)


def build_plan(equation: str, shapes: Sequence[Sequence[int]], optimize: Optimize = DEFAULT_OPTIMIZE) -> Plan:
    """Parse, choose the path, and plan each pairwise contraction (shapes only, no tensors)."""
    eq = parse_equation(equation, shapes)
    if len(eq.shapes) == 1:
        return Plan(eq, [(0,)], (plan_single(eq.input_labels[0], eq.shapes[0], eq.output_labels),))
    path = find_path(eq, optimize)
    current = list(zip(eq.input_labels, eq.shapes))   # (labels, shape) of each operand still to contract
    steps = []
    for n, positions in enumerate(path):
        if len(positions) != 2:
            raise EinsumError(f"einsum: each step of a path contracts two operands; step {n} is {positions}")
        i, j = positions
        (a_labels, a_shape), (b_labels, b_shape) = current[i], current[j]
        current = [c for p, c in enumerate(current) if p not in (i, j)]
        last = n == len(path) - 1
        if last:
            step = plan_pair(a_labels, a_shape, b_labels, b_shape, keep=eq.output_labels, result=eq.output_labels)
        else:
            needed = set(eq.output_labels).union(*(labels for labels, _ in current))
            step = plan_pair(a_labels, a_shape, b_labels, b_shape, keep=needed)
        steps.append(step)
        current.append((step.labels, step.unflat))
    return Plan(eq, path, tuple(steps))


# while torch.compile traces, or a learner's stage is substituted in, plans are built afresh
cached_plan = plan_cache(maxsize=4096)(build_plan)


def run_plan(plan: Plan, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Execute a plan on tensors of one dtype."""
    if len(tensors) == 1:
        return run_single(plan.steps[0], tensors[0])
    current = list(tensors)
    for (i, j), step in zip(plan.path, plan.steps):
        a, b = current[i], current[j]
        current = [t for p, t in enumerate(current) if p not in (i, j)]
        current.append(run_pair(step, a, b))
    return current[0]


def _common_dtype(tensors: Sequence[torch.Tensor]) -> torch.dtype:
    return functools.reduce(torch.promote_types, [t.dtype for t in tensors])


def _as_tensor(array: np.ndarray) -> torch.Tensor:
    """Share the array's memory (no copy) where torch can: not with negative strides, nor with
    strides that are no multiple of the item size (a field of a structured array)."""
    if any(s < 0 or s % array.itemsize for s in array.strides):
        array = np.ascontiguousarray(array)
    if not array.flags.writeable:  # e.g. np.broadcast_to; einsum never writes to its inputs
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            return torch.from_numpy(array)
    return torch.from_numpy(array)


# numpy dtypes that torch tensors can hold; numpy.einsum also takes object and long double arrays
TORCH_HOLDS = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128))
# torch has no sum or matmul kernels for these: they are computed in int64 and cast back, which
# wraps around exactly as numpy's unsigned arithmetic does
COMPUTED_AS_INT64 = frozenset({torch.uint16, torch.uint32, torch.uint64})


def _not_an_operand(n: int, operand: Any, why: str) -> EinsumError:
    return EinsumError(f"einsum(): operand {n} ({type(operand).__name__}) {why}; pass a torch tensor, "
                       f"a numpy array or a number")


def _as_array(n: int, operand: Any) -> np.ndarray:
    try:
        return np.asarray(operand)
    except (TypeError, ValueError) as error:  # e.g. a ragged list
        raise _not_an_operand(n, operand, f"cannot be made an array ({error})") from None


def _from_numpy(operands: Sequence[Any]) -> list[torch.Tensor]:
    arrays = [_as_array(n, op) for n, op in enumerate(operands)]
    for n, (operand, array) in enumerate(zip(operands, arrays)):
        if array.dtype not in TORCH_HOLDS:
            raise _not_an_operand(n, operand, f"has dtype {array.dtype}, which tensorcraft.einsum does not "
                                  f"support (bool, integers, float16/32/64 and complex64/128 only)")
    dtype = np.result_type(*arrays)
    return [_as_tensor(a.astype(dtype, copy=False)) for a in arrays]


def _to_tensor(operand: Any, operands: Sequence[Any]) -> torch.Tensor:
    """A number (or a list of numbers) next to torch tensors becomes a tensor on their device,
    as numpy would make it an array."""
    device = next(op.device for op in operands if isinstance(op, torch.Tensor))
    try:
        return torch.as_tensor(operand, device=device)
    except (TypeError, RuntimeError, ValueError) as error:
        n = next(n for n, op in enumerate(operands) if op is operand)
        raise _not_an_operand(n, operand, f"cannot be made a tensor ({error})") from None


def einsum(*args: Any, optimize: Optimize = DEFAULT_OPTIMIZE) -> Any:
    """Einstein summation, exactly as torch.einsum computes it.

    `einsum('bij,bjk->bik', a, b)`, `einsum('ij,jk', [a, b])` or `einsum(a, [0, 1], b, [1, 2], [0, 2])`.
    Torch tensors (any device; autograd flows through) give a tensor; numpy arrays give a numpy
    array (a numpy scalar for a 0-d result, like numpy.einsum). `optimize` chooses the order of
    contractions: 'auto' (default), 'optimal', 'greedy', False/'none' (left to right) or a path.
    Raises EinsumError (a ValueError and a RuntimeError) for an equation that does not fit,
    an `optimize` that is no strategy or path, or an operand that is no tensor, array or number.
    """
    equation, operands = split_arguments(args)
    numpy_out = not any(isinstance(op, torch.Tensor) for op in operands)
    if numpy_out:
        tensors = _from_numpy(operands)
    else:
        tensors = [op if isinstance(op, torch.Tensor) else _to_tensor(op, operands) for op in operands]
        if any(t.dtype != tensors[0].dtype for t in tensors):
            dtype = _common_dtype(tensors)
            tensors = [t.to(dtype) for t in tensors]
    if not isinstance(optimize, str):  # a path becomes a tuple of tuples: the cache key must be hashable
        optimize = checked_optimize(optimize)
    # a list, not a generator: torch.compile (Dynamo) cannot pass a generator to the planner
    shapes = tuple([t.shape for t in tensors])
    plan = (build_plan if cache_bypassed() else cached_plan.cached)(equation, shapes, optimize)
    dtype = tensors[0].dtype
    if dtype == torch.bool:  # no bool matmul: count in int64, then "any term true"
        out = run_plan(plan, [t.to(torch.int64) for t in tensors]) != 0
    elif dtype in COMPUTED_AS_INT64:
        out = run_plan(plan, [t.to(torch.int64) for t in tensors]).to(dtype)
    else:
        out = run_plan(plan, tensors)
    if numpy_out:
        out = out.numpy()
        return out[()] if out.ndim == 0 else out
    return out
