"""Parse one side of an einops pattern, such as ``"b (h w) ... 1"``, into an `Expression`.

The grammar, exactly as einops 0.8.2 accepts it:

- words are separated by spaces; ``(`` and ``)`` group words into one *composed* dimension,
  one level deep: ``(h w)`` is a single dimension of length ``h * w``;
- a word is an axis name (a Python identifier that neither starts nor ends with ``_``),
  a number (an *anonymous* axis of that length; every occurrence is its own axis),
  or the ellipsis ``...`` (any number of dimensions, at most one per side);
- ``1`` and ``()`` both stand for a dimension of length 1; inside parentheses ``1`` changes nothing;
- ``_`` is a valid name only where the caller allows it (``parse_shape``, einsum), and may repeat there.

Anything else is an `EinopsError` that says which word or character is wrong.
"""
from __future__ import annotations

import keyword
import warnings
from dataclasses import dataclass
from typing import Union

from tensorcraft.einops.errors import EinopsError
from tensorcraft.stages import swappable

ELLIPSIS = "..."


class AnonymousAxis:
    """A numeric axis such as the ``2`` in ``(h 2)``.

    Compared by identity: two anonymous axes are never the same axis, even with equal lengths, so
    that ``"(a 2) (b 2) -> a b"`` reduces two different axes. A plain class, not a dataclass with
    ``eq=False``: torch.compile (Dynamo, torch 2.13) hashes frozen dataclasses by their fields, so
    that the two ``2`` axes of ``"(h 2) (w 2)"`` became one dict key inside a compiled model.
    """

    __slots__ = ("length",)

    def __init__(self, length: int) -> None:
        self.length = length

    def __repr__(self) -> str:
        return str(self.length)


Axis = Union[str, AnonymousAxis]
# One dimension as written: a tuple of the axes composed into it (``("h", "w")`` for ``(h w)``,
# ``("b",)`` for ``b``, ``()`` for ``1`` or ``()``), or the bare string ELLIPSIS for ``...``.
# Inside a group the ellipsis is an element of the tuple: ``(h ...)`` is ``("h", ELLIPSIS)``.
Dimension = Union[tuple, str]


@dataclass(frozen=True)
class Expression:
    """One side of a pattern, parsed. ``dims`` has one entry per dimension the text writes."""

    text: str
    dims: tuple[Dimension, ...]

    @property
    def axes(self) -> list[Axis]:
        """Every axis, in order of appearance, the ellipsis included as ELLIPSIS."""
        return [axis for dim in self.dims for axis in ((dim,) if dim == ELLIPSIS else dim)]

    @property
    def identifiers(self) -> set:
        """The axes as a set: names, ELLIPSIS, and each anonymous axis (distinct objects)."""
        return set(self.axes)

    @property
    def has_ellipsis(self) -> bool:
        return ELLIPSIS in self.axes

    @property
    def ellipsis_in_group(self) -> bool:
        """True for ``(h ...)``: the ellipsis dimensions are merged into one."""
        return any(dim != ELLIPSIS and ELLIPSIS in dim for dim in self.dims)

    @property
    def anonymous_axes(self) -> list[AnonymousAxis]:
        return [axis for axis in self.axes if isinstance(axis, AnonymousAxis)]

    @property
    def has_composed_dims(self) -> bool:
        """True when some dimension is made of two or more axes (a ``1`` inside a group does not count)."""
        return any(dim != ELLIPSIS and len(dim) > 1 for dim in self.dims)


def axis_name_problem(name: str, *, allow_underscore: bool = False) -> str | None:
    """Why ``name`` is not a valid axis name, or None when it is."""
    if not name.isidentifier():
        return f"'{name}' is not a valid Python identifier"
    if name.startswith("_") or name.endswith("_"):
        if name == "_" and allow_underscore:
            return None
        return f"axis name '{name}' starts or ends with an underscore, which einops reserves"
    return None


def _warn_if_discouraged(name: str) -> None:
    """einops accepts these names but warns about them; so do we (once per pattern: parsing is cached)."""
    if keyword.iskeyword(name):
        warnings.warn(f"It is discouraged to use axes names that are keywords: {name}", RuntimeWarning, stacklevel=5)
    if name == "axis":
        warnings.warn("It is discouraged to use 'axis' as an axis name and will raise an error in future",
                      FutureWarning, stacklevel=5)


@swappable
def parse_expression(text: str, *, allow_underscore: bool = False,
                     allow_duplicates: bool = False) -> Expression:
    """Parse one side of a pattern. Raises EinopsError naming the offending word or character.

    A stage (``tensorcraft.substitute(parse_expression=f)``): every einops operation parses here.
    """
    dims: list[Dimension] = []
    group: list | None = None  # the axes of an open "(", if any
    seen: set[str] = set()

    def fail(reason: str) -> EinopsError:
        return EinopsError(f'{reason} in "{text}"')

    def add(word: str) -> None:
        if word == ELLIPSIS:
            if ELLIPSIS in seen:
                raise fail("more than one ellipsis '...'")
            axis: Axis = ELLIPSIS
        elif "." in word:
            raise fail(f"'{word}': a dot may only appear as part of an ellipsis '...' standing alone")
        elif word.isdecimal():
            length = int(word)
            if length == 1:  # a unit dimension; inside a group it changes nothing
                if group is None:
                    dims.append(())
                return
            if length == 0:
                raise fail("anonymous axis '0': a numeric axis must have a positive length")
            axis = AnonymousAxis(length)
        else:
            problem = axis_name_problem(word, allow_underscore=allow_underscore)
            if problem:
                raise fail(problem)
            _warn_if_discouraged(word)
            repeats_allowed = allow_duplicates or (allow_underscore and word == "_")
            if word in seen and not repeats_allowed:
                raise fail(f"axis '{word}' appears twice")
            axis = word
        if isinstance(axis, str):
            seen.add(axis)
        if group is not None:
            group.append(axis)
        else:
            dims.append(axis if axis == ELLIPSIS else (axis,))

    word = ""
    for char in text:
        if char in "() ":
            if word:
                add(word)
            word = ""
            if char == "(":
                if group is not None:
                    raise fail("'(' inside '(...)': axis composition is one level deep")
                group = []
            elif char == ")":
                if group is None:
                    raise fail("')' without a matching '('")
                dims.append(tuple(group))
                group = None
        elif char.isalnum() or char in "_.":
            word += char
        else:
            raise fail(f"unexpected character {char!r} (allowed: letters, digits, '_', '...', '(', ')', ' ')")
    if word:
        add(word)
    if group is not None:
        raise fail("'(' is never closed")
    return Expression(text=text, dims=tuple(dims))


def split_pattern(pattern: str) -> tuple[str, str]:
    """``"a b -> b a"`` -> ``("a b ", " b a")``; exactly one arrow is required."""
    if not isinstance(pattern, str):
        raise EinopsError(f"a pattern is a string like 'a b -> b a', not {type(pattern).__name__}")
    sides = pattern.split("->")
    if len(sides) != 2:
        raise EinopsError(f'pattern "{pattern}" must contain exactly one "->", found {len(sides) - 1}')
    return sides[0], sides[1]
