"""What the kernel printers share: the loop layout, safe identifiers, the walk over the statements,
and the check of a compiled kernel's arguments.

A printer (C in ``c.py``, Triton in ``triton.py``) subclasses `KernelPrinter` and says only what is
its own: how each op reads (``UNARY`` / ``BINARY`` spellings with ``{a}``, ``{b}`` and its
``words``), how a constant and an assignment read, and the loops around the statements.
"""
from __future__ import annotations

from typing import Sequence

import torch

from tensorcraft.compiler.codegen.kernel import BINARY, DTYPES, UNARY, Kernel
from tensorcraft.compiler.codegen.layout import Layout, collapse
from tensorcraft.compiler.codegen.naming import identifier


class KernelPrinter:
    """Builds the source of one kernel; subclasses print the parts of their language."""
    UNARY: dict[str, str] = {}     # op -> spelling, e.g. "exp{f}({a})"
    BINARY: dict[str, str] = {}    # op -> spelling, e.g. "{a} + {b}"
    RESERVED: frozenset[str] = frozenset()  # the printer's own names: identifiers never take them

    def __init_subclass__(cls) -> None:
        missing = (set(UNARY) - set(cls.UNARY)) | (set(BINARY) - set(cls.BINARY))
        if missing:
            raise TypeError(f"{cls.__qualname__} has no spelling for {sorted(missing)}")

    def __init__(self, kernel: Kernel, function_name: str) -> None:
        self.k = kernel
        self.layout: Layout = collapse(kernel)
        self.dtype = DTYPES[kernel.dtype]
        taken = set(self.RESERVED)
        self.fn = identifier(function_name, taken)
        self.ptr = {b.name: identifier("in_" + b.name, taken) for b in kernel.inputs}
        self.out = [identifier("out_" + o.name, taken) for o in kernel.outputs]
        self.var = {s.name: identifier("v_" + s.name, taken) for s in kernel.stmts}
        self.words: dict[str, str] = {}

    # -- what a language says differently -------------------------------------------------------
    def constant(self, value: float, width: str) -> str:
        raise NotImplementedError

    def assign(self, variable: str, value: str) -> str:
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------------
    def expression(self, stmt, load: dict[str, str], width: str = "") -> str:
        """The right-hand side of one statement (``load``: how each input is read here)."""
        if stmt.op == "load":
            return load[stmt.args[0]]
        if stmt.op == "const":
            return self.constant(float(stmt.args[0]), width)
        if stmt.op in UNARY:
            return self.UNARY[stmt.op].format(a=self.var[stmt.args[0]], **self.words)
        return self.BINARY[stmt.op].format(a=self.var[stmt.args[0]], b=self.var[stmt.args[1]], **self.words)

    def statements(self, load: dict[str, str], width: str = "") -> list[str]:
        """The kernel's straight-line statements at one point (or over one block of ``width``)."""
        return [self.assign(self.var[s.name], self.expression(s, load, width)) for s in self.k.stmts]

    def ops_used(self) -> str:
        """Every spelling the statements use, joined: what helpers or declarations a kernel needs."""
        return " ".join(self.UNARY.get(s.op, "") + self.BINARY.get(s.op, "") for s in self.k.stmts)

    def describe(self) -> list[str]:
        """The kernel and its collapsed loops, for the comment at the top of the source."""
        return [*("   " + line for line in str(self.k).splitlines()),
                f"   collapsed iteration space {list(self.layout.sizes)}; element strides per input:",
                *(f"     {name}: {list(s)}" for name, s in self.layout.strides.items())]


class ArgumentCheck:
    """Checks a compiled kernel's tensors (count, type, device, dtype, shape, contiguous) before
    their addresses reach generated code, which would read or write out of bounds without a word.

    ``device_type``: the one device type the backend runs on (C: "cpu"), or None for "all on the
    first tensor's device" (Triton)."""

    def __init__(self, kernel: Kernel, backend: str, device_type: str | None = None) -> None:
        self.kernel, self.backend, self.device_type = kernel, backend, device_type
        self.dtype = DTYPES[kernel.dtype]
        self.names = [f"input {b.name}" for b in kernel.inputs] + [f"output {o.name}" for o in kernel.outputs]
        self.shapes = [torch.Size(b.shape) for b in kernel.inputs] + \
                      [torch.Size(kernel.output_shape(o)) for o in kernel.outputs]

    def __call__(self, tensors: Sequence[torch.Tensor]) -> None:
        if len(tensors) != len(self.shapes):
            raise TypeError(f"kernel {self.kernel.name} takes {len(self.shapes)} tensors "
                            f"({', '.join(self.names)}), got {len(tensors)}")
        device = self.device_type or (tensors[0].device.type if isinstance(tensors[0], torch.Tensor) else None)
        first = tensors[0].device if isinstance(tensors[0], torch.Tensor) else None
        for t, shape, name in zip(tensors, self.shapes, self.names):
            if not (isinstance(t, torch.Tensor) and t.dtype is self.dtype and t.device.type == device
                    and (self.device_type is not None or t.device == first)
                    and t.shape == shape and t.is_contiguous()):
                self._complain(t, shape, name, first)

    def _complain(self, t: object, shape: torch.Size, name: str, first: torch.device | None) -> None:
        where = f"kernel {self.kernel.name}, {name}"
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{where}: expected a torch.Tensor, got {type(t).__name__}")
        if self.device_type is not None and t.device.type != self.device_type:
            raise ValueError(f"{where}: the {self.backend} backend runs on {self.device_type.upper()} tensors, "
                             f"got one on {t.device}")
        if self.device_type is None and t.device != first:
            raise ValueError(f"{where}: is on {t.device}, the first tensor on {first}; all must share a device")
        if t.dtype is not self.dtype:
            raise TypeError(f"{where}: expected dtype {self.dtype}, got {t.dtype}")
        if t.shape != shape:
            raise ValueError(f"{where}: expected shape {list(shape)}, got {list(t.shape)}")
        raise ValueError(f"{where}: expected a contiguous tensor, got strides {t.stride()}; pass t.contiguous()")


def indent(lines: list[str], keep_pragmas: bool = False) -> list[str]:
    """Four spaces before each non-empty line (C keeps ``#pragma`` lines at column 0 if asked)."""
    return ["    " + line if line and not (keep_pragmas and line.startswith("#")) else line for line in lines]
