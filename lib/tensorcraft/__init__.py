"""tensorcraft: einsum, einops and a small torch.compile, rebuilt to be read.

The public names below are loaded on first use, so that ``import tensorcraft`` stays cheap
and a notebook about einsum never pays for importing the compiler.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it
_PUBLIC = {
    "einsum": "tensorcraft.einstein.api",
    "contract_path": "tensorcraft.einstein.path",
    "EinsumError": "tensorcraft.einstein.parse",
    "rearrange": "tensorcraft.einops.ops",
    "reduce": "tensorcraft.einops.ops",
    "repeat": "tensorcraft.einops.ops",
    "pack": "tensorcraft.einops.ops",
    "unpack": "tensorcraft.einops.ops",
    "parse_shape": "tensorcraft.einops.ops",
    "EinopsError": "tensorcraft.einops.errors",
    "compile": "tensorcraft.compiler.api",
    "substitute": "tensorcraft.stages",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    try:
        module = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'tensorcraft' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
