"""The checks of notebooks 01 and 02: ground truth from torch, and the learner's stage inside tc.einsum."""
from collections import Counter

import pytest
import torch

from grader.checks import nb01_einsum_notation as nb01
from grader.checks.report import flat
from grader.checks import nb02_einsum_parsing as nb02
from tensorcraft.einstein.infer import infer_output as library_infer_output


def test_torchs_implicit_output_is_read_back_from_the_shape():
    # the order-of-appearance answer would be 'idk'; uppercase sorts first; ellipsis dimensions lead
    for inputs, expected in [("ijd,jk", "dik"), ("aB", "Ba"), ("Z...a", "...Za"), ("ii", ""), ("...,...", "...")]:
        output, result = nb02._torch_implicit_output(inputs)
        assert output == expected
        assert torch.equal(result, torch.einsum(inputs, *nb02._labelled_operands(inputs)[0]))


def test_the_infer_output_check_runs_the_learners_function_inside_tc_einsum():
    seen = Counter()

    def spy(inputs):
        seen[inputs] += 1
        counts = Counter(inputs.replace("...", "").replace(",", ""))
        return ("..." if "..." in inputs else "") + "".join(sorted(c for c, n in counts.items() if n == 1))

    report = nb02.INFER_OUTPUT.run(spy, cuda_available=False)
    assert not report.failed
    # once called directly, once by the parser inside tc.einsum
    assert seen["ijd,jk"] == 2 and seen["...ij,...jk"] == 2


def test_calling_the_librarys_own_stage_is_forbidden():
    report = nb02.INFER_OUTPUT.run(lambda inputs: library_infer_output.library(inputs), cuda_available=False)
    assert report.failed and "uses tensorcraft.einstein.infer_output (through the name" in flat(report.text())


def test_an_answer_the_pipeline_cannot_use_fails_with_the_pipelines_error():
    report = nb02.INFER_OUTPUT.run(lambda inputs: "ij->k", cuda_available=False)
    assert report.failed
    assert "expected 'ik', got 'ij->k'" in flat(report.text())
    answer, result = nb02.run_infer_output(lambda inputs: "ij->k", "ij,jk")
    assert answer == "ij->k" and result.startswith("tc.einsum with your infer_output raised EinsumError")


def test_a_validator_verdict_is_diagnosed_by_the_mutant_that_shares_it():
    def strips_spaces(equation, ndims):
        equation = equation.replace(" ", "")
        if any(not (c.isascii() and c.isalpha()) and c not in ",.->" for c in equation):
            raise ValueError("bad character")
        if "- >" in equation:
            raise ValueError("unreachable")

    report = nb02.VALIDATE_EQUATION.run(strips_spaces, cuda_available=False)
    assert report.failed
    assert "do not remove all spaces" in flat(report.text())


@pytest.mark.parametrize("exercise", [*nb01.EXERCISES.values(), *nb02.EXERCISES.values()], ids=lambda e: e.id)
def test_hidden_cases_are_repeatable_and_every_group_has_cases(exercise):
    first = exercise.hidden(torch.Generator().manual_seed(3))
    again = exercise.hidden(torch.Generator().manual_seed(3))
    assert [g.title for g in first] == [g.title for g in again]
    for a, b in zip(first, again):
        assert len(a.cases) > 0
        assert [repr(c.args) for c in a.cases] == [repr(c.args) for c in b.cases]


def test_validate_groups_hold_what_torch_says():
    groups = nb02.VALIDATE_EQUATION.hidden(torch.Generator().manual_seed(1))
    for group in groups:
        expected = nb02.REJECTED if "rejects" in group.title else nb02.ACCEPTED
        for case in group.cases:
            equation, ndims = case.args
            try:
                torch.einsum(equation, *[torch.zeros((2,) * n) for n in ndims])
                verdict = nb02.ACCEPTED
            except (RuntimeError, ValueError):
                verdict = nb02.REJECTED
            assert verdict == expected, case.args
