"""The loop structure a kernel generator prints: the iteration space with its dims collapsed.

A kernel over ``[8, 1, 32, 64]`` whose inputs are all full or broadcast the same way on the last
two dims needs two loops, not four: dims of size 1 are dropped, and neighbouring dims are merged
when every input either reads both (full) or neither (broadcast). What is left is a list of
``sizes`` with, per input, the element stride it moves by along each (0 where it broadcasts).
Kernels with a reduction keep the reduced axis last and separate, so rows stay rows.
The C and Triton generators both print loops over this; neither needs the original rank.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tensorcraft.compiler.codegen.kernel import Kernel


@dataclass(frozen=True)
class Layout:
    sizes: tuple[int, ...]                       # collapsed iteration space, row-major
    strides: dict[str, tuple[int, ...]]          # input name -> element stride along each size (0: broadcast)
    reduces: bool                                # True: the last size is the reduced axis

    @property
    def numel(self) -> int:
        return math.prod(self.sizes)

    @property
    def n_cols(self) -> int:
        """Length of the innermost loop (the reduced axis for reductions)."""
        return self.sizes[-1] if self.sizes else 1

    @property
    def outer_sizes(self) -> tuple[int, ...]:
        """The dims that make up a row index, outermost first."""
        return self.sizes[:-1]

    @property
    def n_rows(self) -> int:
        return math.prod(self.outer_sizes)

    def is_contiguous(self) -> bool:
        """No input broadcasts: every buffer is read at the same flat index as the outputs."""
        return all(s == _contiguous(self.sizes) for s in self.strides.values())


def _contiguous(sizes: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(sizes):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def collapse(kernel: Kernel) -> Layout:
    """Drop size-1 dims and merge neighbours that every input treats alike (see module doc)."""
    reduces = any(o.reduce for o in kernel.outputs)
    dims = list(range(len(kernel.shape)))
    kept = dims[:-1] if reduces else dims
    # each dim: (size, which inputs read it in full)
    groups: list[tuple[int, tuple[bool, ...]]] = []
    for d in kept:
        if kernel.shape[d] == 1:
            continue
        full = tuple(b.shape[d] != 1 for b in kernel.inputs)
        if groups and groups[-1][1] == full:
            groups[-1] = (groups[-1][0] * kernel.shape[d], full)
        else:
            groups.append((kernel.shape[d], full))
    if reduces:
        last = len(kernel.shape) - 1
        groups.append((kernel.shape[last], tuple(b.shape[last] != 1 or kernel.shape[last] == 1
                                                  for b in kernel.inputs)))
    sizes = tuple(size for size, _ in groups)
    strides = {}
    for i, b in enumerate(kernel.inputs):
        own_sizes = tuple(size if full[i] else 1 for size, full in groups)
        strides[b.name] = tuple(s if full[i] else 0 for s, (_, full) in zip(_contiguous(own_sizes), groups))
    return Layout(sizes=sizes, strides=strides, reduces=reduces)
