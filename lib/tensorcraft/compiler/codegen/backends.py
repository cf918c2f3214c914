"""Kernel backends by name: "python" (portable), "c" (C + OpenMP), "triton" (GPU, or CPU interpreted).

Each backend is a module exposing ``compile_kernel(kernel) -> CompiledKernel``; they are imported
only when asked for, so a machine without a C compiler or Triton can still use the others.
"""
from __future__ import annotations

import importlib
from typing import Callable

import torch

from .kernel import CompiledKernel, Kernel

BACKENDS = {
    "python": "tensorcraft.compiler.codegen.python",
    "c": "tensorcraft.compiler.codegen.c",
    "triton": "tensorcraft.compiler.codegen.triton",
}


class BackendUnavailable(RuntimeError):
    """The named backend cannot run here (its module or its toolchain is missing)."""


def default_backend(device: torch.device) -> str:
    """What `backend=None` means: Triton on CUDA, C on the CPU."""
    return "triton" if device.type == "cuda" else "c"


def load_backend(name: str) -> Callable[[Kernel], CompiledKernel]:
    """The ``compile_kernel`` function of a backend; BackendUnavailable says why not."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of {sorted(BACKENDS)}")
    try:
        module = importlib.import_module(BACKENDS[name])
    except ImportError as error:
        raise BackendUnavailable(f"backend {name!r} cannot be imported: {error}") from error
    return module.compile_kernel


KernelCompiler = Callable[[Kernel], CompiledKernel]


def backend_name(backend: str | KernelCompiler) -> str:
    return backend if isinstance(backend, str) else getattr(backend, "__qualname__", repr(backend))


def compile_with(backend: str | KernelCompiler, kernel: Kernel) -> CompiledKernel:
    """Compile one kernel with a named backend, or with your own ``compile_kernel`` function
    (how a notebook plugs in a generator it wrote); toolchain failures become BackendUnavailable."""
    name = backend_name(backend)
    compile_kernel = backend if callable(backend) else load_backend(backend)
    try:
        return compile_kernel(kernel)
    except BackendUnavailable as error:  # a missing toolchain (c_toolchain.CompilerUnavailable is one)
        raise BackendUnavailable(f"backend {name!r}: {error}") from error
