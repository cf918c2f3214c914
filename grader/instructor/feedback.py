"""Feedback HTML for one graded notebook: outputs and scores of every cell, without the source
of the hidden tests. The exporter is nbgrader's GenerateFeedback one, with the preprocessors the
course's nbgrader_config.py lists (``GenerateFeedback.preprocessors``: the only place they are
kept, so that `nbgrader generate_feedback` and `python -m grader feedback` agree): nbgrader's
ClearHiddenTests, and tracebacks of test cells cut to their last line, since they quote the
hidden lines."""
from __future__ import annotations

import shutil
from pathlib import Path

from nbconvert import HTMLExporter

from ..course import Course
from ..files import write_atomically
from ..worker.job import nbgrader_resources
from ..worker.chains import course_config, feedback_steps
from .submissions import EXCHANGE_FILES


def feedback_exporter(course: Course) -> HTMLExporter:
    """The exporter nbgrader's generate_feedback uses, as the course's config sets it up."""
    config, steps = feedback_steps(course_config(course.root / "nbgrader_config.py"))
    exporter = HTMLExporter(config=config)
    for step in steps:
        exporter.register_preprocessor(step, enabled=True)
    return exporter


def write_feedback(course: Course, learner: str, assignment: str, exporter: HTMLExporter | None = None) -> Path:
    """Render ``autograded/<learner>/<assignment>`` to ``feedback/<learner>/<assignment>/<assignment>.html``,
    beside the exchange's files of the submission when it came through nbgrader's exchange."""
    exporter = exporter or feedback_exporter(course)
    resources = nbgrader_resources(learner, assignment, course.db_url)
    html, _ = exporter.from_filename(str(course.autograded(learner, assignment)), resources=resources)
    target = write_atomically(course.feedback(learner, assignment), html)
    for name in EXCHANGE_FILES:   # what `nbgrader release_feedback` reads to address the learner
        if (course.submitted(learner, assignment).parent / name).is_file():
            shutil.copyfile(course.submitted(learner, assignment).parent / name, target.parent / name)
    return target


def stale_feedback(course: Course) -> list[tuple[str, str]]:
    """(learner, assignment) pairs whose feedback is missing or older than their autograded notebook."""
    pairs = []
    for notebook in sorted((course.root / "autograded").glob("*/*/*.ipynb")):
        learner, assignment = notebook.parts[-3], notebook.parts[-2]
        if notebook.stem != assignment:
            continue
        html = course.feedback(learner, assignment)
        if not html.exists() or html.stat().st_mtime < notebook.stat().st_mtime:
            pairs.append((learner, assignment))
    return pairs
