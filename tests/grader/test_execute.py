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


def test_a_kernel_is_ready_once_it_answers_without_waiting_for_a_quiet_iopub_channel():
    """``ReadyClient``: the reply to kernel_info and one IOPub message make the kernel ready; it does
    not then read IOPub until 0.2 s of silence, as jupyter_client does on every kernel start."""
    import asyncio
    from queue import Empty

    from grader.worker.kernel_client import ReadyClient

    class Channel:
        def __init__(self, messages):
            self.messages, self.reads = list(messages), 0

        def get_msg(self, timeout=None):
            self.reads += 1
            if not self.messages:
                raise Empty
            return self.messages.pop(0)

    shell = Channel([{"msg_type": "kernel_info_reply", "content": {}, "parent_header": {}}])
    iopub = Channel([{"msg_type": "status"}, {"msg_type": "status"}])

    class Connected(ReadyClient):       # the channels of a kernel that has just answered
        shell_channel, iopub_channel = shell, iopub

        def kernel_info(self):
            return "request"

        def _handle_kernel_info_reply(self, reply):
            pass

    asyncio.run(Connected().wait_for_ready(timeout=5))
    assert shell.reads == 1 and iopub.reads == 1, "read IOPub again after the kernel was ready"
    assert len(iopub.messages) == 1, "the rest is left to nbclient, which skips what is not its requests'"


def test_a_change_to_the_grading_code_is_named_at_its_cell_whether_the_cell_ran_or_raised(tmp_path, monkeypatch):
    """The verification rides on a cell's own execute request and is answered in its reply; after a
    cell that raised (the kernel evaluates nothing then) it is asked on its own. Either way the cell
    that changed the grading code is the one named, and every graded cell from it on scores 0."""
    from grader.worker.integrity_watch import IntegrityWatch
    asked = []
    ask = IntegrityWatch._ask
    monkeypatch.setattr(IntegrityWatch, "_ask", lambda self, expression: asked.append(expression) or ask(self, expression))
    patch = "import grader.checks.compare as c\nc.mismatch = lambda *a, **k: None"
    for patched, then, asked_alone in ((patch, "x = 2", 0), (patch + "\nraise ValueError('and fails')", "x = 2", 1)):
        asked.clear()
        notebook = nbformat.v4.new_notebook(cells=[
            _graded("x = 1", "before"), nbformat.v4.new_code_cell("y = 1"), nbformat.v4.new_code_cell(patched),
            _graded(then, "after")])
        executor = GuardedExecute(timeout=30, assignment="00_welcome")
        executor.preprocess(notebook, {"metadata": {"path": str(tmp_path)}})
        scores = {c.metadata["nbgrader"]["grade_id"]: determine_grade(c)[0]
                  for c in notebook.cells if "nbgrader" in c.metadata}
        assert scores == {"before": 1, "after": 0}
        assert executor.integrity.modified.startswith("the grading code was modified at cell 3 (grader.checks.compare.mismatch")
        verifications = [e for e in asked if ".verify(" in e]
        assert len(verifications) == asked_alone, asked     # the others came back in the cells' replies
