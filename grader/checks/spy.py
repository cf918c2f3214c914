"""Spies: what a learner's code calls (torch operations, counted) and how a stage of the library's
pipeline is called (:class:`Recorder`: its arguments and results, call by call).

A tripwire (``tripwire.py``) stops a function the exercise forbids. Some exercises need the
opposite proof: that the answer uses the operation the exercise is about (einsum for the two
products of attention, one matrix product in a lowering), not another route to the same numbers.
A ``TorchFunctionMode`` sees every torch call, also one made through a name bound before the check
ran (``from torch import einsum``), so the count does not depend on how the learner wrote it.
"""
from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterator

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


@dataclass(frozen=True)
class Call:
    """One call of a recorded function: what it was given, what it gave back, and what the recorder noted
    of the arguments ``before`` and ``after`` the call (a function may change them in place)."""
    args: tuple
    kwargs: dict
    returned: Any
    before: Any = None
    after: Any = None

    @property
    def changed_its_arguments(self) -> bool:
        return self.before != self.after


class Recorder:
    """``fn``, called as ``fn`` is, with every call recorded (``calls``; the errors it raised in ``errors``).

    A stage exercise puts a recorder in a pipeline in place of the learner's stage: the check then knows
    what the stage was given and what it returned, and can say so. ``returns`` (types) and ``what`` (those
    types in words) check the returned value at once, so that a wrong type is reported as the stage's, not
    as a crash deeper in the pipeline; ``then(*args, returned)`` checks or converts it further (a check's
    own rules, e.g. a legal fusion grouping); ``note(*args)`` is recorded before and after the call."""

    def __init__(self, fn: Callable[..., Any], name: str, returns: tuple[type, ...] = (), what: str = "",
                 then: Callable[..., Any] | None = None, note: Callable[..., Any] | None = None) -> None:
        self.fn, self.name, self.returns, self.what, self.then, self.note = fn, name, returns, what, then, note
        self.calls: list[Call] = []
        self.errors: list[BaseException] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        before = self.note(*args) if self.note is not None else None
        try:
            returned = self.fn(*args, **kwargs)
        except BaseException as error:   # the learner's own error: kept, so that a check can report it as theirs
            self.errors.append(error)
            raise
        if self.returns and not isinstance(returned, self.returns):
            raise TypeError(f"{self.name} must return {self.what or ' or '.join(t.__name__ for t in self.returns)}, "
                            f"got {type(returned).__name__}: {returned!r:.60}")
        if self.then is not None:
            returned = self.then(*args, returned)
        after = self.note(*args) if self.note is not None else None
        self.calls.append(Call(args, kwargs, returned, before, after))
        return returned

    @property
    def last(self) -> Call:
        return self.calls[-1]
