"""No right answer within the learner's reach while their function runs (issue 20).

A learner's kernel can import the grader, and the tripwires (``checks/tripwire.py``) guard only the names
an exercise forbids. Three more kinds of importable function give an exercise's answer, or the answer up
to a trivial fix (``int(...)`` of a result that is a float, one argument flipped):

- every known-wrong answer and every other function of the ``grader.mutants`` package (its helpers, the
  adapters, the copies of library code a patched mutant compiled, ``patched`` itself): a patched mutant
  is the library with one change;
- the library's helpers behind a forbidden stage: whatever the library's own function of each stage the
  exercise forbids (``<stage>.library``) calls in its module, each forbidden library function and what it
  calls, each forbidden stage (the pipeline's function, kept under a name of its own), the exercise's
  ``answers`` (helpers elsewhere that compute the answer); not those the statement hands the learner
  (the exercise's ``given``);
- every function of a notebook's checks module (``grader.checks.nbNN_*``: the ground-truth references), of
  the truths kept once per worker (``grader.checks.truths``), and ``Exercise._expected``.

:func:`answers_out_of_reach` puts them all out of reach for one call of the learner's function (never
around the diagnosis, which runs the mutants themselves): each function's code is swapped for a guard
(``tripwire._guard_code``), so the guard holds under any name the function was kept under (an alias,
a dict, a closure, a default). A mutant refuses every caller; a helper still runs when the library's,
the grader's or an installed package's code calls it (the pipeline around a learner's stage, a helper's
own recursion), never when the learner's code does. A first import of a mutants or checks module while
the learner's function runs fails too. A function under check that is itself a mutant (``grader check``
runs each as an answer) runs unguarded: it is the grader's own code.
"""
from __future__ import annotations

import contextlib
import re
import sys
import sysconfig
import types
from pathlib import Path
from typing import Any, Callable, Iterator

import tensorcraft

from ..mutants import REGISTRY, Patched, _called_functions
from .tripwire import ForbiddenCallError, _guard_code, _resolve

ANSWER_MODULES = re.compile(r"grader\.mutants(\..+)?|grader\.checks\.(nb\d\d_\w+|truths)")
HINT = "write this step yourself, with the operations the exercise names"
# Code in these folders may call a helper while the learner's function runs: the course's packages and
# installed ones (torch calling a backend). A notebook's cells, a test's file, exec'd text are the learner's.
TRUSTED = tuple(str(Path(p)) + "/" for p in
                {Path(tensorcraft.__file__).parent, Path(__file__).parents[1],
                 *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib"))})


def _trusted(code: types.CodeType) -> bool:
    return code.co_filename.startswith(TRUSTED)


def _is_mutants(fn: Any) -> bool:
    return (getattr(fn, "__module__", None) or "").startswith("grader.mutants") or \
        getattr(getattr(fn, "__code__", None), "co_filename", "").startswith("<mutant ")


def _gather(value: Any, found: dict[types.FunctionType, str], label: str, depth: int = 0) -> None:
    """The functions of the mutants package that ``value`` is or holds (a Patched: what it compiled)."""
    if isinstance(value, types.FunctionType):
        if _is_mutants(value):
            found.setdefault(value, f"{value.__module__}.{value.__qualname__}")
    elif isinstance(value, Patched):
        for copy in value.copies:
            found.setdefault(copy, f"the mutant {value.__name__} (its copy of {copy.__qualname__})")
        _gather(value.adapt, found, label, depth + 1)
    elif isinstance(value, (staticmethod, classmethod)):
        _gather(value.__func__, found, label, depth)
    elif isinstance(value, property):
        for part in (value.fget, value.fset, value.fdel):
            _gather(part, found, label, depth)
    elif isinstance(value, type) and _is_mutants(value):
        for member in vars(value).values():
            _gather(member, found, label, depth + 1)
    elif depth < 3 and isinstance(value, (tuple, list, set, frozenset)):
        for item in value:
            _gather(item, found, label, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for item in value.values():
            _gather(item, found, label, depth + 1)
    elif hasattr(value, "func") and callable(value):   # functools.partial
        _gather(value.func, found, label, depth + 1)


_MUTANTS: dict[tuple, dict[types.FunctionType, str]] = {}


def mutant_functions() -> dict[types.FunctionType, str]:
    """Every function of the loaded mutants modules, the copies every patched mutant compiled included
    (function -> how to name it)."""
    modules = [m for n, m in list(sys.modules.items()) if n == "grader.mutants" or n.startswith("grader.mutants.")]
    key = (len(modules), sum(map(len, REGISTRY.values())), len(Patched.made))
    if key not in _MUTANTS:
        found: dict[types.FunctionType, str] = {}
        for module in modules:
            _gather(vars(module), found, module.__name__)
        for entries in REGISTRY.values():
            _gather([m.fn for m in entries], found, "a mutant")
        for made in list(Patched.made):
            _gather(made, found, "a mutant")
        _MUTANTS.clear()
        _MUTANTS[key] = found
    return _MUTANTS[key]


def _own_functions(fn: types.FunctionType) -> list[types.FunctionType]:
    """``fn`` and the plain functions of its module that it calls, directly or not."""
    return [f for f in _called_functions(fn, sys.modules[fn.__module__]) if isinstance(f, types.FunctionType)]


_HELPERS: dict[tuple, dict[types.FunctionType, str]] = {}


def answer_helpers(exercise: Any) -> dict[types.FunctionType, str]:
    """The library and check helpers that compute ``exercise``'s answer (function -> its dotted name);
    first read before any tripwire replaces a name (``Exercise._run_group``), then kept."""
    checks = sorted(n for n in list(sys.modules) if ANSWER_MODULES.fullmatch(n) and n.startswith("grader.checks"))
    key = (exercise.id, id(exercise), tuple(checks))
    if key in _HELPERS:
        return _HELPERS[key]
    found: dict[types.FunctionType, str] = {}
    for path in exercise.forbidden + exercise.answers:
        try:
            owner, name = _resolve(path)
        except (ImportError, AttributeError):
            continue
        value = getattr(owner, name)
        if hasattr(value, "stage_name") and isinstance(value, types.FunctionType):
            found.setdefault(value, path)   # a forbidden stage, kept under a name of its own: the pipeline's only
            continue
        stage = name == "library" and hasattr(owner, "stage_name")
        if isinstance(value, types.FunctionType) and not hasattr(value, "stage_name") and \
                (stage or path in exercise.answers or value.__module__.startswith("tensorcraft")):
            for fn in _own_functions(value):
                if not (stage and fn is value):   # the stage's own function: tripwire._stage_out_of_reach
                    found.setdefault(fn, f"{fn.__module__}.{fn.__qualname__}")
    for path in exercise.given:
        owner, name = _resolve(path)
        found.pop(getattr(owner, name), None)
    expected = next(vars(c)["_expected"] for c in type(exercise).__mro__ if "_expected" in vars(c))
    found.setdefault(expected, f"check_{exercise.name}'s ground truth")
    for name in checks:
        for value in vars(sys.modules[name]).values():
            if isinstance(value, types.FunctionType) and value.__module__ == name and not value.__name__.startswith("check_"):
                found.setdefault(value, f"{name}.{value.__qualname__}")
    _HELPERS[key] = found
    return found


def _refusing(label: str, exercise: str) -> Callable[[tuple, dict], Any]:
    def handler(args: tuple, kwargs: dict) -> Any:
        called = f"the mutant {args[0].__name__}" if args and isinstance(args[0], Patched) else label
        raise ForbiddenCallError(f"your code called {called}, one of the grader's known wrong answers (or a helper "
                                 f"of theirs), while the exercise '{exercise}' asks you to write it yourself", HINT)
    return handler


def _from_trusted_code(fn: types.FunctionType, label: str, exercise: str) -> Callable[[tuple, dict], Any]:
    twin = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    twin.__kwdefaults__ = fn.__kwdefaults__

    def handler(args: tuple, kwargs: dict) -> Any:
        if not _trusted(sys._getframe(2).f_code):  # 0: this handler, 1: the guard, 2: its caller
            raise ForbiddenCallError(f"your code called {label}, which computes what the exercise '{exercise}' "
                                     f"asks you to write", HINT)
        return twin(*args, **kwargs)
    return handler


class _RefuseImports:
    """A meta path finder: a mutants or checks module not imported yet cannot be imported now."""

    def __init__(self, exercise: str):
        self.exercise = exercise

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if ANSWER_MODULES.fullmatch(fullname):
            raise ForbiddenCallError(f"your code imported {fullname} while the check of '{self.exercise}' ran: "
                                     "the grader's own modules hold no answer to use", HINT)
        return None


@contextlib.contextmanager
def answers_out_of_reach(exercise: Any, learner_fn: Callable[..., Any]) -> Iterator[None]:
    """For the block (one call of ``learner_fn``), every mutant and every answer helper of ``exercise``
    raises :class:`ForbiddenCallError` when the learner's code calls it, under any name. Entered inside the
    tripwires: a stage's guard (``tripwire._stage_out_of_reach``) knows the pipeline by its code as it was."""
    mutants = mutant_functions()
    if isinstance(learner_fn, Patched) or learner_fn in mutants:
        yield   # the grader runs its own mutant as an answer
        return
    name = exercise.name
    guards = [(fn, _refusing(label, name)) for fn, label in mutants.items()]
    guards += [(fn, _from_trusted_code(fn, label, name)) for fn, label in answer_helpers(exercise).items()
               if fn not in mutants]
    swapped: list[tuple[types.FunctionType, types.CodeType]] = []
    finder = _RefuseImports(name)
    sys.meta_path.insert(0, finder)
    try:
        for fn, handler in guards:
            original = fn.__code__
            fn.__code__ = _guard_code(handler, len(original.co_freevars))
            swapped.append((fn, original))
        yield
    finally:
        for fn, original in reversed(swapped):
            fn.__code__ = original
        sys.meta_path.remove(finder)
