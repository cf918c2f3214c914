"""Our einsum, rearrange/reduce/repeat, pack and layers inside torch.compile: traced by Dynamo with
no graph break, no warning and no recompile when plans are added eagerly.

backend="eager" (and torch._dynamo.explain) only trace: no Inductor compile is paid here.
"""
import warnings

import einops
import torch
import torch._dynamo

import tensorcraft as tc
from tensorcraft.einops import rearrange, reduce, repeat
from tensorcraft.einops.layers import Rearrange, Reduce
from tensorcraft.einops.ops import steps_for
from tensorcraft.einstein.api import cached_plan


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


def _counting_backend():
    """A torch.compile backend that runs the traced graph as it is and records each compile."""
    compiles = []

    def backend(graph_module, example_inputs):
        compiles.append(graph_module)
        return graph_module.forward

    return backend, compiles


def _reference(module, x):
    q, k, v = einops.rearrange(module.qkv(x), "b n (three h d) -> three b h n d", three=3, h=module.heads)
    scores = torch.einsum("bhid,bhjd->bhij", q, k).softmax(-1)
    out = einops.rearrange(torch.einsum("bhij,bhjd->bhid", scores, v), "b h n d -> b n (h d)")
    out = out + einops.reduce(x, "b (n 1) d -> b 1 d", "max") + einops.repeat(out.sum(-1), "b n -> b n d", d=x.shape[-1])
    return einops.rearrange(einops.reduce(out, "b n d -> b d", "mean"), "b (d one) -> b d one", one=1)


def test_module_traces_with_zero_graph_breaks():
    torch._dynamo.reset()
    module, x = Attention(), torch.randn(2, 5, 8)
    explanation = torch._dynamo.explain(module)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


def test_compiled_module_matches_einops():
    """While Dynamo traces, the plan caches are skipped and each plan is built in the trace."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    module, x = Attention(), torch.randn(2, 5, 8)
    compiled = torch.compile(module, backend="eager", fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), _reference(module, x))
        torch.testing.assert_close(compiled(x[:1]), _reference(module, x[:1]))  # new shape: new plan


def test_new_plans_made_outside_do_not_recompile_a_compiled_function():
    """The plan cache is invisible to Dynamo's guards: eager calls that add plans cost no recompile."""
    counting_backend, compiles = _counting_backend()

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


def test_dynamic_batch_size_compiles_once_without_graph_breaks():
    """With a symbolic batch size the plan holds symbolic lengths; no message string touches them."""
    counting_backend, compiles = _counting_backend()

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


def _everything(x, w):
    """Every public operation a notebook shows, in one function."""
    y = tc.einsum("bchw,dc->bdhw", x, w)                          # letter einsum
    y = y + tc.einops.einsum(x, w, "b c h w, d c -> b d h w")     # named-axis einsum
    pooled = tc.reduce(y, "b c (h 2) (w 2) -> b c h w", "max")
    up = tc.repeat(pooled, "b c h w -> b c (h 2) (w 2)")
    packed, shapes = tc.pack([up, y], "b c *")
    a, b = tc.unpack(packed, shapes, "b c *")
    head = torch.nn.Sequential(Reduce("b c h w -> b c 1 1", "mean"), Rearrange("b c 1 1 -> b c"))
    return tc.rearrange(a + b, "b c h w -> b (c h w)").sum(-1, keepdim=True) + head(y)


def _everything_reference(x, w):
    y = 2 * torch.einsum("bchw,dc->bdhw", x, w)
    up = einops.repeat(einops.reduce(y, "b c (h 2) (w 2) -> b c h w", "max"), "b c h w -> b c (h 2) (w 2)")
    return einops.rearrange(up + y, "b c h w -> b (c h w)").sum(-1, keepdim=True) + y.mean((2, 3))


def _compile_warnings(fn, *args) -> tuple[list[str], object]:
    """The warnings that a fresh trace of ``fn`` prints, and torch._dynamo.explain's report."""
    torch._dynamo.reset()
    getattr(torch._dynamo.utils, "warn_once_cache", set()).clear()  # Dynamo warns once per process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        explanation = torch._dynamo.explain(fn)(*args)
    return [f"{w.category.__name__}: {w.message}" for w in caught], explanation


def test_einsum_einops_pack_and_layers_compile_without_warnings_or_graph_breaks():
    x, w = torch.randn(2, 3, 4, 4), torch.randn(5, 3)
    messages, explanation = _compile_warnings(_everything, x, w)
    assert messages == []
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1
    torch.testing.assert_close(torch.compile(_everything, backend="eager", fullgraph=True)(x, w), _everything_reference(x, w))


def test_a_cache_wrapped_call_would_be_reported():
    """The test above can fail: Dynamo does warn about a plain lru_cache on the traced path."""
    import functools

    @functools.lru_cache(maxsize=None)
    def transpose_order(ndim):
        return tuple(reversed(range(ndim)))

    messages, _ = _compile_warnings(lambda x: x.permute(transpose_order(x.ndim)), torch.randn(2, 3))
    assert any("lru_cache" in message for message in messages), messages


def test_tracing_leaves_the_caches_alone_and_eager_calls_still_hit_them():
    torch._dynamo.reset()
    x, w = torch.randn(3, 2, 4, 6), torch.randn(7, 2)
    steps_before, plans_before = steps_for.cache_info(), cached_plan.cache_info()
    torch.compile(_everything, backend="eager", fullgraph=True)(x, w)
    assert steps_for.cache_info() == steps_before and cached_plan.cache_info() == plans_before
    _everything(x, w)
    _everything(x, w)
    assert steps_for.cache_info().hits > steps_before.hits
    assert cached_plan.cache_info().hits > plans_before.hits


def test_einsum_plans_made_outside_do_not_recompile_a_compiled_function():
    counting_backend, compiles = _counting_backend()

    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: tc.einsum("ij,jk->ik", a, b) + 1, backend=counting_backend)
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    compiled(a, b)
    for n in range(1, 6):
        tc.einsum("ij,jk->ik", torch.randn(n, 2), torch.randn(2, n))
        tc.einsum("ij->j", torch.randn(n, 3))
    torch.testing.assert_close(compiled(a, b), a @ b + 1)
    assert len(compiles) == 1
