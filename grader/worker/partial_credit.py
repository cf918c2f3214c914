"""Partial credit per group of cases, a course setting, off by default.

By default a test cell is all or nothing, as nbgrader scores it: a check that fails any group of
cases raises ``AssertionError`` and the cell scores 0. With ``c.PartialCredit.enabled = True`` in
the course's ``nbgrader_config.py``, a test cell whose one error is a check's own
``AssertionError`` ("check_outer: 2 of 10 groups failed ...") earns its points times the share of
that check's groups that passed, e.g. 8 of 10 groups → 2.4 of 3 points. Everything else still
scores 0: a cell that crashed otherwise, timed out, or has more than one error.

The score is handed to nbgrader the way it reads partial credit: an ``execute_result`` holding the
number, placed before the error output (``nbgrader.utils.determine_grade``), with a line saying how
it was reached for the feedback. The count is read from the error that the check raises after the
learner's code has run (an exception of the learner's own never leaves the check: it fails a group).
"""
from __future__ import annotations

import re

import nbformat
from nbconvert.preprocessors import Preprocessor
from nbgrader.utils import is_grade, is_solution
from traitlets import Bool

FAILED = re.compile(r"^check_\w+: (\d+) of (\d+) groups? failed\b")


def share_passed(cell) -> tuple[int, int] | None:
    """(groups passed, groups run) of the check whose AssertionError is the cell's one error, or None."""
    errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
    if len(errors) != 1 or errors[0].ename != "AssertionError":
        return None
    found = FAILED.match(errors[0].evalue)
    if not found:
        return None
    failed, ran = int(found[1]), int(found[2])
    return (ran - failed, ran) if 0 <= failed <= ran and ran > 0 else None


class PartialCredit(Preprocessor):
    """Scores each failed test cell by the share of its check's groups that passed (when enabled)."""

    enabled = Bool(False, help="Score a failed test cell by the share of its check's groups that "
                              "passed (a course setting, off by default).").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not is_grade(cell) or is_solution(cell):
            return cell, resources
        share = share_passed(cell)
        if share is None or share[0] == 0:
            return cell, resources
        passed, ran = share
        points = float(cell.metadata["nbgrader"]["points"])
        score = round(points * passed / ran, 2)
        at = next(i for i, o in enumerate(cell.outputs) if o.output_type == "error")
        cell.outputs[at:at] = [
            nbformat.v4.new_output("stream", name="stdout",
                                   text=f"partial credit: {passed} of {ran} groups passed: {score:g} of {points:g} points\n"),
            nbformat.v4.new_output("execute_result", data={"text/plain": f"{score:g}"}, execution_count=None),
        ]
        return cell, resources
