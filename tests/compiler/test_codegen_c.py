"""The C + OpenMP generator against the meaning of a kernel (kernel.evaluate, i.e. eager torch)."""
import os
import subprocess
import sys
import textwrap
from unittest.mock import patch

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernel_cases import assert_matches, compact_kernel, empty_outputs, kernels, random_inputs

from tensorcraft.compiler.codegen import c, c_toolchain
from tensorcraft.compiler.codegen.kernel import Buffer, Kernel, Output, Stmt, evaluate


@pytest.fixture(autouse=True, scope="module")
def private_cache(tmp_path_factory):
    """Every test module run compiles into its own cache, so hits and misses are ours to count."""
    with patch.dict(os.environ, TENSORCRAFT_CACHE_DIR=str(tmp_path_factory.mktemp("tensorcraft_cache"))):
        yield


def run(kernel, inputs):
    outputs = empty_outputs(kernel)
    c.compile_kernel(kernel)(*inputs, *outputs)
    return outputs


@given(kernels(), st.integers(0, 2**31))
def test_random_kernels_match_eager(kernel, seed):
    inputs = random_inputs(kernel, seed)
    assert_matches(kernel, run(kernel, inputs), evaluate(kernel, *inputs))


@pytest.mark.parametrize("shape, input_shapes", [
    ((3, 40_000), [(3, 40_000), (1, 40_000)]),          # long rows: several column blocks per row, ragged end
    ((1, 50_001), [(1, 50_001), (1, 1)]),               # one row only: still split into blocks
    ((2, 1, 3, 4097), [(2, 1, 3, 4097), (1, 1, 3, 1)]),  # size-1 dims dropped, row offsets from 2 dims
    ((100_003,), [(100_003,), (100_003,)]),             # the flat loop
])
def test_large_and_blocked_shapes(shape, input_shapes):
    kernel = compact_kernel(shape, input_shapes, [("s", "mul", "v0", "v1"), ("e", "tanh", "s")],
                     [("y", "e"), ("r", "s", "sum"), ("m", "e", "max")] if len(shape) > 1 else [("y", "e")])
    inputs = random_inputs(kernel, seed=1)
    assert_matches(kernel, run(kernel, inputs), evaluate(kernel, *inputs))


def test_nan_propagates_like_torch():
    kernel = compact_kernel((2, 3), [(2, 3), (2, 3)],
                     [("r", "relu", "v0"), ("m", "maximum", "v1", "v0"), ("n", "minimum", "v0", "v1")],
                     [("r", "r"), ("m", "m"), ("n", "n"), ("hi", "v0", "max"), ("lo", "v0", "min")])
    x = torch.tensor([[1.0, float("nan"), -2.0], [0.5, -1.0, 3.0]])
    y = torch.tensor([[float("nan"), 0.0, 5.0], [1.0, 2.0, -4.0]])
    got, expected = run(kernel, [x, y]), evaluate(kernel, x, y)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, equal_nan=True, rtol=0, atol=0)


def test_constants_are_the_dtype_value_torch_uses():
    kernel = compact_kernel((4,), [(4,)], [("c", "const", 0.1), ("y", "add", "v0", "c")], [("y", "y")])
    x = torch.zeros(4)
    assert torch.equal(run(kernel, [x])[0], evaluate(kernel, x)[0])


def test_second_compile_is_a_cache_hit_even_in_a_new_process():
    kernel = compact_kernel((7,), [(7,)], [("e", "exp", "v0")], [("y", "e")])
    before = c_toolchain.compile_count
    c.compile_kernel(kernel)
    assert c_toolchain.compile_count == before + 1
    libraries = list((c_toolchain.cache_dir() / "c").glob("*.so"))
    mtimes = {p: p.stat().st_mtime_ns for p in libraries}
    c.compile_kernel(kernel)                              # same process: loaded library reused
    assert c_toolchain.compile_count == before + 1
    code = textwrap.dedent("""
        from tensorcraft.compiler.codegen import c, c_toolchain
        from tensorcraft.compiler.codegen.kernel import Buffer, Kernel, Output, Stmt
        k = Kernel("k", (7,), (Buffer("x0", (7,)),), (Stmt("v0", "load", ("x0",)), Stmt("e", "exp", ("v0",))),
                   (Output("y", "e"),))
        c.compile_kernel(k)
        print(c_toolchain.compile_count)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0", "a second process recompiled a cached kernel"
    assert {p: p.stat().st_mtime_ns for p in libraries} == mtimes


def test_missing_compiler_raises_compiler_unavailable(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/bin/cc-missing")
    kernel = compact_kernel((3,), [(3,)], [("y", "neg", "v0")], [("y", "y")])
    with pytest.raises(c.CompilerUnavailable, match="cc-missing"):
        c.compile_kernel(kernel)


def test_compiler_without_openmp_raises_compiler_unavailable(monkeypatch, tmp_path):
    fake = tmp_path / "fakecc"
    fake.write_text("#!/bin/sh\necho 'fakecc: error: unrecognized option -fopenmp' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    kernel = compact_kernel((3,), [(3,)], [("y", "abs", "v0")], [("y", "y")])
    with pytest.raises(c.CompilerUnavailable, match="OpenMP"):
        c.compile_kernel(kernel)


@pytest.fixture(scope="module")
def add_kernel():
    kernel = compact_kernel((2, 3), [(2, 3), (1, 3)], [("s", "add", "v0", "v1")], [("y", "s")])
    return kernel, c.compile_kernel(kernel)


@pytest.mark.parametrize("make_args, error, message", [
    (lambda: [torch.ones(2, 3, dtype=torch.float64), torch.ones(1, 3), torch.empty(2, 3)], TypeError, "input x0: expected dtype torch.float32"),
    (lambda: [torch.ones(3, 2).t(), torch.ones(1, 3), torch.empty(2, 3)], ValueError, "input x0: expected a contiguous"),
    (lambda: [torch.ones(2, 3), torch.ones(2, 3), torch.empty(2, 3)], ValueError, r"input x1: expected shape \[1, 3\]"),
    (lambda: [torch.ones(2, 3), torch.ones(1, 3), torch.empty(2, 4)], ValueError, r"output y: expected shape \[2, 3\]"),
    (lambda: [torch.ones(2, 3), torch.ones(1, 3)], TypeError, "takes 3 tensors"),
    (lambda: [torch.ones(2, 3), [1.0, 2.0, 3.0], torch.empty(2, 3)], TypeError, "expected a torch.Tensor"),
    (lambda: [torch.ones(2, 3, device="meta"), torch.ones(1, 3), torch.empty(2, 3)], ValueError, "CPU tensors"),
])
def test_bad_arguments_get_clear_errors(add_kernel, make_args, error, message):
    kernel, compiled = add_kernel
    with pytest.raises(error, match=message):
        compiled(*make_args())


def test_in_place_output_is_allowed():
    kernel = compact_kernel((1000,), [(1000,)], [("e", "sigmoid", "v0")], [("y", "e")])
    x = torch.randn(1000)
    expected = evaluate(kernel, x)[0]
    c.compile_kernel(kernel)(x, x)
    torch.testing.assert_close(x, expected)


def test_source_is_readable_c():
    kernel = compact_kernel((4, 8), [(4, 8), (4, 1)], [("d", "sub", "v0", "v1"), ("e", "exp", "d")], [("y", "e"), ("s", "e", "sum")])
    source = c.c_source(kernel)
    assert "#pragma omp parallel for" in source and "reduction(+:" in source
    assert "void kernel_k(const float *in_x0, const float *in_x1, float *out_y, float *out_s, int n_threads)" in source


SPECIAL_VALUES = [0.0, -0.0, 1e-30, -1e-30, 80.0, -80.0, 100.0, -100.0, float("inf"), float("-inf"), float("nan")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_op_over_its_whole_domain(dtype):
    """Each op in UNARY/BINARY over [-6, 6], zero, tiny, huge, infinities and NaN: IEEE semantics
    are kept, so even NaN and infinity come out where eager puts them."""
    from tensorcraft.compiler.codegen.kernel import BINARY, DTYPES, UNARY
    x = torch.cat([torch.linspace(-6, 6, 1001, dtype=torch.float64), torch.tensor(SPECIAL_VALUES, dtype=torch.float64)])
    xs = torch.cartesian_prod(x[::10], x[::10]).to(DTYPES[dtype]).T.contiguous()
    ops = [(f"u_{op}", op, "v0") for op in sorted(UNARY)] + [(f"b_{op}", op, "v0", "v1") for op in sorted(BINARY)]
    kernel = compact_kernel(tuple(xs[0].shape), [tuple(xs[0].shape)] * 2, ops, [(name, name) for name, *_ in ops], dtype)
    got, expected = run(kernel, [xs[0], xs[1]]), evaluate(kernel, xs[0], xs[1])
    for (name, *_), g, e in zip(ops, got, expected):
        torch.testing.assert_close(g, e, rtol=2e-6 if dtype == "float32" else 1e-14,
                                   atol=1e-6 if dtype == "float32" else 1e-14, equal_nan=True,
                                   msg=lambda m, name=name: f"{name}: {m}")


def test_threads_follow_omp_num_threads_or_the_available_cores(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert c.available_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert c.available_threads() == len(os.sched_getaffinity(0))
    big = compact_kernel((c.PARALLEL_MIN_ELEMENTS,), [(c.PARALLEL_MIN_ELEMENTS,)], [("y", "neg", "v0")], [("y", "y")])
    small = compact_kernel((8,), [(8,)], [("y", "neg", "v0")], [("y", "y")])
    assert c.compile_kernel(big).threads == c.available_threads() and c.compile_kernel(small).threads == 1


@pytest.mark.parametrize("shape, reduce", [((3, 0), "sum"), ((3, 0), "mean"), ((0, 4), "sum"), ((0,), None)])
def test_empty_iteration_spaces(shape, reduce):
    kernel = compact_kernel(shape, [shape], [("e", "exp", "v0")], [("y", "e")] + ([("r", "e", reduce)] if reduce else []))
    inputs = random_inputs(kernel, 0)
    for g, e in zip(run(kernel, inputs), evaluate(kernel, *inputs)):
        torch.testing.assert_close(g, e, equal_nan=True)


def test_names_that_are_not_c_identifiers_or_clash_with_c():
    """Kernel and buffer names come from graphs: "exp", "float", "bn.weight" must all work."""
    kernel = Kernel("exp", (3,), (Buffer("bn.weight", (3,)), Buffer("float", (3,))),
                    (Stmt("int", "load", ("bn.weight",)), Stmt("1x", "load", ("float",)),
                     Stmt("c", "const", (3e38,)), Stmt("s", "add", ("int", "1x")), Stmt("m", "minimum", ("s", "c"))),
                    (Output("out.0", "m"),))
    inputs = random_inputs(kernel, 0)
    assert_matches(kernel, run(kernel, inputs), evaluate(kernel, *inputs))


def test_concurrent_compiles_of_one_kernel_all_succeed():
    """Several compiles racing on one cache entry (threads here, processes in real life) each build
    in a private folder and rename into place, so none reads a half-written file."""
    from concurrent.futures import ThreadPoolExecutor
    kernel = compact_kernel((5,), [(5,)], [("c", "cos", "v0")], [("y", "c")])
    source = c.c_source(kernel) + "\n/* not compiled before */\n"
    with ThreadPoolExecutor(4) as pool:
        compiled = list(pool.map(lambda _: c.CompiledCKernel(kernel, source), range(4)))
    x = torch.randn(5)
    for k in compiled:
        y = torch.empty(5)
        k(x, y)
        torch.testing.assert_close(y, evaluate(kernel, x)[0])
    assert not list((c_toolchain.cache_dir() / "c").glob("tmp*")), "a private build folder was left behind"


def test_unwritable_cache_dir_raises_compiler_unavailable(monkeypatch, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TENSORCRAFT_CACHE_DIR", str(blocker / "cache"))
    kernel = compact_kernel((3,), [(3,)], [("y", "sin", "v0")], [("y", "y")])
    with pytest.raises(c.CompilerUnavailable, match="TENSORCRAFT_CACHE_DIR"):
        c.compile_kernel(kernel)
