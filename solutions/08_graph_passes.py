# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 08 · Graph passes: dead code, repeats, constants, conv + batch norm
#
# Once a compiler holds a program as a graph, it rewrites that graph before it writes any code.
# Each rewrite is a **pass**: a function from a graph to a graph that computes the same results with
# less work. This notebook takes four classic passes apart, and you write each of them.
#
# **You will learn to**
# - remove the nodes no output needs (dead-code elimination), and keep the ones that have effects;
# - compute a repeated call once (common-subexpression elimination), and say when two calls are
#   really the same;
# - compute at compile time what depends only on constants (constant folding), and see why the order
#   of passes matters;
# - fold a batch norm into the convolution before it: derive the new weights, and check them
#   against eager PyTorch and torch.fx.
#
# **Time:** about 60 minutes. **Builds on:** 07 (what torch.compile does, and capturing a program
# into a graph).
#
# Each exercise runs inside the real compiler: the check compiles small programs with
# `tensorcraft.compile` while `tensorcraft.substitute(...)` puts your pass in place of the library's,
# and compares the results with eager PyTorch and the graph with what torch.fx's own pass leaves.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import warnings

import matplotlib.pyplot as plt
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.fx.experimental import const_fold
from torch.fx.experimental.optimization import fuse as fx_fuse
from torch.fx.passes.dialect.common.cse_pass import CSEPass

import tensorcraft as tc
from grader.checks.nb08_graph_passes import (check_eliminate_common_subexpressions, check_eliminate_dead_code,
                                             check_fold_constants, check_fold_conv_bn)
from tensorcraft.compiler.capture import capture
from tensorcraft.compiler.draw import draw_graph, figure_size
from tensorcraft.compiler.examples import model_zoo
from tensorcraft.compiler.interpret import interpret
from tensorcraft.compiler.ir import Node, map_args, returned_storages
from tensorcraft.compiler.opnames import canonical_name
from tensorcraft.compiler.passes import conv_bn, constant_folding, cse, dce

_ = torch.manual_seed(0)


def calls(graph):
    """The op names of a graph's call nodes, in order."""
    return [n.op for n in graph.nodes if n.kind == "call"]


def fx_calls(gm):
    """The same for a torch.fx GraphModule (the names are made canonical: operator.mul -> 'mul')."""
    return [canonical_name(n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method")]


def draw_side_by_side(graphs, titles):
    """Draw graphs next to each other, each at its own size (labels stay legible), with its node count in the title."""
    sizes = [figure_size(graph) for graph in graphs]
    fig, axes = plt.subplots(1, len(graphs), figsize=(sum(w for w, _ in sizes), max(h for _, h in sizes)),
                             gridspec_kw={"width_ratios": [w for w, _ in sizes]})
    for ax, graph, title in zip(axes, graphs, titles):
        draw_graph(graph, ax=ax, title=f"{title}: {len(graph)} nodes")
    plt.tight_layout()
    plt.show()


# %% [markdown]
# ## A graph, and a pass over it
#
# Notebook 07 captured programs into graphs. Here is a small one with waste in it on purpose:
# `x.exp()` is computed and never used, and `x.sin() * 2` is computed twice. `capture` runs the
# function once and records every torch call into a `Graph`:

# %%
def wasteful(x):
    unused = x.exp()          # nobody reads this
    a = x.sin() * 2
    b = x.sin() * 2           # the same as a
    return a + b


x = torch.randn(4, 6)
graph = capture(wasteful, (x,)).graph
print(graph)

# %% [markdown]
# Every row is a **node**: one value of the program. A node has a `kind` (`placeholder` for an
# input, `call` for a torch call, `output` for what the function returns), an `op`, and `args`
# that name earlier nodes. The nodes are in **topological order**: a node only reads nodes above it.
#
# A pass takes a graph and returns a new one. The library's passes live in
# `tensorcraft.compiler.passes`; here are two of them, one after the other, and the node counts:

# %%
after_cse = cse.eliminate_common_subexpressions(graph)
after_dce = dce.eliminate_dead_code(after_cse)
print("captured:", calls(graph))
print("after CSE:", calls(after_cse))
print("after CSE and DCE:", calls(after_dce))
draw_side_by_side([graph, after_cse, after_dce], ["captured", "after CSE", "after CSE + DCE"])

# %% [markdown]
# The passes did not change `graph`: each one works on `graph.copy()` and returns the copy. And the
# meaning is the same: `interpret` runs a graph node by node with eager torch, and all three graphs
# give what the function gives:

# %%
for g in (graph, after_cse, after_dce):
    (result,) = interpret(g, [x])
    print(len(g), "nodes:", torch.equal(result, wasteful(x)))

# %% [markdown]
# ## The graph's tools
#
# A pass changes the node list only through the graph's own methods, which keep every reference
# right. These are the ones you need:
#
# | | |
# |---|---|
# | `graph.copy()` | a new graph with new nodes: work on it, never on the graph you were given |
# | `graph.nodes` | the list of nodes, in order; `graph.output` is the last one |
# | `node.kind`, `node.op`, `node.target`, `node.args`, `node.kwargs` | what the node is and what it calls with what |
# | `node.inputs` | the nodes it reads, in argument order, also those inside lists (`torch.stack([a, b])`) |
# | `graph.users()` | a dict: node -> the nodes that read it |
# | `graph.remove(nodes)` | drops nodes; refuses (ValueError) to drop a node something left still reads |
# | `graph.replace_all_uses(old, new)` | every reader of `old` reads `new` instead |
# | `graph.constant(tensor)` | a new constant node (not placed yet) |
# | `graph.replace(old, [new, ...])` | puts new nodes where `old` was, readers of `old` read the last one, `old` goes |
# | `returned_storages(graph)` | the nodes whose memory the caller receives (the outputs and what they are views of) |
#
# `remove` protects you from the worst mistake, removing a value that is still needed:

# %%
users = graph.users()
sine = next(n for n in graph.nodes if n.op == "sin")
print("readers of", sine.name, "->", users[sine])
copy = graph.copy()
try:
    copy.remove([n for n in copy.nodes if n.op == "sin"])
except ValueError as error:
    print("ValueError:", error)

# %% [markdown]
# (The nodes of a copy are new objects: to remove a node from a copy, find it in the copy.)
#
# ## Dead-code elimination
#
# A node is **dead** when no output needs its value. Which nodes are live? Walk the graph from the
# last node to the first: the output node is live, and so are the placeholders (they are the
# function's signature, even when nothing reads them); every node that a live node reads is live.
# One backward walk is enough, because a node is always read by nodes after it. Everything else
# can go.
#
# torch.fx has this pass too, `Graph.eliminate_dead_code`. On our function it keeps the same calls:

# %%
gm = torch.fx.symbolic_trace(wasteful)
gm.graph.eliminate_dead_code()
print("torch.fx keeps:", fx_calls(gm))
print("we keep:       ", calls(dce.eliminate_dead_code(graph)))

# %% [markdown]
# ### A node with an effect is never dead
#
# Deleting a call is safe only when the call does nothing but compute its value. An in-place update
# does more: `y.add_(1)` changes `y`, and its own result is read by nobody. torch.fx's DCE looks at
# who reads a node, and its documentation warns that it recognises few effects. Here it deletes
# the update, and the "optimized" function returns another answer:

# %%
def plus_one_in_place(x):
    y = x * 2
    y.add_(1)
    return y


gm = torch.fx.symbolic_trace(plus_one_in_place)
print("fx graph before DCE:", fx_calls(gm))
gm.graph.eliminate_dead_code()
gm.recompile()
print("fx graph after DCE: ", fx_calls(gm))
ones = torch.ones(3)
print("eager:", plus_one_in_place(ones), " fx after DCE:", gm(ones))

# %% [markdown]
# Our capture records an in-place update of an intermediate as its functional form: `y.add_(1)`
# becomes a new node `add(y, 1)`, and the output reads that node. The update is then an ordinary
# value, read by the output, and no DCE can lose it:

# %%
captured = capture(plus_one_in_place, (ones,)).graph
print(captured)
print("tensorcraft.compile:", tc.compile(plus_one_in_place)(ones))

# %% [markdown]
# So in our graphs the only nodes with an effect beyond their value are the **output** node (it
# hands values to the caller; nothing reads it, yet it must stay) and the **placeholders** (the
# signature). A DCE must keep both.
#
# That holds only because of what never reaches the passes. A random draw has an effect (it
# advances the random generator: deleting a draw nobody reads changes every later draw), and so
# does an in-place update of an input (the caller sees its tensor change). The compiler refuses
# both (notebook 07's refusal rule): such a program runs eagerly, with the reason, and its graph
# is never optimized. A DCE that did meet such nodes would have to keep them too:

# %%
def unread_noise(x):
    torch.rand_like(x)                # read by nobody, but it moves the random generator on
    return x * 2


def bump_input(x):
    x.add_(1)                         # the caller's tensor changes
    return x * 2


generator = torch.Generator().manual_seed(0)
torch.rand(2, generator=generator)    # a draw nobody reads
kept = torch.rand(2, generator=generator)
deleted = torch.rand(2, generator=torch.Generator().manual_seed(0))
print("the next draw, unread draw kept:", kept.tolist(), "| deleted:", deleted.tolist())
for program in (unread_noise, bump_input):
    refused = tc.compile(program)
    refused(torch.ones(3))
    print(f"{program.__name__:13}", refused.explain().splitlines()[1].split(" (at ")[0])

# %% [markdown]
# ## Exercise 1 — `eliminate_dead_code` (3 points)
#
# Write `eliminate_dead_code(graph) -> Graph`: on `graph.copy()`, remove every node that the
# output does not need, directly or through other nodes. Keep the output node and every
# placeholder. Return the copy.
#
# The check compiles small programs with `tensorcraft.compile(fn, passes=["dce"])` while
# `tensorcraft.substitute(eliminate_dead_code=your_function)` is in force, so the compiler calls
# your pass. It compares what the compiled code returns with eager PyTorch, and the calls left in
# the optimized graph with those torch.fx's `eliminate_dead_code` leaves in the same program.
# **Forbidden:** torch.fx's `Graph.eliminate_dead_code` and the library's `eliminate_dead_code`
# (under any name: a reference kept in a dict fails too).
# numpy is not needed: the pass works on the graph.

# %% nbgrader={"grade": false, "grade_id": "eliminate_dead_code", "locked": false, "schema_version": 3, "solution": true, "task": false}
def eliminate_dead_code(graph):
    ### BEGIN SOLUTION
    graph = graph.copy()
    live = set()
    for node in reversed(graph.nodes):
        if node.kind in ("output", "placeholder") or node in live:
            live.add(node)
            live.update(node.inputs)
    graph.remove([n for n in graph.nodes if n not in live])
    return graph
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "eliminate_dead_code_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_eliminate_dead_code(eliminate_dead_code)
### BEGIN HIDDEN TESTS
from grader.checks.nb08_graph_passes import check_eliminate_dead_code  # the grader's own, even if rebound

check_eliminate_dead_code(eliminate_dead_code, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Your pass inside the compiler
#
# The check ran your pass the way this cell does. While a substitute is in force, the compiled
# function keeps **nothing** in its cache: every call captures and compiles again, so that your
# function is always the one that runs. `.compiled` shows the graph the last call built (with your
# pass), and `explain()` says that no entry was cached:

# %%
fast = tc.compile(wasteful, passes=["dce"])
try:
    with tc.substitute(eliminate_dead_code=eliminate_dead_code):
        print("same as eager:", torch.allclose(fast(x), wasteful(x)), "| compiles so far:", fast.stats.compiles)
        fast(x)
        print("a second call compiles again:", fast.stats.compiles)
    print("calls left by your pass:", calls(fast.compiled.optimized))
    print(fast.explain().splitlines()[0])
except NotImplementedError:
    print("write eliminate_dead_code above first")

# %% [markdown]
# Outside the `with` block the library's pass runs again, and calls go through the cache as usual.
#
# ## Common-subexpression elimination
#
# Two call nodes compute the same value when they call the same function on the same arguments.
# CSE keeps the first and points every reader of the second at it. "The same arguments" needs care:
#
# - a node argument is the same only if it is the **same node** (compare by identity);
# - everything else — numbers, dims, strings, keyword arguments, lists of nodes item by item —
#   must be equal: `x * 2` is not `x * 3`, `softmax(x, 0)` is not `softmax(x, -1)`,
#   `gelu(x)` is not `gelu(x, approximate="tanh")`, and `stack([a, b])` is not `stack([b, a])`.
#
# A dict from a hashable **key** (target, arguments, keyword arguments) to the first node with that
# key finds the repeats in one pass. torch.fx's `CSEPass` merges the same calls as ours here:

# %%
def repeats(x):
    a = torch.tanh(x * 2)
    b = torch.tanh(x * 2)          # a again: two calls to merge
    c = torch.softmax(x, 0) + torch.softmax(x, -1)   # different dims: nothing to merge
    return a * b + c


graph = capture(repeats, (x,)).graph
print("captured:", calls(graph))
print("ours:    ", calls(cse.eliminate_common_subexpressions(graph)))
print("torch.fx:", fx_calls(CSEPass()(torch.fx.symbolic_trace(repeats)).graph_module))

# %% [markdown]
# ### Two returned values stay two tensors
#
# One case differs. When a function returns `x.sin()` twice, eager gives the caller **two
# tensors**. A caller may change one in place; the other must not change with it. If CSE merged
# the two, the compiled function would return the same tensor twice:

# %%
def two_sines(x):
    return x.sin(), x.sin()


first, second = two_sines(ones)
first.add_(100)
print("eager, after first.add_(100): second =", second)
same = ones.sin()
merged_first, merged_second = same, same     # what a merged graph would return
merged_first.add_(100)
print("merged, after first.add_(100): second =", merged_second)

# %% [markdown]
# So CSE merges two nodes only when at most one of them is returned (`returned_storages(graph)`
# lists the nodes whose memory the caller receives). The library's CSE keeps both sines:

# %%
print(calls(cse.eliminate_common_subexpressions(capture(two_sines, (ones,)).graph)))

# %% [markdown]
# ## Exercise 2 — `eliminate_common_subexpressions` (3 points)
#
# Write `eliminate_common_subexpressions(graph) -> Graph`: on `graph.copy()`, for each call node
# whose target, arguments and keyword arguments equal those of an earlier call node, make the
# readers of the later node read the earlier one (`graph.replace_all_uses`), and remove the later
# one. Do not merge two nodes that are both in `returned_storages(graph)`; when a returned node
# merges into one that is not returned, the survivor is returned from then on: add it to your set.
#
# The helper `key` below turns arguments into something hashable: a node becomes its identity,
# lists and tuples become tuples of keys, a dict becomes sorted pairs; anything else is kept as it
# is (with its type, so that `2` and `2.0` stay apart). Use it or write your own.
#
# The check compiles programs with `passes=["cse"]` and your pass substituted, and compares the
# results with eager, the calls left with torch.fx's `CSEPass`, and which returned tensors share
# memory with eager (none). **Forbidden:** `CSEPass` and the library's CSE (under any name).
# numpy is not needed: the pass works on the graph.

# %%
def key(value):
    """A hashable stand-in for an argument: nodes by identity, containers item by item."""
    if isinstance(value, Node):
        return ("node", id(value))
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, key(v)) for k, v in value.items())))
    return (type(value).__name__, value)


print(key((3, [1.0, "tanh"])), key({"approximate": "tanh"}))

# %% nbgrader={"grade": false, "grade_id": "eliminate_common_subexpressions", "locked": false, "schema_version": 3, "solution": true, "task": false}
def eliminate_common_subexpressions(graph):
    ### BEGIN SOLUTION
    graph = graph.copy()
    returned = returned_storages(graph)
    first = {}
    repeated = []
    for node in graph.nodes:
        if node.kind != "call":
            continue
        k = (id(node.target), key(node.args), key(node.kwargs))
        survivor = first.setdefault(k, node)
        if survivor is node or (node in returned and survivor in returned):
            continue
        if node in returned:
            returned.add(survivor)
        graph.replace_all_uses(node, survivor)
        repeated.append(node)
    graph.remove(repeated)
    return graph
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "eliminate_common_subexpressions_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_eliminate_common_subexpressions(eliminate_common_subexpressions)
### BEGIN HIDDEN TESTS
from grader.checks.nb08_graph_passes import check_eliminate_common_subexpressions  # the grader's own

check_eliminate_common_subexpressions(eliminate_common_subexpressions, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## Constant folding
#
# Some values depend on nothing that changes between calls: `torch.arange(4.0)`, or — when the
# model is used for inference only — anything computed from its parameters alone, such as
# `self.w.t() * 2`. Constant folding computes such values **once, at compile time**, and puts the
# result in the graph as a `constant` node.
#
# Parameters count as constants only in a **frozen** graph: the module is in eval mode and no
# gradient is needed (`graph.frozen` is `True`). With gradients, the parameters are what training
# changes and what the gradient must reach, so they stay inputs. A folded parameter is read with
# `graph.param_value(node)`, which records its name in `graph.baked`; the guards then compare its
# value at every call and recompile when it changed (an optimizer step, `load_state_dict`).

# %%
class Affine(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))
        self.b = nn.Parameter(torch.randn(4))

    def forward(self, x):
        return x @ (self.w.t() * 2 + torch.arange(4.0)) + self.b


affine = Affine().eval()
xa = torch.randn(3, 4)
graph = capture(affine, (xa,), module=affine).graph
graph.frozen = True               # what tc.compile sets in eval mode without gradients
folded = constant_folding.fold_constants(graph)
print(graph, "\n")
print(folded)
print("baked in:", folded.baked)

# %% [markdown]
# `t`, `mul`, `arange` and `add` were computed and replaced by constants; `matmul` and the last
# `add` read the input `x`, so they run at every call. torch.fx's constant folder
# (`const_fold.split_const_subgraphs`) leaves the same two calls. (It also warns about the
# attributes it creates; the cell silences that warning. Its folded values are read back with
# `getitem`, which the cell leaves out of the list.)

# %%
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    fx_folded = const_fold.split_const_subgraphs(affine)
    fx_folded.run_folding()
print("torch.fx:", [c for c in fx_calls(fx_folded) if c != "getitem"])
print("ours:    ", calls(folded))
(ours,) = interpret(folded, [xa], dict(affine.named_parameters()))
with torch.no_grad():
    print("same as eager:", torch.allclose(ours, affine(xa)))

# %% [markdown]
# The folded values are copies of what `w` was at compile time. The guards watch them: change `w`
# in place and the next call compiles again instead of using a stale constant. And in a graph that
# is not frozen (here: captured without saying it is), the calls on `w` stay; only `arange`, which
# reads nothing at all, is folded:

# %%
fast_affine = tc.compile(affine)
with torch.no_grad():
    fast_affine(xa)
    affine.w.mul_(-1)
    print("after w changed, same as eager:", torch.allclose(fast_affine(xa), affine(xa)))
print("compiles:", fast_affine.stats.compiles, "| why:", fast_affine.stats.recompiles)
not_frozen = capture(affine, (xa,), module=affine).graph
print("frozen:", not_frozen.frozen, "| calls after folding:", calls(constant_folding.fold_constants(not_frozen)))

# %% [markdown]
# ### The order of passes matters
#
# Look at the folded graph again: the constants that replaced `t`, `mul` and `arange` are still
# there, and so is the parameter `w`, though nothing reads them any more. Folding leaves **dead constants** behind; DCE removes
# them. So DCE must run *after* folding: run before, it finds nothing dead yet, and the dead
# constants stay. Count the nodes:

# %%
orders = {
    "captured": [],
    "fold": [constant_folding.fold_constants],
    "DCE, then fold": [dce.eliminate_dead_code, constant_folding.fold_constants],
    "fold, then DCE": [constant_folding.fold_constants, dce.eliminate_dead_code],
}
counts = {}
for name, passes in orders.items():
    g = graph
    for p in passes:
        g = p(g)
    counts[name] = {kind: g.count(kind=kind) for kind in ("placeholder", "param", "constant", "call", "output")}
    print(f"{name:15} {len(g):2} nodes  {counts[name]}")

fig, ax = plt.subplots(figsize=(7, 2.8))
left = [0] * len(counts)
for kind, colour in [("placeholder", "#d9d9d9"), ("param", "#bdbdbd"), ("constant", "#c7e9c0"), ("call", "#c6dbef"),
                     ("output", "#ffffff")]:
    widths = [c[kind] for c in counts.values()]
    ax.barh(list(counts), widths, left=left, color=colour, edgecolor="#555555", label=kind)
    left = [a + b for a, b in zip(left, widths)]
ax.invert_yaxis()
ax.set_xlabel("nodes in the graph")
ax.legend(ncol=5, fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0))
plt.tight_layout()
plt.show()

# %% [markdown]
# This is why the library's default order is conv+bn folding, constant folding, CSE, **then** DCE
# (and fusion last): each pass may leave work for the ones after it.
#
# ### Never fold a returned value
#
# A value the function returns must be a fresh tensor at every call, as eager gives. Folded, it
# would be one tensor, handed out again and again: a caller that changes it in place
# (`out.add_(1)`) would change what the next call returns. So a node in `returned_storages(graph)`
# is computed at every call even when its inputs are all constants:

# %%
class ReturnsAConstant(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Parameter(torch.randn(4))

    def forward(self, x):
        return x + self.q, self.q * 2


model = ReturnsAConstant().eval()
g = capture(model, (xa,), module=model).graph
g.frozen = True
print(calls(constant_folding.fold_constants(g)), "<- q * 2 is returned: it stays a call")

# %% [markdown]
# ## Exercise 3 — `fold_constants` (3 points)
#
# Write `fold_constants(graph) -> Graph`. On `graph.copy()`, walk the nodes in order with a dict
# `known` from node to value:
# - a `constant` node is known: its value is `node.target`;
# - a `param` node is known only when `graph.frozen`: its value is `graph.param_value(node)`;
# - a `call` node whose inputs are **all** known, and which is not in `returned_storages(graph)`, is
#   computed now, under `torch.no_grad()`:
#   `node.target(*map_args(node.args, known.__getitem__), **map_args(node.kwargs, known.__getitem__))`
#   (`map_args` puts each node's value in its place, inside lists too). If the value is a tensor,
#   replace the node by `graph.constant(value, name=node.name)` with `graph.replace`, and record the
#   new constant's value in `known`, so that the calls reading it fold too.
#
# The check compiles modules with `passes=[your fold_constants, DCE]` (in eval mode without
# gradients, and with gradients), and compares the results and gradients with eager, the calls
# left with torch.fx's `const_fold`, whether a second call returns fresh tensors, and whether every
# parameter folded into a constant was read with `graph.param_value` (it is then in `graph.baked`).
# **Forbidden:** `const_fold.split_const_subgraphs` and the library's `fold_constants` (under any
# name). Compute the folded values with torch operations; numpy is not needed.

# %% nbgrader={"grade": false, "grade_id": "fold_constants", "locked": false, "schema_version": 3, "solution": true, "task": false}
def fold_constants(graph):
    ### BEGIN SOLUTION
    graph = graph.copy()
    known = {}
    returned = returned_storages(graph)
    for node in list(graph.nodes):
        if node.kind == "constant":
            known[node] = node.target
        elif node.kind == "param" and graph.frozen:
            known[node] = graph.param_value(node)
        elif node.kind == "call" and node not in returned and all(i in known for i in node.inputs):
            with torch.no_grad():
                value = node.target(*map_args(node.args, known.__getitem__),
                                    **map_args(node.kwargs, known.__getitem__))
            if isinstance(value, torch.Tensor):
                constant = graph.constant(value, name=node.name)
                known[constant] = value
                graph.replace(node, [constant])
    return graph
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "fold_constants_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_fold_constants(fold_constants)
### BEGIN HIDDEN TESTS
from grader.checks.nb08_graph_passes import check_fold_constants  # the grader's own, even if rebound

check_fold_constants(fold_constants, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## Folding a batch norm into the convolution before it
#
# In eval mode a batch norm uses stored statistics, so it is a fixed affine map per channel.
# For output channel $o$ of a convolution with weight $W$ (shape `[out, in, kh, kw]`) and bias $b$:
#
# $$\mathrm{bn}(y)_o = \gamma_o \, \frac{y_o - \mu_o}{\sqrt{\sigma^2_o + \varepsilon}} + \beta_o,
# \qquad y_o = (W_o \star x) + b_o .$$
#
# Write $s_o = \gamma_o / \sqrt{\sigma^2_o + \varepsilon}$, one number per output channel. Then
#
# $$\mathrm{bn}(y)_o = s_o (W_o \star x) + s_o (b_o - \mu_o) + \beta_o
#   = \big((s_o W_o) \star x\big) + \big(s_o (b_o - \mu_o) + \beta_o\big),$$
#
# because a convolution is linear in its weight: scaling filter $o$ by $s_o$ scales output channel
# $o$ by $s_o$. So one convolution computes both steps, with
#
# $$W'_o = s_o W_o, \qquad b'_o = (b_o - \mu_o)\, s_o + \beta_o .$$
#
# $s$ scales the weight's **first** axis (one filter per output channel), and $\varepsilon$ sits
# **inside** the square root. A convolution without bias has $b = 0$. The cell below builds a conv
# and a batch norm with non-trivial statistics, folds them by these formulas, and compares with
# eager conv → bn:

# %%
conv = nn.Conv2d(3, 4, 3, padding=1)
bn = nn.BatchNorm2d(4, eps=1e-3)
with torch.no_grad():
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.2, 3)
    bn.weight.uniform_(0.5, 1.5)
    bn.bias.uniform_(-0.5, 0.5)
conv_then_bn = nn.Sequential(conv, bn).eval()

with torch.no_grad():
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    folded_weight = conv.weight * s[:, None, None, None]
    folded_bias = (conv.bias - bn.running_mean) * s + bn.bias
    image = torch.randn(2, 3, 8, 8)
    eager = conv_then_bn(image)
    one_conv = F.conv2d(image, folded_weight, folded_bias, padding=1)
print("largest difference, conv -> bn against the folded conv:", (eager - one_conv).abs().max().item())
print("torch.allclose:", torch.allclose(eager, one_conv, atol=1e-5))

# %% [markdown]
# The two differ only by rounding (float32 keeps about 7 digits). torch.fx's
# `experimental.optimization.fuse` does the same rewrite on a whole model, and so does the library's
# pass `fold_conv_batchnorm`, which also folds a following ReLU into one `conv2d_relu` call:

# %%
cnn, shape = model_zoo()["cnn"]
cnn.eval()
image = torch.randn(shape)
captured = capture(cnn, (image,), module=cnn).graph
captured.frozen = True
folded = dce.eliminate_dead_code(conv_bn.fold_conv_batchnorm(captured))
print("captured:", calls(captured))
print("folded:  ", calls(folded))
fx_model = fx_fuse(cnn)
print("batch norms left in torch.fx's fused model:", sum(isinstance(m, nn.BatchNorm2d) for m in fx_model.modules()))
params = dict(cnn.named_parameters()) | dict(cnn.named_buffers())
with torch.no_grad():
    (ours,) = interpret(folded, [image], params)
    print("ours vs eager:", torch.allclose(ours, cnn(image), atol=1e-5),
          "| ours vs torch.fx:", torch.allclose(ours, fx_model(image), atol=1e-5))
draw_side_by_side([captured, folded], ["captured", "conv+bn folded, then DCE"])

# %% [markdown]
# ## Exercise 4 — `fold_conv_bn` (3 points)
#
# Write the arithmetic of the fold:
# `fold_conv_bn(weight, bias, running_mean, running_var, gamma, beta, eps) -> (weight, bias)`.
# `weight` has shape `[out, in, kh, kw]`; `bias` (zeros where the conv has none), `running_mean`,
# `running_var`, `gamma` and `beta` have shape `[out]`; `eps` is a float. Return the folded
# convolution's weight and bias, in the inputs' dtype (float32 or float64), without changing the
# inputs.
#
# The library's pass `fold_conv_batchnorm` calls a function of this name for every conv → batch norm
# pair it folds, so the check runs yours in two places: directly, against torch's
# `torch.nn.utils.fusion.fuse_conv_bn_weights`, and inside `tensorcraft.compile` on a Conv2d →
# BatchNorm2d model, with `tensorcraft.substitute(fold_conv_bn=...)`, against torch's own folded
# convolution. **Forbidden:** torch's `fuse_conv_bn_weights`, `fuse_conv_bn_eval` and torch.fx's
# `fuse`, and the library's own `fold_conv_bn` (under any name). Compute the folded weights with
# torch operations; numpy is not needed. A new tensor you create needs the inputs' dtype and device:
# one case runs on the `meta` device (tensors with a shape and a dtype but no values), so that a
# tensor created on the CPU whatever the inputs' device shows without a GPU.

# %% nbgrader={"grade": false, "grade_id": "fold_conv_bn", "locked": false, "schema_version": 3, "solution": true, "task": false}
def fold_conv_bn(weight, bias, running_mean, running_var, gamma, beta, eps):
    ### BEGIN SOLUTION
    scale = gamma / torch.sqrt(running_var + eps)
    return weight * scale[:, None, None, None], (bias - running_mean) * scale + beta
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "fold_conv_bn_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_fold_conv_bn(fold_conv_bn)
### BEGIN HIDDEN TESTS
from grader.checks.nb08_graph_passes import check_fold_conv_bn  # the grader's own, even if rebound

check_fold_conv_bn(fold_conv_bn, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ### Your arithmetic inside the compiled model
#
# With `tensorcraft.substitute(fold_conv_bn=fold_conv_bn)` the whole default pipeline runs on the
# conv-bn-relu model, and the library's pass folds both batch norms with your function:

# %%
fast_cnn = tc.compile(cnn)
try:
    with torch.no_grad(), tc.substitute(fold_conv_bn=fold_conv_bn):
        print("compiled with your fold_conv_bn equals eager:", torch.allclose(fast_cnn(image), cnn(image), atol=1e-5))
    print("calls in the compiled graph:", calls(fast_cnn.compiled.optimized))
except NotImplementedError:
    print("write fold_conv_bn above first")

# %% [markdown]
# ## The whole pipeline, pass by pass
#
# `tc.compile` runs the passes in `tensorcraft.compiler.passes.DEFAULT_PASSES`. Here are the node
# and call counts of the conv-bn-relu model after each of them (fusion, the last, is the subject of
# notebook 09):

# %%
from tensorcraft.compiler.passes import DEFAULT_PASSES, get_pass

g = captured
print(f"{'captured':24} {len(g):2} nodes, {g.count(kind='call')} calls")
for name in DEFAULT_PASSES:
    g = get_pass(name)(g)
    print(f"{'after ' + name:24} {len(g):2} nodes, {g.count(kind='call')} calls")

# %% [markdown]
# The conv+bn fold halves the calls but not the nodes: it adds the folded weights and biases as
# constants, and leaves the batch norms' parameters and statistics unread. DCE, later, removes them.
# Fusion finds nothing to fuse here: convolutions, the mean and the linear layer stay torch calls.

# %% [markdown]
# ## Common mistakes
#
# - **Removing the output, or an input nobody reads.** The output node is read by no node, yet it is
#   what the function returns; the placeholders are the function's signature. Both stay.
# - **One sweep of "nodes nobody reads".** It removes the end of a dead chain only; walk backwards
#   from the output, marking what live nodes read.
# - **Merging calls whose other arguments differ.** `x * 2` and `x * 3` read the same node; so do
#   `softmax(x, 0)` and `softmax(x, -1)`, and `gelu(x)` and `gelu(x, approximate="tanh")`. Compare
#   every argument and keyword, in order.
# - **Merging two returned values, or folding one.** The caller gets one tensor where eager gave two,
#   or the same tensor at every call.
# - **Folding parameters when gradients are needed.** They are constants only in a frozen graph.
# - **DCE before constant folding.** Folding leaves dead constants; DCE has to come after it.
# - **The batch norm formulas:** `eps` inside the square root, the conv's bias scaled too
#   (`(b - mean) * s + beta`), the scale on the weight's first axis, the standard deviation and not
#   the variance.
#
# ## Summary
#
# - A pass is a function from a graph to a graph that keeps the results and removes work; it works
#   on a copy, through the graph's own methods.
# - DCE keeps what the output needs (and the output and inputs themselves); it is safe because
#   capture turns in-place updates into new values — torch.fx's DCE, on an fx graph, deletes them.
# - CSE merges calls with the same target and the same arguments, never two returned values.
# - Constant folding computes at compile time what depends only on constants — parameters too, in a
#   frozen graph — and leaves dead constants for DCE.
# - Conv + batch norm is one convolution with $W' = s W$ and $b' = (b - \mu) s + \beta$,
#   $s = \gamma / \sqrt{\sigma^2 + \varepsilon}$.
#
# **Next:** notebook 09 fuses chains of elementwise operations into single kernels and plans the
# memory they use.
