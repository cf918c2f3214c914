"""Timings the notebooks show: the median of many repeated calls, with its spread.

One sample per call lets a busy machine (a neighbour's compile, a descheduled thread) write any
number into a cell; the median of many blocks of calls, printed with its interquartile range,
moves only when the work itself changes. The measuring is torch.utils.benchmark's
`blocked_autorange`, the tool torch's own benchmarks use; this module only keeps the notebook's
thread setting and prints the result in one short form.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

import torch
from torch.utils import benchmark


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
        times.extend(timer.timeit(measured.number_per_run).times)
    low, _, high = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else times * 3
    return Timing(statistics.median(times), low, high, measured.number_per_run * len(times))
