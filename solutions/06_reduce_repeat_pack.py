# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 · einops: reduce, repeat, pack and the layers
#
# **You will learn to**
# - read `reduce` patterns: every axis that is on the left and not on the right is reduced, and a
#   `1` on the right keeps an axis of length 1;
# - write pooling as a reduce over decomposed axes, and upsampling and tiling as a `repeat`, and
#   tell `(h 2)` from `(2 h)`;
# - pack tensors of different ranks into one and cut them apart again;
# - build a model from `Rearrange` and `Reduce` layers, and use einsum with named axes.
#
# **Time:** about 50 minutes. **Builds on:** notebook 05 (`rearrange`), and 01–04 (einsum).
#
# In the three exercises you write `reduce`, `repeat` and a small model head. Your `reduce` is then
# run by the library itself: the check builds tensorcraft's `Reduce` layer and swaps your function
# in, so passing means that the layer works with your piece in it.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import re

import einops
import matplotlib.pyplot as plt
import numpy as np
import torch

import tensorcraft as tc
from grader.checks.nb06_reduce_repeat_pack import check_make_head, check_reduce, check_repeat
from tensorcraft.einops import EinopsError, rearrange
from tensorcraft.einops.layers import Rearrange, Reduce
from tensorcraft.einops.recipe import plan_for


def same(name, ours, direct):
    """Print whether two tensors have the same shape and values (up to rounding)."""
    equal = ours.shape == direct.shape and torch.allclose(ours.double(), direct.double())
    print(f"{name:48} {str(tuple(ours.shape)):16} same as the direct version: {equal}")


def show(images, titles):
    """Draw pictures side by side; each is (h, w, c) or (h, w) with values in [0, 1]."""
    fig, axes = plt.subplots(1, len(images), figsize=(2.2 * len(images), 2.4))
    for ax, image, title in zip(np.atleast_1d(axes), images, titles):
        ax.imshow(image.clamp(0, 1).numpy(), cmap="gray", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(title, fontsize=8)
        ax.axis("off")
    plt.tight_layout()
    plt.show()


# %% [markdown]
# ## A batch of small pictures
#
# The examples use four 16 × 16 colour pictures drawn with numpy: a disc, a square, stripes and a
# colour gradient. The batch has shape `(b, h, w, c)` = `(4, 16, 16, 3)`, values in [0, 1].

# %%
def make_images(size=16):
    y, x = np.mgrid[0:size, 0:size] / (size - 1)
    disc = ((x - 0.5) ** 2 + (y - 0.5) ** 2 < 0.12).astype(float)
    square = ((abs(x - 0.45) < 0.25) & (abs(y - 0.55) < 0.25)).astype(float)
    stripes = ((np.floor((x + y) * 4) % 2) == 0).astype(float)
    pictures = [
        np.stack([disc, 0.3 * disc, 1 - disc], axis=-1),
        np.stack([square, square, 0.2 + 0 * x], axis=-1),
        np.stack([stripes, 0.5 * stripes, 0.5 + 0 * x], axis=-1),
        np.stack([x, y, 1 - x * y], axis=-1),
    ]
    return torch.tensor(np.stack(pictures), dtype=torch.float32)


images = make_images()
print(images.shape)
show(list(images), ["disc", "square", "stripes", "gradient"])

# %% [markdown]
# ## `reduce`: the axes that leave are reduced
#
# `reduce(x, pattern, reduction)` reads a pattern as `rearrange` does, with one difference: an
# axis may appear on the left and not on the right. Such an axis is **reduced**: combined into one
# value by the reduction — `"sum"`, `"mean"`, `"max"`, `"min"` or `"prod"`. The axes that remain
# are arranged as the right side says. Each line below prints the result's shape and whether it
# equals the plain torch call beside it.

# %%
x = torch.arange(24.0).reshape(2, 3, 4)   # axes a, b, c

same('reduce(x, "a b c -> a c", "sum")', tc.reduce(x, "a b c -> a c", "sum"), x.sum(dim=1))
same('reduce(x, "a b c -> a", "mean")', tc.reduce(x, "a b c -> a", "mean"), x.mean(dim=(1, 2)))
same('reduce(x, "a b c -> c a", "max")', tc.reduce(x, "a b c -> c a", "max"), x.amax(dim=1).T)
same('reduce(x, "a b c -> b", "min")', tc.reduce(x, "a b c -> b", "min"), x.amin(dim=(0, 2)))
same('reduce(x + 1, "a b c -> a b", "prod")', tc.reduce(x + 1, "a b c -> a b", "prod"), (x + 1).prod(dim=2))

# %% [markdown]
# The third line shows that a reduce also moves the axes that stay: `-> c a` returns `c` first.
# An integer tensor cannot be averaged: einops refuses a mean of integers (so does `torch.mean`),
# with an error instead of a silent conversion:

# %%
try:
    tc.reduce(torch.arange(6).reshape(2, 3), "a b -> a", "mean")
except EinopsError as error:
    print("EinopsError:", error)

# %% [markdown]
# ## Keeping an axis: `1` on the right
#
# A `1` (or `()`) on the right side stands for an axis of length 1 in the result. So
# `"b c h w -> b c 1 1"` with `"mean"` averages over `h` and `w` **and keeps them** as axes of
# length 1: it is `x.mean(dim=(2, 3), keepdim=True)`. Here is a random batch of 2 images with 3
# channels, in the `b c h w` layout that convolutions use:

# %%
feature_maps = torch.randn(2, 3, 4, 4)
pooled = tc.reduce(feature_maps, "b c h w -> b c 1 1", "mean")
same('reduce(x, "b c h w -> b c 1 1", "mean")', pooled, feature_maps.mean(dim=(2, 3), keepdim=True))

# %% [markdown]
# The kept axes are useful because they broadcast: subtracting each channel's mean from every
# pixel of that channel needs the means in shape `(b, c, 1, 1)`. Afterwards every channel of every
# image has mean 0:

# %%
centred = feature_maps - tc.reduce(feature_maps, "b c h w -> b c 1 1", "mean")
print(centred.mean(dim=(2, 3)).abs().max())

# %% [markdown]
# ### Common mistake: "this is `x.sum(-1).sum(-1)`"
#
# The blog post this course grew from (the course home says what it is) says that
# `reduce(x, 'b c h w -> b c 1 1', 'mean')` equals
# `x.sum(-1).sum(-1)`. That is wrong twice. A **sum** is not a mean: the mean divides the sum by
# the number of values, here `h * w = 16`. And `sum(-1)` **drops** the axis it sums over, so the
# result has shape `(b, c)`, not `(b, c, 1, 1)`:

# %%
claimed = feature_maps.sum(-1).sum(-1)
print("shapes:", tuple(pooled.shape), "against", tuple(claimed.shape))
print("values:", torch.allclose(pooled.flatten(), claimed.flatten()))
print("the claim divided by h * w:", torch.allclose(pooled.flatten(), claimed.flatten() / 16))

# %% [markdown]
# ## Pooling is a reduce over decomposed axes
#
# Decompose `h` into `(h 2)`: each pair of neighbouring rows becomes one row index `h` and a
# within-pair index of length 2. Reduce the 2s of both `h` and `w`, and each non-overlapping 2 × 2
# window becomes one value. With `"max"` this is 2 × 2 max pooling, exactly what
# `torch.nn.functional.max_pool2d(x, 2)` computes (which wants `b c h w`):

# %%
pooled_max = tc.reduce(images, "b (h 2) (w 2) c -> b h w c", "max")
direct = torch.nn.functional.max_pool2d(images.permute(0, 3, 1, 2), 2).permute(0, 2, 3, 1)
same('reduce(images, "b (h 2) (w 2) c -> b h w c", "max")', pooled_max, direct)

pooled_mean = tc.reduce(images, "b (h 4) (w 4) c -> b h w c", "mean")
show([images[0], pooled_max[0], pooled_mean[0], images[2], pooled_max[2], pooled_mean[2]],
     ["disc 16x16", "max pool 2x2", "mean pool 4x4", "stripes", "max pool 2x2", "mean pool 4x4"])

# %% [markdown]
# Inside a group, the **first axis varies slowest**, as in a number's digits: in `(h 2)`, rows
# `2i` and `2i + 1` share the index `i`, so each window holds neighbours. Written `(2 h)`, the
# pair is row `i` and row `i + 8`: the "windows" join pixels half an image apart, which is no
# pooling at all:

# %%
far_apart = tc.reduce(images, "b (2 h) (2 w) c -> b h w c", "max")
print("(2 h) equals max pooling:", torch.equal(far_apart, direct))
show([pooled_max[0], far_apart[0]], ["(h 2) (w 2): max pool", "(2 h) (2 w): not pooling"])

# %% [markdown]
# Global average pooling, the last step of most image classifiers, is the reduce you met above:
# `"b c h w -> b c"` with `"mean"` (or `-> b c 1 1` to keep the axes).
#
# ## How tensorcraft runs a reduce
#
# As in notebook 05, a call becomes a plan: a reshape that splits the composed axes, a permute that
# puts the kept axes first in the output's order and the reduced axes last, then one reduction over
# those last axes, and a final reshape that composes (or adds the `1`s of) the output:

# %%
print(plan_for("b (h 2) (w 2) c -> b h w c", tuple(images.shape), "max"))
print(plan_for("b c h w -> b c 1 1", (2, 3, 4, 4), "mean"))

# %% [markdown]
# ## Two helpers for reading patterns
#
# In the exercises you may read patterns with these two helpers (run the cell; you do not need to
# change them). `axis_names` lists the axis names of one side, in order; numbers, `1`, `()`,
# `...` and the parentheses are left out. `name_the_numbers` gives each number other than 1 a
# name of its own and returns its length, because `rearrange` accepts no number other than 1:
# after it, `(h 2)` can be moved around by name.

# %%
def axis_names(side):
    """The axis names written on one side of a pattern, in order: 'b (h w) 1 ...' -> ['b', 'h', 'w']."""
    return [word for word in side.replace("(", " ").replace(")", " ").split() if word.isidentifier()]


def name_the_numbers(side):
    """'(h 2) (w 3)' -> ('(h number0) (w number1)', {'number0': 2, 'number1': 3}); a 1 stays 1."""
    lengths = {}

    def name(match):
        if match.group() == "1":
            return "1"
        lengths[f"number{len(lengths)}"] = int(match.group())
        return f"number{len(lengths) - 1}"

    return re.sub(r"\b\d+\b", name, side), lengths


print(axis_names("b (h w) 1 ... c"))
print(name_the_numbers("b c (h 2) (w 3) 1"))

# %% [markdown]
# ## Exercise 1 — `reduce` (3 points)
#
# Write `reduce(x, pattern, reduction, **axes_lengths)` for a torch tensor `x`, a pattern
# `"left -> right"`, and `reduction` one of `"sum"`, `"mean"`, `"max"`, `"min"`, `"prod"`. It must
# return exactly what `einops.reduce(x, pattern, reduction, **axes_lengths)` returns: same shape,
# dtype and values.
#
# One way, in three steps:
# 1. Split the pattern at `->`. Name the numbers of the left side (`name_the_numbers`); their
#    lengths become keyword lengths, next to `axes_lengths`.
# 2. The reduced axes are the names on the left that are not on the right; if the left has `...`
#    and the right has not, the `...` is reduced too. Rearrange `x` to
#    `"<left> -> <right> (<reduced axes>)"`: every axis of the result, its `1`s included, in place,
#    and all the reduced axes composed into one last axis. (When nothing is reduced, a plain
#    rearrange to the right side is the answer.)
# 3. Reduce that last axis: `.sum(dim=-1)`, `.mean(dim=-1)`, `.amax(dim=-1)`, `.amin(dim=-1)` or
#    `.prod(dim=-1)`. (`x.max(dim)` returns a pair of values and indices; `amax` returns the values.)
#
# A mean of integers must raise an error, as einops does; `torch.mean` already raises one.
#
# **Allowed:** `rearrange` — tensorcraft's (imported above) or `einops.rearrange`, which you built in
# notebook 05 — the helpers above, and torch's tensor methods. **Forbidden** (tripwires):
# `einops.reduce`, `einops.repeat`, tensorcraft's `reduce` and `repeat` (under any name), and the
# `Reduce` layers. numpy is not allowed: stay with torch tensors (no `.numpy()`, no `np.sum`).
# The check runs your function inside tensorcraft's `Reduce` layer, through
# `tensorcraft.substitute(reduce=...)`.

# %% nbgrader={"grade": false, "grade_id": "reduce", "locked": false, "schema_version": 3, "solution": true, "task": false}
def reduce(x, pattern, reduction, **axes_lengths):
    ### BEGIN SOLUTION
    left, right = pattern.split("->")
    left, numbers = name_the_numbers(left)
    on_right = axis_names(right)
    reduced = [name for name in axis_names(left) if name not in on_right]
    if "..." in left and "..." not in right:
        reduced.append("...")
    if not reduced:
        return rearrange(x, f"{left} -> {right}", **axes_lengths, **numbers)
    y = rearrange(x, f"{left} -> {right} ({' '.join(reduced)})", **axes_lengths, **numbers)
    if reduction == "sum":
        return y.sum(dim=-1)
    if reduction == "mean":
        return y.mean(dim=-1)
    if reduction == "max":
        return y.amax(dim=-1)
    if reduction == "min":
        return y.amin(dim=-1)
    if reduction == "prod":
        return y.prod(dim=-1)
    raise EinopsError(f"unknown reduction {reduction!r}")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "reduce_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_reduce(reduce)
### BEGIN HIDDEN TESTS
from grader.checks.nb06_reduce_repeat_pack import check_reduce  # the grader's own, even if the notebook rebound the name

check_reduce(reduce, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# Your `reduce` inside the library: with `tensorcraft.substitute(reduce=reduce)` in force, the
# library's `Reduce` layer calls your function. The cell prints what the layer returns (it says so
# if `reduce` is not written yet).

# %%
pool = Reduce("b (h 2) (w 2) c -> b h w c", "max")
try:
    with tc.substitute(reduce=reduce):
        print("the layer with your reduce equals max pooling:", torch.equal(pool(images), direct))
except NotImplementedError:
    print("write reduce above first")

# %% [markdown]
# ## `repeat`: the axes that arrive are new
#
# `repeat` is the other direction: an axis that is on the right and not on the left is **new**,
# and you give its length as a keyword (or write a number). The input is copied along it. A gray
# picture becomes a 3-channel one:

# %%
gray = images[3].mean(dim=-1)            # (h, w)
rgb = tc.repeat(gray, "h w -> h w c", c=3)
same('repeat(gray, "h w -> h w c", c=3)', rgb, gray[:, :, None].expand(16, 16, 3))

# %% [markdown]
# A new axis of its own needs no copy: like einops, `repeat` returns a view whose new axis has
# stride 0 (every step along it lands on the same memory):

# %%
print("strides of rgb:", rgb.stride(), "| shares gray's memory:", rgb.data_ptr() == gray.data_ptr())

# %% [markdown]
# ### `(h 2)` repeats in place, `(2 h)` tiles
#
# Put the new axis inside a group and the order in the group decides what you get, as it did for
# pooling. In `(h 2)` the new axis varies fastest: every row appears twice in a row, which doubles
# the picture's height (nearest-neighbour upsampling). In `(2 h)` the new axis varies slowest: the
# whole picture appears twice, one copy below the other (tiling). The torch versions are
# `repeat_interleave` and `Tensor.repeat`:

# %%
upsampled = tc.repeat(images[0], "h w c -> (h 2) (w 2) c")
tiled = tc.repeat(images[0], "h w c -> (2 h) (2 w) c")
same('repeat(image, "h w c -> (h 2) (w 2) c")', upsampled, images[0].repeat_interleave(2, 0).repeat_interleave(2, 1))
same('repeat(image, "h w c -> (2 h) (2 w) c")', tiled, images[0].repeat(2, 2, 1))
show([images[0], upsampled, tiled], ["16 x 16", "(h 2) (w 2): upsampled", "(2 h) (2 w): tiled"])

# %% [markdown]
# Pooling and upsampling are not inverses: upsampling the 2 × 2 max-pooled picture gives a
# blockier version of the original, of the same size:

# %%
blocky = tc.repeat(pooled_max[2], "h w c -> (h 2) (w 2) c")
print(blocky.shape)
show([images[2], pooled_max[2], blocky], ["stripes", "max pool 2x2", "pooled, then (h 2) (w 2)"])

# %% [markdown]
# ## Exercise 2 — `repeat` (3 points)
#
# Write `repeat(x, pattern, **axes_lengths)`: exactly what `einops.repeat(x, pattern,
# **axes_lengths)` returns (shape, dtype and values). The left side names the input's axes (it may
# decompose one, with lengths given as keywords, and may hold `1` and `...`); the right side holds
# them all, plus the new axes, alone or inside groups.
#
# One way:
# 1. Name the numbers of the **right** side (`name_the_numbers`): they are new axes with a length.
#    The new axes are the names on the right that are not on the left. If one has no length,
#    raise `EinopsError` (a `RuntimeError`, as einops' error is).
# 2. Rearrange `x` from the left side to the left side's axes one by one ("flat": the words of the
#    left without parentheses and without `1`s), passing the keyword lengths of the left's axes.
# 3. Add one axis of length 1 per new axis at the end (`y.reshape(*y.shape, 1, ...)`) and
#    `.expand(...)` them to their lengths: this copies nothing and keeps the dtype.
# 4. Rearrange from `"<flat> <new axes>"` to the right side, passing the new axes' lengths.
#
# **Allowed** and **forbidden**: as in exercise 1 (rearrange yes; einops' and tensorcraft's
# `repeat` and `reduce` no; numpy no). The check runs your function through `tensorcraft.repeat`, with
# `tensorcraft.substitute(repeat=...)` in force.

# %% nbgrader={"grade": false, "grade_id": "repeat", "locked": false, "schema_version": 3, "solution": true, "task": false}
def repeat(x, pattern, **axes_lengths):
    ### BEGIN SOLUTION
    left, right = pattern.split("->")
    right, numbers = name_the_numbers(right)
    lengths = {**axes_lengths, **numbers}
    on_left = axis_names(left)
    new = [name for name in axis_names(right) if name not in on_left]
    missing = [name for name in new if name not in lengths]
    if missing:
        raise EinopsError(f"repeat {pattern!r}: the new axes {missing} need a length")
    flat = " ".join(word for word in left.replace("(", " ").replace(")", " ").split() if word != "1")
    y = rearrange(x, f"{left} -> {flat}", **{name: lengths[name] for name in on_left if name in lengths})
    y = y.reshape(*y.shape, *[1] * len(new)).expand(*y.shape, *[lengths[name] for name in new])
    return rearrange(y, f"{flat} {' '.join(new)} -> {right}", **{name: lengths[name] for name in new})
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "repeat_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_repeat(repeat)
### BEGIN HIDDEN TESTS
from grader.checks.nb06_reduce_repeat_pack import check_repeat  # the grader's own, even if rebound

check_repeat(repeat, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## `pack` and `unpack`: tensors of different ranks in one
#
# A vision transformer adds one "class token" of shape `(b, c)` in front of its patch tokens of
# shape `(b, n, c)`. `pack([cls, patches], "b * c")` flattens, in each tensor, the axes that `*`
# stands for (none for `cls`, `n` for the patches), concatenates along that axis, and returns the
# packed tensor with each tensor's shape along `*`. `unpack` cuts the result back with those shapes:

# %%
cls_token = torch.randn(2, 8)
patches = tc.rearrange(torch.randn(2, 8, 4, 4), "b c h w -> b (h w) c")   # 16 patch tokens
packed, packed_shapes = tc.pack([cls_token, patches], "b * c")
print("packed:", tuple(packed.shape), "| packed shapes:", packed_shapes)
back_cls, back_patches = tc.unpack(packed, packed_shapes, "b * c")
print("unpacked equal the inputs:", torch.equal(back_cls, cls_token), torch.equal(back_patches, patches))
same("pack equals torch.cat of the reshaped tensors", packed, torch.cat([cls_token[:, None], patches], dim=1))

# %% [markdown]
# `*` may stand for several axes: packing a `(b, h, w, c)` image with a `(b, c)` vector along
# `"b * c"` flattens `h w` into one axis; unpacking gives back the `(h, w)`:

# %%
packed, packed_shapes = tc.pack([images, torch.ones(4, 3)], "b * c")
print(tuple(packed.shape), packed_shapes, [tuple(t.shape) for t in tc.unpack(packed, packed_shapes, "b * c")])

# %% [markdown]
# ## `Rearrange` and `Reduce` as layers
#
# The layers hold a pattern and apply it in `forward`, so that reshapes and poolings can sit
# inside `nn.Sequential` next to convolutions. They have no parameters. Here is a small network
# that cuts a `(b, 3, 16, 16)` image into 4 × 4 patches, embeds each with a linear layer, and
# averages over the patches; the printout shows the shape after every layer:

# %%
torch.manual_seed(0)
patch_model = torch.nn.Sequential(
    Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=4, p2=4),
    torch.nn.Linear(48, 10),
    Reduce("b n d -> b d", "mean"),
)
print(patch_model)
print("parameters in the Rearrange and Reduce layers:", len(list(patch_model[0].parameters())),
      len(list(patch_model[2].parameters())))
z = tc.rearrange(images, "b h w c -> b c h w")
for layer in patch_model:
    z = layer(z)
    print(f"{type(layer).__name__:10} -> {tuple(z.shape)}")

# %% [markdown]
# The same model with einops' own layers, given the same weights, computes the same numbers:

# %%
import einops.layers.torch as einops_layers

einops_model = torch.nn.Sequential(
    einops_layers.Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=4, p2=4),
    torch.nn.Linear(48, 10),
    einops_layers.Reduce("b n d -> b d", "mean"),
)
einops_model.load_state_dict(patch_model.state_dict())
x_bchw = tc.rearrange(images, "b h w c -> b c h w")
print("same output as einops' layers:", torch.allclose(patch_model(x_bchw), einops_model(x_bchw)))

# %% [markdown]
# ## Exercise 3 — a CNN head from layers (2 points)
#
# Write `make_head(channels, hidden, classes)` returning an `nn.Sequential` that takes a batch of
# feature maps `(b, channels, h, w)`, with `h` and `w` even, to class scores `(b, classes)`:
#
# 1. 2 × 2 max pooling: each non-overlapping 2 × 2 window of neighbours becomes its maximum;
# 2. a 1 × 1 convolution to `hidden` channels, `nn.Conv2d(channels, hidden, kernel_size=1)`,
#    then `nn.ReLU()`;
# 3. global average pooling: the mean over `h` and `w`, giving `(b, hidden)`;
# 4. `nn.Linear(hidden, classes)`.
#
# Write both poolings as `Reduce` layers (tensorcraft's, imported above, or einops'); the check
# counts them, so a module of your own that calls `x.mean` fails it. The check
# gives your model the reference model's weights — in the order `model.parameters()` lists them:
# conv weight, conv bias, linear weight, linear bias — and compares the outputs.
# **Forbidden**: torch's pooling modules and functions (`nn.MaxPool2d`, `nn.AdaptiveAvgPool2d`,
# `F.max_pool2d`, `torch.max_pool2d`...), under any name (`torch.ops.aten.max_pool2d` too: the
# check watches the operations), and `nn.Flatten`. You may use `nn.Conv2d`, `nn.ReLU`,
# `nn.Linear` and the `Reduce` layers; numpy is not needed.

# %% nbgrader={"grade": false, "grade_id": "make_head", "locked": false, "schema_version": 3, "solution": true, "task": false}
def make_head(channels, hidden, classes):
    ### BEGIN SOLUTION
    return torch.nn.Sequential(
        Reduce("b c (h 2) (w 2) -> b c h w", "max"),
        torch.nn.Conv2d(channels, hidden, kernel_size=1),
        torch.nn.ReLU(),
        Reduce("b c h w -> b c", "mean"),
        torch.nn.Linear(hidden, classes),
    )
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "make_head_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_make_head(make_head)
### BEGIN HIDDEN TESTS
from grader.checks.nb06_reduce_repeat_pack import check_make_head  # the grader's own, even if rebound

check_make_head(make_head, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## einsum with named axes
#
# Notebooks 01–04 wrote einsum with one letter per axis. einops' `einsum` takes the tensors first
# and the pattern last, with axis names as in every other einops pattern, and always with `->`.
# Turning the colour pictures gray is a weighted sum over the channel axis, with the usual
# luminance weights:

# %%
luminance = torch.tensor([0.299, 0.587, 0.114])
gray_batch = tc.einops.einsum(images, luminance, "batch h w channel, channel -> batch h w")
same("einsum(images, luminance, 'batch h w channel, channel -> batch h w')", gray_batch,
     torch.einsum("bhwc,c->bhw", images, luminance))
show(list(gray_batch), ["gray"] * 4)

# %% [markdown]
# Underneath, the names become letters, in order of first appearance, and the letter equation
# runs on `tc.einsum`, the einsum you rebuilt in notebooks 01–04:

# %%
print(tc.einops.einsum_equation("batch h w channel, channel -> batch h w"))
print(tc.einops.einsum_equation("batch i, batch i j -> batch j"))

# %% [markdown]
# einsum takes one named axis per dimension. A `()` or `1`, a number, or a composed axis `(i j)`
# is refused — einops raises `NotImplementedError` there, and tensorcraft raises an error that is
# both a `NotImplementedError` and an `EinopsError`, so that code written for either catches it:

# %%
for pattern in ["batch h w channel, channel -> batch h w ()", "batch (h w) channel, channel -> batch"]:
    try:
        tc.einops.einsum(images, luminance, pattern)
    except NotImplementedError as error:
        print(f"NotImplementedError (also an EinopsError: {isinstance(error, EinopsError)}): {error}")
    try:
        einops.einsum(images, luminance, pattern)
    except NotImplementedError as error:
        print(f"einops: NotImplementedError: {error}")

# %% [markdown]
# Without `->` there is no implicit output, unlike the letter einsum: both refuse the pattern with
# a `ValueError` (tensorcraft's `EinopsError` is one):

# %%
for named_einsum in (tc.einops.einsum, einops.einsum):
    try:
        named_einsum(images, luminance, "batch h w channel, channel")
    except ValueError as error:
        print(f"{named_einsum.__module__}: {type(error).__name__}: {error}")

# %% [markdown]
# ## Common mistakes
#
# Two of them, shown before the list: `x.max(dim)` returns a pair, and multiplying by
# `torch.ones` to repeat turns integers into floats:

# %%
counts = torch.tensor([[1, 5], [7, 2]])
print("counts.max(dim=1):", counts.max(dim=1))
print("counts.amax(dim=1):", counts.amax(dim=1))
print("counts[:, :, None] * torch.ones(2, 2, 3) has dtype", (counts[:, :, None] * torch.ones(2, 2, 3)).dtype,
      "| repeat keeps", tc.repeat(counts, "a b -> a b c", c=3).dtype)

# %% [markdown]
#
# - **A sum for a mean, and axes dropped.** `reduce(x, "b c h w -> b c 1 1", "mean")` is
#   `x.mean(dim=(2, 3), keepdim=True)`: a mean, with shape `(b, c, 1, 1)`; `x.sum(-1).sum(-1)` is
#   neither.
# - **`(2 h)` for `(h 2)`.** The first axis of a group varies slowest. In a reduce, `(h 2)` pools
#   neighbours and `(2 h)` pairs rows half a picture apart; in a repeat, `(h 2)` repeats each row
#   in place and `(2 h)` tiles the whole picture.
# - **`x.max(dim)` for a reduction.** It returns values *and* indices; `x.amax(dim)` returns values.
# - **A mean of integers.** einops refuses it; convert explicitly (`x.float()`) if that is what you
#   mean.
# - **`torch.ones(...) * x` to repeat.** It broadcasts, but turns integers into floats and always
#   copies; `expand` (what `repeat` uses) keeps the dtype and copies nothing until a reshape must.
#
# ## Summary
#
# - `reduce` reduces the axes that are on the left only; `1` and `()` on the right keep an axis
#   of length 1; pooling is a reduce over decomposed axes, `(h 2) (w 2)`.
# - `repeat` adds the axes that are on the right only; `(h 2)` repeats in place (upsampling),
#   `(2 h)` tiles.
# - `pack` and `unpack` join tensors of different ranks along the axes that `*` stands for, and
#   cut them apart.
# - `Rearrange` and `Reduce` put patterns inside `nn.Sequential`; einops' `einsum` names its axes
#   and runs on the letter einsum of notebooks 01–04.
#
# **Next:** notebook 07 opens the last part of the course, torch.compile: how a model is captured
# into a graph before it is optimised and turned into code.
