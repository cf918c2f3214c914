"""python -m grader build: solutions/ -> nbgrader source -> the committed learner notebooks."""
import importlib.util
import json
from pathlib import Path

import nbformat
from nbgrader.utils import is_grade

from grader.instructor.build import solution_files, source_notebook
from grader.course import NOTEBOOKS, SOLUTIONS

_spec = importlib.util.spec_from_file_location("fake_class", Path(__file__).with_name("fake_class.py"))
fake_class = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_class)


def test_committed_notebooks_are_what_build_produces(built_course):
    _, notebooks = built_course
    fresh = {p.name: p.read_bytes() for p in notebooks.glob("*.ipynb")}
    committed = {p.name: p.read_bytes() for p in NOTEBOOKS.glob("*.ipynb")}
    assert fresh, "the build produced no notebook"
    assert sorted(committed) == sorted(fresh), "notebooks/ and solutions/ disagree on which notebooks exist"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"notebooks/{stale} differ from a fresh build of solutions/: run `python -m grader build`"


def test_source_notebook_ids_are_stable_and_named_after_grade_ids():
    for solution in solution_files():
        first, second = source_notebook(solution), source_notebook(solution)
        assert [c.id for c in first.cells] == [c.id for c in second.cells]
        for cell in first.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id:
                assert cell.id == grade_id


def test_release_has_stubs_no_solutions_no_hidden_tests_no_outputs(built_course):
    _, notebooks = built_course
    solution_text = (SOLUTIONS / "00_welcome.py").read_text()
    release = nbformat.read(notebooks / "00_welcome.ipynb", as_version=4)
    text = json.dumps(release)
    assert "### BEGIN SOLUTION" in solution_text and "BEGIN SOLUTION" not in text
    assert "### BEGIN HIDDEN TESTS" in solution_text and "HIDDEN TESTS" not in text
    assert "hidden=True)" not in "".join(c.source for c in release.cells if is_grade(c))
    solution_cells = [c for c in release.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert solution_cells and all("raise NotImplementedError()" in c.source for c in solution_cells)
    assert all(not c.get("outputs") and c.get("execution_count") is None
               for c in release.cells if c.cell_type == "code")
    points = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
              for c in release.cells if is_grade(c)}
    assert points and points == fake_class.solution_points()


def test_build_registers_the_assignment_in_the_gradebook(built_course):
    from nbgrader.api import Gradebook
    from grader.course import put_python_scripts_on_path
    course, _ = built_course
    put_python_scripts_on_path()
    with Gradebook(course.db_url) as gradebook:
        assignment = gradebook.find_assignment("00_welcome")
        assert assignment.max_score == sum(fake_class.solution_points().values())


def test_a_rebuild_never_overwrites_an_edited_learner_notebook(built_course, tmp_path, capsys):
    from grader.instructor.build import build
    course, notebooks = built_course
    mine = tmp_path / "notebooks"
    mine.mkdir()
    target = mine / "00_welcome.ipynb"
    target.write_bytes((notebooks / "00_welcome.ipynb").read_bytes())
    only = ["00_welcome"]                              # the other notebooks are not in `mine`: built afresh
    build(course, notebooks=mine, only=only)           # untouched: replaced (here, identical)
    edited = target.read_text().replace("raise NotImplementedError()", "return a[:, None] * b[None, :]", 1)
    target.write_text(edited)
    assert build(course, notebooks=mine, only=only) == []
    assert target.read_text() == edited
    assert "left as it is" in capsys.readouterr().err
    assert build(course, notebooks=mine, only=only, overwrite=True) == [target]
    assert target.read_bytes() == (notebooks / "00_welcome.ipynb").read_bytes()


def test_a_rebuild_regenerates_only_the_assignments_whose_source_changed(tmp_path, monkeypatch):
    """`make instructor` builds on every start: an unchanged notebook is not generated again."""
    import shutil

    from grader.instructor import build as build_module
    from grader.course import Course
    solutions = tmp_path / "solutions"
    shutil.copytree(SOLUTIONS, solutions)
    course, notebooks, only = Course(tmp_path / "course"), tmp_path / "notebooks", ["00_welcome", "01_einsum_notation"]
    generated = []
    real = build_module.generate_assignment
    monkeypatch.setattr(build_module, "generate_assignment", lambda c, a: (generated.append(a), real(c, a)))
    build_module.build(course, solutions, notebooks, only)
    assert generated == only
    release = course.release("00_welcome").read_bytes()
    generated.clear()
    assert [p.name for p in build_module.build(course, solutions, notebooks, only)] == [f"{a}.ipynb" for a in only]
    assert generated == [] and course.release("00_welcome").read_bytes() == release
    edited = solutions / "01_einsum_notation.py"
    edited.write_text(edited.read_text() + "\n# %% [markdown]\n# One more line.\n")
    build_module.build(course, solutions, notebooks, only)
    assert generated == ["01_einsum_notation"]
    generated.clear()
    (course.root / "nbgrader_config.py").unlink()   # prepare() writes it again: same config, nothing to do
    course.release("00_welcome").unlink()            # a release gone is made again
    build_module.build(course, solutions, notebooks, only)
    assert generated == ["00_welcome"]
