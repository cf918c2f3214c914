"""Known-wrong answers to notebook 11's exercises (attention, block, merge_views), each with its hint.

None holds a right answer: each attention mutant is written out with its one mistake, from pieces
that are no answer (splitting and merging the heads, the causal mask); each block mutant is a patch of
the library's stand-in block (``tensorcraft.compiler.examples.TransformerBlock``, rebuilt from its
edited source, so no subclass of it) and each merge_views mutant a patch of the library's pass
(``grader.mutants.patched``).
"""
import torch
import torch.nn.functional as F

import tensorcraft as tc
from tensorcraft.compiler.examples import TransformerBlock
from tensorcraft.compiler.passes.views import merge_views

from . import mutant, patched

ATTENTION = "nb11_capstone.attention"
BLOCK = "nb11_capstone.block"
MERGE_VIEWS = "nb11_capstone.merge_views"
MAKE_PIPELINE = "nb11_capstone.make_pipeline"


# ---------------------------------------------------------------- attention


def _split(heads, *tensors, pattern="b t (h e) -> b h t e"):
    return (tc.rearrange(z, pattern, h=heads) for z in tensors)


def _merge(out, pattern="b h t e -> b t (h e)"):
    return tc.rearrange(out, pattern)


def _hide_future(scores, fill=float("-inf"), device=None):
    tq, tk = scores.shape[-2:]
    return scores.masked_fill(torch.ones(tq, tk, dtype=torch.bool, device=device or scores.device).triu(1), fill)


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
    q, k, v = _split(heads, q, k, v)
    scores = tc.einsum("bhqe,bhke->bhqk", q, k) * (q.shape[-1] * heads) ** -0.5
    scores = _hide_future(scores) if causal else scores
    return _merge(tc.einsum("bhqk,bhke->bhqe", scores.softmax(dim=-1), v))


@mutant(ATTENTION, hint="the scores must be multiplied by e ** -0.5 (divided by sqrt(e)), so that their spread "
        "does not grow with the head size; you left them unscaled")
def attention_unscaled(q, k, v, heads, causal=False):
    q, k, v = _split(heads, q, k, v)
    scores = tc.einsum("bhqe,bhke->bhqk", q, k)
    scores = _hide_future(scores) if causal else scores
    return _merge(tc.einsum("bhqk,bhke->bhqe", scores.softmax(dim=-1), v))


@mutant(ATTENTION, hint="you multiplied the scores by sqrt(e); multiply by e ** -0.5 (divide by sqrt(e))")
def attention_scale_inverted(q, k, v, heads, causal=False):
    q, k, v = _split(heads, q, k, v)
    scores = tc.einsum("bhqe,bhke->bhqk", q, k) * q.shape[-1] ** 0.5
    scores = _hide_future(scores) if causal else scores
    return _merge(tc.einsum("bhqk,bhke->bhqe", scores.softmax(dim=-1), v))


@mutant(ATTENTION, hint="the softmax runs over the keys, the last axis of 'bhqk': each query's weights sum to 1. "
        "You normalised over the queries (dim=-2)")
def attention_softmax_over_queries(q, k, v, heads, causal=False):
    q, k, v = _split(heads, q, k, v)
    scores = tc.einsum("bhqe,bhke->bhqk", q, k) * q.shape[-1] ** -0.5
    scores = _hide_future(scores) if causal else scores
    return _merge(tc.einsum("bhqk,bhke->bhqe", scores.softmax(dim=-2), v))


@mutant(ATTENTION, hint="the heads split the features as (h e): head 0 owns the first e features. '(e h)' "
        "deals the features out to the heads like cards, which is not how the projection's rows are laid out")
def attention_heads_split_as_e_h(q, k, v, heads, causal=False):
    q, k, v = _split(heads, q, k, v, pattern="b t (e h) -> b h t e")
    scores = tc.einsum("bhqe,bhke->bhqk", q, k) * q.shape[-1] ** -0.5
    scores = _hide_future(scores) if causal else scores
    return _merge(tc.einsum("bhqk,bhke->bhqe", scores.softmax(dim=-1), v), "b h t e -> b t (e h)")


@mutant(ATTENTION, hint="the heads are split as (h e) and must be put back the same way: 'b h t e -> b t (h e)'; "
        "'(e h)' interleaves the heads' features")
def attention_heads_merged_as_e_h(q, k, v, heads, causal=False):
    q, k, v = _split(heads, q, k, v)
    scores = tc.einsum("bhqe,bhke->bhqk", q, k) * q.shape[-1] ** -0.5
    scores = _hide_future(scores) if causal else scores
    return _merge(tc.einsum("bhqk,bhke->bhqe", scores.softmax(dim=-1), v), "b h t e -> b t (e h)")


@mutant(ATTENTION, hint="with causal=True a query may not see the keys after it: mask the scores where the key "
        "index is greater than the query index (torch.ones(tq, tk).triu(1)); you ignored causal")
def attention_ignores_causal(q, k, v, heads, causal=False):
    q, k, v = _split(heads, q, k, v)
    scores = tc.einsum("bhqe,bhke->bhqk", q, k) * q.shape[-1] ** -0.5
    return _merge(tc.einsum("bhqk,bhke->bhqe", scores.softmax(dim=-1), v))


@mutant(ATTENTION, hint="you masked the past instead of the future: the hidden keys are those AFTER the query, "
        "above the diagonal (triu(1)), not below it (tril(-1))")
def attention_masks_the_past(q, k, v, heads, causal=False):
    q, k, v = _split(heads, q, k, v)
    scores = tc.einsum("bhqe,bhke->bhqk", q, k) * q.shape[-1] ** -0.5
    if causal:
        tq, tk = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(tq, tk, dtype=torch.bool, device=scores.device).tril(-1), float("-inf"))
    return _merge(tc.einsum("bhqk,bhke->bhqe", scores.softmax(dim=-1), v))


@mutant(ATTENTION, hint="a masked score must be -inf before the softmax, so that its weight is exactly 0; "
        "a score of 0 still gets the weight exp(0) / sum")
def attention_masks_with_zero(q, k, v, heads, causal=False):
    q, k, v = _split(heads, q, k, v)
    scores = tc.einsum("bhqe,bhke->bhqk", q, k) * q.shape[-1] ** -0.5
    scores = _hide_future(scores, fill=0.0) if causal else scores
    return _merge(tc.einsum("bhqk,bhke->bhqe", scores.softmax(dim=-1), v))


@mutant(ATTENTION, hint="zeroing weights after the softmax leaves each row summing to less than 1; mask the "
        "scores with -inf before the softmax, which renormalises over the visible keys")
def attention_masks_after_softmax(q, k, v, heads, causal=False):
    q, k, v = _split(heads, q, k, v)
    weights = (tc.einsum("bhqe,bhke->bhqk", q, k) * q.shape[-1] ** -0.5).softmax(dim=-1)
    weights = _hide_future(weights, fill=0.0) if causal else weights
    return _merge(tc.einsum("bhqk,bhke->bhqe", weights, v))


@mutant(ATTENTION, hint="the mask is created on the CPU whatever the inputs' device: torch.ones(tq, tk, "
        "dtype=torch.bool) on a GPU model cannot mask GPU scores; create it with device=scores.device")
def attention_mask_on_the_cpu(q, k, v, heads, causal=False):
    q, k, v = _split(heads, q, k, v)
    scores = tc.einsum("bhqe,bhke->bhqk", q, k) * q.shape[-1] ** -0.5
    scores = _hide_future(scores, device="cpu") if causal else scores
    return _merge(tc.einsum("bhqk,bhke->bhqe", scores.softmax(dim=-1), v))


# ---------------------------------------------------------------- block: patches of the library's stand-in block

patched(BLOCK, "BlockPostNorm", TransformerBlock,
        ("for z in self.qkv(self.ln1(x)).chunk(3, dim=-1))", "for z in self.qkv(x).chunk(3, dim=-1))"),
        ("x = x + self.proj(rearrange(einsum(\"bhqk,bhke->bhqe\", weights, v), \"b h t e -> b t (h e)\"))",
         "x = self.ln1(x + self.proj(rearrange(einsum(\"bhqk,bhke->bhqe\", weights, v), \"b h t e -> b t (h e)\")))"),
        ("return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))", "return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))"),
        hint="the block is pre-norm: the layer norm is applied to the input of each branch "
        "(x + attention(ln1(x))), not to the sum after it (ln1(x + attention(x)))")

patched(BLOCK, "BlockWithoutAttentionResidual", TransformerBlock, ("x = x + self.proj(", "x = self.proj("),
        hint="each branch is added to its input (a residual connection): x = x + proj(attention(...)); "
        "you replaced x by the attention's output")

patched(BLOCK, "BlockWithoutMlpResidual", TransformerBlock,
        ("return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))", "return self.fc2(F.gelu(self.fc1(self.ln2(x))))"),
        hint="the MLP branch is added to its input too: return x + fc2(gelu(fc1(ln2(x))))")

patched(BLOCK, "BlockWithRelu", TransformerBlock, ("F.gelu(self.fc1(", "F.relu(self.fc1("),
        hint="the MLP's nonlinearity is GELU (F.gelu), not ReLU")

patched(BLOCK, "BlockWithTanhGelu", TransformerBlock,
        ("F.gelu(self.fc1(self.ln2(x)))", "F.gelu(self.fc1(self.ln2(x)), approximate=\"tanh\")"),
        hint="F.gelu's default is the exact GELU (with erf); approximate='tanh' differs by up to ~1e-3")

patched(BLOCK, "BlockNotCausal", TransformerBlock, ("scores.masked_fill(future, float(\"-inf\"))", "scores"),
        hint="the block's attention is causal: call attention(q, k, v, heads, causal=True)")

patched(BLOCK, "BlockSwapsQueriesAndKeys", TransformerBlock, ("q, k, v = (rearrange(", "k, q, v = (rearrange("),
        hint="qkv's output is q, k, v in that order along the last axis: q, k, v = qkv(...).chunk(3, dim=-1)")

patched(BLOCK, "BlockReusesLn1", TransformerBlock, ("self.fc1(self.ln2(x))", "self.fc1(self.ln1(x))"),
        hint="each branch has its own layer norm: ln1 before the attention, ln2 before the MLP")

patched(BLOCK, "BlockWithoutProjection", TransformerBlock,
        ("x = x + self.proj(rearrange(einsum(\"bhqk,bhke->bhqe\", weights, v), \"b h t e -> b t (h e)\"))",
         "x = x + rearrange(einsum(\"bhqk,bhke->bhqe\", weights, v), \"b h t e -> b t (h e)\") + 0 * self.proj.bias"),
        hint="the attention's output goes through proj before it is added to x")


# ---------------------------------------------------------------- merge_views: patches of the library's pass

patched(MERGE_VIEWS, "merge_views_composes_backwards", merge_views,
        ("tuple(inner_order[i] for i in outer_order)", "tuple(outer_order[i] for i in inner_order)"),
        hint="permute(permute(x, p), q) takes axis p[q[i]] of x to position i: the merged order is "
        "[p[i] for i in q] (inner indexed by outer); you composed them the other way round")

patched(MERGE_VIEWS, "merge_views_keeps_the_inner_shape", merge_views,
        ("(source, tuple(node.shape)),\n                                  shape=node.shape,",
         "(source, tuple(node.args[0].shape)),\n                                  shape=node.args[0].shape,"),
        hint="the merged reshape must produce the OUTER node's shape (node.shape): the inner "
        "view's shape is an intermediate step")

patched(MERGE_VIEWS, "merge_views_forgets_aliases", merge_views,
        ("device=node.device, aliases=source)\n        elif", "device=node.device)\n        elif"),
        ("device=node.device, aliases=source)\n        else", "device=node.device)\n        else"),
        hint="the merged node is a view of the inner view's input: create it with aliases=source. "
        "Without it the memory plan thinks the node owns fresh memory and hands the source's buffer to the next "
        "kernel while the view still reads it")

patched(MERGE_VIEWS, "merge_views_edits_its_input", merge_views, ("graph = graph.copy()", "graph = graph"),
        hint="a pass must not change the graph it was given (the compiler keeps the captured graph "
        "for explain() and for recompiling): start with graph = graph.copy()")

patched(MERGE_VIEWS, "merge_views_mixes_reshape_and_permute", merge_views,
        ("if _is_view_of_view(node, RESHAPES):",
         "if _is_view_of_view(node, RESHAPES + (\"permute\",)) and not _is_view_of_view(node, (\"permute\",)):"),
        hint="a reshape of a permute is not one reshape: a permute moves the elements, a reshape "
        "only regroups them in memory order. Merge reshape/view into reshape/view, and permute into permute only")

patched(MERGE_VIEWS, "merge_views_reshapes_only", merge_views, ("elif _is_view_of_view(node, (\"permute\",)):", "elif False:"),
        hint="the pass must merge every view of a view: no reshape/view may read a reshape/view, and "
        "no permute a permute, when it is done; you merged the reshapes only")


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
