"""Input guards: what a compiled entry remembers of each flat argument, and the stage that compares.

A tensor is remembered as a ``TensorMeta`` (shape, strides, dtype, device, requires_grad: what the
generated code was specialised to); a plain value (number, string, None, dtype, and tuples, lists,
dicts of those) as a ``PlainInput``, compared by type and value (``2`` and ``2.0`` give different
dtypes in torch); any other object (a function, a class) as an ``ObjectInput``, compared by
identity. All three are named tuples whose first field says which: ``remembered[0]`` is "tensor",
"value" or "object" (notebook 07's exercise reads them as plain tuples).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import torch

from ...stages import swappable

_PLAIN = (bool, int, float, complex, str, type(None), torch.dtype, torch.device, torch.memory_format, torch.layout)


class TensorMeta(NamedTuple):
    kind: str                    # "tensor"
    type: type
    shape: tuple
    stride: tuple
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool


class PlainInput(NamedTuple):
    kind: str                    # "value"
    type: type
    value: Any


class ObjectInput(NamedTuple):
    kind: str                    # "object"
    type: type
    value: Any


def describe_input(value: Any) -> tuple:
    """What a guard remembers about one flat input: a tensor's metadata, a plain value, or (any
    other object: a function, an array) the object itself, compared by identity."""
    if isinstance(value, torch.Tensor):
        return TensorMeta("tensor", type(value), tuple(value.shape), tuple(value.stride()), value.dtype, value.device,
                          value.requires_grad)
    if is_plain(value):
        return PlainInput("value", type(value), value)
    return ObjectInput("object", type(value), value)


def _input_matches(got: tuple, expected: tuple) -> bool:
    if got[0] != expected[0] or got[1] is not expected[1]:
        return False
    if got[0] == "value":
        return same(got[2], expected[2])
    if got[0] == "object":
        return got[2] is expected[2]
    return got == expected


@swappable
def check_input(name: str, value: Any, remembered: tuple) -> str | None:
    """None if the flat input ``value`` still matches what a guard remembered of it at capture
    (``remembered = describe_input(value_then)``); otherwise the difference, in words, naming ``name``.
    The one input-by-input decision of ``check_guards``: a stage of its own, so that it can be rewritten."""
    got = describe_input(value)
    return None if _input_matches(got, remembered) else _difference(name, got, remembered)


def _difference(name: str, got: tuple, expected: tuple) -> str:
    if got[0] != expected[0] or got[1] != expected[1]:
        return f"input {name}: type {got[1].__name__} != {expected[1].__name__}"
    if got[0] == "value":
        return f"input {name}: value {got[2]!r} != {expected[2]!r}"
    if got[0] == "object":
        return f"input {name}: another {got[1].__name__} object"
    for field_name, a, b in zip(TensorMeta._fields, got, expected):
        if a != b:
            show = (lambda v: list(v)) if field_name in ("shape", "stride") else (lambda v: v)
            return f"input {name}: {field_name} {show(a)} != {show(b)}"
    return f"input {name} differs"


def show_input(name: str, d: tuple) -> str:
    """One remembered input, in words (explain())."""
    if d[0] == "tensor":
        return (f"{name}: {d[1].__name__}{list(d[2])} {str(d[4]).replace('torch.', '')} "
                f"{d[5]}{' requires_grad' if d[6] else ''}")
    if d[0] == "value":
        return f"{name} == {d[2]!r}"
    return f"{name} is the same {d[1].__name__} object"


def is_plain(value: Any) -> bool:
    """A value compared by value: numbers, strings, None, torch's dtypes and devices, and tuples, lists,
    dicts of those."""
    if isinstance(value, (tuple, list)):
        return all(is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(is_plain(k) and is_plain(v) for k, v in value.items())
    return isinstance(value, _PLAIN)


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types (``2`` and ``2.0`` give different dtypes in torch)."""
    if a is b:
        return True
    if isinstance(a, (tuple, list)) and type(a) is type(b):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and type(a) is type(b):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a is b or (type(a) is type(b) and a == b)
