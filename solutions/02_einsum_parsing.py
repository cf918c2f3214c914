# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · How einsum reads an equation
#
# **You will learn to**
# - tell which equations torch accepts, and read the exact errors it raises for the others;
# - predict the output einsum infers when there is no `->` (it is *not* the order of appearance);
# - use letters repeated inside one operand, axes of length 1 that broadcast, and `...`;
# - write three stages of einsum's front end yourself: the implicit-output rule (which then
#   runs inside the course library's `tc.einsum`), a validator, and the sizes of the letters.
#
# **Time:** about 50 minutes. **Builds on:** 01 (reading equations as loops, explicit mode).

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from collections import Counter

import matplotlib.pyplot as plt
import numpy as np
import torch

import tensorcraft as tc
from grader.checks.nb02_einsum_parsing import check_infer_output, check_label_sizes, check_validate_equation


def run(equation, *shapes):
    """Run torch.einsum on zero tensors of the given shapes; print the result's shape or torch's error."""
    try:
        result = torch.einsum(equation, *[torch.zeros(s) for s in shapes])
        print(f"{equation!r:<20} accepted, result shape {tuple(result.shape)}")
    except (RuntimeError, ValueError) as error:
        print(f"{equation!r:<20} {type(error).__name__}: {error}")


# %% [markdown]
# ## The parts of an equation
#
# An equation is a list of *terms* separated by commas, one per operand, optionally followed by
# `->` and the output term. A term is a sequence of *subscripts*: each is one letter, `a`–`z` or
# `A`–`Z` (52 in all), naming one axis; a term may also hold one `...`, which stands for the axes
# its letters do not name. Spaces may stand between subscripts. All of these are accepted:

# %%
run("ij,jk->ik", (2, 3), (3, 4))
run("i j , j k -> i k", (2, 3), (3, 4))
run("aB,BC->Ca", (2, 3), (3, 4))
run("...ij,...jk", (5, 2, 3), (5, 3, 4))
run("ii", (3, 3))
run("ij,->", (2, 3), ())          # an empty term is a scalar operand
run("ij->", (2, 3))               # an empty output is a scalar result

# %% [markdown]
# ## What torch rejects, and what it says
#
# torch checks the equation before computing anything and raises `RuntimeError` with a message
# that names the problem. Characters other than letters, commas, spaces, `.` and `->` are
# invalid subscripts; so are a tab, a letter outside `a`–`z`/`A`–`Z`, and a second `->` (whose
# `-` then stands in the output). The index in the message counts characters from 0.

# %%
run("i1", (2, 3))
run("i\tj", (2, 3))
run("ij->é", (2, 3))
run("ij->ij->i", (2, 3))
run("ij-ji", (2, 3))

# %% [markdown]
# A `.` must be part of `...`, three adjacent dots, and each term may hold one ellipsis:

# %%
run("..ij", (2, 3))
run("i...j...", (2, 3, 4))
run("i...->...i...", (2, 3))

# %% [markdown]
# The terms must match the operands: one term per operand, and, in a term without `...`, one
# letter per dimension (with `...`, at most as many letters as dimensions).

# %%
run("ij,jk", (2, 3))
run("ij", (2, 3), (3,))
run("ij", (2, 3, 4))
run("ijk...", (2, 3))

# %% [markdown]
# The output may only use letters of the inputs, each at most once:

# %%
run("ij->k", (2, 3))
run("ij->ii", (2, 3))

# %% [markdown]
# With three or more operands torch first asks the `opt_einsum` package for the order in which
# to contract them, and some errors then come from opt_einsum, as a `ValueError` with its own
# wording. The equation is rejected either way:

# %%
run("ij,jk,kl->ii", (2, 2), (2, 2), (2, 2))
with torch.backends.opt_einsum.flags(enabled=False):   # torch's own parser alone
    run("ij,jk,kl->ii", (2, 2), (2, 2), (2, 2))

# %% [markdown]
# ## Spaces, and `->`
#
# Spaces may stand between subscripts, commas and the arrow, and are ignored there. But `->` is
# one symbol of two adjacent characters, and `...` one of three: a space inside either breaks it.

# %%
run("ij -> ji", (2, 3))
run("ij- >ji", (2, 3))
run(". ..ij", (2, 3))

# %% [markdown]
# **Common mistake.** The article this course grew from says that spaces can go anywhere in
# the equation without changing the result. They cannot: `'ij- >ji'` is rejected, as the cell
# above shows; only spaces *between* symbols are ignored.

# %% [markdown]
# ## The implicit output
#
# Without `->`, einsum chooses the output itself, by this rule (torch and numpy agree on it):
#
# 1. a letter belongs to the output when it is used **exactly once** in the whole equation;
#    letters used twice or more are summed;
# 2. those letters are **sorted by code point** (the number `ord(c)` Python gives a character),
#    not kept in the order they appear;
# 3. when any operand has `...`, the ellipsis dimensions come **first**.
#
# For `'ijd,jk'`, `j` is used twice and is summed; `i`, `d` and `k` are used once, and in
# code-point order they are `d`, `i`, `k`. So `'ijd,jk'` means `'ijd,jk->dik'`:

# %%
A = torch.randn(2, 3, 4)     # i=2, j=3, d=4
B = torch.randn(3, 5)        # j=3, k=5
implicit = torch.einsum("ijd,jk", A, B)
print("'ijd,jk' has shape", tuple(implicit.shape))
print("equal to 'ijd,jk->dik':", torch.equal(implicit, torch.einsum("ijd,jk->dik", A, B)))
print("shape of 'ijd,jk->idk':", tuple(torch.einsum("ijd,jk->idk", A, B).shape))
print("numpy agrees: np.einsum('ijd,jk') has shape", np.einsum("ijd,jk", A.numpy(), B.numpy()).shape)

# %% [markdown]
# **Common mistake.** The article this course grew from says that the letters that are not
# repeated are kept "in order of appearance", and gives `'ijd,jk' == 'ijd,jk->idk'` as an
# example. The cell above shows that torch returns shape (4, 2, 5), which is `'dik'`; the
# order-of-appearance answer `'idk'` would have shape (2, 4, 5). The same rule makes a single
# operand `'ba'` a transpose:

# %%
M = torch.randn(2, 3)
print("'ba' is the transpose:", torch.equal(torch.einsum("ba", M), M.T))

# %% [markdown]
# Code-point order puts every uppercase letter before every lowercase one, since `'A'`–`'Z'`
# are 65–90 and `'a'`–`'z'` are 97–122. So `'aB'` gives `'Ba'`:

# %%
print([(c, ord(c)) for c in "ABZabz"])
X = torch.randn(2, 3)        # a=2, B=3
print("'aB' has shape", tuple(torch.einsum("aB", X).shape), "which is 'Ba'")
print("sorted('aB') =", sorted("aB"))

# %% [markdown]
# The picture below puts the 52 letters on the code-point line. For the equation `'xB,Bz,Cx,a'`
# the letters used once (`z`, `C`, `a`) are kept, the others summed; reading the kept letters
# from left to right gives the output `'Caz'`.

# %%
equation = "xB,Bz,Cx,a"
counts = Counter(equation.replace(",", ""))
fig, ax = plt.subplots(figsize=(10, 1.8))
for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz":
    used = counts.get(c, 0)
    color = "tab:green" if used == 1 else ("tab:red" if used > 1 else "lightgray")
    ax.text(ord(c), 0, c, ha="center", va="center", fontsize=12 if used else 9, color=color,
            fontweight="bold" if used else "normal")
ax.set_xlim(62, 125)
ax.set_ylim(-1, 1)
ax.set_yticks([])
ax.set_xlabel("code point ord(c)")
ax.set_title(f"{equation!r}: green = used once (kept, left to right), red = used twice (summed)")
plt.tight_layout()
plt.show()
print("torch's output shape for", equation, tuple(torch.einsum(equation, torch.zeros(2, 3), torch.zeros(3, 4),
                                                                torch.zeros(5, 2), torch.zeros(6)).shape),
      " (C=5, a=6, z=4)")

# %% [markdown]
# "Used once" counts over the whole equation, including inside one operand. A letter used three
# times is summed too. So `'ii'` is the trace (a scalar), and `'ab,ab,ab'` adds up all products:

# %%
S = torch.randn(3, 3)
print("'ii' is the trace:", torch.allclose(torch.einsum("ii", S), torch.trace(S)))
P, Q, R = torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)
print("'ab,ab,ab' is a scalar:", tuple(torch.einsum("ab,ab,ab", P, Q, R).shape))
print("'idi,jk' has shape", tuple(torch.einsum("idi,jk", torch.zeros(2, 3, 2), torch.zeros(4, 5)).shape),
      "which is 'djk' (d=3, j=4, k=5)")

# %% [markdown]
# The ellipsis dimensions come first, whatever the position of `...` in the operands:

# %%
Z = torch.randn(2, 3, 4)     # Z=2, ... covers 3, a=4
print("'Z...a' has shape", tuple(torch.einsum("Z...a", Z).shape), "which is '...Za'")

# %% [markdown]
# In the course library, this rule is one function, `infer_output`, which `tc.einsum` calls for
# every equation without `->`. It receives the input side with the spaces removed and returns
# the output subscripts:

# %%
from tensorcraft.einstein.infer import infer_output as library_infer_output

for inputs in ["ijd,jk", "aB", "...ij,...jk", "ii", "Z...a"]:
    print(f"{inputs!r:<15} -> {library_infer_output(inputs)!r}")

# %% [markdown]
# `tc.substitute(infer_output=f)` runs the library with `f` in its place, inside a `with`
# block. A function that transposes every implicit matrix product shows that the pipeline
# really calls it:

# %%
calls = []


def transposed_output(inputs):
    calls.append(inputs)
    return "ki"


X, Y = torch.randn(2, 3), torch.randn(3, 4)
with tc.substitute(infer_output=transposed_output):
    result = tc.einsum("i j , j k", X, Y)
print("called with", calls, "; result shape", tuple(result.shape), "; equals (X @ Y).T:",
      torch.allclose(result, (X @ Y).T))
print("outside the block, the library's rule again:", tuple(tc.einsum("ij,jk", X, Y).shape))

# %% [markdown]
# ## Exercise 1 — the implicit-output rule (3 points)
#
# Write `infer_output(inputs: str) -> str`. `inputs` is the input side of an equation without
# `->`, as `tc.einsum` passes it: no spaces, terms separated by `,`, each term letters and at
# most one `...`. Return the output subscripts torch infers: `'...'` first if any term has an
# ellipsis, then the letters used exactly once in all of `inputs`, sorted by code point.
#
# | `inputs` | result |
# |---|---|
# | `'ijd,jk'` | `'dik'` |
# | `'...ij,...jk'` | `'...ik'` |
# | `'ii'` | `''` |
# | `'aB'` | `'Ba'` |
#
# The check compares your answer with torch's, read from the shape of `torch.einsum`'s result
# when every letter has a length of its own; then it runs `tc.einsum` on the same equation
# with **your** function as its implicit-output stage and compares the result with
# `torch.einsum`'s. Each case prints as (your answer, `tc.einsum`'s result with your stage).
# You may use `collections.Counter`, `sorted` and string methods; numpy is not needed. Forbidden
# are the einsum functions (`torch.einsum`, `numpy.einsum`, `tc.einsum`, the library's
# `parse_equation`, `opt_einsum.contract`), `contract_path` (opt_einsum's or `tc.contract_path`,
# whose report holds the implicit output) and the library's own `infer_output`; the einsums and
# the library's `infer_output` are watched under any name (`torch.ops.aten.einsum`, a reference
# kept in a dict).

# %% nbgrader={"grade": false, "grade_id": "infer_output", "locked": false, "schema_version": 3, "solution": true, "task": false}
def infer_output(inputs: str) -> str:
    ### BEGIN SOLUTION
    counts = Counter(inputs.replace("...", "").replace(",", ""))
    once = "".join(sorted(letter for letter, n in counts.items() if n == 1))
    return ("..." if "..." in inputs else "") + once
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "infer_output_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_infer_output(infer_output)
### BEGIN HIDDEN TESTS
from grader.checks.nb02_einsum_parsing import check_infer_output  # the grader's own, even if the notebook rebound the name

check_infer_output(infer_output, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# Your rule inside the library: `tc.einsum` on implicit equations with your `infer_output` as
# its stage, next to `torch.einsum` (until you have written it, this cell says so and uses
# nothing of yours):

# %%
examples = [("ijd,jk", (2, 3, 4), (3, 5)), ("...ij,...jk", (6, 2, 3), (6, 3, 4)), ("aB", (2, 3)), ("ii", (3, 3))]
try:
    infer_output("ij,jk")
    mine = True
except NotImplementedError:
    mine = False
    print("infer_output is not written yet: the library's own rule runs below")
for inputs, *shapes in examples:
    operands = [torch.randn(s) for s in shapes]
    theirs = torch.einsum(inputs, *operands)
    try:
        if mine:
            with tc.substitute(infer_output=infer_output):
                ours = tc.einsum(inputs, *operands)
        else:
            ours = tc.einsum(inputs, *operands)
    except Exception as error:   # e.g. an answer that is no valid output: the pipeline says so
        print(f"{inputs!r:<14} tc.einsum raised {type(error).__name__}: {error}")
        continue
    print(f"{inputs!r:<14} tc.einsum {str(tuple(ours.shape)):<10} torch.einsum {str(tuple(theirs.shape)):<10} "
          f"equal: {ours.shape == theirs.shape and torch.allclose(ours, theirs)}")

# %% [markdown]
# ## A letter repeated inside one operand
#
# A letter written twice in one term walks along a diagonal of that operand, so both axes must
# have exactly the same length; a length of 1 does not stretch here.

# %%
D = torch.randn(3, 3, 4)
print("'iij->ij' equals the diagonal:", torch.equal(torch.einsum("iij->ij", D), torch.diagonal(D).T))
run("ii", (1, 3))

# %% [markdown]
# ## Axes of length 1 broadcast
#
# Across operands, a letter's axes must have the same length, **or length 1**: an axis of
# length 1 is used for every index of the other, as in broadcasting. Below, `A` has one column
# (`j` = 1) and `B` has four rows (`j` = 4): `j` has size 4, and `A`'s single column meets each
# of `B`'s rows.

# %%
A1 = torch.randn(2, 1)
B1 = torch.randn(4, 5)
result = torch.einsum("ij,jk->ik", A1, B1)
print("shape", tuple(result.shape), "; equals A1.expand(2, 4) @ B1:", torch.allclose(result, A1.expand(2, 4) @ B1))
run("ij,jk", (2, 3), (4, 5))

# %% [markdown]
# The size that is not 1 wins even when it is 0: an empty dimension against a length of 1 gives
# an empty `j` (the output `'->j'` shows its length), and a sum over it is 0. Against any other
# length, 0 is an error.

# %%
run("ij,jk->j", (2, 0), (1, 3))
print("'ij,jk->ik' sums over an empty j:", torch.einsum("ij,jk->ik", torch.ones(2, 0), torch.ones(1, 3)))
run("ij,jk", (2, 0), (3, 3))

# %% [markdown]
# ## The ellipsis
#
# `...` names all the dimensions a term's letters do not name, possibly none. `'...ij,...jk->...ik'`
# is a matrix product over any number of leading batch dimensions, and the ellipsis dimensions
# of different operands broadcast against each other, aligned on the right, as in ordinary
# broadcasting:

# %%
E1 = torch.randn(5, 1, 2, 3)   # ... covers (5, 1)
E2 = torch.randn(4, 3, 6)      # ... covers (4,)
print("shape", tuple(torch.einsum("...ij,...jk->...ik", E1, E2).shape),
      "; equals E1 @ E2:", torch.allclose(torch.einsum("...ij,...jk->...ik", E1, E2), E1 @ E2, atol=1e-6))
run("...i,...i", (2, 3), (4, 3))

# %% [markdown]
# `...` may stand anywhere in a term, and an explicit output may leave it out, in which case
# torch sums the ellipsis dimensions. numpy does not accept that:

# %%
F = torch.randn(5, 2, 3)
print("'i...j' on (2, 3, 4, 5):", tuple(torch.einsum("i...j", torch.zeros(2, 3, 4, 5)).shape), "which is '...ij'")
print("'...ij->ij' sums the ellipsis dimensions:", torch.allclose(torch.einsum("...ij->ij", F), F.sum(0)))
try:
    np.einsum("...ij->ij", F.numpy())
except ValueError as error:
    print("numpy: ValueError:", error)

# %% [markdown]
# ## Exercise 2 — a validator (3 points)
#
# Write `validate_equation(equation: str, ndims: tuple[int, ...]) -> None`, where `ndims[n]` is
# the number of dimensions of operand `n` (every length is 2, so lengths never conflict). Return
# `None` when torch accepts the equation for such operands, and raise `ValueError`, with a
# message that says what is wrong, wherever torch raises. The rules, each shown above:
#
# - the characters are letters `a`–`z`, `A`–`Z`, `,`, the space, `...` (three adjacent dots)
#   and one `->` (two adjacent characters); anything else, a tab included, is an error;
# - each term (and the output) holds at most one `...`;
# - there is one term per operand;
# - a term without `...` has one letter per dimension; a term with `...` at most as many
#   letters as dimensions;
# - each letter of the output appears in some input, and at most once in the output.
#
# You may use string methods and loops (`str.partition("->")` splits at the first arrow); numpy
# is not needed. Forbidden, under any name (`torch.ops.aten.einsum`, a reference kept in a dict):
# the einsum functions (`torch.einsum`, `numpy.einsum`, `tc.einsum`, the library's
# `parse_equation`, `opt_einsum.contract`) and `contract_path` (opt_einsum's or `tc.contract_path`):
# asking a library whether it accepts is not a validator.

# %% nbgrader={"grade": false, "grade_id": "validate_equation", "locked": false, "schema_version": 3, "solution": true, "task": false}
def validate_equation(equation: str, ndims: tuple) -> None:
    ### BEGIN SOLUTION
    def read(term, where):
        """The letters of one term, and whether it has an ellipsis."""
        letters, ellipses, i = [], 0, 0
        while i < len(term):
            char = term[i]
            if char == " ":
                i += 1
            elif char == ".":
                if term[i:i + 3] != "...":
                    raise ValueError(f"{where}: found '.' that is not part of '...'")
                ellipses += 1
                if ellipses > 1:
                    raise ValueError(f"{where}: a second '...'")
                i += 3
            elif char.isascii() and char.isalpha():
                letters.append(char)
                i += 1
            else:
                raise ValueError(f"{where}: invalid subscript {char!r}; subscripts are letters a-z, A-Z")
        return letters, ellipses == 1

    lhs, arrow, rhs = equation.partition("->")
    inputs = [read(term, f"operand {n}") for n, term in enumerate(lhs.split(","))]
    if len(inputs) != len(ndims):
        raise ValueError(f"the equation has {len(inputs)} terms for {len(ndims)} operands")
    for n, ((letters, has_ellipsis), ndim) in enumerate(zip(inputs, ndims)):
        if has_ellipsis and len(letters) > ndim:
            raise ValueError(f"operand {n}: {len(letters)} letters besides '...' for {ndim} dimensions")
        if not has_ellipsis and len(letters) != ndim:
            raise ValueError(f"operand {n}: {len(letters)} letters for {ndim} dimensions and no '...'")
    if arrow:
        output, _ = read(rhs, "output")
        used = {letter for letters, _ in inputs for letter in letters}
        for letter in output:
            if letter not in used:
                raise ValueError(f"output letter {letter!r} appears in no input")
            if output.count(letter) > 1:
                raise ValueError(f"output letter {letter!r} appears more than once")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "validate_equation_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_validate_equation(validate_equation)
### BEGIN HIDDEN TESTS
from grader.checks.nb02_einsum_parsing import check_validate_equation  # the grader's own, even if rebound

check_validate_equation(validate_equation, hidden=True)
### END HIDDEN TESTS


# %% [markdown]
# ## Exercise 3 — the size of every letter (2 points)
#
# Write `label_sizes(equation: str, *shapes) -> dict[str, int]`: for an equation without `...`
# (it may have spaces and an output), return each letter of the inputs with its length after
# broadcasting, e.g. `label_sizes("ij,jk", (2, 1), (4, 5)) == {"i": 2, "j": 4, "k": 5}`. The size
# that is not 1 wins even when it is 0 (an empty dimension): `label_sizes("ij,jk", (2, 0), (1, 3))`
# gives `j` = 0. Raise `ValueError` (not torch's `RuntimeError`) where torch raises for these shapes:
#
# - an operand with more or fewer dimensions than its term has letters;
# - a letter repeated inside one term whose axes there differ in length (1 does not broadcast
#   inside one operand);
# - a letter whose lengths in different operands differ while neither is 1.
#
# You may use string methods, loops and dicts; numpy is not needed. Forbidden: the einsum
# functions, under any name, as in exercise 2, and `contract_path` (opt_einsum's or
# `tc.contract_path`), whose report lists every letter's length.

# %% nbgrader={"grade": false, "grade_id": "label_sizes", "locked": false, "schema_version": 3, "solution": true, "task": false}
def label_sizes(equation: str, *shapes) -> dict:
    ### BEGIN SOLUTION
    terms = equation.replace(" ", "").split("->")[0].split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"{len(terms)} terms for {len(shapes)} operands")
    sizes = {}
    for n, (term, shape) in enumerate(zip(terms, shapes)):
        if len(term) != len(shape):
            raise ValueError(f"operand {n}: {len(term)} letters for shape {tuple(shape)}")
        own = {}
        for letter, length in zip(term, shape):
            if own.setdefault(letter, length) != length:
                raise ValueError(f"operand {n}: {letter!r} is repeated with lengths {own[letter]} and {length}")
        for letter, length in own.items():
            seen = sizes.get(letter, 1)
            if length != 1 and seen != 1 and length != seen:
                raise ValueError(f"{letter!r} has length {seen} and {length}, which do not broadcast")
            sizes[letter] = length if seen == 1 else seen
    return sizes
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "label_sizes_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_label_sizes(label_sizes)
### BEGIN HIDDEN TESTS
from grader.checks.nb02_einsum_parsing import check_label_sizes  # the grader's own, even if rebound

check_label_sizes(label_sizes, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## Common mistakes
#
# - **Order of appearance.** The implicit output is sorted by code point: `'ijd,jk'` is
#   `'ijd,jk->dik'`, not `'->idk'`, and `'ba'` is a transpose (shown above).
# - **Lowercase first.** Code-point order puts `'A'`–`'Z'` before `'a'`–`'z'`: `'aB'` gives `'Ba'`.
# - **Ellipsis last.** The ellipsis dimensions lead the implicit output: `'Z...a'` gives `'...Za'`.
# - **Counting per operand.** "Used once" counts over the whole equation, and a letter repeated
#   inside one operand counts twice: `'ii'` is the trace, not the diagonal.
# - **Spaces anywhere.** Spaces may separate symbols, but `'- >'` and `'. ..'` are rejected.
# - **Size 1 inside one operand.** Length 1 broadcasts across operands, never along a diagonal:
#   `'ii'` on shape (1, 3) is rejected.
# - **Relying on implicit mode.** Writing `->` makes the output explicit and readable; the
#   implicit rule is worth knowing mainly to read other people's equations.
#
# The next cell shows the first four in one go, against torch:

# %%
for inputs, shape, wrong in [("ijd,jk", [(2, 3, 4), (3, 5)], "idk"), ("aB", [(2, 3)], "aB"),
                             ("Z...a", [(2, 3, 4)], "Za..."), ("ii", [(3, 3)], "i")]:
    real = tuple(torch.einsum(inputs, *[torch.zeros(s) for s in shape]).shape)
    mistaken = tuple(torch.einsum(f"{inputs}->{wrong}", *[torch.zeros(s) for s in shape]).shape)
    print(f"{inputs!r:<10} torch's shape {str(real):<10} the mistaken '{wrong}' gives {mistaken}")

# %% [markdown]
# ## Summary
#
# - An equation is terms of letters (and at most one `...` each), separated by commas, with an
#   optional `->` and output; spaces may only stand between symbols.
# - torch rejects, with a message: invalid characters, stray dots, a second ellipsis, terms that
#   do not match the operands' number or dimensions, and output letters that are unknown or
#   repeated.
# - Without `->`: the letters used exactly once, sorted by code point (uppercase first), after
#   the ellipsis dimensions.
# - A letter's lengths must agree: exactly inside one operand, up to broadcasting of length 1
#   across operands.
#
# **Next: 03 · einsum as loops** — the definition of einsum as a program: a function that runs
# any equation as nested loops, and a generator that writes those loops as code.
