"""Dynamo without its guard-latency probe: the same graphs, guards and recompiles, for less CPU.

Each frame that torch.compile (2.13) compiles ends in ``torch._dynamo.guards.profile_guard_manager``:
it flushes the processor's caches, then times one evaluation of the new guards, for a number that
goes into the compile-event metrics (``guard_latency_us``) and nowhere else: not into a guard, a
graph, a recompile decision or ``explain``. The flush costs tens of milliseconds of CPU per compiled
frame (measured: 49 frames of notebook 07's ground truth, 2.19 CPU s with it and 1.27 s without, the
same answers). The checks whose ground truth is Dynamo run under :func:`without_guard_probe`, and
the grading fork server (``grader.fork_server.server``) switches the probe off for every kernel it forks
(:func:`skip_guard_probe`), so a graded notebook's own ``torch.compile`` cells skip it too.

A kernel whose Inductor compile finds its graph in the prefilled cache still pays, once per process,
for importing Inductor's compiler (``torch._inductor.compile_fx``, 0.7 CPU s), for hashing torch's
and Triton's source files into its cache keys (0.5 s), and for picking the processor's vector
instructions, which Inductor learns by compiling a test program per instruction set and loading each in
a new Python process (1.1 s wall, a part of every compile command and so of the key of each cached
kernel): :func:`warm_inductor`, called by the fork server where the prefilled cache holds Inductor graphs
(:func:`holds_inductor_graphs`), pays them once for every kernel it forks after. The keys are hashes of
installed files and the instruction sets the processor's, the same in every kernel.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

# The module a fork server's batch names (``fork_client.preload_for``) where its kept compiled code holds
# Inductor graphs: the server then loads and hashes Inductor before its first kernel (``fork_server.server``).
INDUCTOR = "torch._inductor.compile_fx"
# The module a batch names where a notebook of it loads Dynamo while graded (``fork_client.preload_for``): the
# server then imports Dynamo and AOTAutograd and compiles once before its first kernel (``fork_server.server``).
DYNAMO = "torch._dynamo"


def _no_probe(*args, **kwargs) -> float:
    """``profile_guard_manager``'s answer without measuring: a latency of 0 microseconds."""
    return 0.0


def skip_guard_probe() -> None:
    """For the rest of this process (and the processes it forks): no guard-latency probe."""
    import torch._dynamo.guards
    torch._dynamo.guards.profile_guard_manager = _no_probe


@contextlib.contextmanager
def without_guard_probe() -> Iterator[None]:
    """No guard-latency probe while the body runs; the probe as it was afterwards."""
    import torch._dynamo.guards
    probe = torch._dynamo.guards.profile_guard_manager
    torch._dynamo.guards.profile_guard_manager = _no_probe
    try:
        yield
    finally:
        torch._dynamo.guards.profile_guard_manager = probe


def holds_inductor_graphs(cache_dir: str | None) -> bool:
    """Whether Inductor's cache folder holds compiled graphs (a solution's run compiled with Inductor)."""
    from pathlib import Path
    graphs = Path(cache_dir) / "fxgraph" if cache_dir else None
    return graphs is not None and graphs.is_dir() and any(graphs.iterdir())


def warm_inductor(probe_processor: bool = True) -> None:
    """Import Inductor's compiler, compute its source-file keys and (``probe_processor``) pick the
    processor's vector instructions in this process (see the module's docstring)."""
    import torch._inductor.compile_fx  # noqa: F401
    from torch._inductor import codecache
    from torch._inductor.cpu_vec_isa import pick_vec_isa
    codecache.torch_key()
    codecache.triton_key()
    if probe_processor:
        pick_vec_isa()
