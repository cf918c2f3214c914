"""The implicit-output rule: what `einsum('ij,jk', a, b)` returns when no '->' is written.

Three rules, all torch's (numpy agrees on them):

1. a letter belongs to the output when it is used exactly once in the whole equation
   (`'ii'` uses `i` twice, so `einsum('ii', x)` is the trace, a scalar);
2. those letters are sorted by code point, so every uppercase letter comes before every
   lowercase one (`'aB'` gives `'Ba'`);
3. the ellipsis dimensions, when any operand has `...`, come first, in their own order.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

# Labels of ellipsis dimensions are "…0", "…1", ...: never a letter, so never confused with one.
ELLIPSIS_PREFIX = "…"


def is_ellipsis_label(label: str) -> bool:
    """True for the label of a dimension covered by '...'."""
    return label.startswith(ELLIPSIS_PREFIX)


def implicit_output(inputs: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """The output labels of an equation without '->', given each operand's labels.

    `inputs` lists, per operand, one label per dimension: letters, and ellipsis labels
    ("…0", "…1", ...) where '...' stood. For `'ij,jk'` that is `[['i', 'j'], ['j', 'k']]`,
    and the answer is `('i', 'k')`.
    """
    counts = Counter(label for labels in inputs for label in labels)
    ellipsis = sorted((label for label in counts if is_ellipsis_label(label)),
                      key=lambda label: int(label[len(ELLIPSIS_PREFIX):]))
    once = sorted(label for label, count in counts.items()
                  if count == 1 and not is_ellipsis_label(label))  # str order is code-point order
    return tuple(ellipsis) + tuple(once)


def infer_output(inputs: Sequence[str]) -> str:
    """The same rule on subscript strings, as a learner writes it: `['ij', 'jk']` -> `'ik'`,
    `['b...a']` -> `'...ab'`. Spaces are ignored; the strings are assumed valid."""
    terms = [term.replace(" ", "") for term in inputs]
    counts = Counter(c for term in terms for c in term.replace("...", ""))
    once = "".join(sorted(c for c, n in counts.items() if n == 1))
    return ("..." if any("..." in term for term in terms) else "") + once


def implicit_output_string(equation: str) -> str:
    """`infer_output` on the left of an equation string: `'ij,jk'` -> `'ik'`, `'b...a'` -> `'...ab'`."""
    return infer_output(equation.split("->")[0].split(","))
