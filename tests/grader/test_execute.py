"""The executor behind autograde: a cell that will not stop, or kills its kernel, scores 0,
and so does every cell after it; nothing is left running."""
import nbformat
from nbgrader.utils import determine_grade

from grader.worker.execute import GuardedExecute


def _graded(source: str, grade_id: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": {
        "grade": True, "grade_id": grade_id, "points": 1, "solution": False, "locked": True, "schema_version": 3}})


def test_a_cell_that_ignores_the_interrupt_is_given_up_and_later_cells_score_zero(tmp_path):
    stubborn = ("import time\nwhile True:\n    try:\n        time.sleep(0.05)\n"
                "    except KeyboardInterrupt:\n        pass")
    notebook = nbformat.v4.new_notebook(cells=[
        _graded("x = 1", "before"), _graded(stubborn, "stubborn"), _graded("assert x == 1", "after")])
    executor = GuardedExecute(timeout=1)
    executor.preprocess(notebook, {"metadata": {"path": str(tmp_path)}})
    scores = {c.metadata["nbgrader"]["grade_id"]: determine_grade(c)[0] for c in notebook.cells}
    assert scores == {"before": 1, "stubborn": 0, "after": 0}
    assert [o.ename for o in notebook.cells[2].outputs] == ["CellNotRun"]
    assert "did not stop when interrupted" in executor.lost
    assert executor.km is None or not executor.km.is_alive()
