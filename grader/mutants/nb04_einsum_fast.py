"""Known-wrong answers to notebook 04's exercises (lowering, FLOP count, greedy path), each with
the hint its author needs.

No mutant holds a right answer: each mistake is a patch of the library's own stage
(``grader.mutants.patched``): contract_pair's of ``plan_pair``/``run_product`` (made to use one bmm
for every pair, as the exercise asks), path_flops' of ``walk``/``contraction_step``/``flop_count``,
greedy_path's of the library's greedy search (made to sum a label that every operand holds like any
other, as the statement's rule does). The rest are small standalone wrong answers (left to right, a
forbidden route to the result).
"""

import numpy as np
import opt_einsum
import opt_einsum.paths
import torch

import tensorcraft.einstein.path
from tensorcraft.einstein.lower import contract_pair, plan_pair, run_product
from tensorcraft.einstein.path import (contraction_step, flop_count, greedy_path, path_flops, positions_from_ids,
                                      walk)

from . import mutant, patched

# ---------------------------------------------------------------- contract_pair


PAIR = "nb04_einsum_fast.contract_pair"
# The library picks the cheapest product for a pair (an elementwise product when nothing is summed, a dot
# product, a matrix product without a batch); the exercise asks for one torch.bmm every time: each mutant's
# edits start with these, which make the library's plan a (batch, left, summed) @ (batch, summed, right) bmm
ONE_BMM = ((plan_pair, "if not summed:", "if False:"), (plan_pair, "elif not left and not right:", "elif False:"),
           (plan_pair, "elif not batch:", "elif False:"))
OUT_PERMUTE = "out_permute=None if result is None else _permutation(natural, result)"


def _pair_mutant(name, *edits, hint):
    patched(PAIR, name, contract_pair, *ONE_BMM, *edits, hint=hint)


_pair_mutant("contract_pair_without_final_permute", (plan_pair, OUT_PERMUTE, "out_permute=None"),
             hint="the product comes out in the order batch + left + right; "
             "when out_labels asks for another order, finish with a permute to out_labels (here it is missing)")

_pair_mutant("contract_pair_final_reshape_instead_of_permute", (plan_pair, OUT_PERMUTE, "out_permute=None"),
             (plan_pair, "unflat = tuple(size[l] for l in natural)", "unflat = tuple(size[l] for l in result)"),
             hint="a reshape to the output's shape does not reorder dimensions: "
             "it reads the same memory in another shape; reshape to the sizes of batch + left + right, then permute")

_pair_mutant("contract_pair_reshape_without_permute",
             (plan_pair, "a_permute=_permutation(a.labels, batch + left + summed)", "a_permute=None"),
             (plan_pair, "b_permute=_permutation(b.labels, batch + summed + right)", "b_permute=None"),
             (plan_pair, "a_reshape=tuple(size[l] for l in batch + left + summed) != a_matrix", "a_reshape=True"),
             (plan_pair, "b_reshape=tuple(size[l] for l in batch + summed + right) != b_matrix", "b_reshape=True"),
             hint="reshape keeps the order of the dimensions: to make a "
             "(batch, left, summed) matrix, permute the dimensions into that order first, then reshape")

_pair_mutant("contract_pair_sums_batch_labels",
             (plan_pair, "batch = tuple(l for l in a.labels if l in b.labels and l in keep)", "batch = ()"),
             (plan_pair, "summed = tuple(l for l in a.labels if l in b.labels and l not in keep)",
              "summed = tuple(l for l in a.labels if l in b.labels)"),
             (plan_pair, OUT_PERMUTE, "out_permute=_permutation(natural, tuple(l for l in result if l in natural))"),
             hint="a label both operands have is summed only when the output "
             "does not have it; a label in a, b and the output is a batch label: it goes first, into bmm's batch")

_pair_mutant("contract_pair_b_as_right_by_summed",
             (plan_pair, "b_permute=_permutation(b.labels, batch + summed + right)",
              "b_permute=_permutation(b.labels, batch + right + summed)"),
             (plan_pair, "b_reshape=tuple(size[l] for l in batch + summed + right) != b_matrix", "b_reshape=True"),
             hint="b's matrix must be (batch, summed, right): the summed labels "
             "are the rows of b; you laid it out as (batch, right, summed)")

_pair_mutant("contract_pair_inverse_final_permute",
             (plan_pair, OUT_PERMUTE, "out_permute=None if result is None else _permutation(result, natural)"),
             hint="the final permute lists, for each position of the output, the "
             "dimension it comes from: [natural.index(l) for l in out_labels]; you built the inverse permutation "
             "(it agrees only when the permutation swaps two dimensions)")

_pair_mutant("contract_pair_by_broadcasting", (run_product, "out = _matmul(a, b)",
                                                 "out = _sum(a.unsqueeze(-1) * b.unsqueeze(-3), (-2,))"),
             hint="compute the contraction with one torch.bmm on the permuted and "
             "reshaped operands, as the exercise asks: multiplying broadcast tensors and summing gives the numbers "
             "without the lowering")

_pair_mutant("pair_shared_labels_in_each_operands_order",
             (plan_pair, "b_permute=_permutation(b.labels, batch + summed + right)",
              "b_permute=_permutation(b.labels, tuple(l for l in b.labels if l in batch) "
              "+ tuple(l for l in b.labels if l in summed) + right)"),
             (plan_pair, "b_reshape=tuple(size[l] for l in batch + summed + right) != b_matrix", "b_reshape=True"),
             (plan_pair, "natural = batch + left + right", "natural = tuple(l for l in b.labels if l in batch) + left + right"),
             hint="put the shared labels of both operands in ONE order (a's, say): "
             "with 'ijk,kjl' a's summed axes are (j, k) and b's must be permuted to (j, k) too, not left in b's order (k, j)")

_pair_mutant("pair_reshape_with_minus_one",
             (plan_pair, '"matmul", (nb, m, k), (nb, k, n), (nb, m, n)', '"matmul", (nb, -1, k), (nb, k, -1), (nb, m, n)'),
             hint="a label may have size 0 (an empty tensor): reshape with every size "
             "computed (math.prod of each group), never -1, which cannot be inferred when the tensor has no elements")


@mutant(PAIR, hint="torch.ops.aten.tensordot is torch.tensordot under another name, and "
        "the check watches the operation: permute, reshape and make one torch.bmm yourself")
def contract_by_aten_tensordot(a, a_labels, b, b_labels, out_labels):
    shared = [c for c in a_labels if c in b_labels and c not in out_labels]
    product = torch.ops.aten.tensordot(a, b, [a_labels.index(c) for c in shared], [b_labels.index(c) for c in shared])
    torch.bmm(torch.ones(1, 1, 1), torch.ones(1, 1, 1))  # the one matrix product the check counts
    kept = [c for c in a_labels if c not in shared] + [c for c in b_labels if c not in shared]
    return product.permute([kept.index(c) for c in out_labels])


@mutant(PAIR, hint="numpy is not allowed in this exercise: one torch.bmm on the "
        "permuted and reshaped tensors, not numpy.einsum on .numpy() copies")
def contract_through_numpy(a, a_labels, b, b_labels, out_labels):
    torch.bmm(torch.ones(1, 1, 1), torch.ones(1, 1, 1))
    equation = "".join(a_labels) + "," + "".join(b_labels) + "->" + "".join(out_labels)
    return torch.from_numpy(np.einsum(equation, a.numpy(), b.numpy()))


# ---------------------------------------------------------------- path_flops: patches of the library's counter

FLOPS = "nb04_einsum_fast.path_flops"
SUMS = "flop_count(touched, bool(removed), len(positions), sizes)"
NEXT_LIST = "sets = [s for p, s in enumerate(sets) if p not in positions] + [step.result]"

patched(FLOPS, "path_flops_without_the_addition", path_flops, (flop_count, " + (1 if inner else 0)", ""),
        hint="opt_einsum counts an addition too: a step that sums a label "
        "costs size * (max(1, k - 1) + 1), so a matrix product of n x m x p costs 2 * n * m * p, not n * m * p")

patched(FLOPS, "path_flops_returns_a_float", path_flops,
        ("return sum(step.flops for step in walk(sets, path, output, sizes))",
         "return float(sum(step.flops for step in walk(sets, path, output, sizes)))"),
        hint="return the total as a Python int: / and math.pow make floats")

patched(FLOPS, "path_flops_removed_by_output_only", path_flops,
        (contraction_step, SUMS, SUMS.replace("bool(removed)", "bool(touched - output)")),
        hint="a label is summed at a step only when neither the output nor "
        "any other remaining operand has it; you compared with the output alone")

patched(FLOPS, "path_flops_always_adds", path_flops, (contraction_step, SUMS, SUMS.replace("bool(removed)", "True")),
        hint="only a step that sums a label pays for the addition: an outer "
        "or elementwise product (nothing summed) costs size * max(1, k - 1), without the + 1")

patched(FLOPS, "path_flops_counts_the_result_only", path_flops,
        (contraction_step, SUMS, SUMS.replace("flop_count(touched", "flop_count(result")),
        hint="the cost counts every point of the step's index space, the "
        "summed labels included: multiply the sizes of all the labels the operands have, not only the result's")

patched(FLOPS, "path_flops_k_multiplications", path_flops, (flop_count, "max(1, num_terms - 1)", "num_terms"),
        hint="multiplying k operands takes k - 1 multiplications per point "
        "(one for a pair), not k: the count is max(1, k - 1), plus 1 when the step sums a label")

patched(FLOPS, "path_flops_original_positions", path_flops, (walk, NEXT_LIST, "pass"),
        (walk, "if len(sets) != 1:", "if False:"),
        hint="the positions of a step refer to the current list: after each "
        "step, remove the operands it took and append the result at the end (you kept the original list)")

patched(FLOPS, "path_flops_result_in_front", path_flops,
        (walk, NEXT_LIST, "sets = [step.result] + [s for p, s in enumerate(sets) if p not in positions]"),
        hint="the result of a step goes to the end of the list, not the front "
        "(opt_einsum's convention, which the paths use)")


# ---------------------------------------------------------------- greedy_path


GREEDY = "nb04_einsum_fast.greedy_path"
SCORE = "size(result) - size(a) - size(b), alive[second]"
RESULT = "return ((a | b) & keep) | (both & three_or_more) | ((a ^ b) & two_or_more)"
# The library keeps a label that every operand holds until the end (it can make no pair a candidate sooner);
# the statement's rule sums it like any other: each mutant's edits start with this one, as a learner's scan reads
EVERY_LABEL_SUMMED = ("keep = frozenset(output).union(frozenset.intersection(*map(frozenset, sets)))",
                      "keep = frozenset(output)")


def _greedy_mutant(name, *edits, hint):
    patched(GREEDY, name, greedy_path, EVERY_LABEL_SUMMED, *edits, hint=hint)


_greedy_mutant("greedy_results_keep_summed_labels", (RESULT, "return a | b"),
        hint="a result keeps only the labels that the output or another "
        "remaining operand has; the labels the pair sums are gone, so they no longer make later pairs share a "
        "label, nor count in the sizes")

_greedy_mutant("greedy_results_drop_shared_labels",
        (RESULT, "return (a ^ b) | (both & keep)"),
        hint="a label the pair shares stays in the result while another "
        "remaining operand has it (a label on three operands is summed only when the last of them is "
        "contracted): the result keeps the labels that the output or any other remaining operand has")

_greedy_mutant("greedy_smallest_inputs", (SCORE, "size(a) + size(b), alive[second]"),
        hint="choose the pair by its result, not by its inputs: the smallest "
        "size(result) - size(a) - size(b); two small inputs can make a huge result (an outer product)")

_greedy_mutant("greedy_original_numbers",
        ("return positions_from_ids(steps, len(sets))", "return steps"),
        hint="positions refer to the current list: after a step the two "
        "operands are gone and the result is appended at the end; you returned the operands' original numbers")

_greedy_mutant("greedy_result_in_front",
        (positions_from_ids, "tuple(bisect.bisect_left(alive, i) for i in step)", "tuple(alive.index(i) for i in step)"),
        (positions_from_ids, "alive.append(n + k)", "alive.insert(0, n + k)"),
        hint="the result of a step is appended at the end of the list "
        "(as tc.einsum and opt_einsum read a path), not put in front")

# every pair is a candidate: the pairs of each operand with every other, not only with those it shares a label with
_greedy_mutant("greedy_any_pair",
        ("    for group in holders.values():\n        by_age = sorted(group, key=alive.__getitem__)",
         "    for group in [set(alive)]:\n        by_age = sorted(group, key=alive.__getitem__)"),
        ("push_best(result, neighbours)", "push_best(result, set(alive) - {result})"),
        hint="consider only pairs that share a label to sum: a pair that "
        "shares nothing is an outer product, whose result is as large as both inputs multiplied; leave those "
        "for the end")

_greedy_mutant("greedy_largest_score", (SCORE, "-(size(result) - size(a) - size(b)), alive[second]"),
        hint="the score that frees the most memory is size(result) - size(a) "
        "- size(b), the smallest first; you took the largest")


@mutant(GREEDY, hint="a greedy search looks at the pairs at each step; contracting "
        "left to right ignores the sizes entirely")
def greedy_left_to_right(inputs, output, sizes):
    return [(0, 1)] * (len(inputs) - 1)


_greedy_mutant("greedy_smallest_result", (SCORE, "size(result), alive[second]"),
        hint="score a pair by the memory it frees, size(result) - size(a) - "
        "size(b), not by size(result) alone: contracting two large inputs into a small result frees the most")


_KEPT = {"contract_path": opt_einsum.contract_path,  # kept before the check ran, under names of their own
         "greedy": opt_einsum.paths.greedy}


@mutant(GREEDY, hint="opt_einsum's greedy search is forbidden under any name, even kept in "
        "a dict: the check trips on the steps it takes; write the rule of the statement yourself")
def greedy_by_kept_opt_einsum(inputs, output, sizes):
    return _KEPT["greedy"]([set(t) for t in inputs], set(output), dict(sizes))


@mutant(FLOPS, hint="opt_einsum.contract_path is forbidden under any name, even kept in "
        "a dict (it counts with opt_einsum.helpers.flop_count, which is forbidden too): count the FLOPs yourself")
def path_flops_by_kept_contract_path(inputs, output, sizes, path):
    equation = ",".join("".join(sorted(t)) for t in inputs) + "->" + "".join(sorted(output))
    shapes = [tuple(sizes[c] for c in sorted(t)) for t in inputs]
    return int(_KEPT["contract_path"](equation, *shapes, shapes=True, optimize=list(path))[1].opt_cost)


# the operands left are multiplied in the order of the list (their ids), not by size
_greedy_mutant("greedy_fallback_first_two",
        ("rest = [(size(labels & keep), n, labels) for labels, n in alive.items()]",
         "rest = [(n, n, labels) for labels, n in alive.items()]"),
        ("heapq.heappushpop(rest, (size(labels), next(ids), labels))",
         "heapq.heappushpop(rest, ((n := next(ids)), n, labels))"),
        hint="when no pair shares a label to sum, take the two operands with the "
        "smallest sizes (rule 2): your path took another pair there")


_KEPT_SEARCHES = {"dp": opt_einsum.paths.dynamic_programming,
                  "optimal": tensorcraft.einstein.path.optimal_path}  # kept before the check ran


@mutant(GREEDY, hint="another path search (opt_einsum's dynamic programming) is forbidden "
        "under any name, even kept in a dict: it finds a cheap path, but not by the greedy rule you are to write")
def greedy_by_kept_dynamic_programming(inputs, output, sizes):
    return _KEPT_SEARCHES["dp"]([set(t) for t in inputs], set(output), dict(sizes))


@mutant(GREEDY, hint="the library's optimal_path is forbidden under any name, even kept in "
        "a dict: it finds a cheap path, but not by the greedy rule you are to write")
def greedy_by_kept_optimal_path(inputs, output, sizes):
    return _KEPT_SEARCHES["optimal"]([frozenset(t) for t in inputs], frozenset(output), dict(sizes))
