"""Pure functions the compiler puts in graphs where the program used something impure.

A graph node is a value; an in-place update is not. Capture rewrites `y[i] = v` on an
intermediate tensor into ``y2 = index_put(y, i, v)``; the conv+batchnorm+relu pass emits
``conv2d_relu``. Generated code calls these by their module path, so it stays readable.
"""
from __future__ import annotations

import torch


def index_put(x: torch.Tensor, index, value) -> torch.Tensor:
    """``x[index] = value`` without touching x: a copy with the slice replaced."""
    out = x.clone()
    out[index] = value
    return out


def conv2d_relu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride=1, padding=0,
                dilation=1, groups=1) -> torch.Tensor:
    """Convolution followed by ReLU applied in place on its fresh output (no second buffer)."""
    return torch.relu_(torch.nn.functional.conv2d(x, weight, bias, stride, padding, dilation, groups))
