"""Where the time of grading one submission goes: measured as it runs, handed back with its scores.

A grading worker fills a :class:`Timings` per submission (making its sandbox, copying the kernel
cache in, starting or forking the kernel, each cell, the grading-code check after each cell,
shutting the kernel down) and returns it in ``Executed.timings``; ``autograde`` adds the parent's
own steps (registering, the preflight run of each solution, saving). ``python -m benchmarks grading
--profile`` prints them, summed by :func:`phase` into the few kinds that decide a sizing: kernel
start, imports, compilation, checks, the other cells, and the grader's own work around them; and
the CPU seconds the kernel and the worker used (``kernel cpu``, ``forked kernel cpu``,
``worker cpu``), which a busy machine does not inflate as it does the wall-clock seconds.
Measuring costs two clock reads per step; it is always on.
"""
from __future__ import annotations

import contextlib
import time
from typing import Iterator

import psutil

CELL = "cell "          # a cell's entry: "cell 12 [checks]"; the others are the grader's own steps
KERNEL_CPU = "kernel cpu"           # CPU seconds, not wall-clock: of a kernel started as a child process
FORKED_CPU = "forked kernel cpu"    # of a kernel forked by a fork server (its CPU time reaches no parent's)
WORKER_CPU = "worker cpu"           # of the grading worker itself, for this submission


class Timings(dict):
    """Seconds per step, by name; a step measured twice adds up."""

    @contextlib.contextmanager
    def measure(self, step: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(step, time.perf_counter() - started)

    def add(self, step: str, seconds: float) -> None:
        self[step] = self.get(step, 0.0) + seconds


def cell_step(index: int, kind: str) -> str:
    """The name of a code cell's entry: its number (from 1) and its kind (:func:`cell_kind`)."""
    return f"{CELL}{index + 1} [{kind}]"


def cell_kind(source: str, graded: bool) -> str:
    """What a code cell is for, as far as speed goes: ``checks`` (a graded test cell), ``compile`` (it
    calls a compiler), ``imports`` (nothing but imports and settings), else ``cell``."""
    if graded:
        return "checks"
    if "compile(" in source:
        return "compile"
    lines = [line.strip() for line in source.splitlines() if line.strip() and not line.strip().startswith("#")]
    if lines and sum(line.startswith(("import ", "from ")) for line in lines) * 2 >= len(lines):
        return "imports"
    return "cell"


def phase(step: str) -> str:
    """The kind a step is summed under: a cell's kind, or the grader's step itself."""
    if step.startswith(CELL) and step.endswith("]"):
        return step[step.rindex("[") + 1:-1]
    return step


def cpu_seconds(root: int) -> float:
    """CPU seconds (user and system, with those of its children it has waited for) of the process
    ``root`` and every process under it now: a kernel's work, which load on the machine does not
    inflate as it does wall-clock time. 0.0 for a process that is gone."""
    total = 0.0
    try:
        processes = [psutil.Process(root)]
        processes += processes[0].children(recursive=True)
    except psutil.NoSuchProcess:
        return 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total
