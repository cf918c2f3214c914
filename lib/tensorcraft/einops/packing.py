"""pack and unpack: concatenate tensors of different ranks along the axes a ``*`` stands for.

``pack([a, b], "i j * k")`` flattens, in each tensor, the dimensions between the first two and the
last into one, concatenates along it, and returns the packed tensor with each tensor's flattened
shape ("packed shapes"), which ``unpack`` needs to cut it back.
"""
from __future__ import annotations

from typing import Sequence, TypeVar

from tensorcraft.einops.backends import operations_for
from tensorcraft.einops.errors import EinopsError
from tensorcraft.einops.pattern import axis_name_problem
from tensorcraft.plan_cache import cache_bypassed, plan_cache

Tensor = TypeVar("Tensor")  # a numpy array or a torch tensor


@plan_cache(maxsize=128)
def star_layout(pattern: str, opname: str) -> tuple[int, int]:
    """``"i j * k"`` -> (2, 1): how many named axes stand before and after the ``*``."""
    where = f'{opname}(..., "{pattern}")'
    if not isinstance(pattern, str):
        raise EinopsError(f"{where}: a pattern is a string like 'i j * k'")
    words = pattern.split()
    if len(words) != len(set(words)):
        raise EinopsError(f"{where}: an axis appears twice")
    if "*" not in words:
        raise EinopsError(f"{where}: the pattern needs one '*' for the packed axes, e.g. 'b * c'")
    for word in words:
        if word != "*":
            problem = axis_name_problem(word)
            if problem:
                raise EinopsError(f"{where}: {problem}")
    n_before = words.index("*")
    return n_before, len(words) - n_before - 1


def pack(tensors: Sequence[Tensor], pattern: str) -> tuple[Tensor, list[tuple[int, ...]]]:
    """Pack tensors into one along ``*``; returns ``(packed, packed_shapes)``."""
    fresh = cache_bypassed()  # one check for both caches: this is the hot path of every pack
    n_before, n_after = (star_layout.uncached if fresh else star_layout.cached)(pattern, "pack")
    if not isinstance(tensors, Sequence) and not hasattr(tensors, "shape"):  # einops also iterates a tensor
        raise EinopsError(f'pack(..., "{pattern}"): expected a list of tensors, got {type(tensors).__name__}')
    if len(tensors) == 0:
        raise EinopsError(f'pack(..., "{pattern}"): there are no tensors to pack')
    operations = (operations_for.uncached if fresh else operations_for.cached)(type(tensors[0]))
    flattened, packed_shapes = [], []
    for i, tensor in enumerate(tensors):
        shape = tensor.shape
        if len(shape) < n_before + n_after:
            raise EinopsError(f'pack(..., "{pattern}"): tensor #{i} has shape {tuple(shape)}, but the '
                              f"pattern needs at least {n_before + n_after} dimensions")
        end = len(shape) - n_after
        packed_shapes.append(shape[n_before:end])
        try:  # -1 as einops: a tensor with no elements cannot be flattened this way
            flattened.append(operations["reshape"](tensor, (*shape[:n_before], -1, *shape[end:])))
        except Exception as error:
            raise EinopsError(f'pack(..., "{pattern}"): tensor #{i} of shape {tuple(shape)} '
                              f"cannot be flattened: {error}") from None
    try:
        return operations["concat"](flattened, n_before), packed_shapes
    except Exception as error:
        shapes = [tuple(t.shape) for t in tensors]
        raise EinopsError(f'pack(..., "{pattern}"): tensors of shapes {shapes} differ outside "*": '
                          f"{error}") from None


def _product(numbers) -> int:
    result = 1
    for number in numbers:
        result *= number
    return result


def unpack(tensor: Tensor, packed_shapes: Sequence[Sequence[int]], pattern: str) -> list[Tensor]:
    """Cut ``tensor`` along ``*`` into pieces with the given packed shapes (one may hold -1)."""
    fresh = cache_bypassed()
    n_before, n_after = (star_layout.uncached if fresh else star_layout.cached)(pattern, "unpack")
    shape = getattr(tensor, "shape", None)
    if shape is None:
        raise EinopsError(f'unpack(x, ..., "{pattern}"): expected a numpy array or a torch tensor, '
                          f"got {type(tensor).__name__}")
    written = [tuple(s) if hasattr(s, "__iter__") else s for s in packed_shapes]
    where = f'unpack(x, {written}, "{pattern}") on input of shape {tuple(shape)}'
    if len(shape) != n_before + 1 + n_after:
        raise EinopsError(f"{where}: the pattern needs exactly {n_before + 1 + n_after} dimensions")
    lengths = [-1 if -1 in packed else _product(packed) for packed in packed_shapes]
    if lengths.count(-1) > 1:
        raise EinopsError(f"{where}: more than one packed shape holds -1; at most one can be inferred")
    total, known = shape[n_before], [length for length in lengths if length != -1]
    if sum(known) > total or (len(known) == len(lengths) and sum(known) != total):
        raise EinopsError(f"{where}: the packed shapes hold {' + '.join(map(str, known))} = {sum(known)} "
                          f"positions along '*', but that axis has length {total}")

    # Cut positions along the packed axis; the piece with -1 (if any) takes what the others leave.
    cuts = [0] * len(lengths) + [shape[n_before]]
    unknown = lengths.index(-1) if -1 in lengths else len(lengths) - 1
    for i in range(unknown):
        cuts[i + 1] = cuts[i] + lengths[i]
    for i in range(len(lengths) - 1, unknown, -1):
        cuts[i] = cuts[i + 1] - lengths[i]

    reshape = (operations_for.uncached if fresh else operations_for.cached)(type(tensor))["reshape"]
    leading = (slice(None),) * n_before
    try:
        return [reshape(tensor[(*leading, slice(cuts[i], cuts[i + 1]))],
                        (*shape[:n_before], *packed, *shape[n_before + 1:]))
                for i, packed in enumerate(packed_shapes)]
    except Exception as error:
        raise EinopsError(f"{where}: the packed axis of length {shape[n_before]} does not split "
                          f"into these shapes: {error}") from None
