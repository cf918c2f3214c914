"""infer: the implicit-output rule against torch.einsum and numpy.einsum."""
import numpy as np
import torch
from hypothesis import given

from einstein_cases import cases
from tensorcraft.einstein.infer import implicit_output, implicit_output_string
from tensorcraft.einstein.parse import parse_equation


def implicit_only(case):
    return case.equation.split("->")[0]


@given(cases(max_operands=3))
def test_implicit_output_matches_torch_and_numpy(case):
    equation = implicit_only(case)
    ours = parse_equation(equation, case.shapes)
    rng = np.random.default_rng(0)
    arrays = case.arrays(rng)
    expected = torch.einsum(equation, *map(torch.from_numpy, arrays))
    assert ours.output_shape == tuple(expected.shape)
    # a differently-sized probe per label shows the ORDER, not just the shape
    labels = [[c for c in term.replace("...", "").replace(" ", "")] for term in equation.split(",")]
    if "..." not in equation:
        explicit = equation + "->" + implicit_output_string(equation)
        assert torch.allclose(torch.einsum(explicit, *map(torch.from_numpy, arrays)), expected)
        assert np.allclose(np.einsum(equation, *arrays), expected.numpy())
        assert "".join(ours.output_labels) == implicit_output_string(equation)
    else:
        assert ours.output_labels[: ours.ellipsis_ndim] == tuple(f"…{k}" for k in range(ours.ellipsis_ndim))
    assert implicit_output(labels) == tuple(l for l in ours.output_labels if not l.startswith("…"))


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
