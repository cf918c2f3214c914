"""No right answer within the learner's reach while their function runs (issue 20).

A learner's kernel can import the grader, and the tripwires (``checks/tripwire.py``) guard only the names
an exercise forbids. Three more kinds of importable function give an exercise's answer, or the answer up
to a trivial fix (``int(...)`` of a result that is a float, one argument flipped):

- every known-wrong answer and every other function of the ``grader.mutants`` package (its helpers, the
  adapters, the copies of library code a patched mutant compiled, ``patched`` itself): a patched mutant
  is the library with one change;
- the library's helpers behind a forbidden stage: whatever the library's own function of each stage the
  exercise forbids (``<stage>.library``) calls in its module, each forbidden library function and what it
  calls, each forbidden stage (the pipeline's function, kept under a name of its own) and library class
  (its ``__init__``), the exercise's ``answers`` (helpers elsewhere that compute the answer); not those
  the statement hands the learner (the exercise's ``given``);
- a notebook's checks module's ground truths (``grader.checks.nbNN_*``: each exercise's reference and every
  function named as a reference or a truth; not the programs a check hands the pipeline, whose code is
  read), the truths kept once per worker (``grader.checks.truths``), and ``Exercise._expected``.

:func:`answers_out_of_reach` puts them all out of reach for one call of the learner's function (never
around the diagnosis, which runs the mutants themselves): each function's code is swapped for a guard
(``tripwire._guard_code``), so the guard holds under any name the function was kept under (an alias,
a dict, a closure, a default). A mutant refuses every caller; a helper still runs when the library's,
the grader's or an installed package's code calls it (the pipeline around a learner's stage, a helper's
own recursion), never when the learner's code does; a refusal the learner's code catches still fails the
case. A first import of a mutants or checks module while the learner's function runs fails too. A
function under check that is itself a mutant (``grader check`` runs each as an answer) runs unguarded:
it is the grader's own code.
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
from tensorcraft.stages import substitutions_active

from ..mutants import REGISTRY, Patched, _called_functions
from .tripwire import ForbiddenCallError, _guard_code, _resolve

ANSWER_MODULES = re.compile(r"grader\.mutants(\..+)?|grader\.checks\.(nb\d\d_\w+|truths)")
# Library functions that read an einsum equation and return (or raise) what the parsing exercises ask: the
# output's letters, each letter's size, the result's shape, whether the equation is valid (``answers`` of
# notebooks 01-03; the pipeline's stages among them run a substitute where one is in force)
LOOPS, PARSE = "tensorcraft.einstein.loops", "tensorcraft.einstein.parse"
EQUATION_READERS = (f"{LOOPS}.bind_call", f"{LOOPS}.einsum_by_definition", f"{LOOPS}.generated_function",
                    f"{LOOPS}.einsum_loops", f"{LOOPS}.einsum_loops.library", f"{LOOPS}.loop_code",
                    f"{LOOPS}.loop_code.library", f"{LOOPS}.count_iterations", f"{LOOPS}.count_iterations.library",
                    "tensorcraft.einstein.api.build_plan", f"{PARSE}.parse_terms", f"{PARSE}.bind",
                    "tensorcraft.einstein.infer.infer_output", "tensorcraft.einstein.infer.infer_output.library")
TRUTH = re.compile(r"reference|truth|expected|correct|right")   # a check's own answer, by its name
HINT = ("what the exercise asks you to write is forbidden under any name (imported under another, kept in a dict, "
        "reached through the grader's own modules): write this step yourself, with the operations the exercise names")
# Code in these folders may call a helper while the learner's function runs: the course's packages and
# installed ones (torch calling a backend). A notebook's cells, a test's file, exec'd text are the learner's.
TRUSTED = tuple(str(Path(p)) + "/" for p in
                {Path(tensorcraft.__file__).parent, Path(__file__).parents[1],
                 *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib"))})


def _trusted(code: types.CodeType) -> bool:
    return code.co_filename.startswith(TRUSTED)


def _is_mutants(fn: Any) -> bool:
    """Defined in a mutants module (by the globals it runs in: a function's ``__module__`` can be set)."""
    if isinstance(fn, type):
        return (getattr(fn, "__module__", None) or "").startswith("grader.mutants")
    return str(getattr(fn, "__globals__", {}).get("__name__", "")).startswith("grader.mutants")


def grader_own(fn: Any) -> bool:
    """A mutant the grader itself made (``grader check`` runs each as an answer), not one a learner built."""
    return getattr(fn, "grader_own", False) if isinstance(fn, Patched) else \
        isinstance(fn, types.FunctionType) and _is_mutants(fn)


def _gather(value: Any, found: dict[types.FunctionType, str], depth: int = 0) -> None:
    """The functions of the mutants package that ``value`` is or holds (a Patched: what it compiled)."""
    if isinstance(value, types.FunctionType):
        if _is_mutants(value):
            found.setdefault(value, f"{value.__module__}.{value.__qualname__}")
    elif isinstance(value, Patched):
        for copy in value.copies:
            found.setdefault(copy, f"the mutant {value.__name__} (its copy of {copy.__qualname__})")
        _gather(value.adapt, found, depth + 1)
    elif isinstance(value, (staticmethod, classmethod)):
        _gather(value.__func__, found, depth)
    elif isinstance(value, property):
        for part in (value.fget, value.fset, value.fdel):
            _gather(part, found, depth)
    elif isinstance(value, type) and _is_mutants(value):
        for member in vars(value).values():
            _gather(member, found, depth + 1)
    elif depth < 3 and isinstance(value, (tuple, list, set, frozenset)):
        for item in value:
            _gather(item, found, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for item in value.values():
            _gather(item, found, depth + 1)
    elif hasattr(value, "func") and callable(value):   # functools.partial
        _gather(value.func, found, depth + 1)


_MUTANTS: dict[tuple, dict[types.FunctionType, str]] = {}


def mutant_functions() -> dict[types.FunctionType, str]:
    """Every function of the loaded mutants modules, the copies every patched mutant compiled included
    (function -> how to name it). Kept until a module is imported or a mutant made."""
    key = (len(sys.modules), len(REGISTRY), sum(map(len, REGISTRY.values())), len(Patched.made))
    if key not in _MUTANTS:
        found: dict[types.FunctionType, str] = {}
        for name, module in list(sys.modules.items()):
            if name == "grader.mutants" or name.startswith("grader.mutants."):
                _gather(vars(module), found)
        _gather([m.fn for entries in REGISTRY.values() for m in entries], found)
        for made in list(Patched.made):
            _gather(made, found)
        _MUTANTS.clear()
        _MUTANTS[key] = found
    return _MUTANTS[key]


def _own_functions(fn: types.FunctionType) -> list[types.FunctionType]:
    """``fn`` and the plain functions of its module that it calls, directly or not."""
    return [f for f in _called_functions(fn, sys.modules[fn.__module__]) if isinstance(f, types.FunctionType)]


_HELPERS: dict[tuple, dict[types.FunctionType, str]] = {}
_LATEST: dict[int, dict[types.FunctionType, str]] = {}   # id(exercise) -> its helpers as last read


def answer_helpers(exercise: Any) -> dict[types.FunctionType, str]:
    """The library and check helpers that compute ``exercise``'s answer (function -> its dotted name);
    first read before any tripwire replaces a name (``Exercise._run_group``), then kept."""
    key = (exercise.id, id(exercise), len(sys.modules))
    if key in _HELPERS:
        _LATEST[id(exercise)] = _HELPERS[key]
        return _HELPERS[key]
    checks = sorted(n for n in list(sys.modules) if ANSWER_MODULES.fullmatch(n) and n.startswith("grader.checks"))
    found: dict[types.FunctionType, str] = {}
    for path in exercise.forbidden + exercise.answers:
        try:
            owner, name = _resolve(path)
        except (ImportError, AttributeError):
            continue
        value = getattr(owner, name)
        if isinstance(value, type) and value.__module__.startswith("tensorcraft") and \
                isinstance(vars(value).get("__init__"), types.FunctionType):
            found.setdefault(vars(value)["__init__"], path)   # a forbidden class: no instance made by the learner
            continue
        if hasattr(value, "stage_name") and isinstance(value, types.FunctionType):
            found.setdefault(value, path)   # a forbidden stage, kept under a name of its own: the pipeline's only
            continue
        stage = name == "library" and hasattr(owner, "stage_name") and path in exercise.forbidden
        if isinstance(value, types.FunctionType) and not hasattr(value, "stage_name") and \
                (stage or path in exercise.answers or value.__module__.startswith("tensorcraft")):
            for fn in _own_functions(value):
                if not (stage and fn is value):   # a forbidden stage's own function: tripwire._stage_out_of_reach
                    found.setdefault(fn, f"{fn.__module__}.{fn.__qualname__}")
    for path in exercise.given:
        owner, name = _resolve(path)
        found.pop(getattr(owner, name), None)
    expected = next(vars(c)["_expected"] for c in type(exercise).__mro__ if "_expected" in vars(c))
    found.setdefault(expected, f"check_{exercise.name}'s ground truth")
    for name in checks:   # ground truths; not the programs and drawers a check hands the pipeline (their code is read)
        module = vars(sys.modules[name])
        references = {id(e.reference) for e in module.get("EXERCISES", {}).values()}
        for value in module.values():
            if isinstance(value, types.FunctionType) and value.__module__ == name and \
                    (id(value) in references or TRUTH.search(value.__name__)):
                found.setdefault(value, f"{name}.{value.__qualname__}")
    _HELPERS[key] = _LATEST[id(exercise)] = found
    return found


# The check in progress, for the guards' messages; the refusals it has met (``_refused``)
_NOW: dict[str, Any] = {"exercise": "", "refused": []}
_GUARDS: dict[types.FunctionType, types.CodeType] = {}   # each function's guard, made once
_TWINS: dict[types.FunctionType, types.FunctionType] = {}  # a helper's own code, for the callers it trusts


def _refused(message: str) -> ForbiddenCallError:
    """The error to raise, kept: a learner's code that catches it and goes on still fails the case."""
    _NOW["refused"].append(ForbiddenCallError(message, HINT))
    return _NOW["refused"][-1]


def _refusing(label: str) -> Callable[[tuple, dict], Any]:
    def handler(args: tuple, kwargs: dict) -> Any:
        called = f"the mutant {args[0].__name__}" if args and isinstance(args[0], Patched) else label
        raise _refused(f"your code called {called}, one of the grader's known wrong answers (or a helper of "
                       f"theirs), while the exercise '{_NOW['exercise']}' asks you to write it yourself")
    return handler


def _substituted(stage: str) -> bool:
    return substitutions_active() and not substitutions_active(ignoring=(stage,))


def _from_trusted_code(fn: types.FunctionType, label: str) -> Callable[[tuple, dict], Any]:
    """A stage runs for anyone while a substitute is in force for it (the learner's own function: the
    stage's guard, ``tripwire._stage_out_of_reach``, names a call back into it)."""
    stage = getattr(fn, "stage_name", None)
    called = f"the library's own {stage} ({label}, kept under a name of its own)" if stage else label

    def handler(args: tuple, kwargs: dict) -> Any:
        # 0: this handler, 1: the guard, 2: its caller
        if not _trusted(sys._getframe(2).f_code) and not (stage and _substituted(stage)):
            raise _refused(f"your code called {called}, which computes what the exercise '{_NOW['exercise']}' "
                           f"asks you to write")
        return _TWINS[fn](*args, **kwargs)
    return handler


def _guard(fn: types.FunctionType, label: str, helper: bool) -> types.CodeType:
    """The code ``fn`` runs while guarded; for a helper, its own code kept as a twin for trusted callers."""
    if helper and (fn not in _TWINS or _TWINS[fn].__code__ is not fn.__code__):
        _TWINS[fn] = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        _TWINS[fn].__kwdefaults__ = fn.__kwdefaults__
    if fn not in _GUARDS:
        _GUARDS[fn] = _guard_code(_from_trusted_code(fn, label) if helper else _refusing(label),
                                  len(fn.__code__.co_freevars))
    return _GUARDS[fn]


_PLANS: dict[int, tuple[dict, dict, list[tuple[types.FunctionType, types.CodeType]]]] = {}


def _guards(exercise: Any) -> list[tuple[types.FunctionType, types.CodeType]]:
    """(function, the code it runs while guarded) for every mutant and answer helper of ``exercise``; kept
    while neither list changes, each helper's twin renewed when its code changed."""
    mutants = mutant_functions()
    helpers = _LATEST.get(id(exercise)) or answer_helpers(exercise)  # read before the tripwires (_run_group)
    kept = _PLANS.get(id(exercise))
    if kept is None or kept[0] is not mutants or kept[1] is not helpers:
        pairs = [(fn, _guard(fn, label, helper=False)) for fn, label in mutants.items()]
        pairs += [(fn, _guard(fn, label, helper=True)) for fn, label in helpers.items() if fn not in mutants]
        kept = _PLANS[id(exercise)] = (mutants, helpers, pairs)
    for fn, label in helpers.items():
        if fn not in mutants:
            _guard(fn, label, helper=True)
    return kept[2]


class _RefuseImports:
    """A meta path finder: a mutants or checks module not imported yet cannot be imported now."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if ANSWER_MODULES.fullmatch(fullname):
            raise _refused(f"your code imported {fullname} while the check of '{_NOW['exercise']}' ran: "
                           "the grader's own modules hold no answer to use")
        return None


@contextlib.contextmanager
def answers_out_of_reach(exercise: Any, learner_fn: Callable[..., Any]) -> Iterator[None]:
    """For the block (one call of ``learner_fn``), every mutant and every answer helper of ``exercise``
    raises :class:`ForbiddenCallError` when the learner's code calls it, under any name; the block raises it
    even when the learner's code caught it and went on. Entered inside the tripwires: a stage's guard
    (``tripwire._stage_out_of_reach``) knows the pipeline by its code as it was."""
    if grader_own(learner_fn):
        yield   # the grader runs its own mutant as an answer
        return
    refused: list[ForbiddenCallError] = []
    _NOW.update(exercise=exercise.name, refused=refused)
    swapped: list[tuple[types.FunctionType, types.CodeType]] = []
    finder = _RefuseImports()
    sys.meta_path.insert(0, finder)
    try:
        for fn, guard in _guards(exercise):
            swapped.append((fn, fn.__code__))
            fn.__code__ = guard
        try:
            yield
        except Exception:
            if refused:
                raise refused[0] from None
            raise
        if refused:
            raise refused[0]
    finally:
        for fn, original in reversed(swapped):
            fn.__code__ = original
        sys.meta_path.remove(finder)
