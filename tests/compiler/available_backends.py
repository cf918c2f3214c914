"""Backends for the compiler tests: python always; c and triton when their modules can run here.

(A helper module, not conftest: test modules import it by a name no other folder uses.)
"""
from __future__ import annotations

import importlib.util
import os

import pytest
import torch


def _skip_reason(name: str) -> str | None:
    if name == "python":
        return None
    if name == "c":
        from tensorcraft.compiler.codegen import c
        try:
            from tensorcraft.compiler.codegen.kernel import Buffer, Kernel, Output, Stmt
            c.compile_kernel(Kernel("probe", (2,), (Buffer("a", (2,)),), (Stmt("x", "load", ("a",)),),
                                    (Output("o", "x"),)))
        except c.CompilerUnavailable as error:
            return f"backend 'c': no C compiler here ({error})"
    if name == "triton":
        if importlib.util.find_spec("triton") is None:
            return "backend 'triton': triton is not installed"
        if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
            return "backend 'triton': no CUDA and triton was imported before TRITON_INTERPRET=1 could be set"
    return None


def backend_params() -> list:
    """pytest params for every backend, skipped with the reason where it cannot run."""
    return [pytest.param(name, marks=pytest.mark.skipif(bool(_skip_reason(name)), reason=_skip_reason(name) or ""))
            for name in ("python", "c", "triton")]
