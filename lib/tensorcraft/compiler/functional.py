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


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
              scale: float) -> torch.Tensor:
    """``softmax((q @ k^T) * scale masked_fill(mask, -inf)) @ v`` as torch's fused attention.

    ``mask`` is True where a score is hidden (masked_fill's convention; scaled_dot_product_attention
    wants the opposite). A query whose every key is hidden gets NaN from the softmax in eager torch
    but zeros from the fused kernel, so that case (checked at each call, a cheap reduction over the
    mask) runs the unfused ops."""
    if mask is None:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale)
    keep = mask.logical_not()
    if not bool(keep.any(-1).all()):
        scores = torch.matmul(q, k.transpose(-2, -1)) * scale
        return torch.matmul(scores.masked_fill(mask, float("-inf")).softmax(dim=-1), v)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=scale)
