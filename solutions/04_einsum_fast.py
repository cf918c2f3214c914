# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · Making einsum fast
#
# **You will learn to**
# - turn one contraction of two operands into a single batched matrix product:
#   permute → reshape → `torch.bmm` → reshape → permute;
# - tell when `@` is faster than einsum, and when it makes no difference;
# - count the floating-point operations (FLOPs) of a contraction order, as opt_einsum counts them;
# - choose an order for many operands: exhaustive search, and a greedy search that scales to
#   large tensor networks.
#
# **Time:** about 60 minutes. **Builds on:** 01–03 (reading equations, implicit output, einsum
# as loops). In notebook 03 every einsum was a loop over every label; here it becomes a few calls
# to fast kernels.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import itertools
import math
import os

import matplotlib.pyplot as plt
import opt_einsum
import torch

import tensorcraft as tc
from grader.checks.nb04_einsum_fast import check_contract_pair, check_greedy_path, check_path_flops
from tensorcraft.einstein.lower import plan_pair
from tensorcraft.timing import time_call

torch.manual_seed(0)
# One thread for the whole notebook: the timings below then compare the same single-threaded
# kernels, and do not depend on whether the other cores are busy (a thread that waits for a
# descheduled partner can make one product 100 times slower on a shared machine).
torch.set_num_threads(1)
# Every time below is `time_call`'s: the median of many blocks of calls, with the interquartile
# range (half of the blocks took a time inside it), so that a busy moment moves the spread, not
# the conclusion. While the grader runs this notebook (it sets NBGRADER_EXECUTION) each timing is ten times shorter.
TIMING_S = 0.02 if os.environ.get("NBGRADER_EXECUTION") else 0.2   # seconds of calls per timing

# %% [markdown]
# ## One contraction is one matrix product
#
# Take any einsum of two operands `A` and `B` in which no label repeats inside an operand. Every
# label falls into one of four groups:
#
# | group | where the label is | example in `bij,bjk->bik` |
# |---|---|---|
# | **batch** | in A, in B and in the output | `b` |
# | **summed** | in A and in B, not in the output | `j` |
# | **left** | in A only, and in the output | `i` |
# | **right** | in B only, and in the output | `k` |
#
# The result is then a batched matrix product. Permute A's dimensions into the order
# batch, left, summed, and reshape it to a 3-D tensor of shape (B, M, K), where B is the product
# of the batch sizes, M of the left sizes and K of the summed sizes. Do the same with B in the order
# batch, summed, right, shape (B, K, N). `torch.bmm` multiplies the B pairs of matrices; its
# (B, M, N) result, reshaped to the separate sizes, has its labels in the order
# batch + left + right, and a last permute puts them in the order the output asks for.
#
# The library's lowering prints its plan. For `ijk,jl->lik`: `j` is summed, `i` and `k` are left
# labels, `l` is a right label and there is no batch label, so it is a plain matrix product `mm`:

# %%
print(plan_pair("ijk", (2, 3, 4), "jl", (3, 5), keep="lik", result="lik"))

# %% [markdown]
# Read it line by line: A is permuted to `i k j` (dims 0, 2, 1) and reshaped to 8 × 3 (M = 2 · 4,
# K = 3); B is already `j l`, a 3 × 5 matrix; the 8 × 5 product is reshaped to 2 × 4 × 5
# (`i k l`) and permuted to `l i k`. The same steps written by hand give torch.einsum's result:

# %%
A, B = torch.randn(2, 3, 4), torch.randn(3, 5)
by_hand = (A.permute(0, 2, 1).reshape(8, 3) @ B).reshape(2, 4, 5).permute(2, 0, 1)
print("shape", tuple(by_hand.shape), "equal to torch.einsum:", torch.allclose(by_hand, torch.einsum("ijk,jl->lik", A, B)))

# %% [markdown]
# Attention scores, `bhqd,bhkd->bhqk`, have two batch labels (`b`, `h`), and B needs a permute:
# its summed label `d` must come before its right label `k`.

# %%
print(plan_pair("bhqd", (2, 4, 8, 16), "bhkd", (2, 4, 8, 16), keep="bhqk", result="bhqk"))

# %% [markdown]
# `tc.einsum` does this for every pair it contracts. (Before the product it also takes
# diagonals for repeated labels, drops size-1 dimensions that broadcast, and sums labels that only
# one operand has and nobody needs; what is left is exactly the four groups above.) So a label
# that one operand alone has need not be in the output: in `ij,jk->k`, `i` is summed out of A
# first, and the product is then a vector times a matrix:

# %%
A, B = torch.randn(2, 3), torch.randn(3, 4)
print("ij,jk->k equals A.sum(0) @ B:", torch.allclose(torch.einsum("ij,jk->k", A, B), A.sum(0) @ B))

# %% [markdown]
# ## Exercise 1 — the two-operand lowering (3 points)
#
# Write `contract_pair(a, a_labels, b, b_labels, out_labels)`:
# - `a`, `b`: tensors; `a_labels`, `b_labels`: one label per dimension, as a tuple of strings
#   (`("b", "i", "j")`); no label repeats inside one operand, and a label both operands have has
#   the same size in both;
# - `out_labels`: the labels of the result, in the order wanted; every label that only one operand
#   has is in it;
# - return the contraction, with its dimensions in the order of `out_labels`, computed as
#   permute → reshape → **one** `torch.bmm` → reshape → permute.
#
# Allowed: `permute`, `reshape`, `torch.bmm` (or `@`), `math.prod`, plain Python.
# Forbidden (the check replaces them with tripwires): `torch.einsum`, `torch.tensordot`,
# `numpy.einsum`, `opt_einsum.contract`, `tc.einsum`, and the library's own lowering
# (`tensorcraft.einstein.lower`'s `contract_pair`, `plan_pair`, `run_pair`, `run_product`); the
# einsums and `tensordot` are watched under any name (`torch.ops.aten.einsum`, a reference kept in
# a dict). numpy is not allowed: stay with torch tensors.
#
# The check runs **`tc.einsum` with your function as its lowering** (through
# `tc.substitute(contract_pair=...)`, once per pair of operands) and compares the result with
# `torch.einsum`: matrix products, batch labels, shared labels in another order in each operand,
# labels kept from one operand only, nothing summed, everything summed, output orders that need a
# final permute, labels of size 0 (an empty tensor: -1 in a reshape cannot be inferred there, so
# compute every size), three operands, float32,
# float64 and int64 (int64 on the CPU only: CUDA has no integer matrix product). It also counts
# the matrix products each call makes: exactly one (`torch.bmm`, `@`, `torch.matmul` or
# `torch.mm`); multiplying broadcast tensors and summing gives the numbers, but fails the check.
# A group with no labels (a batch of dot products has no left or right labels) has size 1:
# `math.prod([])` is 1.

# %% nbgrader={"grade": false, "grade_id": "contract_pair", "locked": false, "schema_version": 3, "solution": true, "task": false}
def contract_pair(a, a_labels, b, b_labels, out_labels):
    ### BEGIN SOLUTION
    batch = [l for l in a_labels if l in b_labels and l in out_labels]
    summed = [l for l in a_labels if l in b_labels and l not in out_labels]
    left = [l for l in a_labels if l not in b_labels]
    right = [l for l in b_labels if l not in a_labels]
    size = dict(zip(a_labels, a.shape)) | dict(zip(b_labels, b.shape))
    nb, m, k, n = (math.prod(size[l] for l in group) for group in (batch, left, summed, right))
    a3 = a.permute([list(a_labels).index(l) for l in batch + left + summed]).reshape(nb, m, k)
    b3 = b.permute([list(b_labels).index(l) for l in batch + summed + right]).reshape(nb, k, n)
    natural = batch + left + right
    out = torch.bmm(a3, b3).reshape([size[l] for l in natural])
    return out.permute([natural.index(l) for l in out_labels])
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "contract_pair_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_contract_pair(contract_pair)
### BEGIN HIDDEN TESTS
from grader.checks.nb04_einsum_fast import check_contract_pair  # the grader's own, even if the notebook rebound the name

check_contract_pair(contract_pair, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# Your lowering inside the whole pipeline: with it substituted, `tc.einsum` calls it once per
# pair. A wrapper prints what each call receives (until your function is written, the cell says
# so and goes on):

# %%
def traced(a, a_labels, b, b_labels, out_labels):
    print(f"  contract_pair: {''.join(a_labels)} {tuple(a.shape)}, {''.join(b_labels)} {tuple(b.shape)} "
          f"-> {''.join(out_labels)}")
    return contract_pair(a, a_labels, b, b_labels, out_labels)


X, Y, Z = torch.randn(2, 3, 4), torch.randn(2, 4, 5), torch.randn(5, 6)
try:
    with tc.substitute(contract_pair=traced):
        mine = tc.einsum("bij,bjk,kl->lbi", X, Y, Z)
    print("equal to torch.einsum:", torch.allclose(mine, torch.einsum("bij,bjk,kl->lbi", X, Y, Z)))
except NotImplementedError:
    print("contract_pair is not written yet")

# %% [markdown]
# ## When `@` beats einsum
#
# For one matrix product, `torch.einsum("ij,jk->ik", a, b)` and `a @ b` do the same
# multiplications in a matrix-product kernel: `@` calls `mm`; einsum, after a few permutes and
# views that copy nothing, calls `bmm` with a batch of one. A `TorchDispatchMode` (the hook
# torch's own tracing tools use) lists the operations each one runs:

# %%
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402


class ListOps(TorchDispatchMode):
    """Record the name of every aten operation run inside the `with` block."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.__name__.removesuffix(".default"))
        return func(*args, **(kwargs or {}))


a, b = torch.randn(64, 64), torch.randn(64, 64)
for name, product in [("torch.einsum", lambda: torch.einsum("ij,jk->ik", a, b)), ("a @ b", lambda: a @ b)]:
    with ListOps() as listed:
        product()
    print(f"{name:<13} {', '.join(listed.ops)}")

# %% [markdown]
# What einsum adds is work on the equation: reading the string, matching labels to dimensions,
# deciding the permutes. That costs microseconds, whatever the sizes. On tiny matrices, where
# the product itself takes about as long, `@` is clearly faster; on large ones the same few
# microseconds vanish next to the product. Measured here (medians, with the interquartile range;
# on a shared machine the numbers move, the ratios less):

# %%
for n in (4, 256):
    a, b = torch.randn(n, n), torch.randn(n, n)
    t_at = time_call(lambda: a @ b, min_run_time=TIMING_S)
    t_einsum = time_call(lambda: torch.einsum("ij,jk->ik", a, b), min_run_time=TIMING_S)
    print(f"{n:>4} x {n:<4}  a @ b {t_at!s:<28} torch.einsum {t_einsum!s:<28} "
          f"einsum / @ = {t_einsum.median / t_at.median:4.2f}")

# %% [markdown]
# So "call the matrix product directly" matters for small operands in a hot loop; for large
# operands, einsum costs what `@` costs, and it can be clearer to read.
#
# ## Many operands: the order matters
#
# With three operands or more, einsum contracts them two at a time, and the order is a choice.
# For `ij,jk,kl->il` with shapes 1000 × 10, 10 × 1000 and 1000 × 10, contracting the first two
# builds a 1000 × 1000 intermediate; contracting the last two first builds a 10 × 10 one.
#
# opt_einsum (the library torch.einsum itself calls to order operands) counts the cost of one step
# like this:
# - the step's **index space** is every label of the operands it takes, summed or kept; its size
#   is the product of their sizes (one point per combination of values);
# - a step of k operands does max(1, k − 1) multiplications per point, plus 1 addition per point
#   **if it sums a label**: a label that neither the output nor any operand left over has;
# - a path's cost is the sum over its steps.
#
# So a matrix product of n × m and m × p costs 2 · n · m · p (a multiply and an add per point),
# and an outer product of lengths n and m costs n · m.
#
# A **path** lists the steps, opt_einsum's format: each step is a tuple of positions in the
# *current* list of operands; those operands are removed, the others close up, and the result is
# appended at the end. `tc.contract_path` returns the path and a report whose header holds the
# same figures as opt_einsum's (opt_einsum writes exponents without their leading zero); below
# the header, ours lists each step's positions and FLOPs, where opt_einsum's lists each step's
# scaling and the BLAS kernel it would use:

# %%
chain = ((1000, 10), (10, 1000), (1000, 10))
for path in ([(0, 1), (0, 1)], [(1, 2), (0, 1)]):
    _, info = tc.contract_path("ij,jk,kl->il", *chain, optimize=path)
    theirs = opt_einsum.contract_path("ij,jk,kl->il", *chain, shapes=True, optimize=path)[1]
    print(f"path {path}: tensorcraft {info.opt_cost:,} FLOPs, opt_einsum {int(theirs.opt_cost):,} FLOPs")
print()
print(info)
print()
print(theirs)

# %% [markdown]
# ## Exercise 2 — the FLOPs of a path (2 points)
#
# Write `path_flops(inputs, output, sizes, path)`:
# - `inputs`: a list with one set of labels per operand (e.g. `[{"i", "j"}, {"j", "k"}]`; the
#   pipeline passes frozensets, which read like sets and cannot be changed);
# - `output`: the set of output labels; `sizes`: a dict, label → size;
# - `path`: a list of tuples of positions, in the format above (a step may take one, two or
#   more operands);
# - return the total cost of the path as a Python `int` (a float fails the check), with
#   opt_einsum's count: for each step, the size of its index space times
#   (max(1, k − 1) + 1 if it sums a label, else max(1, k − 1)).
#
# A step's result keeps the labels that the output or some operand left over has; it goes to the
# end of the list. Allowed: sets, `math.prod`, plain Python; numpy is not needed (and a numpy
# number is no `int`). Forbidden: `opt_einsum.contract_path`,
# `opt_einsum.helpers.flop_count`, `numpy.einsum_path`, `tc.contract_path` and the library's own
# `path_flops` (the helpers in `tensorcraft.einstein.path` are off limits too: this is the one you
# write).
#
# The check runs **`tc.contract_path(equation, *shapes, optimize=path)` with your function as its
# cost counter** (`tc.substitute(path_flops=...)`) and compares the cost it reports with the one
# `opt_einsum.contract_path` reports for the same path.

# %% nbgrader={"grade": false, "grade_id": "path_flops", "locked": false, "schema_version": 3, "solution": true, "task": false}
def path_flops(inputs, output, sizes, path):
    ### BEGIN SOLUTION
    current = [set(s) for s in inputs]
    total = 0
    for step in path:
        taken = [current[p] for p in step]
        rest = [s for p, s in enumerate(current) if p not in step]
        touched = set().union(*taken)
        result = touched & set(output).union(*rest)
        operations = max(1, len(step) - 1) + (1 if touched - result else 0)
        total += math.prod(sizes[l] for l in touched) * operations
        current = rest + [result]
    return total
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "path_flops_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_path_flops(path_flops)
### BEGIN HIDDEN TESTS
from grader.checks.nb04_einsum_fast import check_path_flops  # the grader's own, even if rebound

check_path_flops(path_flops, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## Choosing the order: optimal and greedy
#
# The **optimal** search tries every order of pairwise contractions and keeps the cheapest. With
# n operands there are (n choose 2) first steps, then ((n−1) choose 2), and so on: 3 orders for 3
# operands, 180 for 5, 2,700 for 6, about 5.6 × 10^29 for 20:

# %%
for n in (3, 5, 6, 10, 20):
    print(f"{n:>2} operands: {math.prod(math.comb(k, 2) for k in range(2, n + 1)):.3g} orders")

# %% [markdown]
# Pruning (dropping a partial order as soon as it costs more than the best complete one) cuts
# that down, but not to something polynomial. `tc.einsum` searches exhaustively up to 6
# operands (and caches the plan per equation and shapes); beyond, it uses a **greedy** search,
# which picks one pair at a time and never reconsiders.
#
# The plot shows the cost of all 180 orders of a chain of five matrices, cheapest first, with the
# orders that left to right, greedy and optimal choose:

# %%
def every_path(n):
    """All orders of pairwise contractions of n operands, as paths."""
    if n <= 1:
        yield []
        return
    for i, j in itertools.combinations(range(n), 2):
        for rest in every_path(n - 1):
            yield [(i, j)] + rest


five = ("ab,bc,cd,de,ef->af", (40, 2), (2, 60), (60, 10), (10, 80), (80, 4))
costs = sorted(tc.contract_path(five[0], *five[1:], optimize=p)[1].opt_cost for p in every_path(5))
chosen = {name: tc.contract_path(five[0], *five[1:], optimize=name)[1].opt_cost
          for name in ("none", "greedy", "optimal")}
print(f"{len(costs)} orders; cheapest {costs[0]:,} FLOPs, dearest {costs[-1]:,} FLOPs")
print({name: f"{cost:,}" for name, cost in chosen.items()})

fig, ax = plt.subplots(figsize=(7, 3.2))
ax.plot(range(len(costs)), costs, ".", color="0.5", label="every order, sorted by cost")
for (name, cost), color in zip(chosen.items(), ("tab:red", "tab:blue", "tab:green")):
    label = {"none": "left to right", "greedy": "greedy", "optimal": "optimal"}[name]
    ax.axhline(cost, color=color, lw=1, ls="--" if name == "greedy" else "-", label=f"{label}: {cost:,}")
ax.set_yscale("log")
ax.set_xlabel("contraction order (sorted by cost)")
ax.set_ylabel("FLOPs (opt_einsum's count)")
ax.set_title("ab,bc,cd,de,ef->af: 40x2, 2x60, 60x10, 10x80, 80x4")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Our searches cost the same as opt_einsum's on these equations (the greedy one is written after
# opt_einsum's):

# %%
examples = [("ij,jk,kl->il", chain),
            five[:1] + (five[1:],),
            ("abc,cde,efa,bdf->", ((4, 5, 6), (6, 3, 4), (4, 5, 4), (5, 3, 5))),
            ("i,ij,jk,k->", ((200,), (200, 300), (300, 200), (200,)))]
print(f"{'equation':<22} {'strategy':<8} {'tensorcraft':>12} {'opt_einsum':>12}")
for equation, shapes in examples:
    for strategy in ("greedy", "optimal"):
        ours = tc.contract_path(equation, *shapes, optimize=strategy)[1].opt_cost
        theirs = int(opt_einsum.contract_path(equation, *shapes, shapes=True, optimize=strategy)[1].opt_cost)
        print(f"{equation:<22} {strategy:<8} {ours:>12,} {theirs:>12,}")

# %% [markdown]
# Greedy is not optimal: on the bilinear form `i,ij,jk,k->` it first multiplies the two matrices
# (the pair that frees the most memory) and pays 100 times the optimal cost, which first
# multiplies each matrix by its vector. It is what scales, and on tensor networks it is usually
# close.
#
# opt_einsum's 'optimal' is not always optimal either. On `b,bad,cad,da->b` (every size 10) ours
# finds a cheaper path:

# %%
odd = ("b,bad,cad,da->b", (10,), (10, 10, 10), (10, 10, 10), (10, 10))
for name, (path, cost) in {
        "tensorcraft": (lambda p, i: (p, i.opt_cost))(*tc.contract_path(*odd, optimize="optimal")),
        "opt_einsum": (lambda p, i: (p, int(i.opt_cost)))(*opt_einsum.contract_path(*odd, shapes=True, optimize="optimal")),
}.items():
    print(f"{name:<12} 'optimal' path {path}: {cost:,} FLOPs")

# %% [markdown]
# The reason is a cache. opt_einsum's search stores the result and cost of contracting a pair
# under the two operands' labels alone, and reuses them wherever the same two label sets meet
# again. But what a step keeps depends on the operands still waiting: `ad` with `abd` must keep
# `a` and `d` while `acd` waits (1,000 FLOPs), and sums them when nothing waits (2,000 FLOPs,
# a result `b`). The entry stored in one branch of the search is reused in the other, the costs
# the search compares are wrong, and it discards the cheaper path. opt_einsum's own step costs:

# %%
from opt_einsum.paths import calc_k12_flops  # noqa: E402

ad, abd, acd, ten = frozenset("ad"), frozenset("abd"), frozenset("acd"), dict.fromkeys("abcd", 10)
for operands, waiting in (((ad, abd, acd), "acd waits"), ((ad, abd), "nothing waits")):
    kept, flops = calc_k12_flops(operands, frozenset("b"), frozenset(range(len(operands))), 0, 1, ten)
    print(f"ad with abd, {waiting:<13}: keeps {''.join(sorted(kept)):<3} {flops:>5,} FLOPs; "
          f"opt_einsum's cache key is the same: {(operands[0], operands[1]) == (ad, abd)}")

# %% [markdown]
# Ours computes each step in its context (the operands left), which costs a little more search
# time and is exact.
#
# ## Exercise 3 — a greedy path (3 points)
#
# Write `greedy_path(inputs, output, sizes)` (arguments as in exercise 2) returning a path of
# pairs, by this rule:
#
# 1. While more than one operand is left, look at every pair (i, j) of the current list that
#    **shares a label not in the output**. The result of a pair keeps the labels of the two that
#    the output or another remaining operand has. Score it with
#    `size(result) - size(a) - size(b)` (how much memory the step frees, negated) and take the
#    pair with the **smallest** score.
# 2. If no pair shares such a label, take the two operands with the smallest sizes (an outer
#    product; the smallest first keeps it small). Where only this rule applies and no two sizes
#    tie, the check compares your path with it step by step.
# 3. Record `(i, j)` with i < j, remove both from your list, and append the result's labels at
#    the end, exactly as the path format says.
#
# Ties may be broken as you like. Allowed: sets, `itertools`, `math.prod`, plain Python; numpy
# is not needed.
# Forbidden: `opt_einsum`'s paths and `contract_path` (under any name: a search kept in a dict
# fails too), `numpy.einsum_path`, `tc.contract_path`, and the library's own `greedy_path` and
# `optimal_path`: any other search (dynamic programming, branch and bound, the optimal one) finds
# a cheap path too, but the exercise is the greedy rule.
#
# The check runs **`tc.contract_path(equation, *shapes, optimize="greedy")` with your function as
# its greedy search** (`tc.substitute(greedy_path=...)`): the path must be valid, and its cost,
# counted by opt_einsum, at most 4 times the cost of opt_einsum's own greedy path (greedy
# searches that break ties differently can differ a little; the rules of the common mistakes cost
# 10 times or more on some public case).

# %% nbgrader={"grade": false, "grade_id": "greedy_path", "locked": false, "schema_version": 3, "solution": true, "task": false}
def greedy_path(inputs, output, sizes):
    ### BEGIN SOLUTION
    current = [set(s) for s in inputs]
    output = set(output)

    def size(labels):
        return math.prod(sizes[l] for l in labels)

    def result_of(i, j):
        rest = [s for p, s in enumerate(current) if p not in (i, j)]
        return (current[i] | current[j]) & output.union(*rest)

    path = []
    while len(current) > 1:
        best = None
        for i, j in itertools.combinations(range(len(current)), 2):
            if not (current[i] & current[j]) - output:
                continue
            score = size(result_of(i, j)) - size(current[i]) - size(current[j])
            if best is None or (score, j, i) < best:
                best = (score, j, i)
        if best is None:  # nothing shared: multiply the two smallest
            i, j = sorted(sorted(range(len(current)), key=lambda p: size(current[p]))[:2])
        else:
            _, j, i = best
        result = result_of(i, j)
        current = [s for p, s in enumerate(current) if p not in (i, j)] + [result]
        path.append((i, j))
    return path
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "greedy_path_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_greedy_path(greedy_path)
### BEGIN HIDDEN TESTS
from grader.checks.nb04_einsum_fast import check_greedy_path  # the grader's own, even if rebound

check_greedy_path(greedy_path, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# With your search substituted, `tc.einsum(..., optimize="greedy")` contracts in your order
# (and so does `tc.einsum` on more than 6 operands, where "auto" means greedy):

# %%
operands = [torch.randn(shape) for shape in chain]
try:
    with tc.substitute(greedy_path=greedy_path):
        path = tc.contract_path("ij,jk,kl->il", *chain, optimize="greedy")[0]
        result = tc.einsum("ij,jk,kl->il", *operands, optimize="greedy")
    print("your path:", path, "| result equal to torch.einsum:",
          torch.allclose(result, torch.einsum("ij,jk,kl->il", *operands), rtol=1e-4, atol=1e-3))
except NotImplementedError:
    print("greedy_path is not written yet")

# %% [markdown]
# Scanning every pair at every step makes your search cost about n³ score computations for n
# operands: fine for ten, slow for hundreds. The library's `greedy_path` (like opt_einsum's) keeps
# the candidate pairs in a priority queue, scores only the pairs that share a label, and after a
# step rescores only the new operand's pairs with its neighbours. `python -m benchmarks einsum
# --paths` times it against opt_einsum's on random tensor networks of 10, 20 and 40 operands.
# Here is one network of 40 operands (each label on two operands):

# %%
from tensorcraft.einstein.networks import random_network  # noqa: E402
import random  # noqa: E402

net, net_sizes = random_network(random.Random(40), 40)
t_ours = time_call(tc.einstein.path.greedy_path, net, frozenset(), net_sizes, min_run_time=TIMING_S)
t_theirs = time_call(lambda: opt_einsum.paths.greedy([set(s) for s in net], set(), net_sizes), min_run_time=TIMING_S)
print(f"40 operands, {len(net_sizes)} labels: tensorcraft {t_ours}, opt_einsum {t_theirs}")

# %% [markdown]
# ## Timing: tensorcraft.einsum against torch.einsum
#
# Both run the same kernels (`torch.bmm`, `torch.mm`) for these equations; `tc.einsum` caches its
# plan per equation and shapes, so a repeated call pays only for the tensor operations. CPU
# rows always; CUDA rows only where a GPU is present. Each time is a median, with its
# interquartile range; the ratio is of the medians (`python -m benchmarks einsum` measures more
# carefully, alternating the contenders).

# %%
cases = [("matmul 128^3", "ij,jk->ik", [(128, 128), (128, 128)]),
         ("batched matmul 16x64^3", "bij,bjk->bik", [(16, 64, 64), (16, 64, 64)]),
         ("attention 2x4x64x32", "bhqd,bhkd->bhqk", [(2, 4, 64, 32), (2, 4, 64, 32)]),
         ("chain 200x10,10x200,200x10", "ij,jk,kl->il", [(200, 10), (10, 200), (200, 10)])]
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
print(f"{'case':<28} {'device':<6} {'torch.einsum':<28} {'tc.einsum':<28} {'tc / torch':>10}")
for device in devices:
    for name, equation, shapes in cases:
        ts = [torch.randn(s, device=device) for s in shapes]
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        t_torch = time_call(lambda: (torch.einsum(equation, *ts), sync()), min_run_time=TIMING_S / 2)
        t_ours = time_call(lambda: (tc.einsum(equation, *ts), sync()), min_run_time=TIMING_S / 2)
        print(f"{name:<28} {device:<6} {t_torch!s:<28} {t_ours!s:<28} {t_ours.median / t_torch.median:>10.2f}")
if not torch.cuda.is_available():
    print("no GPU here (torch.cuda.is_available() is False): the CUDA rows run only where one is present")

# %% [markdown]
# The chain row stands out: there `tc.einsum` is several times faster than `torch.einsum`, and
# not because of its kernels. Both run the same two matrix products in the same order (the
# chain's last two matrices first). But for three operands or more, `torch.einsum` asks
# opt_einsum for a path **on every call**, a search written in Python; `tc.einsum` searches once
# per equation and shapes and keeps the plan. Counting opt_einsum's searches during ten calls,
# and timing one search:

# %%
import torch.backends.opt_einsum as torch_opt_einsum  # noqa: E402

chain_ops = [torch.randn(s) for s in cases[-1][2]]
searched = []
real_contract_path = opt_einsum.contract_path
opt_einsum.contract_path = lambda *args, **kwargs: searched.append(1) or real_contract_path(*args, **kwargs)
try:
    for _ in range(10):
        torch.einsum("ij,jk,kl->il", *chain_ops)
finally:
    opt_einsum.contract_path = real_contract_path
print(f"torch.einsum uses opt_einsum: {torch_opt_einsum.get_opt_einsum() is opt_einsum}; "
      f"paths searched in 10 calls: {len(searched)}")
print("opt_einsum's path:", opt_einsum.contract_path("ij,jk,kl->il", *chain_ops)[0],
      "| tc's path:", tc.contract_path("ij,jk,kl->il", *cases[-1][2])[0])
print("one path search:", time_call(opt_einsum.contract_path, "ij,jk,kl->il", *chain_ops, min_run_time=TIMING_S / 2))
print("the two products:", time_call(lambda: chain_ops[0] @ (chain_ops[1] @ chain_ops[2]), min_run_time=TIMING_S / 2))

# %% [markdown]
# The search costs more than the products it orders. Where the same small chain runs in a loop,
# writing the order with `@` avoids it (turning opt_einsum off with
# `torch.backends.opt_einsum.enabled = False` avoids it too, but then torch contracts left to
# right, which for this chain is the dear order); a library that caches its plans, as
# `tc.einsum` does, avoids it as well.

# %% [markdown]
# ## Common mistakes
#
# **Reshaping without permuting.** `reshape` keeps the order of the elements in memory; it cannot
# move a dimension. For `ji,jk->ik` (A's summed label comes first), reshaping A straight to (M, K)
# gives a tensor of the right shape and the wrong numbers; permuting first gives the right ones:

# %%
A, B = torch.randn(3, 2), torch.randn(3, 4)           # A has labels j, i
wrong = A.reshape(2, 3) @ B
right = A.permute(1, 0).reshape(2, 3) @ B
truth = torch.einsum("ji,jk->ik", A, B)
print("reshape only:", torch.allclose(wrong, truth), "| permute, then reshape:", torch.allclose(right, truth))

# %% [markdown]
# **Reshaping into the output order instead of permuting.** The product comes out as
# batch + left + right. When the output wants another order (`ij,jk->ki`), the last step is a
# permute; a reshape to the output's shape silently mixes the entries:

# %%
A, B = torch.randn(2, 3), torch.randn(3, 4)
product = A @ B                                           # labels i, k
print("reshape to (4, 2):", torch.allclose(product.reshape(4, 2), torch.einsum("ij,jk->ki", A, B)),
      "| permute (1, 0):", torch.allclose(product.permute(1, 0), torch.einsum("ij,jk->ki", A, B)))

# %% [markdown]
# **Counting a multiply-add as one FLOP.** opt_einsum counts the addition too: a step that sums a
# label costs 2 per point, and `torch.einsum`'s own path choice relies on the same count. An outer
# product sums nothing and costs 1 per point:

# %%
for equation, shapes, points in (("ij,jk->ik", ((2, 3), (3, 4)), 2 * 3 * 4), ("i,j->ij", ((3,), (5,)), 3 * 5)):
    flops = int(opt_einsum.contract_path(equation, *shapes, shapes=True)[1].opt_cost)
    print(f"{equation:<10} index space {points:>3} points, opt_einsum counts {flops:>3} FLOPs")

# %% [markdown]
# **Positions in a path are positions in the current list.** After `(1, 2)` on three operands, the
# list is [operand 0, result], so the next step is `(0, 1)`, not `(0, 3)`:

# %%
try:
    tc.contract_path("ij,jk,kl->il", *chain, optimize=[(1, 2), (0, 3)])
except tc.EinsumError as error:
    print("EinsumError:", error)
print(tc.contract_path("ij,jk,kl->il", *chain, optimize=[(1, 2), (0, 1)])[0], "is valid")

# %% [markdown]
# **Contracting left to right because the equation is written that way.** The order of the
# operands in the equation says nothing about a good order of contraction: on the chain above,
# left to right costs 100 times the best order.

# %%
costs_chain = {name: tc.contract_path("ij,jk,kl->il", *chain, optimize=name)[1].opt_cost for name in ("none", "optimal")}
print(costs_chain, f"ratio {costs_chain['none'] / costs_chain['optimal']:.0f}")

# %% [markdown]
# ## Summary
#
# - One contraction of two operands is one batched matrix product: sort the labels into batch,
#   summed, left and right; permute, reshape, `bmm`, reshape, permute.
# - `@` saves einsum's few microseconds of equation handling: it matters for tiny operands only.
# - With many operands the order decides the cost. opt_einsum counts a step as its index space
#   times (multiplications + 1 addition if it sums); a path's positions refer to the current list.
# - The optimal search is exact and factorial; the greedy search takes the pair that frees the
#   most memory, and with a priority queue it handles networks of hundreds of operands.
#
# **Next:** notebook 05 turns to einops, where `rearrange` writes permutes and reshapes as one
# readable pattern.
