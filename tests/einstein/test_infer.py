"""infer: the implicit-output rule against torch.einsum and numpy.einsum, and its swap point."""
import numpy as np
import pytest
import torch
from hypothesis import given

import tensorcraft as tc
from einstein_cases import cases
from tensorcraft.einstein.infer import infer_output
from tensorcraft.einstein.parse import EinsumError, parse_equation, parse_terms


def _input_side(equation: str) -> str:
    """The input side as the parser hands it to the stage: no spaces, no '->'."""
    terms, _ = parse_terms(equation.split("->")[0])
    return ",".join(map(str, terms))


@given(cases(max_operands=3))
def test_implicit_output_matches_torch_and_numpy(case):
    equation = case.equation.split("->")[0]  # drop any explicit output
    arrays = case.arrays(np.random.default_rng(0))
    tensors = [torch.from_numpy(a) for a in arrays]
    expected = torch.einsum(equation, *tensors)
    ours = parse_equation(equation, case.shapes)
    assert ours.implicit and ours.output_shape == tuple(expected.shape)
    # the order, not just the shape: the explicit equation we inferred computes the same values
    explicit = ours.normalized
    torch.testing.assert_close(torch.einsum(explicit, *tensors), expected)
    np.testing.assert_allclose(np.einsum(explicit, *arrays), np.einsum(equation, *arrays))
    assert explicit.split("->")[1] == infer_output(_input_side(equation))


@given(cases(max_operands=3))
def test_the_stage_alone_gives_torchs_implicit_output(case):
    equation = case.equation.split("->")[0]
    tensors = case.tensors(np.random.default_rng(0))
    inferred = infer_output(_input_side(equation))
    torch.testing.assert_close(torch.einsum(equation + "->" + inferred, *tensors), torch.einsum(equation, *tensors))


@pytest.mark.parametrize("inputs, shapes", [
    ("ijd,jk", [(2, 3, 4), (3, 5)]),      # not order of appearance ('idk'): sorted, 'dik'
    ("aB", [(2, 3)]),                     # uppercase before lowercase
    ("Z...a", [(2, 3, 4)]),               # ellipsis dimensions first
    ("...ij,...jk", [(6, 2, 3), (6, 3, 4)]),
    ("ii", [(3, 3)]),                     # a letter repeated in one operand is summed
    ("iij", [(2, 2, 3)]),
    ("ba", [(2, 3)]),                     # a transpose
])
def test_examples_against_torch(inputs, shapes):
    tensors = [torch.randn(s, dtype=torch.float64) for s in shapes]
    expected = torch.einsum(inputs, *tensors)
    torch.testing.assert_close(torch.einsum(inputs + "->" + infer_output(inputs), *tensors), expected)
    torch.testing.assert_close(tc.einsum(inputs, *tensors), expected)


def test_the_pipeline_calls_a_substitute_with_the_normalised_input_side():
    a, b = torch.randn(2, 3), torch.randn(3, 4)
    calls = []

    def transposing(inputs: str) -> str:
        calls.append(inputs)
        return "ki"

    with tc.substitute(infer_output=transposing):
        result = tc.einsum("i j , j k", a, b)
    assert calls == ["ij,jk"]
    torch.testing.assert_close(result, torch.einsum("ij,jk->ki", a, b))
    # outside the block, the library's rule again
    torch.testing.assert_close(tc.einsum("ij,jk", a, b), torch.einsum("ij,jk", a, b))


def test_an_explicit_equation_never_calls_the_stage():
    def never(inputs: str) -> str:
        raise AssertionError("called")

    with tc.substitute(infer_output=never):
        torch.testing.assert_close(tc.einsum("ij,jk->ik", torch.ones(2, 3), torch.ones(3, 4)), torch.full((2, 4), 3.0))


@pytest.mark.parametrize("answer, message", [
    ("iq", r"infer_output\('ij,jk'\) returned|'q' does not appear"),
    ("ii", r"'i' appears more than once"),
    ("i-k", r"infer_output\('ij,jk'\) returned 'i-k'"),
    ("....", r"infer_output\('ij,jk'\) returned '....'"),
    (["i", "k"], r"infer_output\('ij,jk'\) returned \['i', 'k'\], not a string"),
    (None, r"returned None, not a string"),
])
def test_an_invalid_answer_of_the_stage_is_an_einsum_error_naming_it(answer, message):
    with tc.substitute(infer_output=lambda inputs: answer):
        with pytest.raises(EinsumError, match=message) as error:
            tc.einsum("ij,jk", torch.ones(2, 3), torch.ones(3, 4))
    assert "infer_output" in str(error.value)


def test_the_stage_is_listed_among_the_stages():
    assert "infer_output" in tc.stages.stage_names()
    assert infer_output.stage_name == "infer_output"
