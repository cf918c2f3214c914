# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · einops: rearrange
#
# **You will learn to**
# - name the axes of a tensor and move them with one pattern, `"b h w c -> b c h w"`, in place
#   of `permute`, `reshape`, `flatten`, `squeeze` and `unsqueeze`;
# - merge axes into one, `(h w)`, split one into several with lengths you give, and predict the
#   order of the elements inside a group;
# - use `...` for the axes you do not name, and `1` or `()` for axes of length 1;
# - rebuild `rearrange` yourself, in the three stages tensorcraft runs it: parse, plan, apply.
#
# **Time:** about 75 minutes. **Builds on:** 00 (how checks work), 01–04 (einsum names axes with
# letters: einops names them with words); `reshape` and `permute` in PyTorch.
# The next notebook, 06, adds the operations that remove and add axes: `reduce` and `repeat`.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math

import einops
import matplotlib.pyplot as plt
import numpy as np
import torch
from einops import EinopsError

import tensorcraft as tc
from grader.checks.nb05_rearrange import check_make_plan, check_parse_expression, check_rearrange
from tensorcraft.einops.layers import Rearrange
from tensorcraft.einops.pattern import ELLIPSIS, AnonymousAxis, Expression
from tensorcraft.einops.recipe import Plan, make_recipe, plan_for


def same(name, ours, direct):
    """Print whether a rearranged tensor equals what reshape/permute give: same shape, same values."""
    equal = ours.shape == direct.shape and torch.equal(ours, direct)
    print(f"{name:<44} shape {str(tuple(ours.shape)):<16} equal to reshape/permute: {equal}")


def show(images, titles):
    """Draw one or more (h, w, 3) images side by side."""
    figure, axes = plt.subplots(1, len(images), figsize=(3.2 * len(images), 3.2), squeeze=False)
    for ax, image, title in zip(axes[0], images, titles):
        ax.imshow(image.clamp(0, 1).numpy(), interpolation="nearest")
        ax.set_title(title, fontsize=9)
        ax.axis("off")
    plt.tight_layout()
    plt.show()


# %% [markdown]
# ## A batch of small pictures
#
# Rearranging is easiest to understand on pictures, so we draw some: six 12 × 12 colour images of
# the digits 0 to 5, each on a background that fades from one colour to another. No download is
# needed: each digit is a 3 × 5 pattern of pixels, scaled up by 2. The batch is a tensor of shape
# `(b, h, w, c)` = (6, 12, 12, 3): image, row, column, colour channel (red, green, blue, in 0…1).

# %%
FONT = {0: "111101101101111", 1: "010110010010111", 2: "111001111100111", 3: "111001111001111",
        4: "101101111001001", 5: "111100111001111"}


def digit_image(digit, size=12):
    rows = np.linspace(0, 1, size)[:, None, None]
    colour_top = np.array([0.2 + 0.12 * digit, 0.3, 0.9 - 0.12 * digit])
    colour_bottom = np.array([0.9, 0.5 + 0.08 * digit, 0.2])
    image = (1 - rows) * colour_top + rows * colour_bottom + np.zeros((size, size, 3))
    glyph = np.array([int(bit) for bit in FONT[digit]]).reshape(5, 3).repeat(2, 0).repeat(2, 1)
    image[1:11, 3:9][glyph == 1] = 1.0
    return image


images = torch.tensor(np.stack([digit_image(d) for d in range(6)]), dtype=torch.float32)
print(images.shape)
show([images[0], images[3]], ["images[0]", "images[3]"])

# %% [markdown]
# ## Axes as names
#
# `einops.rearrange(x, pattern)` reads the pattern as *what the axes are called now* `->` *what
# they should become*. Each word names one axis. Moving a name moves the axis: channels-last to
# channels-first is `"b h w c -> b c h w"`, which is `permute(0, 3, 1, 2)` — but the pattern
# says *which* axis goes where, where the numbers only say positions.

# %%
same("b h w c -> b c h w", einops.rearrange(images, "b h w c -> b c h w"), images.permute(0, 3, 1, 2))
same("b h w c -> b w h c  (transpose each image)", einops.rearrange(images, "b h w c -> b w h c"),
     images.transpose(1, 2))

# %% [markdown]
# Swapping `h` and `w` transposes every picture: rows become columns.

# %%
show([images[2], einops.rearrange(images, "b h w c -> b w h c")[2]], ["b h w c", "b w h c"])

# %% [markdown]
# Names must be the same on both sides: `rearrange` never drops or invents an axis (that is what
# `reduce` and `repeat` do, in notebook 06). A mistake raises `einops.EinopsError`, a subclass of
# `RuntimeError`, with a message that says what is wrong:

# %%
try:
    einops.rearrange(images, "b h w c -> b c h")
except EinopsError as error:
    print(type(error).__name__, "| a RuntimeError:", isinstance(error, RuntimeError))
    print(str(error).splitlines()[-1])

# %% [markdown]
# ## Composition: several axes become one, `(h w)`
#
# Parentheses on the right merge axes into one dimension, whose length is the product of theirs.
# `"b h w c -> b (h w c)"` flattens each image into a vector of 12 · 12 · 3 = 432 numbers: it is
# `reshape(b, -1)`. Put `c` first inside the group and the channels are moved first, then
# flattened: a permute followed by a reshape, in one pattern.

# %%
b = images.shape[0]
same("b h w c -> b (h w c)", einops.rearrange(images, "b h w c -> b (h w c)"), images.reshape(b, -1))
same("b h w c -> b (c h w)", einops.rearrange(images, "b h w c -> b (c h w)"),
     images.permute(0, 3, 1, 2).reshape(b, -1))

# %% [markdown]
# **The order inside a group matters.** A group lists its axes from the slowest-changing to the
# fastest, like the digits of a number: in `(h w)` the position is `h * W + w`, so all of row 0
# comes first, then row 1 (reading a page line by line). In `(w h)` the position is `w * H + h`:
# column by column. Both have the same length, and different contents:

# %%
row_by_row = einops.rearrange(images, "b h w c -> b (h w) c")
column_by_column = einops.rearrange(images, "b h w c -> b (w h) c")
print("same shape:", row_by_row.shape == column_by_column.shape, "| same values:", torch.equal(row_by_row, column_by_column))
same("b h w c -> b (w h) c", column_by_column, images.permute(0, 2, 1, 3).reshape(b, -1, 3))

# %% [markdown]
# A picture makes it plain. Below, six images are laid out as one mosaic of 2 rows × 3 columns.
# The batch axis is split into `b1 = 2` rows of `b2 = 3` images (decomposition, next section),
# then each row of pixels of the mosaic is `(b2 w)`: image 0's row, then image 1's row, then
# image 2's. Write `(w b2)` instead and the three images are interleaved pixel by pixel — the
# same numbers, a scrambled picture. Write `(b2 b1)` for the batch and the mosaic is read
# column-first: image 1 lands below image 0.

# %%
mosaic = einops.rearrange(images, "(b1 b2) h w c -> (b1 h) (b2 w) c", b1=2)
interleaved = einops.rearrange(images, "(b1 b2) h w c -> (b1 h) (w b2) c", b1=2)
column_first = einops.rearrange(images, "(b2 b1) h w c -> (b1 h) (b2 w) c", b1=2)
show([mosaic, interleaved, column_first], ["(b1 b2) … -> (b1 h) (b2 w) c", "… (w b2) c: pixels interleaved",
                                          "(b2 b1) … : images read column-first"])

# %% [markdown]
# Each is one reshape, one permute and one reshape: split the batch, move the axes, merge.

# %%
same("mosaic", mosaic, images.reshape(2, 3, 12, 12, 3).permute(0, 2, 1, 3, 4).reshape(24, 36, 3))
same("interleaved", interleaved, images.reshape(2, 3, 12, 12, 3).permute(0, 2, 3, 1, 4).reshape(24, 36, 3))
same("column first", column_first, images.reshape(3, 2, 12, 12, 3).permute(1, 2, 0, 3, 4).reshape(24, 36, 3))

# %% [markdown]
# ## Decomposition: one axis becomes several, with lengths you give
#
# Parentheses on the **left** split a dimension. einops can infer one unknown length per group by
# dividing, so `"(b1 b2) h w c"` with `b1=2` on a batch of 6 gives `b2 = 3`. You may give every
# length of a group; then their product must equal the dimension. Any length you give is checked,
# even for an axis that is not split.

# %%
print(einops.rearrange(images, "(b1 b2) h w c -> b1 b2 h w c", b1=2).shape)
print(einops.rearrange(images, "(b1 b2) h w c -> b1 b2 h w c", b1=2, b2=3).shape)
for lengths in ({"b1": 4}, {"b1": 2, "b2": 2}, {}, {"b1": 2, "h": 10}):
    try:
        einops.rearrange(images, "(b1 b2) h w c -> b1 b2 h w c", **lengths)
    except EinopsError as error:
        print(f"{str(lengths):<20} EinopsError: {str(error).splitlines()[-1]}")

# %% [markdown]
# With `b1=4`, 6 is not divisible by 4; with `b1=2, b2=2`, 2 · 2 is not 6; with no length, one
# dimension cannot tell `b1` from `b2`; `h=10` is checked against the 12 rows and refused. The split is `reshape(b1, b2, ...)`: the first axis of the
# group is the outer one, as in composition.

# %%
same("(b1 b2) h w c -> b1 b2 h w c", einops.rearrange(images, "(b1 b2) h w c -> b1 b2 h w c", b1=2),
     images.reshape(2, 3, 12, 12, 3))

# %% [markdown]
# ## The ellipsis `...` stands for the axes you do not name
#
# `...` may appear once per side and matches any number of dimensions (zero included); on the
# right it puts them back, in their order, wherever it is written. One pattern then works on any
# rank: `"b ... c -> b c ..."` moves the last axis to position 1, like `torch.movedim(x, -1, 1)`.

# %%
for shape in [(2, 3), (2, 4, 3), (2, 5, 4, 3)]:
    x = torch.randn(shape)
    same(f"b ... c -> b c ...   on {shape}", einops.rearrange(x, "b ... c -> b c ..."), torch.movedim(x, -1, 1))
try:
    einops.rearrange(x, "... b ... -> b")
except EinopsError as error:
    print("two ellipses on one side, EinopsError:", str(error).splitlines()[-1])

# %% [markdown]
# On the right, `...` may also stand inside a group, which merges those dimensions:
# `"b ... -> b (...)"` flattens everything but the first axis, like `flatten(1)`.

# %%
same("b ... -> b (...)", einops.rearrange(images, "b ... -> b (...)"), images.flatten(1))

# %% [markdown]
# ## Anonymous axes: `1` and `()`
#
# A `1` (or an empty group `()`) is a dimension of length 1 with no name: on the right it adds one
# (`unsqueeze`), on the left it removes one (`squeeze`), after checking that its length is 1
# (the batch of 6 images has no axis of length 1 to remove).
# Other numbers are not allowed in `rearrange`: `"h w -> h w 2"` would invent data, which is
# `repeat`'s job (notebook 06).

# %%
same("b h w c -> b 1 h w c", einops.rearrange(images, "b h w c -> b 1 h w c"), images.unsqueeze(1))
same("b () h w c -> b h w c", einops.rearrange(images[:, None], "b () h w c -> b h w c"), images)
for pattern in ["1 h w c -> h w c", "b h w c -> b h w c 2"]:
    try:
        einops.rearrange(images, pattern)
    except EinopsError as error:
        print(f"{pattern:<22} EinopsError: {str(error).splitlines()[-1]}")

# %% [markdown]
# ## Space to depth: splitting and merging in one pattern
#
# Splitting the image axes and merging the pieces into the channels trades resolution for depth:
# `"b (h h2) (w w2) c -> b h w (h2 w2 c)"` with `h2 = w2 = 2` gives 6 × 6 images with 12
# channels. PyTorch has it for channels-first tensors as `pixel_unshuffle`:

# %%
depth = einops.rearrange(images, "b (h h2) (w w2) c -> b h w (h2 w2 c)", h2=2, w2=2)
print(depth.shape)
channels_first = images.permute(0, 3, 1, 2)
same("b c (h h2) (w w2) -> b (c h2 w2) h w",
     einops.rearrange(channels_first, "b c (h h2) (w w2) -> b (c h2 w2) h w", h2=2, w2=2),
     torch.nn.functional.pixel_unshuffle(channels_first, 2))
same("b (h h2) (w w2) c -> b h w (h2 w2 c)", depth,
     images.reshape(6, 6, 2, 6, 2, 3).permute(0, 1, 3, 2, 4, 5).reshape(6, 6, 6, 12))

# %% [markdown]
# Each (h2, w2) pair picks every second pixel, starting at row h2 and column w2: four half-size
# copies of the image, each sampled one pixel further down or right (here they look almost alike,
# since every pixel of a digit was drawn as a 2 × 2 block). Laid out as a 2 × 2 grid:

# %%
phases = einops.rearrange(images[3], "(h h2) (w w2) c -> (h2 h) (w2 w) c", h2=2, w2=2)
show([images[3], phases], ["images[3]", "(h h2) (w w2) c -> (h2 h) (w2 w) c"])

# %% [markdown]
# ## How tensorcraft runs a rearrange: parse → recipe → plan → steps
#
# `tc.rearrange` gives the same results as einops (and is checked against it). It works in
# stages, each a function of its own:
#
# 1. `parse_expression(text)` reads one side of the pattern into an `Expression`: a tuple of
#    dimensions, each a tuple of the axes composed into it.
# 2. `make_recipe(pattern, operation, ndim, given_names)` uses both sides and the input's rank:
#    it lists the *elementary* axes (every name; `...` expanded into as many axes as the input
#    has spare dimensions), which of them each input dimension holds, the order they leave in,
#    and which of them each output dimension holds.
# 3. `make_plan(recipe, shape, axes_lengths)` takes the input's shape: it finds every axis length
#    and writes down the steps — **reshape** (one dimension per axis), **permute** (output order),
#    **reshape** (merge each output group).
#
# `plan_for` prints the plan of one call:

# %%
print(plan_for("(b1 b2) h w c -> (b1 h) (b2 w) c", tuple(images.shape), b1=2))

# %% [markdown]
# These stages are *swap points*: `tc.substitute(<stage>=your_function)` runs the library with
# your function in place of its own, inside the `with` block only. Every `tc.rearrange` — also
# the one inside the `Rearrange` layer of a model — then calls yours. Below, a function that
# reports its calls before handing over to einops stands in for `rearrange`:

# %%
model = torch.nn.Sequential(Rearrange("b h w c -> b (h w c)"), torch.nn.Linear(432, 2))


def reporting_rearrange(x, pattern, **axes_lengths):
    print(f"  called with {pattern!r}, input shape {tuple(x.shape)}")
    return einops.rearrange(x, pattern, **axes_lengths)


with tc.substitute(rearrange=reporting_rearrange):
    print("inside the block:", tuple(model(images).shape))
print("outside the block:", tuple(model(images).shape), "(nothing printed: the library's own ran)")

# %% [markdown]
# You will now write the three stages yourself, and each check runs yours inside the library.
# In all three exercises, raise **`einops.EinopsError`** (imported above as `EinopsError`) where
# einops raises an error; a subclass of it is accepted too (tensorcraft's own `tc.EinopsError` is
# not one). Forbidden, because they would do the work for you: `einops.rearrange` / `reduce` /
# `repeat` and einops' parser (`einops.parsing.ParsedExpression`), `tc.rearrange` / `tc.reduce` /
# `tc.repeat`, and tensorcraft's `parse_expression`, `make_recipe`, `make_plan`, `plan_for` and
# `compile_steps` (their `.library` versions too); in Exercise 3 also the library's `apply` and
# `steps_for`. Everything in `torch`, `math` and Python itself is allowed.

# %% [markdown]
# ## Exercise 1 — parse one side of a pattern (2 points)
#
# Write `parse_expression(text: str) -> Expression`: read one side of a pattern, e.g.
# `"b (h w) ... 1"`, and return `Expression(text=text, dims=dims)`, where `dims` is a tuple with
# one entry per dimension the text writes:
#
# - a name outside parentheses is a dimension of one axis: `b` → `("b",)`;
# - a group is one dimension holding its axes in order: `(h w)` → `("h", "w")`; `()` → `()`;
# - a number other than 1 is an *anonymous axis*: `AnonymousAxis(2)` (every one is a new axis;
#   `0` is refused);
# - `1` outside parentheses is a dimension with no axis, `()`; inside a group it adds nothing;
# - `...` outside parentheses is the bare string `ELLIPSIS` (not a tuple: it stands for any number
#   of dimensions); inside a group it is an element of the group: `(h ...)` → `("h", ELLIPSIS)`.
#
# Words are separated by spaces (any number) and by parentheses: `a(b c)` reads as `a (b c)`.
# Raise `EinopsError` for: a name twice (also inside a group), `...` twice, `(` inside a group, a
# `)` without `(` or a `(` never closed, a number `0`, a name that is not a Python identifier
# (`2a`) or that starts or ends with `_`, any other character (a tab too).
# So `"b (h w) ... 1"` gives `dims = (("b",), ("h", "w"), ELLIPSIS, ())`, and `""` gives `dims = ()`.
#
# You may use string methods and plain Python; numpy is not needed. Forbidden: einops' parser and
# its functions, and the library's own `parse_expression`.
#
# The check compares your `dims` with einops' own parser, then runs `tc.rearrange`, `tc.repeat`
# and `tc.reduce` with `tc.substitute(parse_expression=parse_expression)` and compares their
# results with einops'.

# %%
example = Expression(text="b (h 2) ... 1", dims=(("b",), ("h", AnonymousAxis(2)), ELLIPSIS, ()))
print("dims:", example.dims, "| ELLIPSIS is the string", repr(ELLIPSIS))
print("the 2 in (h 2) is", type(example.dims[1][1]).__name__, "of length", example.dims[1][1].length,
      "(it prints as its length)")
print("two anonymous axes of length 2 are different axes:", AnonymousAxis(2) == AnonymousAxis(2))
print("'h'.isidentifier():", "h".isidentifier(), "| 'h-w'.isidentifier():", "h-w".isidentifier())


# %% nbgrader={"grade": false, "grade_id": "parse_expression", "locked": false, "schema_version": 3, "solution": true, "task": false}
def parse_expression(text: str) -> Expression:
    ### BEGIN SOLUTION
    dims, seen = [], set()
    group = None  # the axes of an open "(", if any

    def add(word):
        if word == "...":
            if ELLIPSIS in seen:
                raise EinopsError(f"more than one '...' in {text!r}")
            seen.add(ELLIPSIS)
            axis = ELLIPSIS
        elif word.isdecimal():
            if int(word) == 0:
                raise EinopsError(f"an anonymous axis needs a positive length, in {text!r}")
            if int(word) == 1:
                if group is None:
                    dims.append(())
                return
            axis = AnonymousAxis(int(word))
        else:
            if not word.isidentifier() or word.startswith("_") or word.endswith("_"):
                raise EinopsError(f"{word!r} is not a valid axis name, in {text!r}")
            if word in seen:
                raise EinopsError(f"axis {word!r} appears twice in {text!r}")
            seen.add(word)
            axis = word
        if group is not None:
            group.append(axis)
        elif axis == ELLIPSIS:
            dims.append(ELLIPSIS)
        else:
            dims.append((axis,))

    word = ""
    for char in text + " ":  # the final space ends the last word
        if char in "() ":
            if word:
                add(word)
            word = ""
            if char == "(":
                if group is not None:
                    raise EinopsError(f"'(' inside a group in {text!r}")
                group = []
            elif char == ")":
                if group is None:
                    raise EinopsError(f"')' without '(' in {text!r}")
                dims.append(tuple(group))
                group = None
        elif char.isalnum() or char in "_.":
            word += char
        else:
            raise EinopsError(f"character {char!r} is not allowed in {text!r}")
    if group is not None:
        raise EinopsError(f"'(' is never closed in {text!r}")
    return Expression(text=text, dims=tuple(dims))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "parse_expression_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_parse_expression(parse_expression)
### BEGIN HIDDEN TESTS
from grader.checks.nb05_rearrange import check_parse_expression  # the grader's own, even if rebound

check_parse_expression(parse_expression, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## Exercise 2 — the plan: every length, and the three shapes (3 points)
#
# The recipe has already worked out the layout from the pattern and the rank. Here is the recipe
# of the mosaic (`...` would already be expanded into axes named `...0`, `...1`, …):

# %%
recipe = make_recipe("(b1 b2) h w c -> (b1 h) (b2 w) c", "rearrange", 4, ("b1",))
for field in ("axes", "fixed_lengths", "given_axes", "input_dims", "permutation", "output_dims"):
    print(f"recipe.{field:<14} = {getattr(recipe, field)}")

# %% [markdown]
# Axes are referred to by their index in `recipe.axes`. `fixed_lengths[i]` is the length written
# in the pattern for axis `i` (`None` for names: in `rearrange`, always `None`); `given_axes` pairs
# each keyword length's name with its axis; `input_dims[d]` lists the axes that input dimension
# `d` holds, `output_dims` the same for the output; `permutation` lists the axes in the order the
# output wants them.
#
# Write `make_plan(recipe, shape, axes_lengths) -> Plan` for `rearrange`:
#
# 1. Start `lengths` (one entry per axis) from `recipe.fixed_lengths` and set the given ones:
#    `lengths[axis] = axes_lengths[name]` for each `(name, axis)` in `recipe.given_axes`.
# 2. For each input dimension `d` of length `shape[d]`: multiply the known lengths of its axes.
#    If one axis is unknown (the recipe guarantees at most one), its length is `shape[d]` divided
#    by that product — raise `EinopsError` if the product does not divide `shape[d]` (or is 0).
#    If none is unknown, the product must equal `shape[d]`, else raise `EinopsError` (a `1` on the
#    left holds no axis: its product is 1, so its dimension must be 1). Lengths are ints: use `//`.
# 3. Return `Plan(recipe=recipe, input_shape=tuple(shape), axes_lengths=tuple(axes_lengths.items()),
#    init_shape=..., permutation=recipe.permutation, reduced_axes=(), unsqueezed_shape=None,
#    expanded_shape=None, final_shape=...)`: `init_shape` is the tuple of every axis length (the
#    first reshape: one dimension per axis), `final_shape` holds, per output dimension, the
#    product of its axes' lengths (`math.prod`; `()` gives 1). The other fields belong to
#    `reduce` and `repeat` (notebook 06).
#
# For the mosaic on `images`: `lengths = [2, 3, 12, 12, 3]`, `init_shape = (2, 3, 12, 12, 3)`,
# `final_shape = (24, 36, 3)`. You may use `math.prod`, dicts and plain Python; numpy is not
# needed (`math.prod` keeps the lengths Python ints). Forbidden: einops' functions and the
# library's own `make_plan`. The check runs `tc.rearrange` and the `Rearrange` layer with
# `tc.substitute(make_plan=make_plan)` and compares with einops.

# %% nbgrader={"grade": false, "grade_id": "make_plan", "locked": false, "schema_version": 3, "solution": true, "task": false}
def make_plan(recipe, shape: tuple, axes_lengths: dict) -> Plan:
    ### BEGIN SOLUTION
    lengths = list(recipe.fixed_lengths)
    for name, axis in recipe.given_axes:
        lengths[axis] = axes_lengths[name]
    for dim, actual in zip(recipe.input_dims, shape):
        unknown = [axis for axis in dim if lengths[axis] is None]
        known = math.prod(lengths[axis] for axis in dim if lengths[axis] is not None)
        if not unknown:
            if known != actual:
                raise EinopsError(f"the lengths make {known}, the dimension is {actual}")
        elif known == 0 or actual % known != 0:
            raise EinopsError(f"{actual} cannot be split: {known} does not divide it")
        else:
            lengths[unknown[0]] = actual // known
    return Plan(recipe=recipe, input_shape=tuple(shape), axes_lengths=tuple(axes_lengths.items()),
                init_shape=tuple(lengths), permutation=recipe.permutation, reduced_axes=(),
                unsqueezed_shape=None, expanded_shape=None,
                final_shape=tuple(math.prod(lengths[axis] for axis in dim) for dim in recipe.output_dims))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "make_plan_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_make_plan(make_plan)
### BEGIN HIDDEN TESTS
from grader.checks.nb05_rearrange import check_make_plan  # the grader's own, even if rebound

check_make_plan(make_plan, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## Exercise 3 — `rearrange` (4 points)
#
# Write `rearrange(x: torch.Tensor, pattern: str, **axes_lengths) -> torch.Tensor`, the whole
# operation, for torch tensors, equal to `einops.rearrange` (values, shape and dtype). You may
# call your `parse_expression` from Exercise 1. The steps:
#
# 1. Split the pattern at its one `->` and parse both sides.
# 2. Raise `EinopsError` where the pattern cannot apply: a number other than 1 on either side; an
#    axis (or `...`) on one side only; `...` inside a group on the left; a keyword length for an
#    axis the pattern does not have; an input whose number of dimensions does not match the left
#    side (with `...`, it may have more: the rest are the ellipsis).
# 3. Expand `...` on both sides into as many new axis names as it stands for (e.g. `"...0"`,
#    `"...1"`; inside a group on the right they join the group).
# 4. Find every axis length from the input's shape and the keyword lengths, raising
#    `EinopsError` as in Exercise 2 — and when a dimension has two unknown axes.
# 5. `reshape` to one dimension per left-side axis, `permute` into the right side's order,
#    `reshape` to merge each right-side group. (`view` is not enough: after `permute` the tensor
#    is usually not contiguous.)
#
# The result must work with autograd, as einops' does (the layer sits inside models that train):
# build it from `x` with torch operations, not through `.tolist()` or `torch.tensor(...)`.
#
# You may use `reshape`, `permute` and your `parse_expression`; numpy is not allowed (no
# `.numpy()`, no `np.transpose`). Forbidden: einops (`einops.rearrange` and the rest, even kept in
# a variable or a dict) and the library's own `rearrange` and its steps.
#
# The check compares with einops on fixed and randomly generated patterns (compositions on both
# sides, decompositions with given lengths, ellipsis, scalars, errors), called directly, with
# `x.requires_grad` (the result and the gradient that flows back to `x`), and as the stage of the
# `Rearrange` layer inside `nn.Sequential`, through `tc.substitute(rearrange=rearrange)`.

# %% nbgrader={"grade": false, "grade_id": "rearrange", "locked": false, "schema_version": 3, "solution": true, "task": false}
def rearrange(x: torch.Tensor, pattern: str, **axes_lengths) -> torch.Tensor:
    ### BEGIN SOLUTION
    if pattern.count("->") != 1:
        raise EinopsError(f"{pattern!r} needs exactly one '->'")
    left_text, right_text = pattern.split("->")
    left, right = parse_expression(left_text), parse_expression(right_text)
    if left.anonymous_axes or right.anonymous_axes:
        raise EinopsError(f"rearrange takes no number other than 1: {pattern!r}")
    if left.identifiers != right.identifiers:
        raise EinopsError(f"rearrange keeps every axis, {pattern!r} does not")
    if left.ellipsis_in_group:
        raise EinopsError(f"'...' inside a group on the left: {pattern!r}")
    for name in axes_lengths:
        if name not in left.identifiers:
            raise EinopsError(f"{name}= names no axis of {pattern!r}")
    n_named = len(left.dims) - left.has_ellipsis
    if x.ndim != n_named and not (left.has_ellipsis and x.ndim > n_named):
        raise EinopsError(f"{pattern!r} does not fit an input of {x.ndim} dimensions")
    extra = [f"...{i}" for i in range(x.ndim - n_named)]

    def expand(expression):
        dims = []
        for dim in expression.dims:
            if dim == ELLIPSIS:
                dims += [(name,) for name in extra]
            else:
                dims.append(tuple(a for axis in dim for a in (extra if axis == ELLIPSIS else [axis])))
        return dims

    left_dims, right_dims = expand(left), expand(right)
    lengths = dict(axes_lengths)
    for dim, actual in zip(left_dims, x.shape):
        unknown = [axis for axis in dim if axis not in lengths]
        known = math.prod(lengths[axis] for axis in dim if axis in lengths)
        if len(unknown) > 1:
            raise EinopsError(f"cannot infer the lengths of {unknown} from one dimension of {pattern!r}")
        if not unknown:
            if known != actual:
                raise EinopsError(f"the lengths make {known}, the dimension is {actual}")
        elif known == 0 or actual % known != 0:
            raise EinopsError(f"{actual} cannot be split: {known} does not divide it")
        else:
            lengths[unknown[0]] = actual // known
    axes = [axis for dim in left_dims for axis in dim]
    order = [axis for dim in right_dims for axis in dim]
    x = x.reshape([lengths[axis] for axis in axes])
    x = x.permute([axes.index(axis) for axis in order])
    return x.reshape([math.prod(lengths[axis] for axis in dim) for dim in right_dims])
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "rearrange_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
check_rearrange(rearrange)
### BEGIN HIDDEN TESTS
from grader.checks.nb05_rearrange import check_rearrange  # the grader's own, even if rebound

check_rearrange(rearrange, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## Your rearrange inside a model
#
# With your function substituted, the `Rearrange` layer of this model lays the batch out as a
# mosaic through **your** code. (Until Exercise 3 is done, the cell says so instead.)

# %%
mosaic_layer = torch.nn.Sequential(Rearrange("(b1 b2) h w c -> (b1 h) (b2 w) c", b1=2))
try:
    with tc.substitute(rearrange=rearrange):
        yours = mosaic_layer(images)
    print("equal to einops' mosaic:", torch.equal(yours, mosaic))
    show([yours], ["your rearrange, inside Rearrange(...)"])
except NotImplementedError:
    print("rearrange is not written yet: the library's own runs instead")
    show([mosaic_layer(images)], ["the library's rearrange"])

# %% [markdown]
# ## Common mistakes
#
# **`(h w)` is not `(w h)`.** Both give a dimension of the same length, so nothing fails — the
# elements are simply in another order (the interleaved mosaic above). The first axis of a group
# is the outer, slower one, on the left side (splitting) as on the right side (merging).
#
# **`view` after `permute`.** `permute` only changes how the tensor is read from memory; merging
# dimensions that are no longer next to each other in memory needs a copy, which `reshape` makes
# and `view` refuses:

# %%
moved = images.permute(0, 3, 1, 2)
print("contiguous after permute:", moved.is_contiguous())
try:
    moved.view(6, -1)
except RuntimeError as error:
    print("view:", str(error)[:70], "...")
print("reshape:", tuple(moved.reshape(6, -1).shape))

# %% [markdown]
# **Splitting with the wrong length.** A length you give is checked against the dimension; a
# length that divides the dimension but is the wrong one is not an error — it is a different
# picture. Six images split as `b1=3` give a 3 × 2 mosaic, not 2 × 3:

# %%
print(einops.rearrange(images, "(b1 b2) h w c -> (b1 h) (b2 w) c", b1=3).shape, "instead of", tuple(mosaic.shape))

# %% [markdown]
# **Expecting a copy.** Like `permute` and `reshape`, `rearrange` returns a *view* of the input
# whenever it can: writing into the result writes into the input.

# %%
x = torch.zeros(2, 3)
y = einops.rearrange(x, "a b -> b a")
y[0, 0] = 7.0
print("x[0, 0] after writing y[0, 0]:", x[0, 0].item(), "| y shares x's memory:", y.data_ptr() == x.data_ptr())

# %% [markdown]
# ## Summary
#
# - A pattern names every axis: `rearrange` is permute, reshape, flatten, squeeze and unsqueeze in
#   one notation, and checks the shapes as it goes.
# - `(a b)` on the right merges (`a` outer, `b` inner); on the left it splits, with all lengths
#   but one given as keywords; the order inside the parentheses decides the order of elements.
# - `...` stands for the axes you do not name; `1` and `()` for unnamed axes of length 1.
# - Every `rearrange` is reshape → permute → reshape; tensorcraft builds it in stages (parse,
#   recipe, plan), and `tc.substitute` runs the library with your stage in place of its own.
#
# **Next:** notebook 06 — `reduce`, `repeat`, `pack` and the layers: axes that disappear
# (pooling) and appear (upsampling), on the same pictures.
