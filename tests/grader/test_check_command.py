"""python -m grader check: solutions full marks, releases zero, every mutant rejected."""
import importlib.util
import types
from pathlib import Path

import pytest
import torch

from grader.instructor import selfcheck
from grader.checks import nb00_welcome
from grader.checks.exercise import STUB_HINT, Case, Exercise, Group, call_directly
from grader.cli import main
from grader.mutants import REGISTRY, mutant, mutants_for

_spec = importlib.util.spec_from_file_location("fake_class", Path(__file__).with_name("fake_class.py"))
fake_class = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_class)


@pytest.mark.kernel
@pytest.mark.usefixtures("check_from_the_built_course")
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


def _doubling_exercise(exercise_id, public_values=((2.0,),), raises=None):
    """square x, whose public cases are ``public_values``: x + x is right at 2 and wrong anywhere else."""
    def cases(values):
        return [Group("values", [Case((torch.tensor(v),)) for v in values])]
    return Exercise(id=exercise_id, reference=torch.square, public=lambda: cases(public_values),
                    hidden=lambda g: cases([torch.randn(3, generator=g).tolist()]), hint="multiply x by itself")


def _problems(exercise):
    _ = exercise  # registered mutants are found through the id
    verdict = selfcheck.NotebookVerdict("99_fake")
    selfcheck.check_mutants("99_fake", verdict)
    return verdict


def test_a_mutant_only_hidden_cases_reject_fails_the_check_unless_marked(monkeypatch):
    exercise = _doubling_exercise("nb99_fake.doubling")
    _fake_notebook(monkeypatch, exercise)
    try:
        @mutant("nb99_fake.doubling", hint="x + x doubles x; square multiplies x by itself")
        def square_as_double(x):
            return x + x
        verdict = _problems(exercise)
        assert verdict.mutants_rejected == 0
        assert any("square_as_double" in p and "rejected only by the hidden cases" in p for p in verdict.problems)

        mutant("nb99_fake.doubling", hint="x + x doubles x; square multiplies x by itself",
               hidden_only="equals the square at the one public value, 2")(square_as_double)
        marked = _problems(exercise)
        assert (marked.mutants_rejected, marked.problems) == (1, [])
        # a mark where the public cases reject it after all is a stale mark
        _fake_notebook(monkeypatch, _doubling_exercise("nb99_fake.doubling", public_values=((2.0, 3.0),)))
        assert any("remove the mark" in p for p in _problems(exercise).problems)
    finally:
        REGISTRY.pop("nb99_fake.doubling", None)


def test_two_mutants_with_one_wrong_result_on_the_first_failing_case_collide(monkeypatch):
    exercise = _doubling_exercise("nb99_fake.colliding", public_values=((1.0, 3.0),))
    _fake_notebook(monkeypatch, exercise)
    try:
        @mutant("nb99_fake.colliding", hint="x + x doubles x")
        def square_as_sum(x):
            return x + x

        @mutant("nb99_fake.colliding", hint="2 * x doubles x: the power is 2, not the factor")
        def square_as_product(x):
            return 2 * x
        verdict = _problems(exercise)
        [collision] = verdict.problems
        assert "square_as_product and square_as_sum" in collision and "collide" in collision
        assert "group 'values'" in collision  # the case where it happens
        # one mistake, one hint: merged, they no longer collide
        mutant("nb99_fake.colliding", hint="x + x doubles x")(square_as_product)
        assert _problems(exercise).problems == []
    finally:
        REGISTRY.pop("nb99_fake.colliding", None)


def _integer_mean_exercise(exercise_id, call=call_directly):
    """A case that expects the NotImplementedError einops raises for the mean of integers."""
    def mean(x):
        if not x.is_floating_point():
            raise NotImplementedError("reduce_mean is not available for non-floating tensors")
        return x.mean()
    cases = lambda: [Group("integers", [Case((torch.arange(4),), raises=NotImplementedError)]),
                     Group("floats", [Case((torch.arange(4.0),))])]
    return Exercise(id=exercise_id, reference=mean, public=cases, hidden=lambda g: cases(), hint="mean", call=call)


def test_a_messaged_not_implemented_error_is_an_answer_and_a_bare_one_the_stub(monkeypatch):
    exercise = _integer_mean_exercise("nb99_fake.integer_mean")

    def like_einops(x):
        if not x.is_floating_point():
            raise NotImplementedError("reduce_mean is not available for non-floating tensors")
        return x.float().mean()
    assert exercise.run(like_einops, cuda_available=False).passed
    stub = exercise.run(selfcheck._stub, cuda_available=False)
    assert [o.hint for o in stub.failed] == [STUB_HINT, STUB_HINT]

    _fake_notebook(monkeypatch, exercise)
    try:
        mutant("nb99_fake.integer_mean", hint="the mean of integers raises")(lambda x: x.float().mean())
        assert _problems(exercise).problems == []

        def bare_every_not_implemented(fn, *args):  # a check that tells no stub from a deliberate raise
            try:
                return fn(*args)
            except NotImplementedError:
                raise NotImplementedError() from None
        _fake_notebook(monkeypatch, _integer_mean_exercise("nb99_fake.integer_mean", bare_every_not_implemented))
        assert any("with a message as the release's stub" in p for p in _problems(exercise).problems)
    finally:
        REGISTRY.pop("nb99_fake.integer_mean", None)
