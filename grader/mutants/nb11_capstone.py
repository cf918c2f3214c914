"""Known-wrong answers to notebook 11's exercises (attention, block, merge_views), each with its hint.

They are written as a learner of the notebook would write them: attention with tc.rearrange and
tc.einsum, the block around an attention, the pass with the graph's own methods, plus one mistake each.
"""
import torch
import torch.nn.functional as F
from torch import nn

import tensorcraft as tc
from tensorcraft.compiler.passes.views import permutation_of

from . import mutant

ATTENTION = "nb11_capstone.attention"
BLOCK = "nb11_capstone.block"
MERGE_VIEWS = "nb11_capstone.merge_views"
MAKE_PIPELINE = "nb11_capstone.make_pipeline"


# ---------------------------------------------------------------- attention


def _attention(q, k, v, heads, causal, *, split="b t (h e) -> b h t e", merge="b h t e -> b t (h e)",
               scale=None, softmax_dim=-1, mask="future", fill=float("-inf"), mask_after_softmax=False,
               mask_device=None):
    """The notebook's attention, with one piece swappable so that each mutant changes only that."""
    q, k, v = (tc.rearrange(z, split, h=heads) for z in (q, k, v))
    e = q.shape[-1]
    scores = tc.einsum("bhqe,bhke->bhqk", q, k) * (e ** -0.5 if scale is None else scale(q.shape, heads))
    tq, tk = scores.shape[-2:]
    hidden = None
    if causal and mask is not None:
        ones = torch.ones(tq, tk, dtype=torch.bool, device=mask_device or scores.device)
        hidden = ones.triu(1) if mask == "future" else ones.tril(-1)
        if not mask_after_softmax:
            scores = scores.masked_fill(hidden, fill)
    weights = scores.softmax(dim=softmax_dim)
    if mask_after_softmax and hidden is not None:
        weights = weights.masked_fill(hidden, 0.0)
    return tc.rearrange(tc.einsum("bhqk,bhke->bhqe", weights, v), merge, h=heads)


_SDPA = {"attention": F.scaled_dot_product_attention}  # kept before the check ran, under a name of its own


@mutant(ATTENTION, hint="scaled_dot_product_attention is forbidden under any name, even kept in a dict: the check "
        "watches the operation; write the two products with tc.einsum")
def attention_by_kept_reference(q, k, v, heads, causal=False):
    q, k, v = (tc.rearrange(z, "b t (h e) -> b h t e", h=heads) for z in (q, k, v))
    tc.einsum("bhqe->bhqe", q)
    return tc.rearrange(_SDPA["attention"](q, k, v, is_causal=causal), "b h t e -> b t (h e)")


@mutant(ATTENTION, hint="torch.ops.aten.einsum is torch.einsum under another name, and the check watches the "
        "operation: write both products with tc.einsum, the einsum you rebuilt")
def attention_by_aten_einsum(q, k, v, heads, causal=False):
    q, k, v = (tc.rearrange(z, "b t (h e) -> b h t e", h=heads) for z in (q, k, v))
    scores = tc.einsum("bhqe,bhke->bhqk", q, k) * q.shape[-1] ** -0.5
    if causal:
        scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).triu(1),
                                    float("-inf"))
    out = torch.ops.aten.einsum("bhqk,bhke->bhqe", [scores.softmax(dim=-1), v])
    return tc.rearrange(out, "b h t e -> b t (h e)")


@mutant(ATTENTION, hint="scale by one over the square root of the size of ONE head, e = d // heads, not of the "
        "whole model width d: the scores are sums over the e features of a head")
def attention_scaled_by_model_width(q, k, v, heads, causal=False):
    return _attention(q, k, v, heads, causal, scale=lambda shape, h: (shape[-1] * h) ** -0.5)


@mutant(ATTENTION, hint="the scores must be multiplied by e ** -0.5 (divided by sqrt(e)), so that their spread "
        "does not grow with the head size; you left them unscaled")
def attention_unscaled(q, k, v, heads, causal=False):
    return _attention(q, k, v, heads, causal, scale=lambda shape, h: 1.0)


@mutant(ATTENTION, hint="you multiplied the scores by sqrt(e); multiply by e ** -0.5 (divide by sqrt(e))")
def attention_scale_inverted(q, k, v, heads, causal=False):
    return _attention(q, k, v, heads, causal, scale=lambda shape, h: shape[-1] ** 0.5)


@mutant(ATTENTION, hint="the softmax runs over the keys, the last axis of 'bhqk': each query's weights sum to 1. "
        "You normalised over the queries (dim=-2)")
def attention_softmax_over_queries(q, k, v, heads, causal=False):
    return _attention(q, k, v, heads, causal, softmax_dim=-2)


@mutant(ATTENTION, hint="the heads split the features as (h e): head 0 owns the first e features. '(e h)' "
        "deals the features out to the heads like cards, which is not how the projection's rows are laid out")
def attention_heads_split_as_e_h(q, k, v, heads, causal=False):
    return _attention(q, k, v, heads, causal, split="b t (e h) -> b h t e", merge="b h t e -> b t (e h)")


@mutant(ATTENTION, hint="the heads are split as (h e) and must be put back the same way: 'b h t e -> b t (h e)'; "
        "'(e h)' interleaves the heads' features")
def attention_heads_merged_as_e_h(q, k, v, heads, causal=False):
    return _attention(q, k, v, heads, causal, merge="b h t e -> b t (e h)")


@mutant(ATTENTION, hint="with causal=True a query may not see the keys after it: mask the scores where the key "
        "index is greater than the query index (torch.ones(tq, tk).triu(1)); you ignored causal")
def attention_ignores_causal(q, k, v, heads, causal=False):
    return _attention(q, k, v, heads, causal, mask=None)


@mutant(ATTENTION, hint="you masked the past instead of the future: the hidden keys are those AFTER the query, "
        "above the diagonal (triu(1)), not below it (tril(-1))")
def attention_masks_the_past(q, k, v, heads, causal=False):
    return _attention(q, k, v, heads, causal, mask="past")


@mutant(ATTENTION, hint="a masked score must be -inf before the softmax, so that its weight is exactly 0; "
        "a score of 0 still gets the weight exp(0) / sum")
def attention_masks_with_zero(q, k, v, heads, causal=False):
    return _attention(q, k, v, heads, causal, fill=0.0)


@mutant(ATTENTION, hint="zeroing weights after the softmax leaves each row summing to less than 1; mask the "
        "scores with -inf before the softmax, which renormalises over the visible keys")
def attention_masks_after_softmax(q, k, v, heads, causal=False):
    return _attention(q, k, v, heads, causal, mask_after_softmax=True)


@mutant(ATTENTION, hint="the mask is created on the CPU whatever the inputs' device: torch.ones(tq, tk, "
        "dtype=torch.bool) on a GPU model cannot mask GPU scores; create it with device=scores.device")
def attention_mask_on_the_cpu(q, k, v, heads, causal=False):
    return _attention(q, k, v, heads, causal, mask_device="cpu")


# ---------------------------------------------------------------- block


def _correct_attention(q, k, v, heads, causal=False):
    return _attention(q, k, v, heads, causal)


class _Block(nn.Module):
    """The notebook's block; subclasses change one thing."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def qkv_of(self, x):
        return self.qkv(self.ln1(x)).chunk(3, dim=-1)

    def attend(self, x):
        q, k, v = self.qkv_of(x)
        return self.proj(_correct_attention(q, k, v, self.heads, causal=True))

    def mlp(self, x):
        return self.fc2(F.gelu(self.fc1(self.ln2(x))))

    def forward(self, x):
        x = x + self.attend(x)
        return x + self.mlp(x)


@mutant(BLOCK, hint="the block is pre-norm: the layer norm is applied to the input of each branch "
        "(x + attention(ln1(x))), not to the sum after it (ln1(x + attention(x)))")
class BlockPostNorm(_Block):
    def attend(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.proj(_correct_attention(q, k, v, self.heads, causal=True))

    def forward(self, x):
        x = self.ln1(x + self.attend(x))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


@mutant(BLOCK, hint="each branch is added to its input (a residual connection): x = x + proj(attention(...)); "
        "you replaced x by the attention's output")
class BlockWithoutAttentionResidual(_Block):
    def forward(self, x):
        x = self.attend(x)
        return x + self.mlp(x)


@mutant(BLOCK, hint="the MLP branch is added to its input too: return x + fc2(gelu(fc1(ln2(x))))")
class BlockWithoutMlpResidual(_Block):
    def forward(self, x):
        return self.mlp(x + self.attend(x))


@mutant(BLOCK, hint="the MLP's nonlinearity is GELU (F.gelu), not ReLU")
class BlockWithRelu(_Block):
    def mlp(self, x):
        return self.fc2(F.relu(self.fc1(self.ln2(x))))


@mutant(BLOCK, hint="F.gelu's default is the exact GELU (with erf); approximate='tanh' differs by up to ~1e-3")
class BlockWithTanhGelu(_Block):
    def mlp(self, x):
        return self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


@mutant(BLOCK, hint="the block's attention is causal: call attention(q, k, v, heads, causal=True)")
class BlockNotCausal(_Block):
    def attend(self, x):
        q, k, v = self.qkv_of(x)
        return self.proj(_correct_attention(q, k, v, self.heads, causal=False))


@mutant(BLOCK, hint="qkv's output is q, k, v in that order along the last axis: q, k, v = qkv(...).chunk(3, dim=-1)")
class BlockSwapsQueriesAndKeys(_Block):
    def qkv_of(self, x):
        k, q, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        return q, k, v


@mutant(BLOCK, hint="each branch has its own layer norm: ln1 before the attention, ln2 before the MLP")
class BlockReusesLn1(_Block):
    def mlp(self, x):
        return self.fc2(F.gelu(self.fc1(self.ln1(x))))


@mutant(BLOCK, hint="the attention's output goes through proj before it is added to x")
class BlockWithoutProjection(_Block):
    def attend(self, x):
        q, k, v = self.qkv_of(x)
        return _correct_attention(q, k, v, self.heads, causal=True) + 0 * self.proj.bias


# ---------------------------------------------------------------- merge_views


def _merge_views(graph, *, copy=True, compose=lambda inner, outer: tuple(inner[i] for i in outer),
                 shape_of=lambda node, inner: node.shape, alias=True, families=(("reshape", "view"), ("permute",))):
    """The notebook's pass, with one piece swappable so that each mutant changes only that."""
    graph = graph.copy() if copy else graph
    for node in list(graph.nodes):
        if node.kind != "call" or not node.args or not hasattr(node.args[0], "kind"):
            continue
        inner = node.args[0]
        family = next((f for f in families if node.op in f), None)
        if family is None or inner.kind != "call" or inner.op not in family:
            continue
        source = inner.args[0]
        if node.op == "permute" and inner.op == "permute":
            new = graph.create("call", "permute", torch.Tensor.permute,
                               (source, compose(permutation_of(inner), permutation_of(node))),
                               shape=node.shape, dtype=node.dtype, device=node.device, aliases=source if alias else None)
        else:
            shape = shape_of(node, inner)
            new = graph.create("call", "reshape", torch.Tensor.reshape, (source, tuple(shape)),
                               shape=shape, dtype=node.dtype, device=node.device, aliases=source if alias else None)
        graph.replace(node, [new])
    return graph


@mutant(MERGE_VIEWS, hint="permute(permute(x, p), q) takes axis p[q[i]] of x to position i: the merged order is "
        "[p[i] for i in q] (inner indexed by outer); you composed them the other way round")
def merge_views_composes_backwards(graph):
    return _merge_views(graph, compose=lambda inner, outer: tuple(outer[i] for i in inner))


@mutant(MERGE_VIEWS, hint="the merged reshape must produce the OUTER node's shape (node.shape): the inner "
        "view's shape is an intermediate step")
def merge_views_keeps_the_inner_shape(graph):
    return _merge_views(graph, shape_of=lambda node, inner: inner.shape if inner.shape != node.shape else node.shape)


@mutant(MERGE_VIEWS, hint="the merged node is a view of the inner view's input: create it with aliases=source. "
        "Without it the memory plan thinks the node owns fresh memory and hands the source's buffer to the next "
        "kernel while the view still reads it")
def merge_views_forgets_aliases(graph):
    return _merge_views(graph, alias=False)


@mutant(MERGE_VIEWS, hint="a pass must not change the graph it was given (the compiler keeps the captured graph "
        "for explain() and for recompiling): start with graph = graph.copy()")
def merge_views_edits_its_input(graph):
    return _merge_views(graph, copy=False)


@mutant(MERGE_VIEWS, hint="a reshape of a permute is not one reshape: a permute moves the elements, a reshape "
        "only regroups them in memory order. Merge reshape/view into reshape/view, and permute into permute only")
def merge_views_mixes_reshape_and_permute(graph):
    return _merge_views(graph, families=(("reshape", "view", "permute"),))


@mutant(MERGE_VIEWS, hint="the pass must merge every view of a view: no reshape/view may read a reshape/view, and "
        "no permute a permute, when it is done; you merged the reshapes only")
def merge_views_reshapes_only(graph):
    return _merge_views(graph, families=(("reshape", "view"),))


# ---------------------------------------------------------------- make_pipeline


@mutant(MAKE_PIPELINE, hint="no fused kernel: fusion fuses only the elementwise ops it sees, so 'decompose' must "
        "come BEFORE 'fusion' (and 'fusion' must be in the list), or softmax and layer norm stay whole torch calls")
def pipeline_fuses_before_decomposing(view_pass):
    return [view_pass, "constant_folding", "cse", "dce", "fusion", "decompose"]


@mutant(MAKE_PIPELINE, hint="the causal mask (ones, then triu) reads no input: 'constant_folding' computes it "
        "once at compile time instead of at every call")
def pipeline_without_constant_folding(view_pass):
    return [view_pass, "decompose", "cse", "dce", "fusion"]


@mutant(MAKE_PIPELINE, hint="without 'decompose', softmax and layer norm stay whole and nothing is fused")
def pipeline_without_decompose(view_pass):
    return [view_pass, "constant_folding", "cse", "dce", "fusion"]


@mutant(MAKE_PIPELINE, hint="put the view pass you are given in the list (the function itself): the name "
        "'views' runs the library's pass, not yours")
def pipeline_with_the_librarys_view_pass(view_pass):
    return ["views", "constant_folding", "decompose", "cse", "dce", "fusion"]


@mutant(MAKE_PIPELINE, hint="the pipeline must run the view pass it is given: views of views are left otherwise")
def pipeline_without_view_pass(view_pass):
    return ["constant_folding", "decompose", "cse", "dce", "fusion"]


@mutant(MAKE_PIPELINE, hint="'dce' after 'fusion' finds nothing: the nodes the view pass and constant folding "
        "left unread are already inside the graph fusion built; put 'dce' before 'fusion'")
def pipeline_dce_after_fusion(view_pass):
    return [view_pass, "constant_folding", "decompose", "cse", "fusion", "dce"]


@mutant(MAKE_PIPELINE, hint="'dce' first finds nothing: nothing is dead yet; the inner views your pass leaves "
        "unread and what constant folding replaced die later, so 'dce' comes after them (and before 'fusion')")
def pipeline_dce_first(view_pass):
    return ["dce", view_pass, "constant_folding", "decompose", "cse", "fusion"]


@mutant(MAKE_PIPELINE, hint="'constant_folding' after 'dce' leaves the values it replaced (the mask's ones) in the "
        "graph, read by nothing: fold before 'dce', so that DCE removes them")
def pipeline_folds_after_dce(view_pass):
    return [view_pass, "decompose", "cse", "dce", "fusion", "constant_folding"]


@mutant(MAKE_PIPELINE, hint="the list needs 'dce': the inner views your pass leaves unread and what constant "
        "folding replaced stay in the graph without it")
def pipeline_without_dce(view_pass):
    return [view_pass, "constant_folding", "decompose", "cse", "fusion"]


@mutant(MAKE_PIPELINE, hint="no fused kernel: end with 'fusion', which turns the decomposed elementwise ops into "
        "kernels")
def pipeline_without_fusion(view_pass):
    return [view_pass, "constant_folding", "decompose", "cse", "dce"]
