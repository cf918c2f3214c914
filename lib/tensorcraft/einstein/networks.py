"""Random tensor networks: the inputs on which path searches are compared (benchmarks, notebook 04).

Kept in the library, not in `benchmarks/`, because the released notebooks import it from a folder
where `benchmarks` is not on the path."""
from __future__ import annotations

import random

LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def label(k: int) -> str:
    """The k-th label, as opt_einsum.get_symbol names it: 52 letters, then code points from 192 on."""
    return LETTERS[k] if k < len(LETTERS) else chr(k + 140)


def random_network(rng: random.Random, n: int, degree: int = 3) -> tuple[list[frozenset[str]], dict[str, int]]:
    """n operands and n * degree / 2 labels, each label on two distinct operands (a summed bond),
    sizes 2-8; every operand gets at least one label."""
    labels: list[set[str]] = [set() for _ in range(n)]
    sizes: dict[str, int] = {}
    for k in range(n * degree // 2):
        lonely = [p for p in range(n) if not labels[p]]
        first = lonely[0] if lonely else rng.randrange(n)
        second = rng.choice([p for p in range(n) if p != first])
        name = label(k)
        labels[first].add(name)
        labels[second].add(name)
        sizes[name] = rng.randint(2, 8)
    return [frozenset(s) for s in labels], sizes
