"""From a pattern to a plan: the reshape -> permute -> reduce -> expand -> reshape that runs it.

Two stages, so that each piece of work is done once:

1. `make_recipe(pattern, operation, ndim, given_names)` looks only at the pattern and the input's
   rank: it lists the *elementary axes* (every name, number and ellipsis dimension, input axes first,
   then the axes that ``repeat`` adds), says which input dimension is made of which axes, and in which
   order they leave. Cached: a pattern is parsed once per rank.
2. `make_plan(recipe, shape, axes_lengths)` takes one concrete input shape: it infers every axis
   length (``(h w)`` of length 12 with ``h=3`` gives ``w=4``), checks every length it cannot infer,
   and writes down the five shapes and axis lists. ``tensorcraft.einops.ops`` caches the plan per
   shape, so repeated calls pay only for the tensor operations.

Example: ``print(plan_for("b (h w) c -> b c h w", (5, 6, 3), h=2))`` shows the elementary axes
b h w c, an init reshape to (5, 2, 3, 3) and the permutation (0, 3, 1, 2); no reduction, no new
axes, no final reshape.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable, Union

from tensorcraft.einops.errors import EinopsError
from tensorcraft.einops.pattern import (ELLIPSIS, AnonymousAxis, Axis, Expression, axis_name_problem,
                                        parse_expression, split_pattern)
from tensorcraft.plan_cache import plan_cache
from tensorcraft.stages import swappable

REDUCTIONS = ("min", "max", "sum", "mean", "prod", "any", "all")
Operation = Union[str, Callable]  # "rearrange", "repeat", a reduction name, or f(tensor, axes)


@dataclass(frozen=True)
class Recipe:
    """Everything that depends on the pattern and the rank, but not yet on the shape."""

    pattern: str
    operation: Operation
    ndim: int
    axes: tuple[Axis, ...]                 # elementary axes: the input's in order, then the new ones
    fixed_lengths: tuple[int | None, ...]  # lengths written in the pattern (numbers); None elsewhere
    given_axes: tuple[tuple[str, int], ...]  # (name, elementary axis) of each keyword length
    input_dims: tuple[tuple[int, ...], ...]   # per input dimension: the elementary axes it holds
    permutation: tuple[int, ...]           # input axes in output order, then the reduced ones
    n_reduced: int                         # how many axes at the end of `permutation` are reduced
    new_axes: tuple[tuple[int, int], ...]  # (position in the output's axes, elementary axis): repeat's
    output_dims: tuple[tuple[int, ...], ...]  # per output dimension: the elementary axes it holds


@dataclass(frozen=True)
class Plan:
    """The concrete steps for one input shape. ``None`` or ``()`` means: skip that step."""

    recipe: Recipe
    input_shape: tuple[int, ...]
    axes_lengths: tuple[tuple[str, int], ...]  # the keyword lengths of the call, as (name, length)
    init_shape: tuple[int, ...] | None      # 1. reshape: split composed input dims into axes
    permutation: tuple[int, ...] | None     # 2. permute: output order, reduced axes last
    reduced_axes: tuple[int, ...]           # 3. reduce: these (trailing) axes
    unsqueezed_shape: tuple[int, ...] | None  # 4. expand: insert length-1 axes where repeat adds axes,
    expanded_shape: tuple[int, ...] | None  # ...then broadcast them to their lengths
    final_shape: tuple[int, ...] | None     # 5. reshape: compose the output dims

    def __str__(self) -> str:
        """One line per step that runs, e.g. ``  reshape (5, 2, 3, 3)``: what a notebook prints."""
        operation = self.recipe.operation
        name = operation if isinstance(operation, str) else getattr(operation, "__name__", repr(operation))
        steps = [("reshape", self.init_shape), ("permute", self.permutation),
                 (f"reduce ({name}) axes", self.reduced_axes or None),
                 ("unsqueeze to", self.unsqueezed_shape), ("expand to", self.expanded_shape),
                 ("reshape", self.final_shape)]
        lines = [f'{name} "{self.recipe.pattern}" on shape {self.input_shape}:']
        lines += [f"  {label} {value}" for label, value in steps if value is not None]
        if len(lines) == 1:
            lines.append("  nothing to do: the input is returned as it is")
        return "\n".join(lines)


def _names(axes) -> str:
    return ", ".join(sorted(str(axis) for axis in axes))


def check_operation(operation) -> None:
    """rearrange, repeat, a reduction's name, or a function f(tensor, axes); nothing else."""
    if callable(operation) or (isinstance(operation, str) and operation in ("rearrange", "repeat", *REDUCTIONS)):
        return
    raise EinopsError(f"unknown reduction {operation!r}; expected one of {', '.join(REDUCTIONS)} "
                      "or a function f(tensor, axes)")


def _check_sides(left: Expression, right: Expression, operation: Operation,
                 given_names: tuple[str, ...]) -> None:
    """Which axes may stand on one side only depends on the operation: none for rearrange,
    new ones (with a length) for repeat, removed ones for a reduction."""
    if right.has_ellipsis and not left.has_ellipsis:
        raise EinopsError("'...' stands on the right side only; it must appear on the left too")
    if left.ellipsis_in_group:
        raise EinopsError("'...' inside parentheses on the left side; only the output may compose it")
    only_left = left.identifiers - right.identifiers
    only_right = right.identifiers - left.identifiers
    if operation == "rearrange":
        numbers = left.anonymous_axes + right.anonymous_axes
        if numbers:
            raise EinopsError(f"rearrange accepts no numeric axis other than 1, found {_names(numbers)}; "
                              "use repeat to add an axis, reduce to remove one")
        if only_left:
            raise EinopsError(f"axis {_names(only_left)} appears on the left side only: rearrange keeps "
                              "every axis (reduce removes axes)")
        if only_right:
            raise EinopsError(f"axis {_names(only_right)} appears on the right side only: rearrange keeps "
                              "every axis (repeat adds axes)")
    elif operation == "repeat":
        if only_left:
            raise EinopsError(f"axis {_names(only_left)} appears on the left side only: repeat cannot "
                              "remove axes (numeric axes may stand on the right only)")
        missing = {axis for axis in only_right
                   if not isinstance(axis, AnonymousAxis) and axis not in given_names}
        if missing:
            hint = ", ".join(f"{name}=..." for name in sorted(missing))
            raise EinopsError(f"new axis {_names(missing)} needs a length: pass {hint}")
    else:
        check_operation(operation)
        if only_right:
            raise EinopsError(f"axis {_names(only_right)} appears on the right side only: "
                              f"reduce cannot add axes (numeric axes may stand on the left only)")


def _expand_ellipsis(left: Expression, right: Expression, ndim: int) -> tuple[list, list]:
    """Replace ``...`` by as many named axes ("...0", "...1", ...) as the input has spare dims."""
    if left.has_ellipsis:
        n_named = len(left.dims) - 1
        if ndim < n_named:
            raise EinopsError(f"the input has {ndim} dimensions, the left side needs at least {n_named}")
        ellipsis_axes = tuple(f"{ELLIPSIS}{i}" for i in range(ndim - n_named))
    else:
        if ndim != len(left.dims):
            raise EinopsError(f"the input has {ndim} dimensions, the left side names {len(left.dims)}")
        ellipsis_axes = ()

    def expand(expression: Expression) -> list[tuple]:
        dims = []
        for dim in expression.dims:
            if dim == ELLIPSIS:
                dims.extend((axis,) for axis in ellipsis_axes)
            else:
                dims.append(tuple(a for axis in dim for a in (ellipsis_axes if axis == ELLIPSIS else (axis,))))
        return dims

    return expand(left), expand(right)


@swappable
def make_recipe(pattern: str, operation: Operation, ndim: int, given_names: tuple[str, ...]) -> Recipe:
    """Parse ``pattern`` and lay out its axes for an input of rank ``ndim`` (cached per call).

    ``given_names`` are the axes whose lengths the caller passes as keywords (``h=2``).
    A stage (``tensorcraft.substitute(make_recipe=f)``); while any substitute is in force the
    cache is neither read nor filled, so that a substituted ``parse_expression`` is called.
    """
    return _cached_layout(pattern, operation, ndim, given_names)


def _layout(pattern: str, operation: Operation, ndim: int, given_names: tuple[str, ...]) -> Recipe:
    """make_recipe's work, uncached."""
    left_text, right_text = split_pattern(pattern)
    left, right = parse_expression(left_text), parse_expression(right_text)
    _check_sides(left, right, operation, given_names)
    left_dims, right_dims = _expand_ellipsis(left, right, ndim)

    left_axes = [axis for dim in left_dims for axis in dim]
    right_axes = [axis for dim in right_dims for axis in dim]
    on_left, on_right = set(left_axes), set(right_axes)
    axes = left_axes + [axis for axis in right_axes if axis not in on_left]
    index = {axis: i for i, axis in enumerate(axes)}

    for name in given_names:
        problem = axis_name_problem(name)
        if problem:
            raise EinopsError(f"keyword {name}=...: {problem}")
        if name not in index:
            raise EinopsError(f"keyword {name}=... names an axis that the pattern does not use")

    def is_known(axis: Axis) -> bool:
        return isinstance(axis, AnonymousAxis) or axis in given_names

    for dim in left_dims:
        unknown = [axis for axis in dim if not is_known(axis)]
        if len(unknown) > 1:
            names = ", ".join(map(str, unknown))
            raise EinopsError(f"cannot infer the lengths of {names} from one dimension "
                              f"({' '.join(map(str, dim))}); pass all of them but one as keywords")

    reduced = [axis for axis in left_axes if axis not in on_right]
    leaving_order = [axis for axis in right_axes if axis in on_left] + reduced
    return Recipe(
        pattern=pattern,
        operation=operation,
        ndim=ndim,
        axes=tuple(axes),
        fixed_lengths=tuple(axis.length if isinstance(axis, AnonymousAxis) else None for axis in axes),
        given_axes=tuple((name, index[name]) for name in given_names),
        input_dims=tuple(tuple(index[axis] for axis in dim) for dim in left_dims),
        permutation=tuple(index[axis] for axis in leaving_order),
        n_reduced=len(reduced),
        new_axes=tuple((position, index[axis]) for position, axis in enumerate(right_axes)
                       if axis not in on_left),
        output_dims=tuple(tuple(index[axis] for axis in dim) for dim in right_dims),
    )


_cached_layout = plan_cache(maxsize=1024)(_layout)


def _product(numbers) -> int:
    result = 1
    for number in numbers:
        result *= number
    return result


def _dim_text(recipe: Recipe, dim: tuple[int, ...]) -> str:
    if not dim:
        return "1"
    words = " ".join(str(recipe.axes[axis]) for axis in dim)
    return words if len(dim) == 1 else f"({words})"


def _checked_length(name: str, length) -> int:
    try:
        length = operator.index(length)
    except TypeError:
        raise EinopsError(f"{name}={length!r}: an axis length must be an integer") from None
    if length < 0:
        raise EinopsError(f"{name}={length}: an axis length cannot be negative")
    return length


def _dimension_error(recipe: Recipe, lengths: list, position: int, actual: int) -> EinopsError:
    """Say which input dimension does not fit, and why (built only on failure: Dynamo-friendly)."""
    dim = recipe.input_dims[position]
    known = [axis for axis in dim if lengths[axis] is not None]
    product = _product(lengths[axis] for axis in known)
    given = ", ".join(f"{recipe.axes[axis]}={lengths[axis]}" for axis in known)
    where = f"dimension {position}, written {_dim_text(recipe, dim)}, has length {actual}"
    if len(known) == len(dim):
        return EinopsError(where + (f", but {given} makes {product}" if dim else ", but the pattern says 1"))
    return EinopsError(f"{where}, which cannot be split with {given}: {actual} is not divisible by {product}")


@swappable
def make_plan(recipe: Recipe, shape: tuple[int, ...], axes_lengths: dict) -> Plan:
    """Infer or check every axis length for one input ``shape`` and write down the steps.

    A stage (``tensorcraft.substitute(make_plan=f)``): every einops operation plans here.
    """
    lengths: list[int | None] = list(recipe.fixed_lengths)
    for name, axis in recipe.given_axes:
        lengths[axis] = _checked_length(name, axes_lengths[name])

    for position, (dim, actual) in enumerate(zip(recipe.input_dims, shape)):
        unknown = [axis for axis in dim if lengths[axis] is None]
        known_product = _product(lengths[axis] for axis in dim if lengths[axis] is not None)
        if not unknown:
            if actual != known_product:
                raise _dimension_error(recipe, lengths, position, actual)
        else:  # exactly one unknown axis, make_recipe made sure of it
            if known_product == 0 or actual % known_product != 0:
                raise _dimension_error(recipe, lengths, position, actual)
            lengths[unknown[0]] = actual // known_product

    n_input_axes = len(recipe.permutation)  # every input axis leaves, kept or reduced
    n_kept = len(recipe.permutation) - recipe.n_reduced
    reduced_axes = tuple(range(n_kept, len(recipe.permutation)))
    if recipe.operation in ("min", "max"):
        empty = [recipe.axes[a] for a in recipe.permutation[n_kept:] if lengths[a] == 0]
        if empty:
            raise EinopsError(f"{recipe.operation} over axis {_names(empty)} of length 0 has no value")

    unsqueezed = expanded = None
    if recipe.new_axes:
        new_lengths = {position: lengths[axis] for position, axis in recipe.new_axes}
        kept_lengths = iter(lengths[axis] for axis in recipe.permutation[:n_kept])
        n_out = n_kept + len(new_lengths)
        unsqueezed = tuple(1 if p in new_lengths else next(kept_lengths) for p in range(n_out))
        expanded = tuple(new_lengths.get(p, size) for p, size in enumerate(unsqueezed))

    one_axis_each = all(len(dim) == 1 for dim in recipe.input_dims)
    one_axis_out = all(len(dim) == 1 for dim in recipe.output_dims)
    identity = recipe.permutation == tuple(range(len(recipe.permutation)))
    return Plan(
        recipe=recipe,
        input_shape=tuple(shape),
        axes_lengths=tuple(axes_lengths.items()),
        init_shape=None if one_axis_each else tuple(lengths[:n_input_axes]),
        permutation=None if identity else recipe.permutation,
        reduced_axes=reduced_axes,
        unsqueezed_shape=unsqueezed,
        expanded_shape=expanded,
        final_shape=None if one_axis_out else tuple(
            _product(lengths[axis] for axis in dim) for dim in recipe.output_dims),
    )


def plan_for(pattern: str, shape: tuple[int, ...], operation: Operation = "rearrange", **axes_lengths: int) -> Plan:
    """The plan of one call, to read: ``print(plan_for("b (h w) -> b h w", (2, 6), h=2))``."""
    recipe = make_recipe(pattern, operation, len(shape), tuple(axes_lengths))
    return make_plan(recipe, tuple(shape), axes_lengths)
