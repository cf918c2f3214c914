"""C + OpenMP code generation: one Kernel becomes one C function, compiled and called via ctypes.

The loops follow ``layout.collapse``: if no input broadcasts, one flat ``parallel for simd`` loop;
otherwise a parallel loop over (row, block of columns) tasks, each computing where its row starts
in every input, and a ``simd`` loop along the row; kernels with a reduction run one task per row
and accumulate along it. Shapes are constants in the source (kernels are specialised per shape,
as torch.compile's are), so the compiler sees every trip count.

Numerics: IEEE semantics are kept (no -ffast-math: NaN, infinities and signed zeros behave as in
eager, which test_every_op_over_its_whole_domain checks); exp, log, sin, cos, tanh, erf and pow are
vectorised through glibc's libmvec; sums over float32 accumulate in double. Measured against eager
on 1M values (float32): add/sub/mul/div/abs/neg/relu/max/min/sqrt/rsqrt/reciprocal exact or 1 ulp;
exp, log, sin, cos, erf, pow 1 ulp; tanh 2, sigmoid 4, silu 5 ulp; gelu absolute error 5e-7 where
1 + erf(x) cancels (x < -4). Float64: at most 3 ulp. On benchmarks/compile.py's chains: the cheap
chain bit-identical to eager, the sigmoid/tanh/exp chain 5.8e-7 relative (5.7e-6 absolute).
Without vector math, gcc -O3 calls scalar expf/tanhf and such a kernel lost to eager (DESIGN.md).
"""
from __future__ import annotations

import ctypes
import math
import os

import torch

from tensorcraft.compiler.codegen.c_toolchain import CCompileError, CompilerUnavailable, load_library
from tensorcraft.compiler.codegen.kernel import BINARY, DTYPES, UNARY, Kernel
from tensorcraft.compiler.codegen.layout import Layout, collapse
from tensorcraft.compiler.codegen.literals import c_float
from tensorcraft.compiler.codegen.naming import identifier

__all__ = ["c_source", "compile_kernel", "CompiledCKernel", "CompilerUnavailable", "CCompileError"]

# Columns per task when rows are long: large enough for a long simd loop, small enough that a
# kernel over one huge row still splits across threads.
BLOCK = 8192

# Reductions over fewer rows than this (and long ones) split each row across the threads instead.
FEW_ROWS = 8

# Kernels over fewer points than this run on one thread (measured: a parallel region costs a few us).
PARALLEL_MIN_ELEMENTS = 32768


def available_threads() -> int:
    """OpenMP threads for a kernel: $OMP_NUM_THREADS if set, else the cores this process may use."""
    try:
        return max(1, int(os.environ["OMP_NUM_THREADS"].split(",")[0]))
    except (KeyError, ValueError):
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# How each op reads in C; `f` is the suffix of the float versions of math.h (expf vs exp).
_UNARY_C = {
    "neg": "-{a}",
    "abs": "fabs{f}({a})",
    "exp": "exp{f}({a})",
    "log": "log{f}({a})",
    "sqrt": "sqrt{f}({a})",
    "rsqrt": "{one} / sqrt{f}({a})",
    "sin": "sin{f}({a})",
    "cos": "cos{f}({a})",
    "tanh": "tanh{f}({a})",
    "sigmoid": "{one} / ({one} + exp{f}(-{a}))",
    "relu": "({a} > 0 || {a} != {a}) ? {a} : 0",              # NaN stays NaN, as in torch.relu
    "gelu": "({half} * {a}) * ({one} + erf{f}({a} * {rsqrt2}))",
    "silu": "{a} * ({one} / ({one} + exp{f}(-{a})))",
    "erf": "erf{f}({a})",
    "reciprocal": "{one} / {a}",
}
_BINARY_C = {
    "add": "{a} + {b}",
    "sub": "{a} - {b}",
    "mul": "{a} * {b}",
    "div": "{a} / {b}",
    "maximum": "({a} > {b} || {a} != {a}) ? {a} : {b}",      # NaN wins, as in torch.maximum
    "minimum": "({a} < {b} || {a} != {a}) ? {a} : {b}",
    "pow": "pow{f}({a}, {b})",
}
assert set(_UNARY_C) == set(UNARY) and set(_BINARY_C) == set(BINARY), "an op has no C spelling"

# glibc's vector math library has SIMD versions of these; declaring them `omp declare simd` lets gcc
# call them from vectorised loops without -ffast-math (which is what would otherwise enable them).
_VECTOR_MATH = ("exp", "log", "sin", "cos", "tanh", "erf", "pow")
_C_TYPES = {"float32": "float", "float64": "double"}


class _Printer:
    """Builds the C text of one kernel; each method prints one part of the function."""

    def __init__(self, kernel: Kernel):
        self.k = kernel
        self.layout: Layout = collapse(kernel)
        self.t = _C_TYPES[kernel.dtype]
        self.f = "f" if kernel.dtype == "float32" else ""
        taken: set[str] = set()
        self.fn = identifier("kernel_" + kernel.name, taken)   # never a C keyword or a math.h name
        self.ptr = {b.name: identifier("in_" + b.name, taken) for b in kernel.inputs}
        self.out = [identifier("out_" + o.name, taken) for o in kernel.outputs]
        self.var = {s.name: identifier("v_" + s.name, taken) for s in kernel.stmts}
        self.words = {"f": self.f, "one": self._lit(1.0), "half": self._lit(0.5),
                      "rsqrt2": self._lit(1.0 / math.sqrt(2.0))}

    def _lit(self, value: float) -> str:
        return c_float(value, DTYPES[self.k.dtype])

    # -- the pieces -------------------------------------------------------------------------
    def header(self) -> list[str]:
        lines = ["/* Generated by tensorcraft.compiler.codegen.c from:", *("   " + l for l in str(self.k).splitlines()),
                 f"   collapsed iteration space {list(self.layout.sizes)}; element strides per input:",
                 *(f"     {name}: {list(s)}" for name, s in self.layout.strides.items()), "*/",
                 "#include <math.h>", "#include <stdint.h>", ""]
        if not self.math_functions():
            return lines
        lines += ["#if defined(__GLIBC__) && defined(__x86_64__) && defined(_OPENMP)",
                  "/* glibc's libmvec has vector versions of these: let `omp simd` loops call them. */"]
        for name in self.math_functions():
            params = ", ".join([self.t] * (2 if name == "pow" else 1))
            lines += ["#pragma omp declare simd notinbranch", f"{self.t} {name}{self.f}({params});"]
        return lines + ["#endif", ""]

    def math_functions(self) -> list[str]:
        """The libmvec functions this kernel calls (printed op spellings name them)."""
        used = " ".join(_UNARY_C.get(s.op, "") + _BINARY_C.get(s.op, "") for s in self.k.stmts)
        return [name for name in _VECTOR_MATH if f"{name}{{f}}(" in used]

    def signature(self) -> str:
        params = [f"const {self.t} *{self.ptr[b.name]}" for b in self.k.inputs]
        params += [f"{self.t} *{o}" for o in self.out]
        return f"void {self.fn}({', '.join(params + ['int n_threads'])})"

    def body(self, load: dict[str, str], out_index: str) -> list[str]:
        """The straight-line statements at one point (``load``: how each input is read there),
        then the pointwise stores."""
        lines = []
        for s in self.k.stmts:
            if s.op == "load":
                value = load[s.args[0]]
            elif s.op == "const":
                value = self._lit(float(s.args[0]))
            elif s.op in UNARY:
                value = _UNARY_C[s.op].format(a=self.var[s.args[0]], **self.words)
            else:
                value = _BINARY_C[s.op].format(a=self.var[s.args[0]], b=self.var[s.args[1]], **self.words)
            lines.append(f"const {self.t} {self.var[s.name]} = {value};")
        for o, ptr in zip(self.k.outputs, self.out):
            if o.reduce is None:
                lines.append(f"{ptr}[{out_index}] = {self.var[o.value]};")
        return lines

    def row_offsets(self) -> list[str]:
        """Where row ``row`` starts in each input: split the row index into its outer dims."""
        outer = self.layout.outer_sizes
        lines = ["int64_t rest = row;"] if len(outer) > 1 else []
        terms: dict[str, list[str]] = {b.name: [] for b in self.k.inputs}
        for d in reversed(range(len(outer))):
            if len(outer) == 1:
                idx = "row"
            else:
                idx = f"i{d}"
                lines.append(f"const int64_t i{d} = rest % {outer[d]}; rest /= {outer[d]};" if d else
                             f"const int64_t i{d} = rest;")
            for name, strides in self.layout.strides.items():
                if strides[d]:
                    terms[name].append(f"{idx} * {strides[d]}" if strides[d] != 1 else idx)
        for b in self.k.inputs:
            lines.append(f"const {self.t} *{self.ptr[b.name]}_row = {self.ptr[b.name]} + "
                         f"{' + '.join(reversed(terms[b.name])) or '0'};")
        return lines

    def row_loads(self) -> dict[str, str]:
        """How each input is read at column j of a row: by column, or always its one element."""
        return {b.name: f"{self.ptr[b.name]}_row[{'j' if self.layout.strides[b.name][-1] else '0'}]"
                for b in self.k.inputs}

    # -- the three loop shapes --------------------------------------------------------------
    def flat_loop(self) -> list[str]:
        body = self.body({b.name: f"{self.ptr[b.name]}[i]" for b in self.k.inputs}, "i")
        return ["/* no input broadcasts: one flat loop, split across threads, vectorised */",
                "#pragma omp parallel for simd schedule(static) num_threads(n_threads)",
                f"for (int64_t i = 0; i < {self.layout.numel}; i++) {{", *_indent(body), "}"]

    def blocked_loop(self) -> list[str]:
        n_cols = self.layout.n_cols
        block = n_cols if n_cols <= 2 * BLOCK else BLOCK
        n_blocks = -(-n_cols // block) if n_cols else 0
        body = self.body(self.row_loads(), "row_start + j")
        task = [f"const int64_t row = task / {n_blocks};" if n_blocks > 1 else "const int64_t row = task;",
                f"const int64_t j0 = (task % {n_blocks}) * {block};" if n_blocks > 1 else "const int64_t j0 = 0;",
                f"const int64_t j1 = j0 + {block} < {n_cols} ? j0 + {block} : {n_cols};" if n_blocks > 1
                else f"const int64_t j1 = {n_cols};",
                f"const int64_t row_start = row * {n_cols};",
                *self.row_offsets(),
                "#pragma omp simd", "for (int64_t j = j0; j < j1; j++) {", *_indent(body), "}"]
        return [f"/* some inputs broadcast: {self.layout.n_rows} rows of {n_cols}, "
                f"in tasks of {block} columns; stride-0 inputs are read once per row */",
                "#pragma omp parallel for schedule(static) num_threads(n_threads)",
                f"for (int64_t task = 0; task < {self.layout.n_rows * n_blocks}; task++) {{",
                *_indent(task), "}"]

    def reduction_loop(self) -> list[str]:
        n_cols = self.layout.n_cols
        reduced = [(o, ptr) for o, ptr in zip(self.k.outputs, self.out) if o.reduce]
        acc_t = "double" if self.t == "float" else self.t   # sums of float32 accumulate in double
        init, update, after, clauses = [], [], [], []
        for o, ptr in reduced:
            acc, v = f"acc_{ptr}", self.var[o.value]
            if o.reduce in ("sum", "mean"):
                init.append(f"{acc_t} {acc} = 0;")
                update.append(f"{acc} += {v};")
                clauses.append(f"reduction(+:{acc})")
                result = acc if o.reduce == "sum" else f"{acc} / {n_cols}"
                after.append(f"{ptr}[row] = ({self.t})({result});")
            else:  # max / min: compare, and remember a NaN on the side (torch's amax returns NaN)
                better, op = (">", "max") if o.reduce == "max" else ("<", "min")
                start = "-INFINITY" if o.reduce == "max" else "INFINITY"
                init += [f"{self.t} {acc} = {start};", f"int {acc}_nan = 0;"]
                update += [f"{acc} = {v} {better} {acc} ? {v} : {acc};", f"{acc}_nan |= {v} != {v};"]
                clauses += [f"reduction({op}:{acc})", f"reduction(|:{acc}_nan)"]
                after.append(f"{ptr}[row] = {acc}_nan ? NAN : {acc};")
        body = self.body(self.row_loads(), "row_start + j") + update
        # Many rows: threads share the rows. A few long rows: threads share each row's columns.
        split_rows = self.layout.n_rows < FEW_ROWS and n_cols >= 4 * BLOCK
        parallel = "#pragma omp parallel for schedule(static) num_threads(n_threads)"
        inner = (f"#pragma omp parallel for simd schedule(static) num_threads(n_threads) {' '.join(clauses)}"
                 if split_rows else f"#pragma omp simd {' '.join(clauses)}")
        row = [f"const int64_t row_start = row * {n_cols};", *self.row_offsets(), *init,
               inner, f"for (int64_t j = 0; j < {n_cols}; j++) {{", *_indent(body), "}", *after]
        how = "threads split each row" if split_rows else "one task per row"
        return [f"/* reduction over the last axis: {how} ({self.layout.n_rows} rows of {n_cols}) */",
                *([] if split_rows else [parallel]),
                f"for (int64_t row = 0; row < {self.layout.n_rows}; row++) {{", *_indent(row), "}"]

    def source(self) -> str:
        if self.layout.reduces:
            loop = self.reduction_loop()
        elif self.layout.is_contiguous():
            loop = self.flat_loop()
        else:
            loop = self.blocked_loop()
        return "\n".join([*self.header(), self.signature() + " {", *_indent(loop), "}", ""])


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line if line and not line.startswith("#") else line for line in lines]


def c_source(kernel: Kernel) -> str:
    """Readable C + OpenMP for one kernel: ``void name(const T *inputs..., T *outputs...)``."""
    return _Printer(kernel).source()


class CompiledCKernel:
    """A compiled kernel: call it as ``run(*inputs, *outputs)`` (see codegen.kernel). The C
    function takes one more argument, the number of OpenMP threads (``self.threads``).

    Arguments are checked (count, CPU, dtype, contiguous, shape) before their addresses reach C,
    because C would read or write out of bounds without a word. An output may be the very same
    buffer as a same-shaped input (in place); partial overlaps are not allowed.
    """

    def __init__(self, kernel: Kernel, source: str):
        self.kernel = kernel
        self.source = source
        library = load_library(source)
        self._fn = getattr(library, _Printer(kernel).fn)
        self._fn.restype = None
        self._fn.argtypes = [ctypes.c_void_p] * (len(kernel.inputs) + len(kernel.outputs)) + [ctypes.c_int]
        # Small kernels run on one thread: waking the others costs more than their share of the work.
        self.threads = 1 if math.prod(kernel.shape) < PARALLEL_MIN_ELEMENTS else available_threads()
        self._dtype = DTYPES[kernel.dtype]
        self._names = [f"input {b.name}" for b in kernel.inputs] + [f"output {o.name}" for o in kernel.outputs]
        self._shapes = [torch.Size(b.shape) for b in kernel.inputs] + \
                       [torch.Size(kernel.output_shape(o)) for o in kernel.outputs]

    def __call__(self, *tensors: torch.Tensor) -> None:
        if len(tensors) != len(self._shapes):
            raise TypeError(f"kernel {self.kernel.name} takes {len(self._shapes)} tensors "
                            f"({', '.join(self._names)}), got {len(tensors)}")
        for t, shape, name in zip(tensors, self._shapes, self._names):
            if not (isinstance(t, torch.Tensor) and t.dtype is self._dtype and t.device.type == "cpu"
                    and t.shape == shape and t.is_contiguous()):
                self._complain(t, shape, name)
        self._fn(*[t.data_ptr() for t in tensors], self.threads)

    def _complain(self, t: object, shape: torch.Size, name: str) -> None:
        where = f"kernel {self.kernel.name}, {name}"
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{where}: expected a torch.Tensor, got {type(t).__name__}")
        if t.device.type != "cpu":
            raise ValueError(f"{where}: the C backend runs on CPU tensors, got one on {t.device}")
        if t.dtype is not self._dtype:
            raise TypeError(f"{where}: expected dtype {self._dtype}, got {t.dtype}")
        if t.shape != shape:
            raise ValueError(f"{where}: expected shape {list(shape)}, got {list(t.shape)}")
        raise ValueError(f"{where}: expected a contiguous tensor, got strides {t.stride()}; "
                         "pass t.contiguous()")

    def __repr__(self) -> str:
        return f"<CompiledCKernel {self.kernel.name} over {list(self.kernel.shape)} ({self.kernel.dtype})>"


def compile_kernel(kernel: Kernel) -> CompiledCKernel:
    """Generate C, compile it (or find it in the on-disk cache) and return a callable kernel.

    Raises CompilerUnavailable when there is no C compiler with OpenMP on this machine.
    """
    return CompiledCKernel(kernel, c_source(kernel))
