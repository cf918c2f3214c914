"""Feedback HTML for one graded notebook: outputs and scores of every cell, without the source
of the hidden tests (nbgrader's feedback template, its ClearHiddenTests preprocessor, and
tracebacks of test cells cut to their last line, since they quote the hidden lines)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbgrader
from nbconvert import HTMLExporter
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import ClearHiddenTests, GetGrades
from traitlets.config import Config

from .course import Course
from .feedback_tracebacks import ShortenTestCellTracebacks
from .submissions import EXCHANGE_FILES

_NBGRADER = Path(nbgrader.__file__).parent


def feedback_exporter() -> HTMLExporter:
    """The exporter nbgrader's generate_feedback uses, with hidden tests cleared from the source."""
    config = Config()
    config.HTMLExporter.template_name = "feedback"
    config.HTMLExporter.extra_template_basedirs = [str(_NBGRADER / "server_extensions" / "formgrader" / "templates")]
    config.HTMLExporter.extra_template_paths = [
        str(_NBGRADER / "server_extensions" / "formgrader" / "static" / "node_modules" / "bootstrap" / "dist" / "css")]
    exporter = HTMLExporter(config=config)
    for step in (GetGrades, ClearHiddenTests, ShortenTestCellTracebacks, CSSHTMLHeaderPreprocessor):
        exporter.register_preprocessor(step, enabled=True)
    return exporter


def write_feedback(course: Course, learner: str, assignment: str, exporter: HTMLExporter | None = None) -> Path:
    """Render ``autograded/<learner>/<assignment>`` to ``feedback/<learner>/<assignment>/<assignment>.html``,
    beside the exchange's files of the submission when it came through nbgrader's exchange."""
    exporter = exporter or feedback_exporter()
    resources = {"nbgrader": {"student": learner, "assignment": assignment, "notebook": assignment,
                              "db_url": course.db_url}}
    html, _ = exporter.from_filename(str(course.autograded(learner, assignment)), resources=resources)
    target = course.feedback(learner, assignment)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".html.partial")
    partial.write_text(html, encoding="utf-8")
    os.replace(partial, target)
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
