"""The attention pass: eager's answers and gradients, and only where the written-out chain is all there is."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import tensorcraft
from tensorcraft.compiler.capture import capture
from tensorcraft.compiler.passes import DEFAULT_PASSES, GRADIENT_PASSES
from tensorcraft.compiler.passes.attention import fuse_attention
from tensorcraft.compiler.passes.constant_folding import fold_constants


class Attention(nn.Module):
    """Causal multi-head attention written out: matmul, scale, masked_fill, softmax, matmul."""

    def __init__(self, d: int, heads: int, seq: int, scale_op: str = "mul", masked: bool = True) -> None:
        super().__init__()
        self.heads, self.scale_op, self.masked = heads, scale_op, masked
        self.qkv = nn.Linear(d, 3 * d)
        self.register_buffer("future", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(x).split(d, dim=-1))
        e = d // self.heads
        if self.scale_op == "query":  # as timm writes it: the query scaled before the product
            q = q * e ** -0.5
        scores = q @ k.transpose(-2, -1)
        if self.scale_op != "query":
            scores = scores * e ** -0.5 if self.scale_op == "mul" else scores / e ** 0.5
        if self.masked:
            scores = scores.masked_fill(self.future[:t, :t], float("-inf"))
        return (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, d)


CASES = [dict(d=16, heads=2, seq=8), dict(d=24, heads=3, seq=5, scale_op="div"), dict(d=8, heads=1, seq=6, masked=False),
         dict(d=16, heads=4, seq=7, scale_op="query")]


def _ops(graph) -> list[str]:
    return [n.op for n in graph.nodes if n.kind == "call"]


@pytest.mark.parametrize("case", CASES)
def test_inference_matches_eager_with_one_fused_call(case):
    torch.manual_seed(0)
    model = Attention(**case).eval()
    x = torch.randn(3, case["seq"], case["d"])
    compiled = tensorcraft.compile(model, backend="python")
    with torch.no_grad():
        expected = model(x)
        compiled(x)  # captures
        got = compiled(x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    ops = _ops(compiled.compiled.optimized)
    assert ops.count("scaled_dot_product_attention") == 1, ops
    assert not {"softmax", "masked_fill", "matmul", "mul", "div"} & set(ops), ops  # the scale too: in the call


@pytest.mark.parametrize("case", CASES)
def test_training_gradients_match_eager(case):
    torch.manual_seed(1)
    model = Attention(**case).train()
    x = torch.randn(2, case["seq"], case["d"], requires_grad=True)
    compiled = tensorcraft.compile(model, backend="python")
    grads = []
    for fn in (model, compiled, compiled):  # eager, the capturing call, a compiled call
        model.zero_grad(set_to_none=True)
        x.grad = None
        fn(x).square().sum().backward()
        grads.append([x.grad.clone(), model.qkv.weight.grad.clone(), model.qkv.bias.grad.clone()])
    for got, expected in zip(grads[2], grads[0]):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    ops = _ops(compiled.compiled.optimized)
    assert "softmax" not in ops and ({"attention", "scaled_dot_product_attention"} & set(ops)), ops


def _fully_masking(model: Attention) -> Attention:
    with torch.no_grad():
        model.future[2] = True  # query 2 sees no key: eager's softmax gives NaN there
    return model


def test_a_query_with_every_key_masked_gives_eagers_nan_in_a_frozen_graph():
    torch.manual_seed(2)
    model = _fully_masking(Attention(d=16, heads=2, seq=6).eval())
    x = torch.randn(2, 6, 16)
    compiled = tensorcraft.compile(model, backend="python")
    with torch.no_grad():
        expected = model(x)
        compiled(x)
        got = compiled(x)
    assert expected[:, 2].isnan().all() and not expected[:, 3].isnan().any()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert "scaled_dot_product_attention" not in _ops(compiled.compiled.optimized)


def test_a_query_with_every_key_masked_gives_eagers_nan_when_the_mask_is_read_at_each_call():
    torch.manual_seed(3)
    model = Attention(d=16, heads=2, seq=6).train()
    x = torch.randn(2, 6, 16, requires_grad=True)
    compiled = tensorcraft.compile(model, backend="python")
    compiled(x)  # captured with a mask that hides nothing whole
    _fully_masking(model)
    expected, got = model(x), compiled(x)
    assert compiled.stats.compiles == 1 and compiled.stats.cache_hits == 1  # the entry read the new mask
    assert expected[:, 2].isnan().all()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True)


def _captured(fn, *inputs):
    return fold_constants(capture(fn, inputs).graph)


def test_scores_read_elsewhere_are_left_alone():
    q, k, v = (torch.randn(2, 4, 8) for _ in range(3))

    def returns_the_weights(q, k, v):
        weights = (q @ k.transpose(-2, -1) * 0.5).softmax(dim=-1)
        return weights @ v, weights

    def reads_the_scores_twice(q, k, v):
        scores = q @ k.transpose(-2, -1)
        return (scores * 0.5).softmax(dim=-1) @ v + scores.sum()

    def softmax_over_queries(q, k, v):
        return (q @ k.transpose(-2, -1) * 0.5).softmax(dim=-2) @ v

    for fn in (returns_the_weights, reads_the_scores_twice, softmax_over_queries):
        graph = _captured(fn, q, k, v)
        assert _ops(fuse_attention(graph)) == _ops(graph), fn.__name__


def test_the_pass_leaves_its_input_graph_unchanged_and_is_in_both_pipelines():
    q, k, v = (torch.randn(2, 4, 8) for _ in range(3))
    graph = _captured(lambda q, k, v: (q @ k.transpose(-1, -2) / 3.0).softmax(-1) @ v, q, k, v)
    before = _ops(graph)
    fused = fuse_attention(graph)
    assert _ops(graph) == before and _ops(fused) == ["scaled_dot_product_attention"]
    assert fused.nodes[-2].kwargs["scale"] == pytest.approx(1 / 3.0)
    assert "attention" in DEFAULT_PASSES and "attention" in GRADIENT_PASSES


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_in_16_bits_the_fused_call_is_no_less_accurate_than_eager(dtype):
    """The fused kernel accumulates in float32 where eager rounds after every op: the answers differ
    by more than float32 noise, so compare both with a float64 reference."""
    mask = torch.triu(torch.ones(16, 16, dtype=torch.bool), 1)

    def attend(q, k, v):
        return (q @ k.transpose(-2, -1) * 0.25).masked_fill(mask, float("-inf")).softmax(dim=-1) @ v

    gen = torch.Generator().manual_seed(4)
    exact = [torch.randn(2, 3, 16, 16, generator=gen, dtype=torch.float64) for _ in range(3)]
    low = [t.to(dtype) for t in exact]
    compiled = tensorcraft.compile(attend, backend="python")
    with torch.no_grad():
        compiled(*low)
        got = compiled(*low)
    assert "scaled_dot_product_attention" in _ops(compiled.compiled.optimized)
    reference = attend(*[t.to(dtype).double() for t in low])
    ours_error = (got.double() - reference).abs().max()
    eager_error = (attend(*low).double() - reference).abs().max()
    assert ours_error <= eager_error * 1.5, (ours_error, eager_error)
    assert 0 < eager_error  # eager does round: the comparison means something
