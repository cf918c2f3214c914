"""python -m grader check: solutions full marks, releases zero, every mutant rejected."""
import importlib.util
import types
from pathlib import Path

import torch

from grader import selfcheck
from grader.checks import nb00_welcome
from grader.checks.exercise import Exercise
from grader.cli import main
from grader.mutants import REGISTRY, mutant, mutants_for

_spec = importlib.util.spec_from_file_location("fake_class", Path(__file__).with_name("fake_class.py"))
fake_class = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_class)


def test_check_passes_on_the_course_and_prints_the_table(capsys):
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    header, row = out.splitlines()[0], next(l for l in out.splitlines() if l.startswith("00_welcome"))
    for column in ("notebook", "points", "solution", "release", "mutants rejected", "seconds"):
        assert column in header
    mutants = sum(len(mutants_for(e.id)) for e in nb00_welcome.EXERCISES.values())
    points = f"{sum(fake_class.solution_points().values()):g}"
    assert row.split()[:5] == ["00_welcome", points, points, "0", f"{mutants}/{mutants}"]
    assert "all checks pass" in out


def _fake_notebook(monkeypatch, exercise):
    module = types.SimpleNamespace(EXERCISES={exercise.name: exercise})
    monkeypatch.setattr(selfcheck, "checks_module", lambda assignment: module)


def _square_like(exercise_id):
    return Exercise(id=exercise_id, reference=torch.square, public=nb00_welcome.SQUARE.public,
                    hidden=nb00_welcome.SQUARE.hidden, hint="multiply x by itself")


def test_an_exercise_without_mutants_fails_the_check(monkeypatch):
    _fake_notebook(monkeypatch, _square_like("nb99_fake.lonely"))
    verdict = selfcheck.NotebookVerdict("99_fake")
    selfcheck.check_mutants("99_fake", verdict)
    assert verdict.mutants_total == 0
    assert any("has no mutants" in p for p in verdict.problems)


def test_a_mutant_that_passes_the_checks_fails_the_check(monkeypatch):
    _fake_notebook(monkeypatch, _square_like("nb99_fake.weak"))
    try:
        @mutant("nb99_fake.weak", hint="not actually wrong")
        def square_by_power(x):
            return x ** 2

        @mutant("nb99_fake.weak", hint="doubles")
        def square_doubled(x):
            return x + x
        verdict = selfcheck.NotebookVerdict("99_fake")
        selfcheck.check_mutants("99_fake", verdict)
    finally:
        REGISTRY.pop("nb99_fake.weak", None)
    assert (verdict.mutants_rejected, verdict.mutants_total) == (1, 2)
    assert any("passes its checks" in p for p in verdict.problems)


def test_a_graded_cell_calling_a_check_missing_from_exercises_fails_the_check(built_course, monkeypatch):
    course, _ = built_course
    only_outer = types.SimpleNamespace(EXERCISES={"outer": nb00_welcome.OUTER})
    monkeypatch.setattr(selfcheck, "checks_module", lambda assignment: only_outer)
    verdict = selfcheck.NotebookVerdict("00_welcome")
    selfcheck.check_exercises_listed(course, "00_welcome", verdict)
    assert verdict.problems == ["test cell normalize_rows_tests calls check_normalize_rows, but "
                                "grader.checks.nb00_welcome.EXERCISES has no 'normalize_rows': its mutants are never tried"]
    monkeypatch.undo()
    listed = selfcheck.NotebookVerdict("00_welcome")
    selfcheck.check_exercises_listed(course, "00_welcome", listed)
    assert listed.problems == []
