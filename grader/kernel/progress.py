"""The learner's own progress: the outcome of the last public check of each exercise, kept locally.

Every ``check_<name>(fn)`` a learner runs records one line of JSON-able state here, in a file of the
learner's own: ``tensorcraft/progress.json`` in their Jupyter data directory
(``jupyter_core.paths.jupyter_data_dir()``: ``~/.local/share/jupyter`` on Linux, or
``$JUPYTER_DATA_DIR``). ``TENSORCRAFT_PROGRESS`` names another file, or ``off`` turns recording off.
Not next to the notebook: one learner's notebooks live in several folders (nbgrader's fetch puts each
in a folder of its own, a learner may copy one elsewhere), and on a shared install (JupyterHub) the
course's own folder is everyone's and read-only. The data directory is one per user, in their home,
and the course home finds it wherever it runs. Nothing leaves the machine. Nothing is recorded while a notebook is
being graded (nbgrader sets ``NBGRADER_EXECUTION``), nor for hidden checks; and a check never fails
because the file cannot be written.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from jupyter_core.paths import jupyter_data_dir

from ..files import write_atomically

if TYPE_CHECKING:
    from ..checks.report import CheckReport

PROGRESS_VARIABLE = "TENSORCRAFT_PROGRESS"
PASSED, ATTEMPTED, NOT_STARTED = "passed", "attempted", "not started"
STATES = (PASSED, ATTEMPTED, NOT_STARTED)


def progress_file() -> Path | None:
    """Where progress is kept, or None when recording is off."""
    chosen = os.environ.get(PROGRESS_VARIABLE, "")
    if chosen.lower() == "off":
        return None
    return Path(chosen) if chosen else Path(jupyter_data_dir()) / "tensorcraft" / "progress.json"


def outcome(report: "CheckReport") -> str:
    """passed; not started (every failure is the untouched ``raise NotImplementedError()``, as the check
    established it: its reason, never its wording); attempted."""
    from ..checks.report import NOT_IMPLEMENTED
    if not report.failed:
        return PASSED
    if all(failure.reason == NOT_IMPLEMENTED for failure in report.failed):
        return NOT_STARTED
    return ATTEMPTED


def load(path: Path | None = None) -> dict[str, dict]:
    """Exercise id -> its last recorded outcome; empty when nothing was recorded or the file is unreadable."""
    path = path or progress_file()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, AttributeError):
        return {}
    exercises = data.get("exercises") if isinstance(data, dict) else None
    return exercises if isinstance(exercises, dict) else {}


def record(exercise_id: str, report: "CheckReport") -> bool:
    """Record a public check's outcome; True when it was written. Never raises."""
    try:
        if report.hidden or os.environ.get("NBGRADER_EXECUTION"):
            return False
        path = progress_file()
        if path is None:
            return False
        exercises = load(path)
        exercises[exercise_id] = {"status": outcome(report), "failed_groups": len(report.failed),
                                  "groups": len(report.outcomes), "at": time.strftime("%Y-%m-%d %H:%M:%S")}
        # a reader (the course home) never sees half a file; the learner's record stays theirs alone
        write_atomically(path, json.dumps({"version": 1, "exercises": exercises}, indent=1, sort_keys=True),
                         private=True)
        return True
    except Exception:  # progress is a convenience: a read-only folder or a full disk must not fail a check
        return False
