"""python -m grader report, end to end: a class with mistakes planted in known numbers is graded by
the real autograde, and the report must recover every planted count and pair, and nothing else."""
import csv
import json
import re
import subprocess
import sys

import pytest

from grader.instructor.autograde import autograde
from grader.instructor.build import build
from grader.course import Course

import planted_class as planted

ISOLATION = "auto"       # sandboxed where bubblewrap can run, as test_autograde grades
TIMEOUT = 30             # seconds per cell: the looping learner is interrupted; room for a busy machine


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("class_report")
    course = Course(root / "course")
    build(course, notebooks=root / "notebooks", only=["00_welcome"])
    submissions = planted.write_class(root / "submissions")
    summary = autograde(submissions, course, workers=2, timeout=TIMEOUT, progress=False, isolation=ISOLATION,
                        feedback=False)
    assert [o for o in summary.outcomes if o.status != "graded"] == []
    out = root / "report"
    result = subprocess.run([sys.executable, "-m", "grader", "report", "--course", str(course.root), "--out", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return course, out, json.loads((out / "report.json").read_text())


def _by_exercise(rows):
    return {row["exercise"]: row for row in rows}


def test_submitted_attempted_and_passed_are_the_planted_numbers(report):
    _, _, data = report
    exercises = _by_exercise(data["exercises"])
    assert set(exercises) == set(planted.SUBMITTED)
    for name in planted.SUBMITTED:
        row = exercises[name]
        assert (row["submitted"], row["attempted"], row["passed"]) == \
            (planted.SUBMITTED[name], planted.ATTEMPTED[name], planted.PASSED[name]), name
        assert len(row["scores"]) == planted.SUBMITTED[name]


def test_every_planted_mutant_is_counted_with_its_learners_and_nothing_else(report):
    _, _, data = report
    found = _by_exercise(data["misconceptions"])
    for name, planted_mutants in planted.MUTANTS.items():
        assert {m["mutant"]: m["names"] for m in found[name]["mutants"]} == planted_mutants, name
        assert found[name]["unexplained_learners"] == planted.UNEXPLAINED[name], name
        assert found[name]["wrong"] == sum(map(len, planted_mutants.values())) + len(planted.UNEXPLAINED[name])
    from grader.mutants import mutants_for
    hint = next(m.hint for m in mutants_for("nb00_welcome.outer") if m.name == planted.OUTER_MUTANT)
    assert found["outer"]["mutants"][0]["hint"] == hint
    (example,) = found["outer"]["examples"]                 # the unexplained answer's failing case, to read
    assert example["learner"] == "odd" and example["shown"].startswith("outer(")


def test_the_report_counts_the_diagnosis_the_learners_own_feedback_shows(report):
    """The hint in each mutant learner's graded notebook is the hint of the mutant the report names."""
    course, _, data = report
    from grader.checks.record import MIME
    for learner in planted.MUTANTS["outer"][planted.OUTER_MUTANT]:
        notebook = json.loads(course.autograded(learner, "00_welcome").read_text())
        test = next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "outer_tests")
        bundles = [o["data"] for o in test["outputs"] if MIME in o.get("data", {})]
        assert bundles, "no outcome record in the graded notebook"
        shown = " ".join(" ".join("".join(b["text/plain"]).split()) for b in bundles)
        record_hint = bundles[0][MIME]["failures"][0]["hint"]
        assert " ".join(record_hint.split())[:60] in shown


def test_time_outs_are_recorded_per_exercise_and_per_learner(report):
    _, _, data = report
    faults = _by_exercise(data["faults"]["by_exercise"])
    for name, count in planted.TIMEOUTS.items():
        assert faults[name]["timeout"] == count, name
        assert all(faults[name][k] == 0 for k in data["faults"]["kinds"] if k != "timeout"), faults[name]
    assert [r["learner"] for r in data["faults"]["by_learner"]] == ["paster"]


def test_exactly_the_planted_pairs_are_flagged_with_their_shared_passages_marked(report):
    _, out, data = report
    pairs = data["similarity"]["pairs"]
    assert {(p["one"], p["other"]) for p in pairs} == planted.PAIRS
    copy = next(p for p in pairs if p["other"] == "copy_b")
    marked = "".join(copy["one_text"][s:e] for s, e in copy["one_marks"])
    assert "raise ValueError" in marked
    library = next(p for p in pairs if p["one"] == "paster")
    assert "def _subscript" in "".join(library["other_text"][s:e] for s, e in library["other_marks"]) \
        or "_subscript" in library["other_text"]
    rows = list(csv.DictReader((out / "similarity.csv").open()))
    assert {(r["one"], r["other"]) for r in rows} == planted.PAIRS


def test_learners_who_need_help_come_first(report):
    _, _, data = report
    table = data["learner_table"]
    helped = [r["learner"] for r in table if r["needs_help"]]
    assert set(helped) == planted.NEED_HELP and [r["learner"] for r in table[:len(helped)]] == helped


def test_the_page_is_self_contained_and_the_notebook_loads_the_json(report):
    _, out, data = report
    page = (out / "report.html").read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "the page loads something from outside"
    assert page.count("data:image/png;base64,") == len(data["exercises"])
    assert "<mark>" in page and planted.OUTER_MUTANT in page
    notebook = json.loads((out / "report.ipynb").read_text())
    assert "report.json" in "".join(notebook["cells"][1]["source"])
    for name in ("exercises.csv", "misconceptions.csv", "faults_by_exercise.csv", "faults_by_learner.csv", "learners.csv"):
        assert (out / name).read_text().count("\n") >= 2, name


def test_the_notebook_version_runs_and_shows_the_tables_and_the_plot(report):
    """report.ipynb, run as JupyterLab would run it, beside its report.json."""
    import nbformat
    from nbclient import NotebookClient
    _, out, _ = report
    notebook = nbformat.read(out / "report.ipynb", as_version=4)
    NotebookClient(notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(out)}}).execute()
    kinds = [set(m for o in c.outputs for m in o.get("data", {})) for c in notebook.cells if c.cell_type == "code"]
    assert sum("text/html" in k for k in kinds) == 5 and any("image/png" in k for k in kinds)
    assert not [o for c in notebook.cells for o in c.get("outputs", []) if o.output_type == "error"]
