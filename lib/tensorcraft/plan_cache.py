"""Plan caches: ``functools.lru_cache`` on the eager path, out of the way of torch.compile.

einsum and einops plan a call once per (pattern, shapes) and cache the plan, so that a repeated
call pays only for its tensor operations. Two kinds of caller must not use those caches:

- **torch.compile (Dynamo)**, while it traces a call: it ignores an ``lru_cache`` wrapper and
  traces the function inside it anyway, and says so with a warning ("Dynamo detected a call to a
  `functools.lru_cache`-wrapped function") at every traced cache. einops prints none only because
  torch itself lists einops' cached helpers as safe (``_EINOPS_LRU_CACHE_WRAPPER_ALLOWLIST`` in
  ``torch/_dynamo/decorators.py``); no public API puts another library on that list. So we do in
  the open what Dynamo does anyway: while ``torch.compiler.is_compiling()`` (a constant inside a
  traced graph), the planning function is called directly. No guard is installed on a cache, and
  plans added eagerly later never cause a recompile.
- **a substitute stage** (``tensorcraft.substitute``): a cached plan was built by the library's
  own stages, so a learner's stage would never be called (``stages.substitutions_active()``).

`plan_cache(maxsize)` decorates a pure planning function; the hot paths (``tc.einsum``,
``tc.rearrange``...) call ``cache_bypassed()`` and then the function's ``.cached`` or ``.uncached``
themselves, which saves a Python call per use.
"""
from __future__ import annotations

import functools
import sys
from typing import Any, Callable, TypeVar

from tensorcraft.stages import substitutions_active

F = TypeVar("F", bound=Callable[..., Any])


def compiling() -> bool:
    """True while torch.compile / torch.export traces the caller; False when torch is not even loaded."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.compiler.is_compiling()


# The check on the hot path: torch's own function when torch was loaded before this module (one
# call less per use); else `compiling`, which looks for torch each time (a numpy user never loads it).
_compiling = getattr(getattr(sys.modules.get("torch"), "compiler", None), "is_compiling", None) or compiling


def cache_bypassed() -> bool:
    """True when a plan must be built afresh: a trace by torch.compile, or a substitute in force."""
    return substitutions_active() or _compiling()


def plan_cache(maxsize: int | None) -> Callable[[F], F]:
    """Cache a pure planning function as ``functools.lru_cache(maxsize)`` does, except while
    `cache_bypassed()`. ``f.cached`` is the lru_cache, ``f.uncached`` the plain function; arguments
    that cannot be hashed (symbolic sizes, a list) are planned without the cache."""
    def decorate(fn: F) -> F:
        cached = functools.lru_cache(maxsize=maxsize)(fn)

        @functools.wraps(fn)
        def lookup(*args: Any, **kwargs: Any) -> Any:
            if cache_bypassed():
                return fn(*args, **kwargs)
            try:
                hash((args, *kwargs.items()))
            except TypeError:
                return fn(*args, **kwargs)
            return cached(*args, **kwargs)

        lookup.cached = cached
        lookup.uncached = fn
        lookup.cache_info = cached.cache_info
        lookup.cache_clear = cached.cache_clear
        return lookup  # type: ignore[return-value]

    return decorate
