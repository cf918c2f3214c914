"""Known-wrong answers ("mutants"), one module per notebook, each with the hint it deserves.

A mutant is a plausible mistake written as code. ``python -m grader check`` proves that every
exercise's PUBLIC cases reject every one of its mutants (or, for one marked ``hidden_only``, the
hidden ones) with the mutant's own hint; and a check that sees a learner's wrong result equal a
mutant's (or a crash with the same error, or the same edit of an input) prints that mutant's hint,
naming the misconception behind the mismatch. Mutants are tried in the order they are registered:
where two give the same result, the first one's hint shows, so `grader check` reports that pair
unless a case tells them apart.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

# exercise id ("nb00_welcome.outer") -> its mutants, in the order they were registered
REGISTRY: dict[str, list["Mutant"]] = {}


@dataclass(frozen=True)
class Mutant:
    exercise: str                 # "<checks module>.<exercise name>", e.g. "nb00_welcome.outer"
    name: str                     # the function's name, e.g. "outer_transposed"
    fn: Callable[..., Any]
    hint: str                     # what a learner who made this mistake needs to read
    # None: the exercise's PUBLIC cases must reject this mutant (a tick in the notebook means full
    # marks). A string: why only the hidden cases can reject it (an answer hard-coded to the public
    # cases is the one legitimate example); `grader check` then accepts a hidden-only rejection.
    hidden_only: str | None = None


def mutant(exercise: str, hint: str, hidden_only: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as a known-wrong answer to ``exercise`` (``hidden_only``:
    the reason only hidden cases can reject it, e.g. an answer hard-coded to the public cases)."""
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        entries = REGISTRY.setdefault(exercise, [])
        entries[:] = [m for m in entries if m.name != fn.__name__]  # re-running a module replaces
        entries.append(Mutant(exercise, fn.__name__, fn, hint, hidden_only))
        return fn
    return register


def mutants_for(exercise: str) -> list[Mutant]:
    """The mutants of ``exercise``, importing ``grader.mutants.<notebook module>`` on first use."""
    module = exercise.split(".")[0]
    try:
        importlib.import_module(f"{__name__}.{module}")
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{module}":
            raise
    return list(REGISTRY.get(exercise, []))
