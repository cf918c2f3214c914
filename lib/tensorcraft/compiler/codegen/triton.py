"""Triton code generation: one Kernel becomes one @triton.jit function plus a Python launcher.

Pointwise kernels are 1-D blocked over the flattened iteration space: program p handles flat
indices [p*BLOCK, (p+1)*BLOCK), and a broadcast input is read at an offset computed from the
collapsed dims (layout.collapse). Kernels with a last-axis reduction run one program per row,
walking the row in chunks of RBLOCK and keeping RBLOCK partial results that are combined at the end.

The source is written to a file in the cache dir and imported, since @triton.jit reads the
function's real source. It runs on CUDA tensors, and on CPU tensors when TRITON_INTERPRET=1 is set
(before the kernel is compiled): Triton's interpreter then runs each program with numpy.

Only stable triton.language calls are used (no libdevice, which the interpreter lacks): tanh and
pow are written with exp and exp2/log2 (pow in float64), so tanh is a few ulp less exact than
torch's near 0 (absolute error ~1e-7).
"""
from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
from types import ModuleType

import torch

from tensorcraft.compiler.codegen.c_toolchain import CompilerUnavailable, cache_dir
from tensorcraft.compiler.codegen.kernel import Kernel
from tensorcraft.compiler.codegen.literals import python_float
from tensorcraft.compiler.codegen.printer import ArgumentCheck, KernelPrinter, indent
from tensorcraft.stages import swappable

__all__ = ["triton_source", "compile_kernel", "CompiledTritonKernel"]

BLOCK = 1024          # elements per program, pointwise kernels
MAX_RBLOCK = 1024     # columns per chunk of a row, reductions

_UNARY_TL = {
    "neg": "-{a}",
    "abs": "tl.abs({a})",
    "exp": "tl.exp({a})",
    "log": "tl.log({a})",
    "sqrt": "{sqrt}({a})",
    "rsqrt": "1.0 / {sqrt}({a})",
    "sin": "tl.sin({a})",
    "cos": "tl.cos({a})",
    "tanh": "_tanh({a})",
    "sigmoid": "tl.sigmoid({a})",
    "relu": "tl.where(({a} > 0) | ({a} != {a}), {a}, 0.0)",     # NaN stays NaN, as in torch.relu
    "gelu": "(0.5 * {a}) * (1.0 + tl.math.erf({a} * 0.7071067811865476))",
    "silu": "{a} * tl.sigmoid({a})",
    "erf": "tl.math.erf({a})",
    "reciprocal": "1.0 / {a}",
}
_BINARY_TL = {
    "add": "{a} + {b}",
    "sub": "{a} - {b}",
    "mul": "{a} * {b}",
    "div": "{a} / {b}",
    "maximum": "tl.where(({a} > {b}) | ({a} != {a}), {a}, {b})",  # NaN wins, as in torch.maximum
    "minimum": "tl.where(({a} < {b}) | ({a} != {a}), {a}, {b})",
    "pow": "_pow({a}, {b})",
}
_TL_TYPES = {"float32": "tl.float32", "float64": "tl.float64"}

# Helpers printed into a kernel's module only when it uses them.
_HELPERS = {
    "_tanh": '''
@triton.jit
def _tanh(x):
    """tanh from exp, stable at both ends: (1 - e^-2|x|) / (1 + e^-2|x|), with x's sign."""
    t = tl.exp(-2.0 * tl.abs(x))
    r = (1.0 - t) / (1.0 + t)
    return tl.where(x < 0, -r, r)
''',
    "_pow": '''
@triton.jit
def _pow(a, b):
    """a ** b as 2^(b log2|a|), with the signs and special cases of C's pow, which torch follows.
    In float64: log2 of a float32 loses digits that exp2 of a large result would show."""
    r = tl.exp2(b.to(tl.float64) * tl.log2(tl.abs(a).to(tl.float64))).to(a.dtype)
    b_is_int = b == tl.floor(b)
    b_is_odd = b_is_int & (tl.floor(b * 0.5) * 2.0 != b)
    a_negative = (a < 0) | ((a == 0) & (1.0 / a < 0))               # -0.0 counts as negative
    r = tl.where(a_negative & b_is_odd, -r, r)                       # (-2) ** 3 = -8
    r = tl.where((a < 0) & (a > float("-inf")) & ~b_is_int, float("nan"), r)   # (-2) ** 0.5
    one = (b == 0) | (a == 1) | ((a == -1) & (tl.abs(b) == float("inf")))    # x ** 0, 1 ** nan
    return tl.where(one, 1.0, r)
''',
}


class _Printer(KernelPrinter):
    """Builds the Python/Triton text of one kernel."""
    UNARY, BINARY = _UNARY_TL, _BINARY_TL
    RESERVED = frozenset({"tl", "triton", "torch", "launch", "_tanh", "_pow", "i", "j", "j0", "row", "mask",
                          "BLOCK", "RBLOCK"})

    def __init__(self, kernel: Kernel):
        super().__init__(kernel, kernel.name + "_kernel")
        self.tl_type = _TL_TYPES[kernel.dtype]
        self.words = {"sqrt": "tl.sqrt_rn" if kernel.dtype == "float32" else "tl.sqrt"}
        # 32-bit offsets overflow past 2**31 elements
        self.wide = self.layout.numel + BLOCK >= 2**31

    def constant(self, value: float, width: str) -> str:
        return f"tl.full([{width}], {python_float(value)}, {self.tl_type})"

    def assign(self, variable: str, value: str) -> str:
        return f"{variable} = {value}"

    def flat_offsets(self) -> tuple[list[str], dict[str, str]]:
        """Where each input is read at flat index i: i itself if it does not broadcast, else the
        sum over collapsed dims of (index along the dim) * (its stride there)."""
        sizes, lines, offsets = self.layout.sizes, [], {}
        inner = [math.prod(sizes[d + 1:]) for d in range(len(sizes))]
        broadcasting = [self.layout.strides[b.name] for b in self.k.inputs if 0 in self.layout.strides[b.name]]
        for d in sorted({d for strides in broadcasting for d, s in enumerate(strides) if s}):
            div = f"i // {inner[d]}" if inner[d] != 1 else "i"
            lines.append(f"i{d} = {div} % {sizes[d]}" if d else f"i{d} = {div}")
        for b in self.k.inputs:
            strides = self.layout.strides[b.name]
            terms = [f"i{d} * {s}" if s != 1 else f"i{d}" for d, s in enumerate(strides) if s]
            offsets[b.name] = "i" if 0 not in strides else (" + ".join(terms) or "i * 0")
        return lines, offsets

    def pointwise(self) -> list[str]:
        numel = self.layout.numel
        pid = "tl.program_id(0).to(tl.int64)" if self.wide else "tl.program_id(0)"
        index_lines, offsets = self.flat_offsets()
        load = {b.name: f"tl.load({self.ptr[b.name]} + {offsets[b.name]}, mask=mask)" for b in self.k.inputs}
        lines = [f"# pointwise over {numel} points (collapsed dims {list(self.layout.sizes)}), BLOCK per program",
                 f"i = {pid} * BLOCK + tl.arange(0, BLOCK)",
                 f"mask = i < {numel}",
                 *index_lines, *self.statements(load, "BLOCK")]
        lines += [f"tl.store({ptr} + i, {self.var[o.value]}, mask=mask)" for o, ptr in zip(self.k.outputs, self.out)]
        return lines

    def reduction(self) -> list[str]:
        n_cols, outer = self.layout.n_cols, self.layout.outer_sizes
        row = "tl.program_id(0).to(tl.int64)" if self.wide else "tl.program_id(0)"
        lines = [f"# one program per row: {self.layout.n_rows} rows of {n_cols}, walked in chunks of RBLOCK",
                 f"row = {row}"]
        # where this row starts in every input
        inner = [math.prod(outer[d + 1:]) for d in range(len(outer))]
        for d in range(len(outer)):
            div = f"row // {inner[d]}" if inner[d] != 1 else "row"
            lines.append(f"r{d} = {div} % {outer[d]}" if d else f"r{d} = {div}")
        for b in self.k.inputs:
            strides = self.layout.strides[b.name]
            terms = [f"r{d} * {s}" if s != 1 else f"r{d}" for d, s in enumerate(strides[:-1]) if s]
            lines.append(f"{self.ptr[b.name]}_row = {self.ptr[b.name]} + {' + '.join(terms) or '0'}")
        reduced = [(o, ptr) for o, ptr in zip(self.k.outputs, self.out) if o.reduce]
        update, after = [], []
        for o, ptr in reduced:
            acc, v = f"acc_{ptr}", self.var[o.value]
            if o.reduce in ("sum", "mean"):
                lines.append(f"{acc} = tl.zeros([RBLOCK], dtype={self.tl_type})")
                update.append(f"{acc} += tl.where(mask, {v}, 0.0)")
                total = f"tl.sum({acc}, axis=0)" + (f" / {n_cols}" if o.reduce == "mean" else "")
                after.append(f"tl.store({ptr} + row, {total})")
            else:  # max / min: compare, and remember a NaN on the side (torch's amax returns NaN)
                better, start, combine = (">", "-inf", "tl.max") if o.reduce == "max" else ("<", "inf", "tl.min")
                lines += [f"{acc} = tl.full([RBLOCK], float('{start}'), {self.tl_type})",
                          f"{acc}_nan = tl.zeros([RBLOCK], dtype=tl.int32)"]
                update += [f"{acc} = tl.where(mask & ({v} {better} {acc}), {v}, {acc})",
                           f"{acc}_nan = tl.where(mask & ({v} != {v}), 1, {acc}_nan)"]
                after.append(f"tl.store({ptr} + row, tl.where(tl.max({acc}_nan, axis=0) > 0, float('nan'), "
                             f"{combine}({acc}, axis=0)))")
        load = {b.name: f"tl.load({self.ptr[b.name]}_row + j, mask=mask)" if self.layout.strides[b.name][-1]
                else f"tl.load({self.ptr[b.name]}_row + j * 0, mask=mask)" for b in self.k.inputs}
        stores = [f"tl.store({ptr} + row * {n_cols} + j, {self.var[o.value]}, mask=mask)"
                  for o, ptr in zip(self.k.outputs, self.out) if not o.reduce]
        loop = ["j = j0 + tl.arange(0, RBLOCK)", f"mask = j < {n_cols}", *self.statements(load, "RBLOCK"), *stores, *update]
        return [*lines, f"for j0 in range(0, {n_cols}, RBLOCK):", *indent(loop), *after]

    def launcher(self) -> list[str]:
        args = [*self.ptr.values(), *self.out]
        if self.layout.reduces:
            rblock = min(MAX_RBLOCK, 1 << max(0, (self.layout.n_cols - 1).bit_length()))
            grid, meta = f"({self.layout.n_rows},)", f"RBLOCK={rblock}"
        else:
            grid, meta = f"(triton.cdiv({self.layout.numel}, BLOCK),)", "BLOCK=BLOCK"
        return [*([f"BLOCK = {BLOCK}", "", ""] if not self.layout.reduces else []),
                f"def launch({', '.join(args)}):",
                '    """Run the kernel: inputs then outputs, contiguous tensors on one device."""',
                f"    {self.fn}[{grid}]({', '.join(args)}, {meta})" if self.n_programs()
                else "    return  # an empty iteration space: no program to run"]

    def n_programs(self) -> int:
        if self.layout.reduces:
            return self.layout.n_rows
        return -(-self.layout.numel // BLOCK)

    def source(self) -> str:
        params = [*self.ptr.values(), *self.out, "RBLOCK: tl.constexpr" if self.layout.reduces else "BLOCK: tl.constexpr"]
        body = self.reduction() if self.layout.reduces else self.pointwise()
        used = self.ops_used()
        helpers = [text for name, text in _HELPERS.items() if f"{name}(" in used]
        lines = ['"""Generated by tensorcraft.compiler.codegen.triton from:', *self.describe(), '"""',
                 "import triton", "import triton.language as tl", "", *helpers, "",
                 "@triton.jit", f"def {self.fn}({', '.join(params)}):", *indent(body), "", "", *self.launcher(), ""]
        return "\n".join(lines)


@swappable
def triton_source(kernel: Kernel) -> str:
    """A readable Python module: a @triton.jit kernel and ``launch(*inputs, *outputs)``."""
    return _Printer(kernel).source()


_modules: dict[tuple[str, bool], ModuleType] = {}


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def _import_source(source: str) -> ModuleType:
    """Write the source to the cache dir and import it (once per process and interpreter mode)."""
    try:
        import triton  # noqa: F401
    except ImportError as error:
        raise CompilerUnavailable(f"the Triton backend needs the triton package: {error}") from error
    key = hashlib.sha256(source.encode()).hexdigest()[:32]
    if (key, _interpreting()) in _modules:
        return _modules[(key, _interpreting())]
    folder = cache_dir() / "triton"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"k_{key}.py"
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(f".{id(source)}.tmp")
        tmp.write_text(source)
        tmp.replace(path)
    name = f"tensorcraft_triton_{key}_{'interp' if _interpreting() else 'jit'}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # @triton.jit looks its function up by module
    spec.loader.exec_module(module)
    _modules[(key, _interpreting())] = module
    return module


class CompiledTritonKernel:
    """A Triton kernel: call it as ``run(*inputs, *outputs)`` (see codegen.kernel)."""

    def __init__(self, kernel: Kernel, source: str):
        self.kernel = kernel
        self.source = source
        module = _import_source(source)
        self._launch = module.launch
        self.interpreted = type(getattr(module, _Printer(kernel).fn)).__name__ == "InterpretedFunction"
        self._check = ArgumentCheck(kernel, "Triton")

    def __call__(self, *tensors: torch.Tensor) -> None:
        self._check(tensors)
        device = tensors[0].device if tensors else None
        if device is not None and device.type == "cpu" and not self.interpreted:
            raise ValueError(f"kernel {self.kernel.name}: Triton runs CPU tensors only in its interpreter; set "
                             "TRITON_INTERPRET=1 before compiling, or pass CUDA tensors")
        if device is not None and device.type not in ("cpu", "cuda"):
            raise ValueError(f"kernel {self.kernel.name}: Triton needs CUDA (or, interpreted, CPU) tensors, got {device}")
        self._launch(*tensors)

    def __repr__(self) -> str:
        mode = "interpreted" if self.interpreted else "jit"
        return f"<CompiledTritonKernel {self.kernel.name} over {list(self.kernel.shape)} ({self.kernel.dtype}, {mode})>"


def compile_kernel(kernel: Kernel) -> CompiledTritonKernel:
    """Generate the Triton module, import it and return a callable kernel (compiled on first launch).

    Raises CompilerUnavailable when triton is not installed.
    """
    return CompiledTritonKernel(kernel, triton_source(kernel))
