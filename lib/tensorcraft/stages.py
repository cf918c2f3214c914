"""Swap points: the stages a learner rewrites, called by the library's own pipelines.

A notebook asks a learner to write one stage of a tool (einsum's implicit-output rule, an einops
plan, a compiler pass...). So that passing a check means "the real tool works with my piece in
it", every such stage is a public function that the pipeline itself calls, marked with
``@swappable``; and there is one way, the same in all three packages, to run the pipeline with a
substitute for it:

    with tensorcraft.substitute(infer_output=my_infer_output):
        tc.einsum("ij,jk", a, b)        # the pipeline calls my_infer_output

Outside the block the library's own function runs again. Caches of plans built from a stage's
answers (einsum's plan cache, einops' recipe cache) are bypassed while any substitute is in force
(``substitutions_active()``), so a substitute is always called and never leaves a plan behind.

Substitutes are process-wide, not per thread: they are meant for a notebook or a check, not for a
server that runs several pipelines at once.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
from typing import Any, Callable, Collection, Iterator

# Packages whose modules declare stages; imported on demand, so that `substitute` knows every name.
STAGE_PACKAGES = ("tensorcraft.einstein", "tensorcraft.einops", "tensorcraft.compiler")

_LIBRARY: dict[str, Callable[..., Any]] = {}      # stage name -> the library's own function
_SUBSTITUTES: dict[str, Callable[..., Any]] = {}  # stage name -> the substitute in force


def swappable(fn: Callable[..., Any] | None = None, *, name: str | None = None):
    """Declare ``fn`` a stage that ``substitute(<name>=...)`` can replace (the name is fn's own by default).

    The decorated function is what the pipeline calls; it runs the substitute when one is in force,
    else ``fn``. ``stage.library`` is always the library's own version.
    """
    def declare(fn: Callable[..., Any]) -> Callable[..., Any]:
        key = name or fn.__name__
        known = _LIBRARY.get(key)
        if known is not None and (known.__module__, known.__qualname__) != (fn.__module__, fn.__qualname__):
            raise ValueError(f"two stages are called {key!r}: {known.__module__}.{known.__qualname__} and "
                             f"{fn.__module__}.{fn.__qualname__}; give one of them another name=")
        _LIBRARY[key] = fn

        @functools.wraps(fn)
        def stage(*args: Any, **kwargs: Any) -> Any:
            replacement = _SUBSTITUTES.get(key)
            if replacement is None:
                return fn(*args, **kwargs)
            return replacement(*args, **kwargs)

        stage.library = fn
        stage.stage_name = key
        return stage

    return declare if fn is None else declare(fn)


def stage_names() -> list[str]:
    """Every stage that can be substituted, after importing the packages that declare them."""
    _import_stage_packages()
    return sorted(_LIBRARY)


def substitutions_active(ignoring: Collection[str] = ()) -> bool:
    """True while a ``substitute`` block is in force: plan caches must not be read or filled.

    ``ignoring``: stages whose substitutes do not count (a cache's own lookup, such as the
    compiler's guards, may run a substitute and still use the cache)."""
    return any(key not in ignoring for key in _SUBSTITUTES)


@contextlib.contextmanager
def substitute(**replacements: Callable[..., Any]) -> Iterator[None]:
    """Run the library's pipelines with the given stages replaced, inside the ``with`` block.

    ``substitute(infer_output=f)``: every call the pipeline makes to the stage ``infer_output``
    calls ``f`` instead. Unknown names and non-callables raise ``ValueError``/``TypeError`` at once.
    Blocks nest; leaving one restores what was in force before it.
    """
    unknown = [key for key in replacements if key not in _LIBRARY]
    if unknown:
        _import_stage_packages()
        unknown = [key for key in replacements if key not in _LIBRARY]
    if unknown:
        raise ValueError(f"substitute(): no stage called {', '.join(map(repr, unknown))}; "
                         f"the stages are: {', '.join(sorted(_LIBRARY))}")
    for key, replacement in replacements.items():
        if not callable(replacement):
            raise TypeError(f"substitute(): {key}= must be a function, got {type(replacement).__name__}")
    before = dict(_SUBSTITUTES)
    _SUBSTITUTES.update(replacements)
    try:
        yield
    finally:
        _SUBSTITUTES.clear()
        _SUBSTITUTES.update(before)


def _import_stage_packages() -> None:
    for package in STAGE_PACKAGES:
        importlib.import_module(package)
