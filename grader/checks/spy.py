"""Count the torch operations a learner's code calls, however it reached them.

A tripwire (``tripwire.py``) stops a function the exercise forbids. Some exercises need the
opposite proof: that the answer uses the operation the exercise is about (einsum for the two
products of attention, one matrix product in a lowering), not another route to the same numbers.
A ``TorchFunctionMode`` sees every torch call, also one made through a name bound before the check
ran (``from torch import einsum``), so the count does not depend on how the learner wrote it.
"""
from __future__ import annotations

import contextlib
from collections import Counter
from typing import Iterator

from torch.overrides import TorchFunctionMode

# the names torch's matrix products have, as functions and as tensor methods (a @ b is __matmul__)
MATRIX_PRODUCTS = frozenset({"bmm", "matmul", "__matmul__", "__rmatmul__", "mm", "baddbmm"})


class _Counter(TorchFunctionMode):
    def __init__(self, names: frozenset[str], counts: Counter) -> None:
        super().__init__()
        self.names, self.counts = names, counts

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in self.names:
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def counting(names: frozenset[str] | set[str]) -> Iterator[Counter]:
    """Inside the block, count the calls to torch functions or tensor methods called ``names``."""
    counts: Counter = Counter()
    with _Counter(frozenset(names), counts):
        yield counts
