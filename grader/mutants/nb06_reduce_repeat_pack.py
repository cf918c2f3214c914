"""Known-wrong answers to notebook 06's exercises (reduce, repeat, make_head), each with its hint.

They are written as a learner of the notebook would write them: with ``rearrange`` and the two
pattern helpers the notebook gives (copied here), plus one mistake each.
"""
import re

import einops.layers.torch as layers
import numpy as np
import torch

from tensorcraft import stages
from tensorcraft.einops import EinopsError, rearrange

from . import mutant, one_mistake

REDUCE = "nb06_reduce_repeat_pack.reduce"
REPEAT = "nb06_reduce_repeat_pack.repeat"
MAKE_HEAD = "nb06_reduce_repeat_pack.make_head"


def _axis_names(side):
    return [word for word in side.replace("(", " ").replace(")", " ").split() if word.isidentifier()]


def _name_the_numbers(side):
    lengths = {}

    def name(match):
        if match.group() == "1":
            return "1"
        lengths[f"number{len(lengths)}"] = int(match.group())
        return f"number{len(lengths) - 1}"

    return re.sub(r"\b\d+\b", name, side), lengths


REDUCERS = {"sum": torch.Tensor.sum, "mean": torch.Tensor.mean, "max": torch.Tensor.amax,
            "min": torch.Tensor.amin, "prod": torch.Tensor.prod}


@one_mistake
def _reduce(x, pattern, reduction, axes_lengths, *, reducer=None, right_side=None, left_side=None):
    """The notebook's rule with one piece swappable per mutant (it runs only with a mistake: one_mistake)."""
    left, right = pattern.split("->")
    left = left_side(left) if left_side else left
    right = right_side(right) if right_side else right
    left, numbers = _name_the_numbers(left)
    reduced = [name for name in _axis_names(left) if name not in _axis_names(right)]
    if "..." in left and "..." not in right:
        reduced.append("...")
    if not reduced:
        return rearrange(x, f"{left} -> {right}", **axes_lengths, **numbers)
    y = rearrange(x, f"{left} -> {right} ({' '.join(reduced)})", **axes_lengths, **numbers)
    return (reducer or REDUCERS[reduction])(y, -1)


@mutant(REDUCE, hint="you summed where the pattern asks for a mean: 'mean' divides the sum by the number of "
        "values reduced (the source material's x.sum(-1).sum(-1) makes this mistake)")
def reduce_sums_for_mean(x, pattern, reduction, **axes_lengths):
    return _reduce(x, pattern, "sum" if reduction == "mean" else reduction, axes_lengths)


@mutant(REDUCE, hint="a 1 (or ()) on the right keeps an axis of length 1 in the result: "
        "'b c h w -> b c 1 1' has shape (b, c, 1, 1), not (b, c); keep the 1s in the pattern you rearrange to")
def reduce_drops_unit_axes(x, pattern, reduction, **axes_lengths):
    return _reduce(x, pattern, reduction, axes_lengths,
                   right_side=lambda right: re.sub(r"\(\s*\)|\b1\b", " ", right))


@mutant(REDUCE, hint="x.sum(-1).sum(-1) is what the source material calls this reduce; it is wrong twice: "
        "'mean' divides by h * w, and '-> b c 1 1' keeps the two axes with length 1")
def reduce_like_the_source_material(x, pattern, reduction, **axes_lengths):
    return _reduce(x, pattern, "sum" if reduction == "mean" else reduction, axes_lengths,
                   right_side=lambda right: re.sub(r"\(\s*\)|\b1\b", " ", right))


@mutant(REDUCE, hint="inside a group the first axis varies slowest: (h 2) means rows 2i and 2i+1 form one "
        "window (neighbours); you read it as (2 h), which pairs row i with row i + h")
def reduce_reads_groups_backwards(x, pattern, reduction, **axes_lengths):
    def reverse_groups(left):
        return re.sub(r"\(([^()]*)\)", lambda m: "(" + " ".join(reversed(m.group(1).split())) + ")", left)
    return _reduce(x, pattern, reduction, axes_lengths, left_side=reverse_groups)


@mutant(REDUCE, hint="you reduced the wrong axis: you grouped the reduced axes at the front but reduced the last "
        "axis (dim=-1), which is an axis the result keeps; the group you reduce must be the one you reduce over")
def reduce_wrong_axis(x, pattern, reduction, **axes_lengths):
    left, right = pattern.split("->")
    left, numbers = _name_the_numbers(left)
    reduced = [name for name in _axis_names(left) if name not in _axis_names(right)]
    if "..." in left and "..." not in right:
        reduced.append("...")
    if not reduced:
        return rearrange(x, f"{left} -> {right}", **axes_lengths, **numbers)
    y = rearrange(x, f"{left} -> ({' '.join(reduced)}) {right}", **axes_lengths, **numbers)
    return REDUCERS[reduction](y, -1)


@mutant(REDUCE, hint="einops refuses a mean of integers (so does torch's mean) and so must you: "
        "converting to float first returns a float where einops raises an error")
def reduce_integer_mean_as_float(x, pattern, reduction, **axes_lengths):
    if reduction == "mean" and not x.is_floating_point():
        x = x.float()
    return _reduce(x, pattern, reduction, axes_lengths)


@mutant(REDUCE, hint="x.max(dim) and x.min(dim) return a pair (values, indices); use x.amax(dim) / x.amin(dim), "
        "or take .values")
def reduce_max_returns_a_pair(x, pattern, reduction, **axes_lengths):
    pair = {"max": lambda y, dim: y.max(dim), "min": lambda y, dim: y.min(dim)}
    return _reduce(x, pattern, reduction, axes_lengths, reducer=pair.get(reduction))


# ---------------------------------------------------------------- repeat


@one_mistake
def _repeat(x, pattern, axes_lengths, *, right_side=None, cast=False):
    left, right = pattern.split("->")
    right = right_side(right, _axis_names(left)) if right_side else right
    right, numbers = _name_the_numbers(right)
    lengths = {**axes_lengths, **numbers}
    on_left = _axis_names(left)
    new = [name for name in _axis_names(right) if name not in on_left]
    if any(name not in lengths for name in new):
        raise EinopsError(f"repeat {pattern!r}: a new axis needs a length")
    flat = " ".join(word for word in left.replace("(", " ").replace(")", " ").split() if word != "1")
    y = rearrange(x, f"{left} -> {flat}", **{name: lengths[name] for name in on_left if name in lengths})
    shape = (*y.shape, *[lengths[name] for name in new])
    if cast:
        y = y.reshape(*y.shape, *[1] * len(new)) * torch.ones(shape)
    else:
        y = y.reshape(*y.shape, *[1] * len(new)).expand(*shape)
    return rearrange(y, f"{flat} {' '.join(new)} -> {right}", **{name: lengths[name] for name in new})


def _new_axes_to(where):
    """Rewrite every group on the right with its new axes first ('tile') or last ('in place')."""
    def rewrite(right, on_left):
        def group(match):
            words = match.group(1).split()
            new = [w for w in words if w not in on_left]
            old = [w for w in words if w in on_left]
            return "(" + " ".join(new + old if where == "first" else old + new) + ")"
        return re.sub(r"\(([^()]*)\)", group, right)
    return rewrite


@mutant(REPEAT, hint="you tiled where the pattern repeats in place: in (h 2) the new axis comes last and varies "
        "fastest, so each row appears twice in a row (upsampling); (2 h) would tile the whole image")
def repeat_tiles_instead_of_in_place(x, pattern, **axes_lengths):
    return _repeat(x, pattern, axes_lengths, right_side=_new_axes_to("first"))


@mutant(REPEAT, hint="you repeated in place where the pattern tiles: in (2 h) the new axis comes first and varies "
        "slowest, so the whole image appears twice, one copy after the other; (h 2) would repeat each row")
def repeat_in_place_instead_of_tiling(x, pattern, **axes_lengths):
    return _repeat(x, pattern, axes_lengths, right_side=_new_axes_to("last"))


@mutant(REPEAT, hint="a new axis goes exactly where the right side writes it (alone or inside a group), "
        "not at the end of the result")
def repeat_new_axes_at_the_end(x, pattern, **axes_lengths):
    def move(right, on_left):
        words = right.replace("(", " ( ").replace(")", " ) ").split()
        new = [w for w in words if w not in on_left and w not in "()" and w != "1" and w != "..."]
        kept = " ".join(w for w in words if w not in new).replace("( )", "()")
        return f"{kept} {' '.join(new)}"
    return _repeat(x, pattern, axes_lengths, right_side=move)


@mutant(REPEAT, hint="multiplying by torch.ones(...) broadcasts, but it also changes the dtype (int64 becomes "
        "float32): repeat keeps the input's dtype; use .expand(...) on an axis of length 1")
def repeat_by_multiplying_with_ones(x, pattern, **axes_lengths):
    return _repeat(x, pattern, axes_lengths, cast=True)


# ---------------------------------------------------------------- make_head


@one_mistake
def _head(channels, hidden, classes, *, pool="b c (h 2) (w 2) -> b c h w", pool_reduction="max",
          global_reduction="mean", relu=True):
    return torch.nn.Sequential(
        layers.Reduce(pool, pool_reduction),
        torch.nn.Conv2d(channels, hidden, kernel_size=1),
        *([torch.nn.ReLU()] if relu else []),
        layers.Reduce("b c h w -> b c", global_reduction),
        torch.nn.Linear(hidden, classes),
    )


@mutant(MAKE_HEAD, hint="the 2 x 2 pooling takes the max of each window ('max'), not its mean")
def head_mean_pooling(channels, hidden, classes):
    return _head(channels, hidden, classes, pool_reduction="mean")


@mutant(MAKE_HEAD, hint="(2 h) pairs row i with row i + h/2, far apart; a 2 x 2 window of neighbours is (h 2) (w 2)")
def head_pools_far_apart_pixels(channels, hidden, classes):
    return _head(channels, hidden, classes, pool="b c (2 h) (2 w) -> b c h w")


@mutant(MAKE_HEAD, hint="global average pooling is a mean over h and w ('mean'), not a sum")
def head_global_sum(channels, hidden, classes):
    return _head(channels, hidden, classes, global_reduction="sum")


@mutant(MAKE_HEAD, hint="global average pooling is a mean over h and w, not a max")
def head_global_max(channels, hidden, classes):
    return _head(channels, hidden, classes, global_reduction="max")


@mutant(MAKE_HEAD, hint="the 1 x 1 convolution is followed by a ReLU; without it the head is linear")
def head_without_relu(channels, hidden, classes):
    return _head(channels, hidden, classes, relu=False)


class _GlobalMean(torch.nn.Module):
    def forward(self, x):
        return x.mean(dim=(2, 3))


@mutant(MAKE_HEAD, hint="write the global mean as a Reduce layer, Reduce('b c h w -> b c', 'mean'), as the "
        "exercise asks; a module of your own that calls x.mean is not one")
def head_global_mean_by_hand(channels, hidden, classes):
    head = _head(channels, hidden, classes)
    head[3] = _GlobalMean()
    return head


@mutant(REDUCE, hint="numpy is not allowed in this exercise: reduce the last axis of the tensor itself "
        "(.sum(dim=-1), .amax(dim=-1)...), not a .numpy() copy")
def reduce_through_numpy(x, pattern, reduction, **axes_lengths):
    numpy_reducer = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}[reduction]
    return _reduce(x, pattern, reduction, axes_lengths,
                   reducer=lambda y, dim: torch.from_numpy(np.asarray(numpy_reducer(y.numpy(), axis=dim))))


@mutant(REPEAT, hint="numpy is not allowed in this exercise: the expanded tensor is the answer as it is, "
        "no copy through .numpy() is needed")
def repeat_through_numpy(x, pattern, **axes_lengths):
    return torch.from_numpy(np.ascontiguousarray(_repeat(x, pattern, axes_lengths).numpy()))


class _AtenMaxPool(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.max_pool2d(x, [2, 2])


@mutant(MAKE_HEAD, hint="torch.ops.aten.max_pool2d is torch's pooling under another name, and the check watches "
        "the operation: pool with Reduce('b c (h 2) (w 2) -> b c h w', 'max')")
def head_pools_with_aten(channels, hidden, classes):
    head = _head(channels, hidden, classes, pool="b c h w -> b c h w")
    return torch.nn.Sequential(_AtenMaxPool(), *head)


@mutant(REPEAT, hint="tensorcraft's own repeat is forbidden under any name, even reached through the registry of "
        "stages: build the result with rearrange and expand yourself")
def repeat_from_the_stage_registry(x, pattern, **axes_lengths):
    return stages._LIBRARY["repeat"](x, pattern, **axes_lengths)
