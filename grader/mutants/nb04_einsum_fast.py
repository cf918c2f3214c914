"""Known-wrong answers to notebook 04's exercises (lowering, FLOP count, greedy path), each with
the hint its author needs."""
import itertools
import math

import numpy as np
import opt_einsum
import opt_einsum.paths
import torch

import tensorcraft.einstein.path

from . import mutant, one_mistake

# ---------------------------------------------------------------- contract_pair


def _groups(a_labels, b_labels, out_labels):
    batch = [l for l in a_labels if l in b_labels and l in out_labels]
    summed = [l for l in a_labels if l in b_labels and l not in out_labels]
    left = [l for l in a_labels if l not in b_labels]
    right = [l for l in b_labels if l not in a_labels]
    return batch, summed, left, right


def _sizes(a, a_labels, b, b_labels):
    return dict(zip(a_labels, a.shape)) | dict(zip(b_labels, b.shape))


def _prod(size, labels):
    return math.prod(size[l] for l in labels)


@one_mistake
def _as_matrices(a, a_labels, b, b_labels, out_labels, *, own_orders=False):
    batch, summed, left, right = _groups(a_labels, b_labels, out_labels)
    size = _sizes(a, a_labels, b, b_labels)
    nb, m, k, n = (_prod(size, g) for g in (batch, left, summed, right))
    a3 = a.permute([list(a_labels).index(l) for l in batch + left + summed]).reshape(nb, m, k)
    if own_orders:  # b's shared labels in b's own order, not in a's
        batch, summed = ([l for l in b_labels if l in group] for group in (batch, summed))
    b3 = b.permute([list(b_labels).index(l) for l in batch + summed + right]).reshape(nb, k, n)
    return a3, b3, batch + left + right, size


@mutant("nb04_einsum_fast.contract_pair", hint="the product comes out in the order batch + left + right; "
        "when out_labels asks for another order, finish with a permute to out_labels (here it is missing)")
def contract_pair_without_final_permute(a, a_labels, b, b_labels, out_labels):
    a3, b3, natural, size = _as_matrices(a, a_labels, b, b_labels, out_labels)
    return torch.bmm(a3, b3).reshape([size[l] for l in natural])


@mutant("nb04_einsum_fast.contract_pair", hint="a reshape to the output's shape does not reorder dimensions: "
        "it reads the same memory in another shape; reshape to the sizes of batch + left + right, then permute")
def contract_pair_final_reshape_instead_of_permute(a, a_labels, b, b_labels, out_labels):
    a3, b3, natural, size = _as_matrices(a, a_labels, b, b_labels, out_labels)
    return torch.bmm(a3, b3).reshape([size[l] for l in out_labels])


@mutant("nb04_einsum_fast.contract_pair", hint="reshape keeps the order of the dimensions: to make a "
        "(batch, left, summed) matrix, permute the dimensions into that order first, then reshape")
def contract_pair_reshape_without_permute(a, a_labels, b, b_labels, out_labels):
    batch, summed, left, right = _groups(a_labels, b_labels, out_labels)
    size = _sizes(a, a_labels, b, b_labels)
    nb, m, k, n = (_prod(size, g) for g in (batch, left, summed, right))
    natural = batch + left + right
    out = torch.bmm(a.reshape(nb, m, k), b.reshape(nb, k, n)).reshape([size[l] for l in natural])
    return out.permute([natural.index(l) for l in out_labels])


@mutant("nb04_einsum_fast.contract_pair", hint="a label both operands have is summed only when the output "
        "does not have it; a label in a, b and the output is a batch label: it goes first, into bmm's batch")
def contract_pair_sums_batch_labels(a, a_labels, b, b_labels, out_labels):
    shared = [l for l in a_labels if l in b_labels]
    left = [l for l in a_labels if l not in b_labels]
    right = [l for l in b_labels if l not in a_labels]
    size = _sizes(a, a_labels, b, b_labels)
    a2 = a.permute([list(a_labels).index(l) for l in left + shared]).reshape(_prod(size, left), _prod(size, shared))
    b2 = b.permute([list(b_labels).index(l) for l in shared + right]).reshape(_prod(size, shared), _prod(size, right))
    natural = left + right
    out = (a2 @ b2).reshape([size[l] for l in natural])
    wanted = [l for l in out_labels if l in natural]
    return out.permute([natural.index(l) for l in wanted])


@mutant("nb04_einsum_fast.contract_pair", hint="b's matrix must be (batch, summed, right): the summed labels "
        "are the rows of b; you laid it out as (batch, right, summed)")
def contract_pair_b_as_right_by_summed(a, a_labels, b, b_labels, out_labels):
    batch, summed, left, right = _groups(a_labels, b_labels, out_labels)
    size = _sizes(a, a_labels, b, b_labels)
    nb, m, k, n = (_prod(size, g) for g in (batch, left, summed, right))
    a3 = a.permute([list(a_labels).index(l) for l in batch + left + summed]).reshape(nb, m, k)
    b3 = b.permute([list(b_labels).index(l) for l in batch + right + summed]).reshape(nb, k, n)
    natural = batch + left + right
    out = torch.bmm(a3, b3).reshape([size[l] for l in natural])
    return out.permute([natural.index(l) for l in out_labels])


@mutant("nb04_einsum_fast.contract_pair", hint="the final permute lists, for each position of the output, the "
        "dimension it comes from: [natural.index(l) for l in out_labels]; you built the inverse permutation "
        "(it agrees only when the permutation swaps two dimensions)")
def contract_pair_inverse_final_permute(a, a_labels, b, b_labels, out_labels):
    a3, b3, natural, size = _as_matrices(a, a_labels, b, b_labels, out_labels)
    out = torch.bmm(a3, b3).reshape([size[l] for l in natural])
    return out.permute([list(out_labels).index(l) for l in natural])


@mutant("nb04_einsum_fast.contract_pair", hint="compute the contraction with one torch.bmm on the permuted and "
        "reshaped operands, as the exercise asks: multiplying broadcast tensors and summing gives the numbers "
        "without the lowering")
def contract_pair_by_broadcasting(a, a_labels, b, b_labels, out_labels):
    labels = list(dict.fromkeys([*a_labels, *b_labels]))

    def spread(t, own):  # t's dimensions in the order of `labels`, with size 1 for the labels it lacks
        mine = [l for l in labels if l in own]
        t = t.permute([list(own).index(l) for l in mine])
        return t.reshape([t.shape[mine.index(l)] if l in own else 1 for l in labels])

    product = spread(a, a_labels) * spread(b, b_labels)
    summed = [n for n, l in enumerate(labels) if l not in out_labels]
    if summed:
        product = product.sum(dim=summed)
    kept = [l for l in labels if l in out_labels]
    return product.permute([kept.index(l) for l in out_labels])


@mutant("nb04_einsum_fast.contract_pair", hint="put the shared labels of both operands in ONE order (a's, say): "
        "with 'ijk,kjl' a's summed axes are (j, k) and b's must be permuted to (j, k) too, not left in b's order (k, j)")
def pair_shared_labels_in_each_operands_order(a, a_labels, b, b_labels, out_labels):
    a3, b3, natural, size = _as_matrices(a, a_labels, b, b_labels, out_labels, own_orders=True)
    out = torch.bmm(a3, b3).reshape([size[l] for l in natural])
    return out.permute([natural.index(l) for l in out_labels])


@mutant("nb04_einsum_fast.contract_pair", hint="a label may have size 0 (an empty tensor): reshape with every size "
        "computed (math.prod of each group), never -1, which cannot be inferred when the tensor has no elements")
def pair_reshape_with_minus_one(a, a_labels, b, b_labels, out_labels):
    batch, summed, left, right = _groups(a_labels, b_labels, out_labels)
    size = _sizes(a, a_labels, b, b_labels)
    nb, k = _prod(size, batch), _prod(size, summed)
    a3 = a.permute([list(a_labels).index(l) for l in batch + left + summed]).reshape(nb, -1, k)
    b3 = b.permute([list(b_labels).index(l) for l in batch + summed + right]).reshape(nb, k, -1)
    natural = batch + left + right
    out = torch.bmm(a3, b3).reshape([size[l] for l in natural])
    return out.permute([natural.index(l) for l in out_labels])


# ---------------------------------------------------------------- path_flops


def _walk(inputs, output, path):
    """(labels touched, summed anything?, number of operands) per step, following the path."""
    current = [set(s) for s in inputs]
    for step in path:
        taken = [current[p] for p in step]
        rest = [s for p, s in enumerate(current) if p not in step]
        touched = set().union(*taken)
        result = touched & set(output).union(*rest)
        yield touched, result, len(step)
        current = rest + [result]


@mutant("nb04_einsum_fast.contract_pair", hint="torch.ops.aten.tensordot is torch.tensordot under another name, and "
        "the check watches the operation: permute, reshape and make one torch.bmm yourself")
def contract_by_aten_tensordot(a, a_labels, b, b_labels, out_labels):
    shared = [c for c in a_labels if c in b_labels and c not in out_labels]
    product = torch.ops.aten.tensordot(a, b, [a_labels.index(c) for c in shared], [b_labels.index(c) for c in shared])
    torch.bmm(torch.ones(1, 1, 1), torch.ones(1, 1, 1))  # the one matrix product the check counts
    kept = [c for c in a_labels if c not in shared] + [c for c in b_labels if c not in shared]
    return product.permute([kept.index(c) for c in out_labels])


@mutant("nb04_einsum_fast.contract_pair", hint="numpy is not allowed in this exercise: one torch.bmm on the "
        "permuted and reshaped tensors, not numpy.einsum on .numpy() copies")
def contract_through_numpy(a, a_labels, b, b_labels, out_labels):
    torch.bmm(torch.ones(1, 1, 1), torch.ones(1, 1, 1))
    equation = "".join(a_labels) + "," + "".join(b_labels) + "->" + "".join(out_labels)
    return torch.from_numpy(np.einsum(equation, a.numpy(), b.numpy()))


@mutant("nb04_einsum_fast.path_flops", hint="opt_einsum counts an addition too: a step that sums a label "
        "costs size * (max(1, k - 1) + 1), so a matrix product of n x m x p costs 2 * n * m * p, not n * m * p")
def path_flops_without_the_addition(inputs, output, sizes, path):
    return sum(math.prod(sizes[l] for l in touched) * max(1, k - 1) for touched, _, k in _walk(inputs, output, path))


@mutant("nb04_einsum_fast.path_flops", hint="return the total as a Python int: / and math.pow make floats")
def path_flops_returns_a_float(inputs, output, sizes, path):
    return float(sum(math.prod(sizes[l] for l in touched) * (max(1, k - 1) + (1 if touched - result else 0))
                     for touched, result, k in _walk(inputs, output, path)))


@mutant("nb04_einsum_fast.path_flops", hint="a label is summed at a step only when neither the output nor "
        "any other remaining operand has it; you compared with the output alone")
def path_flops_removed_by_output_only(inputs, output, sizes, path):
    total = 0
    for touched, _result, k in _walk(inputs, output, path):
        total += math.prod(sizes[l] for l in touched) * (max(1, k - 1) + (1 if touched - set(output) else 0))
    return total


@mutant("nb04_einsum_fast.path_flops", hint="only a step that sums a label pays for the addition: an outer "
        "or elementwise product (nothing summed) costs size * max(1, k - 1), without the + 1")
def path_flops_always_adds(inputs, output, sizes, path):
    return sum(math.prod(sizes[l] for l in touched) * (max(1, k - 1) + 1) for touched, _, k in _walk(inputs, output, path))


@mutant("nb04_einsum_fast.path_flops", hint="the cost counts every point of the step's index space, the "
        "summed labels included: multiply the sizes of all the labels the operands have, not only the result's")
def path_flops_counts_the_result_only(inputs, output, sizes, path):
    return sum(math.prod(sizes[l] for l in result) * (max(1, k - 1) + (1 if touched - result else 0))
               for touched, result, k in _walk(inputs, output, path))


@mutant("nb04_einsum_fast.path_flops", hint="multiplying k operands takes k - 1 multiplications per point "
        "(one for a pair), not k: the count is max(1, k - 1), plus 1 when the step sums a label")
def path_flops_k_multiplications(inputs, output, sizes, path):
    return sum(math.prod(sizes[l] for l in touched) * (k + (1 if touched - result else 0))
               for touched, result, k in _walk(inputs, output, path))


@mutant("nb04_einsum_fast.path_flops", hint="the positions of a step refer to the current list: after each "
        "step, remove the operands it took and append the result at the end (you kept the original list)")
def path_flops_original_positions(inputs, output, sizes, path):
    total = 0
    operands = [set(s) for s in inputs]
    for step in path:
        taken = [operands[p] for p in step]
        touched = set().union(*taken)
        rest = [s for p, s in enumerate(operands) if p not in step]
        summed = touched - set(output).union(*rest)
        total += math.prod(sizes[l] for l in touched) * (max(1, len(step) - 1) + (1 if summed else 0))
    return total


@mutant("nb04_einsum_fast.path_flops", hint="the result of a step goes to the end of the list, not the front "
        "(opt_einsum's convention, which the paths use)")
def path_flops_result_in_front(inputs, output, sizes, path):
    current = [set(s) for s in inputs]
    total = 0
    for step in path:
        step = [p % len(current) for p in step]
        taken = [current[p] for p in step]
        rest = [s for p, s in enumerate(current) if p not in step]
        touched = set().union(*taken)
        result = touched & set(output).union(*rest)
        total += math.prod(sizes[l] for l in touched) * (max(1, len(step) - 1) + (1 if touched - result else 0))
        current = [result] + rest
    return total


# ---------------------------------------------------------------- greedy_path


@one_mistake
def _greedy(inputs, output, sizes, score, *, shared_only=True, result_to_front=False, original_positions=False,
            keep_everything=False, drop_shared=False, fallback="smallest"):
    current = [set(s) for s in inputs]
    output = set(output)
    ids = list(range(len(current)))

    def size(labels):
        return math.prod(sizes[l] for l in labels)

    def result_of(i, j):
        if keep_everything:
            return current[i] | current[j]
        if drop_shared:  # every label the pair shares is gone, unless the output has it
            return (current[i] ^ current[j]) | (current[i] & current[j] & output)
        rest = [s for p, s in enumerate(current) if p not in (i, j)]
        return (current[i] | current[j]) & output.union(*rest)

    path, next_id = [], len(current)
    while len(current) > 1:
        best = None
        for i, j in itertools.combinations(range(len(current)), 2):
            if shared_only and not (current[i] & current[j]) - output:
                continue
            key = (score(size(result_of(i, j)), size(current[i]), size(current[j])), j, i)
            if best is None or key < best:
                best = key
        if best is None and fallback == "first two":
            i, j = 0, 1
        elif best is None:
            i, j = sorted(sorted(range(len(current)), key=lambda p: size(current[p]))[:2])
        else:
            _, j, i = best
        result = result_of(i, j)
        rest = [s for p, s in enumerate(current) if p not in (i, j)]
        path.append((ids[i], ids[j]) if original_positions else (i, j))
        current = [result] + rest if result_to_front else rest + [result]
        rest_ids = [n for p, n in enumerate(ids) if p not in (i, j)]
        ids = [next_id] + rest_ids if result_to_front else rest_ids + [next_id]
        next_id += 1
    return path


@mutant("nb04_einsum_fast.greedy_path", hint="a result keeps only the labels that the output or another "
        "remaining operand has; the labels the pair sums are gone, so they no longer make later pairs share a "
        "label, nor count in the sizes")
def greedy_results_keep_summed_labels(inputs, output, sizes):
    return _greedy(inputs, output, sizes, lambda r, a, b: r - a - b, keep_everything=True)


@mutant("nb04_einsum_fast.greedy_path", hint="a label the pair shares stays in the result while another "
        "remaining operand has it (a label on three operands is summed only when the last of them is "
        "contracted): the result keeps the labels that the output or any other remaining operand has")
def greedy_results_drop_shared_labels(inputs, output, sizes):
    return _greedy(inputs, output, sizes, lambda r, a, b: r - a - b, drop_shared=True)


@mutant("nb04_einsum_fast.greedy_path", hint="choose the pair by its result, not by its inputs: the smallest "
        "size(result) - size(a) - size(b); two small inputs can make a huge result (an outer product)")
def greedy_smallest_inputs(inputs, output, sizes):
    return _greedy(inputs, output, sizes, lambda r, a, b: a + b)


@mutant("nb04_einsum_fast.greedy_path", hint="positions refer to the current list: after a step the two "
        "operands are gone and the result is appended at the end; you returned the operands' original numbers")
def greedy_original_numbers(inputs, output, sizes):
    return _greedy(inputs, output, sizes, lambda r, a, b: r - a - b, original_positions=True)


@mutant("nb04_einsum_fast.greedy_path", hint="the result of a step is appended at the end of the list "
        "(as tc.einsum and opt_einsum read a path), not put in front")
def greedy_result_in_front(inputs, output, sizes):
    return _greedy(inputs, output, sizes, lambda r, a, b: r - a - b, result_to_front=True)


@mutant("nb04_einsum_fast.greedy_path", hint="consider only pairs that share a label to sum: a pair that "
        "shares nothing is an outer product, whose result is as large as both inputs multiplied; leave those "
        "for the end")
def greedy_any_pair(inputs, output, sizes):
    return _greedy(inputs, output, sizes, lambda r, a, b: r - a - b, shared_only=False)


@mutant("nb04_einsum_fast.greedy_path", hint="the score that frees the most memory is size(result) - size(a) "
        "- size(b), the smallest first; you took the largest")
def greedy_largest_score(inputs, output, sizes):
    return _greedy(inputs, output, sizes, lambda r, a, b: -(r - a - b))


@mutant("nb04_einsum_fast.greedy_path", hint="a greedy search looks at the pairs at each step; contracting "
        "left to right ignores the sizes entirely")
def greedy_left_to_right(inputs, output, sizes):
    return [(0, 1)] * (len(inputs) - 1)


@mutant("nb04_einsum_fast.greedy_path", hint="score a pair by the memory it frees, size(result) - size(a) - "
        "size(b), not by size(result) alone: contracting two large inputs into a small result frees the most")
def greedy_smallest_result(inputs, output, sizes):
    return _greedy(inputs, output, sizes, lambda r, a, b: r)


_KEPT = {"contract_path": opt_einsum.contract_path,  # kept before the check ran, under names of their own
         "greedy": opt_einsum.paths.greedy}


@mutant("nb04_einsum_fast.greedy_path", hint="opt_einsum's greedy search is forbidden under any name, even kept in "
        "a dict: the check trips on the steps it takes; write the rule of the statement yourself")
def greedy_by_kept_opt_einsum(inputs, output, sizes):
    return _KEPT["greedy"]([set(t) for t in inputs], set(output), dict(sizes))


@mutant("nb04_einsum_fast.path_flops", hint="opt_einsum.contract_path is forbidden under any name, even kept in "
        "a dict (it counts with opt_einsum.helpers.flop_count, which is forbidden too): count the FLOPs yourself")
def path_flops_by_kept_contract_path(inputs, output, sizes, path):
    equation = ",".join("".join(sorted(t)) for t in inputs) + "->" + "".join(sorted(output))
    shapes = [tuple(sizes[c] for c in sorted(t)) for t in inputs]
    return int(_KEPT["contract_path"](equation, *shapes, shapes=True, optimize=list(path))[1].opt_cost)


@mutant("nb04_einsum_fast.greedy_path", hint="when no pair shares a label to sum, take the two operands with the "
        "smallest sizes (rule 2): your path took another pair there")
def greedy_fallback_first_two(inputs, output, sizes):
    return _greedy(inputs, output, sizes, lambda r, a, b: r - a - b, fallback="first two")


_KEPT_SEARCHES = {"dp": opt_einsum.paths.dynamic_programming,
                  "optimal": tensorcraft.einstein.path.optimal_path}  # kept before the check ran


@mutant("nb04_einsum_fast.greedy_path", hint="another path search (opt_einsum's dynamic programming) is forbidden "
        "under any name, even kept in a dict: it finds a cheap path, but not by the greedy rule you are to write")
def greedy_by_kept_dynamic_programming(inputs, output, sizes):
    return _KEPT_SEARCHES["dp"]([set(t) for t in inputs], set(output), dict(sizes))


@mutant("nb04_einsum_fast.greedy_path", hint="the library's optimal_path is forbidden under any name, even kept in "
        "a dict: it finds a cheap path, but not by the greedy rule you are to write")
def greedy_by_kept_optimal_path(inputs, output, sizes):
    return _KEPT_SEARCHES["optimal"]([frozenset(t) for t in inputs], frozenset(output), dict(sizes))
