"""Known-wrong answers ("mutants"), one module per notebook, each with the hint it deserves.

A mutant is a plausible mistake written as code. ``python -m grader check`` proves that every
exercise's PUBLIC cases reject every one of its mutants (or, for one marked ``hidden_only``, the
hidden ones) with the mutant's own hint; and a check that sees a learner's wrong result equal a
mutant's (or a crash with the same error, or the same edit of an input) prints that mutant's hint,
naming the misconception behind the mismatch. Mutants are tried in the order they are registered:
where two give the same result, the first one's hint shows, so `grader check` reports that pair
unless a case tells them apart.

A mutant never holds a working copy of the right answer: a learner's kernel can import this
package, and a copy would pass every check while the tripwires guard only the library. A mistake
in a library stage is written as a patch of the library's own source (:func:`patched`: replace one
piece of text that occurs exactly once, compiled apart from the module), so the library stays the
one copy and ``grader check`` proves every patch still applies; a small standalone wrong answer
(a transposed result, a wrong constant, wrong values written out) is written as a plain function
(:func:`mutant`). A helper with switches that gives the right answer with them off is neither, and
no module has one. A patched mutant is still the library with one change, which a small fix can undo:
while a learner's function runs, no function of this package can be called (``grader.checks.reach``).
"""
from __future__ import annotations

import __future__
import ast
import importlib
import inspect
import sys
import textwrap
import types
import weakref
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


class PatchError(ValueError):
    """A patched mutant's edit no longer applies to the reference's source (its text is not there
    exactly once, or the edit changes nothing): ``grader check`` names the mutant."""


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` (which must occur exactly once) by ``new`` in the source of ``within`` (the
    reference itself when None, else a helper function or class of the reference's module that it uses)."""
    old: str
    new: str
    within: Callable[..., Any] | None = None


class Patched:
    """A known-wrong answer made from the library's own source with small edits, as mutation-testing
    tools make theirs: the library is the one copy of the right answer, and a mutant holds only the
    mistake. Built when its module is imported (outside any check): the reference and every plain
    function of its module that it calls, directly or not (and a class of the module it uses, when an
    edit is within it), are read with ``inspect.getsource``,
    edited, stripped of decorators (a stage's ``@swappable``), compiled and run in a copy of the
    module's namespace, so that the mutant runs on its own copies of the helpers (not the tripwires a
    check sets on their names, nor the originals, which an edited helper must replace) and the module
    itself is left as it was. ``adapt``, when given, calls the edited reference for the exercise's
    signature (``adapt(edited, *args)``). An edit that no longer applies, or that changes nothing,
    does not stop the import: the mutant raises :class:`PatchError` when called, and ``grader check``
    fails naming it (``problem``). The object is no plain function, so that the tripwires' search
    for a forbidden function a learner's answer holds does not mistake the helpers it calls for one.
    Every one made is kept in ``made`` with the functions it compiled (``copies``): while a learner's
    answer runs, none of them can be called (``grader.checks.reach``)."""

    made: "weakref.WeakSet[Patched]" = weakref.WeakSet()

    def __init__(self, name: str, reference: Callable[..., Any], edits: tuple[Edit, ...],
                 adapt: Callable[..., Any] | None = None):
        self.__name__ = self.__qualname__ = name
        self.reference = _own_function(reference)
        self.edits, self.adapt = edits, adapt
        self.problem: str | None = None
        self.copies: tuple[Callable[..., Any], ...] = ()
        self.grader_own = _made_in_a_mutants_module()
        Patched.made.add(self)
        try:
            self._function = self._build()
        except PatchError as error:
            self.problem, self._function = str(error), None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._function is None:
            raise PatchError(f"mutant {self.__name__}: {self.problem}")
        if self.adapt is not None:
            return self.adapt(self._function, *args, **kwargs)
        return self._function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<mutant {self.__name__}: {len(self.edits)} edit(s) of {self.reference.__module__}.{self.reference.__qualname__}>"

    def _build(self) -> Callable[..., Any]:
        module = sys.modules[self.reference.__module__]
        if not self.edits:
            raise PatchError("no edit: a mutant made of the reference unchanged would be the right answer")
        namespace = dict(vars(module))
        called = _called_functions(self.reference, module)
        edits: dict[Callable[..., Any], list[Edit]] = {fn: [] for fn in called}
        for edit in self.edits:
            within = _own_function(edit.within) if edit.within else self.reference
            if within not in edits:
                raise PatchError(f"{getattr(within, '__qualname__', within)} is no function of {module.__name__} "
                                 f"that {self.reference.__qualname__} calls")
            edits[within].append(edit)
        for fn, own in edits.items():
            if isinstance(fn, type) and not own and fn is not self.reference:
                continue  # a class is the module's own unless edited (a dataclass the check tests with isinstance)
            source = textwrap.dedent(inspect.getsource(fn))
            edited = source
            for edit in own:
                count = edited.count(edit.old)
                if count != 1:
                    raise PatchError(f"the edit {edit.old!r} -> {edit.new!r} needs its old text exactly once in "
                                     f"{module.__name__}.{fn.__qualname__}, found {count} times")
                edited = edited.replace(edit.old, edit.new)
            try:
                tree = ast.parse(edited)
            except SyntaxError as error:
                raise PatchError(f"the edits of {module.__name__}.{fn.__qualname__} are no Python: {error}") from None
            if own and ast.dump(tree) == ast.dump(ast.parse(source)):
                raise PatchError(f"the edits of {module.__name__}.{fn.__qualname__} change nothing the code does")
            definition = tree.body[0]
            if not isinstance(definition, (ast.FunctionDef, ast.ClassDef)) or definition.name != fn.__name__:
                raise PatchError(f"{module.__name__}.{fn.__qualname__} is no plain function or class")
            definition.decorator_list = []
            code = compile(tree, f"<mutant {self.__name__}: {module.__name__}.{fn.__qualname__}"
                                 f"{', edited' if own else ''}>", "exec",
                           flags=__future__.annotations.compiler_flag, dont_inherit=True)
            exec(code, namespace)
        self.copies = tuple(f for v in namespace.values() for f in (vars(v).values() if isinstance(v, type) else (v,))
                            if getattr(f, "__globals__", None) is namespace)   # its functions, its classes' methods
        return namespace[self.reference.__name__]


def _made_in_a_mutants_module() -> bool:
    """Whether the code making a Patched (the first caller outside this module) is a mutants module's: the
    grader's own mutant, which ``grader check`` runs as an answer, not a copy a learner made."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return frame is not None and str(frame.f_globals.get("__name__", "")).startswith(f"{__name__}.")


def _called_functions(fn: Callable[..., Any], module: Any) -> list[Callable[..., Any]]:
    """``fn`` (a function, or a class: its methods) and every plain function and class of ``module`` it
    uses, directly or through another (by the global names their code uses). A stage's wrapper is no
    plain function of the module: calls through it still reach the pipeline's stage (a substitute,
    when one is in force). A class is recompiled only when an edit is within it (or it is the
    reference): an edit of a function that only an unedited class calls changes nothing."""
    found: list[Callable[..., Any]] = []
    todo = [fn]
    while todo:
        current = todo.pop()
        if current in found:
            continue
        found.append(current)
        codes = [current.__code__] if not isinstance(current, type) else \
            [f.__code__ for f in vars(current).values() if isinstance(f, types.FunctionType)]
        while codes:
            code = codes.pop()
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
            for name in code.co_names:
                value = vars(module).get(name)
                if (isinstance(value, types.FunctionType) and value.__module__ == module.__name__
                        and not hasattr(value, "stage_name") and value.__closure__ is None) or \
                        (isinstance(value, type) and value.__module__ == module.__name__):
                    todo.append(value)
    return found


def _own_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The library's own function behind a swappable stage (``stage.library``) or a decorator."""
    return inspect.unwrap(getattr(fn, "library", fn))


def patched(exercise: str, name: str, reference: Callable[..., Any], *edits: Edit | tuple, hint: str,
            hidden_only: str | None = None, adapt: Callable[..., Any] | None = None) -> Patched:
    """Register, as the mutant ``name`` of ``exercise``, the library's ``reference`` with ``edits``
    applied to its source: each an :class:`Edit`, an ``(old, new)`` pair for the reference itself, or
    ``(helper, old, new)`` for a helper of its module that it calls. The hint and ``hidden_only`` are
    those of :func:`mutant`; ``adapt(edited, *args)`` calls the edited reference for the exercise's
    signature, where the exercise's function is not the library's (it must not be the mistake: a
    mutant has at least one edit)."""
    made = Patched(name, reference, tuple(e if isinstance(e, Edit) else Edit(*e[-2:], *e[:-2]) for e in edits),
                   adapt)
    mutant(exercise, hint, hidden_only)(made)
    return made
