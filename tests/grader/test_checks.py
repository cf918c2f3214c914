"""The in-notebook check machinery: tripwires, devices, seeds, comparison, mutant diagnosis."""
import dataclasses

import numpy as np
import pytest
import torch

from grader.course import SOLUTIONS
from grader.instructor import selfcheck
from grader.checks import nb00_welcome
from grader.checks.compare import mismatch
from grader.checks.exercise import Case, Exercise, Group
from grader.checks.record import as_record
from grader.checks.report import FAIL, PASS, PENDING, flat
from grader.checks.seed import SEED_VARIABLE
from grader.checks.tripwire import ForbiddenCallError, tripwires
from grader.mutants import mutants_for

OUTER = nb00_welcome.OUTER


def correct_outer(a, b):
    return a[:, None] * b[None, :]


# ------------------------------------------------------------------ tripwires

def test_tripwire_raises_inside_and_restores_after_an_exception():
    originals = torch.einsum, torch.outer, torch.Tensor.outer
    with pytest.raises(ZeroDivisionError):
        with tripwires(("torch.einsum", "torch.outer", "torch.Tensor.outer")):
            with pytest.raises(ForbiddenCallError, match="torch.einsum"):
                torch.einsum("i,j->ij", torch.ones(2), torch.ones(3))
            with pytest.raises(ForbiddenCallError, match="torch.Tensor.outer"):
                torch.ones(2).outer(torch.ones(3))
            1 / 0  # noqa: B018 (an error raised inside the block: the tripwires must still be undone)
    assert (torch.einsum, torch.outer, torch.Tensor.outer) == originals
    assert "outer" not in vars(torch.Tensor), "the inherited method must not stay shadowed"
    assert torch.ones(2).outer(torch.ones(3)).shape == (2, 3)


def test_tripwire_on_an_unknown_name_says_which():
    with pytest.raises(AttributeError, match="no_such_function"):
        with tripwires(("torch.no_such_function",)):
            pass
    assert not hasattr(torch, "no_such_function")


def test_check_reports_a_forbidden_call_and_leaves_torch_unharmed(capsys):
    with pytest.raises(AssertionError):
        nb00_welcome.check_outer(lambda a, b: torch.outer(a, b))
    assert "your code called torch.outer" in flat(capsys.readouterr().out)
    assert torch.outer(torch.ones(2), torch.ones(3)).shape == (2, 3)


from torch import outer as imported_outer  # noqa: E402  (the learner's trick under test)


def _helper_that_delegates(a, b):
    return imported_outer(a, b)


@pytest.mark.parametrize("learner", [
    pytest.param(lambda a, b: imported_outer(a, b), id="imported under another name"),
    pytest.param(lambda a, b, op=torch.outer: op(a, b), id="default argument"),
    pytest.param((lambda op: lambda a, b: op(a, b))(torch.outer), id="closure"),
    pytest.param(lambda a, b: _helper_that_delegates(a, b), id="through a helper"),
    pytest.param(lambda a, b: [imported_outer(x, y) for x, y in [(a, b)]][0], id="inside a comprehension"),
])
def test_a_forbidden_function_captured_before_the_check_is_caught(learner, capsys):
    with pytest.raises(AssertionError):
        nb00_welcome.check_outer(learner)
    out = flat(capsys.readouterr().out)
    assert "your code uses torch.outer" in out
    assert "through the name 'a default" not in out       # a default argument is named as one


def _squares_reference(x):
    return x * x


SQUARES = Exercise(id="nb99_demo.squares", reference=_squares_reference, public=nb00_welcome.SQUARE.public,
                   hidden=nb00_welcome.SQUARE.hidden, hint="x * x")


def test_the_checks_own_reference_is_out_of_reach():
    # a notebook can import the checks module; calling the exercise's ground truth must not pass
    captured = SQUARES.reference
    called = SQUARES.run(lambda x: SQUARES.reference(x), cuda_available=False)
    held = SQUARES.run(lambda x: captured(x), cuda_available=False)
    outer = OUTER.run(lambda a, b: OUTER.reference(a, b), cuda_available=False)   # torch.outer itself
    assert called.failed and "your code called the reference answer of check_squares" in called.failed[0].detail
    assert held.failed and "your code uses the reference answer of check_squares" in held.failed[0].detail
    assert outer.failed and "your code called the reference answer of check_outer" in outer.failed[0].detail
    assert SQUARES.reference is _squares_reference and OUTER.reference is torch.outer
    assert SQUARES.run(lambda x: x * x, cuda_available=False).passed


def test_names_that_merely_resemble_a_forbidden_one_are_allowed():
    outer = correct_outer  # a learner's own function may be called outer
    report = OUTER.run(lambda a, b: outer(a, b), cuda_available=False)
    assert not report.failed


# ------------------------------------------------------------------ devices

def test_missing_gpu_is_pending_never_passed():
    report = OUTER.run(correct_outer, cuda_available=False)
    statuses = {(o.device, o.status) for o in report.outcomes}
    assert statuses == {("cpu", PASS), ("cuda", PENDING), ("meta", PASS)}  # meta: a device case without a GPU
    assert "pending" in report.text() and "cuda" in report.text()
    assert all(o.device in ("cpu", "meta") for o in report.outcomes if o.status == PASS)


def test_a_cpu_only_group_is_neither_run_nor_reported_pending_on_cuda():
    # e.g. an integer matrix product, for which CUDA has no kernel
    groups = [Group("floats", [Case((torch.ones(2), torch.ones(3)))]),
              Group("integers, CPU only", [Case((torch.ones(2, dtype=torch.int64),) * 2)], cpu_only=True)]
    exercise = Exercise(id="test.outer", reference=correct_outer, public=lambda: groups,
                        hidden=lambda g: groups, hint="")
    report = exercise.run(correct_outer, cuda_available=False)
    assert [(o.device, o.title) for o in report.outcomes] == [
        ("cpu", "floats"), ("cpu", "integers, CPU only"), ("cuda", "floats")]


@pytest.mark.cuda
def test_cuda_cases_run_where_there_is_a_gpu():
    report = OUTER.run(correct_outer, cuda_available=True)
    assert {(o.device, o.status) for o in report.outcomes} == {("cpu", PASS), ("cuda", PASS), ("meta", PASS)}
    wrong = OUTER.run(lambda a, b: correct_outer(a, b).cpu(), cuda_available=True)
    assert any(o.device == "cuda" and o.status == FAIL for o in wrong.outcomes)


def _on_the_cpu_always(a, b):
    return torch.zeros(len(a), len(b), dtype=a.dtype) + a[:, None] * b[None, :]


def test_meta_groups_catch_a_result_created_on_the_cpu_without_a_gpu():
    """A case on the meta device compares kinds only (there are no values), and a tensor created on the
    CPU whatever the inputs' device is refused there or comes back on the wrong device."""
    groups = [Group("floats", [Case((torch.ones(2), torch.ones(3)))])]
    exercise = Exercise(id="test.outer", reference=correct_outer, public=lambda: groups,
                        hidden=lambda g: groups, hint="the hint", on_meta=lambda: groups)
    right = exercise.run(correct_outer, cuda_available=False)
    assert [(o.device, o.status) for o in right.outcomes] == [("cpu", PASS), ("cuda", PENDING), ("meta", PASS)]
    wrong = exercise.run(_on_the_cpu_always, cuda_available=False)
    assert [(o.device, o.status) for o in wrong.outcomes] == [("cpu", PASS), ("cuda", PENDING), ("meta", FAIL)]
    assert "device" in wrong.failed[0].detail or "meta" in wrong.failed[0].detail


def test_meta_tensors_compare_by_kind_and_never_count_as_edited():
    from grader.checks.compare import changed
    a, b = torch.ones(2, 3, device="meta"), torch.zeros(2, 3, device="meta")
    assert mismatch(a, b) is None and changed(a, b) is None
    assert "dtype" in mismatch(a, b.double()) and "cpu" in mismatch(a, torch.ones(2, 3))


def _exercise_with_mutants(monkeypatch, mutants, **fields):
    """An outer-product exercise whose known mistakes are ``mutants`` (name -> (fn, hint))."""
    from grader.checks import exercise as module
    from grader.mutants import Mutant
    registered = [Mutant("test.outer", name, fn, hint) for name, (fn, hint) in mutants.items()]
    monkeypatch.setattr(module, "mutants_for", lambda exercise_id: registered)
    groups = [Group("floats", [Case((torch.ones(2), torch.ones(3)))])]
    return Exercise(id="test.outer", reference=correct_outer, public=lambda: groups, hidden=lambda g: groups,
                    hint="the exercise's hint", **fields)


def _crash_on_a_name(a, b):
    return undefined_name * a[:, None] * b[None, :]  # noqa: F821  (the mistake under test)


def _crash_on_a_shape(a, b):
    return a * b


def test_a_crash_gets_the_hint_of_the_mutant_that_fails_the_same_way(monkeypatch):
    exercise = _exercise_with_mutants(monkeypatch, {"shape": (_crash_on_a_shape, "shape hint"),
                                                   "name": (_crash_on_a_name, "name hint")},
                                      extra_hints={NameError: "a NameError hint"})
    assert exercise.run(_crash_on_a_name, cuda_available=False).failed[0].hint == "name hint"
    assert exercise.run(_crash_on_a_shape, cuda_available=False).failed[0].hint == "shape hint"
    # a crash no known mistake reproduces: the hint of its type, only where the exercise gives one
    assert exercise.run(lambda a, b: other_name, cuda_available=False).failed[0].hint == "a NameError hint"  # noqa: F821
    assert exercise.run(lambda a, b: a.no_such_method(), cuda_available=False).failed[0].hint == "the exercise's hint"


def test_an_edit_in_place_gets_the_hint_of_the_mutant_that_makes_it(monkeypatch):
    def zeroes_a(a, b):
        a.zero_()
        return a[:, None] * b[None, :]
    exercise = _exercise_with_mutants(monkeypatch, {"zeroes": (zeroes_a, "zeroes hint")}, in_place_hint="edit hint")
    assert exercise.run(zeroes_a, cuda_available=False).failed[0].hint == "zeroes hint"
    assert exercise.run(lambda a, b: a.mul_(2)[:, None] * b[None, :], cuda_available=False).failed[0].hint == "edit hint"


def test_a_not_implemented_error_with_a_message_is_not_taken_for_the_stub():
    def meta_copy(a, b):
        return torch.empty(2, 3).copy_(torch.ones(2, 3, device="meta"))  # torch: "Cannot copy out of meta tensor"
    [failed] = OUTER.run(meta_copy, cuda_available=False).failed[:1]
    assert "raised NotImplementedError" in failed.detail and "still raises" not in failed.detail


# ------------------------------------------------------------------ pass / fail / diagnosis

def test_check_passes_silently_on_a_correct_answer_and_raises_on_a_wrong_one(capsys):
    nb00_welcome.check_outer(correct_outer)
    assert "✓ cpu" in flat(capsys.readouterr().out)
    with pytest.raises(AssertionError, match="check_outer"):
        nb00_welcome.check_outer(lambda a, b: correct_outer(a, b) + 1)


def test_a_failure_counts_the_groups_that_ran_and_reports_pending_ones_apart(capsys):
    report = OUTER.run(lambda a, b: correct_outer(a, b) + 1, cuda_available=False)
    lines = report.text().splitlines()
    assert lines[-1] == f"3 of 4 groups failed; read the lines marked {FAIL}."
    # pending is said once, on its own line, and never counted among the failures
    assert [line for line in lines if "pending" in line] == [
        f"  {PENDING} cuda pending: 3 groups not run, no CUDA device here (torch.cuda.is_available() is False)"]
    assert report.failed_summary(with_pending=True) == ("3 of 4 groups failed; 3 cuda groups not run, no CUDA "
                                                        "device here (torch.cuda.is_available() is False)")
    with pytest.raises(AssertionError) as raised:
        nb00_welcome.check_outer(lambda a, b: correct_outer(a, b) + 1)
    assert "3 of 4 groups failed (see" in str(raised.value)


def test_groups_without_a_tensor_have_no_cuda_case_to_wait_for():
    # a string function: nothing in its cases tells it a device, so CUDA would only repeat the CPU run
    def shout(value):
        return value.upper() if isinstance(value, str) else value * 2
    mixed = Exercise(id="nb99_demo.shout", reference=shout, hint="",
                     public=lambda: [Group("words", [Case(("ab",))]),
                                     Group("with a tensor", [Case(("ab",)), Case((torch.ones(1),))])],
                     hidden=lambda g: [])
    report = mixed.run(shout, cuda_available=False)
    assert [(o.device, o.title, o.status) for o in report.outcomes] == [
        ("cpu", "words", PASS), ("cpu", "with a tensor", PASS), ("cuda", "with a tensor", PENDING)]
    words_only = dataclasses.replace(mixed, public=lambda: [Group("words", [Case(("ab",))])])
    text = words_only.run(shout, cuda_available=False).text()
    assert "pending" not in text and "cuda" not in text
    assert "All public cases pass on cpu." in text


def test_a_failure_is_data_and_its_text_shows_the_call_then_the_difference_then_the_hint():
    report = OUTER.run(lambda a, b: b[:, None] * a[None, :], cuda_available=False)
    failure = report.failed[0]
    assert (failure.case, failure.reason) == (1, "wrong result")
    assert failure.shown == "outer(tensor([1., 2., 3.]), tensor([10., 20., 30., 40.]))"
    assert failure.difference == "expected shape (3, 4), got shape (4, 3)"
    assert flat(failure.line()).startswith(
        f"{FAIL} cpu float32 vectors of different lengths (2 cases) case 1 of 2 (lengths 3 and 4): {failure.shown} "
        f"{failure.difference} hint: your result is the transpose")
    lines = [line.strip() for line in failure.line().splitlines()]   # case, difference, hint: each on its own line
    case = next(i for i, line in enumerate(lines) if line.startswith("case 1 of 2"))
    hint = next(i for i, line in enumerate(lines) if line.startswith("hint: "))
    assert 0 < case < lines.index(failure.difference) < hint
    crash = OUTER.run(lambda a, b: a * b, cuda_available=False).failed[0]
    assert (crash.reason, crash.error) == ("raised", "RuntimeError")
    assert crash.difference.startswith("raised RuntimeError: The size of tensor a (3) must match")


def test_large_tensors_are_shown_by_dtype_and_shape_and_a_difference_is_short():
    from grader.checks.compare import describe
    assert describe(torch.zeros(2, 3, 8, 8)) == "float32 tensor of shape (2, 3, 8, 8)"
    assert describe(torch.tensor([1, 2])) == "tensor([1, 2])"
    assert describe(np.zeros((5, 5))) == "float64 array of shape (5, 5)"
    expected = torch.arange(1000.0).reshape(10, 100)
    got = expected.clone()
    got[3, 7], got[9, 9] = -1.0, 1e6
    text = mismatch(expected, got)
    assert text == ("2 of 1000 values differ; first at [3, 7]: expected 307.0, got -1.0; "
                    "largest error 9.99e+05 at [9, 9]")
    assert "\n" not in text


def test_a_failed_check_renders_in_ipython_as_one_line_not_a_traceback_into_the_grader():
    with pytest.raises(AssertionError) as raised:
        nb00_welcome.check_outer(lambda a, b: correct_outer(a, b) + 1)
    [line] = raised.value._render_traceback_()
    assert "AssertionError" in line and "check_outer: " in line and "grader" not in line


def test_a_learner_result_equal_to_a_mutant_gets_that_mutants_hint(capsys):
    transposed = next(m for m in mutants_for("nb00_welcome.outer") if m.name == "outer_transposed")
    with pytest.raises(AssertionError):
        nb00_welcome.check_outer(lambda a, b: b[:, None] * a[None, :])
    assert flat(transposed.hint) in flat(capsys.readouterr().out)


def test_an_unexplained_wrong_result_gets_the_generic_hint(capsys):
    with pytest.raises(AssertionError):
        nb00_welcome.check_outer(lambda a, b: correct_outer(a, b) * 3)
    out = flat(capsys.readouterr().out)
    assert flat(OUTER.hint) in out
    assert not any(flat(m.hint) in out for m in mutants_for(OUTER.id))


def test_not_implemented_and_crashes_are_reported_not_raised_through(capsys):
    def stub(a, b):
        raise NotImplementedError()
    with pytest.raises(AssertionError):
        nb00_welcome.check_outer(stub)
    assert "still raises NotImplementedError" in flat(capsys.readouterr().out)
    with pytest.raises(AssertionError):
        nb00_welcome.check_outer(lambda a, b: a.no_such_method())
    assert "raised AttributeError" in flat(capsys.readouterr().out)


def test_inputs_edited_in_place_do_not_change_the_expected_result_and_fail_the_case():
    def outer_then_vandalise(a, b):
        result = correct_outer(a, b)
        a.zero_()
        return result
    report = OUTER.run(outer_then_vandalise, cuda_available=False)
    # every group fails on its first case, on the edit, not on a result compared with a zeroed input
    assert len(report.failed) == 3 and all("changed its input in place" in o.detail for o in report.failed)


@pytest.mark.parametrize("exercise", sorted(nb00_welcome.EXERCISES))
def test_every_mutant_of_notebook_00_is_rejected_in_public_with_its_own_hint(exercise):
    spec = nb00_welcome.EXERCISES[exercise]
    mutants = mutants_for(spec.id)
    assert mutants, f"{spec.id} has no mutants"
    for wrong in mutants:  # by the public cases, with the mutant's own hint
        assert selfcheck.mutant_problem(spec, wrong, mutants) is None


# ------------------------------------------------------------------ hidden cases and seeds

def test_hidden_cases_come_from_the_seed_and_the_variable_reproduces_them(monkeypatch, capsys):
    draws = lambda seed: [c.args for g in OUTER.hidden(torch.Generator().manual_seed(seed)) for c in g.cases]
    same = all(torch.equal(x, y) for a, b in zip(draws(1), draws(1)) for x, y in zip(a, b))
    assert same
    assert any(x.shape != y.shape or not torch.equal(x, y) for a, b in zip(draws(1), draws(2)) for x, y in zip(a, b))
    monkeypatch.setenv(SEED_VARIABLE, "777")
    nb00_welcome.check_outer(correct_outer, hidden=True)
    assert "seed 777" in flat(capsys.readouterr().out)
    monkeypatch.setenv(SEED_VARIABLE, "not a number")
    with pytest.raises(ValueError, match=SEED_VARIABLE):
        nb00_welcome.check_outer(correct_outer, hidden=True)


def test_while_grading_the_notebook_cannot_choose_its_hidden_seed(monkeypatch):
    # a learner's cell that sets the variable would otherwise pick cases it has memorised
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setenv(SEED_VARIABLE, "777")
    records = []   # the outcome as data, as a kernel receives it (checks/record.py): no text parsed back
    monkeypatch.setattr("grader.checks.exercise.show", lambda exercise, report: records.append(as_record(exercise, report)))
    for _ in range(3):
        nb00_welcome.check_outer(correct_outer, hidden=True)
    seeds = {record["seed"] for record in records}
    assert len(records) == 3 and 777 not in seeds and len(seeds) > 1


def test_hard_coded_public_answers_fail_the_hidden_check():
    public = {tuple(c.args[0].tolist()) + tuple(c.args[1].tolist()): correct_outer(*c.args)
              for g in OUTER.public() for c in g.cases}
    memorised = lambda a, b: public[tuple(a.tolist()) + tuple(b.tolist())]
    public_report = OUTER.run(memorised, cuda_available=False)
    assert all(o.status == PASS for o in public_report.outcomes if o.device == "cpu")
    assert OUTER.run(memorised, hidden=True, seed=3, cuda_available=False).failed


# ------------------------------------------------------------------ inputs edited in place

def test_a_function_that_edits_its_input_in_place_fails_even_with_the_right_result():
    def divides_in_place(x):
        x /= x.sum(dim=1, keepdim=True)
        return x
    report = nb00_welcome.NORMALIZE_ROWS.run(divides_in_place, cuda_available=False)
    assert report.failed and "changed its input in place (argument 1: its values changed" in report.failed[0].detail
    assert "6 of 6 positions; first at [0, 0]: 1.0 became 0.25" in report.failed[0].difference   # where, not a dump
    grown = OUTER.run(lambda a, b: a.unsqueeze_(1) * b, cuda_available=False)
    assert "argument 1: its shape changed from (3,) to (3, 1)" in grown.failed[0].detail
    assert "leave the inputs as they were" in grown.failed[0].hint


def test_numpy_inputs_are_copied_too_and_edits_are_seen():
    exercise = Exercise(id="nb99_demo.double", reference=lambda a: a * 2, hint="a * 2",
                        public=lambda: [Group("arrays", [Case((np.arange(3.0),)), Case((np.ones(2),))])],
                        hidden=lambda g: [])
    assert exercise.run(lambda a: a * 2, cuda_available=False).passed
    def doubles_in_place(a):
        a *= 2
        return a
    report = exercise.run(doubles_in_place, cuda_available=False)
    assert "changed its input in place" in report.failed[0].detail


# ------------------------------------------------------------------ comparison

def test_tolerance_follows_the_dtype():
    exact = torch.tensor([1.0, 2.0])
    assert mismatch(exact.half(), (exact + 1e-4).half()) is None
    assert mismatch(exact, exact + 1e-4) is not None
    assert mismatch(exact.double(), exact.double() + 1e-8) is not None
    assert mismatch(torch.tensor([1, 2]), torch.tensor([1, 3])) is not None


def test_mismatch_names_shape_dtype_and_kind():
    assert "shape" in mismatch(torch.ones(2, 3), torch.ones(3, 2))
    assert "dtype" in mismatch(torch.ones(2), torch.ones(2, dtype=torch.float64))
    assert "tensor" in mismatch(torch.ones(2), np.ones(2))
    assert mismatch(np.arange(3), np.arange(3)) is None
    assert "first at [1]" in mismatch(np.arange(3.0), np.array([0.0, 5.0, 2.0]))


@pytest.mark.parametrize("returns, says", [
    # notebook 00 forbids numpy: its watch stops .numpy() before the result's kind is judged
    (lambda a, b: correct_outer(a, b).numpy(), "numpy is not allowed in this exercise"),
    (lambda a, b: correct_outer(a, b).tolist(), "return a torch.Tensor, not a list"),
    (lambda a, b: (a, b), "return a torch.Tensor, not a tuple"),
    (lambda a, b: object.__new__(type("AlwaysEqual", (), {"__eq__": lambda s, o: True})), "not an AlwaysEqual"),
    (lambda a, b: None, "did you forget `return`?"),
    (lambda a, b: correct_outer(a, b).half(), "the result must have dtype float32"),
    (lambda a, b: correct_outer(a, b).to("meta"), "the result must be on the inputs' device"),  # as .cpu() on CUDA
])
def test_a_result_of_the_wrong_kind_gets_a_hint_about_its_kind(returns, says):
    report = OUTER.run(returns, cuda_available=False)
    assert says in report.failed[0].hint


def test_a_numpy_array_returned_where_numpy_is_allowed_gets_the_kind_hint():
    allowing = dataclasses.replace(OUTER, numpy_allowed=True, forbidden_ops=())
    report = allowing.run(lambda a, b: correct_outer(a, b).numpy(), cuda_available=False)
    assert "return a torch.Tensor, not a numpy array" in report.failed[0].hint


def test_values_that_differ_are_shown_as_plain_numbers():
    assert "expected 2.0, got 5.0" in mismatch(np.arange(3.0), np.array([0.0, 1.0, 5.0]))


# ------------------------------------------------------------------ error cases and pipelines (for later notebooks)

def _parse_width(text):
    """A stand-in reference: int(text), which raises ValueError on bad input."""
    return int(text)


PARSE = Exercise(
    id="nb99_demo.parse_width", reference=_parse_width,
    public=lambda: [Group("numbers", [Case(("12",)), Case(("7",))]),
                    Group("bad input", [Case(("x",), "not a number", raises=ValueError)])],
    hidden=lambda g: [], hint="use int()")


def test_an_error_case_passes_when_the_learner_raises_the_documented_type():
    assert PARSE.run(int, cuda_available=False).passed
    silent = PARSE.run(lambda text: int(text) if text.isdigit() else -1, cuda_available=False)
    assert [o.title for o in silent.failed] == ["bad input"]
    assert "must raise ValueError" in silent.failed[0].detail
    wrong_type = PARSE.run(lambda text: int(text) if text.isdigit() else {}[text], cuda_available=False)
    assert "raised KeyError (expected ValueError)" in wrong_type.failed[0].detail


def test_an_error_case_the_reference_does_not_reject_is_the_authors_bug():
    bad = Exercise(id="nb99_demo.bad", reference=str, public=lambda: [Group("g", [Case(("x",), raises=ValueError)])],
                   hidden=lambda g: [], hint="")
    with pytest.raises(RuntimeError, match="expects ValueError, but the reference returned"):
        bad.run(str, cuda_available=False)


def test_call_plugs_the_learners_stage_into_a_pipeline():
    # the learner writes one stage (here: the combining function); the check runs the whole pipeline
    pipeline = Exercise(
        id="nb99_demo.combine", reference=lambda a, b: torch.stack([a, b]).sum(0),
        public=lambda: [Group("pairs", [Case((torch.ones(3), torch.arange(3.0)))])],
        hidden=lambda g: [], hint="add them",
        call=lambda combine, a, b: combine(a, b) * 1)
    assert pipeline.run(lambda a, b: a + b, cuda_available=False).passed
    assert pipeline.run(lambda a, b: a - b, cuda_available=False).failed


def test_a_report_reads_without_scrolling_and_loses_no_word():
    """Long details and hints wrap at the report's width, indented under the group's title."""
    from grader.checks.report import WIDTH, CheckReport, GroupOutcome
    detail = ("case 3 of 12 (a float64 of shape (5,), b float64 of shape (3,)): 3 of 15 values differ; "
              "first at [0, 1]: expected 0.25, got 0.75")
    hint = ("your result is the transpose of outer(a, b): result[i, j] must be a[i] * b[j], and yours is "
            "a[j] * b[i]; index a by the rows and b by the columns " + "x" * 120)
    report = CheckReport("check_outer", hidden=True, seed=123456789, outcomes=[
        GroupOutcome("cpu", "vectors of several lengths, float32 and float64", 12, FAIL, detail, hint),
        GroupOutcome("cuda", "the same on the GPU", 3, PENDING, "pending: no CUDA device on this machine "
                     "(torch.cuda.is_available() is False), so these groups were not run here")])
    lines = report.text().splitlines()
    assert all(len(line) <= WIDTH for line in lines if "x" * 120 not in line), report.text()
    assert len(lines) > 6                               # it did wrap
    hint_line = next(i for i, line in enumerate(lines) if line.lstrip().startswith("hint: "))
    assert lines[hint_line].startswith(" " * 9 + "hint: ") and lines[hint_line + 1].startswith(" " * 15)
    failed_line = next(i for i, line in enumerate(lines) if line.startswith(f"  {FAIL} cpu"))
    assert hint_line > failed_line + 1                  # the detail took more than one line
    assert all(line.startswith(" " * 9) for line in lines[failed_line + 1:hint_line])   # under the title
    assert flat(detail) in flat(report.text()) and flat(hint) in flat(report.text())


def test_dicts_compare_as_python_compares_them_whatever_the_key_order():
    assert mismatch({"a": 1, "b": 2}, {"b": 2, "a": 1}) is None
    assert "keys ['a', 'b']" in mismatch({"a": 1, "b": 2}, {"a": 1})
    assert mismatch({"a": 1, "b": 2}, {"b": 3, "a": 1}).startswith("result['b']:")
    assert mismatch((1, [2, 3]), (1, [2, 4])) == "result[1][1]: expected 3, got 4"   # where a learner would index


def test_two_compiler_reports_with_the_same_errors_at_other_places_say_the_same_thing():
    """A learner's C and a mutant's are printed differently: the same mistake is the same errors, at any line."""
    from grader.checks.exercise import _same_words
    ours = "generated C did not compile (/c/tmpab12cd34/k.c):\nk.c:35:23: error: 'inff' undeclared\n   35 | x = inff;"
    theirs = "generated C did not compile (/c/tmpzz99yy88/k.c):\nk.c:12:9: error: 'inff' undeclared\n   12 | v = inff;"
    other = "generated C did not compile (/c/tmpzz99yy88/k.c):\nk.c:12:9: error: 'v_v9' undeclared\n   12 | v = v_v9;"
    assert _same_words(ours, theirs) and not _same_words(ours, other)
    assert _same_words("no such file tmpab12cd34", "no such file tmpzz99yy88") and not _same_words("a", "b")


def test_a_hint_names_only_a_mistake_that_passes_what_the_answer_passed_in_earlier_groups():
    """Seen on a GPU (notebook 03): two known mistakes raise the same error on a CUDA case, and the first
    one's hint was shown for the second, though the first fails a CPU group that the learner's answer
    (the second mistake) had passed. A mistake that fails an earlier case, in any group, is not the
    learner's."""
    from grader.mutants import REGISTRY, mutant

    def first_float(x):                       # fails the int group, raises below
        if x.dtype == torch.int64:
            return (x * 2).float()
        return x * 2 if x.numel() < 4 else x.reshape(-1, 1) + x
    first_float.__name__ = "result_in_float"

    def second_shape(x):                      # passes the int group, raises the same error below
        return x * 2 if x.numel() < 4 else x.reshape(-1, 1) + x
    second_shape.__name__ = "broadcast_by_mistake"
    exercise = Exercise(id="nb99_evidence.double", reference=lambda x: x * 2, hint="double every entry", public=lambda: [
        Group("int64", [Case((torch.tensor([1, 2]),), "int")]),
        Group("a longer vector", [Case((torch.arange(6.0),), "six entries")]),
    ], hidden=lambda g: [])
    try:
        mutant("nb99_evidence.double", hint="keep the input's dtype")(first_float)
        mutant("nb99_evidence.double", hint="do not broadcast the input against itself")(second_shape)
        shown = [o.hint for o in exercise.run(second_shape, cuda_available=False).outcomes if o.status == FAIL]
        alone = [o.hint for o in exercise.run(first_float, cuda_available=False).outcomes if o.status == FAIL]
    finally:
        REGISTRY.pop("nb99_evidence.double", None)
    assert shown == ["do not broadcast the input against itself"]
    assert alone[0] == "keep the input's dtype"


@pytest.mark.parametrize("assignment", sorted(p.stem for p in SOLUTIONS.glob("[0-9][0-9]_*.py")))
def test_every_hidden_case_drawn_has_a_ground_truth(assignment):
    """A hidden case whose reference raises (a random program eager PyTorch refuses) crashes the check of
    a correct answer, which then loses the cell's points: every case drawn for seeds 0-9 has its truth, or
    is an error case the reference raises on too."""
    exercises = selfcheck.checks_module(assignment).EXERCISES
    for exercise in exercises.values():
        for seed in range(10):
            for group in exercise.hidden(torch.Generator().manual_seed(seed)):
                for case in group.cases:
                    exercise._expected(case, case.args)


def test_a_compiled_float32_result_is_held_to_eagers_own_error_against_float64():
    """``compare.Rounded``: a result further from eager than float32's tolerance is right when it is as
    close to the float64 result as eager is (cancellation); one that is further is wrong."""
    from grader.checks.compare import Rounded, difference, rounded
    exact = torch.tensor([80000.0, 67.83780, 1.0], dtype=torch.float64)
    eager = torch.tensor([80000.0, 67.83790, 1.0])
    as_close = torch.tensor([80000.0, 67.83771, 1.0])        # 1.9e-4 from eager, 0.9e-4 from the exact value
    further = torch.tensor([80000.0, 67.85, 1.0])
    assert difference(eager, as_close) is not None, "the dtype's tolerance alone rejects it"
    assert difference(Rounded(eager, exact), as_close) is None
    assert difference(Rounded(eager, exact), further) is not None
    assert difference(Rounded(eager, exact), as_close.double()) is not None, "a float64 result is still the wrong dtype"
    paired = rounded((eager, torch.tensor([1, 2])), (exact, torch.tensor([1, 2])))
    assert isinstance(paired[0], Rounded) and not isinstance(paired[1], Rounded), "integers compare exactly"
