"""Checks for notebook 06 (reduce, repeat, pack and the layers).

Ground truth comes from einops itself (``einops.reduce``, ``einops.repeat``, the layers of
``einops.layers.torch``). The learner's ``reduce`` runs inside the library's own pipeline: the
check builds tensorcraft's ``Reduce`` layer and calls it with ``tensorcraft.substitute(reduce=...)``
in force, so that the layer calls the learner's function. The learner's ``repeat`` runs the same
way through ``tensorcraft.repeat``. While the learner's code runs, einops' and tensorcraft's own
reduce and repeat (and the layers) are tripwires; ``rearrange`` (einops' or tensorcraft's) stays
allowed, as notebook 05 taught it.
"""
from __future__ import annotations

import einops
import einops.layers.torch as einops_layers
import torch

import tensorcraft
from tensorcraft.einops.errors import EinopsError
from tensorcraft.einops.layers import Reduce as LibraryReduce
from tensorcraft.einops.ops import repeat as library_repeat

from .compare import describe
from .exercise import Case, Exercise, Group
from .seed import draw
from .tripwire import out_of_reach

REDUCTIONS = ("sum", "mean", "max", "min", "prod")

# Not "einops.einops.reduce": einops.rearrange, which the exercises allow, calls that function itself.
FORBIDDEN_REDUCE_REPEAT = (
    # the stages' own functions first (out of reach under any name), then the names that lead to them
    "tensorcraft.einops.ops.reduce.library", "tensorcraft.einops.ops.repeat.library",
    "einops.reduce", "einops.repeat", "einops.einops.repeat",
    "einops.layers.torch.Reduce",
    "tensorcraft.reduce", "tensorcraft.repeat", "tensorcraft.einops.reduce", "tensorcraft.einops.repeat",
    "tensorcraft.einops.ops.reduce", "tensorcraft.einops.ops.repeat", "tensorcraft.einops.layers.Reduce",
)


def _values(shape: tuple[int, ...], dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    """Random values of ``dtype``; integers stay small so that products cannot overflow."""
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g).to(dtype)
    return torch.randint(-3, 4, shape, generator=g).to(dtype)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---------------------------------------------------------------- exercise 1: reduce


def _keywords(lengths: dict) -> str:
    return "".join(f", {k}={v!r}" for k, v in lengths.items())


def _show_reduce(x: torch.Tensor, pattern: str, reduction: str, lengths: dict) -> str:
    """A case as the learner would call it (the check runs it inside the Reduce layer)."""
    return f"reduce({describe(x, 60)}, {pattern!r}, {reduction!r}{_keywords(lengths)})"


def _show_repeat(x: torch.Tensor, pattern: str, lengths: dict) -> str:
    return f"repeat({describe(x, 60)}, {pattern!r}{_keywords(lengths)})"


def _reduce_reference(x: torch.Tensor, pattern: str, reduction: str, lengths: dict) -> torch.Tensor:
    return einops.reduce(x, pattern, reduction, **lengths)


def _through_the_reduce_layer(learner_reduce, x: torch.Tensor, pattern: str, reduction: str, lengths: dict):
    """tensorcraft's ``Reduce`` layer with the learner's ``reduce`` substituted in: the layer calls it.

    A pattern the layer refuses when it is built never reaches a reduce; the learner's function is
    then called directly and must refuse it too.
    """
    try:
        layer = LibraryReduce(pattern, reduction, **lengths)
    except EinopsError:
        return learner_reduce(x, pattern, reduction, **lengths)
    with tensorcraft.substitute(reduce=learner_reduce):
        return layer(x)


def _reduce_case(x: torch.Tensor, pattern: str, reduction: str, note: str = "", **lengths: int) -> Case:
    return Case((x, pattern, reduction, lengths), note or f"{reduction} {pattern!r}")


def _reduce_public() -> list[Group]:
    g = torch.Generator().manual_seed(6)
    images = _values((2, 3, 4, 6), torch.float32, g)
    return [
        Group("mean over h and w, keeping them as axes of length 1", [
            _reduce_case(images, "b c h w -> b c 1 1", "mean", "global mean pooling, axes kept"),
            _reduce_case(images, "b c h w -> b c () 1", "mean", "() and 1 both keep an axis"),
            _reduce_case(images, "b c h w -> 1 c 1 1", "mean", "mean over b, h and w"),
        ]),
        Group("sum, max, min, prod over named axes", [
            _reduce_case(images, "b c h w -> b c", "sum"),
            _reduce_case(images, "b c h w -> b h w", "max", "max over the channels (a middle axis)"),
            _reduce_case(images, "b c h w -> w c", "min", "the kept axes change places too"),
            _reduce_case(_values((2, 3, 4), torch.float64, g), "a b c -> b", "prod"),
        ]),
        Group("pooling over decomposed axes", [
            _reduce_case(images, "b c (h 2) (w 2) -> b c h w", "max", "2 x 2 max pooling"),
            _reduce_case(images, "b c (h 2) (w 3) -> b c h w", "mean", "2 x 3 mean pooling"),
            _reduce_case(images, "b c (h h2) (w w2) -> b (c h w)", "max", "pool, then flatten", h2=2, w2=2),
            _reduce_case(images, "b c (h2 h) w -> b c h w", "sum", "(h2 h): rows h apart are summed", h2=2),
        ]),
        Group("ellipsis and integer tensors", [
            _reduce_case(images, "b ... w -> b w", "max", "the ellipsis axes are reduced"),
            _reduce_case(images, "... h w -> ... 1 w", "mean"),
            _reduce_case(_values((3, 4, 5), torch.int32, g), "a b c -> a c", "sum", "int32 sums to int64, as in torch"),
            _reduce_case(_values((3, 4), torch.int64, g), "a b -> a", "max", "int64 max keeps int64"),
        ]),
        Group("errors einops raises (RuntimeError)", [
            Case((_values((2, 4), torch.int64, g), "a b -> a", "mean", {}),
                 "mean of integers: einops and torch refuse it (do not convert to float)", raises=RuntimeError),
            Case((images, "b c (h 3) w -> b c h w", "max", {}), "4 rows do not split into groups of 3",
                 raises=RuntimeError),
        ]),
    ]


AXIS_NAMES = ("a", "b", "c", "d", "e")


def _random_reduce_case(g: torch.Generator) -> Case:
    """Input axes a b c ... (some decomposed with a number, as pooling does), a random subset kept in
    a random order, sometimes composed, with unit axes sprinkled in."""
    n_axes = 2 + draw(g, 3)
    names = list(AXIS_NAMES[:n_axes])
    sizes = [1 + draw(g, 3) for _ in names]
    left, shape, lengths = [], [], {}
    for name, size in zip(names, sizes):
        kind = draw(g, 4)
        if kind == 0:      # pooling: (a 2) reduces the 2
            window = 2 + draw(g, 2)
            left.append(f"({name} {window})")
            shape.append(size * window)
        elif kind == 1:    # decomposition with a given length
            inner = 2 + draw(g, 2)
            left.append(f"({name} {name}{name})")
            lengths[f"{name}{name}"] = inner
            shape.append(size * inner)
        else:
            left.append(name)
            shape.append(size)
    kept = [name for name in names if draw(g, 2)]
    kept = [kept[i] for i in torch.randperm(len(kept), generator=g).tolist()]
    right = []
    while kept:
        take = 2 if len(kept) > 1 and draw(g, 4) == 0 else 1
        group, kept = kept[:take], kept[take:]
        right.append(group[0] if take == 1 else f"({' '.join(group)})")
        if draw(g, 3) == 0:
            right.insert(draw(g, len(right) + 1), "1")
    reduction = REDUCTIONS[draw(g, len(REDUCTIONS))]
    dtype = (torch.float32, torch.float64, torch.int64)[draw(g, 3)] if reduction != "mean" else torch.float32
    pattern = f"{' '.join(left)} -> {' '.join(right)}"
    return _reduce_case(_values(tuple(shape), dtype, g), pattern, reduction, f"{reduction} {pattern!r}, {_name(dtype)}",
                        **lengths)


def _reduce_hidden(g: torch.Generator) -> list[Group]:
    images = _values((2, 3, 6, 4), torch.float32, g)
    return [
        Group("random patterns and reductions", [_random_reduce_case(g) for _ in range(14)]),
        Group("unit axes kept by a mean", [
            _reduce_case(images, "b c h w -> b c 1 1", "mean"),
            _reduce_case(images, "b c h w -> 1 1 h w", "mean"),
            _reduce_case(images, "b c (h 3) (w 2) -> b 1 c h w", "mean"),
        ]),
        Group("an integer mean is refused", [
            Case((_values((3, 2), torch.int32, g), "a b -> b", "mean", {}), "int32 mean: refused, not converted to float", raises=RuntimeError),
        ]),
    ]


REDUCE = Exercise(
    id="nb06_reduce_repeat_pack.reduce",
    reference=_reduce_reference,
    public=_reduce_public,
    hidden=_reduce_hidden,
    hint="an axis on the left and not on the right is reduced; every axis written on the right, "
         "including each 1, is in the result, in the right side's order: rearrange the input to "
         "'<right side> (<reduced axes>)', then reduce that last axis",
    forbidden=FORBIDDEN_REDUCE_REPEAT,
    numpy_allowed=False,
    extra_hints={
        RuntimeError: "rearrange refused the pattern you built (its message says why): every axis of the left "
                      "must appear on the right, the reduced ones in the last group, and so must '...' when the "
                      "right side has none; a number other than 1, like the 2 of (h 2), needs a name "
                      "(name_the_numbers) and its length as a keyword",
    },
    call=_through_the_reduce_layer,
    show=_show_reduce,
)


def check_reduce(reduce, hidden: bool = False) -> None:
    """Check ``reduce(x, pattern, reduction, **axes_lengths)`` against einops.reduce, run by the Reduce layer."""
    REDUCE.check(reduce, hidden=hidden)


# ---------------------------------------------------------------- exercise 2: repeat


def _repeat_reference(x: torch.Tensor, pattern: str, lengths: dict) -> torch.Tensor:
    return einops.repeat(x, pattern, **lengths)


def _through_the_library(learner_repeat, x: torch.Tensor, pattern: str, lengths: dict):
    """``tensorcraft.repeat`` with the learner's ``repeat`` substituted in."""
    with tensorcraft.substitute(repeat=learner_repeat):
        return library_repeat(x, pattern, **lengths)


def _repeat_case(x: torch.Tensor, pattern: str, note: str = "", **lengths: int) -> Case:
    return Case((x, pattern, lengths), note or repr(pattern))


def _repeat_public() -> list[Group]:
    g = torch.Generator().manual_seed(60)
    image = _values((3, 4), torch.float32, g)
    return [
        Group("a new axis of its own", [
            _repeat_case(image, "h w -> h w c", "gray to 3 channels", c=3),
            _repeat_case(image, "h w -> b h w", "a batch of copies", b=2),
            _repeat_case(image, "h w -> h n w", "the new axis in the middle", n=2),
        ]),
        Group("a new axis inside a group: (h 2) repeats in place, (2 h) tiles", [
            _repeat_case(image, "h w -> (h 2) (w 2)", "2x upsampling: every pixel becomes 2 x 2"),
            _repeat_case(image, "h w -> (2 h) w", "the whole image twice, one above the other"),
            _repeat_case(image, "h w -> h (3 w)", "tiled 3 times side by side"),
            _repeat_case(image, "h w -> (h k) w", "each row k times", k=3),
            _repeat_case(image, "h w -> (h w c)", "every entry c times in a row, flattened", c=2),
        ]),
        Group("decomposed inputs, unit axes, ellipsis, integers", [
            _repeat_case(_values((6,), torch.float32, g), "(h w) -> h w c", "decompose, then repeat", h=2, c=2),
            _repeat_case(image, "h w -> 1 h w 1 c", "unit axes", c=2),
            _repeat_case(_values((2, 3, 2), torch.float32, g), "... c -> ... (c n)", n=2),
            _repeat_case(_values((2, 3), torch.int64, g), "a b -> b (a 2)", "int64 stays int64"),
        ]),
        Group("errors einops raises (RuntimeError)", [
            Case((image, "h w -> h w c", {}), "a new axis needs a length", raises=RuntimeError),
            Case((image, "h w -> h (w 2)", {"w": 5}), "w=5, but the input's w is 4", raises=RuntimeError),
        ]),
    ]


def _random_repeat_case(g: torch.Generator) -> Case:
    """Input axes in order, then a random output order with one or two new axes (named with a
    keyword length, or a number), often inside a group beside an input axis."""
    names = list(AXIS_NAMES[:1 + draw(g, 3)])
    sizes = [1 + draw(g, 3) for _ in names]
    lengths = {}
    new = []
    for i in range(1 + draw(g, 2)):
        if draw(g, 2):
            new.append(f"n{i}")
            lengths[f"n{i}"] = 2 + draw(g, 2)
        else:
            new.append(str(2 + draw(g, 2)))
    order = [names[i] for i in torch.randperm(len(names), generator=g).tolist()]
    right: list[str] = [*order]
    for axis in new:
        at = draw(g, len(right) + 1)
        neighbour = min(at, len(right) - 1)
        if draw(g, 3) and right and "(" not in right[neighbour]:  # in a group with a neighbour, before or after it
            right[neighbour] = f"({axis} {right[neighbour]})" if draw(g, 2) else f"({right[neighbour]} {axis})"
        else:
            right.insert(at, axis)
    dtype = (torch.float32, torch.float64, torch.int64)[draw(g, 3)]
    pattern = f"{' '.join(names)} -> {' '.join(right)}"
    return _repeat_case(_values(tuple(sizes), dtype, g), pattern, f"{pattern!r}, {_name(dtype)}", **lengths)


def _repeat_hidden(g: torch.Generator) -> list[Group]:
    image = _values((2, 3), torch.float32, g)
    return [
        Group("random patterns", [_random_repeat_case(g) for _ in range(14)]),
        Group("in place against tiled", [
            _repeat_case(image, "h w -> (h 3) (w 2)"),
            _repeat_case(image, "h w -> (3 h) (2 w)"),
            _repeat_case(image, "h w -> (h r) (t w)", r=2, t=2),
        ]),
    ]


REPEAT = Exercise(
    id="nb06_reduce_repeat_pack.repeat",
    reference=_repeat_reference,
    public=_repeat_public,
    hidden=_repeat_hidden,
    hint="an axis on the right and not on the left is new: add it with length 1, expand it to its length, "
         "then rearrange everything into the right side exactly as written (inside a group, the order of "
         "the axes is the order of the digits of a number: (h 2) repeats each row, (2 h) tiles)",
    forbidden=FORBIDDEN_REDUCE_REPEAT,
    numpy_allowed=False,
    extra_hints={
        RuntimeError: "rearrange or expand refused what you built (its message says why): the numbers on the "
                      "right need names (name_the_numbers); the first rearrange needs the lengths of the left's "
                      "axes (h=2 in '(h w) -> ...'), the last one the new axes' lengths; pass only lengths "
                      "that the pattern you rearrange with uses",
    },
    call=_through_the_library,
    show=_show_repeat,
)


def check_repeat(repeat, hidden: bool = False) -> None:
    """Check ``repeat(x, pattern, **axes_lengths)`` against einops.repeat, run through tensorcraft.repeat."""
    REPEAT.check(repeat, hidden=hidden)


# ---------------------------------------------------------------- exercise 3: a CNN head from layers


def reference_head(channels: int, hidden: int, classes: int) -> torch.nn.Sequential:
    """The architecture the notebook describes, written with einops' own layers."""
    return torch.nn.Sequential(
        einops_layers.Reduce("b c (h 2) (w 2) -> b c h w", "max"),
        torch.nn.Conv2d(channels, hidden, kernel_size=1),
        torch.nn.ReLU(),
        einops_layers.Reduce("b c h w -> b c", "mean"),
        torch.nn.Linear(hidden, classes),
    )


def _fixed_weights(model: torch.nn.Module, seed: int) -> None:
    """Set every parameter, in the order ``model.parameters()`` lists them, from a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=g) * 0.5)


def _reference_output(channels: int, hidden: int, classes: int, x: torch.Tensor) -> torch.Tensor:
    model = reference_head(channels, hidden, classes).to(x.device)
    _fixed_weights(model, seed=channels * 100 + hidden * 10 + classes)
    with torch.no_grad():
        return model(x)


class NotReduceLayersError(ValueError):
    """The model pools with something other than Reduce layers."""


def _run_the_learners_head(make_head, channels: int, hidden: int, classes: int, x: torch.Tensor):
    """Build the learner's model, check that it pools with Reduce layers, as the exercise asks, give it
    the reference's weights, and run it on ``x``."""
    with out_of_reach(reference_head, f"{__name__}.reference_head", "make_head"):  # the right answer, importable
        model = make_head(channels, hidden, classes)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"make_head must return a torch.nn.Module (an nn.Sequential), got {type(model).__name__}")
    reduces = sum(isinstance(m, (LibraryReduce, einops_layers.Reduce)) for m in model.modules())
    if reduces < 2:
        raise NotReduceLayersError(f"your model holds {reduces} Reduce layer{'s' * (reduces != 1)}; the exercise asks "
                                   "for both poolings as Reduce layers (tensorcraft's or einops')")
    theirs = [tuple(p.shape) for p in model.parameters()]
    ours = [(hidden, channels, 1, 1), (hidden,), (classes, hidden), (classes,)]  # reference_head's
    if theirs != ours:
        raise ValueError(f"your model's parameters have shapes {theirs}; the architecture has {ours} "
                         "(Conv2d weight and bias, then Linear weight and bias)")
    model = model.to(x.device)
    _fixed_weights(model, seed=channels * 100 + hidden * 10 + classes)
    with torch.no_grad():
        return model(x)


def _head_case(channels: int, hidden: int, classes: int, x: torch.Tensor) -> Case:
    return Case((channels, hidden, classes, x),
                f"make_head({channels}, {hidden}, {classes}) on input of shape {tuple(x.shape)}")


def _head_public() -> list[Group]:
    g = torch.Generator().manual_seed(66)
    return [
        Group("output shape and values, with the reference's weights", [
            _head_case(3, 8, 5, torch.randn(2, 3, 8, 8, generator=g)),
            _head_case(1, 4, 2, torch.randn(1, 1, 4, 6, generator=g)),
        ]),
        Group("a batch of one and the smallest image (2 x 2)", [
            _head_case(2, 3, 4, torch.randn(1, 2, 2, 2, generator=g)),
        ]),
    ]


def _head_hidden(g: torch.Generator) -> list[Group]:
    cases = []
    for _ in range(5):
        channels, hidden, classes, batch = (int(v) for v in torch.randint(1, 6, (4,), generator=g))
        h, w = (2 * int(v) for v in torch.randint(1, 5, (2,), generator=g))
        cases.append(_head_case(channels, hidden, classes, torch.randn(batch, channels, h, w, generator=g)))
    return [Group("random sizes", cases)]


MAKE_HEAD = Exercise(
    id="nb06_reduce_repeat_pack.make_head",
    reference=_reference_output,
    public=_head_public,
    hidden=_head_hidden,
    hint="in order: Reduce 'b c (h 2) (w 2) -> b c h w' with 'max', Conv2d(channels, hidden, 1), ReLU, "
         "Reduce 'b c h w -> b c' with 'mean', Linear(hidden, classes)",
    forbidden=("torch.nn.MaxPool2d", "torch.nn.AvgPool2d", "torch.nn.AdaptiveAvgPool2d",
               "torch.nn.AdaptiveMaxPool2d", "torch.nn.Flatten", "torch.nn.functional.max_pool2d",
               "torch.nn.functional.avg_pool2d", "torch.nn.functional.adaptive_avg_pool2d",
               "torch.nn.functional.adaptive_max_pool2d", "torch.max_pool2d"),
    # torch's pooling by any route (torch.ops.aten.max_pool2d, a reference kept in a dict)
    forbidden_ops=("max_pool2d", "_max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "adaptive_avg_pool2d",
                   "_adaptive_avg_pool2d", "adaptive_max_pool2d"),
    extra_hints={
        NotReduceLayersError: "write the 2 x 2 max pooling and the global mean as Reduce layers: "
                              "Reduce('b c (h 2) (w 2) -> b c h w', 'max') and Reduce('b c h w -> b c', 'mean'); "
                              "a module of your own that calls x.amax or x.mean is not one",
        RuntimeError: "a layer got a tensor of the wrong shape: after the global average pooling the tensor must "
                      "be (b, hidden), with no axes of length 1 left, so that Linear(hidden, classes) applies",
        ValueError: "your model must hold exactly one Conv2d(channels, hidden, kernel_size=1) and one "
                    "Linear(hidden, classes), in that order; the layers' patterns hold no parameters",
    },
    call=_run_the_learners_head,
)


def check_make_head(make_head, hidden: bool = False) -> None:
    """Check ``make_head(channels, hidden, classes)``: the model's output equals the reference architecture's."""
    MAKE_HEAD.check(make_head, hidden=hidden)


EXERCISES = {exercise.name: exercise for exercise in (REDUCE, REPEAT, MAKE_HEAD)}
