"""Parse an einsum equation, together with the operands' shapes, into an `Equation` value.

The rules are torch.einsum's (checked by experiment against torch 2.13):

* a subscript is one letter in ``[a-zA-Z]``; operands are separated by ``,``; the output
  follows ``->``, which must be written as two adjacent characters (``'- >'`` is rejected);
* spaces may stand anywhere else, and are ignored; other whitespace (tabs, newlines) is not;
* ``...`` (three adjacent dots, at most once per operand and once in the output) stands for
  the dimensions not named by letters; those dimensions broadcast, aligned on the right;
* a letter repeated inside one operand takes that operand's diagonal, so the sizes must be equal;
* the same letter in different operands broadcasts: equal sizes, or size 1;
* an explicit output lists each letter at most once, only letters that appear in an input,
  and may leave out ``...`` (the ellipsis dimensions are then summed, as torch does;
  numpy rejects that case).

Every violation raises `EinsumError`, which is both a ValueError (what numpy raises) and a
RuntimeError (what torch raises), so code written against either keeps working.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tensorcraft.einstein.infer import ELLIPSIS_PREFIX, infer_output, is_ellipsis_label

ELLIPSIS = "..."
ARROW = "->"
LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


class EinsumError(ValueError, RuntimeError):
    """An einsum equation that does not fit its operands (or is malformed)."""


@dataclass(frozen=True)
class Term:
    """The subscripts of one operand (or of the output) as written: letters, and where the ellipsis sits."""

    letters: str          # the letters, in order, spaces and ellipsis removed, e.g. "ij" for "i...j"
    ellipsis_at: int | None  # how many letters precede the ellipsis; None when there is none

    def __str__(self) -> str:
        if self.ellipsis_at is None:
            return self.letters
        return self.letters[: self.ellipsis_at] + ELLIPSIS + self.letters[self.ellipsis_at:]


@dataclass(frozen=True)
class Equation:
    """An equation bound to its operands' shapes: every dimension gets a label, every label a size.

    Ellipsis dimensions get labels of their own ("…0", "…1", ... numbered from the left of the
    broadcast ellipsis), so that later stages treat them exactly like letters.
    """

    text: str                                   # the equation as given
    inputs: tuple[Term, ...]                    # per operand, as written
    output: Term                                # as written, or as inferred when implicit
    implicit: bool                              # True when the equation has no "->"
    shapes: tuple[tuple[int, ...], ...]         # the operands' shapes
    ellipsis_ndim: int                          # number of dimensions the (broadcast) ellipsis covers
    input_labels: tuple[tuple[str, ...], ...]   # one label per dimension of each operand
    output_labels: tuple[str, ...]              # one label per dimension of the result
    sizes: dict[str, int]                       # label -> size after broadcasting

    @property
    def output_shape(self) -> tuple[int, ...]:
        return tuple(self.sizes[label] for label in self.output_labels)

    @property
    def normalized(self) -> str:
        """The explicit form, spaces removed: e.g. 'ij,jk' becomes 'ij,jk->ik'."""
        return ",".join(map(str, self.inputs)) + ARROW + str(self.output)

    def __str__(self) -> str:
        def row(name: str, labels: Sequence[str], shape: Sequence[int]) -> str:
            return f"  {name:<10} {' '.join(labels) or '(scalar)':<24} shape {tuple(shape)}"

        kind = "implicit output" if self.implicit else "explicit output"
        lines = [f"Equation {self.text!r} -> {self.normalized!r} ({kind})"]
        for n, (labels, shape) in enumerate(zip(self.input_labels, self.shapes)):
            lines.append(row(f"operand {n}", labels, shape))
        lines.append(row("output", self.output_labels, self.output_shape))
        lines.append("  sizes      " + " ".join(f"{k}={v}" for k, v in self.sizes.items()))
        return "\n".join(lines)


# --------------------------------------------------------------------------- the string


def _parse_term(text: str, start: int, where: str, equation: str) -> Term:
    """Read one operand's (or the output's) subscripts; `start` is its offset in the equation, for messages."""
    letters: list[str] = []
    ellipsis_at: int | None = None
    i = 0
    while i < len(text):
        char = text[i]
        if char == " ":
            i += 1
        elif char == ".":
            if text[i : i + 3] != ELLIPSIS:
                raise EinsumError(
                    f"einsum(): found '.' at index {start + i} of {equation!r} ({where}) that is not part "
                    f"of an ellipsis; write '...' as three adjacent dots"
                )
            if ellipsis_at is not None:
                raise EinsumError(
                    f"einsum(): {where} has a second ellipsis at index {start + i} of {equation!r}; "
                    f"at most one '...' per operand and one in the output"
                )
            ellipsis_at = len(letters)
            i += 3
        elif char in LETTERS:
            letters.append(char)
            i += 1
        else:
            raise EinsumError(
                f"einsum(): invalid subscript {char!r} at index {start + i} of {equation!r} ({where}); "
                f"subscripts must be letters in [a-zA-Z], separated by ',' with the output after '->'"
            )
    return Term("".join(letters), ellipsis_at)


def parse_terms(equation: str) -> tuple[tuple[Term, ...], Term | None]:
    """Split an equation string into its input terms and its output term (None when implicit)."""
    if not isinstance(equation, str):
        raise EinsumError(f"einsum(): the equation must be a string, got {type(equation).__name__}")
    lhs, arrow, rhs = equation.partition(ARROW)
    inputs = []
    offset = 0
    for n, text in enumerate(lhs.split(",")):
        inputs.append(_parse_term(text, offset, f"operand {n}", equation))
        offset += len(text) + 1
    output = _parse_term(rhs, len(lhs) + 2, "output", equation) if arrow else None
    return tuple(inputs), output


# --------------------------------------------------------------------------- binding to shapes


def _broadcast(sizes: dict[str, int], seen_in: dict[str, int], label: str, size: int, operand: int,
               what: str) -> None:
    """Record `size` for `label`, broadcasting against earlier operands (equal sizes, or 1)."""
    seen = sizes.get(label)
    if seen is None or seen == 1:
        sizes[label] = size
        seen_in[label] = operand
        return
    if size in (seen, 1):
        return
    raise EinsumError(
        f"einsum(): {what} has size {size} in operand {operand}, which does not broadcast with its "
        f"size {seen} in operand {seen_in[label]}; sizes of one subscript must be equal, or 1"
    )


def bind(equation: str, terms: tuple[Term, ...], output: Term | None,
         shapes: Sequence[Sequence[int]]) -> Equation:
    """Check the terms against the operands' shapes and label every dimension."""
    try:
        shapes = tuple(tuple(int(d) for d in shape) for shape in shapes)
    except (TypeError, ValueError):
        raise EinsumError(f"einsum(): shapes must be sequences of integers, got {list(shapes)!r}") from None
    if len(shapes) == 0:
        raise EinsumError("einsum(): no operands were given; pass at least one tensor after the equation")
    if len(terms) != len(shapes):
        raise EinsumError(
            f"einsum(): the equation {equation!r} has subscripts for {len(terms)} operand(s), "
            f"but {len(shapes)} operand(s) were given"
        )
    # how many dimensions each operand's ellipsis covers
    ellipsis_ndims = []
    for n, (term, shape) in enumerate(zip(terms, shapes)):
        named = len(term.letters)
        if term.ellipsis_at is None and named != len(shape):
            raise EinsumError(
                f"einsum(): operand {n} has subscripts {str(term)!r} ({named} dimension(s)) but shape "
                f"{shape} ({len(shape)} dimension(s)); give one subscript per dimension, or use '...'"
            )
        if term.ellipsis_at is not None and named > len(shape):
            raise EinsumError(
                f"einsum(): operand {n} has subscripts {str(term)!r} naming {named} dimension(s) besides "
                f"'...', but shape {shape} has only {len(shape)}"
            )
        ellipsis_ndims.append(len(shape) - named if term.ellipsis_at is not None else 0)
    ellipsis_ndim = max(ellipsis_ndims)

    sizes: dict[str, int] = {}
    seen_in: dict[str, int] = {}  # label -> the operand its size comes from, for messages
    input_labels = []
    for n, (term, shape) in enumerate(zip(terms, shapes)):
        covered = ellipsis_ndims[n]
        labels: list[str] = list(term.letters)
        if term.ellipsis_at is not None:
            dots = [f"{ELLIPSIS_PREFIX}{ellipsis_ndim - covered + k}" for k in range(covered)]
            labels[term.ellipsis_at : term.ellipsis_at] = dots
        own: dict[str, int] = {}  # sizes inside this operand: a repeated letter must match exactly
        for label, size in zip(labels, shape):
            if label in own and own[label] != size:
                raise EinsumError(
                    f"einsum(): subscript {label!r} is repeated in operand {n} with sizes {own[label]} and "
                    f"{size}; a repeated subscript takes a diagonal, so its sizes must be equal"
                )
            own[label] = size
        for label, size in own.items():
            what = (f"ellipsis dimension {label[len(ELLIPSIS_PREFIX):]}" if is_ellipsis_label(label)
                    else f"subscript {label!r}")
            _broadcast(sizes, seen_in, label, size, n, what)
        input_labels.append(tuple(labels))

    ellipsis_labels = tuple(f"{ELLIPSIS_PREFIX}{k}" for k in range(ellipsis_ndim))
    implicit = output is None
    if implicit:
        output = _inferred_output(equation, terms)
    output_labels = _output_labels(equation, output, input_labels, ellipsis_labels, implicit)
    # a label that broadcasts everywhere keeps size 1; every label has a size by now
    return Equation(
        text=equation, inputs=terms, output=output, implicit=implicit, shapes=shapes,
        ellipsis_ndim=ellipsis_ndim, input_labels=tuple(input_labels),
        output_labels=tuple(output_labels), sizes=sizes,
    )


def _inferred_output(equation: str, terms: tuple[Term, ...]) -> Term:
    """Ask the implicit-output stage for the output of an equation without '->', and read its answer
    as if it had been written after '->' (an answer that is no valid output raises EinsumError)."""
    inputs = ",".join(map(str, terms))
    answer = infer_output(inputs)  # the stage: a substitute, when one is in force
    if not isinstance(answer, str):
        raise EinsumError(f"einsum(): the implicit-output stage infer_output({inputs!r}) returned "
                          f"{answer!r}, not a string of output subscripts such as 'ik' or '...ik'")
    try:
        return _parse_term(answer, 0, "output", answer)
    except EinsumError as error:
        raise EinsumError(f"einsum(): the implicit-output stage infer_output({inputs!r}) returned {answer!r} "
                          f"for the equation {equation!r}, which is not a valid output: {error}") from None


def _output_labels(equation: str, output: Term, input_labels: Sequence[Sequence[str]],
                   ellipsis_labels: tuple[str, ...], implicit: bool) -> tuple[str, ...]:
    """The output's labels, after checking that it names each input letter at most once."""
    where = (f"the output {str(output)!r} that the implicit-output stage infer_output returned for {equation!r}"
             if implicit else repr(equation))
    used = set().union(*map(set, input_labels))
    for char in output.letters:
        if char not in used:
            raise EinsumError(
                f"einsum(): output subscript {char!r} does not appear in any operand of {where}; "
                f"the output may only use subscripts of the inputs"
            )
    repeated = sorted({c for c in output.letters if output.letters.count(c) > 1})
    if repeated:
        raise EinsumError(
            f"einsum(): output subscript {repeated[0]!r} appears more than once in {where}; "
            f"each output subscript must appear once"
        )
    labels = list(output.letters)
    if output.ellipsis_at is not None:
        labels[output.ellipsis_at : output.ellipsis_at] = ellipsis_labels
    return tuple(labels)


def parse_equation(equation: str, shapes: Sequence[Sequence[int]]) -> Equation:
    """The whole of this module in one call: string and shapes in, checked `Equation` out."""
    terms, output = parse_terms(equation)
    return bind(equation, terms, output, shapes)


# --------------------------------------------------------------------------- the call's arguments


def _sublist_letter(value: Any) -> str:
    """torch's sublist numbering: 0..25 are 'A'..'Z', 26..51 are 'a'..'z', Ellipsis is '...'."""
    if value is Ellipsis:
        return ELLIPSIS
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise EinsumError(f"einsum(): a sublist holds integers in [0, 52) or Ellipsis, got {value!r}")
    n = value.__index__()
    if 0 <= n < 26:
        return chr(ord("A") + n)
    if 26 <= n < 52:
        return chr(ord("a") + n - 26)
    raise EinsumError(f"einsum(): sublist subscript {n} is outside the valid range [0, 52)")


def sublists_to_equation(args: Sequence[Any]) -> tuple[str, list[Any]]:
    """`(op0, [0, 1], op1, [1, 2], [0, 2])` -> `('AB,BC->AC', [op0, op1])`, as torch converts it."""
    operands = list(args[0::2]) if len(args) % 2 == 0 else list(args[:-1:2])
    sublists = list(args[1::2])
    for n, sublist in enumerate(sublists):
        if not isinstance(sublist, (list, tuple)):
            raise EinsumError(
                f"einsum(): in the sublist format, operand {n} must be followed by a list of subscripts, "
                f"got {type(sublist).__name__}"
            )
    equation = ",".join("".join(map(_sublist_letter, s)) for s in sublists)
    if len(args) % 2 == 1:
        if not isinstance(args[-1], (list, tuple)):
            raise EinsumError(f"einsum(): the output sublist must be a list, got {type(args[-1]).__name__}")
        equation += ARROW + "".join(map(_sublist_letter, args[-1]))
    return equation, operands


def split_arguments(args: Sequence[Any]) -> tuple[str, list[Any]]:
    """Accept every calling convention torch.einsum accepts and return (equation, operands).

    `einsum('ij,jk', a, b)`, `einsum('ij,jk', [a, b])` and `einsum(a, [0, 1], b, [1, 2], [0, 2])`.
    """
    if len(args) == 0:
        raise EinsumError("einsum(): no arguments; pass an equation and at least one operand")
    if isinstance(args[0], str):
        equation, operands = args[0], list(args[1:])
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
    else:
        if len(args) < 2:
            raise EinsumError("einsum(): in the sublist format each operand is followed by its subscript list")
        equation, operands = sublists_to_equation(args)
    if len(operands) == 0:
        raise EinsumError(f"einsum(): no operands were given for {equation!r}; pass at least one tensor")
    return equation, operands
