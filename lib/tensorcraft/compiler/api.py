"""`tensorcraft.compile`: the user-facing entry point, and the cache of compiled entries.

``compile(model)`` does nothing until the first call (lazy). Each call then:
    1. flattens its arguments and looks for a cached entry whose guards all hold -> runs it;
    2. otherwise captures the call (which runs it eagerly, so this call's answer is eager's),
       compiles the graph, and caches it with its guards;
    3. when capture refuses (data-dependent control flow, randomness, ...) the entry is an
       "eager" one: later matching calls run eagerly, and explain() says why;
    4. past `cache_limit` entries (8, as torch.compile), a new signature runs eagerly with a warning.

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

import functools
import operator
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
from torch.utils import _pytree as pytree

from .capture import capture
from .guards import Guards, build_guards, plain_values
from .ir import Node
from .pipeline import CompiledGraph, Pass, compile_graph
from .training import run_with_gradients

DEFAULT_CACHE_LIMIT = 8


@dataclass
class Entry:
    """One cached compilation: valid while ``guards`` hold. ``compiled`` is None for an eager entry."""
    guards: Guards
    compiled: CompiledGraph | None
    reason: str | None = None            # why this entry runs eagerly
    hits: int = 0
    fetch: Callable[[Any], tuple] | None = None  # reads the module tensors the graph needs
    need_grad: bool = False              # run through the autograd wrapper (training.py)

    @property
    def graph(self):
        return None if self.compiled is None else self.compiled.captured


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

    def __init__(self, fn: Callable, module: torch.nn.Module | None, backend: str | None,
                 passes: Sequence[Pass | str] | None, debug: bool, cache_limit: int) -> None:
        self.fn, self.module = fn, module
        self.backend, self.passes, self.debug, self.cache_limit = backend, passes, debug, cache_limit
        self.entries: list[Entry] = []
        self.stats = Stats()
        self._warned = False

    # -- the call path ----------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.stats.calls += 1
        flat, spec = pytree.tree_flatten((args, kwargs))
        training = None if self.module is None else self.module.training
        failures = []
        for entry in self.entries:
            params = entry.fetch(self.module) if entry.fetch else ()
            why = entry.guards.check(flat, spec, training, params)
            if why is None:
                entry.hits += 1
                if entry.compiled is None:
                    self.stats.eager_calls += 1
                    return self.fn(*args, **kwargs)
                self.stats.cache_hits += 1
                return self._run(entry, flat, params)
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

    def _compile_and_run(self, args, kwargs, flat, spec, training) -> Any:
        need_grad = torch.is_grad_enabled() and (
            any(isinstance(v, torch.Tensor) and v.requires_grad for v in flat)
            or (self.module is not None and any(p.requires_grad for p in self.module.parameters())))
        frozen = not need_grad and not training
        captured = capture(self.fn, args, kwargs, module=self.module)
        names = captured.input_names
        if captured.graph is None:
            guards = build_guards(flat, spec, names, training, [], [], frozen)
            self.entries.append(Entry(guards, None, captured.reason))
            self.stats.fallbacks.append(captured.reason)
            return captured.result
        graph = captured.graph
        graph.frozen = frozen
        param_names = [n.target for n in graph.params]
        fetch = operator.attrgetter(*param_names) if param_names else None
        if fetch is not None and len(param_names) == 1:
            single = fetch
            fetch = lambda m: (single(m),)  # noqa: E731  attrgetter returns a bare value for one name
        params = fetch(self.module) if fetch else ()
        compiled = compile_graph(graph, backend=self.backend, passes=self.passes, debug=self.debug)
        folds = _folds_values(compiled)
        guards = build_guards(flat, spec, names, training, param_names, params, frozen, captured.constants,
                              folded=frozen and folds, folded_constants=folds,
                              values=plain_values(self.fn, self.module))
        self.entries.append(Entry(guards, compiled, fetch=fetch, need_grad=need_grad))
        self.stats.compiles += 1
        return captured.result  # the capturing call ran eagerly: its answer is eager's

    def _run(self, entry: Entry, flat: list, params: Sequence[torch.Tensor]) -> Any:
        compiled = entry.compiled
        graph = compiled.captured
        if not entry.need_grad:
            outs = compiled(flat, dict(zip(entry.guards.param_names, params)))
            return pytree.tree_unflatten(outs, graph.output_spec)
        # gradients needed: run through an autograd.Function (training.py) that takes the flat tensors
        names = entry.guards.param_names
        out_values = graph.output.args  # a Node where a tensor is returned, else the plain value itself
        tensor_positions = [i for i, a in enumerate(out_values) if isinstance(a, Node)]
        input_positions = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor)]

        def forward(tensors):  # the call's tensor inputs, then the module tensors
            inner = list(flat)
            for pos, t in zip(input_positions, tensors):
                inner[pos] = t
            outs = compiled(inner, dict(zip(names, tensors[len(input_positions):])))
            return [outs[i] for i in tensor_positions]

        outs = list(out_values)
        for i, t in zip(tensor_positions, run_with_gradients(forward, graph, flat, names, params)):
            outs[i] = t
        return pytree.tree_unflatten(outs, graph.output_spec)

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
        """The most recently built compiled graph (for notebooks: .captured, .optimized, .source)."""
        for e in reversed(self.entries):
            if e.compiled is not None:
                return e.compiled
        return None


def _folds_values(compiled: CompiledGraph) -> bool:
    """Did the passes bake in values computed at compile time (from constants, or from parameters in
    a frozen graph)? Then the guards compare those tensors' values, not only their version counters."""
    captured = {id(n.target) for n in compiled.captured.nodes if n.kind == "constant"}
    return any(n.kind == "constant" and id(n.target) not in captured for n in compiled.optimized.nodes)


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
    """A compiled plain function: call it as the function; `.explain()`, `.stats`, `.compiled`."""

    def __init__(self, fn: Callable, compiler: Compiler) -> None:
        functools.update_wrapper(self, fn)
        self._compiler = compiler

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiler(*args, **kwargs)


class CompiledModule(_Inspectable, torch.nn.Module):
    """A compiled module with the model's own interface.

    Parameters, buffers, state_dict keys, submodules, train()/eval() and attributes are the
    original model's (no ``_orig_mod.`` prefix): the original is not registered as a child, every
    module method below is forwarded to it.
    """

    def __init__(self, model: torch.nn.Module, compiler: Compiler) -> None:
        super().__init__()
        object.__setattr__(self, "_orig_mod", model)
        object.__setattr__(self, "_compiler", compiler)

    @property
    def training(self) -> bool:  # type: ignore[override]
        return self.__dict__["_orig_mod"].training if "_orig_mod" in self.__dict__ else True

    @training.setter
    def training(self, value: bool) -> None:
        if "_orig_mod" in self.__dict__:
            self.__dict__["_orig_mod"].training = value

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiler(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name in ("_orig_mod", "_compiler"):
            return self.__dict__[name]
        return getattr(self.__dict__["_orig_mod"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "training" or "_orig_mod" not in self.__dict__:
            super().__setattr__(name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(dir(self._orig_mod)))

    def __repr__(self) -> str:
        return f"CompiledModule({self._orig_mod!r})"

    # everything a Module exposes about its state: forwarded, so names stay the model's own
    def train(self, mode: bool = True):
        self._orig_mod.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def named_parameters(self, *a, **k):
        return self._orig_mod.named_parameters(*a, **k)

    def parameters(self, *a, **k):
        return self._orig_mod.parameters(*a, **k)

    def named_buffers(self, *a, **k):
        return self._orig_mod.named_buffers(*a, **k)

    def buffers(self, *a, **k):
        return self._orig_mod.buffers(*a, **k)

    def named_modules(self, *a, **k):
        return self._orig_mod.named_modules(*a, **k)

    def modules(self):
        return self._orig_mod.modules()

    def children(self):
        return self._orig_mod.children()

    def named_children(self):
        return self._orig_mod.named_children()

    def state_dict(self, *a, **k):
        return self._orig_mod.state_dict(*a, **k)

    def load_state_dict(self, *a, **k):
        return self._orig_mod.load_state_dict(*a, **k)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self._orig_mod.zero_grad(set_to_none)

    def to(self, *a, **k):
        self._orig_mod.to(*a, **k)
        return self

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        self._orig_mod.cuda(device)
        return self

    def double(self):
        self._orig_mod.double()
        return self

    def float(self):
        self._orig_mod.float()
        return self

    def apply(self, fn):
        self._orig_mod.apply(fn)
        return self


def compile(model: torch.nn.Module | Callable | None = None, *, backend: str | Callable | None = None,
            passes: Sequence[Pass | str] | None = None, debug: bool = False,
            cache_limit: int = DEFAULT_CACHE_LIMIT) -> CompiledModule | CompiledFunction | Callable:
    """Compile a module or a function, lazily: nothing happens until the first call.

    Also a decorator: ``@tensorcraft.compile`` or ``@tensorcraft.compile(backend="python")``.

    backend: "python" | "c" | "triton" (None: "c" on CPU, "triton" on CUDA; falls back to
    "python", noted in explain(), when the default one is unavailable), or your own function
    ``compile_kernel(kernel) -> callable run(*inputs, *outputs)`` with a ``source`` attribute.
    passes: pass functions or names from tensorcraft.compiler.passes.PASSES (None: all of them).
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
        return CompiledModule(model, Compiler(model, model, backend, passes, debug, cache_limit))
    if callable(model):
        return CompiledFunction(model, Compiler(model, None, backend, passes, debug, cache_limit))
    raise TypeError(f"tensorcraft.compile expects an nn.Module or a function, got {type(model).__name__}")
