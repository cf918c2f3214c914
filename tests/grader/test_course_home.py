"""A learner's checks record their outcomes locally; the course home reads them back."""
import json

import nbformat
import pytest

from grader.kernel import progress
from grader.checks.nb00_welcome import check_outer
from grader.checks.report import flat
from grader.course import NOTEBOOKS
from grader.instructor.home import HOME_NAME, home_notebook, place_learner_home
from grader.kernel.progress_page import progress_figure, progress_rows, progress_table_html, show_progress
from grader.kernel.syllabus import modules_in, read_module


def outer_right(a, b):
    return a[:, None] * b[None, :]


def outer_wrong(a, b):
    return a[None, :] * b[:, None]          # the transpose


def outer_blank(a, b):
    raise NotImplementedError()


@pytest.fixture
def progress_path(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv(progress.PROGRESS_VARIABLE, str(path))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    return path


def run_check(fn, **kwargs):
    try:
        check_outer(fn, **kwargs)
    except AssertionError:
        pass


@pytest.mark.parametrize("fn, expected", [(outer_right, "passed"), (outer_wrong, "attempted"),
                                          (outer_blank, "not started")])
def test_a_check_records_its_outcome(progress_path, fn, expected):
    run_check(fn)
    recorded = json.loads(progress_path.read_text())["exercises"]
    assert list(recorded) == ["nb00_welcome.outer"]
    assert recorded["nb00_welcome.outer"]["status"] == expected


def test_by_default_progress_is_the_learners_own_wherever_the_notebook_runs(tmp_path, monkeypatch):
    """Not in the installed course (shared on a JupyterHub): in the user's Jupyter data directory."""
    monkeypatch.delenv(progress.PROGRESS_VARIABLE, raising=False)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    installed = NOTEBOOKS / ".progress.json"
    before = installed.read_bytes() if installed.exists() else None
    homes = {}
    for learner in ("alice", "bob"):
        homes[learner] = tmp_path / learner
        monkeypatch.setenv("HOME", str(homes[learner]))
        monkeypatch.delenv("JUPYTER_DATA_DIR", raising=False)
        fetched = homes[learner] / "00_welcome"                  # where nbgrader's fetch puts notebook 00
        fetched.mkdir(parents=True)
        monkeypatch.chdir(fetched)
        run_check(outer_right if learner == "alice" else outer_wrong)
    for learner, status in (("alice", "passed"), ("bob", "attempted")):
        mine = homes[learner] / ".local" / "share" / "jupyter" / "tensorcraft" / "progress.json"
        assert json.loads(mine.read_text())["exercises"]["nb00_welcome.outer"]["status"] == status
    assert (installed.read_bytes() if installed.exists() else None) == before, "the installed course was written"
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))   # Jupyter's own variable moves it
    assert progress.progress_file() == tmp_path / "data" / "tensorcraft" / "progress.json"


def test_the_last_check_wins(progress_path):
    run_check(outer_right)
    run_check(outer_wrong)
    assert progress.load()["nb00_welcome.outer"]["status"] == "attempted"
    run_check(outer_right)
    assert progress.load()["nb00_welcome.outer"]["status"] == "passed"


def test_nothing_is_recorded_while_grading_or_for_hidden_checks(progress_path, monkeypatch):
    run_check(outer_right, hidden=True)
    assert not progress_path.exists()
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    run_check(outer_right)
    assert not progress_path.exists()


def test_recording_can_be_turned_off(progress_path, monkeypatch):
    monkeypatch.setenv(progress.PROGRESS_VARIABLE, "off")
    run_check(outer_right)
    assert not progress_path.exists()


def test_a_file_that_cannot_be_written_never_fails_a_check(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(progress.PROGRESS_VARIABLE, str(blocker / "progress.json"))  # its folder is a file
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    check_outer(outer_right)                     # passes, no exception
    assert "All public cases pass" in flat(capsys.readouterr().out)
    with pytest.raises(AssertionError):          # and a wrong answer still fails on its own report
        check_outer(outer_wrong)


def test_an_unreadable_file_reads_as_no_progress_and_is_replaced(progress_path):
    progress_path.write_text("{not json")
    assert progress.load() == {}
    run_check(outer_right)
    assert progress.load()["nb00_welcome.outer"]["status"] == "passed"


def test_progress_rows_count_each_state_per_notebook():
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 07 · Demo\n\n**You will learn to**\n- one\n- two\n\n**Time:** about 5 minutes."),
        *(nbformat.v4.new_code_cell(f"check_{name}({name})", metadata={"nbgrader": {"grade": True}})
          for name in ("a", "b", "c", "d"))])
    module = read_module("07_demo", notebook)
    records = {"nb07_demo.a": {"status": "passed"}, "nb07_demo.b": {"status": "attempted"},
               "nb07_demo.c": {"status": "not started"}, "nb99_other.d": {"status": "passed"}}
    [row] = progress_rows([module], records)
    assert row.states == {"a": "passed", "b": "attempted", "c": "not started", "d": "not started"}
    assert [row.count(s) for s in progress.STATES] == [1, 1, 2]
    table = progress_table_html([row])
    assert "<td style=\"text-align:left\">1 / 4</td>" in table and "2 / 4" in table
    assert 'href="07_demo.ipynb"' in table and "about 5 minutes" in table
    figure = progress_figure([row])
    bars = [patch.get_width() for patch in figure.axes[0].patches]
    assert bars == [1, 1, 2]                     # passed, attempted, not started, stacked


def test_a_learners_home_links_to_the_fetched_notebooks_and_shows_their_own_progress(tmp_path, monkeypatch):
    """On a JupyterHub: `python -m grader home ~` writes the home; its links and progress table point
    into nbgrader's fetched folders (~/NN_name/NN_name.ipynb), and it reads the learner's own file."""
    home = place_learner_home(tmp_path)
    assert home == tmp_path / HOME_NAME
    notebook = nbformat.read(home, as_version=4)
    text = "\n".join(cell.source for cell in notebook.cells)
    modules = modules_in(NOTEBOOKS)
    for module in modules:
        assert f"]({module.name}/{module.name}.ipynb)" in text
    assert "Assignment List" in text and notebook.cells[-1].source.endswith("show_progress(fetched=True)")
    notebook.cells[-1].outputs = [nbformat.v4.new_output("stream", text="a run")]
    nbformat.write(notebook, home)                  # a run's outputs are kept when the home is placed again
    place_learner_home(tmp_path)
    assert nbformat.read(home, as_version=4).cells[-1].outputs
    [row] = progress_rows(modules[:1], {})
    assert f'href="{modules[0].name}/{modules[0].name}.ipynb"' in progress_table_html([row], fetched=True)

    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(progress.PROGRESS_VARIABLE, raising=False)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    run_check(outer_right)
    show_progress(fetched=True)
    table = shown[0].data
    assert str(tmp_path / "data" / "tensorcraft" / "progress.json") in table
    assert "<b>1 of " in table and 'href="00_welcome/00_welcome.ipynb"' in table


def test_every_notebook_states_title_goals_and_time():
    """The course home is read from the notebooks: each must say what the home page shows."""
    modules = modules_in(NOTEBOOKS)
    assert modules, "no notebooks in notebooks/"
    for module in modules:
        number = module.name[:2]
        assert module.title.startswith(f"{number} · "), f"{module.name}: the first heading must be '# {number} · Title'"
        assert 3 <= len(module.goals) <= 5, f"{module.name}: 3–5 learning goals as a bullet list, got {module.goals}"
        assert module.time, f"{module.name}: no '**Time:** about N minutes' in its introduction"
        assert len(module.exercises) >= 1, f"{module.name}: no graded check_<name>(...) cell"


def test_the_committed_course_home_lists_the_committed_notebooks():
    committed = (NOTEBOOKS / HOME_NAME).read_text(encoding="utf-8")
    assert committed == nbformat.writes(home_notebook(modules_in(NOTEBOOKS))) + "\n", \
        "notebooks/course_home.ipynb is stale: run `python -m grader build`"


def test_not_started_is_read_from_the_reason_of_each_failure_not_from_its_words():
    """Only the bare stub (reason NOT_IMPLEMENTED) is 'not started'; an answer that raises a
    NotImplementedError with a message of its own (einops does, for an integer mean) was attempted."""
    from grader.checks.report import FAIL, NOT_IMPLEMENTED, RAISED, CheckReport, GroupOutcome

    def report(reason, detail):
        return CheckReport("check_outer", hidden=False, outcomes=[GroupOutcome("cpu", "vectors", 2, FAIL, detail, reason=reason)])
    assert progress.outcome(report(NOT_IMPLEMENTED, "your function still raises NotImplementedError")) == "not started"
    assert progress.outcome(report(RAISED, "raised NotImplementedError: reduce_mean is not available")) == "attempted"
