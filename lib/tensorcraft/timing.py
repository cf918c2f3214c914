"""Timings the notebooks show: the median of many repeated calls, with its spread.

One sample per call lets a busy machine (a neighbour's compile, a descheduled thread) write any
number into a cell; the median of many blocks of calls, printed with its interquartile range,
moves only when the work itself changes. The measuring is torch.utils.benchmark's
`blocked_autorange`, the tool torch's own benchmarks use; this module only keeps the notebook's
thread setting and prints the result in one short form. The benchmarks (`benchmarks/`) time
contenders side by side with :func:`time_rounds` (blocks of calls taking turns, on torch.utils.benchmark's
clock) and summarise with :func:`spread` or the best round.
"""
from __future__ import annotations

import random
import statistics
from dataclasses import dataclass
from typing import Callable

import torch
from torch.utils import benchmark
from torch.utils.benchmark.utils.timer import timer as clock   # perf_counter, after a GPU sync


@dataclass(frozen=True)
class Timing:
    """Seconds per call: the median over blocks, and the 25th and 75th percentiles (the spread)."""

    median: float
    low: float
    high: float
    calls: int

    def __str__(self) -> str:
        scale, unit = _unit(self.median)
        return f"{self.median * scale:.3g} {unit} (IQR {self.low * scale:.3g}–{self.high * scale:.3g})"


def _unit(seconds: float) -> tuple[float, str]:
    for scale, unit in ((1e6, "µs"), (1e3, "ms")):
        if seconds * scale < 1000:
            return scale, unit
    return 1.0, "s"


def time_call(fn: Callable[..., object], *args, min_run_time: float = 0.2, min_blocks: int = 5) -> Timing:
    """Time `fn(*args)`: blocks of calls for at least `min_run_time` seconds and `min_blocks` blocks.

    Runs with torch's current number of threads (torch.utils.benchmark would otherwise use one).
    """
    timer = benchmark.Timer(stmt="fn(*args)", globals={"fn": fn, "args": args},
                            num_threads=torch.get_num_threads())
    measured = timer.blocked_autorange(min_run_time=min_run_time)
    times = list(measured.times)
    while len(times) < min_blocks:  # a slow call, or a busy machine: too few blocks for a spread
        # (one block each, without the two warm-up calls Timer.timeit adds: a slow call is paid once)
        times.append(time_block(lambda: fn(*args), measured.number_per_run))
    return spread(times, measured.number_per_run * len(times))


def spread(seconds: list[float], calls: int = 0) -> Timing:
    """The median of samples (seconds per call) with their interquartile range."""
    low, _, high = statistics.quantiles(seconds, n=4, method="inclusive") if len(seconds) > 1 else seconds * 3
    return Timing(statistics.median(seconds), low, high, calls or len(seconds))


def time_block(fn: Callable[[], object], calls: int = 1) -> float:
    """Seconds per call over `calls` calls in a row, read with torch.utils.benchmark's clock (which
    waits for a GPU's queued work first)."""
    start = clock()
    for _ in range(calls):
        fn()
    return (clock() - start) / calls


def time_rounds(fns: dict[str, Callable[[], object]], rounds: int, block_s: float = 0.0,
                seed: int = 0) -> dict[str, list[float]]:
    """Seconds per call of each of `fns`, one sample per round, timed side by side.

    Each round times one block of calls of every function, in a new order each round (whoever runs
    right after a big allocation pays for it), so that a neighbour's burst of load hits all alike.
    A block lasts about `block_s` seconds (its number of calls fixed once from one call; 0: a
    single call). Warm-up calls are the caller's.
    """
    number = {name: max(1, int(block_s / max(time_block(fn), 1e-7))) if block_s else 1 for name, fn in fns.items()}
    times: dict[str, list[float]] = {name: [] for name in fns}
    order, shuffle = list(fns), random.Random(seed).shuffle
    for _ in range(rounds):
        shuffle(order)
        for name in order:
            times[name].append(time_block(fns[name], number[name]))
    return times
