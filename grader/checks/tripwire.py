"""Tripwires: functions a learner must not call while a check runs.

An exercise that rebuilds ``torch.einsum`` is no exercise if the answer calls ``torch.einsum``.
While the learner's code runs, each forbidden name (a dotted path such as ``"torch.einsum"`` or
``"torch.Tensor.outer"``) is replaced by a function that raises :class:`ForbiddenCallError`;
the originals come back afterwards, even when the learner's code raises.

Replacing a name cannot catch a function captured before the check ran (``from torch import
outer``, ``op=torch.outer`` as a default, a closure): :func:`captured_forbidden` finds those by
following the names the learner's code refers to. ``Exercise`` also turns its own reference into a
tripwire while the learner's code runs. A swappable stage's own function, listed by its ``.library``
path, is out of reach under any name: its code itself refuses every caller but the pipeline's stage.
Everything else within the kernel's reach that gives an answer (mutants, the library's helpers behind a
stage, a check's own ground truth) is put out of reach the same way by ``checks/reach.py``.

What is not listed stays callable: another library's equivalent (``numpy.outer``), an internal
alias (``torch._C._VariableFunctions.outer``), or a different operation that computes the same
thing (``torch.tensordot(a, b, dims=0)``). List in ``forbidden`` what a learner would plausibly
reach for; the checks run in the learner's own process, so they stop shortcuts, not determined
cheating (which the instructor sees in the submitted source).
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import textwrap
import types
import warnings
from typing import Any, Callable, Iterator

from .spy import Recorder

# The code of a check's recorder of a stage (spy.Recorder), as it was at import: it hands the pipeline's call on.
RECORDER_CALL = Recorder.__call__.__code__


class ForbiddenCallError(AssertionError):
    """The learner's code called a function the exercise asks them to rebuild. ``hint``: what to do
    instead, when the exercise's own hint would not say it (numpy where it is not allowed)."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


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


def tripwire(path: str, exercise: str) -> Any:
    """A function that raises :class:`ForbiddenCallError` naming ``path`` when called."""
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise ForbiddenCallError(
            f"your code called {path}, which the exercise '{exercise}' asks you to do without; "
            f"write it with the operations the exercise names instead")
    forbidden.__name__ = f"tripwire_{path.replace('.', '_').replace(' ', '_')}"
    forbidden.__tripwire__ = path  # type: ignore[attr-defined]
    return forbidden


@functools.cache
def _guard_template(free: int) -> types.CodeType:
    """The code of ``def guarded(*args, **kwargs): return HANDLER(args, kwargs)``, with ``free`` unused free
    variables: a function's code can only be swapped for one with as many as its closure has cells."""
    names = [f"_free{i}" for i in range(free)]
    guarded = (f"def guarded(*args, **kwargs):\n    if False:\n        {', '.join(names) or 'pass'}\n"
               f"    return {_PLACEHOLDER!r}(args, kwargs)\n")
    source = f"def outer():\n    {' = '.join(names)} = None\n{textwrap.indent(guarded, '    ')}" if free else guarded
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # "'str' object is not callable": replaced below
        todo = list(compile(source, "<grader tripwire>", "exec").co_consts)
    while todo:
        code = todo.pop()
        if isinstance(code, types.CodeType):
            if code.co_name == "guarded":
                return code
            todo += code.co_consts
    raise AssertionError("the guard's source defines no guarded function")


_PLACEHOLDER = "grader: the handler goes here"


def _guard_code(handler: Callable[[tuple, dict], Any], free: int = 0) -> types.CodeType:
    """The code of ``def guarded(*args, **kwargs): return handler(args, kwargs)``, with ``handler`` held
    as a constant of the code itself, so that it can replace the code of any function (``free``: as many
    free variables as that function's closure has cells) without a closure of its own."""
    code = _guard_template(free)
    return code.replace(co_consts=tuple(handler if c == _PLACEHOLDER else c for c in code.co_consts))


@contextlib.contextmanager
def _stage_out_of_reach(stage: Any, path: str, exercise: str) -> Iterator[None]:
    """The library's own function of a swappable stage (``stage.library``) runs only when the pipeline's
    stage calls it (no substitute in force), never when the learner's code does, however it was reached:
    a reference kept in a dict, the stage registry, a closure. Its code is swapped for a guard for the
    duration of the block."""
    fn = stage.library
    if not isinstance(fn, types.FunctionType) or fn.__closure__:
        yield
        return
    key, original, pipeline = stage.stage_name, fn.__code__, stage.__code__  # every stage shares one wrapper
    twin = types.FunctionType(original, fn.__globals__, fn.__name__, fn.__defaults__)
    twin.__kwdefaults__ = fn.__kwdefaults__

    def handler(args: tuple, kwargs: dict) -> Any:
        caller = sys._getframe(2)  # 0: this handler, 1: the guard, 2: its caller
        if caller.f_code is RECORDER_CALL:  # a check's recorder of the stage hands the pipeline's call on
            caller = caller.f_back
        if caller.f_code is not pipeline:
            raise ForbiddenCallError(
                f"your code called the library's own {key} ({path}, reached under a name of its own), which "
                f"the exercise '{exercise}' asks you to write; write it with the operations the exercise names")
        return twin(*args, **kwargs)

    fn.__code__ = _guard_code(handler)
    try:
        yield
    finally:
        fn.__code__ = original


@contextlib.contextmanager
def out_of_reach(fn: Callable[..., Any], path: str, exercise: str) -> Iterator[None]:
    """Inside the block, ``fn`` raises :class:`ForbiddenCallError` under any name (a reference kept in a
    dict, a closure): its code itself is swapped for a guard. For a function that nothing the check runs
    inside the block calls but the learner's code (a path search other than the one being rebuilt)."""
    if not isinstance(fn, types.FunctionType) or fn.__closure__:
        raise TypeError(f"out_of_reach: {path} is no plain function")

    def handler(args: tuple, kwargs: dict) -> Any:
        raise ForbiddenCallError(f"your code called {path} (reached under a name of its own), which the exercise "
                                 f"'{exercise}' asks you to do without; write it with the operations the exercise names")

    original = fn.__code__
    fn.__code__ = _guard_code(handler)
    try:
        yield
    finally:
        fn.__code__ = original


@contextlib.contextmanager
def tripwires(paths: tuple[str, ...] | list[str], exercise: str = "this exercise") -> Iterator[None]:
    """Replace every function in ``paths`` by a tripwire for the duration of the block. A path to a
    stage's ``.library`` also puts the library's function itself out of reach (``_stage_out_of_reach``)."""
    saved: list[tuple[Any, str, Any, bool]] = []
    guards = contextlib.ExitStack()
    try:
        for path in paths:
            owner, name = _resolve(path)
            if name == "library" and hasattr(owner, "stage_name"):
                guards.enter_context(_stage_out_of_reach(owner, path, exercise))
            had_own = name in vars(owner)
            saved.append((owner, name, vars(owner).get(name), had_own))
            setattr(owner, name, tripwire(path, exercise))
        yield
    finally:
        guards.close()
        for owner, name, original, had_own in reversed(saved):
            if had_own:
                setattr(owner, name, original)
            else:  # the name was inherited: removing our shadow brings the original back
                delattr(owner, name)


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    """A code object and every function, lambda or comprehension nested in it."""
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _code_objects(constant)


def _reachable_values(fn: Callable[..., Any]) -> Iterator[tuple[str, Any]]:
    """(name, value) for every global, closure variable and default that ``fn`` can use,
    following the helper functions it calls that were defined next to it (same globals)."""
    seen: set[int] = set()
    todo = [fn]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        current = getattr(current, "__func__", current)  # bound methods
        code = getattr(current, "__code__", None)
        if code is None:
            continue
        found: list[tuple[str, Any]] = []
        namespace = getattr(current, "__globals__", {})
        for inner in _code_objects(code):
            found += [(name, namespace[name]) for name in inner.co_names if name in namespace]
        cells = getattr(current, "__closure__", None) or ()
        for name, cell in zip(code.co_freevars, cells):
            with contextlib.suppress(ValueError):  # an empty cell
                found.append((name, cell.cell_contents))
        defaults = (getattr(current, "__defaults__", None) or ()) + tuple((getattr(current, "__kwdefaults__", None) or {}).values())
        found += [(f"a default argument of {current.__name__}", value) for value in defaults]
        for name, value in found:
            yield name, value
            if isinstance(value, types.FunctionType) and value.__globals__ is namespace:
                todo.append(value)


def _through(name: str) -> str:
    """'the name 'mm'' for a variable; a description ('a default argument of f') as it is."""
    return name if " " in name else f"the name {name!r}"


def captured_forbidden(fn: Callable[..., Any], paths: tuple[str, ...] | list[str],
                       exercise: str = "this exercise",
                       also: dict[str, Callable[..., Any]] | None = None) -> ForbiddenCallError | None:
    """The error to report if ``fn`` holds a forbidden function under a name of its own, else None.

    ``also`` names more forbidden function objects (e.g. the check's own reference) by a label.
    """
    originals = {id(value): label for label, value in (also or {}).items()}
    if not paths and not originals:
        return None
    for path in paths:
        owner, name = _resolve(path)
        originals[id(getattr(owner, name))] = path
    for name, value in _reachable_values(fn):
        path = originals.get(id(value))
        if path is not None:
            return ForbiddenCallError(
                f"your code uses {path} (through {_through(name)}), which the exercise '{exercise}' "
                f"asks you to do without; write it with the operations the exercise names instead")
    return None
