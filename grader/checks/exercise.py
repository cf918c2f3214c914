"""The generic case runner behind every ``check_<exercise>`` function.

An :class:`Exercise` says where ground truth comes from (the real tool), which cases to run in
public and which to draw at random for the hidden test, which functions are forbidden while the
learner's code runs, and the hint to give when no known mistake explains a wrong result.
A wrong result, a crash or an edited input is named by the first known mistake (mutant) that gives
the same result, fails with the same error or makes the same edit; only then is its cause
established, and otherwise the report says plainly what happened.
:meth:`Exercise.check` runs it all on every device (some cases also on ``meta``: see ``on_meta``),
prints one line per group of cases, and raises ``AssertionError`` when anything failed, which is how
nbgrader scores the cell 0.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from .. import progress
from ..mutants import mutants_for
from .compare import changed, describe, kind_hint, mismatch
from .devices import META, clone, devices, to_device
from .ops import forbidden_ops
from .report import FAIL, PASS, PENDING, CheckReport, GroupOutcome
from .seed import hidden_seed
from .tripwire import ForbiddenCallError, captured_forbidden, tripwire, tripwires


TEMPORARY = re.compile(r"tmp[A-Za-z0-9_]{6,}")
IN_PLACE_HINT = ("return a new result and leave the inputs as they were, as the real tools do: "
                 "write x / s, not x /= s; methods ending in _ (x.div_, x.unsqueeze_) change the caller's tensor")


@dataclass(frozen=True)
class Case:
    args: tuple                  # positional arguments of the learner's function (on the CPU)
    note: str = ""               # what this case is about, shown when it fails
    raises: type[BaseException] | None = None  # an error case: the learner must raise this type


def one_line(error: BaseException) -> BaseException:
    """The error, shown by IPython as its one line, without a traceback into the grader's files:
    the printed report above it already says what failed and why (IPython renders an exception
    through its ``_render_traceback_`` when it has one; the error's type and message stay)."""
    error._render_traceback_ = lambda: [f"\x1b[0;31m{type(error).__name__}\x1b[0m: {error}"]  # type: ignore[attr-defined]
    return error


def _same_words(one: str, other: str) -> bool:
    """Two error messages that differ at most in the names of temporary folders (a compiler's message
    names the file it compiled) say the same thing."""
    return TEMPORARY.sub("tmp", one) == TEMPORARY.sub("tmp", other)


def call_directly(learner_fn: Callable[..., Any], *args: Any) -> Any:
    """The default way a check runs the learner's code: call it on the case's arguments."""
    return learner_fn(*args)


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
    numpy_allowed: bool = True                       # False: torch <-> numpy conversions fail the case
    extra_hints: dict[type, str] = field(default_factory=dict)  # exception type -> hint
    # How the learner's function is run on a case: by default called directly; an exercise on one
    # stage of a pipeline plugs the function into the library's pipeline here instead.
    call: Callable[..., Any] = call_directly
    cuda: bool = True            # False: the stage only runs on the CPU (a C kernel); no CUDA cases at all
    # Cases also run on the ``meta`` device (shapes, dtypes and devices, no data), public and hidden alike: a
    # result created on the CPU whatever the input's device is caught without a GPU (see devices.META).
    on_meta: Callable[[], list[Group]] | None = None
    in_place_hint: str = IN_PLACE_HINT  # given when an input changed and no known mistake explains how

    @property
    def name(self) -> str:
        return self.id.split(".")[-1]

    def check(self, learner_fn: Callable[..., Any], hidden: bool = False) -> None:
        """Run, print the report, and raise AssertionError if any group failed."""
        report = self.run(learner_fn, hidden=hidden)
        progress.record(self.id, report)  # the learner's course home reads it; never raises
        print(report.text())
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
        for device in [d for d in devices(cuda_available) if self.cuda or d.name == "cpu"]:
            for group in groups:
                if group.cpu_only and device.name != "cpu":
                    continue
                if not device.available:
                    report.outcomes.append(GroupOutcome(device.name, group.title, len(group.cases), PENDING,
                                                       f"pending: {device.reason}"))
                    continue
                report.outcomes.append(self._run_group(learner_fn, group, device.name))
        for group in (self.on_meta() if self.on_meta else []):
            report.outcomes.append(self._run_group(learner_fn, group, META))
        return report

    def _run_group(self, learner_fn: Callable[..., Any], group: Group, device: str) -> GroupOutcome:
        def fail(detail: str, hint: str) -> GroupOutcome:
            return GroupOutcome(device, group.title, len(group.cases), FAIL, detail, hint)

        captured = captured_forbidden(learner_fn, self.forbidden, exercise=self.name,
                                      also={self._reference_label: self.reference})
        if captured is not None:
            return fail(str(captured), self.hint)

        for number, case in enumerate(group.cases, start=1):
            args = to_device(case.args, device)
            where = f"case {number} of {len(group.cases)}" + (f" ({case.note})" if case.note else "")
            expected = self._expected(case, args)
            inputs = clone(args)  # the learner's own copy; ``args`` stays as the case made it
            try:
                with tripwires(self.forbidden, exercise=self.name), self._reference_out_of_reach(), \
                        forbidden_ops(self.forbidden_ops, self.numpy_allowed, exercise=self.name):
                    got = self.call(learner_fn, *inputs)
            except ForbiddenCallError as error:
                return fail(f"{where}: {error}", error.hint or self._diagnose_forbidden(args, error) or self.hint)
            except Exception as error:  # the learner's bug, reported; the check goes on
                if isinstance(error, NotImplementedError) and not str(error):  # the release's stub, untouched
                    return fail(f"{where}: your function still raises NotImplementedError",
                                "replace `raise NotImplementedError()` with your solution")
                if case.raises is not None and isinstance(error, case.raises):
                    continue
                hint = self._diagnose_error(args, error) or next(
                    (h for t, h in self.extra_hints.items() if isinstance(error, t)), self.hint)
                wanted = f" (expected {case.raises.__name__})" if case.raises else ""
                return fail(f"{where}: inputs {self._show(args)} raised {type(error).__name__}{wanted}: {error}", hint)
            edited = next((f"argument {i}: {c}" for i, (a, b) in enumerate(zip(args, inputs), start=1)
                           if (c := changed(a, b))), None)
            if edited:
                return fail(f"{where}: your function changed its input in place ({edited})",
                            self._diagnose_edit(args, edited) or self.in_place_hint)
            if case.raises is not None:
                return fail(f"{where}: inputs {self._show(args)} must raise {case.raises.__name__}, "
                            f"but your function returned {describe(got)}", self.hint)
            problem = mismatch(expected, got)
            if problem:
                return fail(f"{where}: inputs {self._show(args)}: {problem}", self._diagnose(args, expected, got))
        return GroupOutcome(device, group.title, len(group.cases), PASS)

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
            return self.reference(*clone(args))
        try:
            returned = self.reference(*clone(args))
        except Exception:
            return None
        raise RuntimeError(f"check_{self.name}: the case {case.note or case.args!r} expects "
                           f"{case.raises.__name__}, but the reference returned {describe(returned)}")

    def _diagnose(self, args: tuple, expected: Any, got: Any) -> str:
        """The hint of the first known mistake whose result equals the learner's; else a hint about
        the result's kind (type, dtype, device) when that is wrong; else the exercise's hint."""
        for wrong in mutants_for(self.id):
            try:
                theirs = self.call(wrong.fn, *clone(args))
            except Exception:
                continue
            if mismatch(theirs, got) is None:
                return wrong.hint
        return kind_hint(expected, got) or self.hint

    def _diagnose_error(self, args: tuple, error: BaseException) -> str | None:
        """The hint of the first known mistake that fails on these inputs with the same error (type and
        message): only then is the cause of a crash established."""
        for wrong in mutants_for(self.id):
            try:
                self.call(wrong.fn, *clone(args))
            except Exception as theirs:
                if type(theirs) is type(error) and _same_words(str(theirs), str(error)):
                    return wrong.hint
        return None

    def _diagnose_forbidden(self, args: tuple, error: ForbiddenCallError) -> str | None:
        """The hint of the first known mistake that reaches the same forbidden function the same way."""
        for wrong in mutants_for(self.id):
            try:
                with tripwires(self.forbidden, exercise=self.name), self._reference_out_of_reach(), \
                        forbidden_ops(self.forbidden_ops, self.numpy_allowed, exercise=self.name):
                    self.call(wrong.fn, *clone(args))
            except ForbiddenCallError as theirs:
                if str(theirs) == str(error):
                    return wrong.hint
            except Exception:
                continue
        return None

    def _diagnose_edit(self, args: tuple, edited: str) -> str | None:
        """The hint of the first known mistake that changes these inputs the same way."""
        for wrong in mutants_for(self.id):
            inputs = clone(args)
            try:
                self.call(wrong.fn, *inputs)
            except Exception:
                continue
            if next((f"argument {i}: {c}" for i, (a, b) in enumerate(zip(args, inputs), start=1)
                     if (c := changed(a, b))), None) == edited:
                return wrong.hint
        return None

    @staticmethod
    def _show(args: tuple) -> str:
        return ", ".join(describe(a, limit=60) for a in args)
