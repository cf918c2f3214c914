"""Compiler tests: Triton runs interpreted on the CPU, which must be decided before triton is imported."""
from __future__ import annotations

import os
import sys

import torch

if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # must precede the first import of triton
