"""Known-wrong answers to notebook 00's exercises, each with the hint its author needs."""
import numpy as np
import torch

from ..checks.exercise import IN_PLACE_HINT
from . import mutant


@mutant("nb00_welcome.square", hint="x * 2 doubles every entry; the square multiplies each entry by itself")
def square_doubled(x):
    return x * 2


@mutant("nb00_welcome.square", hint="the square of a negative number is positive: x * x, not x * abs(x)")
def square_keeps_sign(x):
    return x * x.abs()


@mutant("nb00_welcome.outer", hint="your result is the transpose of a ⊗ b: rows must follow a "
        "(the first argument) — use a[:, None] * b[None, :], not b[:, None] * a[None, :]")
def outer_transposed(a, b):
    return b[:, None] * a[None, :]


@mutant("nb00_welcome.outer", hint="torch.empty(n, m) is created on the CPU whatever the inputs' device: on a "
        "GPU the result cannot be filled from a and b; create new tensors with device=a.device (and dtype=a.dtype), "
        "or let broadcasting make the result: a[:, None] * b[None, :]")
def outer_filled_on_the_cpu(a, b):
    result = torch.empty(len(a), len(b), dtype=a.dtype)
    result[:] = a[:, None] * b[None, :]
    return result


@mutant("nb00_welcome.outer", hint="you added: the outer product multiplies, result[i, j] = a[i] * b[j]")
def outer_sum(a, b):
    return a[:, None] + b[None, :]


@mutant("nb00_welcome.outer", hint="a * b multiplies element by element (and needs equal lengths); "
        "the outer product needs a new axis on each side: a[:, None] * b[None, :]")
def outer_elementwise(a, b):
    return a * b


@mutant("nb00_welcome.outer", hint="the result must keep the inputs' dtype: "
        "do not convert with .float() (int64 stays int64, float64 stays float64)")
def outer_as_float32(a, b):
    return a[:, None].float() * b[None, :].float()


@mutant("nb00_welcome.outer", hint="the result has one row per entry of a and one column per entry of b: "
        "shape (len(a), len(b)), not a flat vector")
def outer_flattened(a, b):
    return (a[:, None] * b[None, :]).reshape(-1)


@mutant("nb00_welcome.outer", hint="numpy is not allowed in this exercise: stay with torch tensors "
        "and broadcast, a[:, None] * b[None, :]")
def outer_through_numpy(a, b):
    return torch.from_numpy(np.outer(a.numpy(), b.numpy()))


@mutant("nb00_welcome.outer", hint="torch.ops.aten.outer is torch.outer under another name: the check watches "
        "the operation, not the name; broadcast instead, a[:, None] * b[None, :]")
def outer_by_operator_name(a, b):
    return torch.ops.aten.outer(a, b)


@mutant("nb00_welcome.normalize_rows", hint="you divided by the column sums: dim=0 sums down the "
        "columns; a row's sum runs along dim=1")
def normalize_columns(x):
    return x / x.sum(dim=0, keepdim=True)


@mutant("nb00_welcome.normalize_rows", hint="without keepdim=True the row sums have shape (rows,), "
        "which broadcasts along the last axis, so column j is divided by the sum of row j; "
        "use x.sum(dim=1, keepdim=True)")
def normalize_without_keepdim(x):
    return x / x.sum(dim=1)


@mutant("nb00_welcome.normalize_rows", hint="you divided by the sum of the whole matrix; "
        "each row needs its own sum: x.sum(dim=1, keepdim=True)")
def normalize_by_total(x):
    return x / x.sum()


@mutant("nb00_welcome.normalize_rows", hint="you divided by each row's largest entry; "
        "after normalisation every row must sum to 1, so divide by the row's sum")
def normalize_by_max(x):
    return x / x.max(dim=1, keepdim=True).values


@mutant("nb00_welcome.normalize_rows", hint=IN_PLACE_HINT)  # the check sees the edit before the result
def normalize_in_place(x):
    x /= x.sum(dim=1, keepdim=True)
    return x
