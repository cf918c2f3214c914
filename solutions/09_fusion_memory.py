# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 09 · Operator fusion and memory planning
#
# Two optimisations make most of the difference between eager PyTorch and compiled code on chains
# of small operations: **fusion** (several operations in one loop, so that the values in between
# never go to memory) and **memory planning** (reusing the buffers of values that have died). This
# notebook measures why fusion pays, states the rules that say what may be fused, and then lets you
# write the fusion grouping, the liveness analysis and the buffer planner of `tensorcraft.compile`.
#
# **You will learn to**
# - count the bytes an elementwise chain moves, eagerly and fused, and measure the difference;
# - tell which operations may share a kernel (elementwise, broadcast, a reduction at the end) and
#   which may not (opaque operations such as matmul), and why a bad grouping makes a cycle;
# - compute how long each value must stay in memory, through views and up to the returned values;
# - assign buffers to reusable slots without ever overwriting a live value, and read the peak memory
#   off a timeline, before and after planning.
#
# **Time:** about 60 minutes. **Builds on:** 07 (graph capture: the `Graph` of `Node`s) and 08
# (graph passes: a pass takes a graph and returns a graph).
#
# Each exercise replaces one stage of `tensorcraft.compile`, and its check compiles small programs
# with your stage in the pipeline and compares their results with eager PyTorch.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math
import os
import time

import matplotlib.pyplot as plt
import torch

import tensorcraft as tc
from grader.checks.nb09_fusion_memory import (FusionRuleBroken, check_group_fusible, check_groups,
                                              check_plan_memory, check_storage_lifetimes)
from tensorcraft.compiler.capture import capture
from tensorcraft.compiler.draw import draw_graph
from tensorcraft.compiler.passes.fusion import Group, classify, fuse_elementwise, group_fusible
from tensorcraft.compiler.pipeline import compile_graph
from tensorcraft.compiler.passes.memory_plan import (MemoryPlan, Slot, frees_at_last_use, is_kernel_output,
                                                      measure_peaks, memory_timeline, storage_lifetimes)
from tensorcraft.timing import time_call

torch.manual_seed(0)
torch.set_num_threads(2)
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by the grader while it runs this notebook
# seconds of calls per timing: while grading shorter, still the median of five blocks or more with
# their spread; 0.2 s is time_call's own default
TIMING_S = 0.02 if GRADING else 0.2


def graph_of(fn, *inputs):
    """The graph tensorcraft captures from one call of fn (what the passes start from)."""
    return capture(fn, inputs).graph


# %% [markdown]
# ## 1. Why fusion pays: bytes moved
#
# An elementwise operation such as `x * 2.0` reads every element of its input and writes every
# element of its output. For a float32 tensor of `n` elements that is `4n` bytes read and `4n`
# bytes written, for one multiplication per element: the processor waits for memory far longer
# than it computes. Eager PyTorch runs a chain of such operations one at a time, so every value in
# between is written to memory and read back by the next operation.
#
# A fused kernel runs the whole chain inside one loop: it reads each input element once, keeps the
# values in between in registers, and writes only the result. The function below counts the bytes
# a graph moves, assuming each operation reads each of its inputs once and writes its output once
# (a view moves nothing; a fused kernel reads its inputs and writes its outputs).

# %%
def bytes_moved(graph):
    """Bytes read and written by the operations of a graph, each input read once, each output written once."""
    users = graph.users()
    total = 0
    for node in graph.nodes:
        if node.kind == "kernel":
            outputs = [u for u in users[node] if is_kernel_output(u)]
            total += sum(i.nbytes for i in node.inputs) + sum(o.nbytes for o in outputs)
        elif node.kind == "call" and node.aliases is None and not is_kernel_output(node):
            total += sum(i.nbytes for i in node.inputs) + node.nbytes
    return total


def chain(x):
    y = x * 2.0 + 1.0
    y = torch.relu(y) * 0.5 - 0.25
    return torch.abs(y) * 3.0 + 2.0


n = 1 << 23                               # 32 MiB of float32: more than the processor's caches hold
if GRADING:
    n = 1 << 21
    print("while grading, 8 MiB stands in for 32 MiB (a quarter of the time)")
x = torch.randn(n)
compiled_chain = tc.compile(chain)        # the default backend on CPU: a C kernel with OpenMP
start = time.perf_counter()
compiled_chain(x)                         # the first call captures, fuses, writes C and compiles it
print(f"first call (capture, passes, C compiler): {time.perf_counter() - start:.2f} s")

eager_graph = compiled_chain.compiled.captured
fused_graph = compiled_chain.compiled.optimized
print(f"eager: {eager_graph.count(kind='call')} operations, {bytes_moved(eager_graph) / 2**20:.0f} MiB moved")
print(f"fused: {fused_graph.count(kind='kernel')} kernel,     {bytes_moved(fused_graph) / 2**20:.0f} MiB moved")
print("same result as eager:", torch.allclose(compiled_chain(x), chain(x)))

# %% [markdown]
# Each of the eight operations reads one tensor of `n` float32 values (`4n` bytes) and writes one:
# `8 × 8n = 64n` bytes in all. The fused kernel reads `x` once and writes the result once: `8n`
# bytes, eight times less. Now the clocks, measured side by side in the same run (each the median
# of repeated calls, with the interquartile range, because other programs share this machine):

# %%
eager_t, fused_t = time_call(chain, x, min_run_time=TIMING_S), time_call(compiled_chain, x, min_run_time=TIMING_S)
eager_ms, fused_ms = 1e3 * eager_t.median, 1e3 * fused_t.median
print(f"eager {eager_t}, fused {fused_t}: fused is {eager_ms / fused_ms:.1f}x faster")

fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3))
left.bar(["eager", "fused"], [bytes_moved(eager_graph) / 2**20, bytes_moved(fused_graph) / 2**20],
         color=["#9ecae1", "#fd8d3c"])
left.set_ylabel("MiB moved (counted)")
right.bar(["eager", "fused"], [eager_ms, fused_ms], color=["#9ecae1", "#fd8d3c"],
          yerr=[[1e3 * (t.median - t.low) for t in (eager_t, fused_t)],
                [1e3 * (t.high - t.median) for t in (eager_t, fused_t)]], capsize=4)
right.set_ylabel("ms per call (median, IQR bar)")
fig.suptitle(f"8 elementwise operations on {n:,} float32 values")
plt.tight_layout()
plt.show()

# %% [markdown]
# The measured ratio is not exactly the ratio of bytes: eager also allocates a fresh 32 MiB buffer
# for every result (and the operating system must hand out its pages), and the timings of a shared
# machine vary from run to run (the interquartile ranges say by how much). The same chain on a 1 MiB tensor,
# which fits in the processor's cache, changes the balance: its bytes no longer come from main
# memory, and the fixed cost of each eager call (microseconds of Python and dispatch) weighs more.
# A new shape, so `tc.compile` compiles once more:

# %%
small = torch.randn(1 << 18)                  # 1 MiB
compiled_chain(small)
eager_small, fused_small = (time_call(chain, small, min_run_time=TIMING_S),
                             time_call(compiled_chain, small, min_run_time=TIMING_S))
print(f"1 MiB:  eager {eager_small}, fused {fused_small}: {eager_small.median / fused_small.median:.1f}x")
print(f"{4 * n // 2**20} MiB: eager {eager_t}, fused {fused_t}: {eager_ms / fused_ms:.1f}x")

# %% [markdown]
# The ratio depends on the size, and the fused kernel is faster at both. On large tensors, where
# every operation streams its bytes from and to main memory, the time goes to moving bytes, not to
# arithmetic: that is what fusion removes.
#
# ## 2. What the fusion pass makes of a graph
#
# `fuse_elementwise` is the pass that does this inside `tensorcraft.compile`. It asks the stage
# `group_fusible(graph)` which nodes go together, and replaces each group of two or more nodes by
# one `kernel` node. Here is a small model with a matmul in the middle, before and after:

# %%
def block(x, b, w, y):
    h = torch.tanh(x @ w + b) * 3.0
    return torch.sigmoid(h @ w) + 1.0


inputs = (torch.randn(4, 6), torch.randn(6), torch.randn(6, 6), torch.randn(4, 6))
before = graph_of(block, *inputs)
after = fuse_elementwise(before)
fig, axes = plt.subplots(1, 2, figsize=(11, 5))
draw_graph(before, ax=axes[0], title="captured: one node per torch call")
draw_graph(after, ax=axes[1], title="after fuse_elementwise: kernels (orange)")
plt.show()
print(after)

# %% [markdown]
# The two matmuls stay torch calls: a matrix product is not elementwise (each output element reads
# a whole row and a whole column), so tensorcraft, like Inductor, calls an optimised library for it
# (an *extern kernel*). The glue around them, `+ b`, `tanh`, `* 3.0` and `sigmoid`, `+ 1.0`,
# becomes two kernels. Each `getitem` node reads one output of a kernel.
#
# ## 3. The fusion rules
#
# `classify(node)` says what a node computes inside a kernel, or `None` when it cannot go in one.
# Elementwise operations are fusible; so is a sum, mean, max or min over the **last** axis. The
# node's **iteration shape** is the shape the kernel loops over: an elementwise node's own shape, a
# reduction's *input* shape (the loop runs over the whole row, and the result is one value per row).

# %%
def rules(x, b, w):
    y = x * 2.0 + b                       # b has shape [6]: it broadcasts along the rows
    s = y.sum(-1, keepdim=True)           # a reduction over the last axis: shape [4, 1]
    z = y / s                             # reads the reduction
    return z @ w, y.reshape(-1)           # a matmul and a view


g = graph_of(rules, torch.randn(4, 6), torch.randn(6), torch.randn(6, 6))
for node in g.nodes:
    if node.kind == "call":
        m = classify(node)
        what = "opaque (None)" if m is None else (f"reduction '{m.reduce}'" if m.reduce else f"elementwise '{m.op}'")
        space = None if m is None else (m.operands[0].shape if m.reduce else node.shape)
        print(f"{node.name:8} {node.op:8} shape {str(list(node.shape)):8} -> {what:20} iteration shape {space}")

# %% [markdown]
# What the table shows, rule by rule:
#
# - **Elementwise** nodes (`mul`, `add`, `div`) are fusible; the add reads `b` of shape [6] and still
#   iterates over [4, 6]: a broadcast input is read with a stride of 0 along the rows, so it fuses.
# - A **reduction** over the last axis (`sum`) is fusible, with the iteration shape of its input:
#   it can end the group that computes `y`. But a node that *reads* the reduction (`z = y / s`)
#   cannot be in the same group: `s` is known only when the loop has gone through the whole row,
#   and by then the kernel has already passed the elements `z` needs. So `z` starts a new kernel.
# - **Opaque** nodes (`matmul`, and `reshape`, a view) are not fusible: `classify` returns `None`.
#
# ## 4. The cycle problem
#
# A kernel is **one** node of the graph: it runs at one moment, reads all its inputs first and
# writes all its outputs then. So a group must not have a path that leaves it and comes back. Take
# `a = tanh(x + b); m = a @ w; out = a * m + 1`. Putting `a * m + 1` in the group of `tanh` looks
# like a longer chain, but the matmul needs `a` (the kernel must run before it) and the kernel needs
# `m` (it must run after it):

# %%
def cyclic(x, b, w, y):
    a = torch.tanh(x + b)
    m = a @ w
    return a * m + 1.0


g = graph_of(cyclic, *inputs)
fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
draw_graph(g, ax=axes[0], title="captured: a * m + 1 reads tanh directly and through the matmul")
ax = axes[1]
boxes = {"x, b": (0, 2), "kernel?\nadd, tanh, mul, add": (0, 1), "matmul\n(reads a)": (1.3, 1.5), "w": (1.3, 2.4)}
for text, (bx, by) in boxes.items():
    ax.text(bx, by, text, ha="center", va="center", fontsize=8,
            bbox={"boxstyle": "round", "fc": "#fdd0a2" if "kernel" in text else "#c6dbef"})
arrow = {"arrowstyle": "->", "color": "#555555"}
ax.annotate("", xy=(0, 1.15), xytext=(0, 1.85), arrowprops=arrow)
ax.annotate("", xy=(1.3, 1.65), xytext=(1.3, 2.25), arrowprops=arrow)
red = {**arrow, "color": "#d62728", "lw": 1.5}
ax.annotate("", xy=(1.0, 1.55), xytext=(0.5, 1.1), arrowprops={**red, "connectionstyle": "arc3,rad=-0.3"})
ax.annotate("", xy=(0.5, 0.9), xytext=(1.3, 1.35), arrowprops={**red, "connectionstyle": "arc3,rad=-0.3"})
ax.text(0.55, 1.45, "a", color="#d62728", fontsize=11)
ax.text(1.1, 0.95, "m", color="#d62728", fontsize=11)
ax.set_xlim(-0.8, 2.1)
ax.set_ylim(0.5, 2.7)
ax.axis("off")
ax.set_title("one kernel for all four: a cycle (red)")
plt.show()

# %% [markdown]
# The fusion pass prevents this with one rule: **once a node outside a group has read one of the
# group's values, the group is sealed**, and no later node may join it. Here the matmul reads `a`,
# so the group of `tanh` is sealed and `a * m + 1` starts its own kernel. The rule also covers a
# case without a cycle: if `a * 2.0 + 1.0` (which does not read `m`) joined the group, the kernel,
# which runs where its last member was, would run after the matmul that needs `a`. With the
# library's grouping (recomputation switched off, as in the exercise) we get three operations:

# %%
with tc.substitute(group_fusible=lambda graph: group_fusible.library(graph, recompute=False)):
    print(fuse_elementwise(g))

# %% [markdown]
# ## Exercise 1 — the fusion grouping (4 points)
#
# Write `group_fusible(graph) -> list[Group]`, the stage `fuse_elementwise` asks which nodes to
# fuse. Walk `graph.nodes` in order (it is topological: a node comes after its inputs) and keep, for
# each node, the group it is in. For each node whose `classify(node)` is not `None`:
#
# 1. its iteration shape is `tuple(node.shape)`, or for a reduction (`meaning.reduce` is not None)
#    `tuple(meaning.operands[0].shape)`;
# 2. it **joins the group of the first of its inputs** (`node.inputs`, in order) whose group
#    - has the same `shape` (iteration shape), `dtype` and `device`,
#    - holds none of the node's inputs that is a reduction (`classify(i).reduce is not None`),
#    - is not `sealed`;
# 3. if there is no such group, it starts one: `Group(len(groups), shape, node.dtype, node.device)`,
#    and the node is appended to `group.members`.
#
# Then, for **every** node (fusible or not): every group that one of its inputs is in, and that the
# node itself did not join, becomes sealed (`group.sealed = True`). Return the groups with two or
# more members (a group of one is just the torch call it was).
#
# The check compiles programs with your function in the pipeline
# (`tc.substitute(group_fusible=...)`). Each group is checked for legality (fusible nodes, one
# iteration shape, no reader of a reduction in the reduction's group, no cycle, no reader outside
# the group before the kernel runs); the compiled program must return what eager PyTorch returns;
# and it must run no more operations (kernels plus the torch calls left) than these rules reach.
# You may use plain Python over the graph's nodes; numpy is not needed. The library's own grouping
# is forbidden.

# %% nbgrader={"grade": false, "grade_id": "group_fusible", "locked": false, "schema_version": 3, "solution": true, "task": false}
def my_group_fusible(graph):
    ### BEGIN SOLUTION
    groups, group_of = [], {}
    for node in graph.nodes:
        meaning = classify(node)
        if meaning is not None:
            shape = tuple(meaning.operands[0].shape) if meaning.reduce else tuple(node.shape)
            chosen = None
            for i in node.inputs:
                g = group_of.get(i)
                if g is None or g.sealed or g.shape != shape or g.dtype != node.dtype or g.device != node.device:
                    continue
                if any(group_of.get(j) is g and classify(j).reduce is not None for j in node.inputs):
                    continue
                chosen = g
                break
            if chosen is None:
                chosen = Group(len(groups), shape, node.dtype, node.device)
                groups.append(chosen)
            chosen.members.append(node)
            group_of[node] = chosen
        for i in node.inputs:
            if i in group_of and group_of[i] is not group_of.get(node):
                group_of[i].sealed = True
    return [g for g in groups if len(g.members) >= 2]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "group_fusible_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
check_group_fusible(my_group_fusible)
### BEGIN HIDDEN TESTS
from grader.checks.nb09_fusion_memory import check_group_fusible  # the grader's own, even if the notebook rebound the name

check_group_fusible(my_group_fusible, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# Your grouping inside `tc.compile`, on the small block of section 2, and the graph it leads to:

# %%
try:
    with tc.substitute(group_fusible=my_group_fusible):
        print("same as eager:", torch.allclose(tc.compile(block, backend="python")(*inputs), block(*inputs)))
        yours = fuse_elementwise(before)
    print(f"{yours.count(kind='kernel')} kernels; {len(before)} nodes captured, {len(yours)} after fusion")
except NotImplementedError:
    print("my_group_fusible is not written yet: solve exercise 1, then run this cell again")

# %% [markdown]
# ## 5. Liveness: how long a value needs its memory
#
# The code a compiler generates deletes each intermediate right after the last node that reads it,
# so that its memory can go back (or be reused). "Right after the last reader" needs care in two
# places:
#
# - **Views.** `h.reshape(-1)` (on a contiguous `h`) and `h.t()` make no copy: they look into the
#   memory of `h`. A node records this in `node.aliases`, and `node.storage` follows the chain to the
#   node that owns the memory. A reader of a view needs the memory of `node.storage`.
# - **Returned values.** What the function returns is still needed after its last node: the caller
#   holds it. Its memory lives to the end, `len(graph.nodes)`.
#
# `storage_lifetimes(graph)` answers, for every node, the last step (node index) at which its
# memory is still needed. Here it is on a program with a view and a returned view:

# %%
def with_views(x, b, w, y):
    h = torch.tanh(x * 2.0 + b)
    v = h.reshape(-1)                     # a view of h
    z = torch.sigmoid(x @ w) * 3.0
    return v.view(x.shape) * (z @ w) + 1.0, h.t()   # h.t() is returned: h lives to the end


g = graph_of(with_views, *inputs)
life = storage_lifetimes(g)
for i, node in enumerate(g.nodes):
    view = f"view of {node.storage.name}" if node.aliases is not None else ""
    readers = [g.nodes.index(u) for u in g.users()[node]]
    print(f"step {i:2}  {node.name:10} {view:14} read at steps {str(readers):10} memory needed until step {life[node]}")
print("len(graph.nodes) =", len(g.nodes))

# %% [markdown]
# `tanh` itself is read only by `reshape` and `t`, both views. Its memory is needed until the
# last reader of any of its views, and here even longer: the view `t` is returned, so the memory of
# `tanh` lives until `len(graph.nodes)`. The entries of the view nodes stay at their own step: a
# view owns no memory; what counts is the storage it looks into.
#
# ## Exercise 2 — liveness (2 points)
#
# Write `storage_lifetimes(graph) -> dict[Node, int]`: start every node at its own index; for every
# node at index `i` and every one of its `node.inputs`, raise the entry of `input.storage` to `i`
# (the largest reader wins); finally, every value the output node reads (`graph.output.inputs`)
# keeps its storage until `len(graph.nodes)`.
#
# The check runs `tc.compile` with your function in place of the library's (the library's planner
# decides which buffers to reuse from your lifetimes), compares the results with eager PyTorch, and
# compares your steps, node by node, with the library's. You may use plain Python; numpy is not
# needed. The library's own `storage_lifetimes` is forbidden.

# %% nbgrader={"grade": false, "grade_id": "storage_lifetimes", "locked": false, "schema_version": 3, "solution": true, "task": false}
def my_storage_lifetimes(graph):
    ### BEGIN SOLUTION
    lifetime = {node: i for i, node in enumerate(graph.nodes)}
    for i, node in enumerate(graph.nodes):
        for value in node.inputs:
            lifetime[value.storage] = max(lifetime[value.storage], i)
    for value in graph.output.inputs:
        lifetime[value.storage] = len(graph.nodes)
    return lifetime
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "storage_lifetimes_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
check_storage_lifetimes(my_storage_lifetimes)
### BEGIN HIDDEN TESTS
from grader.checks.nb09_fusion_memory import check_storage_lifetimes  # the grader's own

check_storage_lifetimes(my_storage_lifetimes, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## 6. Buffer reuse and the peak
#
# Every fused kernel writes its outputs into buffers. Allocating a fresh buffer for each one, each
# call, costs time (fresh pages) and memory. The **memory plan** keeps a few buffers, called
# *slots*, for the whole life of the compiled function, and hands each kernel output a slot whose
# previous value has died. Two values may share a slot only if their lifetimes do not overlap.
#
# One detail decides correctness: a kernel reads its inputs **while** it writes its outputs. So the
# slot of a value whose last use is the kernel at step `k` is not free for that kernel's own
# outputs: it becomes free only for kernels after step `k`. The library writes it as
# `lifetime[old] < step of the new value's kernel` — strictly less.
#
# Inductor sometimes does what this rule forbids. In notebook 10's wrapper, the GELU kernel writes
# its result into the buffer of its own input, the matmul's result (`buf1 = buf0; del buf0  #
# reuse`, and the kernel's one parameter is `in_out_ptr0`); in the softmax of the common mistakes
# below, the division writes its result over `e`, the value it reads. Inductor does
# it only where it has checked the kernel's indexing: the input dies at that kernel, and each
# output element is written at the very place, in the same layout, where the kernel has just read
# the input's element, so no element is read after it has been overwritten. A kernel that reads
# its input anywhere else (reversed, transposed, broadcast, or a whole row for a reduction while
# it writes the row) would read values it has already overwritten. tensorcraft's planner does not
# look at indexing, so it keeps the rule that is safe for every kernel. A loop that reads `a`
# reversed while it writes into `a` shows what goes wrong:

# %%
a = torch.arange(6.0)
own_buffer = a.flip(0) + 1.0        # the kernel out[i] = a[5 - i] + 1, writing a buffer of its own
for i in range(6):                  # the same kernel, given a's buffer for its output
    a[i] = a[5 - i] + 1.0
print("own buffer:", own_buffer.tolist())
print("in place:  ", a.tolist())

# %% [markdown]
#
# Here is a model with five layers, compiled, and the bytes its values hold at each step, three ways:
# every value kept (no planning), each value freed after its last use (what eager PyTorch does),
# and with the plan (slots held all along, plus the torch calls' own results freed at last use):

# %%
def layers(x, b, w, y):
    for _ in range(5):
        x = torch.tanh(x * 2.0 + b) @ w
    return torch.sigmoid(x) + y


big = (torch.randn(256, 256), torch.randn(256), torch.randn(256, 256) / 16, torch.randn(256, 256))
compiled_layers = tc.compile(layers, backend="python")
print("same as eager:", torch.allclose(compiled_layers(*big), layers(*big), atol=1e-6))
graph, plan = compiled_layers.compiled.optimized, compiled_layers.compiled.plan
print(plan.summary())


def plot_timeline(graph, plan, title):
    line = memory_timeline(graph, plan)
    steps = range(len(graph.nodes))
    plt.figure(figsize=(8, 3))
    plt.step(steps, [b / 2**10 for b in line.unplanned], where="post", label="no planning: every value kept")
    plt.step(steps, [b / 2**10 for b in line.eager], where="post", label="freed at last use (eager)")
    plt.step(steps, [b / 2**10 for b in line.planned], where="post", label="planned: slots + freed at last use")
    plt.xlabel("step (node index)")
    plt.ylabel("KiB held")
    plt.title(title)
    plt.legend(fontsize=8)
    plt.tight_layout()
    plt.show()


plot_timeline(graph, plan, "memory over the steps of the compiled five-layer model")

# %% [markdown]
# The kernel outputs (`tanh` of each layer) all share **one** slot: each dies when its matmul has
# read it, before the next kernel writes. The plan holds that 256 KiB slot from the first step (the
# green line starts above the orange one), and its peak is the eager peak; without freeing, the
# memory grows with every value (blue). The slot also means that on later calls no kernel output
# costs a fresh allocation.
#
# ## Exercise 3 — the buffer planner (4 points)
#
# Complete `plan_memory(graph) -> MemoryPlan`. The template fills in the bookkeeping
# (`plan.last_use` and `plan.frees_after`, which the wrapper's `del` lines use) and, at the end, the
# byte counts; you assign the slots. Go through `graph.nodes` in order and look only at kernel
# outputs (`is_kernel_output(node)`). For each one:
#
# - if its memory is returned (it is in `returned`), add it to `plan.fresh` and go on;
# - its kernel runs at step `written_at = step[node.args[0]]` (its first argument is the kernel node);
# - a slot is **free** when the value it last received is no longer needed before that step
#   (`busy_until[slot] < written_at`, strictly) and it has the node's `dtype` and `device`;
# - among the free slots, take the smallest with `numel >= math.prod(node.shape)`; if none is large
#   enough, take the largest free one and grow it (`slot.numel = numel`); if none is free, append
#   `Slot(numel, node.dtype, node.device)` to `plan.slots`;
# - record `plan.slot_of[node] = slot` and `busy_until[slot] = lifetime[node]`.
#
# The check compiles programs with your planner, verifies that no slot is handed to a value while
# its previous value is still needed, that slots have the value's dtype, device and size, that
# returned values never sit in a slot; that the plan uses the fewest slots possible (the most values
# alive at once) and that its peak stays within what that many slots need; and that the results
# equal eager PyTorch's. You may use plain Python; numpy is not needed. The library's own
# `plan_memory` is forbidden. A slot lives on its value's device (`node.device`): one case runs on
# the `meta` device (tensors with a shape and a dtype but no values), so that a slot created on the
# CPU whatever the values' device shows without a GPU.

# %% nbgrader={"grade": false, "grade_id": "plan_memory", "locked": false, "schema_version": 3, "solution": true, "task": false}
def my_plan_memory(graph):
    plan = MemoryPlan()
    plan.last_use, plan.frees_after = frees_at_last_use(graph)
    lifetime = storage_lifetimes(graph)
    step = {node: i for i, node in enumerate(graph.nodes)}
    returned = {value.storage for value in graph.output.inputs}
    busy_until = {}  # slot index -> the last step its current value is needed
    ### BEGIN SOLUTION
    for node in graph.nodes:
        if not is_kernel_output(node):
            continue
        if node in returned:
            plan.fresh.add(node)
            continue
        numel = math.prod(node.shape)
        written_at = step[node.args[0]]
        free = [s for s, until in busy_until.items() if until < written_at
                and plan.slots[s].dtype == node.dtype and plan.slots[s].device == node.device]
        fitting = [s for s in free if plan.slots[s].numel >= numel]
        if fitting:
            slot = min(fitting, key=lambda s: plan.slots[s].numel)
        elif free:
            slot = max(free, key=lambda s: plan.slots[s].numel)
            plan.slots[slot].numel = numel
        else:
            plan.slots.append(Slot(numel, node.dtype, node.device))
            slot = len(plan.slots) - 1
        plan.slot_of[node] = slot
        busy_until[slot] = lifetime[node]
    ### END SOLUTION
    return measure_peaks(graph, plan)


# %% nbgrader={"grade": true, "grade_id": "plan_memory_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
check_plan_memory(my_plan_memory)
### BEGIN HIDDEN TESTS
from grader.checks.nb09_fusion_memory import check_plan_memory  # the grader's own

check_plan_memory(my_plan_memory, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## Your three stages together
#
# The five-layer model once more, compiled with your grouping, your liveness and your planner all in
# the pipeline; the timeline is drawn from your plan.

# %%
try:
    with tc.substitute(group_fusible=my_group_fusible, storage_lifetimes=my_storage_lifetimes,
                       plan_memory=my_plan_memory):
        yours = tc.compile(layers, backend="python")
        print("same as eager:", torch.allclose(yours(*big), layers(*big), atol=1e-6))
        your_compiled = compile_graph(graph_of(layers, *big), backend="python")  # the pipeline, stage by stage
    print(your_compiled.plan.summary())
    plot_timeline(your_compiled.optimized, your_compiled.plan, "the same model, with your three stages")
except NotImplementedError:
    print("one of the three exercises is not written yet: solve them all, then run this cell again")

# %% [markdown]
# ## Common mistakes
#
# The first, shown on the cyclic program of section 4: a grouping that never seals a group fuses
# `a * m + 1` into the group of `tanh`, through the matmul. The pipeline then breaks (the kernel
# would read the matmul's result before the matmul runs), and the legality test of the check names
# the cycle:

# %%
def fuse_everything_along_chains(graph):
    """A wrong grouping: never seal a group."""
    groups, group_of = [], {}
    for node in graph.nodes:
        meaning = classify(node)
        if meaning is None:
            continue
        shape = tuple(node.shape)
        chosen = next((group_of[i] for i in node.inputs if i in group_of and group_of[i].shape == shape), None)
        if chosen is None:
            chosen = Group(len(groups), shape, node.dtype, node.device)
            groups.append(chosen)
        chosen.members.append(node)
        group_of[node] = chosen
    return [g for g in groups if len(g.members) >= 2]


with tc.substitute(group_fusible=fuse_everything_along_chains):
    try:
        tc.compile(cyclic, backend="python")(*inputs)
    except Exception as error:
        print("the pipeline breaks:", type(error).__name__, error)
cyclic_graph = graph_of(cyclic, *inputs)
try:
    check_groups(cyclic_graph, fuse_everything_along_chains(cyclic_graph))
except FusionRuleBroken as error:
    print(f"{type(error).__name__}: {error}")

# %% [markdown]
# - **Fusing through an opaque operation.** A group that a matmul has read is sealed; joining it
#   afterwards makes a cycle (above: the kernel would read the matmul's result before the matmul has
#   run).
# - **Fusing a node that reads a reduction into the reduction's group.** The sum of a row exists only
#   at the end of the row; `e / e.sum(-1)` needs a second pass over the row. The library's
#   `group_fusible` makes it two kernels and never stores `e`: the second kernel computes `exp`
#   again from `x` (*recomputation*, which the exercise leaves out). Inductor on the CPU (torch
#   2.13) chooses the other way, as its output code shows: one C++ function that computes `exp`
#   once per element and stores `e`, then, row by row, sums `e` and divides it, writing the result
#   over `e`'s own buffer (the lines of its kernel that load, compute and store, and its wrapper):

# %%

from torch._inductor.utils import run_and_get_code  # noqa: E402


def softmax_like(x):
    e = torch.exp(x)
    return e / e.sum(-1, keepdim=True)


for k, group in enumerate(group_fusible.library(graph_of(softmax_like, torch.randn(64, 128))), 1):
    again = f" (computes {', '.join(r.op for r in group.recomputed)} again)" if group.recomputed else ""
    print(f"tensorcraft's kernel {k}: {', '.join(m.op for m in group.members)}{again}")
if os.environ.get("NBGRADER_EXECUTION"):  # set while grading, where a cell may run 30 s: Inductor is left out
    print("Inductor's code is not compiled while grading (it takes tens of seconds); run this cell to see it")
else:
    _, (inductor_text,) = run_and_get_code(torch.compile(softmax_like), torch.randn(64, 128))
    kernel_start = inductor_text.index('extern "C"')
    kernel_text = inductor_text[kernel_start:inductor_text.index("'''", kernel_start)]
    print("Inductor's kernel:")
    for line in kernel_text.splitlines():
        if any(word in line for word in ("out_ptr0 =", "for(", "exp(", "loadu(", "store(", "_vec +", " / ", "out_ptr1[")):
            print("   ", line.strip()[:100])
    print("Inductor's wrapper:")
    call_start = inductor_text.index("def call(")
    print(inductor_text[call_start:inductor_text.index("return", call_start)].rstrip())

# %% [markdown]
# Both are correct; they trade differently. Recomputing computes `exp` twice, reads `x` twice and
# writes only the sums and the result; storing computes `exp` once, but writes `e` and reads it
# back twice (for the sum, then for the division).
#
# - **Forgetting views.** `v = h.reshape(-1)` keeps `h`'s memory alive as long as `v` is read:
#   liveness goes through `node.storage`.
# - **Off by one.** A slot is free for kernels *after* the last use of its value, not at it.
# - **Ignoring dtype and size.** A slot holds one dtype on one device and must be large enough.
# - **Calling conv + batchnorm + ReLU "operator fusion".** The blog post this course grew from
#   (see the course home) gives
#   it as the example of fusion. Folding a batchnorm into the convolution's weights (notebook 08) is
#   arithmetic on the weights, done once; kernel fusion, the topic here, merges loops. Inductor keeps
#   the convolution itself an extern call and fuses the elementwise ops after it.
#
# ## Summary
#
# - On chains of cheap elementwise operations, time is memory traffic: fusing `k` operations into one
#   loop moves about `k` times fewer bytes.
# - Elementwise nodes fuse, broadcast inputs included; a last-axis reduction can end a group; opaque
#   nodes (matmul, views) stay torch calls. A node that reads a reduction starts a new group, and a
#   group read from outside is sealed, so that no group makes a cycle.
# - A value's memory lives until its storage's last reader, views included, and returned values
#   live to the end.
# - Slots are reused when their value has died before the writing kernel's step; the fewest slots
#   is the most values alive at once; the timeline shows the peak before and after planning.
#
# **Next:** notebook 10 turns a fused group into source code: a Python kernel, a C kernel with
# OpenMP, and a Triton kernel.
