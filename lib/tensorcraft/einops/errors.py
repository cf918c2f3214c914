"""The one error type of tensorcraft.einops.

einops raises ``einops.EinopsError``, a ``RuntimeError``, for a bad pattern or a shape that does not
fit. It also lets a few plain errors escape: a pattern without ``->`` gives a bare ``ValueError``,
``parse_shape`` raises ``RuntimeError``, a mean over integers raises ``NotImplementedError`` (itself a
``RuntimeError``). We raise ``EinopsError`` in every one of those places, and make it both a
``RuntimeError`` and a ``ValueError``, so that any ``except`` clause written against einops still
catches ours.
"""
from __future__ import annotations


class EinopsError(RuntimeError, ValueError):
    """A pattern, an axis length or an input shape that an einops operation cannot use.

    The message names the operation, the pattern, the input shape and what exactly is wrong.
    """


def describe_call(operation, pattern: str, shape=None, axes_lengths: dict | None = None) -> str:
    """``reduce(x, "b c -> b", 'mean') on input of shape (2, 3)``: how every error message starts.

    Called only once something has gone wrong, never on the fast path.
    """
    if operation in ("rearrange", "repeat"):
        call = f'{operation}(x, "{pattern}"'
    else:
        call = f'reduce(x, "{pattern}", {getattr(operation, "__name__", None) or repr(operation)}'
    call += "".join(f", {name}={length!r}" for name, length in (axes_lengths or {}).items())
    where = f"on input of shape {tuple(shape)}" if shape is not None else "on this input"
    return f"{call}) {where}"


class EinopsNotSupportedError(EinopsError, NotImplementedError):
    """A pattern that einops' einsum refuses as not (yet) supported: a ``()`` or ``1`` axis, a number,
    or a composed axis like ``(i j)``. einops raises ``NotImplementedError`` there; this is both that
    and our `EinopsError`, so that a caller catching either one catches it.
    """
