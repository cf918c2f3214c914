"""The runtime: the cache of compiled entries, the dispatch of each call, and the compiled objects.

``Compiler`` is what a compiled module or function calls. Each call:
    1. flattens its arguments and looks for a cached entry whose guards all hold -> runs it;
    2. otherwise captures the call (which runs it eagerly, so this call's answer is eager's),
       compiles the graph, and caches it with its guards;
    3. when capture refuses (data-dependent control flow, randomness, a container it cannot look
       into, ...) or the graph depends on a Python value no guard can watch (``guards.Unguardable``),
       the entry is an "eager" one: later matching calls run eagerly, and explain() says why;
    4. past ``cache_limit`` entries (8, as torch.compile), a new signature runs eagerly with a warning.
While a ``tensorcraft.substitute(...)`` block is in force the cache is neither read nor filled:
every call captures, compiles with the substitute stages and returns what the compiled code computes
(except for substitutes of the guard stages, ``GUARD_STAGES``: they are the cache's lookup);
``.compiled`` shows that build (the most recent one, cached or not).

``compiled_module(model, compiler)`` returns the model itself under another class: an instance of
a subclass of the model's own class that shares the model's ``__dict__`` (parameters, buffers,
submodules, hooks, flags), so that every ``nn.Module`` method (``half()``, ``to()``, ``train()``,
``state_dict()``, ``register_forward_hook``...) acts on the model, and only calling it differs.
"""
from __future__ import annotations

import functools
import operator
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from .. import stages, trees
from .capture import capture
from .guards import Guards, Unguardable, build_guards, check_guards, plain_values
from .pipeline import CompiledGraph, Pass, compile_graph
from .training import need_grad as call_needs_grad

DEFAULT_CACHE_LIMIT = 8
# Substitutes for these stages decide cache hits themselves: the cache stays in use while they are in force.
GUARD_STAGES = frozenset({"check_guards", "check_input"})


@dataclass
class Entry:
    """One cached compilation: valid while ``guards`` hold. ``compiled`` is None for an eager entry."""
    guards: Guards
    compiled: CompiledGraph | None
    reason: str | None = None            # why this entry runs eagerly
    hits: int = 0
    fetch: Callable[[Any], tuple] = lambda module: ()  # reads the module tensors the graph needs
    need_grad: bool = False              # run through the autograd wrapper (training.py)


@dataclass
class Stats:
    calls: int = 0
    compiles: int = 0          # successful captures turned into code
    cache_hits: int = 0
    eager_calls: int = 0       # calls that ran eagerly after the first (refused capture or limit)
    recompiles: list[str] = field(default_factory=list)   # the failed guard that caused each recompile
    fallbacks: list[str] = field(default_factory=list)    # why calls fell back to eager (each reason once)


class Compiler:
    """The cache and the call path shared by compiled modules and compiled functions."""

    def __init__(self, fn: Callable, module: torch.nn.Module | None, backend: str | Callable | None,
                 passes: Sequence[Pass | str] | None, debug: bool, cache_limit: int) -> None:
        self.fn, self.module = fn, module
        self.backend, self.passes, self.debug, self.cache_limit = backend, passes, debug, cache_limit
        self.entries: list[Entry] = []
        self._specs: dict[int, Any] = {}  # number of tensor arguments -> the pytree spec of (args, {})
        self.stats = Stats()
        self._warned = False
        self.last_built: CompiledGraph | None = None  # also built under a substitute, which caches nothing

    # -- the call path ----------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.stats.calls += 1
        if not kwargs and all(isinstance(a, torch.Tensor) for a in args):  # the common case, without pytree
            flat, spec = list(args), self._specs.get(len(args))
            if spec is None:
                spec = self._specs[len(args)] = trees.flatten((args, kwargs))[1]
        else:
            flat, spec = trees.flatten((args, kwargs))
        training = None if self.module is None else self.module.training
        if stages.substitutions_active(ignoring=GUARD_STAGES):  # a learner's stage is in force: build afresh, cache nothing
            return self._compile_and_run(args, kwargs, flat, spec, training, cache=False)
        failures = []
        for entry in self.entries:
            params = entry.fetch(self.module)
            why = check_guards(entry.guards, flat, spec, training, params)
            if why is None:
                entry.hits += 1
                if entry.compiled is None:
                    self.stats.eager_calls += 1
                    return self.fn(*args, **kwargs)
                self.stats.cache_hits += 1
                return entry.compiled.run(flat, params, entry.need_grad)
            failures.append(why)
        if len(self.entries) >= self.cache_limit:
            message = (f"tensorcraft.compile: cache limit ({self.cache_limit}) reached; running eagerly. "
                       f"Last failed guard: {failures[-1] if failures else 'none'}")
            if not self._warned:  # once: a loop over many shapes would otherwise warn and log at every call
                warnings.warn(message, RuntimeWarning, stacklevel=2)
                self._warned = True
                self.stats.fallbacks.append(message)
            self.stats.eager_calls += 1
            return self.fn(*args, **kwargs)
        if self.entries:
            self.stats.recompiles.append(failures[-1])  # the newest entry's failed guard
        return self._compile_and_run(args, kwargs, flat, spec, training)

    def _compile_and_run(self, args, kwargs, flat, spec, training, cache: bool = True) -> Any:
        need_grad = call_needs_grad(flat, self.module.parameters() if self.module is not None else ())
        frozen = not need_grad and not training
        captured = capture(self.fn, args, kwargs, module=self.module)
        names = captured.input_names
        values: list = []
        if captured.graph is not None:
            try:  # before compiling: a value no guard can watch makes this an eager entry
                values = plain_values(self.fn, self.module, captured.ran,
                                      [v for v in flat if not isinstance(v, torch.Tensor)])
            except Unguardable as refusal:
                captured.graph, captured.reason = None, str(refusal)
        if captured.graph is None:
            if cache:
                guards = build_guards(flat, spec, names, training, [], [], frozen)
                self.entries.append(Entry(guards, None, captured.reason))
            self.stats.fallbacks.append(captured.reason)
            return captured.result
        graph = captured.graph
        graph.frozen = frozen
        fetch = _fetcher(self.module, [n.target for n in graph.params])
        params = fetch(self.module)
        compiled = compile_graph(graph, backend=self.backend, passes=self.passes, debug=self.debug,
                                 need_grad=need_grad)
        self.stats.compiles += 1
        self.last_built = compiled
        if not cache:
            return compiled.run(flat, params, need_grad)
        folds = compiled.folds_values()
        guards = build_guards(flat, spec, names, training, compiled.param_names, params, frozen, captured.constants,
                              baked=compiled.optimized.baked, folded_constants=folds,
                              values=values)
        self.entries.append(Entry(guards, compiled, fetch=fetch, need_grad=need_grad))
        return captured.result  # the capturing call ran eagerly: its answer is eager's

    # -- inspection ---------------------------------------------------------------------------
    def explain(self) -> str:
        """Entries, their guards, recompiles with the guard that failed, eager fallbacks and why."""
        s = self.stats
        lines = [f"calls: {s.calls}, compiles: {s.compiles}, cache hits: {s.cache_hits}, "
                 f"eager calls: {s.eager_calls}, recompiles: {len(s.recompiles)}, "
                 f"cache entries: {len(self.entries)}/{self.cache_limit}"]
        for i, e in enumerate(self.entries):
            if e.compiled is None:
                lines.append(f"entry {i}: EAGER ({e.hits} later hits) because {e.reason}")
            else:
                g, o = e.compiled.captured, e.compiled.optimized
                lines.append(f"entry {i}: compiled, backend {e.compiled.backend}, {len(g)} captured nodes -> "
                             f"{len(o)} after passes, {o.count(kind='kernel')} fused kernel(s), {e.hits} hits")
                lines.append(f"   {e.compiled.plan.summary()}")
                lines += [f"   note: {n}" for n in e.compiled.notes]
            lines.append(f"   guards: {e.guards}")
        for i, why in enumerate(s.recompiles):
            lines.append(f"recompile {i + 1}: {why}")
        for why in s.fallbacks:
            if why.startswith("tensorcraft.compile: cache limit"):
                lines.append(f"fallback: {why}")
        return "\n".join(lines)

    @property
    def compiled(self) -> CompiledGraph | None:
        """The most recently built compiled graph (for notebooks: .captured, .optimized, .source), cached
        or not: under ``tensorcraft.substitute`` it is the one the substitute stages just built."""
        return self.last_built


def _fetcher(module: torch.nn.Module | None, names: list[str]) -> Callable[[Any], tuple]:
    """A function reading the named module tensors (qualified names) as a tuple, fast: each name is
    resolved once to the dict that holds it (a module's ``_parameters``, ``_buffers`` or ``__dict__``),
    so a call costs one dict lookup per tensor. A tensor reassigned (``m.w = nn.Parameter(...)``)
    lands in the same dict; a swapped submodule is caught by the guards (its id), which recompile."""
    if not names:
        return lambda module: ()
    slow = operator.attrgetter(*names)
    slots = []
    for name in names:
        owner_name, _, attr = name.rpartition(".")
        owner = module.get_submodule(owner_name) if module is not None else None
        holder = next((d for d in (getattr(owner, "_parameters", {}), getattr(owner, "_buffers", {}), vars(owner))
                       if attr in d), None) if owner is not None else None
        if holder is None:
            return (lambda m: (slow(m),)) if len(names) == 1 else slow
        slots.append((holder, attr))

    def fetch(module: Any) -> tuple:
        try:
            return tuple([holder[attr] for holder, attr in slots])
        except KeyError:  # deleted since: read them the slow way (and fail as Python would)
            return (slow(module),) if len(names) == 1 else slow(module)
    return fetch


class _Inspectable:
    """What both compiled objects show of their compiler: counters, the last build, the reasons."""
    _compiler: Compiler

    @property
    def stats(self) -> Stats:
        return self._compiler.stats

    @property
    def compiled(self) -> CompiledGraph | None:
        return self._compiler.compiled

    def explain(self) -> str:
        return self._compiler.explain()


class CompiledFunction(_Inspectable):
    """A compiled plain function: call it as the function; ``.explain()``, ``.stats``, ``.compiled``."""

    def __init__(self, fn: Callable, compiler: Compiler) -> None:
        functools.update_wrapper(self, fn)
        self._compiler = compiler

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiler(*args, **kwargs)


class CompiledModule(_Inspectable):
    """Base of every compiled module's class: ``Compiled<Model>(CompiledModule, <Model>)``.

    The instance shares the model's ``__dict__``, so it *is* the model in every respect but one:
    calling it (or its ``forward``) goes through the compiler. ``_orig_mod`` is the model object.
    """
    _orig_mod: torch.nn.Module

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiler(*args, **kwargs)  # hooks run inside, as the model calls them

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiler(*args, **kwargs)

    def __repr__(self) -> str:
        return f"CompiledModule({self._orig_mod!r})"

    def __reduce_ex__(self, protocol):  # pickles (and deep-copies) as the model it is
        return self._orig_mod.__reduce_ex__(protocol)


def compiled_module(model: torch.nn.Module, compiler: Compiler) -> CompiledModule:
    """The model, seen through a class whose calls go to ``compiler`` (see the module docstring)."""
    cls = type(model)
    proxy_class = type(f"Compiled{cls.__name__}", (CompiledModule, cls),
                       {"_compiler": compiler, "_orig_mod": model, "__module__": __name__})
    proxy = object.__new__(proxy_class)
    object.__setattr__(proxy, "__dict__", model.__dict__)
    return proxy
