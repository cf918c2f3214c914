"""Compare a learner's result with the ground truth, and say how they differ.

Tensors and arrays are compared by shape, dtype and values, with a tolerance set by the dtype
(float16 is far coarser than float64); anything else must be equal.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

# (rtol, atol) per floating dtype; integer and boolean results must match exactly. float32 takes
# torch.testing.assert_close's own (a fused C kernel with FMA, followed by a matmul, differs from
# eager by a few 1e-6 absolute: that is rounding, not a wrong answer).
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-3),
    "bfloat16": (2e-2, 1e-2),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-10, 1e-12),
    "complex64": (1e-5, 1e-6),
    "complex128": (1e-10, 1e-12),
}


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def has_data(value: Any) -> bool:
    """False for a tensor on the ``meta`` device: it has a shape and a dtype but no values."""
    return not (isinstance(value, torch.Tensor) and value.device.type == "meta")


def _as_numpy(value: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            value = value.float()
        return value.numpy()
    return np.asarray(value)


def describe(value: Any, limit: int = 120) -> str:
    """A short, one-line picture of a value for a check message."""
    if isinstance(value, torch.Tensor):
        text = f"tensor(shape={tuple(value.shape)}, dtype={_dtype_name(value.dtype)}"
        if value.device.type != "cpu":
            text += f", device={value.device}"
        if not has_data(value):
            return text + ")"
        values = np.array2string(_as_numpy(value).ravel()[:8], precision=4, separator=", ")
        return text + f", values={values}{'...' if value.numel() > 8 else ''})"
    if isinstance(value, np.ndarray):
        values = np.array2string(value.ravel()[:8], precision=4, separator=", ")
        return f"ndarray(shape={value.shape}, dtype={value.dtype}, values={values}{'...' if value.size > 8 else ''})"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def mismatch(expected: Any, got: Any) -> str | None:
    """None when ``got`` matches ``expected``; otherwise one sentence saying what differs."""
    if isinstance(expected, (torch.Tensor, np.ndarray)):
        return _array_mismatch(expected, got)
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"expected a {type(expected).__name__} of {len(expected)} items, got {describe(got)}"
        for index, (e, g) in enumerate(zip(expected, got)):
            problem = mismatch(e, g)
            if problem:
                return f"item {index}: {problem}"
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):   # as dict equality: order aside
            return f"expected a dict with the keys {sorted(expected, key=str)}, got {describe(got)}"
        for key, value in expected.items():
            problem = mismatch(value, got[key])
            if problem:
                return f"{key}: {problem}"
        return None
    if isinstance(expected, float) and isinstance(got, (int, float)):
        return None if np.isclose(expected, got, rtol=1e-9, atol=1e-12) else f"expected {expected!r}, got {got!r}"
    return None if got == expected else f"expected {describe(expected)}, got {describe(got)}"


def _array_mismatch(expected: torch.Tensor | np.ndarray, got: Any) -> str | None:
    kind = "tensor" if isinstance(expected, torch.Tensor) else "numpy array"
    if type(got) is not type(expected) and not isinstance(got, type(expected)):
        return f"expected a {kind}, got {type(got).__name__}: {describe(got)}"
    if tuple(got.shape) != tuple(expected.shape):
        return f"expected shape {tuple(expected.shape)}, got shape {tuple(got.shape)}"
    if _dtype_name(got.dtype) != _dtype_name(expected.dtype):
        return f"expected dtype {_dtype_name(expected.dtype)}, got dtype {_dtype_name(got.dtype)}"
    if isinstance(expected, torch.Tensor) and got.device.type != expected.device.type:
        return f"expected a result on {expected.device.type}, got one on {got.device.type}"
    if not has_data(expected):  # meta: the kind is all there is to compare
        return None
    e, g = _as_numpy(expected), _as_numpy(got)
    rtol, atol = TOLERANCES.get(_dtype_name(expected.dtype), (0.0, 0.0))
    close = np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    where = tuple(int(i) for i in np.argwhere(~close)[0])
    return (f"values differ at {int((~close).sum())} of {close.size} positions; first at index {where}: "
            f"expected {e[where].item()!r}, got {g[where].item()!r} (tolerance rtol={rtol}, atol={atol})")


def changed(before: Any, after: Any) -> str | None:
    """None when ``after`` still equals ``before`` exactly; otherwise what changed. A check uses it
    to catch a learner's function that edits its inputs in place (``x /= s``, ``x.unsqueeze_(0)``)."""
    if isinstance(before, (torch.Tensor, np.ndarray)):
        if tuple(after.shape) != tuple(before.shape):
            return f"its shape changed from {tuple(before.shape)} to {tuple(after.shape)}"
        if _dtype_name(after.dtype) != _dtype_name(before.dtype):
            return f"its dtype changed from {_dtype_name(before.dtype)} to {_dtype_name(after.dtype)}"
        if not (has_data(before) and has_data(after)):
            return None
        if not np.array_equal(_as_numpy(before), _as_numpy(after), equal_nan=True):
            return f"its values changed from {describe(before)} to {describe(after)}"
        return None
    if isinstance(before, (tuple, list)):
        if len(after) != len(before):
            return f"its length changed from {len(before)} to {len(after)}"
        return next((f"item {i}: {c}" for i, (b, a) in enumerate(zip(before, after)) if (c := changed(b, a))), None)
    if isinstance(before, dict):
        if set(after) != set(before):
            return f"its keys changed from {sorted(before)} to {sorted(after)}"
        return next((f"key {k!r}: {c}" for k in before if (c := changed(before[k], after[k]))), None)
    return None


def with_article(noun: str) -> str:
    """'a list', 'an AlwaysEqual', 'an int'."""
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def kind_hint(expected: Any, got: Any) -> str | None:
    """A hint for a result of the wrong kind (type, dtype, device), whatever the exercise; None
    when the kind is right and the values are what differ."""
    if not isinstance(expected, (torch.Tensor, np.ndarray)):
        return None
    kind = "torch.Tensor" if isinstance(expected, torch.Tensor) else "numpy array"
    if got is None:
        return f"your function returned None: did you forget `return`? It must return a {kind}"
    if isinstance(expected, torch.Tensor) and isinstance(got, np.ndarray):
        return "return a torch.Tensor, not a numpy array: stay with torch operations (no .numpy(), no numpy functions)"
    if isinstance(expected, np.ndarray) and isinstance(got, torch.Tensor):
        return "return a numpy array, not a torch.Tensor: numpy arrays in, numpy arrays out"
    if not isinstance(got, type(expected)):
        return f"return a {kind}, not {with_article(type(got).__name__)}" + (" (.tolist() and .item() leave torch)"
                                                                   if isinstance(got, (list, int, float)) else "")
    if _dtype_name(got.dtype) != _dtype_name(expected.dtype):
        return (f"the result must have dtype {_dtype_name(expected.dtype)}, as the real tool gives for these inputs: "
                "look for conversions (.float(), .double(), .to(...)) and new tensors created without dtype=")
    if isinstance(expected, torch.Tensor) and got.device.type != expected.device.type:
        return ("the result must be on the inputs' device: create new tensors with device=x.device "
                "and do not move the result with .cpu() or .cuda()")
    return None
