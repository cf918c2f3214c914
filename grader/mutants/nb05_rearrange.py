"""Known-wrong answers to notebook 05's exercises (parse one side, the plan, rearrange), each with its hint.

parse_expression and make_plan mutants are patches of the library's own stages
(``grader.mutants.patched``): the library is the one copy of the right answer. The rearrange mutants
share ``_rearrange``, which runs only with one mistake switched on (never as a right answer).
"""
from __future__ import annotations

import math
import types

import einops
import numpy as np
import torch
from einops import EinopsError

from tensorcraft.einops.errors import EinopsError as LibraryError
from tensorcraft.einops.pattern import ELLIPSIS, parse_expression
from tensorcraft.einops.recipe import make_plan

from . import mutant, patched

PARSE = "nb05_rearrange.parse_expression"
PLAN = "nb05_rearrange.make_plan"

# ---------------------------------------------------------------- parse_expression: patches of the library's parser

CLOSE = "dims.append(tuple(group))"


def _raising_einops_errors(edited, *args):
    """The edited stage, raising einops' own EinopsError as the exercise asks (the library raises its own)."""
    try:
        return edited(*args)
    except LibraryError as error:
        raise EinopsError(str(error)) from None


def _parsing(name, *edits, hint):
    patched(PARSE, name, parse_expression, *edits, hint=hint, adapt=_raising_einops_errors)


def _planning(name, *edits, hint):
    patched(PLAN, name, make_plan, *edits, hint=hint, adapt=_raising_einops_errors)

_parsing("parse_one_as_axis", ("if length == 1:", "if False:"),
        hint="a 1 is no axis at all (einops keeps no axis of length 1): "
        "outside parentheses it is the dimension (), like '()'; inside a group it adds nothing to the group")

_parsing("parse_groups_flattened", (CLOSE, "dims.extend((axis,) for axis in group)"),
        hint="a group '(h w)' is ONE dimension made of two axes: append the "
        "tuple ('h', 'w') when ')' closes it, not one dimension per axis")

_parsing("parse_numbers_as_names", ("elif word.isdecimal():", "elif False:"),
        ("problem = axis_name_problem(", "problem = None if word.isdecimal() else axis_name_problem("),
        hint="a number other than 1 is an anonymous axis: AnonymousAxis(int(word)), not the name '2'")

NAME_TWICE_HINT = ("a name may appear once per side, inside a group too: raise einops.EinopsError for 'a b a' "
                   "and for 'a (b a)'; remember every name you have seen, in groups or not")

_parsing("parse_allows_duplicates", ("if word in seen and not repeats_allowed:", "if False:"),
        hint=NAME_TWICE_HINT)

_parsing("parse_allows_duplicates_in_groups",
        ("if word in seen and not repeats_allowed:", "if word in seen and not repeats_allowed and group is None:"),
        hint=NAME_TWICE_HINT)

_parsing("parse_one_anonymous_axis_per_length",
        ("seen: set[str] = set()", "seen: set[str] = set()\n    anonymous: dict = {}"),
        ("axis = AnonymousAxis(length)", "axis = anonymous.setdefault(length, AnonymousAxis(length))"),
        hint="each number is an anonymous axis of its own: '(h 2) (w 2)' has two "
        "axes of length 2, so create a new AnonymousAxis for every number, never one per length")

_parsing("parse_ellipsis_as_group",
        ("dims.append(axis if axis == ELLIPSIS else (axis,))", "dims.append((axis,))"),
        hint="outside parentheses the ellipsis is the bare string ELLIPSIS "
        "in dims, not the group (ELLIPSIS,): it stands for any number of dimensions, not for one")

_parsing("parse_drops_empty_groups", (CLOSE, "dims.append(tuple(group)) if group else None"),
        hint="'()' is a dimension of length 1: append the empty tuple () when an empty group closes")

_parsing("parse_unwraps_ellipsis_group",
        (CLOSE, "dims.append(ELLIPSIS if group == [ELLIPSIS] else tuple(group))"),
        hint="'(...)' is a group: the tuple (ELLIPSIS,), one dimension that "
        "merges all the dimensions '...' stands for; only a bare '...' is the string ELLIPSIS")

_parsing("parse_allows_nesting",
        ("raise fail(\"'(' inside '(...)': axis composition is one level deep\")\n                group = []",
         "pass\n                group = [] if group is None else group"),
        ("raise fail(\"')' without a matching '('\")", "continue"),
        hint="composition is one level deep: '(' inside an open group must raise einops.EinopsError")


# ---------------------------------------------------------------- make_plan: patches of the library's planner

_planning("plan_group_reversed",
        ("init_shape=None if one_axis_each else tuple(lengths[:n_input_axes])",
         "init_shape=None if one_axis_each else tuple(lengths[a] for dim in recipe.input_dims for a in reversed(dim))"),
        hint="init_shape lists the axes of a group in the order they are written: "
        "(h w) of length 12 with h=3 is (3, 4) — the first axis is the outer one")

_planning("plan_without_final_reshape", ("final_shape=None if one_axis_out else", "final_shape=None if True else"),
        hint="final_shape is needed whenever an output group holds several axes: "
        "without it (h w) is never merged into one dimension")

_planning("plan_without_permutation", ("permutation=None if identity else recipe.permutation", "permutation=None"),
        hint="the axes must move into the output's order: set permutation to recipe.permutation")

_planning("plan_without_checks", ("if actual != known_product:", "if False:"),
        ("if known_product == 0 or actual % known_product != 0:", "if False:"),
        hint="check every dimension: a given length must divide it "
        "(raise einops.EinopsError), and a group whose lengths are all known must multiply to exactly it")


# ---------------------------------------------------------------- rearrange


# the library's parser as its pipeline calls it (the stage): parsing is not these mutants' mistake. Held by an
# object, not a name, so that the check's search for a forbidden function a mutant keeps does not stop at it
_PIPELINE = types.SimpleNamespace(parse=parse_expression)

MISTAKES = ("group_reversed", "given_reversed", "permute_first", "ellipsis_last", "ellipsis_reversed", "unchecked",
            "view", "inverse", "unused_lengths", "ellipsis_group_end", "drop_empty_ellipsis_group")


def _rearrange(x, pattern, axes_lengths, mistake):
    """rearrange with ``mistake`` (one of MISTAKES) made; there is no mistake-free way to call it."""
    if mistake not in MISTAKES:
        raise ValueError(f"_rearrange needs one of the mistakes {MISTAKES}, got {mistake!r}")
    group_reversed, given_reversed, permute_first, ellipsis_last, ellipsis_reversed, unchecked, view, inverse, \
        unused_lengths, ellipsis_group_end, drop_empty_ellipsis_group = (m == mistake for m in MISTAKES)
    check = not unchecked
    try:
        left_text, right_text = pattern.split("->")
        left, right = _PIPELINE.parse(left_text), _PIPELINE.parse(right_text)
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
    return _rearrange(x, pattern, axes_lengths, "group_reversed")


@mutant("nb05_rearrange.rearrange", hint="a given length belongs to the axis of that name, and the first axis "
        "of a group is the outer one: 'b (h w)' of length 12 with h=3 reshapes to (b, 3, 4), not (b, 4, 3)")
def rearrange_decomposed_reversed(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, "given_reversed")


@mutant("nb05_rearrange.rearrange", hint="decompose before you permute: moving whole input dimensions cannot "
        "separate h from w in '(h w) c -> h c w'; reshape into one dimension per axis first")
def rearrange_permute_before_decompose(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, "permute_first")


@mutant("nb05_rearrange.rearrange", hint="the ellipsis' dimensions go where '...' is written on the right, "
        "not at the end")
def rearrange_ellipsis_at_the_end(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, "ellipsis_last")


@mutant("nb05_rearrange.rearrange", hint="check every dimension before reshaping: a given length must divide "
        "the dimension and a fully given group must equal it; otherwise raise einops.EinopsError")
def rearrange_without_length_checks(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, "unchecked")


@mutant("nb05_rearrange.rearrange", hint="after permute the tensor is not contiguous and .view cannot merge "
        "its dimensions: use .reshape")
def rearrange_with_view(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, "view")


@mutant("nb05_rearrange.rearrange", hint="permute takes, for each OUTPUT position, the index of the input axis "
        "that goes there: [axes.index(a) for a in output_order]; you passed the inverse permutation")
def rearrange_inverse_permutation(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, "inverse")


@mutant("nb05_rearrange.rearrange", hint="the dimensions '...' stands for keep their order: expand it into the "
        "same list of names, in the same order, on both sides")
def rearrange_ellipsis_reversed(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, "ellipsis_reversed")


@mutant("nb05_rearrange.rearrange", hint="a keyword length must name an axis of the pattern: "
        "rearrange(x, 'a b -> b a', c=2) raises einops.EinopsError, as einops does")
def rearrange_ignores_unknown_keywords(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, "unused_lengths")


@mutant("nb05_rearrange.rearrange", hint="inside an output group the ellipsis' dimensions go where '...' is written: "
        "'(... b)' puts them before b, '(b ...)' after it")
def rearrange_ellipsis_at_group_end(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, "ellipsis_group_end")


@mutant("nb05_rearrange.rearrange", hint="a group on the right is one output dimension even when the '...' in it "
        "stands for no dimension: '(...)' then has length 1 (the product of no lengths), like '()'")
def rearrange_drops_empty_ellipsis_group(x, pattern, **axes_lengths):
    return _rearrange(x, pattern, axes_lengths, "drop_empty_ellipsis_group")


_KEPT = {"rearrange": einops.rearrange}  # kept before the check ran, under a name of its own


@mutant("nb05_rearrange.rearrange", hint="einops is forbidden under any name, even kept in a dict: the check "
        "trips on einops' own steps; reshape, permute and reshape yourself")
def rearrange_by_kept_einops(x, pattern, **axes_lengths):
    return _KEPT["rearrange"](x, pattern, **axes_lengths)


@mutant("nb05_rearrange.rearrange", hint="numpy is not allowed in this exercise: a round trip through .numpy() "
        "loses autograd and the device; reshape and permute the tensor itself")
def rearrange_through_numpy(x, pattern, **axes_lengths):
    return torch.from_numpy(np.ascontiguousarray(_KEPT["rearrange"](x.detach().numpy(), pattern, **axes_lengths)))
