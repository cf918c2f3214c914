"""loops: the definition as loops, and the generated loop source, against torch and numpy."""
import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from einstein_cases import cases
from tensorcraft.einstein.loops import GENERATED_NAME, einsum_loops, loop_code

tiny = cases(max_operands=3, max_size=3, max_labels=3)


@given(tiny, st.sampled_from(["float64", "int64", "int32"]))
def test_einsum_loops_equals_torch_einsum(case, dtype):
    rng = np.random.default_rng(1)
    tensors = case.tensors(rng, "int64" if dtype == "int64" else "float64")
    expected = torch.einsum(case.equation, *tensors)
    got = einsum_loops(case.equation, *tensors)
    assert isinstance(got, torch.Tensor) and got.shape == expected.shape
    torch.testing.assert_close(got, expected, check_dtype=False)


@given(tiny, st.sampled_from(["float32", "int32"]))
def test_einsum_loops_equals_numpy_einsum_for_numpy_input(case, dtype):
    if "..." in case.equation and "->" in case.equation and "..." not in case.equation.split("->")[1]:
        return  # numpy rejects summing the ellipsis away; torch (and we) allow it, tested above
    arrays = case.arrays(np.random.default_rng(2), dtype)
    expected = np.einsum(case.equation, *arrays)
    got = einsum_loops(case.equation, *arrays)
    assert isinstance(got, np.ndarray) and got.dtype == np.asarray(expected).dtype
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@given(tiny)
def test_generated_loop_code_runs_and_equals_torch_einsum(case):
    arrays = case.arrays(np.random.default_rng(3))
    namespace = {}
    exec(loop_code(case.equation, *case.shapes), namespace)
    got = namespace[GENERATED_NAME](*arrays)
    expected = torch.einsum(case.equation, *map(torch.from_numpy, arrays)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_generated_code_reads_like_the_definition():
    source = loop_code("ij,jk->ik", (2, 3), (3, 4))
    assert "def einsum_loops_generated(op0, op1):" in source
    assert "out = np.zeros((2, 4)" in source
    assert "for i in range(2):" in source and "for k in range(4):" in source
    assert "for j in range(3):  # summed" in source
    assert "out[i, k] += op0[i, j] * op1[j, k]" in source


def test_broadcast_dimension_is_read_at_index_zero():
    source = loop_code("ij,jk->ik", (2, 1), (3, 4))
    assert "op0[i, 0] * op1[j, k]" in source


def test_sublist_format_and_zero_sized_dimensions():
    a, b = torch.randn(2, 0), torch.randn(0, 4)
    torch.testing.assert_close(einsum_loops(a, [0, 1], b, [1, 2], [0, 2]), torch.einsum("ij,jk->ik", a, b))


def test_a_tensor_anywhere_gives_a_tensor_like_tensorcraft_einsum():
    # regression: only the first operand was looked at, so a list first gave a numpy array
    got = einsum_loops("i,i->i", [1.0, 2.0], torch.ones(2, dtype=torch.float64))
    assert isinstance(got, torch.Tensor)
    torch.testing.assert_close(got, torch.tensor([1.0, 2.0], dtype=torch.float64))
