"""`tensorcraft.compile`: the face of the compiler. Everything behind it lives in its own module:
``capture`` (record a call) -> ``guards`` -> ``pipeline`` (passes, memory plan, kernels, wrapper)
-> ``runtime`` (the cache of compiled entries, the dispatch of each call, the compiled objects).

``compile(model)`` does nothing until the first call (lazy); see ``runtime`` for what a call does.

Limits, by design of a capture that records torch calls (torch.compile reads bytecode instead):
  * Python side effects other than torch calls (print, appending to a list) are seen by the
    capturing call only: later calls replay the graph without them. Module hooks registered at
    capture are part of the graph; adding or removing one recompiles (the guards list them).
  * Python values read in forward are baked in. Guarded (a change recompiles): the attributes of
    the module and its submodules (``self.scale = 2.0``, ``bn.eps``, ``self.act``, training flags),
    which submodules and hooks it has, and the globals and closure variables the compiled function's
    own code names (modules among them walked the same way). Not guarded: globals read only by
    helpers it calls. Arguments that hold state (arrays, modules, other objects) run eagerly.
  * Intermediate buffers (memory plan slots) belong to the compiled object and are reused by every
    call: one compiled object must not run in two threads at once.
  * In-place updates of buffers (batchnorm in training mode) and randomness (dropout in training
    mode) make capture refuse: those calls run eagerly, and explain() says so.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from .pipeline import Pass
from .runtime import DEFAULT_CACHE_LIMIT, CompiledFunction, CompiledModule, Compiler, compiled_module

__all__ = ["compile", "CompiledFunction", "CompiledModule", "DEFAULT_CACHE_LIMIT"]


def compile(model: torch.nn.Module | Callable | None = None, *, backend: str | Callable | None = None,
            passes: Sequence[Pass | str] | None = None, debug: bool = False,
            cache_limit: int = DEFAULT_CACHE_LIMIT) -> CompiledModule | CompiledFunction | Callable:
    """Compile a module or a function, lazily: nothing happens until the first call.

    Also a decorator: ``@tensorcraft.compile`` or ``@tensorcraft.compile(backend="python")``.

    backend: "python" | "c" | "triton" (None: "c" on CPU, "triton" on CUDA; falls back to
    "python", noted in explain(), when the default one is unavailable), or your own function
    ``compile_kernel(kernel) -> callable run(*inputs, *outputs)`` with a ``source`` attribute.
    passes: pass functions or names from tensorcraft.compiler.passes.PASSES (None: DEFAULT_PASSES,
    or GRADIENT_PASSES (no elementwise fusion: autograd records torch's ops) when a call needs gradients).
    debug: print the captured and optimized graphs, the memory plan and the generated code.
    """
    if model is None:  # used as @compile(...): return the decorator
        return lambda fn: compile(fn, backend=backend, passes=passes, debug=debug, cache_limit=cache_limit)
    if cache_limit < 1:
        raise ValueError(f"cache_limit must be at least 1, got {cache_limit}")
    if backend is not None and not callable(backend):
        from .codegen.backends import BACKENDS
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {sorted(BACKENDS)} or None")
    if isinstance(model, torch.nn.Module):
        return compiled_module(model, Compiler(model, model, backend, passes, debug, cache_limit))
    if callable(model):
        return CompiledFunction(model, Compiler(model, None, backend, passes, debug, cache_limit))
    raise TypeError(f"tensorcraft.compile expects an nn.Module or a function, got {type(model).__name__}")
