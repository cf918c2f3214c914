"""Each pass alone, against its torch.fx counterpart where there is one, and the counts it must reach."""
from __future__ import annotations

import pytest
import torch
import torch.fx
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.fx.experimental import const_fold
from torch.fx.experimental.optimization import fuse as fx_fuse_conv_bn
from torch.fx.passes.dialect.common.cse_pass import CSEPass
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupport
from torch.fx.passes.shape_prop import ShapeProp

import tensorcraft
from tensorcraft.compiler.capture import capture
from tensorcraft.compiler.examples import model_zoo
from tensorcraft.compiler.interpret import interpret
from tensorcraft.compiler.opnames import canonical_name
from tensorcraft.compiler.passes import DEFAULT_PASSES
from tensorcraft.compiler.passes.constant_folding import fold_constants
from tensorcraft.compiler.passes.conv_bn import fold_conv_batchnorm
from tensorcraft.compiler.passes.cse import eliminate_common_subexpressions
from tensorcraft.compiler.passes.dce import eliminate_dead_code
from tensorcraft.compiler.passes.decompose import decompose
from tensorcraft.compiler.passes.fusion import UNARY_OPS, fuse_elementwise
from tensorcraft.compiler.passes.memory_plan import is_kernel_output, plan_memory, storage_lifetimes

from available_backends import backend_params
from random_programs import as_function, example_inputs, programs


def _tensor_calls_fx(gm: torch.fx.GraphModule, inputs=None) -> list[str]:
    """Canonical names of fx's calls; with inputs, only those producing tensors (not `x.shape[-1:]`)."""
    if inputs is not None:
        ShapeProp(gm).propagate(*inputs)
    return [canonical_name(n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method")
            and (inputs is None or "tensor_meta" in n.meta)]


def _calls(graph) -> list[str]:
    return [n.op for n in graph.nodes if n.kind == "call"]


def _check_meaning(graph, fn, inputs):
    torch.testing.assert_close(tuple(interpret(graph, list(inputs))), fn(*inputs), rtol=1e-5, atol=1e-5)


@given(programs())
def test_dce_keeps_what_fx_keeps(program):
    fn, inputs = as_function(program), example_inputs()
    graph = capture(fn, inputs).graph
    ours = eliminate_dead_code(graph)
    gm = torch.fx.symbolic_trace(fn)
    gm.graph.eliminate_dead_code()
    assert _calls(ours) == _tensor_calls_fx(gm, inputs)
    _check_meaning(ours, fn, example_inputs(seed=1))


@given(programs())
def test_cse_merges_what_fx_merges(program):
    fn, inputs = as_function(program), example_inputs()
    ours = eliminate_common_subexpressions(capture(fn, inputs).graph)
    theirs = CSEPass()(torch.fx.symbolic_trace(fn)).graph_module
    assert len(_calls(ours)) == len(_tensor_calls_fx(theirs, inputs))
    _check_meaning(ours, fn, example_inputs(seed=1))


def test_cse_and_dce_counts_on_a_fixed_program():
    def f(x):
        a, b = x.sin() * 2, x.sin() * 2   # b repeats a
        unused = x.exp()                  # dead  # noqa: F841
        return a + b
    graph = capture(f, (torch.randn(4),)).graph
    assert _calls(graph) == ["sin", "mul", "sin", "mul", "exp", "add"]
    assert _calls(eliminate_dead_code(eliminate_common_subexpressions(graph))) == ["sin", "mul", "add"]


class _ConstChain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return x @ (self.w.t() * 2 + torch.arange(4.0)) + 1


def test_constant_folding_matches_fx_const_fold():
    model = _ConstChain().eval()
    x = torch.randn(3, 4)
    graph = capture(model, (x,), module=model).graph
    graph.frozen = True
    folded = eliminate_dead_code(fold_constants(graph))
    with pytest.warns(UserWarning):
        theirs = const_fold.split_const_subgraphs(model)
    theirs.run_folding()
    assert _calls(folded) == ["matmul", "add"] == _tensor_calls_fx(theirs)
    (ours,) = interpret(folded, [x])
    torch.testing.assert_close(ours, theirs(x))
    torch.testing.assert_close(ours, model(x))


def test_constant_folding_leaves_parameters_alone_when_not_frozen():
    model = _ConstChain()
    graph = capture(model, (torch.randn(3, 4),), module=model).graph
    assert graph.frozen is False
    assert _calls(eliminate_dead_code(fold_constants(graph))) == ["t", "mul", "add", "matmul", "add"]


def test_conv_batchnorm_folding_matches_fx_fuse():
    model, shape = model_zoo()["cnn"]
    model.eval()
    x = torch.randn(shape)
    graph = capture(model, (x,), module=model).graph
    graph.frozen = True
    folded = eliminate_dead_code(fold_conv_batchnorm(graph))
    assert graph.count(op="batch_norm") == 2 and folded.count(op="batch_norm") == 0
    assert _calls(folded) == ["conv2d_relu", "conv2d_relu", "mean", "linear"]
    theirs = fx_fuse_conv_bn(model)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in theirs.modules())
    params = dict(model.named_parameters()) | dict(model.named_buffers())
    (ours,) = interpret(folded, [x], params)
    torch.testing.assert_close(ours, theirs(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours, model(x), rtol=1e-5, atol=1e-5)


def test_conv_batchnorm_is_not_folded_without_frozen_weights():
    model, shape = model_zoo()["cnn"]
    graph = capture(model.eval(), (torch.randn(shape),), module=model).graph
    assert fold_conv_batchnorm(graph).count(op="batch_norm") == 2


@given(st.sampled_from(["softmax", "log_softmax", "layer_norm"]), st.integers(1, 4), st.integers(1, 9),
       st.sampled_from([torch.float32, torch.float64]))
def test_decompositions_keep_the_meaning(op, rows, cols, dtype):
    fn = {"softmax": lambda x: torch.softmax(x, -1), "log_softmax": lambda x: F.log_softmax(x, dim=-1),
          "layer_norm": lambda x: F.layer_norm(x, (cols,), torch.linspace(0.5, 2, cols, dtype=dtype),
                                               torch.linspace(-1, 1, cols, dtype=dtype))}[op]
    x = torch.randn(rows, cols, dtype=dtype) * 3
    graph = decompose(capture(fn, (x,)).graph)
    assert graph.count(op=op) == 0
    (got,) = interpret(graph, [x])
    torch.testing.assert_close(got, fn(x))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_layer_norm_and_softmax_stay_whole_and_match_eager(dtype):
    """Eager accumulates these in float32; decomposed in 16 bits, x*x overflows near 1000."""
    model = torch.nn.Sequential(torch.nn.LayerNorm(64), torch.nn.Softmax(-1)).to(dtype)
    x = (torch.randn(4, 64) * 1000).to(dtype)
    assert _calls(decompose(capture(model, (x,), module=model).graph)) == ["layer_norm", "softmax"]
    compiled = tensorcraft.compile(model, backend="python")
    with torch.no_grad():
        compiled(x)
        torch.testing.assert_close(compiled(x), model(x))


def test_decompose_leaves_other_axes_alone():
    graph = decompose(capture(lambda x: x.softmax(0), (torch.randn(3, 4),)).graph)
    assert _calls(graph) == ["softmax"]


def test_fusion_turns_an_elementwise_chain_into_one_kernel():
    def f(x, w, b):
        return F.gelu(x @ w + b) * 0.5 + 0.25
    inputs = (torch.randn(4, 8), torch.randn(8, 8), torch.randn(8))
    graph = fuse_elementwise(capture(f, inputs).graph)
    kernels = [n for n in graph.nodes if n.kind == "kernel"]
    assert len(kernels) == 1 and kernels[0].attrs["fused"] == "add, gelu, mul, add"
    assert _calls(graph) == ["matmul", "getitem"]
    assert [b.shape for b in kernels[0].target.inputs] == [(4, 8), (1, 8)]  # the bias broadcasts
    _check_meaning(graph, lambda *a: (f(*a),), inputs)


def test_fusion_ends_a_chain_with_a_last_axis_reduction():
    def f(x):
        e = torch.exp(x - 1)
        return e, e.sum(-1)  # keepdim=False: the kernel writes [n, 1], a view gives [n]
    graph = fuse_elementwise(capture(f, (torch.randn(3, 5),)).graph)
    (kernel,) = [n.target for n in graph.nodes if n.kind == "kernel"]
    assert [o.reduce for o in kernel.outputs] == [None, "sum"]
    assert _calls(graph) == ["getitem", "getitem", "view"]
    _check_meaning(graph, f, (torch.randn(3, 5),))


def test_layer_norm_and_softmax_reach_their_kernel_counts():
    w, b = torch.rand(6), torch.rand(6)
    norm = lambda x: F.layer_norm(x, (6,), w, b)  # noqa: E731
    fused = fuse_elementwise(eliminate_dead_code(decompose(capture(norm, (torch.randn(2, 6),)).graph)))
    # mean(x) | d = x - mean, mean(d * d) | rsqrt(var + eps) | d * r * w + b   (the first stays a torch call)
    assert [n.attrs["fused"] for n in fused.nodes if n.kind == "kernel"] == \
        ["sub, mul, mean", "add, rsqrt", "mul, mul, add"]
    assert _calls(fused).count("mean") == 1
    _check_meaning(fused, lambda x: (norm(x),), (torch.randn(2, 6),))
    soft = fuse_elementwise(decompose(capture(lambda x: x.softmax(-1) * 2, (torch.randn(2, 6),)).graph))
    assert [n.attrs["fused"] for n in soft.nodes if n.kind == "kernel"] == ["sub, exp, sum", "div, mul"]
    _check_meaning(soft, lambda x: (x.softmax(-1) * 2,), (torch.randn(2, 6),))


class _Elementwise(OperatorSupport):
    def is_node_supported(self, submodules, node) -> bool:
        return node.op in ("call_function", "call_method") and \
            canonical_name(node.target) in UNARY_OPS | {"add", "sub", "mul", "maximum"}


@given(programs(elementwise_only=True))
def test_fusion_against_fx_capability_partitioner(program):
    """fx's partitioner merges every connected elementwise region, also sideways (siblings, joins);
    we merge along chains. So we fuse at most as many nodes as fx, and exactly as many on a chain."""
    fn, inputs = as_function(program), example_inputs()
    graph = eliminate_dead_code(capture(fn, inputs).graph)
    ours = fuse_elementwise(graph)
    ours.lint()
    gm = torch.fx.symbolic_trace(fn)
    gm.graph.eliminate_dead_code()
    parts = CapabilityBasedPartitioner(gm, _Elementwise(), allows_single_node_partition=False).propose_partitions()
    kernels = [n for n in ours.nodes if n.kind == "kernel"]
    fused_nodes = sum(len(n.attrs["fused"].split(", ")) for n in kernels)
    assert fused_nodes <= sum(len(p.nodes) for p in parts)
    users = graph.users()
    is_chain = all(len(users[n]) <= 1 for n in graph.nodes if n.kind != "output") and \
        all(sum(i.kind == "call" for i in n.inputs) <= 1 for n in graph.nodes if n.kind == "call")
    if is_chain:
        assert (len(kernels), fused_nodes) == (len(parts), sum(len(p.nodes) for p in parts))
    _check_meaning(ours, fn, example_inputs(seed=2))


@given(programs())
def test_memory_plan_never_shares_a_slot_between_live_values(program):
    fn, inputs = as_function(program), example_inputs()
    graph = fuse_elementwise(eliminate_dead_code(decompose(capture(fn, inputs).graph)))
    plan = plan_memory(graph)
    lifetime = storage_lifetimes(graph)
    index = {n: i for i, n in enumerate(graph.nodes)}
    placed = [n for n in graph.nodes if n in plan.slot_of]
    for a in placed:
        for b in placed:
            written_at = index[b.args[0]]  # b's kernel runs there, reading its inputs as it writes b
            if a is not b and plan.slot_of[a] == plan.slot_of[b] and index[a] < index[b]:
                assert lifetime[a] < written_at, f"{a.name} still live when {b.name} reuses its slot"
    assert not {o.storage for o in graph.output.inputs} & set(plan.slot_of)
    assert plan.planned_peak_bytes <= plan.unplanned_bytes + sum(s.nbytes for s in plan.slots)
    assert plan.eager_peak_bytes <= plan.unplanned_bytes


def test_memory_plan_reuses_one_slot_along_a_chain():
    def f(x, w):
        for _ in range(5):
            x = torch.tanh(x * 2 + 1) @ w
        return x
    graph = fuse_elementwise(capture(f, (torch.randn(8, 8), torch.randn(8, 8))).graph)
    plan = plan_memory(graph)
    kernel_buffers = [n for n in graph.nodes if is_kernel_output(n)]
    assert len(kernel_buffers) == 5 and len(plan.slots) == 1 and len(plan.slot_of) == 5
    assert plan.planned_peak_bytes < plan.unplanned_bytes


@settings(max_examples=30)
@given(programs(), st.sampled_from([torch.float32, torch.float64]))
def test_whole_pipeline_matches_eager_on_random_programs(program, dtype):
    fn = as_function(program)
    compiled = tensorcraft.compile(fn, backend="python")
    for seed in range(3):
        inputs = example_inputs(dtype=dtype, seed=seed)
        torch.testing.assert_close(compiled(*inputs), fn(*inputs), rtol=1e-5, atol=1e-5)
    assert compiled.stats.compiles == 1 and compiled.stats.cache_hits == 2


def test_views_of_rewritten_values_keep_their_storage_alive():
    """A view of a decomposed softmax must keep the fused buffer it looks into out of reuse."""
    def f(x, w):
        s = (x * 2).softmax(-1)
        t = (s * 3).sum()                 # s * 3 joins the softmax's last kernel: s lives in a slot
        v = s.view(-1)                    # a view of the softmax result
        y = torch.tanh(x @ w + 1) * 3     # a later kernel that could take s's slot
        return y.sum() + v[:4].sum() + t
    compiled = tensorcraft.compile(f, backend="python", passes=["decompose", *DEFAULT_PASSES])
    x, w = torch.randn(4, 6), torch.randn(6, 6)
    compiled(x, w)
    torch.testing.assert_close(compiled(x, w), f(x, w))
    graph, plan = compiled.compiled.optimized, compiled.compiled.plan
    views = [n for n in graph.nodes if n.op == "view" and n.aliases is not None]
    assert views and all(v.storage in plan.slot_of for v in views)  # a view keeps its slot's value alive
    lifetime, index = storage_lifetimes(graph), {n: i for i, n in enumerate(graph.nodes)}
    assert all(lifetime[v.storage] >= max(index[u] for u in graph.users()[v]) for v in views)


@pytest.mark.parametrize("backend", [p for p in backend_params() if p.values[0] != "python"])
def test_whole_pipeline_matches_eager_on_random_programs_with_compiled_kernels(backend):
    """Generated kernels read inputs while they write outputs: buffer reuse must respect that."""
    @settings(max_examples=12)
    @given(programs())
    def check(program):
        fn = as_function(program)
        compiled = tensorcraft.compile(fn, backend=backend)
        for seed in range(2):
            inputs = example_inputs(seed=seed)
            torch.testing.assert_close(compiled(*inputs), fn(*inputs), rtol=1e-4, atol=1e-4)
    check()


def test_a_value_is_recomputed_only_when_that_reads_no_more_memory_than_loading_it():
    def f(x, a, b, c):
        r = x + a + b + c                  # a residual stream: four full-size inputs
        return r - r.mean(-1, keepdim=True)
    inputs = [torch.randn(8, 32) for _ in range(4)]
    graph = fuse_elementwise(capture(f, inputs).graph)
    kernels = [n for n in graph.nodes if n.kind == "kernel"]
    assert [k.attrs["recomputes"] for k in kernels] == [""]  # r is stored once, not summed again
    assert graph.count(op="sub") == 1  # the subtraction reads the stored r (alone, it stays a torch call)
    torch.testing.assert_close(interpret(graph, inputs)[0], f(*inputs), rtol=1e-5, atol=1e-5)
    soft = fuse_elementwise(decompose(capture(lambda x: (x * 2).softmax(-1), (torch.randn(8, 32),)).graph))
    assert any(k.attrs["recomputes"] for k in soft.nodes if k.kind == "kernel")  # exp(x - max) from x: yes
