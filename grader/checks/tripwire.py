"""Tripwires: functions a learner must not call while a check runs.

An exercise that rebuilds ``torch.einsum`` is no exercise if the answer calls ``torch.einsum``.
While the learner's code runs, each forbidden name (a dotted path such as ``"torch.einsum"`` or
``"torch.Tensor.outer"``) is replaced by a function that raises :class:`ForbiddenCallError`;
the originals come back afterwards, even when the learner's code raises.
"""
from __future__ import annotations

import contextlib
import importlib
from typing import Any, Iterator


class ForbiddenCallError(AssertionError):
    """The learner's code called a function the exercise asks them to rebuild."""


def _resolve(path: str) -> tuple[Any, str]:
    """Split 'torch.Tensor.outer' into (torch.Tensor, 'outer'), importing the longest module prefix."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:-1]:
            owner = getattr(owner, attribute)
        if not hasattr(owner, parts[-1]):
            raise AttributeError(f"tripwire target {path!r}: {owner!r} has no attribute {parts[-1]!r}")
        return owner, parts[-1]
    raise ImportError(f"tripwire target {path!r}: no importable module in it")


def _tripwire(path: str, exercise: str) -> Any:
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise ForbiddenCallError(
            f"your code called {path}, which the exercise '{exercise}' asks you to do without; "
            f"write it with the operations the exercise names instead")
    forbidden.__name__ = f"tripwire_{path.replace('.', '_')}"
    forbidden.__tripwire__ = path  # type: ignore[attr-defined]
    return forbidden


@contextlib.contextmanager
def tripwires(paths: tuple[str, ...] | list[str], exercise: str = "this exercise") -> Iterator[None]:
    """Replace every function in ``paths`` by a tripwire for the duration of the block."""
    saved: list[tuple[Any, str, Any, bool]] = []
    try:
        for path in paths:
            owner, name = _resolve(path)
            had_own = name in vars(owner)
            saved.append((owner, name, vars(owner).get(name), had_own))
            setattr(owner, name, _tripwire(path, exercise))
        yield
    finally:
        for owner, name, original, had_own in reversed(saved):
            if had_own:
                setattr(owner, name, original)
            else:  # the name was inherited: removing our shadow brings the original back
                delattr(owner, name)
