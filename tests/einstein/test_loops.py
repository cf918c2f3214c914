"""loops: the definition as loops, the generated loop source and the pipeline that runs them,
against torch.einsum and numpy.einsum."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tensorcraft
from einstein_cases import cases
from tensorcraft.einstein.loops import (GENERATED_NAME, TooManyIterations, bind_call, count_iterations,
                                        einsum_by_definition, einsum_loops, generated_function, loop_code)
from tensorcraft.einstein.parse import EinsumError

tiny = cases(max_operands=3, max_size=3, max_labels=3)


def _ones_count(equation: str, shapes) -> int:
    """Ground truth for the iteration count from torch itself: summing a product of ones over every
    label counts the points of the index space (a repeated label once, broadcast sizes as they broadcast)."""
    lhs = equation.split("->")[0]
    return int(torch.einsum(lhs + "->", *[torch.ones(s, dtype=torch.int64) for s in shapes]))


@given(tiny, st.sampled_from(["float64", "int64", "int32"]))
def test_einsum_by_definition_equals_torch_einsum(case, dtype):
    rng = np.random.default_rng(1)
    tensors = case.tensors(rng, "int64" if dtype == "int64" else "float64")
    expected = torch.einsum(case.equation, *tensors)
    got = einsum_by_definition(case.equation, *tensors)
    assert isinstance(got, torch.Tensor) and got.shape == expected.shape
    torch.testing.assert_close(got, expected, check_dtype=False)


@given(tiny)
def test_the_stage_itself_on_explicit_equations_keeps_the_dtype(case):
    tensors = case.tensors(np.random.default_rng(4), "int64")
    explicit = bind_call(case.equation, *tensors).equation
    got = einsum_loops(explicit, *tensors)
    assert got.dtype == torch.int64
    torch.testing.assert_close(got, torch.einsum(case.equation, *tensors))


@given(tiny, st.sampled_from(["float32", "int32"]))
def test_einsum_by_definition_equals_numpy_einsum_for_numpy_input(case, dtype):
    if "..." in case.equation and "->" in case.equation and "..." not in case.equation.split("->")[1]:
        return  # numpy rejects summing the ellipsis away; torch (and we) allow it, tested above
    arrays = case.arrays(np.random.default_rng(2), dtype)
    expected = np.einsum(case.equation, *arrays)
    got = einsum_by_definition(case.equation, *arrays)
    assert type(got) is type(expected) and got.dtype == expected.dtype  # ndarray, or a numpy scalar for 0-d
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@given(tiny)
def test_generated_loop_code_runs_and_equals_torch_einsum(case):
    tensors = case.tensors(np.random.default_rng(3))
    got = einsum_by_definition(case.equation, *tensors, generated=True)
    torch.testing.assert_close(got, torch.einsum(case.equation, *tensors), rtol=1e-9, atol=1e-12)


@given(cases(max_operands=4, max_size=5, max_labels=3))
def test_count_iterations_equals_the_sum_over_ones(case):
    assert count_iterations(case.equation, *case.shapes) == _ones_count(case.equation, case.shapes)


def test_generated_code_reads_like_the_definition():
    source = loop_code("ij,jk->ik", (2, 3), (3, 4))
    assert "def einsum_loops_generated(op0, op1):" in source
    assert "out = torch.zeros((2, 4), dtype=op0.dtype, device=op0.device)" in source
    assert "for i in range(2):" in source and "for k in range(4):" in source
    assert "for j in range(3):  # summed" in source
    assert "out[i, k] += op0[i, j] * op1[j, k]" in source
    assert "einsum" not in source.replace(GENERATED_NAME, "")


def test_generated_function_takes_numpy_arrays_too():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    got = generated_function("ij,jk->ik", a.shape, b.shape)(a, b)
    np.testing.assert_allclose(got.numpy(), a @ b)


def test_broadcast_dimension_is_read_at_index_zero():
    source = loop_code("ij,jk->ik", (2, 1), (3, 4))
    assert "op0[i, 0] * op1[j, k]" in source


def test_sublist_format_and_zero_sized_dimensions():
    a, b = torch.randn(2, 0), torch.randn(0, 4)
    torch.testing.assert_close(einsum_by_definition(a, [0, 1], b, [1, 2], [0, 2]), torch.einsum("ij,jk->ik", a, b))
    assert count_iterations("ij,jk->ik", (2, 0), (0, 4)) == 0


def test_a_tensor_anywhere_gives_a_tensor_like_tensorcraft_einsum():
    got = einsum_by_definition("i,i->i", [1.0, 2.0], torch.ones(2, dtype=torch.float64))
    assert isinstance(got, torch.Tensor)
    torch.testing.assert_close(got, torch.tensor([1.0, 2.0], dtype=torch.float64))


def test_ellipsis_dimensions_reach_the_stages_as_free_letters():
    seen = []

    def recording(equation, *operands):
        seen.append(equation)
        return einsum_loops.library(equation, *operands)

    a, b = torch.randn(5, 2, 3), torch.randn(3, 4)
    with tensorcraft.substitute(einsum_loops=recording):
        got = einsum_by_definition("...ij,jk", a, b)
    assert seen == ["aij,jk->aik"]
    torch.testing.assert_close(got, torch.einsum("...ij,jk", a, b))


def test_each_stage_is_called_by_the_pipeline_through_substitute():
    a, b = torch.randn(2, 3), torch.randn(3, 4)
    calls = []

    def spy(name, library):
        def stage(*args):
            calls.append(name)
            return library(*args)
        return stage

    with tensorcraft.substitute(einsum_loops=spy("einsum_loops", einsum_loops.library),
                                loop_code=spy("loop_code", loop_code.library),
                                count_iterations=spy("count_iterations", count_iterations.library)):
        einsum_by_definition("ij,jk", a, b)
        einsum_by_definition("ij,jk", a, b, generated=True)
    assert calls == ["count_iterations", "einsum_loops", "count_iterations", "loop_code"]


def test_too_many_iterations_is_refused_before_any_loop_runs():
    a = torch.zeros(200, 200)
    with pytest.raises(TooManyIterations, match="8,000,000 times") as error:
        einsum_by_definition("ij,jk", a, a)
    assert error.value.iterations == 200 ** 3 and isinstance(error.value, EinsumError)
    assert einsum_by_definition("ij,jk", torch.ones(3, 3), torch.ones(3, 3), max_iterations=27).sum() == 27


def test_a_substitute_count_that_is_no_int_is_named():
    with tensorcraft.substitute(count_iterations=lambda equation, *shapes: float(math.prod(shapes[0]))):
        with pytest.raises(TypeError, match=r"count_iterations\('ij->i', \.\.\.\) must return an int"):
            einsum_by_definition("ij->i", torch.ones(2, 3))


def test_generated_source_that_defines_no_function_is_named():
    with tensorcraft.substitute(loop_code=lambda equation, *shapes: "x = 1\n"):
        with pytest.raises(ValueError, match="defines no function einsum_loops_generated"):
            einsum_by_definition("i->", torch.ones(2), generated=True)
    with tensorcraft.substitute(loop_code=lambda equation, *shapes: None):
        with pytest.raises(TypeError, match="must return Python source as a str"):
            einsum_by_definition("i->", torch.ones(2), generated=True)
