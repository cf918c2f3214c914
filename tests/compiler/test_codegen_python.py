"""The python kernel backend and the wrapper: readable source that compiles and computes the right thing."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tensorcraft
from tensorcraft.compiler.codegen import backends
from tensorcraft.compiler.codegen.kernel import BINARY, REDUCTIONS, UNARY, Buffer, Kernel, Output, Stmt, evaluate
from tensorcraft.compiler.codegen.python import compile_kernel, python_source
from tensorcraft.compiler.examples import model_zoo

from available_backends import backend_params


@st.composite
def kernels(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    inputs = [Buffer(f"in{i}", tuple(d if draw(st.booleans()) else 1 for d in shape))
              for i in range(draw(st.integers(1, 3)))]
    stmts = [Stmt(f"x{i}", "load", (b.name,)) for i, b in enumerate(inputs)]
    for i in range(draw(st.integers(0, 6))):
        names = [s.name for s in stmts]
        op = draw(st.sampled_from(sorted(UNARY) + sorted(BINARY) + ["const"]))
        if op == "const":
            stmts.append(Stmt(f"t{i}", "const", (draw(st.sampled_from([0.5, -2.0, 3.0])),)))
        elif op in UNARY:
            stmts.append(Stmt(f"t{i}", op, (draw(st.sampled_from(names)),)))
        else:
            stmts.append(Stmt(f"t{i}", op, (draw(st.sampled_from(names)), draw(st.sampled_from(names)))))
    values = [s.name for s in stmts]
    outputs = [Output(f"out{i}", draw(st.sampled_from(values)),
                      draw(st.sampled_from([None] + sorted(REDUCTIONS))))
               for i in range(draw(st.integers(1, 2)))]
    return Kernel("k", shape, tuple(inputs), tuple(stmts), tuple(outputs), draw(st.sampled_from(["float32", "float64"])))


@given(kernels())
def test_python_kernels_compute_what_evaluate_says(kernel):
    dtype = torch.float32 if kernel.dtype == "float32" else torch.float64
    inputs = [torch.rand(b.shape, dtype=dtype) + 0.5 for b in kernel.inputs]  # positive: log/sqrt/pow stay real
    outputs = [torch.full(kernel.output_shape(o), float("nan"), dtype=dtype) for o in kernel.outputs]
    compile_kernel(kernel)(*inputs, *outputs)
    for got, expected in zip(outputs, evaluate(kernel, *inputs)):
        torch.testing.assert_close(got, expected, equal_nan=True)


def test_kernel_source_reads_like_the_kernel():
    kernel = Kernel("k", (2, 3), (Buffer("a", (2, 3)), Buffer("b", (1, 3))),
                    (Stmt("x", "load", ("a",)), Stmt("y", "load", ("b",)), Stmt("z", "add", ("x", "y")),
                     Stmt("e", "exp", ("z",))), (Output("o", "e"), Output("s", "e", "sum")))
    source = python_source(kernel)
    assert "def k(a, b, o, s):" in source and "z = torch.add(x, y)" in source and "e = torch.exp(z)" in source
    assert "s.copy_(torch.sum(e.expand((2, 3)), dim=-1, keepdim=True))" in source


@pytest.mark.parametrize("name", ["mlp", "cnn", "norm_softmax", "attention"])
def test_generated_wrapper_compiles_and_reruns(name):
    model, shape = model_zoo()[name]
    compiled = tensorcraft.compile(model.eval(), backend="python")
    x = torch.randn(shape)
    with torch.no_grad():
        compiled(x)
        result = compiled.compiled
        code = compile(result.code.source, "<wrapper>", "exec")  # valid Python on its own
        assert code.co_filename == "<wrapper>"
        fn = result.code.load()
        params = dict(model.named_parameters()) | dict(model.named_buffers())
        out = fn(x, *[params[n] for n in result.code.param_names])
        torch.testing.assert_close(out[0], model(x), rtol=1e-5, atol=1e-5)
    assert "def forward(" in result.source and "del " in result.source


def test_debug_prints_graphs_plan_and_code(capsys):
    model, shape = model_zoo()["mlp"]
    compiled = tensorcraft.compile(model.eval(), backend="python", debug=True)
    with torch.no_grad():
        compiled(torch.randn(shape))
    printed = capsys.readouterr().out
    for words in ("==== captured graph", "==== optimized graph", "memory plan:", "def forward(",
                  "torch.nn.functional.linear(x, fc1_weight, fc1_bias)", "# ---- kernel fused ----"):
        assert words in printed


def test_wrapper_keeps_extern_calls_and_reuses_slots():
    def f(x, w):
        for _ in range(3):
            x = torch.tanh(x * 2 + 1) @ w
        return x
    compiled = tensorcraft.compile(f, backend="python")
    x, w = torch.randn(8, 8), torch.randn(8, 8)
    compiled(x, w)
    torch.testing.assert_close(compiled(x, w), f(x, w))
    source = compiled.compiled.code.source
    assert source.count("matmul(") == 3 and source.count("= _slot0[:64].view((8, 8))  # reused slot") == 3


def test_unknown_backend_and_missing_toolchain():
    with pytest.raises(ValueError, match="unknown backend 'fortran'"):
        backends.load_backend("fortran")
    assert backends.default_backend(torch.device("cpu")) == "c"
    assert backends.default_backend(torch.device("cuda", 0)) == "triton"


@pytest.mark.parametrize("backend", backend_params())
def test_each_backend_runs_a_fused_reduction(backend):
    f = lambda x, b: (torch.exp(x + b) * 0.5).sum(-1)  # noqa: E731
    compiled = tensorcraft.compile(f, backend=backend)
    x, b = torch.randn(4, 6), torch.randn(6)
    for _ in range(2):
        torch.testing.assert_close(compiled(x, b), f(x, b), rtol=1e-5, atol=1e-5)
    assert compiled.compiled.backend == backend and compiled.compiled.optimized.count(kind="kernel") == 1


@pytest.mark.parametrize("backend", backend_params())
def test_kernel_inputs_that_are_constants_or_strided_views(backend):
    weight = torch.randn(4, 6).t()  # a non-contiguous [6, 4] tensor from a closure
    bias = torch.randn(4)

    def f(x):
        y = x.transpose(0, 1)  # a strided view as a kernel input
        return torch.tanh(y * weight + bias) * 2, torch.sigmoid(y) + weight
    compiled = tensorcraft.compile(f, backend=backend)
    x = torch.randn(4, 6)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), f(x), rtol=1e-5, atol=1e-5)
    source = compiled.compiled.code.source
    assert source.count("transpose = transpose.contiguous()") == 1  # once, though two kernels read it
