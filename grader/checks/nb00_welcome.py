"""Checks for notebook 00 (welcome): two warm-up exercises on broadcasting and reductions.

Ground truth comes from torch itself (``torch.outer``, ``torch.nn.functional.normalize``);
the learner's code runs with those functions replaced by tripwires, and with the same operations
watched under any name (``grader.checks.ops``). Both exercises are about torch: numpy is not allowed,
as the notebook says.
"""
from __future__ import annotations

import torch

from .exercise import Case, Exercise, Group, on_meta

# ---------------------------------------------------------------- demo: square (not graded)


def _square_public() -> list[Group]:
    return [
        Group("small vectors", [Case((torch.tensor([1.0, -2.0, 3.0]),), "1, -2, 3"),
                                Case((torch.tensor([0.5]),), "one entry")]),
        Group("a matrix", [Case((torch.arange(6.0).reshape(2, 3),), "2 x 3")]),
    ]


def _square_hidden(g: torch.Generator) -> list[Group]:
    cases = []
    for _ in range(5):
        shape = torch.randint(1, 6, (2,), generator=g).tolist()
        cases.append(Case((torch.randn(*shape, generator=g),), f"shape {tuple(shape)}"))
    return [Group("random matrices", cases)]


SQUARE = Exercise(
    id="nb00_welcome.square",
    reference=torch.square,
    public=_square_public,
    hidden=_square_hidden,
    hint="every entry must be multiplied by itself: x * x",
    forbidden=("torch.square", "torch.Tensor.square"),
)


def check_square(square, hidden: bool = False) -> None:
    """The demonstration check: ``square(x)`` is ``x`` times itself, entry by entry."""
    SQUARE.check(square, hidden=hidden)


# ---------------------------------------------------------------- exercise 1: outer product


def _vector(n: int, dtype: torch.dtype, generator: torch.Generator | None = None) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(n, generator=generator).to(dtype)
    return torch.randint(-9, 10, (n,), generator=generator).to(dtype)


def _outer_public() -> list[Group]:
    g = torch.Generator().manual_seed(0)
    return [
        Group("float32 vectors of different lengths", [
            Case((torch.tensor([1.0, 2.0, 3.0]), torch.tensor([10.0, 20.0, 30.0, 40.0])), "lengths 3 and 4"),
            Case((_vector(5, torch.float32, g), _vector(2, torch.float32, g)), "lengths 5 and 2"),
        ]),
        Group("vectors of length 1", [
            Case((torch.tensor([2.0]), torch.tensor([1.0, -1.0, 0.5])), "a has length 1"),
            Case((torch.tensor([1.0, -1.0]), torch.tensor([3.0])), "b has length 1"),
        ]),
        Group("the dtype is kept (int64, float64)", [
            Case((torch.tensor([1, 2, 3]), torch.tensor([4, 5])), "int64"),
            Case((_vector(3, torch.float64, g), _vector(4, torch.float64, g)), "float64"),
        ]),
    ]


def _outer_hidden(g: torch.Generator) -> list[Group]:
    def lengths() -> tuple[int, int]:
        n, m = torch.randint(1, 10, (2,), generator=g).tolist()
        return n, m
    groups = []
    for dtype in (torch.float32, torch.float64, torch.int64):
        cases = []
        for _ in range(4):
            n, m = lengths()
            cases.append(Case((_vector(n, dtype, g), _vector(m, dtype, g)), f"lengths {n} and {m}"))
        groups.append(Group(f"random {str(dtype).removeprefix('torch.')} vectors", cases))
    return groups


OUTER = Exercise(
    id="nb00_welcome.outer",
    reference=torch.outer,
    public=_outer_public,
    hidden=_outer_hidden,
    hint="result[i, j] must be a[i] * b[j]: give a a new last axis and b a new first axis, then multiply",
    forbidden=("torch.einsum", "torch.outer", "torch.ger", "torch.Tensor.outer", "torch.Tensor.ger"),
    # the same operations by any other route (torch.ops.aten.outer, a reference kept in a dict...),
    # and the other tools that compute an outer product in one call; numpy is not allowed
    forbidden_ops=("outer", "ger", "einsum", "tensordot", "kron"),
    numpy_allowed=False,
    on_meta=on_meta(_outer_public),
    extra_hints={RuntimeError: "the shapes did not broadcast to (n, m): a[:, None] has shape (n, 1) and "
                               "b[None, :] has shape (1, m), and their product has shape (n, m); an in-place "
                               "write (x *= ..., out[...] = ...) cannot grow a tensor to that shape"},
)


def check_outer(outer, hidden: bool = False) -> None:
    """Check ``outer(a, b) -> a[i] * b[j]`` on CPU (and CUDA where present)."""
    OUTER.check(outer, hidden=hidden)


# ---------------------------------------------------------------- exercise 2: row normalisation


def _positive(rows: int, cols: int, dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    return (torch.rand(rows, cols, generator=g) + 0.1).to(dtype)


def _normalize_reference(x: torch.Tensor) -> torch.Tensor:
    """Each row divided by its sum: for positive entries that is the row's L1 norm."""
    return torch.nn.functional.normalize(x, p=1, dim=1)


def _normalize_public() -> list[Group]:
    g = torch.Generator().manual_seed(1)
    return [
        Group("a small matrix", [
            Case((torch.tensor([[1.0, 3.0], [2.0, 2.0], [5.0, 15.0]]),), "3 x 2, row sums 4, 4, 20"),
        ]),
        Group("square matrices", [
            Case((torch.tensor([[1.0, 2.0], [3.0, 5.0]]),), "2 x 2, row sums 3 and 8"),
            Case((_positive(4, 4, torch.float32, g),), "4 x 4"),
        ]),
        Group("one row, one column, and a float64 matrix", [
            Case((_positive(1, 5, torch.float32, g),), "1 x 5"),
            Case((_positive(5, 1, torch.float32, g),), "5 x 1"),
            Case((_positive(3, 4, torch.float64, g),), "float64"),
        ]),
    ]


def _normalize_hidden(g: torch.Generator) -> list[Group]:
    groups = []
    for dtype in (torch.float32, torch.float64):
        cases = []
        for _ in range(5):
            rows, cols = torch.randint(1, 8, (2,), generator=g).tolist()
            cases.append(Case((_positive(rows, cols, dtype, g),), f"{rows} x {cols}"))
        groups.append(Group(f"random positive {str(dtype).removeprefix('torch.')} matrices", cases))
    return groups


NORMALIZE_ROWS = Exercise(
    id="nb00_welcome.normalize_rows",
    reference=_normalize_reference,
    public=_normalize_public,
    hidden=_normalize_hidden,
    hint="divide every entry by the sum of its own row: x.sum(dim=1, keepdim=True) has shape (rows, 1)",
    forbidden=("torch.nn.functional.normalize",),
    forbidden_ops=("normalize",),
    numpy_allowed=False,
    on_meta=on_meta(_normalize_public),
    extra_hints={RuntimeError: "the row sums must broadcast against x: keep the summed axis "
                               "(keepdim=True) so that they have shape (rows, 1)"},
)


def check_normalize_rows(normalize_rows, hidden: bool = False) -> None:
    """Check ``normalize_rows(x)``: every row of a positive matrix divided by its sum."""
    NORMALIZE_ROWS.check(normalize_rows, hidden=hidden)


EXERCISES = {exercise.name: exercise for exercise in (SQUARE, OUTER, NORMALIZE_ROWS)}
