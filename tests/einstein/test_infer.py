"""infer: the implicit-output rule against torch.einsum and numpy.einsum."""
import numpy as np
import torch
from hypothesis import given

from einstein_cases import cases
from tensorcraft.einstein.infer import implicit_output, implicit_output_string, infer_output
from tensorcraft.einstein.parse import parse_equation


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
    assert explicit.split("->")[1] == implicit_output_string(equation)
    letters = [[c for c in term.replace("...", "").replace(" ", "")] for term in equation.split(",")]
    assert implicit_output(letters) == tuple(l for l in ours.output_labels if not l.startswith("…"))


def test_uppercase_sorts_before_lowercase_in_torch_numpy_and_ours():
    x = np.zeros((2, 3))
    assert torch.einsum("aB", torch.from_numpy(x)).shape == (3, 2) == np.einsum("aB", x).shape
    assert implicit_output([["a", "B"]]) == ("B", "a")


def test_ellipsis_dimensions_come_first():
    x = np.zeros((2, 3, 4))
    assert torch.einsum("Z...a", torch.from_numpy(x)).shape == (3, 2, 4) == np.einsum("Z...a", x).shape
    assert implicit_output([["Z", "…0", "a"]]) == ("…0", "Z", "a")
    assert implicit_output_string("Z...a") == "...Za"


def test_a_letter_repeated_in_one_operand_is_summed():
    assert implicit_output([["i", "i"]]) == ()
    assert torch.einsum("ii", torch.eye(3)).shape == ()


@given(cases(max_operands=3))
def test_infer_output_on_strings_gives_torchs_implicit_output(case):
    equation = case.equation.split("->")[0]
    inferred = infer_output(equation.split(","))
    tensors = case.tensors(np.random.default_rng(0))
    torch.testing.assert_close(torch.einsum(equation + "->" + inferred, *tensors), torch.einsum(equation, *tensors))
