"""The compiled model zoo gives eager PyTorch's numbers, forward and backward, on every backend."""
from __future__ import annotations

import copy

import pytest
import torch

import tensorcraft
from tensorcraft.compiler.api import CompiledModule
from tensorcraft.compiler.examples import model_zoo

from available_backends import backend_params

ZOO = ["mlp", "cnn", "norm_softmax", "attention"]
TOL = {"python": 1e-5, "c": 1e-4, "triton": 1e-4}


def _inputs(shape, seed=1):
    drawn = torch.randn(shape, generator=torch.Generator().manual_seed(seed), device="cpu")
    return drawn.to(torch.get_default_device())   # the GPU in a native Triton test (tests/compiler/conftest.py)


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("name", ZOO)
def test_inference_matches_eager(name, backend):
    model, shape = model_zoo()[name]
    model.eval()
    compiled = tensorcraft.compile(model, backend=backend)
    with torch.no_grad():
        for seed in (1, 2, 3):  # call 1 captures (eager), calls 2 and 3 run the generated code
            x = _inputs(shape, seed)
            torch.testing.assert_close(compiled(x), model(x), rtol=TOL[backend], atol=TOL[backend])
    assert compiled.stats.compiles == 1 and compiled.stats.cache_hits == 2, compiled.explain()
    optimized = compiled.compiled.optimized
    if name == "cnn":  # both conv -> batchnorm -> relu chains folded into one conv each
        assert optimized.count(op="batch_norm") == 0 and optimized.count(op="conv2d_relu") == 2, optimized
    elif name == "attention":  # no chain to fuse; torch's own softmax stays an extern call
        assert optimized.count(op="softmax") == 1 and optimized.count(kind="kernel") == 0, optimized
    else:
        assert optimized.count(kind="kernel") >= 1, optimized


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("name", ZOO)
def test_training_gradients_match_eager(name, backend):
    model, shape = model_zoo()[name]
    model.train()
    reference = copy.deepcopy(model)
    compiled = tensorcraft.compile(model, backend=backend)
    for seed in (1, 2):
        x = _inputs(shape, seed).requires_grad_()
        x_ref = x.detach().clone().requires_grad_()
        out, expected = compiled(x), reference(x_ref)
        torch.testing.assert_close(out, expected, rtol=TOL[backend], atol=TOL[backend])
        (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
        (expected * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
        torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-4, atol=1e-5)
        for (pname, p), p_ref in zip(model.named_parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, p_ref.grad, rtol=1e-4, atol=1e-5, msg=pname)
    if name == "cnn":  # batchnorm in training mode bumps num_batches_tracked in place: eager, said so
        assert compiled.stats.compiles == 0 and "in-place update" in compiled.explain()
    else:
        assert compiled.stats.compiles == 1 and compiled.stats.cache_hits == 1, compiled.explain()


def test_compiled_module_keeps_the_model_interface():
    model, shape = model_zoo()["mlp"]
    compiled = tensorcraft.compile(model)
    assert isinstance(compiled, torch.nn.Module)
    assert list(compiled.state_dict()) == list(model.state_dict())
    assert [n for n, _ in compiled.named_parameters()] == [n for n, _ in model.named_parameters()]
    assert compiled.fc1 is model.fc1
    assert compiled.eval() is compiled and model.training is False and compiled.training is False
    compiled.train()
    assert model.training is True
    assert compiled.stats.calls == 0  # lazy: nothing compiled before the first call
    compiled.load_state_dict(model.state_dict())


def test_compile_rejects_bad_arguments():
    with pytest.raises(ValueError, match="unknown backend 'cuda'"):
        tensorcraft.compile(lambda x: x, backend="cuda")
    with pytest.raises(TypeError, match="nn.Module or a function"):
        tensorcraft.compile(3)


def test_plain_function_with_outputs_in_a_structure():
    def f(x, y, scale=2.0):
        return {"sum": (x + y).relu() * scale, "parts": [x.exp(), y - 1]}
    compiled = tensorcraft.compile(f, backend="python")
    x, y = torch.randn(3, 4), torch.randn(4)
    for _ in range(2):
        got, expected = compiled(x, y, scale=3.0), f(x, y, scale=3.0)
        torch.testing.assert_close(got, expected)
    assert compiled.stats.cache_hits == 1


def test_default_backend_is_c_on_cpu_or_python_with_a_note():
    f = lambda x: torch.tanh(x * 2) + 1  # noqa: E731
    compiled = tensorcraft.compile(f)
    x = torch.randn(5, 7)
    compiled(x)
    torch.testing.assert_close(compiled(x), f(x), rtol=1e-5, atol=1e-5)
    chosen = compiled.compiled.backend
    if not compiled.compiled.notes:
        assert chosen == "c"
    else:
        assert chosen == "python" and "using the python backend instead" in compiled.explain()


@pytest.mark.cuda
@pytest.mark.parametrize("name", ZOO)
def test_cuda_default_backend_matches_eager(name):
    model, shape = model_zoo()[name]
    model = model.cuda().eval()
    compiled = tensorcraft.compile(model)
    tol = 1e-3 if name == "cnn" else 1e-4  # cudnn convolutions run in TF32; folding changes their inputs
    with torch.no_grad():
        for seed in (1, 2, 3):
            x = _inputs(shape, seed).cuda()
            torch.testing.assert_close(compiled(x), model(x), rtol=tol, atol=tol)
    assert compiled.compiled.backend == "triton" and compiled.stats.cache_hits == 2
    model.train()
    for seed in (1, 2):  # the first call captures, the second runs the compiled forward + recompute backward
        x = _inputs(shape, seed).cuda().requires_grad_()
        compiled(x).square().sum().backward()
        got = x.grad
        x.grad = None
        model(x).square().sum().backward()
        torch.testing.assert_close(got, x.grad, rtol=tol, atol=tol)


def test_errors_say_what_is_wrong():
    with pytest.raises(ValueError, match="unknown pass 'fold'; known passes"):
        tensorcraft.compile(lambda x: x + 1, passes=["fold"])(torch.randn(2))
    with pytest.raises(ValueError, match="cache_limit must be at least 1, got 0"):
        tensorcraft.compile(lambda x: x, cache_limit=0)
    model, shape = model_zoo()["mlp"]
    compiled = tensorcraft.compile(model)
    with pytest.raises(RuntimeError) as ours:  # a bad input fails exactly as it does eagerly
        compiled(torch.randn(3, 5))
    with pytest.raises(RuntimeError) as eager:
        model(torch.randn(3, 5))
    assert str(ours.value) == str(eager.value) and compiled.stats.compiles == 0


def test_a_backend_asked_for_by_name_is_not_silently_replaced(monkeypatch):
    from tensorcraft.compiler.codegen import backends
    monkeypatch.setitem(backends.BACKENDS, "c", "tensorcraft.compiler.codegen.no_such_module")
    f = lambda x: torch.tanh(x) * 2  # noqa: E731
    with pytest.raises(backends.BackendUnavailable, match="backend 'c' cannot be imported"):
        tensorcraft.compile(f, backend="c")(torch.randn(3))
    default = tensorcraft.compile(f)  # the default falls back, and says so
    x = torch.randn(3)
    default(x)
    torch.testing.assert_close(default(x), f(x))
    assert default.compiled.backend == "python" and "using the python backend instead" in default.explain()


def test_your_own_kernel_generator_plugs_in():
    from tensorcraft.compiler.codegen.kernel import evaluate
    seen = []

    class ByEvaluate:
        """A learner's generator: runs Kernel.evaluate and copies into the outputs."""
        def __init__(self, kernel):
            self.kernel, self.source = kernel, str(kernel)

        def __call__(self, *tensors):
            n = len(self.kernel.inputs)
            for out, value in zip(tensors[n:], evaluate(self.kernel, *tensors[:n])):
                out.copy_(value)

    def my_compile_kernel(kernel):
        seen.append(kernel.name)
        return ByEvaluate(kernel)
    f = lambda x, b: torch.relu(x + b) * 3  # noqa: E731
    compiled = tensorcraft.compile(f, backend=my_compile_kernel)
    x, b = torch.randn(4, 5), torch.randn(5)
    compiled(x, b)
    torch.testing.assert_close(compiled(x, b), f(x, b))
    assert seen == ["fused"] and compiled.compiled.backend.endswith("my_compile_kernel")


def test_compile_is_also_a_decorator():
    @tensorcraft.compile(backend="python")
    def f(x):
        return torch.tanh(x) * 2

    @tensorcraft.compile
    def g(x):
        return x.exp() + 1
    x = torch.randn(3)
    for _ in range(2):
        torch.testing.assert_close(f(x), torch.tanh(x) * 2)
        torch.testing.assert_close(g(x), x.exp() + 1)
    assert f.stats.cache_hits == 1 and g.stats.cache_hits == 1 and f.__name__ == "f"


def test_module_lists_and_tied_weights():
    class Stack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(6, 6) for _ in range(3))
            self.head = torch.nn.Linear(6, 6)
            self.head.weight = self.layers[0].weight  # tied

        def forward(self, x):
            for layer in self.layers:
                x = torch.tanh(layer(x)) * 0.5
            return self.head(x)
    model = Stack()
    compiled = tensorcraft.compile(model, backend="python")
    x = torch.randn(2, 6)
    for _ in range(2):
        out = compiled(x)
        torch.testing.assert_close(out, model(x))
    out.sum().backward()
    grad = model.layers[0].weight.grad.clone()
    model.zero_grad()
    model(x).sum().backward()
    torch.testing.assert_close(grad, model.layers[0].weight.grad)
    assert "layers.0.weight" in compiled.compiled.code.param_names


def test_each_stage_of_the_pipeline_can_be_replaced():
    import inspect

    from tensorcraft.compiler.capture import capture
    from tensorcraft.compiler.passes.memory_plan import MemoryPlan, plan_memory
    from tensorcraft.compiler.pipeline import compile_graph
    calls = []

    def no_reuse(graph):  # a planner that reuses nothing: every kernel output fresh
        calls.append("planner")
        plan = plan_memory.library(graph)  # the library's own stage (plan_memory is the substitute now)
        return MemoryPlan(fresh=set(plan.slot_of) | plan.fresh, last_use=plan.last_use, frees_after=plan.frees_after)

    def my_dce(graph):
        calls.append("dce")
        from tensorcraft.compiler.passes.dce import eliminate_dead_code
        return eliminate_dead_code(graph)
    f = lambda x: torch.tanh(x * 2 + 1) @ x  # noqa: E731
    x = torch.randn(4, 4)
    with tensorcraft.substitute(plan_memory=no_reuse):  # the one way to swap a stage other than passes/backend
        compiled = compile_graph(capture(f, (x,)).graph, backend="python", passes=[my_dce, "fusion"])
    torch.testing.assert_close(compiled.run([x], []), f(x))
    assert calls == ["dce", "planner"] and "_slot" not in compiled.code.source
    assert not {"planner", "wrapper"} & set(inspect.signature(compile_graph).parameters)


class _ReturnsFoldable(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        y = (x * 2).exp()
        return x * self.w, self.w * 2, torch.zeros(3), torch.arange(6.0).view(2, 3), y, (x * 2).exp()


@pytest.mark.parametrize("backend", [p for p in backend_params() if p.values[0] != "triton"])
def test_returned_tensors_belong_to_the_caller(backend):
    """Updating a result in place changes neither another result nor what the next call returns
    (a folded constant, or one tensor for two equal outputs, would be shared)."""
    model = _ReturnsFoldable().eval()
    compiled = tensorcraft.compile(model, backend=backend)
    x = torch.randn(3)
    with torch.no_grad():
        compiled(x)
        for _ in range(2):
            outs = compiled(x)
            for got, want in zip(outs, model(x)):
                torch.testing.assert_close(got, want)
            assert outs[4] is not outs[5]
            for out in outs[1:]:
                out.add_(100)


@pytest.mark.parametrize("backend", [p for p in backend_params() if p.values[0] == "c"])
def test_a_compiled_module_inside_a_compiled_module_runs_eagerly_and_says_why(backend):
    inner = tensorcraft.compile(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU()), backend=backend)
    outer = torch.nn.ModuleList([inner])
    fn = lambda x: (outer[0](x) * 2).exp().sum(-1)  # noqa: E731
    x = torch.randn(3, 4)
    with torch.no_grad():
        inner(x), inner(x)  # the inner one now runs its C kernels, which capture cannot see
        compiled = tensorcraft.compile(fn, backend=backend)
        for _ in range(2):
            torch.testing.assert_close(compiled(x), fn(x))
    assert "compiled module or a ctypes call" in compiled.explain()


# -- regressions from the review of the compiler ---------------------------------------------------
@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("constant", [float("nan"), float("inf"), -float("inf")])
def test_nan_and_infinite_constants_run_on_every_backend(backend, constant):
    """A NaN constant was printed as `nan` by the Python backend: NameError on the second call."""
    f = lambda x: (x + constant) * 2  # noqa: E731
    compiled = tensorcraft.compile(f, backend=backend)
    x = torch.randn(3, 4)
    for _ in range(2):  # call 1 captures (eager), call 2 runs the generated kernel
        torch.testing.assert_close(compiled(x), f(x), equal_nan=True)
    assert compiled.stats.cache_hits == 1 and compiled.compiled.optimized.count(kind="kernel") == 1


def test_every_module_method_acts_on_the_model_itself():
    """compiled.half() converted the submodules but left the root's own parameters in float32."""
    model, shape = model_zoo()["norm_softmax"]  # `scale` is a parameter of the root module itself
    compiled = tensorcraft.compile(model.eval(), backend="python")
    assert isinstance(compiled, type(model)) and isinstance(compiled, CompiledModule)
    assert compiled.half() is compiled and model.scale.dtype == torch.float16
    assert {p.dtype for p in model.parameters()} == {torch.float16}
    compiled.double()
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    x = _inputs(shape).double()
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(compiled(x), model(x))
    compiled.extra = 3  # attributes, hooks and flags are the model's
    assert model.extra == 3 and "extra" not in vars(type(compiled))
    seen = []
    handle = compiled.register_forward_hook(lambda module, args, out: seen.append(module))
    with torch.no_grad():
        compiled(x)
    assert seen == [model] and compiled._forward_hooks is model._forward_hooks  # ran once, on the model
    handle.remove()
    assert "CompiledModule(" in repr(compiled)


def test_a_toolchain_error_is_recognised_by_its_class_not_its_name():
    from tensorcraft.compiler.codegen import backends
    from tensorcraft.compiler.codegen.c_toolchain import CompilerUnavailable

    class CompilerUnavailableLookalike(Exception):  # the old check matched any class named so
        pass
    CompilerUnavailableLookalike.__name__ = "CompilerUnavailable"

    def missing(kernel):
        raise CompilerUnavailable("no cc here")

    def broken(kernel):
        raise CompilerUnavailableLookalike("a bug in my generator")
    f = lambda x: torch.tanh(x) * 2  # noqa: E731
    x = torch.randn(3)
    with pytest.raises(backends.BackendUnavailable, match="backend .*missing.*: no cc here"):
        tensorcraft.compile(f, backend=missing)(x)  # the first call compiles
    with pytest.raises(CompilerUnavailableLookalike, match="a bug in my generator"):
        tensorcraft.compile(f, backend=broken)(x)


def test_a_substituted_stage_runs_inside_the_real_pipeline_and_bypasses_the_cache():
    from tensorcraft.compiler.passes.dce import eliminate_dead_code
    from tensorcraft.compiler.passes.memory_plan import plan_memory
    from tensorcraft.compiler.codegen.python import python_source
    calls = []

    def my_dce(graph):
        calls.append("dce")
        return eliminate_dead_code.library(graph)

    def my_planner(graph):
        calls.append("planner")
        return plan_memory.library(graph)

    def my_printer(kernel):
        calls.append("printer")
        return python_source.library(kernel)
    f = lambda x: torch.tanh(x * 2 + 1).sum(-1)  # noqa: E731
    compiled = tensorcraft.compile(f, backend="python")
    x = torch.randn(3, 5)
    with tensorcraft.substitute(eliminate_dead_code=my_dce, plan_memory=my_planner, python_source=my_printer):
        for _ in range(2):  # every call builds afresh and returns what the compiled code computes
            torch.testing.assert_close(compiled(x), f(x))
    assert calls.count("dce") == 2 and calls.count("planner") == 2 and calls.count("printer") >= 2
    assert compiled.stats.compiles == 2 and not compiled._compiler.entries  # nothing cached
    compiled(x)
    assert calls.count("dce") == 2 and len(compiled._compiler.entries) == 1  # the library's own again


def test_with_gradients_the_default_runs_torch_calls_and_fused_kernels_recompute_on_request():
    from tensorcraft.compiler.passes import DEFAULT_PASSES
    model, shape = model_zoo()["mlp"]
    for passes, kernels in ((None, 0), (DEFAULT_PASSES, 1)):
        compiled = tensorcraft.compile(model, backend="python", passes=passes)
        for seed in (1, 2):
            x = _inputs(shape, seed).requires_grad_()
            compiled(x).square().sum().backward()
            got = x.grad
            x.grad = None
            model(x).square().sum().backward()
            torch.testing.assert_close(got, x.grad, rtol=1e-5, atol=1e-5)
        assert compiled.compiled.optimized.count(kind="kernel") == kernels and compiled.stats.cache_hits == 1
