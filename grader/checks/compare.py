"""Compare a learner's result with the ground truth, and say how they differ.

Tensors and arrays are compared by shape, dtype and values, with a tolerance set by the dtype
(float16 is far coarser than float64); anything else must be equal.
"""
from __future__ import annotations

from dataclasses import dataclass
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


SMALL = 8           # a tensor of at most this many entries is shown with its values, as torch prints it


def describe(value: Any, limit: int = 120) -> str:
    """A value on one line, as a learner would write or read it: a small tensor or array as torch
    and numpy print it (``tensor([1., 2.])``), a larger one by dtype and shape (``float32 tensor of
    shape (2, 3, 8, 8)``), strings and numbers by repr, containers item by item; cut at ``limit``."""
    if isinstance(value, torch.Tensor):
        text = " ".join(repr(value).split())
        if value.numel() > SMALL or value.dim() > 2 or value.device.type == "meta" or len(text) > min(limit, 60):
            text = f"{_dtype_name(value.dtype)} tensor of shape {tuple(value.shape)}" + (
                f" on {value.device.type}" if value.device.type != "cpu" else "")
    elif isinstance(value, np.ndarray):
        text = " ".join(repr(value).split())
        if value.size > SMALL or value.ndim > 2 or len(text) > min(limit, 60):
            text = f"{value.dtype} array of shape {value.shape}"
    elif isinstance(value, (tuple, list)) and value:
        items = ", ".join(describe(v, limit) for v in value)
        text = f"({items}{',' * (len(value) == 1)})" if isinstance(value, tuple) else f"[{items}]"
    elif isinstance(value, dict) and value:
        text = "{" + ", ".join(f"{k!r}: {describe(v, limit)}" for k, v in value.items()) + "}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def where(path: tuple = (), names: tuple[str, ...] = ()) -> str:
    """How a learner names a place in a result: ``result[0]['b']``; with ``names``, the first index
    is named instead (a check's result made of parts: ``your answer``, ``tc.einsum's result``), as
    is a first key that is a phrase (a check's dict of findings: ``chains left after your pass``)."""
    if path and names and isinstance(path[0], int) and path[0] < len(names):
        return names[path[0]] + "".join(f"[{p!r}]" for p in path[1:])
    if path and isinstance(path[0], str) and " " in path[0]:
        return path[0] + "".join(f"[{p!r}]" for p in path[1:])
    return "result" + "".join(f"[{p!r}]" for p in path)


@dataclass(frozen=True)
class Difference:
    """How a result differs from the expected one: where (indices and keys into the result,
    outermost first; empty: the whole result) and what."""
    what: str
    path: tuple = ()

    def text(self, names: tuple[str, ...] = ()) -> str:
        return f"{where(self.path, names)}: {self.what}" if self.path else self.what


# A compiled float32 result may be this many times further from the float64 result than eager's is
# (torch._dynamo.testing.same's multiplier, with fp64_ref, in torch.compile's own tests).
ROUNDING_SLACK = 2.0
ROUNDED_DTYPES = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class Rounded:
    """The truth for a result a compiler computed: eager's result, and the same program run in float64.

    A compiler fuses and reorders, so its rounding differs from eager's. Mostly the dtype's tolerance
    covers that; but after large products a cancellation can leave a small value that differs by more
    (notebook 10, seed 1938361668: 67.8377 against eager's 67.8379, next to values of 80,000). Such a
    result is still right when its error against the float64 result is no more than
    ``ROUNDING_SLACK`` times eager's own, measured over the whole tensor (root mean square), as
    torch.compile's tests judge their compiled results."""
    eager: torch.Tensor
    exact: torch.Tensor

    def admits(self, got: Any) -> bool:
        """Whether ``got`` (of eager's shape, dtype and device) is as close to the float64 result as eager's."""
        if not isinstance(got, torch.Tensor) or got.shape != self.eager.shape or got.dtype != self.eager.dtype:
            return False
        exact = self.exact.detach().cpu().double()
        error = lambda t: float((t.detach().cpu().double() - exact).pow(2).mean().sqrt()) if t.numel() else 0.0  # noqa: E731
        _, atol = TOLERANCES[_dtype_name(self.eager.dtype)]
        return error(got) <= ROUNDING_SLACK * error(self.eager) + atol / 10


def rounded(eager: Any, exact: Any) -> Any:
    """``eager``'s result with each tensor of a rounded dtype paired with its float64 counterpart in
    ``exact`` (same structure: tuples, lists, dicts), for :class:`Rounded`'s comparison."""
    if isinstance(eager, torch.Tensor):
        paired = (isinstance(exact, torch.Tensor) and exact.shape == eager.shape and has_data(eager)
                  and _dtype_name(eager.dtype) in ROUNDED_DTYPES)
        return Rounded(eager, exact) if paired else eager
    if isinstance(eager, (tuple, list)) and isinstance(exact, (tuple, list)) and len(exact) == len(eager):
        return type(eager)(rounded(e, x) for e, x in zip(eager, exact))
    if isinstance(eager, dict) and isinstance(exact, dict) and exact.keys() == eager.keys():
        return {key: rounded(value, exact[key]) for key, value in eager.items()}
    return eager


def difference(expected: Any, got: Any) -> Difference | None:
    """None when ``got`` matches ``expected``; otherwise where and how they differ."""
    if isinstance(expected, Rounded):
        if isinstance(got, Rounded):       # two truths (one kept, one computed again): alike in both parts
            return difference(expected.eager, got.eager) or difference(expected.exact, got.exact)
        found = difference(expected.eager, got)
        return None if found is not None and expected.admits(got) else found
    if isinstance(expected, (torch.Tensor, np.ndarray)):
        what = _array_mismatch(expected, got)
        return None if what is None else Difference(what)
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return Difference(f"expected a {type(expected).__name__} of {len(expected)} item{'s' * (len(expected) != 1)}, "
                              f"got {describe(got)}")
        for index, (e, g) in enumerate(zip(expected, got)):
            inner = difference(e, g)
            if inner:
                return Difference(inner.what, (index, *inner.path))
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):   # as dict equality: order aside
            return Difference(f"expected a dict with the keys {sorted(expected, key=str)}, got {describe(got)}")
        for key, value in expected.items():
            inner = difference(value, got[key])
            if inner:
                return Difference(inner.what, (key, *inner.path))
        return None
    if isinstance(expected, float) and isinstance(got, (int, float)):
        return None if np.isclose(expected, got, rtol=1e-9, atol=1e-12) else Difference(f"expected {expected!r}, got {got!r}")
    return None if got == expected else Difference(f"expected {describe(expected)}, got {describe(got)}")


def mismatch(expected: Any, got: Any) -> str | None:
    """None when ``got`` matches ``expected``; otherwise one short sentence saying where and what differs."""
    found = difference(expected, got)
    return None if found is None else found.text()


def _number(value: Any) -> str:
    """A number as Python prints it, or to 6 significant digits where that is long (0.00019410252571105957)."""
    text = repr(value)
    return f"{value:.6g}" if isinstance(value, float) and len(text) > 10 else text


def _index(position: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, position)) + "]"


def _array_mismatch(expected: torch.Tensor | np.ndarray, got: Any) -> str | None:
    kind = "tensor" if isinstance(expected, torch.Tensor) else "numpy array"
    if type(got) is not type(expected) and not isinstance(got, type(expected)):
        return f"expected a {kind}, got {with_article(type(got).__name__)}: {describe(got, 60)}"
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
    wrong = np.argwhere(~close)
    first = tuple(int(i) for i in wrong[0])
    text = (f"{len(wrong)} of {close.size} values differ; first at {_index(first)}: "
            f"expected {_number(e[first].item())}, got {_number(g[first].item())}")
    if e.dtype.kind in "fciu" and close.size > 1:
        with np.errstate(invalid="ignore", over="ignore"):
            errors = np.abs(g.astype(np.complex128 if e.dtype.kind == "c" else np.float64) - e)
        errors = np.where(close, 0.0, np.nan_to_num(errors, nan=np.inf))
        largest = tuple(int(i) for i in np.unravel_index(int(np.argmax(errors)), errors.shape))
        size = errors[largest]
        text += f"; largest error {'nan or inf' if np.isinf(size) else f'{size:.3g}'} at {_index(largest)}"
        if e.dtype.kind in "fc" and np.isfinite(size) and size <= 10 * (atol + rtol * np.nanmax(np.abs(e))):
            text += f" (allowed: {atol:g} + {rtol:g} × |expected|)"   # a near miss: the tolerance matters
    return text


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
        b, a = _as_numpy(before), _as_numpy(after)
        if not np.array_equal(b, a, equal_nan=True):
            if b.ndim == 0:
                return f"its value changed from {_number(b.item())} to {_number(a.item())}"
            same = (b == a) | ((b != b) & (a != a))              # equal, or both nan
            first = tuple(int(i) for i in np.argwhere(~same)[0])
            return (f"its values changed at {int((~same).sum())} of {same.size} positions; first at "
                    f"{_index(first)}: {_number(b[first].item())} became {_number(a[first].item())}")
        return None
    if isinstance(before, (tuple, list)):
        if len(after) != len(before):
            return f"its length changed from {len(before)} to {len(after)}"
        return next((f"[{i}]: {c}" for i, (b, a) in enumerate(zip(before, after)) if (c := changed(b, a))), None)
    if isinstance(before, dict):
        if set(after) != set(before):
            return f"its keys changed from {sorted(before)} to {sorted(after)}"
        return next((f"[{k!r}]: {c}" for k in before if (c := changed(before[k], after[k]))), None)
    return None


def with_article(noun: str) -> str:
    """'a list', 'an AlwaysEqual', 'an int'."""
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def kind_hint(expected: Any, got: Any) -> str | None:
    """A hint for a result of the wrong kind (type, dtype, device), whatever the exercise; None
    when the kind is right and the values are what differ. A result made of parts (an answer and
    what the pipeline made of it) is judged part by part."""
    if isinstance(expected, tuple) and isinstance(got, tuple) and len(expected) == len(got):
        return next((hint for e, g in zip(expected, got) if (hint := kind_hint(e, g))), None)
    if isinstance(expected, str) and isinstance(got, (list, tuple)):
        return f"return a string, not {with_article(type(got).__name__)} of its pieces: join them with ''.join(...)"
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
