"""The public operations: rearrange, reduce, repeat, parse_shape (and pack, unpack, einsum).

Every call looks up ``(pattern, operation, array type, shape, keyword lengths)`` in one cache;
on a hit it runs the cached steps and nothing else. On a miss it builds the recipe and the plan
(tensorcraft.einops.recipe), spells the plan for numpy or torch (tensorcraft.einops.backends),
and stores the steps. The hot path is plain Python that torch.compile (Dynamo) traces without a
graph break and without a warning: while it traces, the cache is skipped (tensorcraft.plan_cache).
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar, Union

from tensorcraft.einops.backends import compile_steps, operations_for
from tensorcraft.einops.errors import EinopsError, describe_call
from tensorcraft.einops.named_einsum import einsum, einsum_equation
from tensorcraft.einops.packing import pack, unpack
from tensorcraft.einops.pattern import ELLIPSIS, AnonymousAxis, parse_expression
from tensorcraft.einops.recipe import check_operation, make_plan, make_recipe
from tensorcraft.plan_cache import cache_bypassed, plan_cache
from tensorcraft.stages import swappable

__all__ = ["rearrange", "reduce", "repeat", "parse_shape", "pack", "unpack", "einsum",
           "einsum_equation", "EinopsError"]

Tensor = TypeVar("Tensor")  # a numpy array or a torch tensor; each function returns the same kind
Reduction = Union[str, Callable[[Any, tuple[int, ...]], Any]]


def _stack(tensors: list[Tensor], pattern: str, operation: Reduction, axes_lengths: dict) -> Tensor:
    """A list of tensors is stacked along a new first axis, as einops does."""
    if len(tensors) == 0:
        raise EinopsError(f"{describe_call(operation, pattern, None, axes_lengths)}: the list of tensors is empty")
    try:
        return operations_for(type(tensors[0]))["stack"](tensors)
    except Exception as error:  # not arrays, or shapes, dtypes or devices that do not stack
        shapes = [tuple(getattr(t, "shape", ())) for t in tensors]
        raise EinopsError(f"{describe_call(operation, pattern, None, axes_lengths)}: cannot stack the list "
                          f"of tensors with shapes {shapes}: {error}") from None


@plan_cache(maxsize=4096)
def steps_for(pattern: str, operation: Reduction, array_type: type, shape: tuple,
              lengths: tuple[tuple[str, int], ...]) -> tuple:
    """recipe -> plan -> steps, cached; errors name the call and the shape.

    Not a dict: a compiled model must install no guard on the cache (and never recompile when it
    grows); while torch.compile traces, the plan is built afresh (see tensorcraft.plan_cache).
    """
    axes_lengths = dict(lengths)
    try:
        check_operation(operation)  # before it is hashed by make_recipe's cache
        recipe = make_recipe(pattern, operation, len(shape), tuple(axes_lengths))
        plan = make_plan(recipe, tuple(shape), axes_lengths)
        return compile_steps(plan, array_type)
    except EinopsError as error:
        raise EinopsError(f"{describe_call(operation, pattern, shape, axes_lengths)}: {error}") from None


def transform(tensor: Tensor | list[Tensor], pattern: str, operation: Reduction, axes_lengths: dict) -> Tensor:
    """What the layers and helpers call: a rearrange goes through the `rearrange` stage, so that
    ``substitute(rearrange=f)`` reaches every rearrange the library makes; the rest is `apply`."""
    if operation == "rearrange":
        return _rearrange_stage(tensor, pattern, **axes_lengths)
    return apply(tensor, pattern, operation, axes_lengths)


def apply(tensor: Tensor | list[Tensor], pattern: str, operation: Reduction, axes_lengths: dict) -> Tensor:
    """The hot path shared by rearrange, reduce and repeat: one cache lookup, then the steps."""
    if isinstance(tensor, list):
        tensor = _stack(tensor, pattern, operation, axes_lengths)
    try:
        shape = tensor.shape
    except AttributeError:  # not an array at all
        raise EinopsError(f"{describe_call(operation, pattern, None, axes_lengths)}: expected a numpy "
                          f"array or a torch tensor, got {type(tensor).__name__}") from None
    lengths = tuple(axes_lengths.items()) if axes_lengths else ()
    if cache_bypassed():  # torch.compile is tracing, or a learner's stage is in: plan afresh
        steps = steps_for.uncached(pattern, operation, type(tensor), shape, lengths)
    else:
        try:
            steps = steps_for.cached(pattern, operation, type(tensor), shape, lengths)
        except TypeError:  # something unhashable (a list as a length...): no cache
            steps = steps_for.uncached(pattern, operation, type(tensor), shape, lengths)
    for step, argument in steps:
        tensor = step(tensor, argument)
    return tensor


@swappable
def rearrange(tensor: Tensor | list[Tensor], pattern: str, **axes_lengths: int) -> Tensor:
    """Reorder, compose and decompose axes: ``rearrange(x, "b (h w) c -> b c h w", h=2)``.

    Returns a view when the backend can (as einops). A list of tensors is stacked first.
    A stage (``tensorcraft.substitute(rearrange=f)``): the `Rearrange` layer calls it too.
    """
    return apply(tensor, pattern, "rearrange", axes_lengths)


# transform's own reference: a check's tripwire on the public name must not cut the library's path
_rearrange_stage = rearrange


@swappable
def reduce(tensor: Tensor | list[Tensor], pattern: str, reduction: Reduction, **axes_lengths: int) -> Tensor:
    """Rearrange, then reduce the axes missing on the right:
    ``reduce(x, "b c (h 2) (w 2) -> b c h w", "max")``.

    ``reduction`` is one of min, max, sum, mean, prod, any, all, or a function ``f(tensor, axes)``.
    A stage (notebook 06): ``tensorcraft.substitute(reduce=f)`` runs ``f`` wherever the library
    reduces, in ``tc.reduce`` and in the ``Reduce`` layer.
    """
    return transform(tensor, pattern, reduction, axes_lengths)


@swappable
def repeat(tensor: Tensor | list[Tensor], pattern: str, **axes_lengths: int) -> Tensor:
    """Rearrange, then add (broadcast) the axes new on the right: ``repeat(x, "h w -> h w c", c=3)``.

    A stage (notebook 06): ``tensorcraft.substitute(repeat=f)`` runs ``f`` wherever the library repeats.
    """
    return transform(tensor, pattern, "repeat", axes_lengths)


def parse_shape(tensor: Tensor, pattern: str) -> dict[str, int]:
    """Name the dimensions of ``tensor``: ``parse_shape(x, "b _ h w") -> {"b": 2, "h": 5, "w": 7}``.

    ``_`` skips a dimension, ``...`` skips any number of them, ``1`` and numbers are checked.
    """
    shape = getattr(tensor, "shape", None)
    if shape is None:
        operations_for(type(tensor))  # raises EinopsError naming the type
    shape = tuple(shape)
    where = f'parse_shape(x, "{pattern}") on input of shape {shape}'
    try:
        expression = parse_expression(pattern, allow_underscore=True)
    except EinopsError as error:
        raise EinopsError(f"{where}: {error}") from None
    if expression.has_composed_dims or expression.ellipsis_in_group:
        raise EinopsError(f"{where}: parse_shape cannot read composed axes like (h w)")
    dims = list(expression.dims)
    if ELLIPSIS in dims:
        if len(shape) < len(dims) - 1:
            raise EinopsError(f"{where}: the pattern needs at least {len(dims) - 1} dimensions")
        at = dims.index(ELLIPSIS)
        dims[at:at + 1] = [("_",)] * (len(shape) - len(dims) + 1)
    elif len(shape) != len(dims):
        raise EinopsError(f"{where}: the pattern names {len(dims)} dimensions, the input has {len(shape)}")
    result = {}
    for position, (dim, length) in enumerate(zip(dims, shape)):
        if not dim:
            if length != 1:
                raise EinopsError(f"{where}: dimension {position} is written 1 but has length {length}")
            continue
        (axis,) = dim
        if isinstance(axis, AnonymousAxis):
            if axis.length != length:
                raise EinopsError(f"{where}: dimension {position} is written {axis.length} "
                                  f"but has length {length}")
        elif axis != "_":
            result[axis] = length
    return result
