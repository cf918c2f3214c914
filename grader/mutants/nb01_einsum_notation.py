"""Known-wrong answers to notebook 01's exercises (reading and writing einsum), each with its hint.

No mutant holds a right answer: the equations mutants are wrong tables written out (each holds only
the entries before its first mistake, in the statement's order, so that its own mistake is what a
check meets first); the output_shape mutants are patches of the library's parser
(``grader.mutants.patched``); each attention mutant is written out with its one mistake.
"""
import math

import numpy as np
import opt_einsum
import torch

from tensorcraft.einstein.parse import _output_labels, parse_equation, parse_terms

from ..checks.nb01_einsum_notation import NO_ARROW_HINT
from . import mutant, patched

EQUATIONS = "nb01_einsum_notation.equations"
OUTPUT_SHAPE = "nb01_einsum_notation.output_shape"
ATTENTION = "nb01_einsum_notation.attention"


# ---------------------------------------------------------------- equations


@mutant(EQUATIONS, hint="your result is the transpose of the expected one: the letters "
        "after '->' give the result's axes in order, so swapping the last two swaps rows and columns")
def equations_transposed():
    return {"matmul_bt": "ik,jk->ji", "scale_columns": "ij,j->ji", "channels_last": "bchw->bhcw",
            "batched_outer": "bi,bj->bji", "sum_of_products": "bij,bjk->ki", "attention_output": "bhqk,bhkd->bhdq"}


@mutant(EQUATIONS, hint=NO_ARROW_HINT)
def equations_implicit():
    return {"matmul_bt": "ik,jk", "row_dots": "ij,ij", "frobenius": "ij,ij", "scale_columns": "ij,j",
            "channels_last": "bchw", "batched_outer": "bi,bj", "batched_trace": "bii", "sum_of_products": "bij,bjk",
            "attention_output": "bhqk,bhkd", "quadratic_forms": "bi,ij,bj"}


@mutant(EQUATIONS, hint="you kept an axis that must be summed: every letter written after "
        "'->' stays in the result; leave out the letters to sum over")
def equations_keep_summed():
    return {"matmul_bt": "ik,jk->ijk", "row_dots": "ij,ij->ij", "frobenius": "ij,ij->ij",
            "sum_of_products": "bij,bjk->bik", "quadratic_forms": "bi,ij,bj->bij"}


@mutant(EQUATIONS, hint="a letter left out after '->' is summed over: keep the batch "
        "letter b in the output when the result has one value per batch entry")
def equations_sum_batch():
    return {"matmul_bt": "ik,jk->ij", "row_dots": "ij,ij->i", "frobenius": "ij,ij->", "scale_columns": "ij,j->ij",
            "channels_last": "bchw->bhwc", "batched_outer": "bi,bj->ij", "batched_trace": "bii->",
            "attention_output": "bhqk,bhkd->hqd", "quadratic_forms": "bi,ij,bj->"}


@mutant(EQUATIONS, hint=NO_ARROW_HINT)
def equations_implicit_where_it_happens_to_work():
    return {"matmul_bt": "ik,jk"}


@mutant(EQUATIONS, hint="the letters after '->' name the input axes in their new order: "
        "permute(0, 2, 3, 1) puts axes b, h, w, c; you wrote the inverse permutation")
def equations_inverse_permutation():
    return {"matmul_bt": "ik,jk->ij", "row_dots": "ij,ij->i", "frobenius": "ij,ij->", "scale_columns": "ij,j->ij",
            "channels_last": "bchw->bwch"}


@mutant(EQUATIONS, hint="the trace adds only the diagonal: write the same letter twice "
        "('bii'); different letters ('bij') add every entry of each matrix")
def equations_trace_sums_everything():
    return {"matmul_bt": "ik,jk->ij", "row_dots": "ij,ij->i", "frobenius": "ij,ij->", "scale_columns": "ij,j->ij",
            "channels_last": "bchw->bhwc", "batched_outer": "bi,bj->bij", "batched_trace": "bij->b"}


@mutant(EQUATIONS, hint="multiplying column j by v[j] sums nothing: keep both letters, "
        "'ij,j->ij' ('ij,j->i' is the matrix-vector product)")
def equations_scale_is_matvec():
    return {"matmul_bt": "ik,jk->ij", "row_dots": "ij,ij->i", "frobenius": "ij,ij->", "scale_columns": "ij,j->i"}


# ---------------------------------------------------------------- output_shape


def _as_output_shape(parse, equation, *shapes):
    """output_shape(equation, *shapes) from the parser's bound equation."""
    return tuple(parse(equation, shapes).output_shape)


def _shaping(name, *edits, hint):
    patched(OUTPUT_SHAPE, name, parse_equation, *edits, hint=hint, adapt=_as_output_shape)


ALL_INPUT_LETTERS = "list(dict.fromkeys(c for labels in input_labels for c in labels))"

_shaping("output_shape_order_of_appearance",
         (_output_labels, "labels = list(output.letters)", f"labels = [c for c in {ALL_INPUT_LETTERS} if c in output.letters]"),
         hint="the result's axes follow the letters after '->' in the "
         "order written there, not the order in which they first appear in the inputs")

_shaping("output_shape_reversed", (_output_labels, "labels = list(output.letters)", "labels = list(reversed(output.letters))"),
         hint="the result's axes follow the letters after '->' from left to right, the first letter "
         "giving the first axis; you reversed them")

_shaping("output_shape_all_letters", (_output_labels, "labels = list(output.letters)", f"labels = {ALL_INPUT_LETTERS}"),
         hint="letters left out after '->' are summed over: they have no axis in the result")

_shaping("output_shape_sorted", (_output_labels, "labels = list(output.letters)", "labels = sorted(output.letters)"),
         hint="keep the letters after '->' in the order written; sorting them gives the shape of another equation")

_shaping("output_shape_implicit", (parse_terms, "if arrow else None", "if False else None"),
         hint="'->' is written, so the result's axes are exactly the "
         "letters after it; the implicit rule (letters used once) applies only without '->'")

_shaping("output_shape_ignores_case", ("terms, output = parse_terms(equation)", "terms, output = parse_terms(equation.lower())"),
         hint="'B' and 'b' are two different letters: do not change the case of the equation (no .lower())")


@mutant(OUTPUT_SHAPE, hint="torch.ops.aten.einsum is torch.einsum under another name, "
        "and the check watches the operation, not the name: read each letter's size from the shapes instead")
def output_shape_by_aten_einsum(equation, *shapes):
    return tuple(torch.ops.aten.einsum(equation, [torch.zeros(s) for s in shapes]).shape)


_KEPT = {"einsum": np.einsum}  # kept before the check ran, under a name of its own


@mutant(OUTPUT_SHAPE, hint="numpy.einsum is forbidden under any name, even kept in a dict: "
        "read each letter's size from the shapes instead")
def output_shape_by_kept_numpy_einsum(equation, *shapes):
    return tuple(int(n) for n in _KEPT["einsum"](equation, *[np.zeros(s) for s in shapes]).shape)


# ---------------------------------------------------------------- attention


@mutant(ATTENTION, hint="divide the scores by sqrt(d), the square root of the "
        "feature size q.shape[-1], before the softmax")
def attention_unscaled(q, k, v):
    return torch.einsum("bhqk,bhkd->bhqd", torch.softmax(torch.einsum("bhqd,bhkd->bhqk", q, k), dim=-1), v)


@mutant(ATTENTION, hint="the scale is 1 / sqrt(d), not 1 / d")
def attention_scaled_by_d(q, k, v):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / q.shape[-1]
    return torch.einsum("bhqk,bhkd->bhqd", torch.softmax(scores, dim=-1), v)


@mutant(ATTENTION, hint="scale by the square root of the feature size d = q.shape[-1], "
        "not of the number of keys k.shape[-2]")
def attention_scaled_by_keys(q, k, v):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(k.shape[-2])
    return torch.einsum("bhqk,bhkd->bhqd", torch.softmax(scores, dim=-1), v)


@mutant(ATTENTION, hint="the softmax runs over the keys (the last axis of the scores "
        "'bhqk'): each query's weights sum to 1; you normalised over the queries")
def attention_softmax_over_queries(q, k, v):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    return torch.einsum("bhqk,bhkd->bhqd", torch.softmax(scores, dim=-2), v)


@mutant(ATTENTION, hint="turn the scores into weights with a softmax over the keys "
        "before multiplying by v")
def attention_without_softmax(q, k, v):
    return torch.einsum("bhqk,bhkd->bhqd", torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1]), v)


@mutant(ATTENTION, hint="divide the scores by sqrt(d); you multiplied by it")
def attention_multiplied_by_sqrt_d(q, k, v):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * math.sqrt(q.shape[-1])
    return torch.einsum("bhqk,bhkd->bhqd", torch.softmax(scores, dim=-1), v)


@mutant(ATTENTION, hint="the softmax runs over the keys, the last axis of the scores "
        "(dim=-1); you normalised over another axis (the heads or the batch)")
def attention_softmax_over_heads(q, k, v):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    return torch.einsum("bhqk,bhkd->bhqd", torch.softmax(scores, dim=1), v)


@mutant("nb01_einsum_notation.attention", hint="compute both products as einsum calls, as the exercise asks: "
        "torch.bmm on reshaped tensors gives the numbers, but not with einsum")
def attention_with_bmm(q, k, v):
    b, h, n, d = q.shape
    scores = torch.bmm(q.reshape(b * h, n, d), k.reshape(b * h, -1, d).transpose(1, 2)) / math.sqrt(d)
    weights = torch.softmax(scores, dim=-1)
    return torch.bmm(weights, v.reshape(b * h, -1, v.shape[-1])).reshape(b, h, n, -1)


@mutant("nb01_einsum_notation.attention", hint="compute both products as einsum calls, as the exercise asks: "
        "multiplying broadcast tensors and summing gives the numbers, but not with einsum")
def attention_by_broadcasting(q, k, v):
    scores = (q[..., :, None, :] * k[..., None, :, :]).sum(-1) / math.sqrt(q.shape[-1])
    return torch.einsum("bhqk,bhkd->bhqd", torch.softmax(scores, dim=-1), v)


_SDPA = {"attention": torch.nn.functional.scaled_dot_product_attention}  # kept before the check ran


@mutant("nb01_einsum_notation.attention", hint="scaled_dot_product_attention is forbidden under any name, even "
        "kept in a dict: the check watches the operation; write the two products with einsum")
def attention_by_kept_reference(q, k, v):
    return _SDPA["attention"](q, k, v)


@mutant("nb01_einsum_notation.attention", hint="torch.ops.aten.matmul is @ under another name: write the second "
        "product with einsum too, 'bhqk,bhkd->bhqd'")
def attention_by_aten_matmul(q, k, v):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    torch.einsum("bhqk->bhqk", scores)
    return torch.ops.aten.matmul(torch.softmax(scores, dim=-1), v)


@mutant("nb01_einsum_notation.attention", hint="numpy is not allowed in this exercise: use torch.einsum or "
        "tc.einsum on the tensors themselves, not numpy.einsum on .numpy() copies")
def attention_through_numpy(q, k, v):
    scores = np.einsum("bhqd,bhkd->bhqk", q.numpy(), k.numpy()) / math.sqrt(q.shape[-1])
    weights = torch.softmax(torch.from_numpy(scores), dim=-1)
    return torch.from_numpy(np.einsum("bhqk,bhkd->bhqd", weights.numpy(), v.numpy()))


@mutant("nb01_einsum_notation.output_shape", hint="contract_path is forbidden here: its report holds the output's "
        "letters and every letter's length, the answer itself; read each letter's size from the shapes instead")
def output_shape_by_contract_path(equation, *shapes):
    _, info = opt_einsum.contract_path(equation, *shapes, shapes=True)
    return tuple(info.size_dict[c] for c in info.output_subscript)
