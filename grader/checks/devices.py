"""The devices a check runs on: the CPU always, CUDA where ``torch.cuda.is_available()``, and
``meta`` where an exercise asks for it.

A grade never depends on the grading machine having a GPU: CUDA cases that cannot run are
reported as *pending* — never as passed, and never as failed. Yet the commonest device mistake,
a result created on the CPU whatever the input's device (``torch.zeros(n)`` without
``device=x.device``), shows without a GPU: on ``meta`` tensors (shapes and dtypes, no data) torch
runs every operation, and a CPU tensor among them is refused or comes back on the wrong device. An
exercise that creates tensors runs some cases on meta too (``Exercise.on_meta``); there only the
results' kind (type, shape, dtype, device) is compared.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from tensorcraft import trees

# On a GPU, torch warns once per process when a backward pass's first cuBLAS call finds its thread
# without a CUDA context (it sets the primary one and goes on). On stderr in a graded cell, that line
# alone would score the cell 0 (nbgrader counts stderr output as an error), for nothing the learner
# did: seen on notebook 11's block check, whose cases take gradients on the GPU.
warnings.filterwarnings("ignore", message="Attempting to run cuBLAS, but there was no current CUDA context",
                        category=UserWarning)


@dataclass(frozen=True)
class Device:
    name: str          # "cpu" or "cuda"
    available: bool
    reason: str = ""   # why it is not available


META = "meta"   # always available; results are compared by kind only (compare.mismatch)


def devices(cuda_available: bool | None = None) -> list[Device]:
    """CPU, then CUDA (available or not, so that a missing GPU is reported as pending)."""
    if cuda_available is None:
        cuda_available = torch.cuda.is_available()
    cuda = Device("cuda", True) if cuda_available else Device(
        "cuda", False, "no CUDA device here (torch.cuda.is_available() is False)")
    return [Device("cpu", True), cuda]


def to_device(value, device: str):
    """Move every tensor inside ``value`` (any nesting ``tensorcraft.trees`` walks) to ``device``."""
    return trees.map_leaves(lambda v: v.to(device) if isinstance(v, torch.Tensor) else v, value)


def _clone_leaf(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


def clone(value):
    """A deep copy of the tensors and arrays in ``value``, so that a learner who edits an input
    in place cannot change the expected result or the next case (and the check can see it)."""
    return trees.map_leaves(_clone_leaf, value)
