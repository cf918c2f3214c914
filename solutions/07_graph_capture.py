# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · What torch.compile does, and graph capture
#
# `torch.compile(model)` returns a model that computes the same numbers, usually faster, after a
# slow first call. This notebook opens that first call: the model is run once and recorded as a
# **graph**, the graph is turned into code, and the code is kept together with **guards** that say
# for which inputs it may be reused. You rebuild three pieces of that machinery inside
# `tensorcraft.compile`, a small compiler written to be read.
#
# **You will learn to**
# - measure what `torch.compile` costs on the first call and saves on the later ones, and tell its
#   backends `eager`, `aot_eager` and `inductor` apart;
# - read a captured graph, torch.fx's and tensorcraft's, and write a tracer that records the torch
#   calls a program makes into one;
# - say which programs cannot be captured whole (graph breaks) and write the rule that makes capture
#   refuse them;
# - predict when a compiled model recompiles, and write the guard that decides whether cached code
#   may be reused.
#
# **Time:** about 60 minutes. **Builds on:** PyTorch basics (modules, tensors, autograd); notebooks
# 01–06 are not needed here.
#
# In the three exercises you write tensorcraft's capture stage, its refusal rule and its input
# guard. Each check runs your function inside `tensorcraft.compile` through
# `tensorcraft.substitute(...)`, and compares with the real tools: torch.fx's graphs, Dynamo's
# graph breaks and torch.compile's recompiles.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import logging
import statistics
import time

import matplotlib.pyplot as plt
import torch
import torch._dynamo
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

import tensorcraft as tc
from tensorcraft.compiler.builder import GraphBuilder
from tensorcraft.compiler.capture import Captured
from tensorcraft.compiler.capture import capture as library_capture
from tensorcraft.compiler.draw import draw_graph
from tensorcraft.compiler.guards import check_input as library_check_input
from tensorcraft.compiler.opnames import canonical_name
from tensorcraft.timing import time_call
from grader.checks.nb07_graph_capture import check_capture, check_input_guard, check_refusal

logging.getLogger("torch._dynamo").setLevel(logging.ERROR)  # Dynamo's advice on graph breaks, shown below instead
_ = torch.manual_seed(0)

# %% [markdown]
# ## A small convolutional model
#
# Two convolutions, a ReLU, a SiLU written out as `x * sigmoid(x)`, a global average and a linear
# layer. We use it in evaluation mode and without gradients (`torch.set_grad_enabled(False)`), as
# for inference.

# %%
class SmallConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = self.conv2(x)
        x = x * torch.sigmoid(x)
        return self.head(x.mean(dim=(2, 3)))


model = SmallConvNet().eval()
x = torch.randn(8, 3, 32, 32)
torch.set_grad_enabled(False)  # inference, until the guards section turns gradients back on
print(model(x).shape)

# %% [markdown]
# ## The first call is slow, the later ones are fast
#
# `torch.compile(model)` does nothing yet: it returns a wrapper at once. The work happens in the
# first call, which (1) runs the model's Python code through **Dynamo**, which records the tensor
# operations into a graph, (2) hands the graph to a **backend** — by default **Inductor**, which
# generates C++ (on a CPU) or Triton (on a GPU) code for it and compiles that — and (3) runs the
# code. The later calls only check the guards and run the code.
#
# The cell below times the first call of the compiled model, then five rounds of later calls,
# and the same for the eager model. A round is `time_call` (from `tensorcraft.timing`, used for
# every time in this course): many blocks of calls, summed up by the median time per call and
# the interquartile range (half of the blocks fall inside it). One call alone can be slowed down
# many times over by whatever else the machine does at that moment; a median of many cannot.
#
# The first call compiles, and how long that takes depends on the machine more than on the
# model: from a few seconds to a minute or more. It is longest in a fresh process with an empty
# compile cache on a few busy cores: Dynamo and Inductor load their own modules the first time,
# and Inductor runs a C++ compiler on the kernels it generates. It is much shorter when
# Inductor's on-disk cache (under the system's temporary folder unless `TORCHINDUCTOR_CACHE_DIR`
# says otherwise) already holds this model's kernels, as on a second run of this notebook. The
# cell prints what it measured here. It runs once; the rest of the notebook reuses its numbers.

# %%
# One thread for the timings of this notebook (Inductor's kernels are then generated for one too):
# a thread that waits for a descheduled partner can make one call many times slower on a
# shared machine, and that would measure the neighbours, not the model.
torch.set_num_threads(1)
import os  # noqa: E402

GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set while grading, where a cell may run 30 s
TIMING_S = 0.01 if GRADING else 0.05   # seconds of calls per timing (while grading: shorter, still a median of 5+ blocks)
compiled = torch.compile(model, backend="eager" if GRADING else "inductor")
if GRADING:
    print("while grading, the 'eager' backend stands in for Inductor (an Inductor compile can take longer than a cell may)")
start = time.perf_counter()
compiled(x)
first_compiled = time.perf_counter() - start
start = time.perf_counter()
model(x)
first_eager = time.perf_counter() - start
rounds = {"compiled": [time_call(compiled, x, min_run_time=TIMING_S) for _ in range(5)],
          "eager": [time_call(model, x, min_run_time=TIMING_S) for _ in range(5)]}
print(f"first compiled call (compiles): {first_compiled:.1f} s   one eager call: {1000 * first_eager:.2f} ms")
for label, timings in rounds.items():
    print(f"{label + ',':<10} five rounds of later calls:", "  ".join(str(t) for t in timings))
later_compiled = statistics.median(t.median for t in rounds["compiled"])
print(f"first compiled call / median of the later ones: {first_compiled / later_compiled:.0f}x")
print("same numbers as eager:", torch.allclose(compiled(x), model(x), atol=1e-5))

# %% [markdown]
# ## Three backends
#
# The backend is the part that turns the graph into something callable. Three of torch's own show
# where the time goes:
#
# - `eager`: Dynamo captures the graph, and the backend runs it with ordinary PyTorch calls.
#   Capture only; no speed-up expected.
# - `aot_eager`: the graph also goes through **AOTAutograd**, which traces it down to ATen, the
#   operator library under torch's Python functions, and prepares the backward pass ahead of
#   time; still run by PyTorch's own kernels.
# - `inductor` (the default): AOTAutograd, then Inductor fuses operations and generates code.
#
# `torch._dynamo.reset()` empties Dynamo's cache, so each backend compiles afresh.

# %%
first_call = {"inductor": first_compiled}
per_call = {"eager model": time_call(model, x, min_run_time=TIMING_S),
            "inductor": time_call(compiled, x, min_run_time=TIMING_S)}
for backend in ("eager", "aot_eager"):
    torch._dynamo.reset()
    with_backend = torch.compile(model, backend=backend)
    start = time.perf_counter()
    with_backend(x)
    first_call[backend] = time.perf_counter() - start
    per_call[backend] = time_call(with_backend, x, min_run_time=TIMING_S)
print("first call: one sample (it happens once); later calls: median (interquartile range)")
for name in ("eager", "aot_eager", "inductor"):
    print(f"{name:10} first call {first_call[name]:7.3f} s   later calls {per_call[name]}")
print(f"{'eager model':10} (no compile)          later calls {per_call['eager model']}")

# %% [markdown]
# On the left, the first call and then each round of later calls (its median, with a bar from
# the 25th to the 75th percentile), on a logarithmic scale: the first compiled call is slower
# than the others by the ratio printed above; on the right, the price of the first call per
# backend.

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
ticks = ["first"] + [f"round {r}" for r in range(1, 6)]
for (label, first, timings), marker in zip((("torch.compile (inductor)", first_compiled, rounds["compiled"]),
                                           ("eager", first_eager, rounds["eager"])), "os"):
    medians = [1000 * first] + [1000 * t.median for t in timings]
    below = [0] + [1000 * (t.median - t.low) for t in timings]
    above = [0] + [1000 * (t.high - t.median) for t in timings]
    left.errorbar(range(len(ticks)), medians, yerr=[below, above], fmt=marker + "-", capsize=3, label=label)
left.set_xticks(range(len(ticks)), ticks, fontsize=8)
left.set_yscale("log")
left.set_xlabel("calls")
left.set_ylabel("time per call (ms)")
left.set_title("the first compiled call compiles")
left.legend()
names = ["eager", "aot_eager", "inductor"]
right.bar(names, [first_call[n] for n in names], color=["#9ecae1", "#6baed6", "#2171b5"])
right.set_yscale("log")
right.set_ylabel("first call (s)")
right.set_title("first-call cost per backend")
plt.tight_layout()
plt.show()

# %% [markdown]
# Whether the later calls are faster than eager depends on the model, its sizes and the machine;
# the printout above says what happened here. Convolutions run library kernels compiled or not;
# what Inductor can save is the work around them: Python overhead, and the elementwise glue (the
# ReLU, the SiLU, the mean) fused into fewer passes over memory. Notebooks 08–10 rebuild those
# savings. A compile pays off only when the model is called many times with inputs of the same
# kind; the guards section shows what "the same kind" means.

# %% [markdown]
# ## What a graph is
#
# A **graph** is the program as a list of operations, each reading the values of earlier ones:
# straight-line code, no Python control flow, no Python values other than constants. A backend
# is a function that receives one; here is a backend that prints what Dynamo gives it (torch.fx's
# `GraphModule`, shown as Python code) and then runs it unchanged:

# %%
def printing_backend(graph_module, example_inputs):
    print(graph_module.code)
    return graph_module.forward


torch._dynamo.reset()
_ = torch.compile(model, backend=printing_backend)(x)

# %% [markdown]
# Each line after the renaming ones is one node: a call with its inputs. The weights arrive as
# inputs of `forward` (`L_self_modules_conv1_parameters_weight_`, ...). The `if`s and Python objects
# of `nn.Module.__call__` are gone: Dynamo ran them while recording.
#
# tensorcraft's compiler has its own graph (its IR, `tensorcraft.compiler.ir.Graph`): one row per
# node, with a kind — `placeholder` (an input), `param` (a module tensor, read by its name at every
# call), `constant`, `call` (a torch call) or `output` — and the shape and dtype the value had.
# Its capture stage records it by running the model once:

# %%
captured = library_capture(model, (x,), module=model)
print(captured.graph)

# %% [markdown]
# The same graph as a picture: inputs and parameters in grey, calls in blue, each arrow a value
# read by a later node.

# %%
draw_graph(captured.graph, title="SmallConvNet as tensorcraft captures it")
plt.show()

# %% [markdown]
# torch.fx can record the same model without running it: `torch.fx.symbolic_trace` calls
# `forward` with *proxies* — stand-ins that record every operation done to them. Traced through
# the modules (as tensorcraft does: it sees `F.conv2d`, not `nn.Conv2d`), its op sequence is the
# same:

# %%
class IntoModules(torch.fx.Tracer):
    def is_leaf_module(self, module, qualified_name):
        return False  # trace through nn.Conv2d and nn.Linear to the functions they call


fx_graph = IntoModules().trace(model)
fx_ops = [canonical_name(n.target) for n in fx_graph.nodes if n.op in ("call_function", "call_method")]
ours = [n.op for n in captured.graph.nodes if n.kind == "call"]
print("torch.fx   :", fx_ops)
print("tensorcraft:", ours)
print("same sequence:", fx_ops == ours)

# %% [markdown]
# ### How the capture sees each call: a `TorchFunctionMode`
#
# While a `TorchFunctionMode` is active, every torch call — `torch.*` functions, tensor methods
# (`x.sin()`), operators (`x * 2`) and `torch.nn.functional` — goes through its
# `__torch_function__(func, types, args, kwargs)` first. Inside it the mode is switched off, so
# calling `func(*args, **kwargs)` runs the real operation. This mode prints each call and runs it:

# %%
class PrintCalls(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        shape = list(result.shape) if isinstance(result, torch.Tensor) else type(result).__name__
        print(f"{canonical_name(func):10} -> {shape}")
        return result


with PrintCalls():
    model(x)

# %% [markdown]
# The mode sees values, not names: to know that the tensor passed to `F.relu` is the result of
# `conv2d`, a tracer keeps a table from each tensor it has seen (`id(tensor)`) to the node that
# produced it.
#
# ### The graph builder
#
# tensorcraft records through one class, `GraphBuilder` (`tensorcraft.compiler.builder`); both of
# the compiler's front-ends use it. Its methods:
#
# | call | records |
# |---|---|
# | `builder.placeholder(tensor, name, index)` | an input of the program (`index`: its position among the flat inputs) |
# | `builder.param(tensor, qualified_name)` | a module tensor, read at every call by its qualified name (`conv1.weight`) |
# | `builder.constant(tensor)` | a tensor baked into the graph |
# | `builder.call(func, node_args, node_kwargs, args, kwargs)` | runs `func(*args, **kwargs)` and records it with the nodes `node_args`, `node_kwargs` in place of the tensors; returns what it recorded: `(value, node, updated)` |
# | `builder.output(values, spec)` | the output node: the flat returned values (nodes where tensors) and how to rebuild their structure |
#
# `builder.call` returns a named tuple: `value` is what the call returned; `node` is a node when it
# returned one tensor, a tuple of nodes when it returned several (`x.chunk(2)`), and the plain value
# itself otherwise (`x.shape`). An **in-place** call — `t.relu_()`, `t += 1`,
# `F.relu(t, inplace=True)`, `t[0] = 1` — is recorded in its functional form (`relu(t)`), and
# `updated` is that new node: the tensor `t` (the call's first argument) now holds its value. For
# any other call `updated` is `None`.

# %%
builder = GraphBuilder()
a = torch.randn(2, 3)
a_node = builder.placeholder(a, "a", 0)
s, s_node, s_updated = builder.call(torch.sin, (a_node,), {}, (a,), {})       # s = torch.sin(a)
t, t_node, _ = builder.call(torch.mul, (s_node, 2), {}, (s, 2), {})          # t = s * 2
relu = builder.call(torch.Tensor.relu_, (t_node,), {}, (t,), {})             # t.relu_(): recorded as relu
builder.output([relu.updated], pytree.tree_flatten(t)[1])                    # t now holds relu's value
print(builder.graph)
print("torch.sin(a) updated:", s_updated, "| t.relu_() updated t, now:", relu.updated)

# %% [markdown]
# ## Exercise 1 — a tracer (4 points)
#
# Complete the tracer below, and `capture(fn, args, kwargs, module)`, the stage that
# `tensorcraft.compile` calls on the first call of a model. `capture` must:
#
# 1. give every tensor among the inputs a placeholder node (the inputs, flattened with
#    `pytree.tree_flatten((args, kwargs))`; `index` is the position in that flat list, numbers
#    included: in `f(k, x)` called as `f(3.0, x)` the tensor `x` is input 1);
# 2. run `fn(*args, **kwargs)` with your `Tracer` active, which records every call:
#    - `node_for(tensor)`: the tensor's node; a tensor not seen yet is a module tensor (its
#      qualified name is in `self.names`) — record a **param** node — or else a **constant**
#      (append it to `self.constants`);
#    - `__torch_function__`: replace the tensors in `args` and `kwargs` by their nodes
#      (`to_nodes(args, self.node_for)`), record the call with `builder.call`, return the result,
#      and remember the node of each tensor the call produced: one tensor, or each tensor of a
#      tuple (with the nodes of the tuple `node`); when `updated` is not `None` (an in-place call)
#      the tensor `args[0]` now has that node;
# 3. record the output node and return `Captured(graph, None, result, constants, input_names)`,
#    with `input_names` one name per flat input (`"arg0"`, `"arg1"`, ...).
#
# You do not need to handle calls the builder refuses (it raises `Refused`): the check's programs
# have none. **Forbidden** (tripwires): the library's `capture` and its recorder, torch.fx's
# tracing. numpy is not needed. The check compares your graph's op sequence and parameters with
# torch.fx's, and runs the compiled code on two inputs against eager PyTorch.

# %% nbgrader={"grade": false, "grade_id": "capture", "locked": false, "schema_version": 3, "solution": true, "task": false}
def module_tensor_names(module):
    """id(tensor) -> qualified name, for every parameter and buffer of ``module`` (None: no module)."""
    if module is None:
        return {}
    named = [*module.named_buffers(), *module.named_parameters()]
    return {id(tensor): name for name, tensor in named}


def to_nodes(value, node_for):
    """``value`` (arguments: tuples, lists, dicts nested) with every tensor replaced by node_for(tensor)."""
    if isinstance(value, torch.Tensor):
        return node_for(value)
    if isinstance(value, (tuple, list)):
        return type(value)(to_nodes(v, node_for) for v in value)
    if isinstance(value, dict):
        return {k: to_nodes(v, node_for) for k, v in value.items()}
    return value


class Tracer(TorchFunctionMode):
    def __init__(self, builder, module):
        super().__init__()
        self.builder = builder
        self.nodes = {}                            # id(tensor) -> its node
        self.names = module_tensor_names(module)   # id(tensor) -> qualified name
        self.constants = []                        # tensors recorded as constants

    def node_for(self, tensor):
        ### BEGIN SOLUTION
        if id(tensor) not in self.nodes:
            if id(tensor) in self.names:
                self.nodes[id(tensor)] = self.builder.param(tensor, self.names[id(tensor)])
            else:
                self.nodes[id(tensor)] = self.builder.constant(tensor)
                self.constants.append(tensor)
        return self.nodes[id(tensor)]
        ### END SOLUTION

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        ### BEGIN SOLUTION
        node_args, node_kwargs = to_nodes(args, self.node_for), to_nodes(kwargs, self.node_for)
        result, recorded, updated = self.builder.call(func, node_args, node_kwargs, args, kwargs)
        if updated is not None:
            self.nodes[id(args[0])] = updated
        if isinstance(result, torch.Tensor):
            self.nodes[id(result)] = recorded
        elif isinstance(recorded, tuple):
            for value, node in zip(result, recorded):
                if isinstance(value, torch.Tensor):
                    self.nodes[id(value)] = node
        return result
        ### END SOLUTION


def capture(fn, args=(), kwargs=None, module=None):
    kwargs = kwargs or {}
    builder = GraphBuilder()
    tracer = Tracer(builder, module)
    ### BEGIN SOLUTION
    flat, _ = pytree.tree_flatten((args, kwargs))
    for index, value in enumerate(flat):
        if isinstance(value, torch.Tensor):
            tracer.nodes[id(value)] = builder.placeholder(value, f"arg{index}", index)
    with tracer:
        result = fn(*args, **kwargs)
    out_flat, out_spec = pytree.tree_flatten(result)
    builder.output([tracer.node_for(v) if isinstance(v, torch.Tensor) else v for v in out_flat], out_spec)
    return Captured(builder.graph, None, result, tracer.constants, [f"arg{i}" for i in range(len(flat))])
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "capture_tests", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
check_capture(capture)
### BEGIN HIDDEN TESTS
from grader.checks.nb07_graph_capture import check_capture  # the grader's own, even if the notebook rebound the name

check_capture(capture, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# Your tracer inside the compiler: with `tc.substitute(capture=capture)` in force,
# `tc.compile` records the model with your function, compiles the graph and runs the generated
# code (the cell says so if `capture` is not written yet).

# %%
try:
    with tc.substitute(capture=capture):
        with_my_capture = tc.compile(model, backend="python")
        print("tensorcraft.compile with your capture equals eager:", torch.allclose(with_my_capture(x), model(x), atol=1e-5))
except NotImplementedError:
    print("capture is not written yet")

# %% [markdown]
# ## Graph breaks
#
# A graph holds tensor operations only. When a program turns a tensor's *values* into a Python
# value — `if x.sum() > 0:`, `x.item()`, `int(t)` — what it does next depends on data the graph
# cannot see while it is recorded. The same holds when a result's *shape* depends on the values
# (`x[x > 0]`, `torch.unique(x)`): a graph records the shapes of one call.
#
# Dynamo handles such a program with a **graph break**: it compiles the part before, runs the
# offending Python line eagerly, and compiles the part after, as separate graphs.
# `torch._dynamo.explain` counts them and says why:

# %%
def branchy(x):
    y = torch.relu(x) * 2
    if y.sum() > 10:   # reads a value into Python
        return y.sin()
    return y.cos()


def shapes_only(x):
    y = torch.relu(x) * 2
    if y.shape[0] > 2:  # reads a shape: known when the graph is captured
        return y.sin()
    return y.cos()


torch._dynamo.reset()
for program in (branchy, shapes_only):
    explanation = torch._dynamo.explain(program)(torch.randn(4, 3))
    print(f"{program.__name__:12} graphs: {explanation.graph_count}, graph breaks: {explanation.graph_break_count}")
    for reason in explanation.break_reasons:
        print("   reason:", reason.reason.splitlines()[0])

# %% [markdown]
# Dynamo's reason for `branchy` names the bytecode instruction it could not put in a graph: a
# jump (the `if`) that depends on a tensor. `shapes_only` stays one graph: a shape is not a value. Dynamo records the branch taken and
# *guards* on the shape, so that a call with another shape is checked before the code is reused.
#
# tensorcraft's capture is simpler than Dynamo: it records calls, not Python bytecode, so it
# cannot resume after a break. When a call cannot be recorded, the capture **refuses** the whole
# call: the compiled model runs that kind of input eagerly, and `explain()` says why. The
# decision is one function, `refusal(op, args, kwargs)`, that the graph builder asks before
# recording each call:

# %%
for program in (branchy, shapes_only):
    compiled_tc = tc.compile(program, backend="python")
    compiled_tc(torch.randn(4, 3))
    print(f"{program.__name__}:\n  " + compiled_tc.explain().replace("\n", "\n  "))

# %% [markdown]
# ## Exercise 2 — what capture must refuse (3 points)
#
# Write `refusal(op, args, kwargs)`: `None` when the call may be recorded, else a sentence saying
# why not. `op` is the call's canonical name (`canonical_name(func)`: `"__bool__"` for
# `bool(t)`, `"getitem"` for `t[...]`, `"item"`, `"size"`...), `args` and `kwargs` its arguments.
# Refuse:
#
# - the calls that read a tensor's values into Python: `__bool__`, `item`, `__int__`, `__index__`,
#   `__float__`, `tolist`, `numpy`;
# - the calls whose result's shape depends on the values: `nonzero`, `argwhere`, `unique`,
#   `unique_consecutive`, `masked_select`, and `getitem` when its index (`args[1]`, or one of the
#   items of `args[1]` when it is a tuple) is a tensor of dtype `torch.bool`;
# - the calls that draw random numbers: `rand`, `randn`, `rand_like`, `randn_like`, `randint`,
#   `randint_like`, `randperm`, `bernoulli`, `normal`, `multinomial`. Dynamo keeps them in its
#   graph (it replays the generator's state); our graphs cannot: recorded, two `rand_like(x)`
#   calls look like one repeated computation, and CSE (notebook 08) would merge them.
#
# Record everything else — shape reads (`x.shape`, `x.size(0)`, `len(x)`) included. The check
# runs programs through `tc.compile` with your rule and compares with `torch._dynamo.explain`: a
# program Dynamo breaks must run eagerly, one it captures whole must be compiled and give eager's
# result; a program that draws random numbers must run eagerly, with eager's numbers. **Forbidden**: the library's own `refusal`. numpy is not needed.

# %% nbgrader={"grade": false, "grade_id": "refusal", "locked": false, "schema_version": 3, "solution": true, "task": false}
def refusal(op, args, kwargs):
    ### BEGIN SOLUTION
    if op in {"__bool__", "item", "__int__", "__index__", "__float__", "tolist", "numpy"}:
        return f"data-dependent Python: Tensor.{op} reads a tensor's values into Python"
    if op in {"nonzero", "argwhere", "unique", "unique_consecutive", "masked_select"}:
        return f"data-dependent shape: {op} returns a shape that depends on the values"
    if op in {"rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm", "bernoulli",
              "normal", "multinomial"}:
        return f"randomness: {op} draws fresh random numbers at every call"
    if op == "getitem" and len(args) > 1:
        index = args[1] if isinstance(args[1], tuple) else (args[1],)
        if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index):
            return "data-dependent shape: indexing with a boolean mask"
    return None
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "refusal_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_refusal(refusal)
### BEGIN HIDDEN TESTS
from grader.checks.nb07_graph_capture import check_refusal  # the grader's own, even if the notebook rebound the name

check_refusal(refusal, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## Guards and recompiles
#
# Compiled code is specialised to what the first call looked like: the shapes (loop bounds), the
# strides (how values lie in memory), the dtypes, the device, whether gradients are needed, and
# the values of plain Python arguments, which a graph bakes in as constants. The **guards** are
# those facts, checked at every call: if they hold, the cached code runs; if not, the call
# **recompiles** and the new code is cached beside the old (up to a limit of 8 entries per
# function in both torch.compile and tensorcraft).
#
# A backend that counts its calls shows when torch.compile compiles. The function is called with
# inputs of 4, 5, 6 and again 4 rows, then in float64, then with another `k`. Gradients are back
# on from here (the guards remember the grad mode too).

# %%
torch.set_grad_enabled(True)


def scaled(x, k):
    return torch.tanh(x) * k + 1


def count_compiles(calls, **options):
    """For each call, did torch.compile compile anew? (a backend that counts its graphs)"""
    torch._dynamo.reset()
    count = [0]

    def counting_backend(graph_module, example_inputs):
        count[0] += 1
        return graph_module.forward

    compiled_fn = torch.compile(scaled, backend=counting_backend, **options)
    anew = []
    for args in calls:
        before = count[0]
        compiled_fn(*args)
        anew.append(count[0] > before)
    return anew


calls = [(torch.randn(4, 3), 2), (torch.randn(5, 3), 2), (torch.randn(6, 3), 2), (torch.randn(4, 3), 2),
         (torch.randn(4, 3, dtype=torch.float64), 2), (torch.randn(4, 3), 3)]
labels = ["4×3", "5×3", "6×3", "4×3 again", "float64", "k=3"]
dynamo_default = count_compiles(calls)
dynamo_static = count_compiles(calls, dynamic=False)
with_tc = tc.compile(scaled, backend="python")
tc_anew = []
for args in calls:
    before = with_tc.stats.compiles
    with_tc(*args)
    tc_anew.append(with_tc.stats.compiles > before)
for name, anew in (("torch.compile", dynamo_default), ("torch.compile dynamic=False", dynamo_static),
                   ("tensorcraft.compile", tc_anew)):
    print(f"{name:28}", " ".join("compile" if a else "reuse  " for a in anew), f"  ({sum(anew)} compiles)")

# %% [markdown]
# The default torch.compile compiles at the second shape again, but not at the third: after a
# recompile caused by a size, Dynamo marks that size **dynamic** ("automatic dynamic shapes") and
# compiles code that takes any size, guarded by a symbol instead of a number. With
# `dynamic=False` — and in tensorcraft, which always specialises — every new shape compiles once.
# Going back to a shape seen before reuses its entry. The plain argument `k` is guarded by value.

# %%
fig, ax = plt.subplots(figsize=(8, 2.4))
for row, (name, anew) in enumerate((("torch.compile", dynamo_default),
                                    ("torch.compile dynamic=False", dynamo_static),
                                    ("tensorcraft.compile", tc_anew))):
    ax.scatter(range(len(anew)), [row] * len(anew), s=160, marker="s",
               c=["#d62728" if a else "#2ca02c" for a in anew])
ax.set_yticks([0, 1, 2], ["torch.compile", "dynamic=False", "tensorcraft"])
ax.set_xticks(range(len(labels)), labels)
ax.set_ylim(-0.6, 2.6)
ax.invert_yaxis()
ax.set_title("red: the call compiles, green: it reuses a cached entry")
plt.tight_layout()
plt.show()

# %% [markdown]
# `explain()` lists tensorcraft's cached entries, each with its guards, and for every recompile
# the guard that failed on the newest entry (every entry was tried, and every one failed):

# %%
print(with_tc.explain())

# %% [markdown]
# Past the limit of 8 entries, a function that sees a new shape at every call stops compiling: it
# warns once and runs eagerly from then on.

# %%
import warnings

growing = tc.compile(scaled, backend="python")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for rows in range(1, 11):
        growing(torch.randn(rows, 3), 2)
print(f"compiles: {growing.stats.compiles}, eager calls: {growing.stats.eager_calls}")
print("warning:", caught[0].message if caught else None)

# %% [markdown]
# ### One input's guard: `check_input`
#
# For each flat input, the guards remember a tuple, and at every call the stage
# `check_input(name, value, remembered)` compares the new value with it: `None` if it matches, else
# the difference in words. A substitute that prints what it is given, then answers as the library
# does, shows the tuples:

# %%
def peek(name, value, remembered):
    print(f"{name}: remembered {remembered}")
    return library_check_input.library(name, value, remembered)  # .library: the library's own function


peeked = tc.compile(scaled, backend="python")
peeked(torch.randn(4, 3), 2)
transposed = torch.randn(3, 4).t()
print("the new x: shape", tuple(transposed.shape), "strides", transposed.stride())
with tc.substitute(check_input=peek):
    peeked(transposed, 2)
print("recompiles:", peeked.stats.recompiles)

# %% [markdown]
# A tensor's tuple is `("tensor", type, shape, stride, dtype, device, requires_grad)` (a named
# tuple, `TensorMeta`, so it prints its field names); a plain value's is `("value", type, value)`.
# The transposed tensor has the remembered shape `(4, 3)` but
# strides `(1, 4)` instead of `(3, 1)`: its values lie in memory column by column, and code that
# was compiled to walk rows would read them in the wrong order. So the entry is not reused.

# %% [markdown]
# ## Exercise 3 — the guard of one input (3 points)
#
# Write `input_guard(name, value, remembered)`, the stage `check_input`: return `None` when
# `value` may reuse the compiled entry, else a string that names the input and the first
# difference (for example `"input x: dtype torch.float64 != torch.float32"`).
#
# - `remembered[0] == "tensor"`: `value` must be a tensor whose type, shape, strides, dtype,
#   device and `requires_grad` equal `remembered[1:]` (compare `tuple(value.shape)` and
#   `value.stride()` with the remembered tuples);
# - `remembered[0] == "value"`: `value` must have exactly the remembered type (`type(value) is
#   remembered[1]`) and equal the remembered value;
# - `remembered[0] == "object"` (anything else, e.g. a function): the same object (`is`).
#
# The check runs sequences of calls through `tc.compile` with `tc.substitute(check_input=...)` and
# compares, call by call, "compiled anew" or "reused" with `torch.compile(dynamic=False)`.
# **Forbidden**: the library's `check_input` and `check_guards` and their helpers. numpy is not
# needed.

# %% nbgrader={"grade": false, "grade_id": "input_guard", "locked": false, "schema_version": 3, "solution": true, "task": false}
TENSOR_FIELDS = ("type", "shape", "stride", "dtype", "device", "requires_grad")


def input_guard(name, value, remembered):
    ### BEGIN SOLUTION
    kind = remembered[0]
    if kind == "tensor":
        if not isinstance(value, torch.Tensor):
            return f"input {name}: was a tensor, now a {type(value).__name__}"
        now = (type(value), tuple(value.shape), value.stride(), value.dtype, value.device, value.requires_grad)
        for field, is_now, was in zip(TENSOR_FIELDS, now, remembered[1:]):
            if is_now != was:
                return f"input {name}: {field} {is_now} != {was}"
        return None
    if kind == "value":
        if type(value) is not remembered[1]:
            return f"input {name}: type {type(value).__name__} != {remembered[1].__name__}"
        return None if value == remembered[2] else f"input {name}: value {value!r} != {remembered[2]!r}"
    return None if value is remembered[2] else f"input {name}: another {type(value).__name__} object"
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "input_guard_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_input_guard(input_guard)
### BEGIN HIDDEN TESTS
from grader.checks.nb07_graph_capture import check_input_guard  # the grader's own, even if the notebook rebound the name

check_input_guard(input_guard, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# Your guard deciding tensorcraft's cache hits, on the calls of the guards section (the cell says
# so if `input_guard` is not written yet):

# %%
try:
    mine = tc.compile(scaled, backend="python")
    with tc.substitute(check_input=input_guard):
        for args, label in zip(calls, labels):
            before = mine.stats.compiles
            mine(*args)
            print(f"{label:10}", "compile" if mine.stats.compiles > before else "reuse")
    print("recompiles:", mine.stats.recompiles)
except NotImplementedError:
    print("input_guard is not written yet")

# %% [markdown]
# ## Common mistakes
#
# - **Timing the first call.** The first call of a compiled model includes the compile: seconds,
#   not milliseconds. Measure after a warm-up call, and count the compile separately.
# - **Expecting a speed-up from every model.** A model dominated by convolutions or matrix
#   products runs the same library kernels compiled or not; what compiling removes is the Python
#   overhead and the memory traffic of the glue between them.
# - **Reading a value in `forward`.** `if x.sum() > 0`, `.item()` and `x[x > 0]` break
#   torch.compile's graph (and make tensorcraft's capture refuse the call); branching on
#   `x.shape` does not.
# - **A recompile in every call.** A new shape, dtype or Python argument value each call
#   recompiles each call, until the cache limit (8) sends the function back to eager. Pass
#   changing numbers as tensors, or let torch.compile mark sizes dynamic.
# - **`2 == 2.0` in a guard.** Python says they are equal; `x * 2` and `x * 2.0` are different
#   programs for an integer tensor. Guards compare a plain value's type as well as its value.
#
# A too-lenient guard is a silent bug, not a slow call: here, code compiled for a float32 input is
# reused for a float64 one, and the result comes back in float32:

# %%
def lenient(name, value, remembered):  # compares shapes only
    return None if tuple(value.shape) == remembered[2] else f"input {name}: shape"


fooled = tc.compile(lambda t: t * 2 + 1, backend="python")
fooled(torch.randn(3))
with tc.substitute(check_input=lenient):
    answer = fooled(torch.randn(3, dtype=torch.float64))
print("float64 input, result dtype:", answer.dtype, "| compiles:", fooled.stats.compiles)

# %% [markdown]
# And the reason a plain value's type is guarded: with an integer tensor, `* 2` and `* 2.0` give
# results of different dtypes, although `2 == 2.0` in Python.

# %%
counts = torch.arange(3)
print("2 == 2.0:", 2 == 2.0, "| (counts * 2).dtype:", (counts * 2).dtype, "| (counts * 2.0).dtype:", (counts * 2.0).dtype)

# %% [markdown]
# ## Summary
#
# - `torch.compile` captures the model into a graph on the first call (Dynamo), hands it to a
#   backend (`eager`: run as is; `aot_eager`: through AOTAutograd; `inductor`: fused and compiled
#   code) and caches the result with its guards. The first call costs seconds; later calls with
#   inputs of the same kind run the cached code.
# - A graph is straight-line tensor code. torch.fx records it with proxies, Dynamo from Python
#   bytecode, tensorcraft's capture with a `TorchFunctionMode` that sees every torch call.
# - Reading values into Python and value-dependent shapes break the graph: Dynamo splits it,
#   tensorcraft runs that call eagerly; shapes are guarded, not refused.
# - A cached entry is reused only while its guards hold: shape, strides, dtype, device,
#   `requires_grad`, and the type and value of plain arguments. Otherwise the call recompiles.
#
# **Next:** notebook 08 takes the captured graph and rewrites it with passes: dead-code
# elimination, constant folding, common subexpressions, and folding a batch norm into the
# convolution before it.
