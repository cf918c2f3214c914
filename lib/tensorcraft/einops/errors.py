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
