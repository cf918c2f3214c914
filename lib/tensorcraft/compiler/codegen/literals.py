"""Numbers written into generated source, in one place: every printer spells a constant through here.

A float is not always its ``repr``: ``repr(float("nan"))`` is ``nan``, which is a NameError in
Python and in Triton, and ``inf`` is not C. Python and Triton read ``float('nan')`` /
``float('inf')``; C reads ``NAN`` / ``INFINITY`` from math.h, and a float32 kernel's literal is
rounded to float32 first, as ``torch.full`` rounds it.
"""
from __future__ import annotations

import math

import torch


def python_float(value: float) -> str:
    """Python (and Triton) source for ``value``, NaN and infinities included."""
    value = float(value)
    if math.isnan(value):
        return "float('nan')"
    if math.isinf(value):
        return "float('inf')" if value > 0 else "-float('inf')"
    return repr(value)


def c_float(value: float, dtype: torch.dtype) -> str:
    """A C literal that is exactly the value torch gives ``value`` in ``dtype`` (float32 or float64)."""
    value = torch.full((), float(value), dtype=dtype).item()   # rounded as torch.full does
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    # repr always has a "." or an "e"; the float32 value is a double, so its repr reads back exactly
    return repr(float(value)) + ("f" if dtype == torch.float32 else "")
