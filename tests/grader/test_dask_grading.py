"""python -m grader autograde --dask: the same grades as a local run, on a 2-worker LocalCluster,
including for notebooks that kill their kernel, the process running them, or their Dask worker."""
import csv
import importlib.util
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.utils import is_grade

from grader.instructor.autograde import autograde
from grader.course import Course, put_python_scripts_on_path
from grader.instructor.dask_pool import DaskPool
from grader.worker.sandbox import unavailable

_spec = importlib.util.spec_from_file_location("fake_class", Path(__file__).with_name("fake_class.py"))
fake_class = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_class)

TIMEOUT = 60     # no learner here loops: a generous limit only keeps a busy machine from failing the imports
COMPARED = ("correct", "wrong", "kills", "cheats")
# The kernel's parent is the process that runs the notebook (the worker's child); its grandparent the Dask worker.
ENDS_ITS_PROCESS = "import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)"
ENDS_ITS_WORKER_ONCE = '''import os, signal, pathlib, psutil
_first = pathlib.Path({marker!r})
if not _first.exists():
    _first.touch()
    os.kill(psutil.Process(os.getppid()).ppid(), signal.SIGKILL)


def outer(a, b):
    return a[:, None] * b[None, :]
'''


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


def fresh_course(built_course, where: Path) -> Course:
    shutil.copytree(built_course[0].root, where)
    return Course(where)


def scores(course: Course, learners) -> dict[str, dict[str, float]]:
    put_python_scripts_on_path()
    with Gradebook(course.db_url) as gradebook:
        return {learner: {g.name: g.score for g in gradebook.find_submission_notebook(
                    "00_welcome", "00_welcome", learner).grades} for learner in learners}


def errors(course: Course, learner: str) -> dict[str, list[str]]:
    """grade_id -> the error names in that graded cell's outputs, as autograded."""
    notebook = nbformat.read(course.autograded(learner, "00_welcome"), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: [o.ename for o in c.outputs if o.output_type == "error"]
            for c in notebook.cells if is_grade(c)}


def write_hostile(folder: Path, learner: str, outer_cell: str) -> None:
    (folder / learner).mkdir(parents=True, exist_ok=True)
    notebook = fake_class.submission(None, fake_class.CORRECT_ROWS)
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "outer":
            cell.source = outer_cell
    nbformat.write(notebook, folder / learner / "00_welcome.ipynb")


@pytest.fixture(scope="module")
def local_and_dask(built_course, client, tmp_path_factory):
    """The same class graded locally and on Dask, each kernel in its sandbox (where one can be made)."""
    root = tmp_path_factory.mktemp("dask")
    submissions = fake_class.write_class(root / "submissions", COMPARED)
    local = fresh_course(built_course, root / "local")
    local_summary = autograde(submissions, local, workers=2, timeout=TIMEOUT, progress=False, isolation="auto")
    on_dask = fresh_course(built_course, root / "dask")
    dask_summary = autograde(submissions, on_dask, timeout=TIMEOUT, progress=False, pool=DaskPool(client, on_dask),
                             isolation="auto")
    return local, local_summary, on_dask, dask_summary


@pytest.fixture(scope="module")
def killers_on_dask(built_course, client, tmp_path_factory):
    """Notebooks that kill the process running them, or their Dask worker. In a sandbox they cannot
    (their parent is outside their PID namespace: tests/grader/test_hostile_class.py), so these run
    unconfined, as `--unsafe` would: what is tested is that Dask's side loses no submission."""
    root = tmp_path_factory.mktemp("dask-killers")
    submissions = root / "submissions"
    write_hostile(submissions, "ends_its_process", f"def outer(a, b):\n    {ENDS_ITS_PROCESS}\n")
    write_hostile(submissions, "ends_its_worker", ENDS_ITS_WORKER_ONCE.format(marker=str(root / "killed-once")))
    course = fresh_course(built_course, root / "course")
    summary = autograde(submissions, course, timeout=TIMEOUT, progress=False, pool=DaskPool(client, course),
                        isolation="unsafe")
    return course, summary, root


def test_dask_grades_equal_a_local_runs(local_and_dask):
    local, local_summary, on_dask, dask_summary = local_and_dask
    assert [o for o in local_summary.outcomes if o.status != "graded"] == []
    assert scores(on_dask, COMPARED) == scores(local, COMPARED) == {l: fake_class.EXPECTED[l] for l in COMPARED}
    assert {l: errors(on_dask, l) for l in COMPARED} == {l: errors(local, l) for l in COMPARED}
    rows = {(r["learner"], r["total"]) for r in csv.DictReader(dask_summary.csv.open()) if r["learner"] in COMPARED}
    assert rows == {(r["learner"], r["total"]) for r in csv.DictReader(local_summary.csv.open())}
    assert len(dask_summary.feedback) == len(COMPARED)


def test_a_notebook_that_kills_the_process_running_it_is_scored_zero_with_the_reason(killers_on_dask):
    on_dask, summary, _ = killers_on_dask
    [outcome] = [o for o in summary.outcomes if o.submission.learner == "ends_its_process"]
    assert outcome.status == "graded" and "killed the process that ran it" in " ".join(outcome.notes)
    assert scores(on_dask, ["ends_its_process"])["ends_its_process"] == {cell: 0 for cell in fake_class.POINTS}
    assert set(sum(errors(on_dask, "ends_its_process").values(), [])) == {"CellNotRun"}
    assert "the notebook killed the process that ran it" in (
        on_dask.feedback("ends_its_process", "00_welcome").read_text())


def test_a_worker_killed_by_a_notebook_is_replaced_and_the_submission_graded(killers_on_dask, client):
    on_dask, summary, root = killers_on_dask
    assert (root / "killed-once").exists(), "the notebook did not run its kill"
    [outcome] = [o for o in summary.outcomes if o.submission.learner == "ends_its_worker"]
    assert outcome.status == "graded"
    assert scores(on_dask, ["ends_its_worker"])["ends_its_worker"] == fake_class.EXPECTED["correct"]
    client.wait_for_workers(2, timeout=60)


def test_a_dask_run_killed_half_way_resumes_without_regrading(built_course, client, tmp_path):
    course = fresh_course(built_course, tmp_path / "course")
    learners = ("correct", "untouched", "wrong", "raises")
    submissions = fake_class.write_class(tmp_path / "submissions", learners)
    command = [sys.executable, "-m", "grader", "autograde", str(submissions), "--course", str(course.root),
               "--timeout", str(TIMEOUT), "--dask", client.scheduler_info()["address"],
               *(["--unsafe"] if unavailable() else [])]
    done = fake_class.autograde_killed_half_way(command, course.root, within=300)
    assert 0 < len(done) < len(learners), "the run was not stopped half-way"
    graded_before = {l: course.autograded(l, "00_welcome").stat().st_mtime_ns for l in done}
    resumed = autograde(submissions, course, timeout=TIMEOUT, progress=False, pool=DaskPool(client, course),
                        isolation="auto")
    status = {o.submission.learner: o.status for o in resumed.outcomes}
    assert {l for l, s in status.items() if s == "skipped"} == done
    assert {l for l, s in status.items() if s == "graded"} == set(learners) - done
    assert {l: course.autograded(l, "00_welcome").stat().st_mtime_ns for l in done} == graded_before
    assert scores(course, learners) == {l: fake_class.EXPECTED[l] for l in learners}


def test_an_unreachable_scheduler_is_an_error_that_names_it(tmp_path, capsys):
    from grader.cli import main
    (tmp_path / "submissions").mkdir()
    assert main(["autograde", str(tmp_path / "submissions"), "--dask", "tcp://127.0.0.1:9", "--course",
                 str(tmp_path)]) == 2
    assert "cannot grade on the Dask cluster at tcp://127.0.0.1:9" in capsys.readouterr().err
