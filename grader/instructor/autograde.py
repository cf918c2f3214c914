"""`python -m grader autograde SUBMISSIONS`: grade a class in parallel, resumably.

Per submission: the parent copies it into the course directory (nbgrader's
``submitted/<learner>/<assignment>/``) and registers it in the gradebook; a worker process
executes it (a ``job.GradingJob`` run by ``execute.execute_submission``: nbgrader's configured chains, reading the gradebook
only); the parent writes the autograded notebook, runs the chain's gradebook writers (nbgrader's
SaveAutoGrades and AssignLatePenalties: the one writer of the SQLite gradebook), then records the
submission as done. A ``timestamp.txt`` beside a submitted notebook is its hand-in time, as in
nbgrader's submitted/ folders: with the assignment's due date (``nbgrader db assignment add NAME
--duedate=...``) it sets the late penalty of the configured ``LateSubmissionPlugin``. A rerun skips every submission recorded as done
whose file and whose assignment's source (its tests) have not changed since, so a run killed
half-way resumes where it stopped and loses nothing it had finished. Afterwards: the CSV of scores
and the feedback HTML.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import time
import warnings
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook
from nbgrader.utils import parse_utc
from tqdm import tqdm

from ..course import DEFAULT_COURSE, Course, put_python_scripts_on_path
from ..worker.execute import Executed, execute_submission, start_fork_server, start_worker, worker_context
from .export import CSV_NAME, lateness, write_csv
from .feedback import feedback_exporter, stale_feedback, write_feedback
from ..files import copy_atomically, write_atomically
from ..worker.job import GradingJob, nbgrader_resources
from ..worker.compile_cache import cache_path, masked_paths, warm_cache
from ..worker.chains import cell_timeout, course_config, gradebook_writers, run
from .preflight import start_check
from ..worker import fork_client
from ..worker.sandbox import NoSandboxError, unavailable
from .submissions import Submission, find_submissions
from ..worker.timings import Timings


@dataclass
class Outcome:
    submission: Submission
    status: str                 # "graded", "skipped" (already done) or "error"
    score: float | None = None
    max_score: float | None = None
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)   # the worker's seconds per step (grader.worker.timings)


@dataclass
class Summary:
    outcomes: list[Outcome]
    skipped_files: list[str]
    csv: Path | None
    feedback: list[Path]
    seconds: float
    timings: dict[str, float] = field(default_factory=dict)   # the parent's seconds per step (grader.worker.timings)

    @property
    def errors(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "error"]


# ---------------------------------------------------------------- the record of what is done

def _done_marker(course: Course, submission: Submission) -> Path:
    return course.root / "grader_state" / submission.learner / f"{submission.assignment}.json"


def _config_file(course: Course) -> Path:
    return course.root / "nbgrader_config.py"


def _timestamp_file(submission: Submission) -> Path:
    """Where a submission's hand-in time is read from: ``timestamp.txt`` in the notebook's folder."""
    return submission.path.with_name("timestamp.txt")


def _hand_in_time(submission: Submission) -> datetime.datetime | None:
    """The time in the submission's timestamp.txt, read as nbgrader reads it (parse_utc; a time
    without a zone is UTC); None without one. ValueError for a time it cannot read."""
    file = _timestamp_file(submission)
    text = file.read_text().strip() if file.is_file() else ""
    if not text:
        return None
    try:
        return parse_utc(text)
    except (ValueError, OverflowError) as error:
        raise ValueError(f"{file}: not a time nbgrader can read ({text[:40]!r}: {error}); write it as "
                         "'2027-01-31 17:05:00 UTC'") from None


def _fingerprint(course: Course, submission: Submission) -> dict[str, str]:
    """What a grade depends on: the learner's file, its hand-in time, and the assignment's source (its tests)."""
    source = hashlib.sha256(course.source(submission.assignment).read_bytes()).hexdigest()
    fingerprint = {"submission_sha256": submission.sha256(), "source_sha256": source}
    if _timestamp_file(submission).is_file():
        fingerprint["timestamp"] = _timestamp_file(submission).read_text().strip()
    return fingerprint


def _is_done(course: Course, submission: Submission) -> bool:
    marker, autograded = _done_marker(course, submission), course.autograded(submission.learner, submission.assignment)
    if not marker.exists() or not autograded.exists():
        return False
    return json.loads(marker.read_text()) == _fingerprint(course, submission)


def _mark_done(course: Course, submission: Submission, fingerprint: dict[str, str]) -> None:
    write_atomically(_done_marker(course, submission), json.dumps(fingerprint))


# ---------------------------------------------------------------- parent-side steps

def _register(course: Course, todo: list[Submission]) -> tuple[dict[Submission, dict[str, str]], dict[Submission, str]]:
    """Copy each submission (and its timestamp.txt) into submitted/ and create its learner and
    submission in the gradebook, with its hand-in time; return each one's fingerprint as it was when
    grading started, and why each one that cannot be graded (an unreadable timestamp.txt) cannot."""
    hashes, problems = {}, {}
    with Gradebook(course.db_url) as gradebook, warnings.catch_warnings():
        # nbgrader's update_or_create_submission trips SQLAlchemy autoflush warnings; they are harmless
        warnings.filterwarnings("ignore", message=".*not in session.*")
        for submission in todo:
            try:
                timestamp = _hand_in_time(submission)
            except ValueError as error:
                problems[submission] = str(error)
                continue
            hashes[submission] = _fingerprint(course, submission)
            target = course.submitted(submission.learner, submission.assignment)
            target.parent.mkdir(parents=True, exist_ok=True)
            exchange_files = [(c, target.parent / c.name) for c in submission.companions if c.name != "timestamp.txt"]
            for source, copy in [(submission.path, target)] + exchange_files:
                copy_atomically(source, copy)
            stamp = target.with_name("timestamp.txt")
            if _timestamp_file(submission).is_file():
                if _timestamp_file(submission).resolve() != stamp.resolve():   # not when graded in place
                    shutil.copyfile(_timestamp_file(submission), stamp)
            else:
                stamp.unlink(missing_ok=True)
            gradebook.update_or_create_student(submission.learner)
            gradebook.update_or_create_submission(submission.assignment, submission.learner,
                                                  **({"timestamp": timestamp} if timestamp else {}))
    return hashes, problems


def _save(course: Course, executed: Executed) -> tuple[float, float, float]:
    """Write the autograded notebook and run the configured gradebook writers (scores, late
    penalty); the only gradebook writes of grading."""
    notebook = nbformat.reads(executed.notebook_json, as_version=4)
    write_atomically(course.autograded(executed.learner, executed.assignment), executed.notebook_json)
    resources = nbgrader_resources(executed.learner, executed.assignment, course.db_url)
    run(gradebook_writers(course_config(_config_file(course))), notebook, resources)
    with Gradebook(course.db_url) as gradebook:
        graded = gradebook.find_submission_notebook(executed.assignment, executed.assignment, executed.learner)
        return graded.score, graded.max_score, graded.late_submission_penalty or 0.0


# ---------------------------------------------------------------- the whole run

def sandboxed(isolation: str) -> bool:
    """Whether kernels run sandboxed: "sandbox" (refuse when impossible), "unsafe", or "auto"
    (sandboxed where possible: for tests and benchmarks on machines without bubblewrap)."""
    if isolation not in ("sandbox", "unsafe", "auto"):
        raise ValueError(f"isolation={isolation!r}: expected 'sandbox', 'unsafe' or 'auto'")
    if isolation == "unsafe":
        return False
    reason = unavailable()
    if reason and isolation == "sandbox":
        raise NoSandboxError(f"refusing to run learners' code without a sandbox: {reason}")
    return reason is None


def autograde(folder: Path, course: Course, *, workers: int | None = None, timeout: int | None = None,
              csv_path: Path | None = None, feedback: bool = True, force: bool = False,
              progress: bool = True, pool: Executor | None = None, isolation: str = "sandbox",
              preflight: bool = True) -> Summary:
    """Grade every submission in ``folder`` that is not graded yet (all of them with ``force``),
    each in a sandbox of its own unless ``isolation="unsafe"``.
    ``timeout``: seconds a cell may run (default: the course config's ``Execute.timeout``).
    The notebooks run in ``pool`` (a ``dask_pool.DaskPool``, say), by default in local processes.
    ``preflight``: first run each assignment's solution as a learner's notebook will be run, and
    raise ``preflight.SetupError`` before any grade is saved when it does not score full marks (the
    learners whose sandboxes need no compiled code from that run are graded beside it, and their
    grades wait for its verdict)."""
    started, timings = time.perf_counter(), Timings()
    confined = sandboxed(isolation)
    put_python_scripts_on_path()
    assignments = course.assignments()
    if not assignments:
        option = "" if course.root.resolve() == DEFAULT_COURSE.root.resolve() else f" --course {course.root}"
        raise FileNotFoundError(f"{course.root} holds no built assignment: run `python -m grader build{option}` first")
    submissions, skipped_files = find_submissions(folder, assignments)
    for partial in course.root.rglob("*.partial"):   # half-written by a run that was killed: redone below
        partial.unlink()
    outcomes = [Outcome(s, "skipped") for s in submissions if not force and _is_done(course, s)]
    todo = [s for s in submissions if force or not _is_done(course, s)]
    context = worker_context() if pool is None and todo else None   # the workers' imports start now
    with timings.measure("register"):
        hashes, problems = _register(course, todo)
    outcomes += [Outcome(s, "error", notes=[why]) for s, why in problems.items()]
    todo = [s for s in todo if s in hashes]
    masked = (*masked_paths(course), folder.resolve())       # what no kernel may see
    limit = timeout if timeout is not None else cell_timeout(course_config(_config_file(course)))
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    local = pool is None
    batch = sorted({s.assignment for s in todo})
    preload = fork_client.preload_for([course.source(a) for a in batch],
                                      [cache_path(course, a) for a in batch]) if confined else ()
    with pool or ProcessPoolExecutor(workers, mp_context=context or worker_context(), initializer=start_worker,
                                     initargs=(dict(os.environ),)) as pool:
        # the local workers start their fork servers; the preflight then runs in one of them, forked as a learner's
        servers = ([pool.submit(start_fork_server, masked, preload) for _ in range(workers)]
                   if local and confined and todo else [])

        def submit(submissions: list[Submission], caches: dict[str, Path | None]) -> dict:
            jobs = {GradingJob.of(course, s.learner, s.assignment, timeout=timeout, sandboxed=confined,
                                  masked=masked, compile_cache=caches.get(s.assignment), preload=preload): s
                    for s in submissions}
            return {pool.submit(execute_submission, job): s for job, s in jobs.items()}

        futures: dict = {}
        known: dict[str, Path | None] = {}      # the assignments whose learners were queued beside the preflight
        with timings.measure("preflight"):
            if preflight:           # a set-up that would grade everyone 0 stops here, before any grade is saved
                try:
                    checks = {a: start_check(course, a, sandboxed=confined, masked=list(masked), timeout=limit,
                                             progress=progress, pool=pool if local else None, preload=preload)
                              for a in batch}
                    # learners whose sandboxes need no compiled code from these runs are graded beside them
                    known = {a: check.code for a, check in checks.items() if check.known}
                    futures = submit([s for s in todo if s.assignment in known], known)
                    caches = {a: check.verdict() for a, check in checks.items()}
                except BaseException:
                    for future in (*servers, *futures):
                        future.cancel()
                    raise
            else:
                caches = {a: warm_cache(course, a) for a in batch} if confined else {}
        grading = time.perf_counter()
        bar = tqdm(total=len(todo), desc="autograde", unit="notebook", disable=not progress or not todo)
        futures |= submit([s for s in todo if s.assignment not in known], caches)
        try:
            for future in as_completed(futures):
                submission = futures[future]
                try:
                    executed = future.result()
                except Exception as error:  # a worker that died: reported, the batch goes on
                    executed = Executed(submission.learner, submission.assignment,
                                        problem=f"worker failed: {type(error).__name__}: {error}")
                if executed.problem:
                    notes = [executed.problem]
                    if course.autograded(submission.learner, submission.assignment).exists():
                        notes.append("the gradebook and the CSV still hold the grade of this learner's "
                                     "previous submission")
                    outcomes.append(Outcome(submission, "error", notes=notes))
                else:
                    with timings.measure("save"):
                        score, max_score, penalty = _save(course, executed)
                        _mark_done(course, submission, hashes[submission])
                    late = [f"handed in late: {penalty:g} points off"] if penalty else []
                    outcomes.append(Outcome(submission, "graded", score, max_score, executed.notes + late,
                                            executed.timings))
                bar.update(1)
                bar.set_postfix_str(f"{submission.learner}/{submission.assignment}")
        except KeyboardInterrupt:
            # Ctrl-C: start no queued notebook (by default the pool would run them all, for nothing);
            # what was saved is recorded as done, and a rerun grades the rest.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            bar.close()

    timings.add("grading", time.perf_counter() - grading)
    started_servers = [f.result() for f in servers if f.done() and not f.cancelled() and f.exception() is None]
    if started_servers:         # concurrent with the preflight: the longest
        timings.add("fork server start", max(started_servers))
    csv_written = write_csv(course, csv_path or course.root / CSV_NAME)
    written = []
    if feedback:
        exporter = feedback_exporter(course)
        written = [write_feedback(course, learner, assignment, exporter)
                   for learner, assignment in stale_feedback(course)]
    outcomes.sort(key=lambda o: (o.submission.learner, o.submission.assignment))
    return Summary(outcomes, skipped_files, csv_written, written, time.perf_counter() - started, dict(timings))


def _late_text(late: dict[str, object]) -> str:
    """The summary's words for a submission's lateness: "late by 59400 s", "on time", "no due date"."""
    return f"late by {late['seconds_late']} s" if late["late"] == "late" else str(late["late"])


def print_summary(summary: Summary, course: Course) -> None:
    with Gradebook(course.db_url) as gradebook:
        scores, late = {}, {}
        for outcome in summary.outcomes:
            if outcome.status != "error":
                s = outcome.submission
                graded = gradebook.find_submission_notebook(s.assignment, s.assignment, s.learner)
                scores[s] = (graded.score, graded.max_score)
                late[s] = lateness(graded.assignment)
    print(f"{'learner':<20} {'assignment':<20} {'score':>9}  {'handed in':<23} {'late':<18} status")
    for outcome in summary.outcomes:
        s = outcome.submission
        score = "-" if s not in scores else f"{scores[s][0]:g}/{scores[s][1]:g}"
        stamp, when = (late[s]["timestamp"] or "-", _late_text(late[s])) if s in late else ("-", "-")
        print(f"{s.learner:<20} {s.assignment:<20} {score:>9}  {stamp:<23} {when:<18} {outcome.status}"
              + "".join(f"; {note}" for note in outcome.notes))
    for line in summary.skipped_files:
        print(f"not graded: {line}")
    graded = sum(o.status == "graded" for o in summary.outcomes)
    done = sum(o.status == "skipped" for o in summary.outcomes)
    print(f"{graded} graded, {done} already graded (skipped), {len(summary.errors)} errors, "
          f"{sum(v['late'] == 'late' for v in late.values())} late, "
          f"{len(summary.feedback)} feedback files written, in {summary.seconds:.1f} s")
    if summary.csv:
        print(f"scores: {summary.csv}")
