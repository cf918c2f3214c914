"""A check's outcome as data in the graded notebook, for the instructor's class report.

``Exercise.check`` shows its report through :func:`show`: in a Jupyter kernel, one display output
whose ``text/plain`` is the text the learner reads (shown once, as a print would show it) and whose
``application/vnd.tensorcraft.outcome+json`` is the same outcome as a record: the exercise, public
or hidden, the groups passed, failed and pending, and per failed group its case, why it failed and
the known mistake (mutant) that explains it, by name, as the check chose the hint the learner reads
(``GroupOutcome.mutant``). ``python -m grader report`` reads these records from the autograded
notebooks (``grader/instructor/class_report/records.py``); it never parses the text. Outside a kernel (a
script, pytest) the text is printed as before.
"""
from __future__ import annotations

from typing import Any

from .report import FAIL, PASS, PENDING, CheckReport

MIME = "application/vnd.tensorcraft.outcome+json"
VERSION = 1
SHOWN_MOST = 300            # characters of a failing case and its difference kept in the record


def as_record(exercise: str, report: CheckReport) -> dict[str, Any]:
    """The report as a JSON-able record (see the module docstring)."""
    def count(status: str) -> int:
        return sum(o.status == status for o in report.outcomes)
    return {
        "version": VERSION,
        "exercise": exercise,
        "check": report.check,
        "hidden": report.hidden,
        "seed": report.seed,
        "groups": {"passed": count(PASS), "failed": count(FAIL), "pending": count(PENDING)},
        "failures": [{
            "device": o.device,
            "group": o.title,
            "case": o.case,
            "cases": o.cases,
            "reason": o.reason,
            "error": o.error,
            "mutant": o.mutant or None,
            "hint": o.hint,
            "shown": o.shown[:SHOWN_MOST],
            "difference": (o.difference or o.detail)[:SHOWN_MOST],
        } for o in report.failed],
    }


def show(exercise: str, report: CheckReport) -> None:
    """Print the report's text; in a Jupyter kernel, as one display output that also holds the record."""
    text = report.text()
    try:
        from IPython import get_ipython
        shell = get_ipython()
    except ImportError:
        shell = None
    if shell is None or not hasattr(shell, "display_pub"):
        print(text)
        return
    shell.display_pub.publish(data={"text/plain": text, MIME: as_record(exercise, report)}, metadata={})
