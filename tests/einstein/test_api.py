"""einsum: differential tests against torch.einsum and numpy.einsum, errors, autograd, dtypes, devices."""
import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import tensorcraft
from einstein_cases import cases, mutated_cases
from tensorcraft.einstein.api import build_plan, cached_plan, einsum
from tensorcraft.einstein.parse import EinsumError

equations = cases(min_operands=1, max_operands=4, max_size=4)


def numpy_accepts(equation):
    """numpy rejects an explicit output that leaves out '...' when inputs have one; torch sums it."""
    if "->" not in equation:
        return True
    lhs, rhs = equation.split("->")
    return "..." not in lhs or "..." in rhs


@given(equations, st.sampled_from(["auto", "greedy", "optimal", "none"]))
def test_equals_torch_einsum_float64(case, optimize):
    tensors = case.tensors(np.random.default_rng(10))
    expected = torch.einsum(case.equation, *tensors)
    got = einsum(case.equation, *tensors, optimize=optimize)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected)


@given(equations)
def test_equals_torch_einsum_float32(case):
    tensors = case.tensors(np.random.default_rng(11), "float32")
    torch.testing.assert_close(einsum(case.equation, *tensors), torch.einsum(case.equation, *tensors),
                               rtol=1e-4, atol=1e-4)


@given(equations)
def test_equals_torch_einsum_int64_exactly(case):
    tensors = case.tensors(np.random.default_rng(12), "int64")
    got = einsum(case.equation, *tensors)
    assert got.dtype == torch.int64
    assert torch.equal(got, torch.einsum(case.equation, *tensors))


@given(equations, st.sampled_from(["float64", "float32", "int32", "int64"]))
def test_numpy_in_numpy_out_equals_numpy_einsum(case, dtype):
    assume(numpy_accepts(case.equation))
    arrays = case.arrays(np.random.default_rng(13), dtype)
    expected = np.einsum(case.equation, *arrays)
    got = einsum(case.equation, *arrays)
    assert type(got) is type(expected)  # ndarray, or numpy scalar for a 0-d result
    assert np.asarray(got).dtype == np.asarray(expected).dtype
    np.testing.assert_allclose(got, expected, rtol=1e-5 if dtype == "float32" else 1e-10, atol=1e-5)


@given(mutated_cases())
def test_rejects_exactly_what_torch_rejects(case):
    tensors = case.tensors(np.random.default_rng(14))
    try:
        expected = torch.einsum(case.equation, *tensors)
    except Exception:  # torch rejects (through opt_einsum, even an IndexError)
        expected = None
    if expected is None:
        with pytest.raises(EinsumError):
            einsum(case.equation, *tensors)
    else:
        torch.testing.assert_close(einsum(case.equation, *tensors), expected)


@given(cases(min_operands=1, max_operands=3, max_size=3))
def test_gradients_equal_torch_einsums(case):
    rng = np.random.default_rng(15)
    inputs = case.tensors(rng)
    ours = [t.clone().requires_grad_() for t in inputs]
    theirs = [t.clone().requires_grad_() for t in inputs]
    out_ours = einsum(case.equation, *ours)
    out_theirs = torch.einsum(case.equation, *theirs)
    weight = torch.from_numpy(rng.standard_normal(tuple(out_theirs.shape)))
    (out_ours * weight).sum().backward()
    (out_theirs * weight).sum().backward()
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a.grad, b.grad)


@pytest.mark.parametrize("equation, shape", [
    ("ij->ji", (3, 4)), ("ii", (3, 3)), ("ii->i", (3, 3)), ("ij->", (3, 4)), ("ij->j", (3, 4)),
    ("...ii->...i", (2, 3, 3)), ("iji->j", (2, 5, 2)), ("i", (4,)), ("", ()), ("->", ()),
])
def test_single_operand_cases(equation, shape):
    x = torch.randn(shape, dtype=torch.float64)
    torch.testing.assert_close(einsum(equation, x), torch.einsum(equation, x))
    if numpy_accepts(equation):
        np.testing.assert_allclose(einsum(equation, x.numpy()), np.einsum(equation, x.numpy()))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8])
def test_integer_dtypes_keep_their_dtype_like_numpy(dtype):
    a = torch.randint(0, 3, (2, 3), dtype=dtype)
    b = torch.randint(0, 3, (3, 4), dtype=dtype)
    c = torch.randint(0, 3, (4, 5), dtype=dtype)
    for equation in ["ij,jk->ik", "ij,jk->", "ij,jk,kl->il", "ij,jk,kl->", "ij->j"]:
        operands = [a, b, c][: equation.split("->")[0].count(",") + 1]
        got = einsum(equation, *operands)
        expected = np.einsum(equation, *[t.numpy() for t in operands])
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.numpy(), expected)


def test_mixed_dtypes_are_promoted_and_booleans_work_like_numpy():
    a, b = torch.randn(2, 3), torch.randn(3, 4, dtype=torch.float64)
    got = einsum("ij,jk", a, b)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, a.double() @ b)
    x, y = np.random.rand(2, 3) > 0.5, np.random.rand(3, 4) > 0.5
    np.testing.assert_array_equal(einsum("ij,jk", x, y), np.einsum("ij,jk", x, y))


def test_calling_conventions_and_the_public_names():
    a, b = torch.randn(2, 3), torch.randn(3, 4)
    expected = torch.einsum("ij,jk->ik", a, b)
    torch.testing.assert_close(einsum("ij,jk", [a, b]), expected)
    torch.testing.assert_close(einsum(a, [0, 1], b, [1, 2], [0, 2]), expected)
    torch.testing.assert_close(tensorcraft.einsum(a, [Ellipsis, 1], b, [1, 2]), torch.einsum(a, [Ellipsis, 1], b, [1, 2]))
    assert tensorcraft.EinsumError is EinsumError
    assert tensorcraft.contract_path("ij,jk", a, b)[0] == [(0, 1)]


def test_plans_are_cached_per_equation_and_shapes():
    a, b = torch.randn(5, 6), torch.randn(6, 7)
    einsum("ij,jk->ik", a, b)
    hits = cached_plan.cache_info().hits
    einsum("ij,jk->ik", torch.randn(5, 6), torch.randn(6, 7))
    assert cached_plan.cache_info().hits == hits + 1


def test_the_plan_prints_the_path_and_each_bmm():
    text = str(build_plan("ij,jk,kl->il", [(1000, 10), (10, 1000), (1000, 10)]))
    assert "path [(1, 2), (0, 1)]" in text and "mm (10, 1000) @ (1000, 10)" in text


def test_results_of_zero_size_dimensions():
    a, b = torch.randn(2, 0), torch.randn(0, 4)
    torch.testing.assert_close(einsum("ij,jk->ik", a, b), torch.zeros(2, 4))


# ------------------------------------------------------------------ CUDA

@pytest.mark.cuda
@given(cases(min_operands=1, max_operands=4, max_size=4))
def test_cuda_equals_torch_einsum_with_gradients(case):
    inputs = [t.cuda().requires_grad_() for t in case.tensors(np.random.default_rng(16))]
    out = einsum(case.equation, *inputs)
    expected = torch.einsum(case.equation, *inputs)
    assert out.device.type == "cuda"
    torch.testing.assert_close(out, expected)
    ours = torch.autograd.grad(out.sum(), inputs, allow_unused=True)
    theirs = torch.autograd.grad(expected.sum(), inputs, allow_unused=True)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_cuda_integer_contractions(dtype):
    a = torch.randint(0, 3, (2, 3, 4), dtype=dtype)
    b = torch.randint(0, 3, (2, 4, 5), dtype=dtype)
    got = einsum("bij,bjk->bik", a.cuda(), b.cuda())
    assert got.dtype == dtype and got.device.type == "cuda"
    assert torch.equal(got.cpu(), einsum("bij,bjk->bik", a, b))


def test_numpy_views_without_copies_or_warnings():
    a = np.random.rand(3, 4)
    cases = [("ij->ji", a[::-1]), ("ij,j", np.broadcast_to(np.arange(4.0), (3, 4)), np.ones(4)),
             ("ij,jk", a, np.asfortranarray(a.T)), ("i,i", [1, 2, 3], [4, 5, 6]),
             ("i->", np.array([(1.0, 2), (3.0, 4)], dtype=[("x", "f8"), ("y", "i1")])["x"])]  # strides of 9 bytes
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for equation, *operands in cases:
            np.testing.assert_allclose(einsum(equation, *operands), np.einsum(equation, *operands))


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
@pytest.mark.parametrize("equation, shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),          # one bmm
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)]),        # a path search (optimal)
    ("bii->bi", [(2, 3, 3)]),                          # one operand, a diagonal
])
def test_traced_by_torch_compile_without_a_graph_break(equation, shapes):
    # regression: generator expressions in the planner (math.prod(... for ...)) broke fullgraph tracing
    import torch._dynamo

    torch._dynamo.reset()
    operands = [torch.randn(*shape) for shape in shapes]
    compiled = torch.compile(lambda *ops: einsum(equation, *ops), fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(*operands), torch.einsum(equation, *operands))


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64])
def test_unsigned_numpy_arrays_wrap_around_like_numpy(dtype):
    # regression: torch has no sum/matmul kernels for these dtypes (NotImplementedError before)
    big = np.iinfo(dtype).max - 2
    a = np.array([[big, 3], [5, big]], dtype=dtype)
    for equation in ["ij,jk->ik", "ij->", "ij,ij->i", "ii->i"]:
        operands = [a] * (equation.split("->")[0].count(",") + 1)
        got, expected = einsum(equation, *operands), np.einsum(equation, *operands)
        assert np.asarray(got).dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
    assert einsum("i,i", torch.tensor([60000, 7], dtype=torch.uint16), torch.tensor([2, 1], dtype=torch.uint16)) \
        == (60000 * 2 + 7) % 2**16


@pytest.mark.parametrize("operands", [
    (np.array([1.0, 2.0], dtype=np.longdouble),),
    (np.array([1, 2], dtype=object),),
    (np.array(["a", "b"]),),
    (None,),
    (torch.ones(2), None),
    (torch.ones(2), "ab"),
    ([1.0, 2.0], [1.0, [2.0]]),  # ragged: numpy's own ValueError before
])
def test_operands_torch_cannot_hold_raise_einsum_error_naming_the_operand(operands):
    equation = ",".join("i" for _ in operands)
    with pytest.raises(EinsumError, match=f"operand {len(operands) - 1} "):
        einsum(equation, *operands)


def test_optimize_takes_numpy_einsum_paths_and_rejects_what_is_no_path():
    operands = [np.random.rand(2, 3), np.random.rand(3, 4), np.random.rand(4, 5)]
    numpy_path = np.einsum_path("ij,jk,kl", *operands, optimize="optimal")[0]  # ['einsum_path', (..), (..)]
    np.testing.assert_allclose(einsum("ij,jk,kl", *operands, optimize=numpy_path), np.einsum("ij,jk,kl", *operands))
    assert tensorcraft.contract_path("ij,jk,kl", *operands, optimize=numpy_path)[0] == list(map(tuple, numpy_path[1:]))
    for bad in [3, {"path": 1}, ["einsum_path", "ab"], [(0, 1.5)]]:  # TypeError / ValueError before
        with pytest.raises(EinsumError, match="optimize=.* is neither a strategy"):
            einsum("ij,jk,kl", *operands, optimize=bad)


def test_numbers_and_lists_next_to_tensors_go_to_the_tensors_device():
    # the meta device stands in for a GPU here: a list must not be left on the CPU
    got = einsum("i,i->i", torch.ones(2, device="meta"), [1.0, 2.0])
    assert got.device.type == "meta" and got.shape == (2,)
    torch.testing.assert_close(einsum("i,i->i", [1.0, 2.0], torch.ones(2)), torch.tensor([1.0, 2.0]))


@pytest.mark.parametrize("equation", ["ij->ij", "ij", "...->...", "i...->i..."])
def test_an_identity_returns_a_view_not_the_operand_itself(equation):
    # regression: the input object itself came back (torch.einsum returns a new view with a grad_fn)
    x = torch.randn(2, 3, requires_grad=True)
    out, expected = einsum(equation, x), torch.einsum(equation, x)
    assert out is not x and out.data_ptr() == x.data_ptr()
    assert out.grad_fn is not None and expected.grad_fn is not None
    a = np.ones((2, 3))
    got = einsum(equation, a)
    assert got is not a and np.shares_memory(got, a) == np.shares_memory(np.einsum(equation, a), a)
