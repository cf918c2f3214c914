"""A small fake class of notebook-00 submissions, one learner per way of handing in."""
import copy
from pathlib import Path

import nbformat
from nbgrader.utils import is_grade

from grader.instructor.build import source_notebook
from grader.course import NOTEBOOKS, SOLUTIONS

CORRECT_OUTER = "return a[:, None] * b[None, :]"
CORRECT_ROWS = "return x / x.sum(dim=1, keepdim=True)"

# learner -> (outer body, normalize_rows body); None keeps the release's stubs
LEARNERS = {
    "correct": (CORRECT_OUTER, CORRECT_ROWS),
    "wrong": ("return b[:, None] * a[None, :]", CORRECT_ROWS),
    "untouched": None,
    "raises": ("raise ValueError('oops')", CORRECT_ROWS),
    "loops": ("while True:\n        pass", CORRECT_ROWS),
    "kills": ("import os\n    os.kill(os.getpid(), 9)", CORRECT_ROWS),
    "cheats": "empties the test cells",
    "rebinds": ("raise NotImplementedError()\n\n\ncheck_outer = lambda fn, hidden=False: None", CORRECT_ROWS),
    "memorises": "fixes the hidden seed and hard-codes the answers to the cases it draws",
}
# learner -> the test cells that must pass (full points); every other graded cell must score 0
PASSING = {
    "correct": {"outer_tests", "normalize_rows_tests"},
    "wrong": {"normalize_rows_tests"},
    "untouched": set(),
    "raises": {"normalize_rows_tests"},
    "loops": {"normalize_rows_tests"},         # the timeout interrupts, the kernel lives on
    "kills": set(),                            # the kernel is gone: later cells score 0
    "cheats": set(),                           # test cells are restored before running
    "rebinds": {"normalize_rows_tests"},       # the hidden test imports the real check
    "memorises": {"normalize_rows_tests"},     # grading ignores the seed it set
}


def solution_points(assignment: str = "00_welcome") -> dict[str, float]:
    """grade_id -> points of each graded cell, as the solution declares them (so that a course
    author who changes a point value changes no test)."""
    notebook = source_notebook(SOLUTIONS / f"{assignment}.py")
    return {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
            for c in notebook.cells if is_grade(c)}


POINTS = solution_points()
MAX_SCORE = sum(POINTS.values())
# learner -> {grade_id: points}, what nbgrader must record
EXPECTED = {learner: {cell: points if cell in PASSING[learner] else 0 for cell, points in POINTS.items()}
            for learner in LEARNERS}
HIDDEN_SOURCE = ("BEGIN HIDDEN TESTS", "check_outer(outer, hidden=True)",
                 "check_normalize_rows(normalize_rows, hidden=True)", "the grader's own")


def submission(outer_body: str | None, rows_body: str | None) -> nbformat.NotebookNode:
    return answered(nbformat.read(NOTEBOOKS / "00_welcome.ipynb", as_version=4), outer_body, rows_body)


def answered(notebook: nbformat.NotebookNode, outer_body: str | None, rows_body: str | None) -> nbformat.NotebookNode:
    """A copy of a notebook-00 release with these function bodies typed into its solution cells."""
    notebook = copy.deepcopy(notebook)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "outer" and outer_body:
            cell.source = f"def outer(a, b):\n    {outer_body}\n"
        if grade_id == "normalize_rows" and rows_body:
            cell.source = f"def normalize_rows(x):\n    {rows_body}\n"
    return notebook


def cheating_submission() -> nbformat.NotebookNode:
    """The stubs left in place, and every test cell emptied so that it cannot fail."""
    notebook = submission(None, None)
    for cell in notebook.cells:
        if is_grade(cell):
            cell.source = "pass"
    return notebook


MEMORISING_OUTER = '''import os
os.environ["TENSORCRAFT_CHECK_SEED"] = "5"
from grader.checks.nb00_welcome import OUTER
_cases = [case.args for group in OUTER.public() + OUTER.hidden(torch.Generator().manual_seed(5)) for case in group.cases]
_answers = {(tuple(a.tolist()), tuple(b.tolist())): a[:, None] * b[None, :] for a, b in _cases}


def outer(a, b):
    return _answers[(tuple(a.tolist()), tuple(b.tolist()))].clone()
'''


def memorising_submission() -> nbformat.NotebookNode:
    """Sets TENSORCRAFT_CHECK_SEED in its own cell and answers only the cases that seed draws."""
    notebook = submission(None, CORRECT_ROWS)
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "outer":
            cell.source = MEMORISING_OUTER
    return notebook


def write_class(folder: Path, learners: tuple[str, ...] = tuple(LEARNERS)) -> Path:
    for learner in learners:
        bodies = LEARNERS[learner]
        (folder / learner).mkdir(parents=True, exist_ok=True)
        if learner == "cheats":
            notebook = cheating_submission()
        elif learner == "memorises":
            notebook = memorising_submission()
        else:
            notebook = submission(*(bodies or (None, None)))
        nbformat.write(notebook, folder / learner / "00_welcome.ipynb")
    return folder


def autograde_killed_half_way(command: list[str], course_root: Path, within: float) -> set[str]:
    """Run ``command`` (a `python -m grader autograde ...` line), SIGKILL it with its whole process
    group as soon as it has saved its first grade (or after ``within`` seconds), and return the
    learners it had finished: what a rerun must skip."""
    import os
    import signal
    import subprocess
    import time

    state = course_root / "grader_state"
    run = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + within
        while not list(state.glob("*/*.json")) and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.05)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    return {p.parent.name for p in state.glob("*/*.json")}
