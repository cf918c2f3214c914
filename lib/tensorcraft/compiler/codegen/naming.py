"""Identifiers for generated source: buffer and statement names made safe for C and Python.

A kernel's names come from the graph ("x", "arg0_1", "bn.weight"...); generated code needs names
that are valid identifiers, distinct from each other and from the generator's own names.
"""
from __future__ import annotations

import re


def identifier(name: str, taken: set[str]) -> str:
    """``name`` with every non-word character replaced by "_", made unique among ``taken``
    (which it joins)."""
    base = re.sub(r"\W", "_", name)
    if not base or base[0].isdigit():
        base = "_" + base
    ident, n = base, 1
    while ident in taken:
        ident, n = f"{base}_{n}", n + 1
    taken.add(ident)
    return ident
