"""merge_views: a view of a view becomes one view; the meaning stays eager's, on generated chains."""
from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorcraft as tc
from tensorcraft.compiler.capture import capture
from tensorcraft.compiler.interpret import interpret
from tensorcraft.compiler.passes import get_pass
from tensorcraft.compiler.passes.dce import eliminate_dead_code
from tensorcraft.compiler.passes.views import merge_views, permutation_of

SHAPE = (2, 3, 4)


def _view_chains(graph) -> int:
    """Views reading a view of the same family: what merge_views must leave none of."""
    families = ({"reshape", "view"}, {"permute"})
    return sum(1 for n in graph.nodes if n.kind == "call" and n.args and getattr(n.args[0], "kind", None) == "call"
               and any(n.op in f and n.args[0].op in f for f in families))


@st.composite
def view_programs(draw):
    """Steps on a (2, 3, 4) tensor: reshapes to random factorisations, permutes (spelled in several
    ways), and elementwise ops between them; each step is applied to the latest value."""
    steps = []
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(["reshape", "view", "permute", "permute_tuple", "torch_permute", "mul"]))
        if kind in ("reshape", "view"):
            steps.append((kind, draw(st.sampled_from([(24,), (6, 4), (4, 6), (2, 12), (3, 2, 4), (2, 2, 6), (-1, 8)]))))
        elif kind.endswith("permute") or kind == "permute_tuple":
            steps.append((kind, None))  # the order is drawn for the rank met at run time
        else:
            steps.append((kind, draw(st.floats(0.5, 2.0))))
    orders = draw(st.lists(st.permutations(range(4)), min_size=len(steps), max_size=len(steps)))
    return steps, orders


def _as_function(program):
    steps, orders = program

    def fn(x):
        y, out = x, []
        for (kind, arg), order in zip(steps, orders):
            if kind in ("reshape", "view"):
                y = getattr(y.contiguous() if kind == "view" and not y.is_contiguous() else y, kind)(*arg)
            elif "permute" in kind:
                dims = [d for d in order if d < y.dim()]
                dims = [d - y.dim() if i % 2 else d for i, d in enumerate(dims)]  # some negative
                y = (y.permute(*dims) if kind == "permute" else y.permute(tuple(dims)) if kind == "permute_tuple"
                     else torch.permute(y, dims))
            else:
                y = y * arg
                out.append(y)
        return (*out, y)
    return fn


@settings(max_examples=60, deadline=None)
@given(view_programs())
def test_merged_graphs_keep_eager_meaning_and_leave_no_chain(program):
    fn, x = _as_function(program), torch.randn(SHAPE)
    graph = capture(fn, (x,)).graph
    before = str(graph)
    merged = merge_views(graph)
    merged.lint()
    assert str(graph) == before  # the pass works on a copy
    assert _view_chains(merged) == 0
    assert len(eliminate_dead_code(merged)) <= len(graph)
    fresh = torch.randn(SHAPE)
    for got, expected in zip(interpret(merged, [fresh]), fn(fresh)):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_permutations_compose_in_the_order_they_are_applied():
    x = torch.randn(2, 3, 4, 5)
    graph = eliminate_dead_code(merge_views(capture(lambda t: t.permute(1, 0, 3, 2).permute(3, -2, 0, 1), (x,)).graph))
    permute = next(n for n in graph.nodes if n.op == "permute")
    assert permutation_of(permute) == (2, 3, 1, 0) and permute.args[0].kind == "placeholder"
    torch.testing.assert_close(interpret(graph, [x])[0], x.permute(1, 0, 3, 2).permute(3, -2, 0, 1), rtol=0, atol=0)


def test_a_chain_of_three_reshapes_becomes_one_and_other_readers_keep_the_inner_view():
    x = torch.randn(2, 3, 4)

    def fn(t):
        inner = t.reshape(6, 4)
        return inner.reshape(4, 6).reshape(24), inner + 1
    graph = eliminate_dead_code(merge_views(capture(fn, (x,)).graph))
    assert [n.op for n in graph.nodes if n.kind == "call"] == ["reshape", "reshape", "add"]
    for got, expected in zip(interpret(graph, [x]), fn(x)):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_the_pass_runs_by_name_and_as_a_stage_inside_compile():
    def attention_like(q, k):
        q = tc.rearrange(q, "b t (h e) -> b h t e", h=2)
        k = tc.rearrange(k, "b t (h e) -> b h t e", h=2)
        return tc.einsum("bhqe,bhke->bhqk", q, k)
    q, k = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    assert get_pass("views") is merge_views
    compiled = tc.compile(attention_like, passes=["views", "dce"])
    compiled(q, k)
    torch.testing.assert_close(compiled(q, k), attention_like(q, k))
    assert _view_chains(compiled.compiled.captured) > 0 and _view_chains(compiled.compiled.optimized) == 0
    calls = []
    with tc.substitute(merge_views=lambda g: calls.append(len(g)) or merge_views.library(g)):
        torch.testing.assert_close(compiled(q, k), attention_like(q, k))
    assert calls


def test_the_example_transformer_block_equals_one_built_on_multihead_attention():
    from tensorcraft.compiler.examples import TransformerBlock
    torch.manual_seed(0)
    ours, mha = TransformerBlock(16, 4).double(), torch.nn.MultiheadAttention(16, 4, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(ours.qkv.weight), mha.in_proj_bias.copy_(ours.qkv.bias)
        mha.out_proj.weight.copy_(ours.proj.weight), mha.out_proj.bias.copy_(ours.proj.bias)
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    h = ours.ln1(x)
    y = x + mha(h, h, h, attn_mask=torch.ones(7, 7, dtype=torch.bool).triu(1), need_weights=False)[0]
    expected = y + ours.fc2(torch.nn.functional.gelu(ours.fc1(ours.ln2(y))))
    torch.testing.assert_close(ours(x), expected)
    compiled = tc.compile(ours, passes=["views", "decompose", "cse", "dce", "fusion"], backend="python")
    with torch.no_grad():
        compiled(x)
        torch.testing.assert_close(compiled(x), expected)
    assert compiled.compiled.optimized.count(kind="kernel") > 0
