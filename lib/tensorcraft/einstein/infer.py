"""The implicit-output rule: what `einsum('ij,jk', a, b)` returns when no '->' is written.

One stage, `infer_output`, which the parser calls for every implicit equation (and which
`tensorcraft.substitute(infer_output=...)` replaces). Its rule is torch's (numpy agrees):

1. a letter belongs to the output when it is used exactly once in the whole equation
   (`'ii'` uses `i` twice, so `einsum('ii', x)` is the trace, a scalar);
2. those letters are sorted by code point, so every uppercase letter comes before every
   lowercase one (`'aB'` gives `'Ba'`) -- not in their order of appearance (`'ijd,jk'` gives `'dik'`);
3. the ellipsis dimensions, when any operand has `...`, come first, in their own order.
"""
from __future__ import annotations

from collections import Counter

from tensorcraft.stages import swappable

ELLIPSIS = "..."
# Labels of ellipsis dimensions once bound to shapes are "…0", "…1", ...: never a letter.
ELLIPSIS_PREFIX = "…"


def is_ellipsis_label(label: str) -> bool:
    """True for the label of a dimension covered by '...'."""
    return label.startswith(ELLIPSIS_PREFIX)


@swappable
def infer_output(inputs: str) -> str:
    """The output subscripts of an implicit equation, from its input side.

    `inputs` is the part before where '->' would stand, as the parser normalises it (no spaces,
    operands separated by ','): `'ijd,jk'` -> `'dik'`, `'...ij,...jk'` -> `'...ik'`, `'ii'` -> `''`.
    The parser reads the answer as if it had been written after '->'.
    """
    terms = inputs.split(",")
    counts = Counter(c for term in terms for c in term.replace(ELLIPSIS, ""))
    once = "".join(sorted(c for c, n in counts.items() if n == 1))  # str order is code-point order
    return (ELLIPSIS if any(ELLIPSIS in term for term in terms) else "") + once
