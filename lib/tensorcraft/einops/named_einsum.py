"""einops-style einsum with named axes: ``einsum(x, y, "batch i, batch i j -> batch j")``.

`einsum_equation` translates the names into letters (``"ab,abc->ac"``), in order of first
appearance, and `einsum` runs the letter equation on ``tensorcraft.einsum``.
"""
from __future__ import annotations

import string

from tensorcraft.einops.errors import EinopsError, EinopsNotSupportedError
from tensorcraft.einops.pattern import ELLIPSIS, AnonymousAxis, parse_expression
from tensorcraft.plan_cache import plan_cache

LETTERS = string.ascii_letters  # a..z then A..Z: at most 52 distinct axes


def _letters_of(expression, letter_of: dict, pattern: str, *, new_names_allowed: bool) -> str:
    letters = ""
    for dim in expression.dims:
        if dim == ELLIPSIS:
            letters += "..."
            continue
        if len(dim) != 1 or ELLIPSIS in dim or isinstance(dim[0], AnonymousAxis):
            written = "(" + " ".join(map(str, dim)) + ")" if len(dim) != 1 else str(dim[0])
            raise EinopsNotSupportedError(f'einsum "{pattern}": {written} is not supported; einsum takes one '
                                          "named axis per dimension (rearrange first to compose or split axes)")
        name = dim[0]
        if name not in letter_of:
            if not new_names_allowed:
                raise EinopsError(f'einsum "{pattern}": output axis {name} is on no input')
            if len(letter_of) == len(LETTERS):
                raise EinopsError(f'einsum "{pattern}": more than {len(LETTERS)} distinct axes')
            letter_of[name] = LETTERS[len(letter_of)]
        letters += letter_of[name]
    return letters


@plan_cache(maxsize=256)
def einsum_equation(pattern: str, n_operands: int | None = None) -> str:
    """``"batch i, batch i j -> batch j"`` -> ``"ab,abc->ac"``. Checks the operand count when given."""
    if not isinstance(pattern, str):
        raise EinopsError(f"an einsum pattern is a string, not {type(pattern).__name__}")
    if "->" not in pattern:
        raise EinopsError(f'einsum "{pattern}": the pattern must contain "->" (the output is never implicit)')
    sides = pattern.split("->")
    if len(sides) != 2:
        raise EinopsError(f'einsum "{pattern}": exactly one "->" is allowed')
    inputs = sides[0].split(",")
    if n_operands is not None and len(inputs) != n_operands:
        raise EinopsError(f'einsum "{pattern}": the pattern describes {len(inputs)} inputs, '
                          f"but {n_operands} tensors were given")
    try:
        lefts = [parse_expression(text, allow_underscore=True, allow_duplicates=True) for text in inputs]
        right = parse_expression(sides[1], allow_underscore=True)
    except EinopsError as error:
        raise EinopsError(f'einsum "{pattern}": {error}') from None
    letter_of: dict[str, str] = {}
    left_letters = [_letters_of(left, letter_of, pattern, new_names_allowed=True) for left in lefts]
    right_letters = _letters_of(right, letter_of, pattern, new_names_allowed=False)
    return ",".join(left_letters) + "->" + right_letters


def einsum(*tensors_and_pattern):
    """``einsum(x, y, "b i, b i j -> b j")``: tensors first, the named-axis pattern last."""
    if len(tensors_and_pattern) < 2:
        raise EinopsError("einsum takes the tensors (at least one) followed by the pattern")
    *tensors, pattern = tensors_and_pattern
    if not isinstance(pattern, str):
        raise EinopsError("einsum's last argument must be the pattern string, after all the tensors")
    equation = einsum_equation(pattern, len(tensors))
    from tensorcraft.einstein.api import einsum as letter_einsum  # lazy: the einsum half of the library

    return letter_einsum(equation, *tensors)
