"""Timings the notebooks show: the median of many repeated calls, with its spread.

One sample per call lets a busy machine (a neighbour's compile, a descheduled thread) write any
number into a cell; the median of many blocks of calls, printed with its interquartile range,
moves only when the work itself changes. Calls are timed in blocks on torch.utils.benchmark's
clock (which waits for a GPU's queued work), as its `blocked_autorange` does, but with blocks
sized to the time asked for: `blocked_autorange` makes every block 10 ms or more (so that the
timer's own overhead stays under 1e-4 of a block), and five of them cost 60-80 ms whatever the
time asked, six times a notebook's 10 ms timings while graded. The benchmarks (`benchmarks/`) time
contenders side by side with :func:`time_rounds` (blocks of calls taking turns) and summarise with
:func:`spread` or the best round.
"""
from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Callable

from torch.utils.benchmark.utils.timer import timer as clock   # perf_counter, after a GPU sync

MAX_CALLS = 1 << 30          # calls per block at most (a function that returns at once)


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
    """Time `fn(*args)`: at least `min_blocks` blocks of calls, and `min_run_time` seconds of them.

    After one warm-up call (a first call pays for lazy set-up and caches), the calls per block grow
    until a block lasts `min_run_time / min_blocks`; that block is the first sample. A call slower
    than that is timed alone, once per block. Runs with torch's current number of threads.
    """
    call = lambda: fn(*args)  # noqa: E731
    block_s = min_run_time / max(1, min_blocks)
    call()
    number, seconds = 1, time_block(call)
    while seconds * number < block_s and number < MAX_CALLS:
        grown = math.ceil(number * block_s / max(seconds * number, 1e-9))
        number = min(100 * number, max(2 * number, grown), MAX_CALLS)
        seconds = time_block(call, number)
    times = [seconds]
    while len(times) < min_blocks or sum(times) * number < min_run_time:
        times.append(time_block(call, number))
    return spread(times, number * len(times))


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
