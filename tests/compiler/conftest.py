"""Compiler tests: Triton runs interpreted on the CPU, which must be decided before triton is imported;
where it is compiled for a GPU, the tests of the ``triton`` backend run on the GPU."""
from __future__ import annotations

import os
import sys

import pytest
import torch

if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # must precede the first import of triton


def _triton_compiles_for_the_gpu() -> bool:
    return torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") != "1"


@pytest.fixture(autouse=True)
def _triton_tests_on_the_gpu(request):
    """A test of the ``triton`` backend where Triton is compiled, not interpreted (a GPU, ``TRITON_INTERPRET``
    unset: ``make test-gpu``), makes its tensors on the GPU, as the backend needs: CUDA is torch's default
    device while it runs (helpers that draw from a CPU generator move what they drew there)."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is None or callspec.params.get("backend") != "triton" or not _triton_compiles_for_the_gpu():
        yield
        return
    with torch.device("cuda"):
        yield

