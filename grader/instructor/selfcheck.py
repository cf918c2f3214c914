"""`python -m grader check`: prove the course grades what it should, before learners see it.

For every notebook: the solution scores full marks through the real autograde chains; the
untouched release scores zero, with every test cell failing cleanly on an AssertionError from a
check (not on a crash of the grader); every mutant written as a patch of the library's source
still applies (its old text occurs exactly once); every known-wrong answer (mutant) of every exercise is
rejected by that exercise's PUBLIC cases (a tick in the notebook means full marks; a mutant marked
``hidden_only`` with a reason, by the hidden ones), and the group that rejects it first shows the
mutant's own hint (two mutants whose results agree there "collide": one mistake, one diagnosis);
an exercise without mutants is an error; the release's bare ``raise NotImplementedError()`` is
reported as the stub, and a NotImplementedError with a message is not; the committed learner
notebook is what a fresh build produces. The solutions and releases of all the notebooks checked run
in one autograde batch (:func:`grade_runs`), one worker per core, each busy to its end.
"""
from __future__ import annotations

import importlib
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.utils import is_grade

from .autograde import Summary, autograde
from .build import build, solution_files
from ..course import NOTEBOOKS, SOLUTIONS, Course
from ..checks.exercise import STUB_HINT
from ..checks.report import GroupOutcome
from ..mutants import Mutant, mutants_for
from ..worker.solution_run import shortfall

SOLUTION, RELEASE = "solution", "release"
MUTANT_SEED = 0   # hidden cases for mutants are drawn from a fixed seed, so a check run is repeatable


@dataclass
class NotebookVerdict:
    notebook: str
    points: float = 0
    solution_score: float | None = None
    release_score: float | None = None
    mutants_rejected: int = 0
    mutants_total: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


def checks_module(assignment: str):
    """grader.checks.nb<assignment>, e.g. 00_welcome -> grader.checks.nb00_welcome."""
    return importlib.import_module(f"grader.checks.nb{assignment}")


def check_mutants(assignment: str, verdict: NotebookVerdict) -> None:
    try:
        exercises = checks_module(assignment).EXERCISES
    except (ModuleNotFoundError, AttributeError) as error:
        verdict.problems.append(f"no exercises for {assignment}: grader.checks.nb{assignment}.EXERCISES ({error})")
        return
    for exercise in exercises.values():
        _check_stub_fails_cleanly(exercise, verdict)
        _check_messaged_not_implemented_is_no_stub(exercise, verdict)
        mutants = mutants_for(exercise.id)
        if not mutants:
            verdict.problems.append(f"exercise {exercise.id} has no mutants in grader/mutants/nb{assignment}.py: "
                                    f"add at least one @mutant({exercise.id!r}, hint=...), a plausible wrong answer")
        for wrong in mutants:
            verdict.mutants_total += 1
            problem = patch_problem(exercise, wrong) or mutant_problem(exercise, wrong, mutants)
            if problem is None:
                verdict.mutants_rejected += 1
            else:
                verdict.problems.append(problem)


def patch_problem(exercise, wrong: Mutant) -> str | None:
    """Why a mutant written as a patch of the library's source (``grader.mutants.patched``) no longer
    applies (its old text is not there exactly once, or the edit changes nothing), or None."""
    problem = getattr(wrong.fn, "problem", None)
    if problem is None:
        return None
    return (f"mutant {wrong.name} of {exercise.id} is a patch of {wrong.fn.reference.__module__}."
            f"{wrong.fn.reference.__qualname__} that no longer applies: {problem}; edit the patch to the "
            "library's source as it is now")


def mutant_problem(exercise, wrong: Mutant, mutants: list[Mutant]) -> str | None:
    """Why ``wrong`` is not rejected as it must be, or None. A mutant must fail the PUBLIC cases (a tick
    in the notebook means full marks), unless it is marked hidden-only with a reason; and the first group
    that rejects it must show its own hint (one mistake, one diagnosis), not another mutant's."""
    public = exercise.run(wrong.fn)
    if wrong.hidden_only is not None:
        if public.failed:
            return (f"mutant {wrong.name} of {exercise.id} is marked hidden_only ({wrong.hidden_only}), but the "
                    "public cases reject it: remove the mark")
        hidden = exercise.run(wrong.fn, hidden=True, seed=MUTANT_SEED)
        return None if hidden.failed else _passes(exercise, wrong)
    if not public.failed:
        hidden = exercise.run(wrong.fn, hidden=True, seed=MUTANT_SEED)
        if not hidden.failed:
            return _passes(exercise, wrong)
        return (f"mutant {wrong.name} of {exercise.id} is rejected only by the hidden cases (first by "
                f"{_where(hidden.failed[0])}): a learner would see every public group pass and lose the points "
                "at grading; add a public case that rejects it, or mark it @mutant(..., hidden_only='why') "
                "where only hidden cases can (an answer hard-coded to the public cases)")
    return diagnosis_problem(exercise, wrong, public.failed[0], mutants)


def diagnosis_problem(exercise, wrong: Mutant, first: GroupOutcome, mutants: list[Mutant]) -> str | None:
    """None when the group that first rejects ``wrong`` shows ``wrong``'s own hint; else which hint it shows."""
    if first.hint == wrong.hint:
        return None
    other = next((m for m in mutants if m.hint == first.hint), None)
    if other is not None:
        return (f"mutants {wrong.name} and {other.name} of {exercise.id} collide on {_where(first)}: "
                f"{wrong.name} is shown {other.name}'s hint; add a public case on which their results "
                "differ (before this one), or merge their hints if they are one mistake")
    return (f"mutant {wrong.name} of {exercise.id} is shown another hint than its own on {_where(first)}: "
            f"{first.hint!r}; make the case show its own (a result or an error no other answer gives), "
            "or give the mutant that hint if it names the mistake")


def _where(outcome: GroupOutcome) -> str:
    return f"group {outcome.title!r} ({outcome.detail[:160]})"


def _passes(exercise, wrong: Mutant) -> str:
    return (f"mutant {wrong.name} of {exercise.id} passes its checks: add a case on "
            "which it differs from the reference, or remove it if it is not wrong")


CHECK_CALL = re.compile(r"\bcheck_(\w+)\(")


def check_exercises_listed(course: Course, assignment: str, verdict: NotebookVerdict) -> None:
    """Every check_<name> a graded cell calls must be in EXERCISES, or its mutants never run."""
    try:
        listed = set(checks_module(assignment).EXERCISES)
    except (ModuleNotFoundError, AttributeError):
        return  # check_mutants reports it
    notebook = nbformat.read(course.source(assignment), as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code" and is_grade(cell):
            for name in sorted(set(CHECK_CALL.findall(cell.source)) - listed):
                verdict.problems.append(
                    f"test cell {cell.metadata['nbgrader']['grade_id']} calls check_{name}, but "
                    f"grader.checks.nb{assignment}.EXERCISES has no {name!r}: its mutants are never tried")


def _stub(*args, **kwargs):
    raise NotImplementedError()


def _deliberate(*args, **kwargs):
    raise NotImplementedError("this operation is not available for these inputs")


def _check_stub_fails_cleanly(exercise, verdict: NotebookVerdict) -> None:
    """The release's stub must fail the public and the hidden check with a report that says it is the
    stub (not a crash of the check)."""
    for hidden in (False, True):
        where = f"the {'hidden' if hidden else 'public'} check of {exercise.id}"
        try:
            report = exercise.run(_stub, hidden=hidden, seed=MUTANT_SEED if hidden else None)
        except Exception as error:
            verdict.problems.append(f"{where} crashed on the release's stub: {type(error).__name__}: {error}")
            continue
        if not report.failed:
            verdict.problems.append(f"{where} passes the stub")
        elif any(o.hint != STUB_HINT for o in report.failed):
            verdict.problems.append(f"{where} does not tell the release's stub as a stub: "
                                    f"{_where(next(o for o in report.failed if o.hint != STUB_HINT))}")


def _check_messaged_not_implemented_is_no_stub(exercise, verdict: NotebookVerdict) -> None:
    """A NotImplementedError with a message is a deliberate error (einops raises one for an integer
    mean), never reported as the unreplaced stub: it fails a case as any error does, or passes one
    that expects it."""
    report = exercise.run(_deliberate)
    if any(o.hint == STUB_HINT for o in report.failed):
        verdict.problems.append(f"the public check of {exercise.id} reports a NotImplementedError with a message "
                                "as the release's stub: only a bare `raise NotImplementedError()` is the stub")


def _graded_errors(notebook: Path) -> list[tuple[str, list[str]]]:
    """(grade_id, error names) of every graded cell of an executed notebook."""
    nb = nbformat.read(notebook, as_version=4)
    return [(c.metadata["nbgrader"]["grade_id"], [o.get("ename", "") for o in c.outputs if o.output_type == "error"])
            for c in nb.cells if c.cell_type == "code" and is_grade(c)]


def _all_errors(notebook: Path, graded: bool = True) -> list[str]:
    """Every error output of an executed notebook (only those of ungraded cells unless ``graded``)."""
    nb = nbformat.read(notebook, as_version=4)
    return [f"cell {i + 1}: {o.get('ename')}: {o.get('evalue')}" for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and (graded or not is_grade(c))
            for o in c.get("outputs", []) if o.output_type == "error"]


def grade_runs(course: Course, assignments: list[str], folder: Path, timeout: int) -> Summary:
    """The solution and the untouched release of each of ``assignments``, graded in ONE autograde batch
    (learners ``solution`` and ``release`` in ``folder``): one worker pool whose fork servers start
    once, and every worker busy to the end (a batch per notebook started them anew each time and left
    one idle while the longer of its two runs finished). One worker per core, as autograde's default."""
    for assignment in assignments:
        for learner, source in ((SOLUTION, course.source(assignment)), (RELEASE, course.release(assignment))):
            (folder / learner).mkdir(parents=True, exist_ok=True)
            (folder / learner / f"{assignment}.ipynb").write_bytes(source.read_bytes())
    # the course's own solutions and mutants: sandboxed where a sandbox can be had, else run as they are
    workers = min(os.cpu_count() or 2, 2 * len(assignments))
    return autograde(folder, course, workers=workers, timeout=timeout, feedback=False, progress=False,
                     isolation="auto", preflight=False)   # the solution is graded here anyway


def check_notebook(course: Course, assignment: str, workspace: Path, timeout: int,
                   graded: Summary | None = None) -> NotebookVerdict:
    """The verdict on one notebook; ``graded``: the batch (:func:`grade_runs`) that ran its solution and
    release, else they run here. Its seconds: those two runs and its own checks."""
    verdict = NotebookVerdict(assignment)
    if graded is None:
        graded = grade_runs(course, [assignment], workspace / f"submissions-{assignment}", timeout)
    started = time.perf_counter()
    outcomes = [o for o in graded.outcomes if o.submission.assignment == assignment]
    ran = sum(o.timings.get("worker total", 0.0) for o in outcomes)
    broken = next((shortfall(nbformat.read(course.autograded(o.submission.learner, assignment), as_version=4))
                   for o in outcomes if o.submission.learner == SOLUTION and o.status != "error"
                   and o.score != o.max_score), None)
    if broken:      # the cause in one line: what fails after it (the release, every cell) would say nothing more
        verdict.solution_score = next(o.score for o in outcomes if o.submission.learner == SOLUTION)
        verdict.problems.append(f"the solution does not score full marks where learners' notebooks run: {broken}")
        verdict.seconds = ran + time.perf_counter() - started
        return verdict
    for outcome in outcomes:
        if outcome.status == "error":
            verdict.problems.append(f"{outcome.submission.learner}: {'; '.join(outcome.notes)}")
            continue
        verdict.points = outcome.max_score or 0
        autograded = course.autograded(outcome.submission.learner, assignment)
        if outcome.submission.learner == SOLUTION:
            verdict.solution_score = outcome.score
            if outcome.score != outcome.max_score:
                verdict.problems.append(f"the solution scores {outcome.score:g}/{outcome.max_score:g}")
            verdict.problems += [f"the solution raised in {e}" for e in _all_errors(autograded)]
        else:
            verdict.release_score = outcome.score
            if outcome.score != 0:
                verdict.problems.append(f"the untouched release scores {outcome.score:g}, not 0")
            verdict.problems += [f"the release raised outside its test cells, in {e}"
                                 for e in _all_errors(autograded, graded=False)]
            for grade_id, errors in _graded_errors(autograded):
                if errors != ["AssertionError"]:
                    verdict.problems.append(f"release cell {grade_id} failed with {errors or 'no error'}, "
                                            "not one AssertionError from its check")
    if verdict.points == 0:
        verdict.problems.append("the notebook has no graded points")
    check_mutants(assignment, verdict)
    check_exercises_listed(course, assignment, verdict)
    committed = NOTEBOOKS / f"{assignment}.ipynb"
    fresh = workspace / "notebooks" / f"{assignment}.ipynb"
    if not committed.exists() or committed.read_bytes() != fresh.read_bytes():
        verdict.problems.append(f"{committed} is not what build produces: run `python -m grader build`")
    verdict.seconds = ran + time.perf_counter() - started
    return verdict


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def table(verdicts: list[NotebookVerdict]) -> str:
    lines = [f"{'notebook':<24} {'points':>6} {'solution':>8} {'release':>7} {'mutants rejected':>16} {'seconds':>7}  ok"]
    for v in verdicts:
        lines.append(f"{v.notebook:<24} {v.points:>6g} {_score(v.solution_score):>8} {_score(v.release_score):>7} "
                     f"{f'{v.mutants_rejected}/{v.mutants_total}':>16} {v.seconds:>7.1f}  {'✓' if not v.problems else '✗'}")
    return "\n".join(lines)


def run_check(only: list[str] | None = None, timeout: int = 60, solutions: Path = SOLUTIONS) -> list[NotebookVerdict]:
    """Check every notebook (or those in ``only``) in a throw-away course directory."""
    with tempfile.TemporaryDirectory(prefix="grader-check-") as temporary:
        workspace = Path(temporary)
        course = Course(workspace / "course")
        build(course, solutions, workspace / "notebooks", only)
        assignments = [s.stem for s in solution_files(solutions) if not only or s.stem in only]
        graded = grade_runs(course, assignments, workspace / "submissions", timeout)
        return [check_notebook(course, a, workspace, timeout, graded) for a in assignments]
