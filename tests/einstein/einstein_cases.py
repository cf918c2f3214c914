"""Hypothesis strategies for einsum equations, shared by the tests in this folder.

An equation is drawn together with operand shapes that fit it: repeated labels (diagonals),
size-1 dimensions that broadcast, ellipsis covering different numbers of dimensions, implicit
and explicit outputs, upper- and lowercase letters, and optional spaces.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from hypothesis import strategies as st

LETTERS = "abcdABz"
ONE_IN_FIVE = st.sampled_from([False, False, True, False, False])
ONE_IN_FOUR = st.sampled_from([False, True, False, False])


@dataclass(frozen=True)
class Case:
    equation: str
    shapes: tuple[tuple[int, ...], ...]

    def arrays(self, rng: np.random.Generator, dtype: str = "float64") -> list[np.ndarray]:
        if dtype.startswith("int"):
            return [rng.integers(-3, 4, size=s).astype(dtype) for s in self.shapes]
        return [rng.standard_normal(s).astype(dtype) for s in self.shapes]

    def tensors(self, rng: np.random.Generator, dtype: str = "float64") -> list[torch.Tensor]:
        return [torch.from_numpy(a) for a in self.arrays(rng, dtype)]


@st.composite
def cases(draw, min_operands: int = 1, max_operands: int = 4, max_size: int = 4,
          max_labels: int = 3, ellipsis: bool = True, spaces: bool = True) -> Case:
    """A valid equation and shapes; sizes in [1, max_size], at most max_labels letters per operand."""
    # sampled_from, not integers: hypothesis starts integers at their minimum, and a suite of
    # 60 examples would then see mostly scalars and sizes of 1
    n = draw(st.sampled_from([k for k in (2, 3, 1, 4, 5, 6, 7, 8) if min_operands <= k <= max_operands]))
    sizes = [k for k in (3, 2, 4, 1, 5, 8, 6, 7) if k <= max_size]
    pool = draw(st.lists(st.sampled_from(LETTERS), min_size=2, max_size=5, unique=True))
    size = {c: draw(st.sampled_from(sizes)) for c in pool}
    use_ellipsis = ellipsis and draw(st.sampled_from([True, False]))
    ell_sizes = [draw(st.sampled_from(sizes)) for _ in range(draw(st.sampled_from([1, 2, 0])))] if use_ellipsis else []
    terms, shapes = [], []
    for _ in range(n):
        length = draw(st.sampled_from([k for k in (2, 1, 3, 0) if k <= max_labels]))
        letters = draw(st.lists(st.sampled_from(pool), min_size=length, max_size=length))
        broadcast = {c: draw(ONE_IN_FIVE) for c in set(letters)}  # this operand holds size 1 for c
        dims = [1 if broadcast[c] else size[c] for c in letters]
        term = "".join(letters)
        if use_ellipsis and draw(st.sampled_from([True, False])):
            k = draw(st.integers(0, len(ell_sizes)))  # how many ellipsis dimensions this operand has
            covered = [1 if draw(ONE_IN_FIVE) else s for s in ell_sizes[len(ell_sizes) - k:]]
            at = draw(st.integers(0, len(letters)))
            term = term[:at] + "..." + term[at:]
            dims = dims[:at] + covered + dims[at:]
        terms.append(term)
        shapes.append(tuple(dims))
    equation = ",".join(terms)
    if draw(st.sampled_from([True, False])):  # explicit output
        used = sorted({c for t in terms for c in t if c.isalpha()})
        out = draw(st.permutations(used))
        out = out[len(out) - draw(st.integers(0, len(out))):]  # hypothesis starts at 0: all of them
        out_str = "".join(out)
        if any("..." in t for t in terms) and not draw(ONE_IN_FOUR):
            at = draw(st.integers(0, len(out_str)))
            out_str = out_str[:at] + "..." + out_str[at:]
        equation += "->" + out_str
    if spaces and draw(ONE_IN_FOUR):
        # spaces are allowed anywhere except inside '...' and '->'
        chunks = equation.replace("...", "\0").replace("->", "\1")
        spaced = "".join(c + (" " if draw(ONE_IN_FOUR) else "") for c in chunks)
        equation = spaced.replace("\0", "...").replace("\1", "->")
    return Case(equation, tuple(shapes))


# characters a malformed equation may gain
NOISE = [" ", ".", ",", "-", ">", "->", "...", "1", "\t", "a", "Z", "i", "é"]


@st.composite
def mutated_cases(draw, max_operands: int = 3) -> Case:
    """A valid case, then one or two edits to the equation or the shapes: often invalid, sometimes not."""
    case = draw(cases(max_operands=max_operands, max_size=3))
    equation, shapes = case.equation, [list(s) for s in case.shapes]
    for _ in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(["insert", "delete", "resize", "add_dim", "drop_dim", "drop_operand",
                                     "add_operand", "repeat_output"]))
        if kind == "insert":
            at = draw(st.integers(0, len(equation)))
            equation = equation[:at] + draw(st.sampled_from(NOISE)) + equation[at:]
        elif kind == "delete" and equation:
            at = draw(st.integers(0, len(equation) - 1))
            equation = equation[:at] + equation[at + 1:]
        elif kind == "resize" and any(shapes):
            n = draw(st.sampled_from([i for i, s in enumerate(shapes) if s]))
            d = draw(st.integers(0, len(shapes[n]) - 1))
            shapes[n][d] = draw(st.integers(1, 4))
        elif kind == "add_dim":
            n = draw(st.integers(0, len(shapes) - 1))
            shapes[n].insert(draw(st.integers(0, len(shapes[n]))), draw(st.integers(1, 3)))
        elif kind == "drop_dim" and any(shapes):
            n = draw(st.sampled_from([i for i, s in enumerate(shapes) if s]))
            shapes[n].pop(draw(st.integers(0, len(shapes[n]) - 1)))
        elif kind == "drop_operand" and len(shapes) > 1:
            shapes.pop()
        elif kind == "add_operand":
            shapes.append([2])
        elif kind == "repeat_output" and "->" in equation:
            lhs, rhs = equation.split("->", 1)
            letters = [c for c in lhs if c.isalpha()]
            equation = lhs + "->" + rhs + draw(st.sampled_from(letters or ["q"]))
    return Case(equation, tuple(tuple(s) for s in shapes))
