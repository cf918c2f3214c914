"""Known-wrong answers to notebook 05's exercises (parse one side, the plan, rearrange), each with its hint.

Each family is one small correct implementation with a switch per mistake, so that a mutant differs
from a right answer in exactly the way its hint names.
"""
from __future__ import annotations

import math
import types

import einops
import numpy as np
import torch
from einops import EinopsError

from tensorcraft.einops import pattern as _pattern_module
from tensorcraft.einops.errors import EinopsError as LibraryError
from tensorcraft.einops.pattern import ELLIPSIS, AnonymousAxis, Expression
from tensorcraft.einops.recipe import Plan

from . import mutant

# the library's own parser, under a function object of its own: the rearrange mutants need a correct parse
# to get their mistake right, and the library's function itself is out of reach while a check runs
_library = _pattern_module.parse_expression.library
_library_parse = types.FunctionType(_library.__code__, _library.__globals__, "_library_parse", _library.__defaults__)
_library_parse.__kwdefaults__ = _library.__kwdefaults__

# ---------------------------------------------------------------- parse_expression


def _parse(text: str, *, one_as_axis=False, flatten_groups=False, numbers_as_names=False, duplicates=False,
           ellipsis_as_group=False, drop_empty_groups=False, nesting=False,
           unwrap_ellipsis_group=False, duplicates_in_groups=False, shared_anonymous=False) -> Expression:
    dims: list = []
    group: list | None = None
    seen: set = set()
    anonymous: dict = {}   # shared_anonymous: one AnonymousAxis per length, reused

    def add(word: str) -> None:
        if word == "...":
            if word in seen:
                raise EinopsError("two ellipses")
            seen.add(word)
            axis = ELLIPSIS
        elif word.isdecimal() and not numbers_as_names:
            if int(word) == 0:
                raise EinopsError("an anonymous axis needs a positive length")
            if int(word) == 1 and not one_as_axis:
                if group is None:
                    dims.append(())
                return
            axis = anonymous.setdefault(int(word), AnonymousAxis(int(word))) if shared_anonymous \
                else AnonymousAxis(int(word))
        else:
            if not (word.isidentifier() or word.isdecimal()) or word.startswith("_") or word.endswith("_"):
                raise EinopsError(f"bad name {word}")
            checked = not (duplicates_in_groups and group is not None)
            if checked and word in seen and not duplicates:
                raise EinopsError(f"{word} twice")
            if checked:
                seen.add(word)
            axis = word
        if group is not None:
            group.append(axis)
        elif axis == ELLIPSIS and not ellipsis_as_group:
            dims.append(ELLIPSIS)
        else:
            dims.append((axis,))

    word = ""
    for char in text + " ":
        if char in "() ":
            if word:
                add(word)
            word = ""
            if char == "(":
                if group is not None and not nesting:
                    raise EinopsError("nested")
                group = [] if group is None else group
            elif char == ")":
                if group is None:
                    if nesting:
                        continue
                    raise EinopsError("unbalanced")
                if flatten_groups:
                    dims.extend((axis,) for axis in group)
                elif unwrap_ellipsis_group and group == [ELLIPSIS]:
                    dims.append(ELLIPSIS)
                elif group or not drop_empty_groups:
                    dims.append(tuple(group))
                group = None
        elif char.isalnum() or char in "_.":
            word += char
        else:
            raise EinopsError(f"bad character {char}")
    if group is not None:
        raise EinopsError("unclosed")
    return Expression(text=text, dims=tuple(dims))


@mutant("nb05_rearrange.parse_expression", hint="a 1 is no axis at all (einops keeps no axis of length 1): "
        "outside parentheses it is the dimension (), like '()'; inside a group it adds nothing to the group")
def parse_one_as_axis(text):
    return _parse(text, one_as_axis=True)


@mutant("nb05_rearrange.parse_expression", hint="a group '(h w)' is ONE dimension made of two axes: append the "
        "tuple ('h', 'w') when ')' closes it, not one dimension per axis")
def parse_groups_flattened(text):
    return _parse(text, flatten_groups=True)


@mutant("nb05_rearrange.parse_expression", hint="a number other than 1 is an anonymous axis: "
        "AnonymousAxis(int(word)), not the name '2'")
def parse_numbers_as_names(text):
    return _parse(text, numbers_as_names=True)


NAME_TWICE_HINT = ("a name may appear once per side, inside a group too: raise einops.EinopsError for 'a b a' "
                   "and for 'a (b a)'; remember every name you have seen, in groups or not")


@mutant("nb05_rearrange.parse_expression", hint=NAME_TWICE_HINT)
def parse_allows_duplicates(text):
    return _parse(text, duplicates=True)


@mutant("nb05_rearrange.parse_expression", hint=NAME_TWICE_HINT)
def parse_allows_duplicates_in_groups(text):
    return _parse(text, duplicates_in_groups=True)


@mutant("nb05_rearrange.parse_expression", hint="each number is an anonymous axis of its own: '(h 2) (w 2)' has two "
        "axes of length 2, so create a new AnonymousAxis for every number, never one per length")
def parse_one_anonymous_axis_per_length(text):
    return _parse(text, shared_anonymous=True)


@mutant("nb05_rearrange.parse_expression", hint="outside parentheses the ellipsis is the bare string ELLIPSIS "
        "in dims, not the group (ELLIPSIS,): it stands for any number of dimensions, not for one")
def parse_ellipsis_as_group(text):
    return _parse(text, ellipsis_as_group=True)


@mutant("nb05_rearrange.parse_expression", hint="'()' is a dimension of length 1: append the empty tuple () "
        "when an empty group closes")
def parse_drops_empty_groups(text):
    return _parse(text, drop_empty_groups=True)


@mutant("nb05_rearrange.parse_expression", hint="'(...)' is a group: the tuple (ELLIPSIS,), one dimension that "
        "merges all the dimensions '...' stands for; only a bare '...' is the string ELLIPSIS")
def parse_unwraps_ellipsis_group(text):
    return _parse(text, unwrap_ellipsis_group=True)


@mutant("nb05_rearrange.parse_expression", hint="composition is one level deep: '(' inside an open group "
        "must raise einops.EinopsError")
def parse_allows_nesting(text):
    return _parse(text, nesting=True)


# ---------------------------------------------------------------- make_plan


def _plan(recipe, shape, axes_lengths, *, group_reversed=False, final=True, permute=True, check=True) -> Plan:
    lengths = list(recipe.fixed_lengths)
    for name, axis in recipe.given_axes:
        lengths[axis] = axes_lengths[name]
    for dim, actual in zip(recipe.input_dims, shape):
        unknown = [axis for axis in dim if lengths[axis] is None]
        known = math.prod(lengths[axis] for axis in dim if lengths[axis] is not None)
        if unknown:
            if check and (known == 0 or actual % known):
                raise EinopsError(f"{known} does not divide {actual}")
            lengths[unknown[0]] = actual // known
        elif check and known != actual:
            raise EinopsError(f"{known} is not {actual}")
    init = [lengths[axis] for dim in recipe.input_dims
            for axis in (reversed(dim) if group_reversed else dim)]
    return Plan(recipe=recipe, input_shape=tuple(shape), axes_lengths=tuple(axes_lengths.items()),
                init_shape=tuple(init), permutation=recipe.permutation if permute else None, reduced_axes=(),
                unsqueezed_shape=None, expanded_shape=None,
                final_shape=tuple(math.prod(lengths[a] for a in dim) for dim in recipe.output_dims) if final else None)


@mutant("nb05_rearrange.make_plan", hint="init_shape lists the axes of a group in the order they are written: "
        "(h w) of length 12 with h=3 is (3, 4) — the first axis is the outer one")
def plan_group_reversed(recipe, shape, axes_lengths):
    return _plan(recipe, shape, axes_lengths, group_reversed=True)


@mutant("nb05_rearrange.make_plan", hint="final_shape is needed whenever an output group holds several axes: "
        "without it (h w) is never merged into one dimension")
def plan_without_final_reshape(recipe, shape, axes_lengths):
    return _plan(recipe, shape, axes_lengths, final=False)


@mutant("nb05_rearrange.make_plan", hint="the axes must move into the output's order: set permutation to "
        "recipe.permutation")
def plan_without_permutation(recipe, shape, axes_lengths):
    return _plan(recipe, shape, axes_lengths, permute=False)


@mutant("nb05_rearrange.make_plan", hint="check every dimension: a given length must divide it "
        "(raise einops.EinopsError), and a group whose lengths are all known must multiply to exactly it")
def plan_without_checks(recipe, shape, axes_lengths):
    return _plan(recipe, shape, axes_lengths, check=False)


# ---------------------------------------------------------------- rearrange


def _rearrange(x, pattern, axes_lengths, *, group_reversed=False, given_reversed=False, permute_first=False,
               ellipsis_last=False, ellipsis_reversed=False, check=True, view=False, inverse=False,
               unused_lengths=False, ellipsis_group_end=False, drop_empty_ellipsis_group=False):
    try:
        left_text, right_text = pattern.split("->")
        left, right = _library_parse(left_text), _library_parse(right_text)
    except (ValueError, LibraryError) as error:
        raise EinopsError(str(error)) from None
    if left.anonymous_axes or right.anonymous_axes or left.identifiers != right.identifiers:
        raise EinopsError("rearrange keeps every axis")
    if left.ellipsis_in_group:
        raise EinopsError("'...' inside a group on the left")
    names = set(left.axes)
    if unused_lengths:
        axes_lengths = {name: length for name, length in axes_lengths.items() if name in names}
    if any(name not in names for name in axes_lengths):
        raise EinopsError("unused length")
    n_named = len(left.dims) - left.has_ellipsis
    if (x.ndim < n_named) if left.has_ellipsis else (x.ndim != n_named):
        raise EinopsError("rank")
    extra = [f"...{i}" for i in range(x.ndim - n_named)]

    def expand(expression):
        dims = []
        for dim in expression.dims:
            if dim == ELLIPSIS:
                dims += [(name,) for name in extra]
            elif ellipsis_group_end and ELLIPSIS in dim:
                dims.append(tuple(a for a in dim if a != ELLIPSIS) + tuple(extra))
            elif drop_empty_ellipsis_group and ELLIPSIS in dim and len(dim) == 1 and not extra:
                continue
            else:
                dims.append(tuple(a for axis in dim for a in (extra if axis == ELLIPSIS else [axis])))
        return dims

    left_dims = expand(left)
    if ellipsis_reversed:
        extra.reverse()
    right_dims = expand(right)
    if ellipsis_last:
        right_dims = [d for d in right_dims if d[0] not in extra] + [d for d in right_dims if d[0] in extra]
    if group_reversed:
        right_dims = [tuple(reversed(dim)) for dim in right_dims]
    lengths = dict(axes_lengths)
    for dim, actual in zip(left_dims, x.shape):
        unknown = [a for a in dim if a not in lengths]
        known = math.prod(lengths[a] for a in dim if a in lengths)
        if len(unknown) > 1:
            raise EinopsError("two unknown lengths")
        if unknown:
            if check and (known == 0 or actual % known):
                raise EinopsError("does not divide")
            lengths[unknown[0]] = actual // known
        elif check and known != actual:
            raise EinopsError("wrong length")
    axes = [a for dim in left_dims for a in (reversed(dim) if given_reversed else dim)]
    order = [a for dim in right_dims for a in dim]
    final = [math.prod(lengths[a] for a in dim) for dim in right_dims]
    if permute_first:  # whole input dimensions moved, in the order their first axis leaves
        dims_order = sorted(range(len(left_dims)),
                            key=lambda i: min((order.index(a) for a in left_dims[i]), default=-1))
        return x.permute(dims_order).reshape(final)
    x = x.reshape([lengths[a] for a in axes])
    permutation = [axes.index(a) for a in order]
    if inverse:
        permutation = [permutation.index(i) for i in range(len(permutation))]
    x = x.permute(permutation)
    return x.view(final) if view else x.reshape(final)


@mutant("nb05_rearrange.rearrange", hint="inside a group the first axis varies slowest: '(h w)' walks w inside "
        "each h (row after row); you composed the axes of each output group in reverse, as (w h)")
def rearrange_groups_reversed(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, group_reversed=True)


@mutant("nb05_rearrange.rearrange", hint="a given length belongs to the axis of that name, and the first axis "
        "of a group is the outer one: 'b (h w)' of length 12 with h=3 reshapes to (b, 3, 4), not (b, 4, 3)")
def rearrange_decomposed_reversed(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, given_reversed=True)


@mutant("nb05_rearrange.rearrange", hint="decompose before you permute: moving whole input dimensions cannot "
        "separate h from w in '(h w) c -> h c w'; reshape into one dimension per axis first")
def rearrange_permute_before_decompose(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, permute_first=True)


@mutant("nb05_rearrange.rearrange", hint="the ellipsis' dimensions go where '...' is written on the right, "
        "not at the end")
def rearrange_ellipsis_at_the_end(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, ellipsis_last=True)


@mutant("nb05_rearrange.rearrange", hint="check every dimension before reshaping: a given length must divide "
        "the dimension and a fully given group must equal it; otherwise raise einops.EinopsError")
def rearrange_without_length_checks(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, check=False)


@mutant("nb05_rearrange.rearrange", hint="after permute the tensor is not contiguous and .view cannot merge "
        "its dimensions: use .reshape")
def rearrange_with_view(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, view=True)


@mutant("nb05_rearrange.rearrange", hint="permute takes, for each OUTPUT position, the index of the input axis "
        "that goes there: [axes.index(a) for a in output_order]; you passed the inverse permutation")
def rearrange_inverse_permutation(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, inverse=True)


@mutant("nb05_rearrange.rearrange", hint="the dimensions '...' stands for keep their order: expand it into the "
        "same list of names, in the same order, on both sides")
def rearrange_ellipsis_reversed(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, ellipsis_reversed=True)


@mutant("nb05_rearrange.rearrange", hint="a keyword length must name an axis of the pattern: "
        "rearrange(x, 'a b -> b a', c=2) raises einops.EinopsError, as einops does")
def rearrange_ignores_unknown_keywords(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, unused_lengths=True)


@mutant("nb05_rearrange.rearrange", hint="inside an output group the ellipsis' dimensions go where '...' is written: "
        "'(... b)' puts them before b, '(b ...)' after it")
def rearrange_ellipsis_at_group_end(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, ellipsis_group_end=True)


@mutant("nb05_rearrange.rearrange", hint="a group on the right is one output dimension even when the '...' in it "
        "stands for no dimension: '(...)' then has length 1 (the product of no lengths), like '()'")
def rearrange_drops_empty_ellipsis_group(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, drop_empty_ellipsis_group=True)


_KEPT = {"rearrange": einops.rearrange}  # kept before the check ran, under a name of its own


@mutant("nb05_rearrange.rearrange", hint="einops is forbidden under any name, even kept in a dict: the check "
        "trips on einops' own steps; reshape, permute and reshape yourself")
def rearrange_by_kept_einops(x, pattern, **axes_lengths):
    return _KEPT["rearrange"](x, pattern, **axes_lengths)


@mutant("nb05_rearrange.rearrange", hint="numpy is not allowed in this exercise: a round trip through .numpy() "
        "loses autograd and the device; reshape and permute the tensor itself")
def rearrange_through_numpy(x, pattern, **axes_lengths):
    return torch.from_numpy(np.ascontiguousarray(_KEPT["rearrange"](x.detach().numpy(), pattern, **axes_lengths)))
