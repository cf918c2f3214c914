"""Capture records what eager runs, in fx's order, and refuses what it could not replay."""
from __future__ import annotations

import pytest
import torch
import torch.fx
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp

import tensorcraft
from tensorcraft.compiler.capture import capture
from tensorcraft.compiler.examples import model_zoo
from tensorcraft.compiler.interpret import interpret
from tensorcraft.compiler.opnames import canonical_name


class _IntoModules(torch.fx.Tracer):
    """Trace through nn.Linear & co., as capture does (it sees F.linear, not the module)."""

    def is_leaf_module(self, m, qualname):
        return isinstance(m, torch.nn.modules.batchnorm._BatchNorm)  # its forward branches on input.dim()


def fx_op_sequence(model, x) -> list[str]:
    gm = torch.fx.GraphModule(model, _IntoModules().trace(model))
    ShapeProp(gm).propagate(x)
    ops = []
    for n in gm.graph.nodes:
        if n.op in ("call_function", "call_method") and "tensor_meta" in n.meta:  # tensor values only
            ops.append(canonical_name(n.target))
        elif n.op == "call_module":  # a batchnorm module: capture sees the F.batch_norm it calls
            ops.append("batch_norm")
    return ops


@pytest.mark.parametrize("name", ["mlp", "cnn", "norm_softmax", "attention"])
def test_same_op_sequence_as_fx_symbolic_trace(name):
    model, shape = model_zoo()[name]
    model.eval()  # (in training mode batchnorm bumps a counter in place: capture refuses that)
    x = torch.randn(shape)
    captured = capture(model, (x,), module=model)
    ours = [n.op for n in captured.graph.nodes if n.kind == "call"]
    assert ours == fx_op_sequence(model, x)


@pytest.mark.parametrize("name", ["mlp", "cnn", "norm_softmax", "attention"])
def test_interpreting_the_captured_graph_gives_eager_results(name):
    model, shape = model_zoo()[name]
    model.eval()
    x, other = torch.randn(shape), torch.randn(shape)
    captured = capture(model, (x,), module=model)
    params = dict(model.named_parameters()) | dict(model.named_buffers())
    (got,) = interpret(captured.graph, [other], params)
    torch.testing.assert_close(got, model(other))


def _refusal(fn, *args):
    compiled = tensorcraft.compile(fn, backend="python")
    for _ in range(2):
        torch.testing.assert_close(compiled(*args), fn(*args))  # eager's result, both times
    assert compiled.stats.compiles == 0 and compiled.stats.eager_calls == 1
    return compiled.explain()


def test_data_dependent_branch_runs_eagerly_and_says_why():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1
    text = _refusal(f, torch.ones(3))
    assert "data-dependent Python: Tensor.__bool__" in text and "test_capture.py" in text
    assert tensorcraft.compile(f)(-torch.ones(3)).tolist() == [-2.0, -2.0, -2.0]


@pytest.mark.parametrize("fn, words", [
    (lambda x: x * x.max().item(), "Tensor.item"),
    (lambda x: x[x > 0] * 2, "boolean mask"),
    (lambda x: torch.nonzero(x).float(), "nonzero"),
    (lambda x: x + torch.randn(3), "randomness: randn"),
    (lambda x: F.dropout(x, 0.5, training=True), "randomness: dropout"),
    (lambda x: x.add_(1), "in-place update of an input"),
    (lambda x: torch.exp(x, out=torch.empty(3)), "out= argument"),
])
def test_unfaithful_captures_are_refused(fn, words):
    x = torch.tensor([1.0, -2.0, 3.0])
    compiled = tensorcraft.compile(fn, backend="python")
    compiled(x.clone())
    assert words in compiled.explain() and compiled.stats.compiles == 0


def test_dropout_in_eval_mode_is_captured():
    f = lambda x: F.dropout(x, 0.5, training=False) * 2  # noqa: E731
    compiled = tensorcraft.compile(f, backend="python")
    x = torch.randn(4)
    compiled(x)
    torch.testing.assert_close(compiled(x), x * 2)
    assert compiled.stats.compiles == 1


def test_inplace_update_of_a_parameter_is_refused():
    lin = torch.nn.Linear(3, 3)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lin
            self.register_buffer("count", torch.zeros(()))

        def forward(self, x):
            self.count.add_(1)
            return self.lin(x)
    m = M()
    compiled = tensorcraft.compile(m, backend="python")
    with torch.no_grad():
        compiled(torch.randn(2, 3))
        compiled(torch.randn(2, 3))
    assert m.count.item() == 2 and "in-place update of an input or parameter: add_" in compiled.explain()


def test_inplace_ops_on_intermediates_become_functional():
    def f(x):
        y = x * 2
        y.relu_()
        y[0] = 7.0
        y += 1
        return F.relu(y - 3, inplace=True)
    compiled = tensorcraft.compile(f, backend="python")
    for _ in range(3):
        x = torch.randn(4, 5)
        torch.testing.assert_close(compiled(x), f(x))
    assert compiled.stats.compiles == 1
    ops = [n.op for n in compiled.compiled.captured.nodes if n.kind == "call"]
    assert ops == ["mul", "relu", "index_put", "add", "sub", "relu"]


def test_an_inplace_op_that_would_promote_is_refused_not_given_another_dtype():
    def f(x):
        y = x * 2
        y.add_(x.double())  # y stays float32 (computed in float64, stored in float32); add(y, x64) is float64
        return y
    compiled = tensorcraft.compile(f, backend="python")
    x = torch.randn(3)
    for _ in range(2):
        got = compiled(x)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, f(x))
    assert "in-place op add_ on a torch.float32 tensor computes in torch.float64" in compiled.explain()


def test_inplace_update_of_a_view_is_refused():
    def f(x):
        y = x * 2
        z = y[0]
        z.mul_(3)
        return y
    x = torch.randn(3, 2)
    text = _refusal(f, x)
    assert "shares memory with a view" in text


def test_tensors_from_a_closure_are_baked_in_but_guarded():
    table = torch.arange(4.0)
    f = lambda x: x * table  # noqa: E731
    compiled = tensorcraft.compile(f, backend="python")
    x = torch.ones(4)
    compiled(x), compiled(x)
    table.mul_(10)  # changes in place: the version guard notices
    torch.testing.assert_close(compiled(x), torch.arange(4.0) * 10)
    assert compiled.stats.compiles == 2 and "captured constant" in compiled.stats.recompiles[0]


@pytest.mark.parametrize("fn", [lambda x: (x * 2).zero_() + x, lambda x: (x * 2).requires_grad_() + 1,
                                lambda x: (x * 2).copy_(x) + 1])
def test_inplace_ops_without_a_functional_twin_are_refused(fn):
    x = torch.randn(3)
    compiled = tensorcraft.compile(fn, backend="python")
    torch.testing.assert_close(compiled(x), fn(x))
    assert "has no functional form" in compiled.explain()


def test_a_closure_tensor_that_requires_grad_is_refused_not_silently_detached():
    w = torch.randn(3, requires_grad=True)
    f = lambda x: (x * w).sum()  # noqa: E731
    compiled = tensorcraft.compile(f, backend="python")
    xs = [torch.randn(3), torch.randn(3)]
    for x in xs:
        compiled(x).backward()
    torch.testing.assert_close(w.grad, xs[0] + xs[1])  # d/dw sum(x * w) = x, accumulated over both calls
    assert "from a closure or a global requires grad" in compiled.explain()
    with torch.no_grad():  # without gradients the same closure is just a constant
        compiled(torch.randn(3)), compiled(torch.randn(3))
    assert compiled.stats.compiles == 1


def test_refusal_is_a_stage_the_builder_calls():
    """A substitute for opnames.refusal decides what capture records: refusing nothing records
    the branch the first call took, refusing `mul` sends the call to eager."""
    def branchy(x):
        return x * 2 if x.sum() > 0 else x - 1

    with tensorcraft.substitute(refusal=lambda name, args, kwargs: None):
        captured = capture(branchy, (torch.ones(3),))
    assert captured.reason is None and [n.op for n in captured.graph.nodes if n.kind == "call"] == ["sum", "gt", "mul"]
    with tensorcraft.substitute(refusal=lambda name, args, kwargs: "no mul" if name == "mul" else None):
        captured = capture(lambda x: x.sin() * 2, (torch.ones(3),))
    assert captured.graph is None and captured.reason.startswith("no mul")
