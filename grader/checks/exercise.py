"""The generic case runner behind every ``check_<exercise>`` function.

An :class:`Exercise` says where ground truth comes from (the real tool), which cases to run in
public and which to draw at random for the hidden test, which functions are forbidden while the
learner's code runs, and the hint to give when no known mistake explains a wrong result.
A failing case's hint is the hint of the first known mistake (mutant) that gives the learner's
result, raises the learner's error (same type and message) or makes the same edit of an input, on
that case, and, like the learner's answer, passes every case the answer passed before it (the
group's earlier cases and those of the groups before, on any device: a mistake that fails one of
them is not the learner's); only then is its cause established. Otherwise it is a fallback (the hint an exercise gives for an error type, the
result's kind, the exercise's own), and the report says plainly what happened. Only a bare
``raise NotImplementedError()`` is the release's stub.
:meth:`Exercise.check` runs it all on every device (some cases also on ``meta``: see ``on_meta``),
prints one line per group of cases, and raises ``AssertionError`` when anything failed, which is how
nbgrader scores the cell 0.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import torch

from tensorcraft.trees import leaves

from ..kernel import progress
from ..mutants import mutants_for
from .compare import changed, describe, difference, kind_hint, mismatch
from .devices import META, clone, devices, to_device
from .ops import forbidden_ops
from .record import show
from .report import (CHANGED_INPUT, FAIL, FORBIDDEN, NO_ERROR, NOT_IMPLEMENTED, PASS, PENDING, RAISED, WRONG_ERROR,
                     WRONG_RESULT, CheckReport, GroupOutcome)
from . import truths
from .reach import answer_helpers, answers_out_of_reach
from .seed import hidden_seed
from .tripwire import ForbiddenCallError, captured_forbidden, tripwire, tripwires


class Diagnosis(str):
    """A known mistake's hint that also names the mistake (``mutant``): the check shows the text, and
    records the name (``GroupOutcome.mutant``) for the class report, both from the one match."""

    def __new__(cls, hint: str, mutant: str) -> "Diagnosis":
        made = super().__new__(cls, hint)
        made.mutant = mutant
        return made


STUB_HINT = "replace `raise NotImplementedError()` with your solution"


def is_stub(error: BaseException) -> bool:
    """The release's stub raises a bare ``NotImplementedError()``. One with a message is a deliberate
    error like any other (einops raises one for the mean of integers), which a case may expect."""
    return isinstance(error, NotImplementedError) and not error.args


TEMPORARY = re.compile(r"tmp[A-Za-z0-9_]{6,}")


IN_PLACE_HINT = ("return a new result and leave the inputs as they were, as the real tools do: "
                 "write x / s, not x /= s; methods ending in _ (x.div_, x.unsqueeze_) change the caller's tensor")


@dataclass(frozen=True)
class Case:
    args: tuple                  # positional arguments of the learner's function (on the CPU)
    note: str = ""               # what this case is about, shown when it fails
    raises: type[BaseException] | None = None  # an error case: the learner must raise this type
    shown: str = ""              # the case as the learner would write it (a call, an equation); default: made from args


def one_line(error: BaseException) -> BaseException:
    """The error, shown by IPython as its one line, without a traceback into the grader's files:
    the printed report above it already says what failed and why (IPython renders an exception
    through its ``_render_traceback_`` when it has one; the error's type and message stay)."""
    error._render_traceback_ = lambda: [f"\x1b[0;31m{type(error).__name__}\x1b[0m: {error}"]  # type: ignore[attr-defined]
    return error


COMPILER_ERROR = re.compile(r":\d+:\d+: error: (.*)")


def _same_words(one: str, other: str) -> bool:
    """Two error messages that differ at most in the names of temporary folders (a compiler's message
    names the file it compiled) say the same thing; so do two C compilers' reports with the same errors
    at other places of other sources (``'inff' undeclared``: the same mistake, printed by two printers)."""
    errors = set(COMPILER_ERROR.findall(one)), set(COMPILER_ERROR.findall(other))
    if errors[0] and errors[1]:
        return errors[0] == errors[1]
    return TEMPORARY.sub("tmp", one) == TEMPORARY.sub("tmp", other)


def call_directly(learner_fn: Callable[..., Any], *args: Any) -> Any:
    """The default way a check runs the learner's code: call it on the case's arguments."""
    return learner_fn(*args)


def as_call(name: str) -> Callable[..., str]:
    """An Exercise's ``show`` for a stage that the pipeline calls with the case's own arguments:
    the case shown as the call ``name(...)``."""
    return lambda *args: f"{name}({', '.join(describe(a, 60) for a in args)})"


@dataclass(frozen=True)
class Group:
    title: str                   # e.g. "vectors of different lengths"
    cases: list[Case]
    cpu_only: bool = False       # cases no CUDA kernel exists for (an integer matrix product): not run on CUDA


def on_meta(public: Callable[[], list[Group]], *positions: tuple[int, int]) -> Callable[[], list[Group]]:
    """For ``Exercise.on_meta``: the public cases at ``positions`` ((group, case) pairs; default the first
    case of the first group), as one group run on the meta device."""
    def groups() -> list[Group]:
        cases = public()
        chosen = [cases[g].cases[c] for g, c in (positions or ((0, 0),))]
        return [Group("on the meta device: new tensors on the inputs' device (shapes only, no GPU needed)", chosen)]
    return groups


@dataclass
class Exercise:
    id: str                                          # "<checks module>.<name>", e.g. "nb00_welcome.outer"
    reference: Callable[..., Any]                    # ground truth, computed with the real tool
    public: Callable[[], list[Group]]                # the cases a learner sees
    hidden: Callable[[torch.Generator], list[Group]] # random cases drawn from a seeded generator
    hint: str                                        # given when no mutant explains a wrong result
    forbidden: tuple[str, ...] = ()                  # dotted names replaced by tripwires
    forbidden_ops: tuple[str, ...] = ()              # operations ("outer") caught by any name or route
    # dotted names of more helpers that compute the answer (beyond what the forbidden library functions
    # call): out of reach of the learner's code under any name while it runs (checks/reach.py)
    answers: tuple[str, ...] = ()
    given: tuple[str, ...] = ()   # library helpers the statement hands the learner: never out of reach
    numpy_allowed: bool = True                       # False: torch <-> numpy conversions fail the case
    extra_hints: dict[type, str] = field(default_factory=dict)  # exception type -> hint
    # How the learner's function is run on a case: by default called directly; an exercise on one
    # stage of a pipeline plugs the function into the library's pipeline here instead.
    call: Callable[..., Any] = call_directly
    cuda: bool = True            # False: the stage only runs on the CPU (a C kernel); no CUDA cases at all
    # How a failed case is shown to the learner: ``show(*args)`` writes it as they would (a call, an
    # equation, a program's source); by default a direct call is shown as one, and a case run through
    # ``call`` by its plain arguments (tensors by dtype and shape), its note saying the rest.
    show: Callable[..., str] | None = None
    # Names of the items of a result that ``call`` makes up (("your answer", "tc.einsum's result")):
    # a difference in item 0 is then said as "your answer: ...", not "result[0]: ...".
    parts: tuple[str, ...] = ()
    # Cases also run on the ``meta`` device (shapes, dtypes and devices, no data), public and hidden alike: a
    # result created on the CPU whatever the input's device is caught without a GPU (see devices.META).
    on_meta: Callable[[], list[Group]] | None = None
    in_place_hint: str = IN_PLACE_HINT  # given when an input changed and no known mistake explains how
    # True: the public cases' truths are computed once per grading worker, not per learner (checks/truths.py)
    truth_once: bool = False
    # label -> how to compute it: parts of the reference that depend on the label alone, not on a case's
    # tensors, which hidden cases share; kept once per grading worker too (truths.shared), with truth_once
    shared_truths: Callable[[], dict[str, Callable[[], Any]]] | None = None

    @property
    def name(self) -> str:
        return self.id.split(".")[-1]

    def check(self, learner_fn: Callable[..., Any], hidden: bool = False) -> None:
        """Run, print the report, and raise AssertionError if any group failed."""
        report = self.run(learner_fn, hidden=hidden)
        progress.record(self.id, report)  # the learner's course home reads it; never raises
        show(self.id, report)  # the text, and in a kernel the same outcome as data (checks/record.py)
        if report.failed:
            raise one_line(AssertionError(f"check_{self.name}: {report.failed_summary(with_pending=False)} (see the lines marked {FAIL} above)"))

    def run(self, learner_fn: Callable[..., Any], hidden: bool = False, *, seed: int | None = None,
            cuda_available: bool | None = None) -> CheckReport:
        """Run every group on every device and return the report, printing nothing."""
        if not callable(learner_fn):
            raise TypeError(f"check_{self.name} expects your function itself, got {describe(learner_fn)}")
        if hidden:
            seed = hidden_seed() if seed is None else seed
            groups = self.hidden(torch.Generator().manual_seed(seed))
        else:
            seed, groups = None, self.public()
        report = CheckReport(f"check_{self.name}", hidden=hidden, seed=seed)
        passed: list = []   # (args, expected, case) of every case the learner's answer passed so far
        for device in [d for d in devices(cuda_available) if self.cuda or d.name == "cpu"]:
            for group in groups:
                if device.name != "cpu" and (group.cpu_only or not _holds_tensor([c.args for c in group.cases])):
                    continue  # without a tensor in its cases, nothing tells the code the device: no CUDA case
                if not device.available:
                    report.outcomes.append(GroupOutcome(device.name, group.title, len(group.cases), PENDING,
                                                       f"pending: {device.reason}"))
                    continue
                report.outcomes.append(self._run_group(learner_fn, group, device.name, passed))
        for group in (self.on_meta() if self.on_meta else []):
            report.outcomes.append(self._run_group(learner_fn, group, META, passed))
        return report

    def _run_group(self, learner_fn: Callable[..., Any], group: Group, device: str,
                   passed: list | None = None) -> GroupOutcome:
        """``passed``: the cases of earlier groups the answer passed (evidence for the diagnosis); this
        group's passed cases are added to it."""
        passed = [] if passed is None else passed
        before = len(passed)
        earlier: list[tuple[tuple, Any, Case]] = list(passed)  # cases passed before: earlier groups', then this group's

        def fail(reason: str, what: str, hint: str, number: int = 0, case: Case | None = None, args: tuple = (),
                 error: BaseException | None = None) -> GroupOutcome:
            passed.extend(earlier[before:])
            shown = self._shown(case, args) if case is not None else ""
            which = f"case {number} of {len(group.cases)}" + (f" ({case.note})" if case and case.note else "")
            detail = f"{which}: {shown}: {what}" if case is not None else what
            return GroupOutcome(device, group.title, len(group.cases), FAIL, detail, hint, case=number, shown=shown,
                                reason=reason, difference=what, error=type(error).__name__ if error else "",
                                note=case.note if case else "", mutant=getattr(hint, "mutant", ""))

        answer_helpers(self)  # read before the tripwires replace their names (checks/reach.py)
        captured = captured_forbidden(learner_fn, self.forbidden, exercise=self.name,
                                      also={self._reference_label: self.reference})
        if captured is not None:
            return fail(FORBIDDEN, str(captured), self._diagnose_capture(str(captured)) or self.hint)

        for number, case in enumerate(group.cases, start=1):
            args = to_device(case.args, device)
            expected = self._expected(case, args)
            inputs = clone(args)  # the learner's own copy; ``args`` stays as the case made it
            at = {"number": number, "case": case, "args": args}
            try:
                with self._guarded(), answers_out_of_reach(self, learner_fn):
                    got = self.call(learner_fn, *inputs)
            except Exception as error:  # the learner's bug, reported; the check goes on
                if is_stub(error):
                    return fail(NOT_IMPLEMENTED, "your function still raises NotImplementedError", STUB_HINT,
                                error=error, **at)
                if isinstance(error, ForbiddenCallError):
                    return fail(FORBIDDEN, str(error), self._diagnose_error(args, error, earlier) or error.hint or self.hint,
                                error=error, **at)
                if case.raises is not None and isinstance(error, case.raises):
                    earlier.append((args, expected, case))
                    continue
                hint = self._diagnose_error(args, error, earlier) or next(
                    (h for t, h in self.extra_hints.items() if isinstance(error, t)), self.hint)
                wanted = f" (expected {case.raises.__name__})" if case.raises else ""
                return fail(WRONG_ERROR if case.raises else RAISED,
                            f"raised {type(error).__name__}{wanted}: {_first_line(error)}", hint, error=error, **at)
            edited = _edit(args, inputs)
            if edited:
                return fail(CHANGED_INPUT, f"your function changed its input in place ({edited})",
                            self._diagnose_edit(args, edited, earlier) or self.in_place_hint, **at)
            if case.raises is not None:
                return fail(NO_ERROR, f"must raise {case.raises.__name__}, but your function returned "
                                      f"{describe(got, 80)}", self._known_result(args, got, earlier) or self.hint, **at)
            found = difference(expected, got)
            if found:
                return fail(WRONG_RESULT, found.text(self.parts), self._diagnose(args, expected, got, earlier), **at)
            earlier.append((args, expected, case))
        passed.extend(earlier[before:])
        return GroupOutcome(device, group.title, len(group.cases), PASS)

    def _shown(self, case: Case, args: tuple) -> str:
        """The case as the learner would write it (see ``Case.shown`` and ``Exercise.show``)."""
        if case.shown:
            return case.shown
        if self.show is not None:
            try:
                return self.show(*args)
            except Exception:   # a display helper never costs the learner their report
                pass
        if self.call is call_directly:
            return f"{self.name}({', '.join(describe(a, 160) for a in args)})"
        plain = [describe(a, 160) for a in args if _plain(a)]
        return f"inputs {', '.join(plain)}" if plain else ""

    @property
    def _reference_label(self) -> str:
        return f"the reference answer of check_{self.name}"

    @contextlib.contextmanager
    def _reference_out_of_reach(self) -> Iterator[None]:
        """While the learner's code runs, this exercise's own ground truth is a tripwire too: the
        checks module is importable from the notebook, and ``EXERCISE.reference(...)`` must not pass."""
        reference = self.reference
        self.reference = tripwire(self._reference_label, self.name)
        try:
            yield
        finally:
            self.reference = reference

    def _expected(self, case: Case, args: tuple) -> Any:
        """Ground truth from the reference; for an error case, proof that the reference fails too."""
        if case.raises is None:
            if self.truth_once and (kept := truths.recall(self, args)) is not truths.MISSING:
                return kept
            return self.reference(*clone(args))
        try:
            returned = self.reference(*clone(args))
        except Exception:
            return None
        raise RuntimeError(f"check_{self.name}: the case {case.note or case.args!r} expects "
                           f"{case.raises.__name__}, but the reference returned {describe(returned)}")

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        """What the learner's code runs under: the tripwires, the forbidden operations, and this
        exercise's reference out of reach."""
        with tripwires(self.forbidden, exercise=self.name), self._reference_out_of_reach(), \
                forbidden_ops(self.forbidden_ops, self.numpy_allowed, exercise=self.name):
            yield

    def _diagnose(self, args: tuple, expected: Any, got: Any, earlier: list = ()) -> str:
        """The hint of the first known mistake whose result equals the learner's; else a hint about
        the result's kind (type, dtype, device) when that is wrong; else the exercise's hint."""
        return self._known_result(args, got, earlier) or kind_hint(expected, got) or self.hint

    def _known_mistakes(self) -> list:
        """The known mistakes (mutants) a failure may be diagnosed as, in order."""
        return mutants_for(self.id)

    def _explains(self, wrong, earlier: list) -> bool:
        """Whether a known mistake that matches the learner's failure passes, like the learner's answer,
        every case it passed before (``earlier``): one that fails such a case is not the learner's mistake.
        Asked only of a mistake that matches, so a diagnosis costs one call per mistake, not one per case."""
        return all(self._passes(wrong.fn, args, expected, case) for args, expected, case in earlier)

    def _passes(self, fn: Callable[..., Any], args: tuple, expected: Any, case: Case) -> bool:
        try:
            with self._guarded():
                got = self.call(fn, *clone(args))
        except Exception as error:
            return case.raises is not None and isinstance(error, case.raises)
        return case.raises is None and mismatch(expected, got) is None

    def _known_result(self, args: tuple, got: Any, earlier: list = ()) -> str | None:
        """The hint of the first known mistake whose result on this case equals the learner's."""
        for wrong in self._known_mistakes():
            try:
                theirs = self.call(wrong.fn, *clone(args))
            except Exception:
                continue
            if mismatch(theirs, got) is None and self._explains(wrong, earlier):
                return Diagnosis(wrong.hint, wrong.name)
        return None

    def _diagnose_error(self, args: tuple, error: BaseException, earlier: list = ()) -> str | None:
        """The hint of the first known mistake that raises the learner's error (same type, same
        message) on this case, run as the learner's code is; None when no known mistake does, so
        that a fallback names only the error's established cause, or none."""
        for wrong in self._known_mistakes():
            try:
                with self._guarded():
                    self.call(wrong.fn, *clone(args))
            except Exception as theirs:
                if type(theirs) is type(error) and _same_words(str(theirs), str(error)) and self._explains(wrong, earlier):
                    return Diagnosis(wrong.hint, wrong.name)
        return None

    def _diagnose_capture(self, found: str) -> str | None:
        """The hint of the first known mistake that keeps the same forbidden function as the learner's."""
        for wrong in mutants_for(self.id):
            theirs = captured_forbidden(wrong.fn, self.forbidden, exercise=self.name,
                                        also={self._reference_label: self.reference})
            if theirs is not None and str(theirs) == found:
                return Diagnosis(wrong.hint, wrong.name)
        return None

    def _diagnose_edit(self, args: tuple, edited: str, earlier: list = ()) -> str | None:
        """The hint of the first known mistake that changes these inputs the same way."""
        for wrong in self._known_mistakes():
            inputs = clone(args)
            try:
                with self._guarded():
                    self.call(wrong.fn, *inputs)
            except Exception:
                continue
            if _edit(args, inputs) == edited and self._explains(wrong, earlier):
                return Diagnosis(wrong.hint, wrong.name)
        return None


def _edit(args: tuple, inputs: tuple) -> str | None:
    """Which argument the call changed in place, and how; None when none changed."""
    return next((f"argument {i}{c if c.startswith('[') else ': ' + c}"
                 for i, (a, b) in enumerate(zip(args, inputs), start=1) if (c := changed(a, b))), None)


def _first_line(error: BaseException, most: int = 3) -> str:
    """An error's message, its first ``most`` lines (some of torch's run to a page)."""
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    return "\n".join(lines[:most]) + (" ..." if len(lines) > most else "")


def _holds_tensor(value: Any) -> bool:
    return any(isinstance(leaf, torch.Tensor) for leaf in leaves(value))


def _plain(value: Any, depth: int = 0) -> bool:
    """A value a learner would recognise as written: a tensor, a string, a number, a shape, a dict
    of lengths, an object that prints as its source (a program); not a check's own encoding of a
    program (tuples of tuples of tuples...)."""
    if isinstance(value, (torch.Tensor, np.ndarray, str, int, float, bool, type(None))):
        return True
    if not isinstance(value, (tuple, list, dict)):   # "<function f at 0x...>" says nothing
        return type(value).__repr__ is not object.__repr__ and not repr(value).startswith("<")
    if isinstance(value, (tuple, list)):
        return depth < 2 and all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return depth < 1 and all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False
