# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · Reading and writing einsum
#
# **You will learn to**
# - read an einsum equation as nested loops that multiply entries and add the products;
# - write the output of an equation explicitly, after `->`, and predict the shape of the result;
# - write the everyday tensor operations (dot, outer, matrix products, transposes, traces,
#   diagonals, sums, batched products, attention scores) as equations.
#
# **Time:** about 45 minutes. **Builds on:** 00 (how checks work; broadcasting with `None`).
# The next notebook, 02, shows how einsum reads an equation, including what it does when you
# leave out `->`.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math

import matplotlib.pyplot as plt
import torch

import tensorcraft as tc
from grader.checks.nb01_einsum_notation import OPERATIONS, check_attention, check_equations, check_output_shape

torch.manual_seed(0)


def same(name, ours, direct):
    """Print whether an einsum result equals the direct torch operation: same shape, same values."""
    equal = ours.shape == direct.shape and torch.allclose(ours, direct)
    print(f"{name:<28} shape {str(tuple(ours.shape)):<14} equal to the direct operation: {equal}")


# %% [markdown]
# ## One letter per axis
#
# `torch.einsum(equation, *operands)` takes a string and some tensors. The string gives every
# axis of every operand a letter, operands separated by commas; after `->` come the letters of
# the result's axes. The matrix product of `A` (shape 2 × 3) and `B` (shape 3 × 4) is
# `'ij,jk->ik'`: `A`'s axes are called `i` and `j`, `B`'s are `j` and `k`, and the result has
# axes `i` and `k`.

# %%
A = torch.randn(2, 3)
B = torch.randn(3, 4)
C = torch.einsum("ij,jk->ik", A, B)
same("ij,jk->ik", C, A @ B)

# %% [markdown]
# The equation is a recipe for every entry of the result:
#
# > `C[i, k]` = the sum, over every `j`, of `A[i, j] * B[j, k]`.
#
# A letter that appears in two operands names axes that run together: `j` pairs column `j`
# of `A` with row `j` of `B`, so those two axes must have the same length (here 3).
# A letter that is missing after `->` (here `j`) is summed over. Every other letter is an
# axis of the result.

# %% [markdown]
# ## Nested loops that multiply and add
#
# Every einsum can be written the same way: start the result at zero; loop over every letter
# of the equation; in the innermost loop, multiply the entries the letters name and **add** the
# product to the result's entry named by the output letters. Here is `'ij,jk->ik'` in that form:

# %%
def matmul_by_loops(A, B):
    I, J = A.shape
    J2, K = B.shape
    assert J == J2, "j names an axis of A and an axis of B: they must have the same length"
    C = torch.zeros(I, K)
    for i in range(I):
        for j in range(J):
            for k in range(K):
                C[i, k] += A[i, j] * B[j, k]
    return C


same("loops for ij,jk->ik", matmul_by_loops(A, B), torch.einsum("ij,jk->ik", A, B))


# %% [markdown]
# When every letter appears in the output, nothing is summed: each entry of the result receives
# exactly one product. `'ij,jk->ijk'` keeps all three letters, so `C[i, j, k] = A[i, j] * B[j, k]`,
# a tensor of shape 2 × 3 × 4:

# %%
def products_by_loops(A, B):
    I, J = A.shape
    K = B.shape[1]
    C = torch.zeros(I, J, K)
    for i in range(I):
        for j in range(J):
            for k in range(K):
                C[i, j, k] += A[i, j] * B[j, k]   # each entry is reached once: += is just =
    return C


same("loops for ij,jk->ijk", products_by_loops(A, B), torch.einsum("ij,jk->ijk", A, B))
# and summing that tensor over j is the matrix product again
same("(ij,jk->ijk).sum(1)", torch.einsum("ij,jk->ijk", A, B).sum(1), A @ B)


# %% [markdown]
# A letter written twice in one operand walks along a diagonal: `'ii->i'` loops over one `i`
# and reads `M[i, i]`.

# %%
def diagonal_by_loops(M):
    n = M.shape[0]
    d = torch.zeros(n)
    for i in range(n):
        d[i] += M[i, i]
    return d


M = torch.randn(4, 4)
same("loops for ii->i", diagonal_by_loops(M), torch.einsum("ii->i", M))

# %% [markdown]
# Notebook 03 turns this into a function that runs *any* equation as loops. The loops are the
# definition, not a way to compute: one Python step per product is slow (notebook 03 measures
# how slow), and einsum computes the same numbers with a few fast operations, which notebook 04
# builds.

# %% [markdown]
# ## A picture of `'ij,jk->ik'`
#
# One entry of the result, `C[1, 2]`, pairs row 1 of `A` with column 2 of `B` along `j`: it
# multiplies the highlighted entries pair by pair and adds the three products.

# %%
A_small = torch.arange(1.0, 7.0).reshape(2, 3)
B_small = torch.arange(1.0, 13.0).reshape(3, 4)
C_small = torch.einsum("ij,jk->ik", A_small, B_small)
i, k = 1, 2

fig, axes = plt.subplots(1, 3, figsize=(9, 2.6), gridspec_kw={"width_ratios": [3, 4, 4]})
for ax, (title, matrix, mark) in zip(axes, [
        ("A[i, j]", A_small, lambda r, c: r == i),
        ("B[j, k]", B_small, lambda r, c: c == k),
        ("C[i, k] = Σ_j A[i, j] · B[j, k]", C_small, lambda r, c: (r, c) == (i, k))]):
    rows, cols = matrix.shape
    ax.imshow([[1.0 if mark(r, c) else 0.15 for c in range(cols)] for r in range(rows)],
              cmap="Oranges", vmin=0, vmax=2.0)
    for r in range(rows):
        for c in range(cols):
            ax.text(c, r, f"{matrix[r, c]:g}", ha="center", va="center")
    ax.set_title(title)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
axes[0].set_xlabel("j"), axes[0].set_ylabel("i")
axes[1].set_xlabel("k"), axes[1].set_ylabel("j")
axes[2].set_xlabel("k"), axes[2].set_ylabel("i")
plt.tight_layout()
plt.show()
print(f"C[{i}, {k}] = " + " + ".join(f"{A_small[i, j]:g}·{B_small[j, k]:g}" for j in range(3))
      + f" = {C_small[i, k]:g}")

# %% [markdown]
# ## Explicit mode: the output is what you write after `->`
#
# With `->`, the letters after the arrow *are* the result's axes, in the order written. Writing
# them in another order permutes the result: `'ij,jk->ki'` is the transpose of the matrix
# product.

# %%
same("ij,jk->ki", torch.einsum("ij,jk->ki", A, B), (A @ B).T)

# %% [markdown]
# Nothing after `->` means every letter is summed, and the result is a scalar (a tensor with no
# axes): `'ij,jk->'` adds up every product `A[i, j] * B[j, k]`, which is the sum of all the
# entries of `A @ B`.

# %%
same("ij,jk->", torch.einsum("ij,jk->", A, B), (A @ B).sum())

# %% [markdown]
# Without `->` at all, einsum chooses the output itself (*implicit mode*). For `'ij,jk'` it
# chooses `'ik'`, but its rule is not "keep the letters in the order they appear", as notebook 02
# shows. Until then, write `->` and the output every time.

# %%
same("ij,jk (implicit)", torch.einsum("ij,jk", A, B), A @ B)
same("ba (implicit)", torch.einsum("ba", A), A.T)   # 'ba' is a transpose: not the order of appearance

# %% [markdown]
# ## The everyday operations as equations
#
# Each cell below computes one operation with einsum and compares it with the direct torch
# operation. Read each equation as loops: which letters are summed (those missing after `->`)
# and which become axes of the result.

# %%
u, v = torch.randn(5), torch.randn(5)
w = torch.randn(3)
same("dot          i,i->", torch.einsum("i,i->", u, v), torch.dot(u, v))
same("outer        i,j->ij", torch.einsum("i,j->ij", u, w), torch.outer(u, w))

# %%
A = torch.randn(3, 5)
B = torch.randn(5, 4)
same("matrix-vector ij,j->i", torch.einsum("ij,j->i", A, u), A @ u)
same("matmul       ij,jk->ik", torch.einsum("ij,jk->ik", A, B), A @ B)

# %% [markdown]
# Transposes and permutations move axes without summing anything: every letter appears once
# on each side, in a new order after `->`.

# %%
X = torch.randn(2, 3, 4)
same("transpose    ij->ji", torch.einsum("ij->ji", A), A.T)
same("permute      ijk->kij", torch.einsum("ijk->kij", X), X.permute(2, 0, 1))
same("permute      ijk->kji", torch.einsum("ijk->kji", X), X.permute(2, 1, 0))

# %% [markdown]
# A letter repeated inside one operand reads the diagonal; leaving it out of the output sums
# the diagonal, which is the trace.

# %%
S = torch.randn(4, 4)
same("diagonal     ii->i", torch.einsum("ii->i", S), torch.diagonal(S))
same("trace        ii->", torch.einsum("ii->", S), torch.trace(S))

# %% [markdown]
# Sums over axes: the letters you leave out are summed, the ones you keep remain.

# %%
same("sum of rows  ij->i", torch.einsum("ij->i", A), A.sum(dim=1))
same("sum of cols  ij->j", torch.einsum("ij->j", A), A.sum(dim=0))
same("total        ij->", torch.einsum("ij->", A), A.sum())

# %% [markdown]
# A letter that appears in both operands *and* in the output is neither summed nor paired off:
# it runs alongside, which is a batch. `'bij,bjk->bik'` is one matrix product per `b`.

# %%
P = torch.randn(6, 3, 5)
Q = torch.randn(6, 5, 4)
same("batched matmul bij,bjk->bik", torch.einsum("bij,bjk->bik", P, Q), torch.bmm(P, Q))

# %% [markdown]
# More than two operands work the same way: one loop per letter, one product of three entries
# in the innermost loop. The bilinear form `xᵀ M y` is `'i,ij,j->'`.

# %%
x, y = torch.randn(3), torch.randn(5)
same("bilinear form i,ij,j->", torch.einsum("i,ij,j->", x, A, y), x @ A @ y)

# %% [markdown]
# Attention scores in a transformer compare every query with every key, for each batch entry
# `b` and each head `h`, along the feature axis `d`: `'bhqd,bhkd->bhqk'`. The direct version
# needs a transpose of the keys' last two axes.

# %%
q = torch.randn(2, 4, 6, 8)    # (batch, heads, queries, features)
k = torch.randn(2, 4, 7, 8)    # (batch, heads, keys, features)
same("scores bhqd,bhkd->bhqk", torch.einsum("bhqd,bhkd->bhqk", q, k), q @ k.transpose(-1, -2))

# %% [markdown]
# The course's library, `tensorcraft`, has its own `tc.einsum`, which you will rebuild stage by
# stage in the next notebooks. It gives the same results as `torch.einsum`; here on a selection
# of the equations above:

# %%
for equation, operands in [("i,i->", (u, v)), ("ij,jk->ki", (A, B)), ("ii->", (S,)), ("ijk->kij", (X,)),
                           ("bij,bjk->bik", (P, Q)), ("i,ij,j->", (x, A, y)), ("bhqd,bhkd->bhqk", (q, k))]:
    same(f"tc {equation}", tc.einsum(equation, *operands), torch.einsum(equation, *operands))

# %% [markdown]
# ## Common mistakes
#
# **A wrong loop for the batched product.** The article this course grew from comments
# `'bij,bjk->bik'` with the loop `C[b][i][k] += A[b][i][k] * B[b][k][k]`. That is wrong: the
# letters of the loop body must be the letters of the equation, so the body is
# `C[b][i][k] += A[b][i][j] * B[b][j][k]`, summed over `j`. The cell runs both bodies and
# compares each with einsum.

# %%
def batched_by_loops(A, B, wrong=False):
    nb, ni, nj = A.shape
    nk = B.shape[2]
    C = torch.zeros(nb, ni, nk)
    for b in range(nb):
        for i in range(ni):
            for j in range(nj):
                for k in range(nk):
                    C[b, i, k] += A[b, i, k] * B[b, k, k] if wrong else A[b, i, j] * B[b, j, k]
    return C


P3, Q3 = torch.randn(2, 3, 3), torch.randn(2, 3, 3)   # square, so that the wrong body can even run
same("C[b,i,k] += A[b,i,j]*B[b,j,k]", batched_by_loops(P3, Q3), torch.einsum("bij,bjk->bik", P3, Q3))
same("C[b,i,k] += A[b,i,k]*B[b,k,k]", batched_by_loops(P3, Q3, wrong=True), torch.einsum("bij,bjk->bik", P3, Q3))

# %% [markdown]
# **An output letter that no input has.** The same article writes `einsum("m,d->nd", A, B)`.
# Every letter after `->` must name an axis of some operand (einsum could not know how long
# the axis `n` is), and torch rejects the equation:

# %%
try:
    torch.einsum("m,d->nd", torch.randn(3), torch.randn(4))
except RuntimeError as error:
    print("RuntimeError:", error)

# %% [markdown]
# **Forgetting `->`.** `'ij,ij->ij'` is the product entry by entry; `'ij,ij'`, without the arrow,
# is not: `i` and `j` each appear twice, so implicit mode sums both, and the result is a scalar.

# %%
E, F = torch.randn(2, 3), torch.randn(2, 3)
print("ij,ij->ij:", tuple(torch.einsum("ij,ij->ij", E, F).shape), "   ij,ij:", tuple(torch.einsum("ij,ij", E, F).shape))
same("ij,ij->ij", torch.einsum("ij,ij->ij", E, F), E * F)
same("ij,ij", torch.einsum("ij,ij", E, F), (E * F).sum())

# %% [markdown]
# **One letter, two lengths.** A letter names one length: `'ij,jk->ik'` with `A` of shape
# 2 × 3 and `B` of shape 4 × 5 fails, because `j` would be 3 in `A` and 4 in `B`. (A length of 1
# is the exception: it broadcasts, as notebook 02 shows.)

# %%
try:
    torch.einsum("ij,jk->ik", torch.randn(2, 3), torch.randn(4, 5))
except RuntimeError as error:
    print("RuntimeError:", error)

# %% [markdown]
# **The output order is yours to get right.** `'ij,jk->ki'` runs without complaint and returns
# the transpose of the matrix product. When a result has the right numbers in the wrong places,
# look at the order of the letters after `->`.

# %% [markdown]
# ## Exercise 1 — write the equations (3 points)
#
# Write `equations()`, which returns a dict from each operation's name to an einsum equation
# (a string, with `->`) that computes it. The check runs each of your equations through both
# `tc.einsum` and `torch.einsum` on operands of random shapes, in which every axis has a length
# of its own (except in `quadratic_forms`, whose `M` is square), and compares the result with the
# direct torch operation below. A result with the
# right numbers in the wrong places fails, and the hint says how (for instance, "your result is
# the transpose of the expected one").
#
# | name | operands (letters for their axes) | the direct operation |
# |---|---|---|
# | `matmul_bt` | `A` (i, k), `B` (j, k) | `A @ B.T` |
# | `row_dots` | `A` (i, j), `B` (i, j) | `(A * B).sum(dim=1)` |
# | `frobenius` | `A` (i, j), `B` (i, j) | `(A * B).sum()` |
# | `scale_columns` | `A` (i, j), `v` (j) | `A * v`: column `j` times `v[j]` |
# | `channels_last` | `x` (b, c, h, w) | `x.permute(0, 2, 3, 1)` |
# | `batched_outer` | `x` (b, i), `y` (b, j) | `x[:, :, None] * y[:, None, :]` |
# | `batched_trace` | `X` (b, i, i) | the trace of each `X[b]` |
# | `sum_of_products` | `A` (b, i, j), `B` (b, j, k) | `(A @ B).sum(dim=0)` |
# | `attention_output` | `w` (b, h, q, k), `v` (b, h, k, d) | `w @ v` |
# | `quadratic_forms` | `X` (b, i), `M` (i, j), `X` again (b, j) | `((X @ M) * X).sum(dim=1)` |
#
# The letters in the table are a suggestion; any letters that give the same result pass. Every
# equation must contain `->` (an equation without it fails the check, even where implicit mode
# would happen to give the right result). Only the strings matter: your function returns them
# and computes nothing, so it needs no torch operation and no numpy.

# %% nbgrader={"grade": false, "grade_id": "equations", "locked": false, "schema_version": 3, "solution": true, "task": false}
def equations():
    ### BEGIN SOLUTION
    return {
        "matmul_bt": "ik,jk->ij",
        "row_dots": "ij,ij->i",
        "frobenius": "ij,ij->",
        "scale_columns": "ij,j->ij",
        "channels_last": "bchw->bhwc",
        "batched_outer": "bi,bj->bij",
        "batched_trace": "bii->b",
        "sum_of_products": "bij,bjk->ik",
        "attention_output": "bhqk,bhkd->bhqd",
        "quadratic_forms": "bi,ij,bj->b",
    }
    ### END SOLUTION


# %% [markdown]
# The operations the check knows, as it describes them (the names must match):

# %%
for name, (description, _, _) in OPERATIONS.items():
    print(f"{name:<17} {description}")

# %% nbgrader={"grade": true, "grade_id": "equations_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_equations(equations)
### BEGIN HIDDEN TESTS
from grader.checks.nb01_einsum_notation import check_equations  # the grader's own, even if the notebook rebound the name

check_equations(equations, hidden=True)
### END HIDDEN TESTS


# %% [markdown]
# ## Exercise 2 — predict the output shape (2 points)
#
# Write `output_shape(equation, *shapes)`, which returns the shape of
# `torch.einsum(equation, *operands)` for operands of the given shapes, as a tuple of Python
# ints (a list fails the check), without computing anything. For example `output_shape("ij,jk->ki", (2, 3), (3, 4))` is `(4, 2)`.
#
# The equations are explicit (they contain `->`), have no `...`, may contain spaces between
# letters, and may repeat a letter inside one operand (`'ii->i'`); a letter has the same length
# everywhere it appears; `b` and `B` are two different letters. The result has one axis per
# letter after `->`, in that order, each as long as the axes that letter names in the inputs.
#
# You may use string methods, loops and dicts; numpy is not needed. Forbidden, under any name
# (`torch.ops.aten.einsum`, a reference kept in a variable or a dict: the check watches the
# operation): `torch.einsum`, `numpy.einsum`, `tc.einsum`, the library's `parse_equation`,
# `opt_einsum.contract`, and `contract_path` (opt_einsum's or `tc.contract_path`, whose report
# holds the output's letters and every letter's length): they would compute the answer for you.

# %% nbgrader={"grade": false, "grade_id": "output_shape", "locked": false, "schema_version": 3, "solution": true, "task": false}
def output_shape(equation, *shapes):
    ### BEGIN SOLUTION
    inputs, output = equation.replace(" ", "").split("->")
    size = {}
    for term, shape in zip(inputs.split(","), shapes):
        for letter, length in zip(term, shape):
            size[letter] = length
    return tuple(size[letter] for letter in output)
    ### END SOLUTION


# %% [markdown]
# A few predictions to compare with torch (this cell runs your function, so it shows an error
# until you have written it):

# %%
for equation, shapes in [("ij,jk->ki", [(2, 3), (3, 4)]), ("bij,bjk->", [(5, 2, 3), (5, 3, 4)]),
                         ("ii->i", [(3, 3)])]:
    real = tuple(torch.einsum(equation, *[torch.zeros(s) for s in shapes]).shape)
    try:
        print(f"{equation:<12} torch: {real}   yours: {output_shape(equation, *shapes)}")
    except NotImplementedError:
        print(f"{equation:<12} torch: {real}   yours: not written yet")
    except Exception as error:   # a bug in output_shape: show it and go on
        print(f"{equation:<12} torch: {real}   yours raised {type(error).__name__}: {error}")

# %% nbgrader={"grade": true, "grade_id": "output_shape_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_output_shape(output_shape)
### BEGIN HIDDEN TESTS
from grader.checks.nb01_einsum_notation import check_output_shape  # the grader's own, even if rebound

check_output_shape(output_shape, hidden=True)
### END HIDDEN TESTS


# %% [markdown]
# ## Exercise 3 — attention with two equations (2 points)
#
# Scaled dot-product attention, the core of a transformer, takes queries `q` of shape
# (b, h, q, d), keys `k` of shape (b, h, k, d) and values `v` of shape (b, h, k, e), and
# computes
#
# 1. the scores `q · k` over the features `d`, divided by `sqrt(d)`: shape (b, h, q, k);
# 2. the weights: a softmax of the scores over the keys (the last axis), so that each query's
#    weights add up to 1;
# 3. the result: the weighted sum of the values over the keys, shape (b, h, q, e).
#
# Write `attention(q, k, v)` with einsum for both products (`torch.einsum` or `tc.einsum`) and
# `torch.softmax(x, dim=...)` for the softmax. It must equal
# `torch.nn.functional.scaled_dot_product_attention(q, k, v)`, which is forbidden here, and so
# are `@`, `torch.matmul` and `Tensor.matmul`, under any name (`torch.ops.aten.matmul`, a
# reference kept in a dict: the check watches the operations). numpy is not allowed: stay with
# torch tensors. The check counts your einsum calls: computing a product another way
# (`torch.bmm`, or multiplying and `.sum`) fails it.

# %% nbgrader={"grade": false, "grade_id": "attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
def attention(q, k, v):
    ### BEGIN SOLUTION
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bhqk,bhke->bhqe", weights, v)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "attention_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_attention(attention)
### BEGIN HIDDEN TESTS
from grader.checks.nb01_einsum_notation import check_attention  # the grader's own, even if rebound

check_attention(attention, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - An equation gives each axis of each operand a letter; after `->` come the result's axes.
# - Its meaning is a set of nested loops, one per letter: multiply the entries the letters name
#   and add the product into the result's entry. Letters missing after `->` are summed.
# - A letter shared by operands pairs their axes (same length); a letter repeated in one operand
#   reads a diagonal; a letter in every operand and in the output is a batch.
# - The order of the letters after `->` is the order of the result's axes.
#
# **Next: 02 · how einsum reads an equation** — the exact rules torch applies when it parses
# an equation: what it rejects, what it infers when `->` is missing, broadcasting of length-1
# axes, and `...`.
