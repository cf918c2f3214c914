# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 10 · Code generation: from a fused group to source
#
# **You will learn to**
# - read a fused kernel (a small, typed description of one fused group) and print it as Python;
# - print the same kernel as C with OpenMP, with the index arithmetic that makes broadcasting work,
#   and compile and load it on the spot;
# - read a Triton kernel for it, run interpreted on the CPU or natively on a GPU;
# - write the wrapper that allocates buffers, calls the kernels and frees each value after its last
#   use, and compare it with the wrapper Inductor prints for `TORCH_LOGS=output_code`;
# - measure eager, torch.compile and tensorcraft's backends side by side on an elementwise chain.
#
# **Time:** about 60 minutes. **Builds on:** notebook 09 (fusion groups and the memory plan).
#
# In the three exercises you write three stages of `tensorcraft.compile`: the Python kernel
# printer `python_source`, the C kernel printer `c_source`, and the wrapper printer
# `generate_wrapper`. Each check compiles small models with your stage swapped in
# (`tc.substitute(python_source=...)`) and compares the compiled model's results with eager PyTorch.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math
import operator
import os
import time

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # Triton's CPU interpreter: set before triton is imported

import matplotlib.pyplot as plt
import torch.nn.functional as F

import tensorcraft as tc
from grader.checks.nb10_code_generation import check_c_source, check_generate_wrapper, check_python_source
from tensorcraft.compiler.codegen import c as c_backend
from tensorcraft.compiler.codegen import python as python_backend
from tensorcraft.compiler.codegen.kernel import evaluate
from tensorcraft.compiler.codegen.literals import c_float, python_float
from tensorcraft.compiler.codegen.python import BINARY_SOURCE, REDUCTION_SOURCE, UNARY_SOURCE
from tensorcraft.compiler.codegen.wrapper import SourcePrinter, WrapperCode
from tensorcraft.compiler.passes.memory_plan import is_kernel_output
from tensorcraft.timing import time_call

torch.manual_seed(0)
# seconds of calls per timing: while grading (the grader sets NBGRADER_EXECUTION) shorter, still the
# median of five blocks or more with their spread
TIMING_S = 0.02 if os.environ.get("NBGRADER_EXECUTION") else 0.1


def kernels_of(compiled):
    """The fused kernels (codegen.kernel.Kernel) of the last graph a tc.compile object compiled."""
    return [node.target for node in compiled.compiled.optimized.nodes if node.kind == "kernel"]


# %% [markdown]
# ## The input of code generation: one fused kernel
#
# Notebook 09 grouped elementwise nodes into fused groups. The fusion pass turns each group into
# one `kernel` node whose target is a `Kernel`: a plain description that every code generator
# reads. Here is a chain of six elementwise operations on `x` (shape `[4, 5]`) and `y` (one row,
# shape `[5]`, broadcast over the rows). The first call of a `tc.compile` object captures and compiles
# (and returns eager's answer); the second runs the generated code:

# %%
def chain(x, y):
    return (torch.sigmoid(x * 2.0 + y) * x - 0.1) * y


x, y = torch.randn(4, 5), torch.randn(5)
compiled = tc.compile(chain, backend="python")
compiled(x, y)
print("compiled equals eager:", torch.allclose(compiled(x, y), chain(x, y)))
print(compiled.compiled.optimized)
kernel = kernels_of(compiled)[0]
print(kernel)

# %% [markdown]
# The optimized graph keeps the inputs, one `kernel` node and a `getitem` node for its output.
# The kernel holds:
#
# - `shape`: the **iteration space**, here `[4, 5]`: the kernel computes one value per point;
# - `inputs`: buffers of the same rank as the iteration space, with size 1 where they broadcast
#   (`y` became the buffer `[1, 5]`);
# - `stmts`: straight-line statements in SSA form (each name is assigned once): `load` reads an
#   input at the current point, `const` is a number, any other op applies to earlier names;
# - `outputs`: which statement each output stores, at every point or reduced over the last axis;
# - `dtype`: `"float32"` or `"float64"`.
#
# `evaluate(kernel, *inputs)` is what a kernel means, written with torch ops: every generator must
# compute this. Below, the input buffers are passed with the kernel's rank (`y` as `[1, 5]`):

# %%
meaning = evaluate(kernel, x, y.reshape(1, 5))[0]
print(torch.allclose(meaning, chain(x, y)))

# %% [markdown]
# Every compiled kernel, whatever its language, is called the same way: `run(*inputs, *outputs)`,
# with the output buffers **allocated by the caller** and overwritten by the kernel. Allocating is
# the wrapper's job (the last part of this notebook).
#
# ## A Python kernel
#
# The portable backend prints each statement as one torch call. It is not faster than eager (each
# line is still a separate torch operation), but it runs everywhere and shows what every other
# generator must compute. The library's printer produces:

# %%
print(python_backend.python_source(kernel))

# %% [markdown]
# A constant becomes a 0-dimensional tensor of the kernel's dtype, so that a float64 kernel keeps
# `0.1` in float64. The outputs are written with `copy_`, into the buffers the caller passed in.
# For a reduced output the value is first expanded to the full iteration space (a value that reads
# only broadcast inputs would otherwise be too small), then reduced with `keepdim=True`, since the
# output buffer keeps the reduced axis with length 1:

# %%
def row_norms(x, y):
    v = torch.sigmoid(x) * y
    return (v * v).sum(-1, keepdim=True)


compiled_norms = tc.compile(row_norms, backend="python")
compiled_norms(x, y)
print("compiled equals eager:", torch.allclose(compiled_norms(x, y), row_norms(x, y)))
norm_kernel = kernels_of(compiled_norms)[0]
print(norm_kernel.outputs, "output shape", norm_kernel.output_shape(norm_kernel.outputs[0]))
print(python_backend.python_source(norm_kernel))

# %% [markdown]
# ## Exercise 1 — `python_source(kernel) -> str` (3 points)
#
# Write the Python source of a kernel: a function named exactly `kernel.name` whose parameters are
# the input names (`kernel.inputs`, in order) then the output names (`kernel.outputs`, in order).
#
# - `load` statements: `name = <input name>`;
# - `const` statements: `name = torch.full((), <value>, dtype=torch.<kernel.dtype>, device=<first output>.device)`
#   (print the value with `python_float(value)`, which also spells NaN and infinities);
# - other statements: `TORCH_OPS[op].format(*args)`, e.g. `"torch.add({}, {})".format("v1", "x0")`;
# - each output: `<output>.copy_(<value>)`; a reduced one (`output.reduce` is `"sum"`, `"mean"`,
#   `"max"` or `"min"`):
#   `<output>.copy_(TORCH_REDUCTIONS[reduce](<value>.expand(<kernel.shape as a tuple>), dim=-1, keepdim=True))`.
#
# The check compiles models with `tc.compile(model, backend="python")` while
# `tc.substitute(python_source=your_function)` is in force, so that the backend executes your
# source, on programs with broadcast, transposed, float64 inputs and infinite constants. Before each
# call the output buffers are filled with NaN: an output you do not write shows.
# The library's `python_source` cannot be called from your function while the check runs.
# Your function builds a string: numpy is not needed.

# %%
TORCH_OPS = {**UNARY_SOURCE, **BINARY_SOURCE}   # op -> "torch.add({}, {})"
TORCH_REDUCTIONS = REDUCTION_SOURCE              # "sum" -> "torch.sum", "max" -> "torch.amax", ...
print(TORCH_OPS["sigmoid"], TORCH_OPS["add"], TORCH_REDUCTIONS)


# %% nbgrader={"grade": false, "grade_id": "python_source", "locked": false, "schema_version": 3, "solution": true, "task": false}
def python_source(kernel):
    """Python source of `kernel`: def <name>(<inputs>, <outputs>), one line per statement, then the stores."""
    ### BEGIN SOLUTION
    params = [b.name for b in kernel.inputs] + [o.name for o in kernel.outputs]
    first_output = kernel.outputs[0].name
    lines = [f"def {kernel.name}({', '.join(params)}):"]
    for s in kernel.stmts:
        if s.op == "load":
            value = s.args[0]
        elif s.op == "const":
            value = (f"torch.full((), {python_float(s.args[0])}, dtype=torch.{kernel.dtype}, "
                     f"device={first_output}.device)")
        else:
            value = TORCH_OPS[s.op].format(*s.args)
        lines.append(f"    {s.name} = {value}")
    for o in kernel.outputs:
        value = o.value
        if o.reduce is not None:
            full = f"{o.value}.expand({tuple(kernel.shape)})"
            value = f"{TORCH_REDUCTIONS[o.reduce]}({full}, dim=-1, keepdim=True)"
        lines.append(f"    {o.name}.copy_({value})")
    return "\n".join(lines) + "\n"
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "python_source_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_python_source(python_source)
### BEGIN HIDDEN TESTS
from grader.checks.nb10_code_generation import check_python_source  # the grader's own, even if rebound

check_python_source(python_source, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# ## A C kernel with OpenMP, compiled on the spot
#
# Python lines each call into torch; a C kernel is one loop nest that computes every statement at
# one point and stores the result, so the intermediate values stay in registers instead of memory.
# Here is the library's C for the kernel above, then the same kernel compiled with the system's C
# compiler (the `.so` is cached on disk by a hash of the source) and loaded with `ctypes`:

# %%
print(c_backend.c_source(kernel))

# %%
start = time.perf_counter()
compiled_c = c_backend.compile_kernel(kernel)
print(f"generate + compile (or load from the disk cache) + load: {1000 * (time.perf_counter() - start):.0f} ms")
out = torch.empty(4, 5)
compiled_c(x, y.reshape(1, 5), out)        # run(*inputs, *outputs)
print("same as eager:", torch.allclose(out, chain(x, y)), "| max difference", (out - chain(x, y)).abs().max().item())

# %% [markdown]
# Three things in that source are worth reading slowly:
#
# 1. **Shapes are constants.** The kernel is specialised to `[4, 5]`, as torch.compile's kernels are
#    specialised to the shapes they were compiled for: the C compiler sees every loop bound.
# 2. **Broadcasting is index arithmetic.** The row `y` is read at column `j` of every row: its
#    row pointer is `in_in1 + 0` for every row, while `x`'s is `in_in0 + row * 5`.
# 3. **Numerics.** The library compiles without `-ffast-math` (NaN and infinities behave as in
#    eager) and uses glibc's vector math for `expf`; the difference from eager printed above is a
#    few units in the last place at most.
#
# ### Offsets: where a broadcast input is read
#
# A contiguous buffer of shape `[n0, n1, n2]` stores element `(i0, i1, i2)` at
# `i0 * (n1 * n2) + i1 * n2 + i2`: the stride of an axis is the product of the sizes after it. A
# buffer broadcast along an axis (size 1 there) is read at the same place for every index along
# that axis: its stride there is **0**. That is exactly what `expand` does in torch: no copy, stride 0.

# %%
for buffer in ([3, 4, 5], [1, 4, 1], [3, 1, 5], [1, 1, 5]):
    print(f"buffer {str(buffer):10} expanded to [3, 4, 5] has strides", torch.empty(buffer).expand(3, 4, 5).stride())

# %% [markdown]
# So with loop variables `i0, i1, i2`, the buffer `[1, 4, 1]` is read at `in[i1]` and the buffer
# `[3, 1, 5]` at `in[i0 * 5 + i2]`: its own strides `(5, 5, 1)`, with 0 where its size is 1.
#
# ## Exercise 2 — `c_source(kernel) -> str` (3 points)
#
# Write C for a **pointwise** kernel (no output has `reduce`; raise `ValueError` for one that has):
#
# ```c
# #include <math.h>
# #include <stdint.h>
#
# void kernel_<kernel.name>(const float *in_<input>, ..., float *out_<output>, ..., int n_threads) {
# #pragma omp parallel for num_threads(n_threads)
#     for (int64_t i0 = 0; i0 < <n0>; i0++) {
#         for (int64_t i1 = 0; i1 < <n1>; i1++) {
#             const float v_<stmt> = ...;          /* one line per statement, in order */
#             out_<output>[<offset>] = v_<value>;  /* one line per output */
#         }
#     }
# }
# ```
#
# - the C type is `C_TYPES[kernel.dtype]` (`float` or `double`); the function must be called
#   `kernel_` + `kernel.name`, with the inputs, then the outputs, then `int n_threads`;
# - one loop per axis of `kernel.shape`, the first outermost (a rank-0 kernel has no loop);
# - `load`: `in_<input>[<offset>]` with the input's own offset (strides 0 where it broadcasts);
#   `const`: `c_float(value, torch dtype)` (it spells `2.0f` in float32, `NAN`, `INFINITY`);
#   other ops: `C_OPS[op].format(a=..., b=..., f=...)` with the operands' variable names and `f`
#   the suffix of the float versions of math.h's functions (`"f"` for float, `""` for double);
# - the outputs have the kernel's full shape.
#
# The check compiles models with `tc.compile(model, backend="c")` while
# `tc.substitute(c_source=your_function)` is in force: the C compiler compiles your source and the
# model's fused kernels run it, on broadcast, transposed (the wrapper makes them contiguous first)
# and float64 inputs, and on infinite constants, against eager PyTorch. Output buffers are filled
# with NaN before each call. C kernels run on the CPU only (on a GPU the Triton printer takes their
# place), so this check has no CUDA cases and no device to get wrong.
# The library's `c_source` and its printer's methods cannot be called while the check runs.
# Your function builds a string: numpy is not needed.

# %%
C_TYPES = {"float32": "float", "float64": "double"}
C_OPS = {
    "neg": "-{a}", "abs": "fabs{f}({a})", "exp": "exp{f}({a})", "log": "log{f}({a})",
    "sqrt": "sqrt{f}({a})", "rsqrt": "1 / sqrt{f}({a})", "sin": "sin{f}({a})", "cos": "cos{f}({a})",
    "tanh": "tanh{f}({a})", "sigmoid": "1 / (1 + exp{f}(-{a}))",
    "relu": "({a} > 0 || {a} != {a}) ? {a} : 0",
    "gelu": "(0.5{f} * {a}) * (1 + erf{f}({a} * 0.7071067811865476{f}))",
    "silu": "{a} / (1 + exp{f}(-{a}))", "erf": "erf{f}({a})", "reciprocal": "1 / {a}",
    "add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}", "div": "{a} / {b}",
    "maximum": "({a} > {b} || {a} != {a}) ? {a} : {b}", "minimum": "({a} < {b} || {a} != {a}) ? {a} : {b}",
    "pow": "pow{f}({a}, {b})",
}
print(C_OPS["sigmoid"].format(a="v_x0", f="f"), "|", C_OPS["add"].format(a="v_x0", b="v_c1", f=""))


# %% nbgrader={"grade": false, "grade_id": "c_source", "locked": false, "schema_version": 3, "solution": true, "task": false}
def element_offset(buffer_shape, shape):
    """C expression of the element a buffer of `buffer_shape` holds at point (i0, i1, ...) of `shape`."""
    ### BEGIN SOLUTION
    terms, stride = [], 1
    for d in reversed(range(len(shape))):
        if buffer_shape[d] != 1:
            terms.append(f"i{d}" if stride == 1 else f"i{d} * {stride}")
        stride *= buffer_shape[d]
    return " + ".join(reversed(terms)) or "0"
    ### END SOLUTION


def c_source(kernel):
    """C + OpenMP source of a pointwise `kernel`: void kernel_<name>(inputs..., outputs..., int n_threads)."""
    ### BEGIN SOLUTION
    if any(o.reduce for o in kernel.outputs):
        raise ValueError(f"kernel {kernel.name} reduces: this c_source writes pointwise kernels only")
    t = C_TYPES[kernel.dtype]
    f = "f" if t == "float" else ""
    dtype = getattr(torch, kernel.dtype)
    params = [f"const {t} *in_{b.name}" for b in kernel.inputs] + [f"{t} *out_{o.name}" for o in kernel.outputs]
    lines = ["#include <math.h>", "#include <stdint.h>", "",
             f"void kernel_{kernel.name}({', '.join(params)}, int n_threads) {{"]
    pad = "    "
    for d, n in enumerate(kernel.shape):
        if d == 0:
            lines.append("#pragma omp parallel for num_threads(n_threads)")
        lines.append(f"{pad}for (int64_t i{d} = 0; i{d} < {n}; i{d}++) {{")
        pad += "    "
    shapes = {b.name: b.shape for b in kernel.inputs}
    for s in kernel.stmts:
        if s.op == "load":
            value = f"in_{s.args[0]}[{element_offset(shapes[s.args[0]], kernel.shape)}]"
        elif s.op == "const":
            value = c_float(s.args[0], dtype)
        else:
            names = [f"v_{a}" for a in s.args]
            value = C_OPS[s.op].format(a=names[0], b=names[-1], f=f)
        lines.append(f"{pad}const {t} v_{s.name} = {value};")
    here = element_offset(kernel.shape, kernel.shape)
    for o in kernel.outputs:
        lines.append(f"{pad}out_{o.name}[{here}] = v_{o.value};")
    for _ in kernel.shape:
        pad = pad[4:]
        lines.append(f"{pad}}}")
    lines.append("}")
    return "\n".join(lines) + "\n"
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "c_source_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_c_source(c_source)
### BEGIN HIDDEN TESTS
from grader.checks.nb10_code_generation import check_c_source  # the grader's own, even if rebound

check_c_source(c_source, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# Your kernel, printed for the chain of the first section, then run by the whole compiler:

# %%
try:
    print(c_source(kernel))
    with tc.substitute(c_source=c_source):  # while a substitute is in force, every call compiles afresh
        mine = tc.compile(chain, backend="c")
        print("tc.compile with your c_source equals eager:", torch.allclose(mine(x, y), chain(x, y)))
except NotImplementedError:
    print("c_source is not written yet: solve exercise 2, then run this cell again")

# %% [markdown]
# Why C and Python here, and not the other way round? The Python kernel teaches the contract
# (names, order of arguments, outputs written in place) with nothing else in the way; the C kernel
# adds what makes generated code fast or wrong: loop bounds, index arithmetic, types and the
# spelling of every operation. The library's own C printer does more than yours: it merges axes
# that every input treats alike (`codegen.layout.collapse`), so that the loop nest is as shallow as
# possible, vectorises the inner loop (`#pragma omp simd`), splits long rows across threads, and
# handles reductions.
#
# ## A Triton kernel: interpreted on the CPU, native on a GPU
#
# On a GPU, Inductor (and tensorcraft) generate **Triton**: a Python-like language in which one
# *program* handles a block of elements, with vector loads and stores and a mask for the last,
# partial block. Broadcasting is the same offset arithmetic, on a whole block of flat indices at
# once. Without a GPU, Triton's interpreter (`TRITON_INTERPRET=1`, set in the first code cell
# before `triton` was imported) runs each program with numpy on CPU tensors: correct, and slow.

# %%
from tensorcraft.compiler.codegen import triton as triton_backend  # noqa: E402

print(triton_backend.triton_source(kernel))

# %%
device = "cuda" if torch.cuda.is_available() else "cpu"
print("Triton runs", "natively on the GPU" if device == "cuda" else
      "in its interpreter on the CPU (no GPU here: torch.cuda.is_available() is False)")
compiled_triton = triton_backend.compile_kernel(kernel)
x_d, y_d = x.to(device), y.reshape(1, 5).to(device)
out_d = torch.empty(4, 5, device=device)
compiled_triton(x_d, y_d, out_d)
print("same as eager:", torch.allclose(out_d.cpu(), chain(x, y), atol=1e-6))

# %% [markdown]
# ## The wrapper: allocate, call, free
#
# The kernels are only half of the generated code. The **wrapper** is one Python function that runs
# the whole optimized graph: it allocates each kernel's output buffers, calls the kernels, calls
# torch for everything that was not fused (matmuls: Inductor calls them *extern kernels*), deletes
# every intermediate right after its last use, and returns the results. Here is tensorcraft's for a
# small MLP, `(gelu(x @ w1 + b1) * 0.5 + 0.25) @ w2`, with the memory plan of notebook 09:

# %%
def mlp(x, w1, b1, w2):
    return (F.gelu(x @ w1 + b1) * 0.5 + 0.25) @ w2


def mlp_inputs(batch, d=64, hidden=256, out=64):
    return torch.randn(batch, d), torch.randn(d, hidden) / 8, torch.randn(hidden), torch.randn(hidden, out) / 16


mlp_args = mlp_inputs(32)
compiled_mlp = tc.compile(mlp)
compiled_mlp(*mlp_args)
print("equals eager:", torch.allclose(compiled_mlp(*mlp_args), mlp(*mlp_args), atol=1e-5))
print(compiled_mlp.compiled.code.source)

# %% [markdown]
# Read it from the top: the `_slot` buffers of the memory plan are allocated once, when the code is
# loaded; `forward` calls torch's matmul, makes the kernel's input contiguous and reshapes the bias
# to its buffer shape `[1, 256]`, allocates the kernel's output, calls the kernel, and deletes
# `matmul` as soon as the kernel has read it, so that its memory goes back before the second matmul
# allocates.
#
# ### Inductor's wrapper, as `TORCH_LOGS=output_code` shows it
#
# `torch.compile` prints the same two parts when the environment variable `TORCH_LOGS=output_code`
# is set: the kernels (C++ on the CPU, Triton on a GPU) and a wrapper function `call(args)`.
# `torch._inductor.utils.run_and_get_code` runs a compiled function and returns that code as
# strings, which is easier to show here. The first call compiles, which takes seconds; this
# notebook compiles once and reuses the result in the benchmark below.

# %%
from torch._inductor.utils import run_and_get_code  # noqa: E402

inductor_mlp = torch.compile(mlp)
start = time.perf_counter()
result, inductor_code = run_and_get_code(inductor_mlp, *mlp_args)
inductor_compile_s = time.perf_counter() - start
print(f"torch.compile's first call (compile included): {inductor_compile_s:.1f} s;",
      "equals eager:", torch.allclose(result, mlp(*mlp_args), atol=1e-5))
wrapper_text = inductor_code[0]
start_line = wrapper_text.index("def call(")
print(wrapper_text[start_line: wrapper_text.index("\n\n", start_line)])

# %% [markdown]
# The shapes are the same as tensorcraft's: `extern_kernels.mm` or `addmm` for the matmuls (the bias
# may be folded into `addmm`), `empty_strided_cpu` for each buffer, one call of the fused C++ kernel
# (`cpp_fused_...`) for the GELU chain, `del` after the last use, and a tuple returned. Inductor's
# kernel itself, a little further up in the same text:

# %%
kernel_start = wrapper_text.index("cpp_fused_") if "cpp_fused_" in wrapper_text else 0
print(wrapper_text[kernel_start: kernel_start + 1500])

# %% [markdown]
# ## Exercise 3 — `generate_wrapper(graph, plan, kernels, name="forward") -> WrapperCode` (3 points)
#
# Write the wrapper. Walk `graph.nodes` in order, with `index` the position of each node:
#
# - `"placeholder"` and `"param"` nodes are the function's parameters: `graph.placeholders + graph.params`,
#   in that order, by `node.name`;
# - a `"constant"` node is a tensor the code reads by name: put it in the namespace,
#   `namespace[node.name] = node.target.contiguous()` (it may also be a plain number: store it as it is);
# - a `"kernel"` node: `kernel = node.target`. For each output `i` of `kernel.outputs`, the graph
#   has a `getitem` node among `graph.users()[node]` (`is_kernel_output(user)` and `user.args[1] == i`)
#   whose name the rest of the code uses. Allocate it: if the plan put it in a slot
#   (`plan.slot_of[user]`), as the view `_slot<k>[:<numel>].view(<shape>)`, else as
#   `torch.empty(<shape>, dtype=torch.<kernel.dtype>, device=<printer.value(node.device)>)`, where
#   `<shape>` is `kernel.output_shape(output)`. Then call the compiled kernel, `kernels[node]`, by the
#   name you bound it to in the namespace (the node's own, `node.name`: unique in the graph), with each input
#   `node.args[j]` passed as `<its name>.contiguous().reshape(<kernel.inputs[j].shape as a tuple>)`,
#   followed by the outputs;
# - a `getitem` node of a kernel (`is_kernel_output(node)`): nothing, the kernel's lines assigned it;
# - any other `"call"` node: `<node.name> = <printer.call(node)>` (the printer spells torch calls);
# - the `"output"` node: `return (<printer.value(a)> for each a in node.args, as a tuple)`;
# - after each node but the output: `del` the names of `plan.frees_after.get(index, [])` whose
#   `kind` is `"call"` (the others are parameters and constants, which belong to the caller).
#
# Before `def`, allocate each slot of `plan.slots` once:
# `_slot<k> = torch.empty(<slot.numel>, dtype=<slot.dtype>, device=<printer.value(slot.device)>)`.
# The namespace holds `torch`, every compiled kernel under its node's name (`kernels` is a dict
# kernel node → compiled kernel) and the constants; `printer = SourcePrinter(namespace)` may add values it cannot
# spell. Return `WrapperCode(source, namespace, [n.attrs["index"] for n in graph.placeholders],
# [n.target for n in graph.params])`.
#
# The check compiles models (matmuls with fused chains, two kernels sharing a slot, a transposed
# input, two results) with `tc.substitute(generate_wrapper=your_function)`, compares with eager,
# and reads your source: every value in `plan.slot_of` must be assigned a view of its `_slot<k>`,
# and every intermediate that `plan.frees_after` lists (and that is not in a slot) must be deleted
# before the next value is allocated. One group runs on the `meta` device (tensors with shapes and
# no data; its kernels run through the Python backend), so that a buffer allocated on the CPU
# whatever the model's device shows without a GPU. Your function builds a string: numpy is not needed, and the
# library's own `generate_wrapper` cannot be called while the check runs.

# %% nbgrader={"grade": false, "grade_id": "generate_wrapper", "locked": false, "schema_version": 3, "solution": true, "task": false}
def generate_wrapper(graph, plan, kernels, name="forward"):
    """Python source of `name`(<inputs>, <params>) that allocates, calls the kernels and torch, frees, returns."""
    ### BEGIN SOLUTION
    namespace = {"torch": torch, "operator": operator, **{node.name: compiled for node, compiled in kernels.items()}}
    printer = SourcePrinter(namespace)
    users = graph.users()
    header = [f"_slot{k} = torch.empty({s.numel}, dtype={s.dtype}, device={printer.value(s.device)})"
              for k, s in enumerate(plan.slots)]
    body = []
    for index, node in enumerate(graph.nodes):
        if node.kind in ("placeholder", "param"):
            continue
        if node.kind == "constant":
            value = node.target
            namespace[node.name] = value.contiguous() if isinstance(value, torch.Tensor) else value
        elif node.kind == "kernel":
            kernel = node.target
            outputs = {u.args[1]: u for u in users[node] if is_kernel_output(u)}
            names = []
            for i, out in enumerate(kernel.outputs):
                shape = kernel.output_shape(out)
                target = outputs.get(i)
                var = target.name if target is not None else f"_unused_{node.name}_{i}"
                if target in plan.slot_of:
                    body.append(f"{var} = _slot{plan.slot_of[target]}[:{math.prod(shape)}].view({shape})")
                else:
                    body.append(f"{var} = torch.empty({shape}, dtype=torch.{kernel.dtype}, "
                                f"device={printer.value(node.device)})")
                names.append(var)
            args = [f"{arg.name}.contiguous().reshape({tuple(buffer.shape)})"
                    for arg, buffer in zip(node.args, kernel.inputs)]
            body.append(f"{node.name}({', '.join(args + names)})")
        elif is_kernel_output(node):
            pass
        elif node.kind == "call":
            body.append(f"{node.name} = {printer.call(node)}")
        else:
            body.append(f"return ({''.join(printer.value(a) + ', ' for a in node.args)})")
        dead = [n.name for n in plan.frees_after.get(index, []) if n.kind == "call"]
        if dead:
            body.append(f"del {', '.join(dead)}")
    parameters = ", ".join(n.name for n in graph.placeholders + graph.params)
    source = "\n".join(header) + f"\n\n\ndef {name}({parameters}):\n" + "\n".join("    " + line for line in body) + "\n"
    return WrapperCode(source, namespace, [n.attrs["index"] for n in graph.placeholders],
                       [n.target for n in graph.params])
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "generate_wrapper_tests", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
check_generate_wrapper(generate_wrapper)
### BEGIN HIDDEN TESTS
from grader.checks.nb10_code_generation import check_generate_wrapper  # the grader's own, even if rebound

check_generate_wrapper(generate_wrapper, hidden=True)
### END HIDDEN TESTS

# %% [markdown]
# Your wrapper for the MLP: `compile_graph` runs the compiler's stages after capture (passes, memory
# plan, kernels, wrapper) on the captured graph; like every stage, the wrapper is swapped with
# `tc.substitute`:

# %%
from tensorcraft.compiler.pipeline import compile_graph  # noqa: E402

try:
    with tc.substitute(generate_wrapper=generate_wrapper):
        yours_mlp = compile_graph(compiled_mlp.compiled.captured)
    print("equals eager:", torch.allclose(yours_mlp.fn(*mlp_args)[0], mlp(*mlp_args), atol=1e-5))
    print(yours_mlp.code.source)
except NotImplementedError:
    print("generate_wrapper is not written yet: solve exercise 3, then run this cell again")

# %% [markdown]
# ## Benchmark: eager, torch.compile and tensorcraft's backends
#
# An elementwise chain of ten operations on 1M float32 values (4 MB per tensor). Eager runs
# ten torch operations and writes nine intermediate tensors to memory (every result but the last);
# a fused kernel reads `x` and `y` once and writes one result (the count below is the captured
# graph's). Each version is timed on the same inputs in this run: the median of repeated calls,
# with the interquartile range. torch.compile's compile is paid once, outside the timings; the
# Python backend is tensorcraft's wrapper around torch calls (not fused in any useful sense), the C
# backend the library's own C printer, and the last bar runs **your** `c_source`, plugged in through
# `backend=`: a function that turns a kernel into a compiled one.

# %%
def long_chain(x, y):
    v = torch.sigmoid(x * 1.5 + y)
    v = v * x + y
    v = torch.relu(v - 0.25) * 2.0
    return torch.tanh(v) + x


big_x, big_y = torch.randn(1024, 1024), torch.randn(1024)
counted = tc.compile(long_chain, backend="python")
counted(big_x, big_y)  # captures the graph
chain_ops = [node.op for node in counted.compiled.captured.nodes if node.kind == "call"]
print(f"{len(chain_ops)} operations ({', '.join(chain_ops)}), {len(chain_ops) - 1} intermediates")
versions = {"eager": long_chain}
if os.environ.get("NBGRADER_EXECUTION"):  # set while grading, where a cell may run 30 s
    print("torch.compile is left out while grading (its compile can take longer than a cell may)")
else:
    start = time.perf_counter()
    inductor_chain = torch.compile(long_chain)
    inductor_chain(big_x, big_y)
    print(f"torch.compile, first call of the chain: {time.perf_counter() - start:.1f} s")
    versions["torch.compile"] = inductor_chain
versions |= {"tc python": tc.compile(long_chain, backend="python"), "tc c (library)": tc.compile(long_chain, backend="c")}
try:
    c_source(kernel)
    # your C, plugged in through backend=: a function from a kernel to a compiled kernel
    versions["tc c (your c_source)"] = tc.compile(long_chain, backend=lambda k: c_backend.CompiledCKernel(k, c_source(k)))
except NotImplementedError:
    print("c_source is not written yet: its bar is missing (solve exercise 2 and run this cell again)")
expected = long_chain(big_x, big_y)
timings = {}
for label, fn in versions.items():
    fn(big_x, big_y)  # warm-up (compiles on a first call)
    timings[label] = time_call(fn, big_x, big_y, min_run_time=TIMING_S)
seconds = {label: t.median for label, t in timings.items()}
for label, fn in versions.items():
    error = (fn(big_x, big_y) - expected).abs().max().item()
    print(f"{label:22} {timings[label]!s:<28} {seconds['eager'] / seconds[label]:5.2f}x eager"
          f"   max |difference| from eager {error:.1e}")

# %%
fig, ax = plt.subplots(figsize=(7, 3))
labels = list(seconds)
palette = {"eager": "gray", "torch.compile": "tab:orange", "tc python": "tab:blue", "tc c (library)": "tab:green",
           "tc c (your c_source)": "tab:red"}
ax.barh(labels, [1000 * seconds[k] for k in labels], color=[palette[k] for k in labels],
        xerr=[[1000 * (timings[k].median - timings[k].low) for k in labels],
              [1000 * (timings[k].high - timings[k].median) for k in labels]], capsize=3)
for i, k in enumerate(labels):
    ax.text(1000 * timings[k].high, i, f" {seconds['eager'] / seconds[k]:.1f}x", va="center")
ax.invert_yaxis()
ax.set_xlabel("ms per call (median; bar: interquartile range), lower is better")
ax.set_title(f"{len(chain_ops)}-op elementwise chain on 1024 x 1024 float32, {torch.get_num_threads()} threads")
plt.tight_layout()
plt.show()

# %% [markdown]
# What the numbers say (they change with the machine; read the printed ratios, not these words):
# the Python backend runs the same torch operations one by one, so it cannot gain much on eager
# (a difference between the two is mostly noise, or the memory plan's reused buffers).
# The fused C kernels and Inductor's read the inputs once and write one result, and win by a
# large factor. All of them agree with eager to rounding.
#
# Your C kernel is slower than the library's, and it can be slower than eager (the printout says
# whether it is here). Its loops and its memory traffic are not the reason: `expf` is. The chain
# has a sigmoid (an `expf`) and a `tanhf` per element, and your kernel calls the C library's
# scalar versions, one element at a time. Eager's `torch.sigmoid` and `torch.tanh` are vectorised
# (8 or 16 float32 values per instruction), and so is the library's C kernel: it declares these
# functions `omp declare simd`, so that its `#pragma omp simd` loops call glibc's vector versions.
# Where a chain has many such functions, the arithmetic lost by calling them one element at a
# time can outweigh the memory traffic that fusion saves. The same chain without its sigmoid and
# tanh shows it: there your kernel keeps up with the library's.

# %%
def cheap_chain(x, y):
    """long_chain without its sigmoid and tanh: no exp, no tanh."""
    v = x * 1.5 + y
    v = v * x + y
    v = torch.relu(v - 0.25) * 2.0
    return v + x


print("the library's C:", [line for line in c_backend.c_source(kernel).splitlines() if line.startswith("#pragma omp")])
try:
    c_source(kernel)
    print("yours:          ", [line.strip() for line in c_source(kernel).splitlines() if "expf" in line])
    cheap = {"eager": cheap_chain, "tc c (library)": tc.compile(cheap_chain, backend="c"),
             "tc c (your c_source)": tc.compile(cheap_chain, backend=lambda k: c_backend.CompiledCKernel(k, c_source(k)))}
    cheap_timings = {}
    for label, fn in cheap.items():
        fn(big_x, big_y)  # warm-up (compiles on a first call)
        cheap_timings[label] = time_call(fn, big_x, big_y, min_run_time=TIMING_S)
    for name, measured in (("long_chain", timings), ("cheap_chain", cheap_timings)):
        print(f"{name:<12}", "   ".join(f"{label} {measured[label]}" for label in cheap))
        print(f"{'':<12} your C / library C: {measured['tc c (your c_source)'].median / measured['tc c (library)'].median:.1f}"
              f"   your C / eager: {measured['tc c (your c_source)'].median / measured['eager'].median:.2f}")
except NotImplementedError:
    print("c_source is not written yet: solve exercise 2 and run this cell again")

# %% [markdown]
# ## Common mistakes
#
# - **`out = value` in a kernel.** It rebinds a local name; the caller's buffer is never written.
#   Kernels write into buffers they are given: `out.copy_(value)` in Python, `out[i] = ...` in C.
# - **Reading a broadcast input at the output's offset.** A buffer of shape `[1, 5]` has five
#   elements; reading it at `i0 * 5 + i1` reads past its end. Its stride is 0 along the axis where
#   its size is 1, and its strides elsewhere are its own, not the output's.
# - **Constants in the wrong precision.** `torch.full((), 0.1)` is float32; in a float64 kernel it
#   must be created with `dtype=torch.float64`. In C, `0.1f` is a float and `0.1` a double.
# - **Printing nested expressions without parentheses.** `mul(add(x, c), y)` pasted into
#   `"{a} * {b}"` gives `x + c * y`. One variable per statement (SSA) avoids it.
# - **Freeing late.** A `del` just before `return` frees nothing early: every intermediate stays
#   alive for the whole call and the peak memory is the sum of all of them.
#
# ## Summary
#
# - Code generation reads one small description per fused group, a `Kernel`: an iteration space,
#   broadcast input buffers, SSA statements and outputs.
# - A Python kernel is one torch call per statement; a C kernel is one loop nest in which every
#   input is read at its own offset (stride 0 where it broadcasts); a Triton kernel does the same
#   on blocks of elements.
# - The wrapper allocates the outputs, calls kernels and extern torch calls, frees each value after
#   its last use and returns the results: what Inductor prints with `TORCH_LOGS=output_code`.
# - Fusing a chain into one kernel removes the intermediate tensors and their memory traffic,
#   which is where the speed comes from.
#
# **Next:** notebook 11, the capstone, compiles a small transformer block with your passes and
# code generators, checks it forward and backward, and measures where the time goes.
