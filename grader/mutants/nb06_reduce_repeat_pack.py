"""Known-wrong answers to notebook 06's exercises (reduce, repeat, make_head), each with its hint.

No mutant holds a right answer. A reduce or repeat mutant is a patch of the library's own stage
(``grader.mutants.patched``): most misread the pattern (the patch rewrites it before the library
runs), the rest change the reduction or the result; a make_head mutant is a patch of the checks'
reference architecture (``reference_head``, out of reach of a learner's answer while the check runs).
``reduce_wrong_axis`` and the forbidden routes are small standalone wrong answers, written as a
learner of the notebook would write them, with the two pattern helpers the notebook gives (copied here).
"""
import re

import torch

from tensorcraft import stages
from tensorcraft.einops import rearrange
from tensorcraft.einops.ops import reduce, repeat

from ..checks.nb06_reduce_repeat_pack import reference_head
from . import mutant, patched

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

# ---------------------------------------------------------------- reduce: patches of the library's stage

REDUCE_CALL = "return transform(tensor, pattern, reduction, axes_lengths)"
SPLIT = "import re\n    left, right = pattern.split('->')\n    "
UNITS_DROPPED = "pattern = left + '->' + re.sub(r'\\(\\s*\\)|\\b1\\b', ' ', right)\n    "
AS_SUM = "return transform(tensor, pattern, 'sum' if reduction == 'mean' else reduction, axes_lengths)"

patched(REDUCE, "reduce_sums_for_mean", reduce, (REDUCE_CALL, AS_SUM),
        hint="you summed where the pattern asks for a mean: 'mean' divides the sum by the number of "
        "values reduced (the source material's x.sum(-1).sum(-1) makes this mistake)")

patched(REDUCE, "reduce_drops_unit_axes", reduce, (REDUCE_CALL, SPLIT + UNITS_DROPPED + REDUCE_CALL),
        hint="a 1 (or ()) on the right keeps an axis of length 1 in the result: "
        "'b c h w -> b c 1 1' has shape (b, c, 1, 1), not (b, c); keep the 1s in the pattern you rearrange to")

patched(REDUCE, "reduce_like_the_source_material", reduce, (REDUCE_CALL, SPLIT + UNITS_DROPPED + AS_SUM),
        hint="x.sum(-1).sum(-1) is what the source material calls this reduce; it is wrong twice: "
        "'mean' divides by h * w, and '-> b c 1 1' keeps the two axes with length 1")

patched(REDUCE, "reduce_reads_groups_backwards", reduce,
        (REDUCE_CALL, SPLIT + "left = re.sub(r'\\(([^()]*)\\)', lambda m: '(' + ' '.join(reversed(m.group(1).split())) "
                              "+ ')', left)\n    pattern = left + '->' + right\n    " + REDUCE_CALL),
        hint="inside a group the first axis varies slowest: (h 2) means rows 2i and 2i+1 form one "
        "window (neighbours); you read it as (2 h), which pairs row i with row i + h")


@mutant(REDUCE, hint="you reduced the wrong axis: you grouped the reduced axes at the front but reduced the last "
        "axis (dim=-1), which is an axis the result keeps; the group you reduce must be the one you reduce over")
def reduce_wrong_axis(x, pattern, reduction, **axes_lengths):
    left, right = pattern.split("->")
    left, numbers = _name_the_numbers(left)
    reduced = [name for name in _axis_names(left) if name not in _axis_names(right)]
    if "..." in left and "..." not in right:
        reduced.append("...")
    y = rearrange(x, f"{left} -> ({' '.join(reduced)}) {right}", **axes_lengths, **numbers)
    return REDUCERS[reduction](y, -1)


patched(REDUCE, "reduce_integer_mean_as_float", reduce,
        (REDUCE_CALL, "if reduction == 'mean' and not tensor.is_floating_point():\n        tensor = tensor.float()\n"
                      "    " + REDUCE_CALL),
        hint="einops refuses a mean of integers (so does torch's mean) and so must you: "
        "converting to float first returns a float where einops raises an error")

# x.max(-1) over the reduced axes flattened into one, last (in the order the pattern writes them): its pair
patched(REDUCE, "reduce_max_returns_a_pair", reduce,
        (REDUCE_CALL, "import torch\n    if reduction in ('max', 'min'):\n"
                      "        def pair(x, axes):\n"
                      "            x = x.movedim(axes, tuple(range(x.ndim - len(axes), x.ndim))).flatten(x.ndim - len(axes))\n"
                      "            return getattr(x, reduction)(-1)\n"
                      "        values, indices = (transform(tensor, pattern, lambda x, axes: pair(x, axes)[k], axes_lengths)\n"
                      "                           for k in (0, 1))\n"
                      "        return getattr(torch.return_types, reduction)((values, indices))\n    " + REDUCE_CALL),
        hint="x.max(dim) and x.min(dim) return a pair (values, indices); use x.amax(dim) / x.amin(dim), "
        "or take .values")


# ---------------------------------------------------------------- repeat: patches of the library's stage

REPEAT_CALL = 'return transform(tensor, pattern, "repeat", axes_lengths)'


def _new_axes_to(where):
    """The edit that rewrites every group on the right with its new axes first ('tile') or last ('in place')."""
    first, second = ("new", "old") if where == "first" else ("old", "new")
    return (REPEAT_CALL, SPLIT + "on_left = left.replace('(', ' ').replace(')', ' ').split()\n"
            "    def group(m):\n        words = m.group(1).split()\n"
            "        new, old = [w for w in words if w not in on_left], [w for w in words if w in on_left]\n"
            f"        return '(' + ' '.join({first} + {second}) + ')'\n"
            "    pattern = left + '->' + re.sub(r'\\(([^()]*)\\)', group, right)\n    " + REPEAT_CALL)


patched(REPEAT, "repeat_tiles_instead_of_in_place", repeat, _new_axes_to("first"),
        hint="you tiled where the pattern repeats in place: in (h 2) the new axis comes last and varies "
        "fastest, so each row appears twice in a row (upsampling); (2 h) would tile the whole image")

patched(REPEAT, "repeat_in_place_instead_of_tiling", repeat, _new_axes_to("last"),
        hint="you repeated in place where the pattern tiles: in (2 h) the new axis comes first and varies "
        "slowest, so the whole image appears twice, one copy after the other; (h 2) would repeat each row")

patched(REPEAT, "repeat_new_axes_at_the_end", repeat,
        (REPEAT_CALL, SPLIT + "on_left = left.replace('(', ' ').replace(')', ' ').split()\n"
                      "    words = right.replace('(', ' ( ').replace(')', ' ) ').split()\n"
                      "    new = [w for w in words if w not in on_left and w not in '()' and w not in ('1', '...')]\n"
                      "    kept = ' '.join(w for w in words if w not in new).replace('( )', '()')\n"
                      "    pattern = left + '->' + kept + ' ' + ' '.join(new)\n    " + REPEAT_CALL),
        hint="a new axis goes exactly where the right side writes it (alone or inside a group), "
        "not at the end of the result")

patched(REPEAT, "repeat_by_multiplying_with_ones", repeat,
        (REPEAT_CALL, "import torch\n    tensor = " + REPEAT_CALL.removeprefix("return ") + "\n"
                      "    return tensor * torch.ones(tensor.shape)"),
        hint="multiplying by torch.ones(...) broadcasts, but it also changes the dtype (int64 becomes "
        "float32): repeat keeps the input's dtype; use .expand(...) on an axis of length 1")


# ---------------------------------------------------------------- make_head: patches of the reference architecture

POOL = '"b c (h 2) (w 2) -> b c h w"'
GLOBAL_MEAN = 'einops_layers.Reduce("b c h w -> b c", "mean")'

patched(MAKE_HEAD, "head_mean_pooling", reference_head, (POOL + ', "max"', POOL + ', "mean"'),
        hint="the 2 x 2 pooling takes the max of each window ('max'), not its mean")

patched(MAKE_HEAD, "head_pools_far_apart_pixels", reference_head, (POOL, '"b c (2 h) (2 w) -> b c h w"'),
        hint="(2 h) pairs row i with row i + h/2, far apart; a 2 x 2 window of neighbours is (h 2) (w 2)")

patched(MAKE_HEAD, "head_global_sum", reference_head, (GLOBAL_MEAN, GLOBAL_MEAN.replace("mean", "sum")),
        hint="global average pooling is a mean over h and w ('mean'), not a sum")

patched(MAKE_HEAD, "head_global_max", reference_head, (GLOBAL_MEAN, GLOBAL_MEAN.replace("mean", "max")),
        hint="global average pooling is a mean over h and w, not a max")

patched(MAKE_HEAD, "head_without_relu", reference_head, ("torch.nn.ReLU(),", ""),
        hint="the 1 x 1 convolution is followed by a ReLU; without it the head is linear")

patched(MAKE_HEAD, "head_global_mean_by_hand", reference_head,
        (GLOBAL_MEAN, 'type("GlobalMean", (torch.nn.Module,), {"forward": lambda self, x: x.mean(dim=(2, 3))})()'),
        hint="write the global mean as a Reduce layer, Reduce('b c h w -> b c', 'mean'), as the "
        "exercise asks; a module of your own that calls x.mean is not one")


# ---------------------------------------------------------------- forbidden routes


patched(REDUCE, "reduce_through_numpy", reduce,
        (REDUCE_CALL, "import numpy as np\n    import torch\n"
                      "    return transform(tensor, pattern, lambda x, axes: torch.from_numpy(np.asarray(\n"
                      "        getattr(np, reduction)(x.numpy(), axis=axes))), axes_lengths)"),
        hint="numpy is not allowed in this exercise: reduce the last axis of the tensor itself "
        "(.sum(dim=-1), .amax(dim=-1)...), not a .numpy() copy")

patched(REPEAT, "repeat_through_numpy", repeat,
        (REPEAT_CALL, "import numpy as np\n    import torch\n    tensor = " + REPEAT_CALL.removeprefix("return ") + "\n"
                      "    return torch.from_numpy(np.ascontiguousarray(tensor.numpy()))"),
        hint="numpy is not allowed in this exercise: the expanded tensor is the answer as it is, "
        "no copy through .numpy() is needed")

patched(MAKE_HEAD, "head_pools_with_aten", reference_head,
        ("einops_layers.Reduce(" + POOL + ', "max")',
         'type("AtenMaxPool", (torch.nn.Module,), {"forward": lambda self, x: torch.ops.aten.max_pool2d(x, [2, 2])})(),\n'
         '        einops_layers.Reduce("b c h w -> b c h w", "max")'),
        hint="torch.ops.aten.max_pool2d is torch's pooling under another name, and the check watches "
        "the operation: pool with Reduce('b c (h 2) (w 2) -> b c h w', 'max')")


@mutant(REPEAT, hint="tensorcraft's own repeat is forbidden under any name, even reached through the registry of "
        "stages: build the result with rearrange and expand yourself")
def repeat_from_the_stage_registry(x, pattern, **axes_lengths):
    return stages._LIBRARY["repeat"](x, pattern, **axes_lengths)
