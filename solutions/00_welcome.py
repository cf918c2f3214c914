# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 00 · Welcome
#
# This course rebuilds three tools you use every day — `torch.einsum`, `einops` and
# `torch.compile` — one stage at a time. Each notebook explains a stage, asks you to write it,
# checks your code on the spot, and is graded later by the same checks.
#
# This first notebook shows how that works: what your machine has, how a check reports a pass
# and a failure, what happens at grading time, and two short warm-up exercises.
#
# **You will learn to**
# - read a check's report: a pass, a failure with its hint, and CUDA cases left pending;
# - tell which functions an exercise forbids, and what a check does when you call one;
# - know how your notebook is graded: hidden random cases, a time limit per cell, points;
# - write two warm-ups with broadcasting: an outer product and rows normalised to sum 1.
#
# **Time:** about 20 minutes. **Builds on:** basic Python and a first look at PyTorch tensors.

# %% [markdown]
# ## Your environment
#
# The course needs Python ≥ 3.10, PyTorch, NumPy and einops. A GPU is optional: every check runs
# on the CPU, and also on CUDA where `torch.cuda.is_available()` is true.

# %% nbgrader={"grade": false, "grade_id": "environment", "locked": true, "schema_version": 3, "solution": false, "task": false}
import os
import platform

import einops
import numpy
import torch

print(f"python    {platform.python_version()}")
print(f"torch     {torch.__version__}")
print(f"numpy     {numpy.__version__}")
print(f"einops    {einops.__version__}")
print(f"CPU cores {os.cpu_count()}")
if torch.cuda.is_available():
    print(f"GPU       {torch.cuda.get_device_name(0)}")
else:
    print("GPU       none (torch.cuda.is_available() is False): checks run on the CPU only")

# %% [markdown]
# ## How a check works
#
# Every exercise comes with a function `check_<exercise>`, imported from the notebook's checks
# module (here `grader.checks.nb00_welcome`, in the cell below). You pass it
# **your function** (not its result); it calls your function on a set of cases, compares each
# result with the answer of the real tool (here, PyTorch itself), and prints one line per group
# of cases: `✓` when the group passes, `✗` with the first failing case, what was expected, what
# came back, and a hint. Groups it could not run (CUDA cases on a machine without a GPU) are
# marked `…` *pending*: they are neither passed nor failed.
#
# A demonstration, not graded: `square(x)` must multiply every entry of `x` by itself.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
from grader.checks.nb00_welcome import check_normalize_rows, check_outer, check_square


# %%
def square(x):
    return x * x


check_square(square)


# %% [markdown]
# A wrong answer fails, and the check says how. Below, `square_wrong` doubles instead of
# squaring. The check raises `AssertionError` after printing its report — that error is what
# scores a graded cell 0. (Here we catch it, so that *Run All* goes on past the demonstration.)

# %%
def square_wrong(x):
    return x * 2


try:
    check_square(square_wrong)
except AssertionError as error:
    print(f"\nAssertionError: {error}")

# %% [markdown]
# The hint names the mistake, not only the mismatch: the course keeps a list of plausible wrong
# answers for every exercise (*mutants*, in `grader.mutants`), each with the hint a learner who
# made it needs. When your wrong result equals a mutant's result, you get that mutant's hint.
# These are the mutants of `square`:

# %%
from grader.mutants import mutants_for

for wrong in mutants_for("nb00_welcome.square"):
    print(f"{wrong.name:18} → {wrong.hint}")

# %% [markdown]
# A check also fails a function that changes its input in place, even when the result is right:
# the tools you rebuild return a new tensor and leave their inputs as they were. Augmented
# assignments (`x *= x`) and methods ending in `_` (`x.mul_(x)`) change the caller's tensor:

# %%
def square_in_place(x):
    x *= x
    return x


try:
    check_square(square_in_place)
except AssertionError as error:
    print(f"\nAssertionError: {error}")

# %% [markdown]
# ## Forbidden functions: tripwires
#
# An exercise that rebuilds a tool forbids calling that tool. While a check runs your function,
# each forbidden function is replaced by a *tripwire* that raises an error naming it; afterwards
# the original comes back. (Where an exercise says so, the check also watches the operations your
# function runs, so another name for a forbidden function fails just the same.) `square` may not
# call `torch.square`:

# %%
def square_delegating(x):
    return torch.square(x)


try:
    check_square(square_delegating)
except AssertionError as error:
    print(f"\nAssertionError: {error}")

print("\nafter the check, torch.square works again:", torch.square(torch.tensor([3.0])))


# %% [markdown]
# Exercise 1 below forbids `torch.outer` under any name. Calling it as `torch.ops.aten.outer` (the
# operator's name inside PyTorch) fails too, because the check watches the operation, not the name:

# %%
def outer_by_another_name(a, b):
    return torch.ops.aten.outer(a, b)


try:
    check_outer(outer_by_another_name)
except AssertionError as error:
    print(f"\nAssertionError: {error}")


# %% [markdown]
# ## Hidden tests and seeds
#
# A graded cell runs the public check you see, then — at grading time only — the same check
# with `hidden=True`: random cases drawn from a seed chosen when it runs, so an answer that
# hard-codes the public cases fails. The seed is printed; setting the environment variable
# `TENSORCRAFT_CHECK_SEED` replays exactly the same cases. (While grading, the variable is
# ignored, so that a notebook cannot choose its own hidden cases.)

# %%
from grader.checks.seed import SEED_VARIABLE

os.environ[SEED_VARIABLE] = "2024"
check_square(square, hidden=True)
del os.environ[SEED_VARIABLE]

# %% [markdown]
# Behind the check, the seed drives a random generator that draws the cases: the same seed draws
# the same inputs, another seed draws others.

# %%
from grader.checks.nb00_welcome import SQUARE


def drawn(seed):
    return [case.args[0] for group in SQUARE.hidden(torch.Generator().manual_seed(seed)) for case in group.cases]


print("shapes drawn with seed 2024:", [tuple(x.shape) for x in drawn(2024)])
print("seed 2024 again, same inputs:", all(torch.equal(a, b) for a, b in zip(drawn(2024), drawn(2024))))
print("shapes drawn with seed 2025:", [tuple(x.shape) for x in drawn(2025)])

# %% [markdown]
# An answer that only knows the public cases passes them and fails the hidden ones:

# %%
PUBLIC_ANSWERS = {(1.0, -2.0, 3.0): torch.tensor([1.0, 4.0, 9.0]), (0.5,): torch.tensor([0.25]),
                  (0.0, 1.0, 2.0, 3.0, 4.0, 5.0): torch.tensor([[0.0, 1.0, 4.0], [9.0, 16.0, 25.0]])}


def square_memorised(x):
    return PUBLIC_ANSWERS[tuple(x.flatten().tolist())].to(x.device)   # on the input's device, GPU too


check_square(square_memorised)
try:
    check_square(square_memorised, hidden=True)
except AssertionError as error:
    print(f"\nAssertionError: {error}")

# %% [markdown]
# ## How grading works
#
# When you hand in a notebook, your instructor runs `python -m grader autograde` on the class's
# submissions. It restores every locked cell and every test cell to its original text (editing
# them changes nothing), runs your notebook top to bottom in a fresh kernel, and scores each
# graded test cell with nbgrader's rule: full points when the cell ran without an error output,
# 0 when it has one. Here is that rule, applied to a test cell worth 2 points:

# %%
import nbformat
from nbgrader.utils import determine_grade

test_cell = nbformat.v4.new_code_cell("check_outer(outer)", metadata={"nbgrader": {
    "grade": True, "grade_id": "demo_tests", "points": 2, "solution": False, "locked": True}})
print("ran without an error:  (score, points) =", determine_grade(test_cell))
test_cell.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="check_outer: ...", traceback=[])]
print("raised AssertionError: (score, points) =", determine_grade(test_cell))

# %% [markdown]
# Each cell has a time limit (30 s by default): a cell that runs longer is interrupted and has an
# error output, so it scores 0, and the cells after it still run. A cell that kills its kernel
# scores 0, and so does every cell after it, since everything the notebook had computed is gone.
# The cell below grades a four-cell notebook with a 1-second limit, exactly as the grader runs
# yours (it starts a second kernel, so it takes a few seconds; it is skipped while grading).

# %%
from grader.worker.execute import GuardedExecute

if os.environ.get("NBGRADER_EXECUTION") != "autograde":
    demo = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("while True:\n    pass"),
        nbformat.v4.new_code_cell("print('the cell after a timeout runs')"),
        nbformat.v4.new_code_cell("import os\nos.kill(os.getpid(), 9)"),
        nbformat.v4.new_code_cell("print('never printed')"),
    ])
    GuardedExecute(timeout=1).preprocess(demo, {"metadata": {"path": "."}})
    for cell in demo.cells:
        outputs = [o.get("text", "").strip() or o.ename + (f": {o.evalue}" if o.evalue else "") for o in cell.outputs]
        source = " / ".join(line.strip() for line in cell.source.splitlines())  # the whole cell, on one line
        print(f"{source:<38} -> {' | '.join(outputs)}")

# %% [markdown]
# Your feedback shows your notebook with each test cell's output and score, but not the source of
# the hidden tests. A GPU never changes a grade: the checks always run on the CPU; CUDA cases,
# where a GPU is present, add verification and are reported, and where none is present they are
# *pending*.

# %% [markdown]
# ## Exercise 1 — outer product by broadcasting (2 points)
#
# Write `outer(a, b)` for two 1-D tensors `a` (length n) and `b` (length m): the n × m tensor
# with `result[i, j] = a[i] * b[j]`, of the inputs' dtype. Use broadcasting: indexing with
# `None` adds an axis of length 1 (`a[:, None]` has shape (n, 1)), and multiplying tensors of
# shapes (n, 1) and (1, m) repeats each along the other's axis. Leave `a` and `b` unchanged.
#
# **Allowed:** torch operations on tensors (indexing, `*`, `reshape`, `unsqueeze`...).
# **Forbidden:** `torch.outer`, `torch.ger`, `torch.einsum`, `torch.tensordot` and `torch.kron`, under
# any name (`torch.ops.aten.outer`, a method, a reference kept in a variable: the check watches the
# operations themselves), and numpy (no `.numpy()`, no `np.outer`): this exercise is about torch.

# %% nbgrader={"grade": false, "grade_id": "outer", "locked": false, "schema_version": 3, "solution": true, "task": false}
def outer(a, b):
    ### BEGIN SOLUTION
    return a[:, None] * b[None, :]
    ### END SOLUTION


# %% [markdown]
# Indexing with `None`, and what shape a product of broadcast shapes has:

# %%
v = torch.arange(3)
print(v.shape, v[:, None].shape, v[None, :].shape)
print((torch.ones(2, 1) * torch.ones(1, 5)).shape)

# %% nbgrader={"grade": true, "grade_id": "outer_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_outer(outer)
### BEGIN HIDDEN TESTS
from grader.checks.nb00_welcome import check_outer  # the grader's own, even if the notebook rebound the name

check_outer(outer, hidden=True)
### END HIDDEN TESTS


# %% [markdown]
# ## Exercise 2 — normalise the rows (2 points)
#
# Write `normalize_rows(x)` for a 2-D tensor `x` of positive entries: each row divided by its own
# sum, so that every row of the result sums to 1. `x.sum(dim=1)` adds up each row (it sums over
# dimension 1, the column index); with `keepdim=True` the summed dimension stays, with length 1,
# so that the sums broadcast against `x`. Return a new tensor and leave `x` unchanged (`x / s`,
# not `x /= s`). **Allowed:** torch operations. **Forbidden:** `torch.nn.functional.normalize` (under
# any name) and numpy.

# %% nbgrader={"grade": false, "grade_id": "normalize_rows", "locked": false, "schema_version": 3, "solution": true, "task": false}
def normalize_rows(x):
    ### BEGIN SOLUTION
    return x / x.sum(dim=1, keepdim=True)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "normalize_rows_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_normalize_rows(normalize_rows)
### BEGIN HIDDEN TESTS
from grader.checks.nb00_welcome import check_normalize_rows  # the grader's own, even if rebound

check_normalize_rows(normalize_rows, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## What's next
#
# The following notebooks rebuild `torch.einsum`, then `einops`, then `torch.compile`, one stage
# at a time, with checks like the ones above.
