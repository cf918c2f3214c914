"""torch.compile(model, backend=dynamo_backend.backend) gives eager's numbers."""
from __future__ import annotations

import types

import pytest
import torch

from tensorcraft.compiler import dynamo_backend
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
        run = dynamo_backend.backend(gm, example_inputs, backend="python")
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


def test_dynamo_backend_is_a_module_holding_the_backend_function():
    import tensorcraft.compiler.dynamo_backend as module
    assert isinstance(module, types.ModuleType) and module is dynamo_backend and callable(module.backend)
    model, shape = model_zoo()["mlp"]
    compiled = torch.compile(model, backend=dynamo_backend.backend)
    x = torch.randn(shape)
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)


def test_graph_from_fx_keeps_the_meaning():
    model, shape = model_zoo()["attention"]
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(shape)
    graph = graph_from_fx(gm, [x])
    params = dict(model.named_parameters())
    torch.testing.assert_close(interpret(graph, [x], params)[0], model(x))
    assert graph.count(op="einsum") == 2 and graph.count(op="Linear") == 2  # nn.Linear stays a call_module


def _bumped_in_place(a):
    a += 1
    return a * 2


def _view_bumped_in_place(a):
    b = a * 2
    v = b.t()
    b.add_(1)  # v sees it too
    return v * 3


def _bumped_through_contiguous(a):
    b = a.contiguous()  # a itself when a is contiguous
    b.mul_(2)
    return b + 1


def _promoted_in_place(a):
    b = a * 2
    b += a.double()  # stays float32
    return b


def _twice_random(a):
    return a + torch.rand_like(a) - torch.rand_like(a) + torch.rand(a.shape)


@pytest.mark.parametrize("fn, words", [(_bumped_in_place, "update of an input"), (_twice_random, "randomness"),
                                       (_view_bumped_in_place, "shares memory"),
                                       (_bumped_through_contiguous, "update of an input"),  # b is a
                                       (_promoted_in_place, "would change the dtype")])
def test_graphs_with_mutations_or_randomness_run_as_dynamo_gave_them(fn, words):
    """Our passes assume pure ops: DCE would drop an unread add_, CSE merge two rand_like."""
    runs = []

    def backend(gm, example_inputs):
        runs.append(dynamo_backend.backend(gm, example_inputs, backend="python"))
        return runs[-1]
    compiled = torch.compile(fn, backend=backend)
    x = torch.randn(4, 3)
    for _ in range(2):
        mine, theirs = x.clone(), x.clone()
        torch.manual_seed(0)
        got = compiled(mine)
        torch.manual_seed(0)
        torch.testing.assert_close(got, fn(theirs))
        torch.testing.assert_close(mine, theirs)  # the input was mutated as eager mutates it
    assert runs and runs[0].compiled is None and words in runs[0].reason


def _in_place_on_intermediates(a):
    b = a * 2
    b.relu_()
    c = b.sum(-1)  # reads b before the next update
    b[0] = 7.0
    b += 1
    return torch.nn.functional.relu(b - 3, inplace=True), c


def test_in_place_ops_on_fresh_intermediates_become_functional_and_compile():
    runs = []

    def backend(gm, example_inputs):
        runs.append(dynamo_backend.backend(gm, example_inputs, backend="python"))
        return runs[-1]
    compiled = torch.compile(_in_place_on_intermediates, backend=backend)
    for _ in range(2):
        x = torch.randn(4, 3)
        torch.testing.assert_close(compiled(x), _in_place_on_intermediates(x))
    assert len(runs) == 1 and runs[0].reason is None
    ops = [n.op for n in runs[0].compiled.captured.nodes if n.kind == "call"]
    assert ops == ["mul", "relu", "sum", "index_put", "add", "sub", "relu"]


def test_batchnorm_in_training_mode_updates_its_statistics_once():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    twin = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    twin.load_state_dict(model.state_dict())
    compiled = torch.compile(model, backend=dynamo_backend.backend)
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(compiled(x), twin(x))
    torch.testing.assert_close(model[1].running_mean, twin[1].running_mean)
    torch.testing.assert_close(model[1].num_batches_tracked, twin[1].num_batches_tracked)


def test_stateful_modules_in_training_are_judged_by_the_refusal_stage():
    """A hand-traced graph's Dropout / BatchNorm in training mode: refused by the swappable `refusal` stage
    (seen as the functional call the module makes), so a substitute for that stage decides it too."""
    import tensorcraft
    from tensorcraft.compiler.dynamo_backend import backend as our_backend
    for module in (torch.nn.Dropout(0.5), torch.nn.BatchNorm1d(4)):
        gm = torch.fx.symbolic_trace(torch.nn.Sequential(module))
        x = torch.randn(3, 4)
        assert our_backend(gm, [x]).reason is not None
        seen = []
        with tensorcraft.substitute(refusal=lambda name, args, kwargs: seen.append(name)):
            assert our_backend(gm, [x]).reason is None
        assert seen and seen[0] in ("dropout", "batch_norm")
        gm.eval()
        assert our_backend(gm, [x]).reason is None
