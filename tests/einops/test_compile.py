"""Our rearrange/reduce/repeat and layers inside torch.compile: traced by Dynamo with no graph break.

backend="eager" (and torch._dynamo.explain) only trace: no Inductor compile is paid here.
"""
import einops
import pytest
import torch
import torch._dynamo

from tensorcraft.einops import rearrange, reduce, repeat
from tensorcraft.einops.layers import Rearrange, Reduce


class Attention(torch.nn.Module):
    """A tiny multi-head self-attention written with our einops functions and layers."""

    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.pool = torch.nn.Sequential(Reduce("b n d -> b d", "mean"), Rearrange("b (d one) -> b d one", one=1))

    def forward(self, x):
        q, k, v = rearrange(self.qkv(x), "b n (three h d) -> three b h n d", three=3, h=self.heads)
        scores = torch.einsum("bhid,bhjd->bhij", q, k).softmax(-1)
        out = rearrange(torch.einsum("bhij,bhjd->bhid", scores, v), "b h n d -> b n (h d)")
        out = out + reduce(x, "b (n 1) d -> b 1 d", "max") + repeat(out.sum(-1), "b n -> b n d", d=x.shape[-1])
        return self.pool(out)


def _reference(module, x):
    q, k, v = einops.rearrange(module.qkv(x), "b n (three h d) -> three b h n d", three=3, h=module.heads)
    scores = torch.einsum("bhid,bhjd->bhij", q, k).softmax(-1)
    out = einops.rearrange(torch.einsum("bhij,bhjd->bhid", scores, v), "b h n d -> b n (h d)")
    out = out + einops.reduce(x, "b (n 1) d -> b 1 d", "max") + einops.repeat(out.sum(-1), "b n -> b n d", d=x.shape[-1])
    return einops.rearrange(einops.reduce(out, "b n d -> b d", "mean"), "b (d one) -> b d one", one=1)


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
def test_module_traces_with_zero_graph_breaks():
    torch._dynamo.reset()
    module, x = Attention(), torch.randn(2, 5, 8)
    explanation = torch._dynamo.explain(module)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
def test_compiled_module_matches_einops():
    """Dynamo traces through the plan caches (it skips lru_cache wrappers) and builds each plan."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    module, x = Attention(), torch.randn(2, 5, 8)
    compiled = torch.compile(module, backend="eager", fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), _reference(module, x))
        torch.testing.assert_close(compiled(x[:1]), _reference(module, x[:1]))  # new shape: new plan


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
def test_new_plans_made_outside_do_not_recompile_a_compiled_function():
    """The plan cache is invisible to Dynamo's guards: eager calls that add plans cost no recompile."""
    compiles = []

    def counting_backend(graph_module, example_inputs):
        compiles.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    compiled = torch.compile(lambda x: rearrange(x, "a b -> b a") * 2, backend=counting_backend)
    x = torch.randn(3, 4)
    compiled(x)
    compiled(x)
    for n in range(1, 6):
        rearrange(torch.randn(n, 2), "a b -> b a")
        reduce(torch.randn(n, 2), "a b -> b", "sum")
    torch.testing.assert_close(compiled(x), x.T * 2)
    assert len(compiles) == 1


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
def test_dynamic_batch_size_compiles_once_without_graph_breaks():
    """With a symbolic batch size the plan holds symbolic lengths; no message string touches them."""
    compiles = []

    def counting_backend(graph_module, example_inputs):
        compiles.append(graph_module)
        return graph_module.forward

    def f(x):
        y = reduce(rearrange(x, "b (h w) c -> b h w c", h=2), "b h w c -> b c", "mean")
        return y + repeat(x.sum((1, 2)), "b -> b k", k=x.shape[-1])

    torch._dynamo.reset()
    x = torch.randn(3, 6, 4)
    torch._dynamo.mark_dynamic(x, 0)
    explanation = torch._dynamo.explain(f)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    torch._dynamo.reset()
    compiled = torch.compile(f, backend=counting_backend, dynamic=True)
    for batch in (2, 3, 5):
        x = torch.randn(batch, 6, 4)
        torch.testing.assert_close(compiled(x), f(x))
    assert len(compiles) == 1


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
def test_lists_pack_unpack_and_parse_shape_trace_without_graph_breaks():
    from tensorcraft.einops import pack, parse_shape, unpack

    def f(x, y):
        stacked = rearrange([x, y], "n b c -> b (n c)")
        packed, shapes = pack([x, y, stacked], "b *")
        a, b, c = unpack(packed * 2, shapes, "b *")
        return a + b + rearrange(c, "b (n c) -> b n c", n=2).sum(1) + parse_shape(x, "b c")["c"]

    def reference(x, y):
        stacked = einops.rearrange([x, y], "n b c -> b (n c)")
        packed, shapes = einops.pack([x, y, stacked], "b *")
        a, b, c = einops.unpack(packed * 2, shapes, "b *")
        return a + b + einops.rearrange(c, "b (n c) -> b n c", n=2).sum(1) + einops.parse_shape(x, "b c")["c"]

    torch._dynamo.reset()
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    explanation = torch._dynamo.explain(f)(x, y)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    torch.testing.assert_close(torch.compile(f, backend="eager", fullgraph=True)(x, y), reference(x, y))
