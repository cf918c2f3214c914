"""What importing the grader costs every grading process (parent, workers, fork servers, kernels)."""
import subprocess
import sys

import nbformat
import pytest


def test_reading_notebooks_does_not_build_rfc3987_syntax_parsers():
    loaded = subprocess.run(
        [sys.executable, "-c", "import grader, nbformat, jsonschema, sys; print('rfc3987_syntax' in sys.modules "
                               "and sys.modules['rfc3987_syntax'] is not None)"],
        capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "False"


def test_nbformat_still_validates_and_rejects():
    import grader  # noqa: F401  (the setting under test)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    nbformat.validate(notebook)
    notebook.cells[0]["execution_count"] = "not a number"
    with pytest.raises(nbformat.ValidationError):
        nbformat.validate(notebook)
