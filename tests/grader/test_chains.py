"""python -m grader autograde against `nbgrader autograde` itself, side by side on the same course:
the same per-cell scores on a mixed class of every notebook, the same late penalty from a due date
and a timestamp.txt; and the chain it runs is the one nbgrader's config lists."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.api import Gradebook
from nbgrader.converters import Autograde
from nbgrader.preprocessors import Execute, IgnorePattern, LimitOutput
from nbgrader.utils import parse_utc
from traitlets.config import Config

from grader.worker import chains
from grader.instructor.autograde import autograde
from grader.course import Course, put_python_scripts_on_path
from grader.worker.execute import GuardedExecute, execute_submission
from grader.worker.job import GradingJob
from grader.worker.nbgrader_sandbox import SandboxedExecute

TIMEOUT = int(os.environ.get("TENSORCRAFT_TEST_CELL_TIMEOUT", "60"))
DUE = "2026-11-30 17:00:00 UTC"
ON_TIME, LATE = "2026-11-30 16:59:00 UTC", "2026-12-01 09:30:00 UTC"
# learner (of notebook 00) -> (timestamp, exercises solved: all or every other one)
TIMED = {"late": (LATE, "all"), "late_half": (LATE, "half"), "on_time": (ON_TIME, "all"), "no_stamp": (None, "all")}


def _solve(release: nbformat.NotebookNode, source: nbformat.NotebookNode, which: str) -> nbformat.NotebookNode:
    """The release with the source's answer put into every solution cell ("all") or every other one ("half")."""
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    notebook = nbformat.from_dict(release)
    solution_cells = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("solution")]
    for position, cell in enumerate(solution_cells):
        if which == "all" or position % 2 == 0:
            cell.source = answers[cell.metadata["nbgrader"]["grade_id"]]
    return notebook


def _hand_ins(course: Course, notebooks: Path) -> dict[tuple[str, str], tuple[nbformat.NotebookNode, str | None]]:
    """(learner, assignment) -> (notebook, timestamp): a half-solved notebook of every assignment, and
    notebook 00 handed in on time, late, late and half-solved, and without a timestamp."""
    hand_ins = {}
    for assignment in course.assignments():
        release = nbformat.read(notebooks / f"{assignment}.ipynb", as_version=4)
        source = nbformat.read(course.source(assignment), as_version=4)
        hand_ins[("half", assignment)] = (_solve(release, source, "half"), ON_TIME)
        if assignment == "00_welcome":
            for learner, (stamp, which) in TIMED.items():
                hand_ins[(learner, assignment)] = (_solve(release, source, which), stamp)
    return hand_ins


def _course_copy(built: Course, where: Path) -> Course:
    shutil.copytree(built.root, where)
    with (where / "nbgrader_config.py").open("a") as config:
        config.write(f'\nc.LateSubmissionPlugin.penalty_method = "zero"\nc.Execute.timeout = {TIMEOUT}\n')
    put_python_scripts_on_path()
    subprocess.run([sys.executable, "-m", "nbgrader", "db", "assignment", "add", "00_welcome", f"--duedate={DUE}"],
                   cwd=where, check=True, capture_output=True)
    return Course(where)


def _grades(course: Course, keys) -> dict:
    """(learner, assignment) -> ({grade_id: auto_score}, late penalty), from the course's gradebook."""
    with Gradebook(course.db_url) as gradebook:
        found = {}
        for learner, assignment in keys:
            notebook = gradebook.find_submission_notebook(assignment, assignment, learner)
            found[(learner, assignment)] = ({g.name: g.auto_score for g in notebook.grades},
                                            notebook.late_submission_penalty)
        return found


@pytest.fixture(scope="module")
def side_by_side(built_course, tmp_path_factory):
    """The same class graded by `nbgrader autograde` and by `python -m grader autograde`."""
    built, notebooks = built_course
    root = tmp_path_factory.mktemp("side_by_side")
    hand_ins = _hand_ins(built, notebooks)
    theirs, ours = _course_copy(built, root / "nbgrader"), _course_copy(built, root / "ours")
    for (learner, assignment), (notebook, stamp) in hand_ins.items():
        # nbgrader's layout: submitted/<learner>/<assignment>/<assignment>.ipynb and timestamp.txt
        target = theirs.submitted(learner, assignment)
        target.parent.mkdir(parents=True)
        nbformat.write(notebook, target)
        # ours: SUBMISSIONS/<learner>/<assignment>.ipynb; here each learner hands in one notebook,
        # so the learner's folder holds its timestamp.txt
        folder = root / "submissions" / f"{learner}-{assignment}"
        folder.mkdir(parents=True)
        nbformat.write(notebook, folder / f"{assignment}.ipynb")
        if stamp:
            (target.parent / "timestamp.txt").write_text(stamp)
            (folder / "timestamp.txt").write_text(stamp)
    # every assignment in one `nbgrader autograde` (its assignment id is a glob of submitted/*/<id>/):
    # one start of nbgrader and its gradebook, not one per notebook; it runs one kernel at a time, so it
    # grades while ours does (two course directories, two gradebooks, sandbox uids never shared)
    nbgraders = subprocess.Popen([sys.executable, "-m", "nbgrader", "autograde", "*", "--log-level=WARN"],
                                 cwd=theirs.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        summary = autograde(root / "submissions", ours, workers=2, progress=False, feedback=False)
    except BaseException:
        nbgraders.kill()
        raise
    finally:
        said, _ = nbgraders.communicate()
    assert nbgraders.returncode == 0, said
    assert {p.parent.name for p in theirs.root.glob("autograded/*/*/*.ipynb")} == set(built.assignments())
    assert summary.errors == []
    ours_by_folder = _grades(ours, {(f"{learner}-{assignment}", assignment) for learner, assignment in hand_ins})
    return (_grades(theirs, hand_ins),
            {(folder.split("-", 1)[0], assignment): grade for (folder, assignment), grade in ours_by_folder.items()},
            summary)


def test_per_cell_scores_equal_nbgrader_autograde_on_every_notebook(side_by_side, built_course):
    theirs, ours, _ = side_by_side
    assert set(ours) == set(theirs)
    for key in sorted(theirs):
        assert ours[key][0] == theirs[key][0], f"{key}: ours {ours[key][0]}, nbgrader's {theirs[key][0]}"
    for assignment in built_course[0].assignments():   # the class is mixed: each notebook has a 0 and a pass
        scores = set(theirs[("half", assignment)][0].values())
        assert 0 in scores and len(scores) > 1, f"{assignment}: the half-solved notebook scored {scores}"


def test_the_late_penalty_equals_nbgrader_autograde(side_by_side):
    theirs, ours, summary = side_by_side
    penalties = {key[0]: grade[1] for key, grade in theirs.items() if key[1] == "00_welcome"}
    assert penalties["late"] == sum(theirs[("late", "00_welcome")][0].values()) > 0   # 'zero': all of it
    assert penalties["late_half"] == sum(theirs[("late_half", "00_welcome")][0].values()) > 0
    assert not penalties["on_time"] and not penalties["no_stamp"] and not penalties["half"]
    assert {key[0]: grade[1] for key, grade in ours.items() if key[1] == "00_welcome"} == penalties
    rows = {row.split(",")[0]: row.split(",") for row in summary.csv.read_text().splitlines()}
    header = rows["learner"]
    late = dict(zip(header, rows["late-00_welcome"]))
    assert float(late["late_penalty"]) == penalties["late"] == float(late["total"])
    assert (late["timestamp"], late["late"]) == (LATE, "late")
    assert float(late["seconds_late"]) == (parse_utc(LATE) - parse_utc(DUE)).total_seconds()
    on_time = dict(zip(header, rows["on_time-00_welcome"]))
    assert float(on_time["late_penalty"]) == 0 and (on_time["late"], float(on_time["seconds_late"])) == ("on time", 0)
    assert any("handed in late" in " ".join(o.notes) for o in summary.outcomes
               if o.submission.learner == "late-00_welcome")


# ---------------------------------------------------------------- the chain itself

def _names(chain) -> list[str]:
    return [type(step).__name__ for step in chain]


def test_the_chains_are_nbgraders_with_our_executor_and_without_the_gradebook_writers():
    config = chains.course_config()
    steps = chains.build_chains(config, GuardedExecute, timeout=7)
    nbgraders = Autograde(config=config)
    assert _names(steps.sanitize) == [c.__name__ for c in nbgraders.sanitize_preprocessors]
    configured = [chains._class(c) for c in nbgraders.autograde_preprocessors]
    assert configured[0] is SandboxedExecute        # nbgrader's own autograde runs sandboxed too
    expected = [("GuardedExecute" if issubclass(c, Execute) else c.__name__) for c in configured
                if c not in chains.GRADEBOOK_WRITERS]
    assert _names(steps.autograde) == expected
    assert {"IgnorePattern", "ClearMetadataPreprocessor", "LimitOutput", "PartialCredit"} <= set(expected)
    assert [w.__name__ for w in steps.writers] == ["SaveAutoGrades", "AssignLatePenalties"]
    assert steps.autograde[0].timeout == 7


def test_settings_of_the_course_config_reach_the_steps():
    config = Config()
    config.Execute.timeout = 11
    config.IgnorePattern.pattern = "Warning"
    config.LimitOutput.max_lines = 3
    config.ClearMetadataPreprocessor.enabled = True
    steps = chains.build_chains(config, GuardedExecute)
    steps = {type(step): step for step in steps.autograde}
    assert steps[GuardedExecute].timeout == 11
    assert steps[IgnorePattern].pattern == "Warning"
    assert steps[LimitOutput].max_lines == 3 and steps[ClearMetadataPreprocessor].enabled


def test_a_configured_list_of_ones_own_is_followed():
    config = Config()
    config.Autograde.autograde_preprocessors = ["nbgrader.preprocessors.Execute",
                                                "nbgrader.preprocessors.SaveAutoGrades"]
    steps = chains.build_chains(config, GuardedExecute)
    assert _names(steps.autograde) == ["GuardedExecute"]
    assert [w.__name__ for w in steps.writers] == ["SaveAutoGrades"]
    config.Autograde.autograde_preprocessors = [Execute, "nbgrader.preprocessors.SaveAutoGrades", LimitOutput]
    with pytest.raises(chains.ChainError, match="LimitOutput after the gradebook writers"):
        chains.build_chains(config, GuardedExecute)


def test_an_ignore_pattern_in_the_course_config_filters_stderr_as_nbgrader_does(built_course, tmp_path):
    """IgnorePattern is off by default in nbgrader; turned on in the config, it drops matching stderr."""
    course, _ = built_course
    config_file = tmp_path / "nbgrader_config.py"
    shutil.copyfile(course.root / "nbgrader_config.py", config_file)
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import sys\nprint('noise: ignore me', file=sys.stderr)"),
        nbformat.v4.new_code_cell("print('keep me', file=sys.stderr)")])
    submitted = tmp_path / "in.ipynb"
    outputs = {}
    for enabled in (False, True):
        config_file.write_text(config_file.read_text() + f"\nc.IgnorePattern.pattern = 'noise'\n"
                                                         f"c.IgnorePattern.enabled = {enabled}\n")
        nbformat.write(notebook, submitted)
        executed = execute_submission(GradingJob(submitted, tmp_path / "out", course.db_url, "x", "00_welcome",
                                                 TIMEOUT, config_file))
        assert not executed.problem, executed.problem
        cells = nbformat.reads(executed.notebook_json, as_version=4).cells
        outputs[enabled] = "".join(o.get("text", "") for cell in cells for o in cell.outputs)
    assert "noise" in outputs[False] and "keep me" in outputs[False]
    assert "noise" not in outputs[True] and "keep me" in outputs[True]


def test_an_unreadable_timestamp_is_that_submissions_error_and_the_batch_goes_on(built_course, tmp_path):
    built, notebooks = built_course
    course = Course(tmp_path / "course")
    shutil.copytree(built.root, course.root)
    folder = tmp_path / "submissions" / "muddled"
    folder.mkdir(parents=True)
    shutil.copyfile(notebooks / "00_welcome.ipynb", folder / "00_welcome.ipynb")
    (folder / "timestamp.txt").write_text("the day after the deadline")
    summary = autograde(tmp_path / "submissions", course, workers=1, progress=False, feedback=False)
    [outcome] = summary.outcomes
    assert outcome.status == "error" and "timestamp.txt: not a time nbgrader can read" in outcome.notes[0]
    assert not course.autograded("muddled", "00_welcome").exists()
