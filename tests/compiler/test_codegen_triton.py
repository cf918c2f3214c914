"""The Triton generator, checked in a process of its own (tests/compiler/triton_kernel_checks.py).

Triton reads TRITON_INTERPRET when it is imported (its library functions, tl.zeros, tl.sum...,
are jit-decorated then), so the interpreter cannot be switched on inside a pytest process that may
already have imported triton, and setting it for this process would leak into every later test
and every process they start. The checks therefore run in a child pytest: with TRITON_INTERPRET=1
on CPU tensors where there is no GPU, compiled for the GPU where there is one.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="the Triton backend needs the triton package")

CHECKS = Path(__file__).with_name("triton_kernel_checks.py")


def _run_checks(interpret: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    result = subprocess.run([sys.executable, "-m", "pytest", str(CHECKS), "-q", "-p", "no:cacheprovider", "-rs"],
                            capture_output=True, text=True, env=env, cwd=Path(__file__).parents[2])
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, f"Triton kernel checks failed:\n{result.stdout[-8000:]}\n{result.stderr[-2000:]}"
    assert re.search(r"\d+ passed", summary) and "failed" not in summary and "error" not in summary, summary
    return summary


def test_triton_kernels_match_eager_in_the_interpreter():
    """On CPU tensors, through Triton's interpreter (every machine)."""
    summary = _run_checks(interpret=True)
    assert "skipped" not in summary, summary


@pytest.mark.cuda
def test_triton_kernels_match_eager_on_the_gpu():
    """Compiled for and run on the GPU."""
    _run_checks(interpret=False)
