"""Checks of the Triton generator against kernel.evaluate (eager torch), run by test_codegen_triton.py.

This file is not collected by a plain pytest run (its name does not start with test_): Triton
decides at import time whether its own library functions (tl.zeros, tl.sum...) are interpreted,
so these checks need a process that had TRITON_INTERPRET=1 (CPU) or CUDA from its start.
test_codegen_triton.py starts that process. Sizes stay tiny: the interpreter runs every program
with numpy.
"""
import os
from unittest.mock import patch

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernel_cases import assert_matches, compact_kernel, empty_outputs, kernels, random_inputs

from tensorcraft.compiler.codegen import triton as triton_codegen
from tensorcraft.compiler.codegen.kernel import BINARY, DTYPES, UNARY, Buffer, Kernel, Output, Stmt, evaluate

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy, in the interpreter, on NaN and inf
DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
if DEVICE == "cuda" and not torch.cuda.is_available():
    raise RuntimeError("run these checks through test_codegen_triton.py, or with TRITON_INTERPRET=1 set from the start")


@pytest.fixture(autouse=True, scope="module")
def private_cache(tmp_path_factory):
    with patch.dict(os.environ, TENSORCRAFT_CACHE_DIR=str(tmp_path_factory.mktemp("tensorcraft_cache"))):
        yield


def run(kernel, inputs):
    outputs = empty_outputs(kernel, DEVICE)
    triton_codegen.compile_kernel(kernel)(*inputs, *outputs)
    return outputs


@given(kernels(), st.integers(0, 2**31))
def test_random_kernels_match_eager(kernel, seed):
    inputs = random_inputs(kernel, seed, DEVICE)
    assert_matches(kernel, run(kernel, inputs), evaluate(kernel, *inputs))


@pytest.mark.parametrize("shape, input_shapes, reduce", [
    ((2, 2500), [(2, 2500), (1, 2500)], True),       # rows longer than one chunk, ragged last chunk
    ((3, 1, 700), [(3, 1, 700), (3, 1, 1)], True),    # a broadcast along the reduced axis
    ((5, 3, 300), [(5, 3, 300), (1, 3, 1)], False),   # several programs, offsets from split index
])
def test_several_programs_and_chunks(shape, input_shapes, reduce):
    outputs = [("y", "e"), ("r", "s", "sum"), ("m", "e", "min"), ("a", "s", "mean")] if reduce else [("y", "e")]
    kernel = compact_kernel(shape, input_shapes, [("s", "mul", "v0", "v1"), ("e", "tanh", "s")], outputs)
    inputs = random_inputs(kernel, 1, DEVICE)
    assert_matches(kernel, run(kernel, inputs), evaluate(kernel, *inputs))


SPECIAL_VALUES = [0.0, -0.0, 1e-30, -1e-30, 80.0, -80.0, float("inf"), float("-inf"), float("nan")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_op_over_its_whole_domain(dtype):
    """Each op over [-6, 6], zero, tiny, huge, infinities and NaN, against eager."""
    x = torch.cat([torch.linspace(-6, 6, 61, dtype=torch.float64), torch.tensor(SPECIAL_VALUES, dtype=torch.float64)])
    xs = torch.cartesian_prod(x, x).to(DTYPES[dtype]).T.contiguous().to(DEVICE)
    ops = [(f"u_{op}", op, "v0") for op in sorted(UNARY)] + [(f"b_{op}", op, "v0", "v1") for op in sorted(BINARY)]
    kernel = compact_kernel(tuple(xs[0].shape), [tuple(xs[0].shape)] * 2, ops, [(name, name) for name, *_ in ops], dtype)
    got, expected = run(kernel, [xs[0], xs[1]]), evaluate(kernel, xs[0], xs[1])
    tol = 2e-6 if dtype == "float32" else 1e-13
    for (name, *_), g, e in zip(ops, got, expected):
        torch.testing.assert_close(g, e, rtol=tol, atol=tol, equal_nan=True, msg=lambda m, name=name: f"{name}: {m}")


def test_nan_propagates_like_torch():
    kernel = compact_kernel((2, 3), [(2, 3), (2, 3)],
                     [("r", "relu", "v0"), ("m", "maximum", "v1", "v0"), ("n", "minimum", "v0", "v1")],
                     [("r", "r"), ("m", "m"), ("n", "n"), ("hi", "v0", "max"), ("lo", "v0", "min")])
    x = torch.tensor([[1.0, float("nan"), -2.0], [0.5, -1.0, 3.0]], device=DEVICE)
    y = torch.tensor([[float("nan"), 0.0, 5.0], [1.0, 2.0, -4.0]], device=DEVICE)
    for g, e in zip(run(kernel, [x, y]), evaluate(kernel, x, y)):
        torch.testing.assert_close(g, e, equal_nan=True, rtol=0, atol=0)


def test_source_is_a_readable_module_kept_in_the_cache_dir():
    kernel = compact_kernel((4, 8), [(4, 8), (4, 1)], [("d", "sub", "v0", "v1"), ("e", "exp", "d")], [("y", "e"), ("s", "e", "sum")])
    compiled = triton_codegen.compile_kernel(kernel)
    assert "@triton.jit" in compiled.source and "tl.sum(" in compiled.source and "def launch(" in compiled.source
    files = list((triton_codegen.cache_dir() / "triton").glob("*.py"))
    assert any(f.read_text() == compiled.source for f in files)


@pytest.fixture(scope="module")
def add_kernel():
    kernel = compact_kernel((2, 3), [(2, 3), (1, 3)], [("s", "add", "v0", "v1")], [("y", "s")])
    return triton_codegen.compile_kernel(kernel)


@pytest.mark.parametrize("make_args, error, message", [
    (lambda: [torch.ones(2, 3, dtype=torch.float64), torch.ones(1, 3), torch.empty(2, 3)], TypeError, "input x0: expected dtype torch.float32"),
    (lambda: [torch.ones(3, 2).t(), torch.ones(1, 3), torch.empty(2, 3)], ValueError, "input x0: expected a contiguous"),
    (lambda: [torch.ones(2, 3), torch.ones(2, 3), torch.empty(2, 3)], ValueError, r"input x1: expected shape \[1, 3\]"),
    (lambda: [torch.ones(2, 3), torch.ones(1, 3)], TypeError, "takes 3 tensors"),
    (lambda: [torch.ones(2, 3), torch.ones(1, 3), torch.empty(2, 3, device="meta")], ValueError, "share a device"),
])
def test_bad_arguments_get_clear_errors(add_kernel, make_args, error, message):
    args = [t.to(DEVICE) if isinstance(t, torch.Tensor) and t.device.type == "cpu" else t for t in make_args()]
    with pytest.raises(error, match=message):
        add_kernel(*args)


@pytest.mark.skipif(DEVICE != "cpu", reason="checks the CPU-without-interpreter message; here kernels run on CUDA")
def test_cpu_tensors_without_the_interpreter_are_refused(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    kernel = compact_kernel((3,), [(3,)], [("y", "neg", "v0")], [("y", "y")])
    compiled = triton_codegen.compile_kernel(kernel)
    assert not compiled.interpreted
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        compiled(torch.ones(3), torch.empty(3))


@pytest.mark.parametrize("shape, reduce", [((3, 0), "sum"), ((3, 0), "mean"), ((0, 4), "sum"), ((0,), None)])
def test_empty_iteration_spaces(shape, reduce):
    kernel = compact_kernel(shape, [shape], [("e", "exp", "v0")], [("y", "e")] + ([("r", "e", reduce)] if reduce else []))
    inputs = random_inputs(kernel, 0, DEVICE)
    for g, e in zip(run(kernel, inputs), evaluate(kernel, *inputs)):
        torch.testing.assert_close(g, e, equal_nan=True)


def test_names_that_are_not_identifiers_or_clash_with_python():
    kernel = Kernel("lambda", (3,), (Buffer("bn.weight", (3,)), Buffer("tl", (3,))),
                    (Stmt("def", "load", ("bn.weight",)), Stmt("1x", "load", ("tl",)),
                     Stmt("s", "add", ("def", "1x")), Stmt("t", "tanh", ("s",))),
                    (Output("out.0", "t"), Output("launch", "s")))
    inputs = random_inputs(kernel, 0, DEVICE)
    assert_matches(kernel, run(kernel, inputs), evaluate(kernel, *inputs))
