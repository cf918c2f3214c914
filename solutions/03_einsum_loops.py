# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · Einsum as loops
#
# An einsum equation is a compact way to write a nest of `for` loops. This notebook makes that
# exact: you will write einsum by its definition, then a program that writes the loops for you,
# and see what the definition costs.
#
# **You will learn to**
# - read any explicit equation as loops: one loop per label; the output labels index the result,
#   the other labels are summed;
# - see why every einsum is "start at zero, add products", diagonals and broadcasting included;
# - write `einsum_loops`, a loop-code generator `loop_code` and `count_iterations`, and run each
#   of them inside tensorcraft's own pipeline;
# - measure how much slower Python loops are than `torch.einsum`, and why.
#
# **Time:** about 45 minutes. **Builds on:** 01 (reading and writing einsum) and 02 (how einsum
# reads an equation: explicit output, repeated labels, size-1 broadcasting).

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import itertools
import math
import os

import matplotlib.pyplot as plt
import torch

import tensorcraft
from tensorcraft.einstein import loops
from tensorcraft.timing import time_call
from grader.checks.nb03_einsum_loops import check_count_iterations, check_einsum_loops, check_loop_code

_ = torch.manual_seed(0)
# seconds of calls per timing: while grading (the grader sets NBGRADER_EXECUTION) shorter, still the
# median of five blocks or more with their spread
TIMING_S = 0.01 if os.environ.get("NBGRADER_EXECUTION") else 0.05

# %% [markdown]
# ## 1. The definition, written as loops
#
# Take two small integer matrices (integers, so that every result below is exact and `torch.equal`
# can compare it): `A` of shape (2, 3) and `B` of shape (3, 4).
#
# **`ij,jk->ijk`.** Every label of the output indexes the result, so the result has shape
# (2, 3, 4), and each entry is one product: `C[i][j][k] = A[i][j] * B[j][k]`.

# %%
A = torch.randint(-5, 6, (2, 3))
B = torch.randint(-5, 6, (3, 4))

C = torch.zeros(2, 3, 4, dtype=A.dtype)
for i in range(2):
    for j in range(3):
        for k in range(4):
            C[i, j, k] = A[i, j] * B[j, k]

print(C.shape, torch.equal(C, torch.einsum("ij,jk->ijk", A, B)))

# %% [markdown]
# **`ij,jk->ik`.** The label `j` is missing from the output. It still gets a loop, but the result
# has no dimension for it: all the products with the same `i` and `k` land in the same entry,
# so they are added up. This is the matrix product.

# %%
C = torch.zeros(2, 4, dtype=A.dtype)
for i in range(2):
    for k in range(4):
        for j in range(3):  # summed: j is not in the output
            C[i, k] += A[i, j] * B[j, k]

print(torch.equal(C, torch.einsum("ij,jk->ik", A, B)), torch.equal(C, A @ B))

# %% [markdown]
# Summing over a label is exactly what happens to the larger result of `ij,jk->ijk` when you add
# it up along `j` (dimension 1):

# %%
print(torch.equal(torch.einsum("ij,jk->ijk", A, B).sum(dim=1), torch.einsum("ij,jk->ik", A, B)))

# %% [markdown]
# **`ii->i`.** A label repeated inside one operand is still one label, so one loop variable:
# `M[i, i]` reads the diagonal.

# %%
M = torch.randint(-5, 6, (3, 3))
D = torch.zeros(3, dtype=M.dtype)
for i in range(3):
    D[i] += M[i, i]

print(D, torch.equal(D, torch.einsum("ii->i", M)), torch.equal(D, torch.diagonal(M)))

# %% [markdown]
# And `ii->` (no output label) sums that diagonal: the trace.

# %%
T = torch.zeros((), dtype=M.dtype)
for i in range(3):
    T += M[i, i]
print(T, torch.einsum("ii->", M), torch.trace(M))

# %% [markdown]
# ## 2. One rule for every einsum: start at zero, add products
#
# All three loops above follow one recipe, and so does every einsum:
#
# 1. every label gets one loop, over the label's size;
# 2. the result has one dimension per output label, in the order written after `->`, and starts
#    at zero;
# 3. at each point of the loop nest, take one entry of each operand (indexed by that operand's
#    labels), multiply them, and **add** the product into the result at the output labels' values.
#
# A label that is missing from the output is *summed* for no other reason than step 3: its loop
# adds several products into the same entry. When every label is in the output, as in
# `ij,jk->ijk`, each entry receives exactly one product, so adding it to zero is the same as
# assigning it. The cell below counts how many products land in each entry of the result:

# %%
def products_per_entry(output):
    """How many times the recipe adds into each entry of the result, for 'ij,jk->' + output."""
    sizes = {"i": 2, "j": 3, "k": 4}
    counts = torch.zeros([sizes[label] for label in output], dtype=torch.int64)
    for i, j, k in itertools.product(range(2), range(3), range(4)):
        value = {"i": i, "j": j, "k": k}
        counts[tuple(value[label] for label in output)] += 1
    return counts.unique().tolist()


print("ij,jk->ijk: products per entry", products_per_entry("ijk"))
print("ij,jk->ik:  products per entry", products_per_entry("ik"), "(one per value of j)")
print("ij,jk->:    products per entry", products_per_entry(""), "(all 2 * 3 * 4 in one entry)")

# %% [markdown]
# The order of the loops does not matter: each product is added exactly once whatever the
# order, and addition does not care about order (for integers exactly; for floating-point
# numbers up to rounding). Here `j` runs outermost instead of innermost:

# %%
C = torch.zeros(2, 4, dtype=A.dtype)
for j in range(3):
    for k in range(4):
        for i in range(2):
            C[i, k] += A[i, j] * B[j, k]
print(torch.equal(C, torch.einsum("ij,jk->ik", A, B)))

# %% [markdown]
# **Size-1 broadcasting.** A label may have size 1 in one operand and a larger size in another
# (notebook 02). The label then runs over the larger size, and the operand with size 1 is read
# at index 0 every time. Below `A1` has shape (2, 1) and `B` has shape (3, 4): `j` runs over
# 0, 1, 2, and `A1[i, 0]` is used for each of them.

# %%
A1 = torch.randint(-5, 6, (2, 1))
C = torch.zeros(2, 4, dtype=A1.dtype)
for i in range(2):
    for k in range(4):
        for j in range(3):
            C[i, k] += A1[i, 0] * B[j, k]
print(torch.equal(C, torch.einsum("ij,jk->ik", A1, B)))

# %% [markdown]
# ## 3. A common mistake: the batched matrix product
#
# Batched matrix multiplication is `bij,bjk->bik`: for each batch entry `b`, a matrix product
# over `j`. The source material this course grew from writes its loop body as
# `C[b][i][k] += A[b][i][k] * B[b][k][k]`. That is wrong: the summed label `j` appears nowhere in
# it. The body must follow the equation letter by letter, `A[b][i][j] * B[b][j][k]`.
#
# The wrong body even runs, when `A`'s last size happens to equal `B`'s (here both are 3), and
# gives another answer:

# %%
Ab = torch.randint(-5, 6, (2, 2, 3))  # b i j
Bb = torch.randint(-5, 6, (2, 3, 3))  # b j k

right = torch.zeros(2, 2, 3, dtype=Ab.dtype)
wrong = torch.zeros(2, 2, 3, dtype=Ab.dtype)
for b, i, k, j in itertools.product(range(2), range(2), range(3), range(3)):
    right[b, i, k] += Ab[b, i, j] * Bb[b, j, k]
    wrong[b, i, k] += Ab[b, i, k] * Bb[b, k, k]  # the source material's body

print("right body equals torch.einsum('bij,bjk->bik'):", torch.equal(right, torch.einsum("bij,bjk->bik", Ab, Bb)))
print("wrong body equals torch.einsum('bij,bjk->bik'):", torch.equal(wrong, torch.einsum("bij,bjk->bik", Ab, Bb)))

# %% [markdown]
# What the wrong body computes instead: since nothing in it depends on `j`, its loop adds the same
# product 3 times, and `B` is only read on its diagonal `B[b, k, k]`. That is the equation
# `bik,bkk->bik`, times 3:

# %%
print(torch.equal(wrong, 3 * torch.einsum("bik,bkk->bik", Ab, Bb)))

# %% [markdown]
# ## Exercise 1 — einsum by its definition (4 points)
#
# Write `einsum_loops(equation, *operands)`: the result of `torch.einsum(equation, *operands)`,
# computed by the recipe of section 2.
#
# - `equation` is explicit: letters (`a-z`, `A-Z`) for each operand, separated by commas, then
#   `->` and the output letters, e.g. `"ij,jk->ki"`. No spaces and no `...`. An operand may
#   repeat a letter (a diagonal); a 0-d operand has no letters (`"i,->i"`).
# - `operands` are tensors of one dtype. The result must have `torch.einsum`'s shape (one
#   dimension per output letter, in the written order) and the operands' dtype (int64 stays
#   int64), on the operands' device.
# - A letter's size is its size in the operands; where one operand has size 1 and another a
#   different size, the size that is not 1 wins, even 0 (an empty dimension, as notebook 02
#   shows), and the size-1 dimension is read at index 0.
#
# **Allowed:** Python loops (`itertools.product` too), reading and writing single entries by
# indexing, `+` and `*` (and `+=`), Python's `sum`, and `torch.zeros` to create the result.
# **Forbidden** (each raises an error while the check runs): `torch.einsum`, `numpy.einsum`,
# `tensorcraft.einsum`, `opt_einsum.contract`, `einops.einsum`, `torch.tensordot`,
# `torch.matmul` and `@`, `torch.bmm`, `torch.mm`, `torch.mv`, `torch.dot`, `torch.outer`,
# `torch.sum` and `Tensor.sum`, `torch.diagonal` and `torch.diag`, under any name (the check
# watches the operations: `torch.ops.aten.einsum` or a reference kept in a dict fails too).
# numpy is not allowed: stay with torch tensors (no `.numpy()`, no `np.einsum`).
#
# The check runs your function **inside tensorcraft's pipeline**:
# `tensorcraft.einstein.loops.einsum_by_definition(equation, *operands)`, with your function
# substituted for the library's stage `einsum_loops`, and compares the result with
# `torch.einsum`.

# %% nbgrader={"grade": false, "grade_id": "einsum_loops", "locked": false, "schema_version": 3, "solution": true, "task": false}
def einsum_loops(equation, *operands):
    """torch.einsum(equation, *operands) for an explicit equation, by loops over every label."""
    ### BEGIN SOLUTION
    inputs, output = equation.split("->")
    terms = inputs.split(",")
    sizes = {}
    for term, operand in zip(terms, operands):
        for label, size in zip(term, operand.shape):
            if sizes.get(label, 1) == 1:  # size 1 broadcasts: another size wins
                sizes[label] = size
    summed = [label for label in sizes if label not in output]
    labels = list(output) + summed
    result = torch.zeros([sizes[label] for label in output], dtype=operands[0].dtype, device=operands[0].device)
    for values in itertools.product(*(range(sizes[label]) for label in labels)):
        value = dict(zip(labels, values))
        product = 1
        for term, operand in zip(terms, operands):
            index = tuple(0 if size == 1 else value[label] for label, size in zip(term, operand.shape))
            product = product * operand[index]
        result[tuple(value[label] for label in output)] += product
    return result
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "einsum_loops_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
check_einsum_loops(einsum_loops)
### BEGIN HIDDEN TESTS
from grader.checks.nb03_einsum_loops import check_einsum_loops  # the grader's own, even if the notebook rebound the name

check_einsum_loops(einsum_loops, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Your stage inside the pipeline
#
# `einsum_by_definition` accepts everything `tensorcraft.einsum` accepts: implicit output,
# `...`, numpy arrays. It turns each call into what your function handles (an explicit equation
# of letters, `...` renamed to unused letters, tensors of one dtype) and then calls the stage
# `einsum_loops`. With `tensorcraft.substitute(einsum_loops=...)`, that stage is yours. The
# spy below prints what your function receives. (Until you solve the exercise, the cell says so
# and moves on.)

# %%
def spy(equation, *operands):
    print(f"  your einsum_loops receives {equation!r} and shapes {[tuple(t.shape) for t in operands]}")
    return einsum_loops(equation, *operands)


X, Y = torch.randn(5, 2, 3, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
try:
    with tensorcraft.substitute(einsum_loops=spy):
        Z = loops.einsum_by_definition("...ij,jk", X, Y)
    print("equals torch.einsum('...ij,jk'):", torch.allclose(Z, torch.einsum("...ij,jk", X, Y)))
except NotImplementedError:
    print("einsum_loops is not written yet: solve exercise 1, then run this cell again")

# %% [markdown]
# ## Exercise 2 — write the loops as code (3 points)
#
# `einsum_loops` works out the equation again at every call and at every point of the loop nest
# it looks up which label indexes what. A *code generator* does that work once: given the
# equation and the operands' shapes, it prints the Python source of loops written for exactly
# that case, with the sizes filled in. Compilers work this way (torch.compile, later in the
# course, generates code specialised to the shapes it sees). This is what the library's
# generator prints for `ij,jk->ik` with shapes (2, 3) and (3, 4):

# %%
print(loops.loop_code.library("ij,jk->ik", (2, 3), (3, 4)))

# %% [markdown]
# Running the source defines the function, and calling that function computes the einsum
# (`loops.generated_function` runs the source for you and returns the function):

# %%
generated = loops.generated_function("ij,jk->ik", (2, 3), (3, 4))
print(torch.equal(generated(A, B), torch.einsum("ij,jk->ik", A, B)))

# %% [markdown]
# Write `loop_code(equation, *shapes)`, returning a `str` of Python source that
#
# - imports what it uses (`import torch`; it may import only `torch`, `math` and `itertools`);
# - defines `def einsum_loops_generated(op0, op1, ...)`, one parameter per operand, that takes
#   tensors of the given shapes and one dtype and returns `torch.einsum(equation, op0, op1, ...)`:
#   same shape, the operands' dtype, on their device;
# - computes it with **one `for` loop per label** and a single line
#   `out[...] += op0[...] * op1[...] * ...` at the innermost level, writing `0` as the index of a
#   dimension of size 1 that broadcasts.
#
# `equation` is as in exercise 1 (explicit, letters only); `shapes` are tuples of ints. A 0-d
# operand or result is indexed with `[()]`, and a 1-d one may be written with a trailing comma,
# `[i,]`, so that every index can be printed the same way:
#
# %%
v, scalar = torch.tensor([10, 20, 30]), torch.tensor(7)
print(v[1,], v[(1,)], scalar[()])

# %% [markdown]
# **Forbidden**, in the generated source: any name `einsum`, `matmul`, `bmm`, `mm`, `mv`, `dot`,
# `tensordot`, `sum`, `prod`, `diagonal`, `diag`, `trace` (and a few more of the kind), the `@`
# operator, and imports other than the three above; the functions of exercise 1 are forbidden,
# under any name, while the generated code runs. numpy is not allowed in the generated source and
# not needed in `loop_code`, which only builds a string. The check reads your source, then runs it **through the
# library**: `einsum_by_definition(..., generated=True)` with your function substituted for the
# stage `loop_code`, against `torch.einsum`.

# %% nbgrader={"grade": false, "grade_id": "loop_code", "locked": false, "schema_version": 3, "solution": true, "task": false}
def loop_code(equation, *shapes):
    """Python source of `def einsum_loops_generated(op0, ...)`: the loops of `equation` for these shapes."""
    ### BEGIN SOLUTION
    inputs, output = equation.split("->")
    terms = inputs.split(",")
    sizes = {}
    for term, shape in zip(terms, shapes):
        for label, size in zip(term, shape):
            if sizes.get(label, 1) == 1:
                sizes[label] = size
    summed = [label for label in sizes if label not in output]
    names = [f"op{n}" for n in range(len(shapes))]

    def index(term, shape):
        parts = ["0" if size == 1 and sizes[label] != 1 else label for label, size in zip(term, shape)]
        return "(" + "".join(part + ", " for part in parts) + ")"

    out_shape = [sizes[label] for label in output]
    lines = ["import torch", "", "",
             f"def einsum_loops_generated({', '.join(names)}):",
             f"    out = torch.zeros({out_shape}, dtype=op0.dtype, device=op0.device)"]
    indent = "    "
    for label in list(output) + summed:
        lines.append(f"{indent}for {label} in range({sizes[label]}):")
        indent += "    "
    product = " * ".join(f"{name}[{index(term, shape)}]" for name, term, shape in zip(names, terms, shapes))
    lines.append(f"{indent}out[{index(output, out_shape)}] += {product}")
    lines.append("    return out")
    return "\n".join(lines) + "\n"
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "loop_code_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_loop_code(loop_code)
### BEGIN HIDDEN TESTS
from grader.checks.nb03_einsum_loops import check_loop_code  # the grader's own, even if rebound

check_loop_code(loop_code, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# Your generator's code for a diagonal that broadcasts against a vector, and the library's
# pipeline running it on an implicit equation (run once you have solved exercise 2):

# %%
try:
    print(loop_code("ii,i->i", (3, 3), (1,)))
    with tensorcraft.substitute(loop_code=loop_code):
        got = loops.einsum_by_definition("ii,i->i", M, torch.tensor([2]), generated=True)
    print(got, torch.einsum("ii,i->i", M, torch.tensor([2])))
except NotImplementedError:
    print("loop_code is not written yet: solve exercise 2, then run this cell again")

# %% [markdown]
# ## Exercise 3 — how many iterations? (2 points)
#
# The loops' cost is easy to read off the recipe: the innermost statement runs once per
# combination of label values, so the number of iterations is the product of the sizes of all
# the labels — each label once, however many operands use it, with its broadcast size. A
# matrix product of two n × n matrices runs n · n · n times:

# %%
for n in (2, 4, 8):
    print(f"n = {n}: {loops.count_iterations.library('ij,jk->ik', (n, n), (n, n))} iterations, n**3 = {n ** 3}")

# %% [markdown]
# The output does not change the count: `ij,jk->ijk` and `ij,jk->ik` run the same loops; only where
# the products go differs. Summing products of ones over every label counts the points, which
# is how the check gets its ground truth from `torch.einsum`. A dimension of size 0 is a loop
# that runs 0 times, so nothing runs at all:

# %%
ones = torch.ones(2, 3, dtype=torch.int64), torch.ones(3, 4, dtype=torch.int64)
print(torch.einsum("ij,jk->", *ones), loops.count_iterations.library("ij,jk->ijk", (2, 3), (3, 4)),
      loops.count_iterations.library("ij,jk->ik", (2, 3), (3, 4)))
empty = torch.ones(2, 0, dtype=torch.int64), torch.ones(0, 3, dtype=torch.int64)
print(torch.einsum("ij,jk->", *empty), loops.count_iterations.library("ij,jk->ik", (2, 0), (0, 3)))

# %% [markdown]
# Write `count_iterations(equation, *shapes)`: the number of times the loops of `equation` (explicit,
# letters only, as before) run their innermost statement for operands of the given shapes, as a
# Python `int`. A dimension of size 0 is a loop that runs 0 times.
#
# **Allowed:** Python and `math`; numpy is not needed. **Forbidden:** `torch.einsum` and
# `numpy.einsum` (under any name: `torch.ops.aten.einsum`, a reference kept in a dict),
# `tensorcraft.einsum`, `opt_einsum.contract_path`, and the library's `parse_equation` and
# `contract_path`.
#
# The pipeline uses this stage as a guard: before running any loop, `einsum_by_definition` asks
# `count_iterations` how long the loops will take, and refuses a call over `max_iterations`
# (a million by default). The check substitutes your function and reads the count the pipeline
# gets (`loops.bind_call(...).iterations`).

# %% nbgrader={"grade": false, "grade_id": "count_iterations", "locked": false, "schema_version": 3, "solution": true, "task": false}
def count_iterations(equation, *shapes):
    """How many times the loops of `equation` run their innermost statement for these shapes."""
    ### BEGIN SOLUTION
    terms = equation.split("->")[0].split(",")
    sizes = {}
    for term, shape in zip(terms, shapes):
        for label, size in zip(term, shape):
            if sizes.get(label, 1) == 1:
                sizes[label] = size
    return math.prod(sizes.values())
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "count_iterations_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_count_iterations(count_iterations)
### BEGIN HIDDEN TESTS
from grader.checks.nb03_einsum_loops import check_count_iterations  # the grader's own, even if rebound

check_count_iterations(count_iterations, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# The guard at work, with your count in it: a 200 × 200 matrix product would run 8 million
# iterations, and the pipeline refuses it before any loop starts.

# %%
big = torch.zeros(200, 200)
try:
    with tensorcraft.substitute(count_iterations=count_iterations):
        loops.einsum_by_definition("ij,jk", big, big)
except loops.TooManyIterations as error:
    print(f"TooManyIterations: {error}")
except NotImplementedError:
    print("count_iterations is not written yet: solve exercise 3, then run this cell again")

# %% [markdown]
# ## 4. Loops against torch.einsum
#
# How much does the definition cost next to `torch.einsum`? The cell below times an n × n matrix
# product for a few n with three implementations: the library's `einsum_loops` (it loops over
# numpy entries), the library's generated code (it loops over torch entries, as yours does), and
# `torch.einsum`. Timings on a shared machine are noisy: each is the median of repeated calls
# (`time_call`, used for every time in this course), drawn with a bar over the interquartile
# range, in which half of the calls fall.

# %%
sizes = [2, 4, 8, 16]
measured = {"einsum_loops (numpy entries)": [], "generated loops (torch entries)": [], "torch.einsum": []}
for n in sizes:
    P, Q = torch.randn(n, n, dtype=torch.float64), torch.randn(n, n, dtype=torch.float64)
    run = loops.generated_function("ij,jk->ik", (n, n), (n, n))
    measured["einsum_loops (numpy entries)"].append(time_call(loops.einsum_loops, "ij,jk->ik", P, Q, min_run_time=TIMING_S))
    measured["generated loops (torch entries)"].append(time_call(run, P, Q, min_run_time=TIMING_S))
    measured["torch.einsum"].append(time_call(torch.einsum, "ij,jk->ik", P, Q, min_run_time=TIMING_S))
timings = {name: [t.median for t in ts] for name, ts in measured.items()}

fig, ax = plt.subplots(figsize=(6, 4))
for name, ts in measured.items():
    ax.errorbar(sizes, [t.median for t in ts], yerr=[[t.median - t.low for t in ts], [t.high - t.median for t in ts]],
                fmt="o-", capsize=3, label=name)
ax.set_xscale("log")
ax.set_yscale("log")
ax.loglog(sizes, [timings["generated loops (torch entries)"][0] * (n / sizes[0]) ** 3 for n in sizes], "k:",
          label="slope 3 (time ∝ n³)")
ax.set_xticks(sizes, [str(n) for n in sizes])
ax.set_xlabel("n (matrices n × n)")
ax.set_ylabel("seconds per call")
ax.set_title("ij,jk->ik: loops against torch.einsum")
ax.legend(fontsize=8)
plt.show()

for n, loop_t, einsum_t in zip(sizes, measured["generated loops (torch entries)"], measured["torch.einsum"]):
    print(f"n = {n:2}: {n ** 3:5} iterations, generated loops {loop_t!s:<26} "
          f"({loop_t.median / n ** 3 * 1e6:5.1f} µs per iteration), torch.einsum {einsum_t!s:<26} "
          f"ratio {loop_t.median / einsum_t.median:8.0f}")

# %% [markdown]
# On a log-log plot a cost that grows like n³ is a straight line of slope 3, and both loop
# versions run close to the dotted line: their time is the iteration count times a cost per
# iteration of some microseconds (the Python interpreter reads, multiplies and writes one entry
# per statement; the printed figures show it, noisy as they are). `torch.einsum` at these sizes
# costs tens of microseconds in total, almost all of it fixed overhead, and its line stays nearly
# flat: it hands the whole product to compiled code that works on many entries at once. The
# printed ratios show how fast the gap grows; notebook 04 shows how einsum gets there.

# %% [markdown]
# ## Common mistakes
#
# Each of these is a wrong answer the checks know, with the hint they print:
#
# - **Summing the output labels too.** Only labels missing from the output are summed; output
#   labels index the result.
# - **Sorting the output.** The result's dimensions follow the order written after `->`:
#   `ij->ji` is a transpose.
# - **`=` instead of `+=`.** With `=`, each entry keeps only its last product.
# - **A running total that is not reset** for each entry of the result.
# - **A float result for integer inputs.** `torch.zeros(shape)` is float32; pass the operands'
#   dtype.
# - **Ignoring diagonals.** `ii` is one label, one loop variable: `M[i, i]`.
# - **Ignoring broadcasting.** A size-1 dimension facing a larger size is read at index 0, and
#   the label runs over the larger size.
# - **A loop body that does not follow the equation**, as in the source material's batched
#   matmul `A[b][i][k] * B[b][k][k]` (section 3): every operand is indexed by its own labels,
#   `A[b][i][j] * B[b][j][k]`.
#
# Two of them in a cell: the output order is the written one, and `torch.zeros` without a dtype
# is float32.

# %%
print("ij->ji is the transpose:", torch.equal(torch.einsum("ij->ji", A), A.T))
print("torch.zeros(2).dtype =", torch.zeros(2).dtype, "| with dtype=A.dtype:", torch.zeros(2, dtype=A.dtype).dtype)

# %% [markdown]
# The checks' full list, for exercise 1:

# %%
from grader.mutants import mutants_for

for wrong in mutants_for("nb03_einsum_loops.einsum_loops"):
    print(f"{wrong.name:32} → {wrong.hint}")

# %% [markdown]
# ## Summary
#
# - An einsum is a loop nest: one loop per label, a result that starts at zero with one
#   dimension per output label, and at each point the product of one entry per operand added
#   into the result. Labels missing from the output are summed because their products land in
#   the same entry.
# - Repeated labels read diagonals; size-1 dimensions are read at index 0.
# - The loops run the product of all label sizes times; in Python each iteration costs
#   microseconds, so already for 16 × 16 matrices `torch.einsum` is thousands of times faster.
#
# **Next:** 04 — making einsum fast: one contraction as permute → reshape → batched matmul, and
# the order in which to contract many operands.
