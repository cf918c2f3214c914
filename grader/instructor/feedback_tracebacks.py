"""Keep hidden-test source out of feedback tracebacks.

nbgrader's ClearHiddenTests removes the hidden region from a test cell's *source*, but an error
in that cell carries an IPython traceback that quotes the lines around the failing call — the
hidden tests among them. The check's printed report already says what failed and why, so in
feedback each graded cell's traceback is cut down to its last line (``AssertionError: ...``).
"""
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor


class ShortenTestCellTracebacks(NbGraderPreprocessor):
    """Replace the traceback of every error output of a graded cell by ``ename: evalue``."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and utils.is_grade(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"\x1b[0;31m{output.get('ename', 'Error')}\x1b[0m: {output.get('evalue', '')}"]
        return cell, resources
