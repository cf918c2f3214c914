"""torch.compile(model, backend=tensorcraft.compiler.dynamo_backend) gives eager's numbers."""
from __future__ import annotations

import pytest
import torch

import tensorcraft.compiler
from tensorcraft.compiler.dynamo_backend import graph_from_fx
from tensorcraft.compiler.examples import model_zoo
from tensorcraft.compiler.interpret import interpret


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("name", ["mlp", "cnn", "norm_softmax", "attention"])
def test_dynamo_backend_matches_eager_forward_and_backward(name):
    model, shape = model_zoo()[name]
    model.eval()
    graphs = []

    def backend(gm, example_inputs):
        run = tensorcraft.compiler.dynamo_backend(gm, example_inputs, backend="python")
        graphs.append(run.compiled)
        return run
    compiled = torch.compile(model, backend=backend)
    x = torch.randn(shape)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    x.requires_grad_()
    compiled(x).square().sum().backward()
    got = x.grad
    x.grad = None
    model(x).square().sum().backward()
    torch.testing.assert_close(got, x.grad, rtol=1e-5, atol=1e-5)
    assert graphs and all("def forward(" in g.source for g in graphs)


def test_the_package_attribute_is_the_backend_function():
    assert callable(tensorcraft.compiler.dynamo_backend)
    model, shape = model_zoo()["mlp"]
    compiled = torch.compile(model, backend=tensorcraft.compiler.dynamo_backend)
    x = torch.randn(shape)
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)


def test_graph_from_fx_keeps_the_meaning():
    model, shape = model_zoo()["attention"]
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(shape)
    graph = graph_from_fx(gm, [x])
    params = dict(model.named_parameters())
    torch.testing.assert_close(interpret(graph, [x], params)[0], model(x))
    assert graph.count(op="einsum") == 2 and graph.count(op="linear") == 2  # nn.Linear stays a call_module
