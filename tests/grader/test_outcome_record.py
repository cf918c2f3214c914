"""A check's outcome recorded as data (grader/checks/record.py): the diagnosis the learner reads and
the one the class report counts are the one match, by the mutant's name."""
import json

import pytest
import torch

from grader.checks import record
from grader.checks.nb00_welcome import OUTER
from grader.checks.report import CHANGED_INPUT, FORBIDDEN, NOT_IMPLEMENTED, WRONG_RESULT
from grader.mutants import mutants_for


@pytest.mark.parametrize("wrong", mutants_for("nb00_welcome.outer"), ids=lambda m: m.name)
def test_every_mutant_is_recorded_by_its_name_beside_the_hint_the_learner_reads(wrong):
    report = OUTER.run(wrong.fn, cuda_available=False)
    failed = report.failed
    assert failed, f"{wrong.name} passes the public cases"
    first = failed[0]
    assert first.hint == wrong.hint and first.mutant == wrong.name
    data = record.as_record(OUTER.id, report)
    assert data["failures"][0]["mutant"] == wrong.name and data["failures"][0]["hint"] == wrong.hint
    json.dumps(data)                       # JSON-able as it is


def test_an_unexplained_answer_records_no_mutant_and_the_stub_its_own_reason():
    unexplained = OUTER.run(lambda a, b: a[:, None] * b[None, :] + 1, cuda_available=False)
    data = record.as_record(OUTER.id, unexplained)
    assert data["groups"]["failed"] == len(unexplained.failed) > 0
    assert {f["mutant"] for f in data["failures"]} == {None}
    assert {f["reason"] for f in data["failures"]} == {WRONG_RESULT}
    assert data["exercise"] == "nb00_welcome.outer" and data["hidden"] is False and data["seed"] is None

    def stub(a, b):
        raise NotImplementedError()
    assert {f["reason"] for f in record.as_record(OUTER.id, OUTER.run(stub, cuda_available=False))["failures"]} \
        == {NOT_IMPLEMENTED}


def test_a_tripwire_and_an_edit_of_an_input_are_recorded_by_reason():
    forbidden = record.as_record(OUTER.id, OUTER.run(lambda a, b: torch.outer(a, b), cuda_available=False))
    assert FORBIDDEN in {f["reason"] for f in forbidden["failures"]}

    def edits(a, b):
        a.mul_(1)
        a += 1
        return (a - 1)[:, None] * b[None, :]
    edited = record.as_record(OUTER.id, OUTER.run(edits, cuda_available=False))
    assert CHANGED_INPUT in {f["reason"] for f in edited["failures"]}


def test_in_a_kernel_the_text_is_shown_once_with_the_record_beside_it(monkeypatch, capsys):
    published = []

    class Publisher:
        def publish(self, data, metadata=None):
            published.append(data)

    class Shell:
        display_pub = Publisher()
    monkeypatch.setattr("IPython.get_ipython", lambda: Shell())
    with pytest.raises(AssertionError):
        OUTER.check(lambda a, b: b[:, None] * a[None, :])
    assert capsys.readouterr().out == ""                     # not printed besides
    (bundle,) = published
    assert set(bundle) == {"text/plain", record.MIME}
    assert "hint:" in bundle["text/plain"] and bundle[record.MIME]["failures"][0]["mutant"] == "outer_transposed"


def test_outside_a_kernel_the_text_is_printed_as_before(capsys):
    OUTER.check(lambda a, b: a[:, None] * b[None, :])
    assert "All public cases pass" in capsys.readouterr().out
