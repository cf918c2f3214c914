"""`python -m benchmarks kernel_cells NN_name [--top N]`: the CPU seconds of each cell of a solution, run as a graded kernel runs it.

Where a compiler notebook's grading time goes inside the learner's kernel, cell by cell. The
solution (built from ``solutions/``, as ``python -m grader build`` builds it) runs twice in a kernel
with the grading fork server's preloads (``grader.fork_server.server``), ``NBGRADER_EXECUTION=autograde``
and a sandbox's environment (``grader.worker.sandbox``: caches in a scratch folder, its compile and
run settings), without the sandbox itself: first cold, keeping what it compiled, then in a fresh
folder that starts with a copy of it (the prefill a learner's sandbox gets), with the public truths
kept and Inductor loaded as a fork server does for the kernels it forks after the first. Each cell's
CPU seconds are the kernel's and its children's (the C compilers), read from the process tree, not
the wall clock, so that a busy machine inflates them less; the second run's are a learner's.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import nbformat
import psutil

from grader.course import REPO, SOLUTIONS
from grader.instructor.build import source_notebook
from grader.worker import fork_client
from grader.worker.sandbox import CACHE, COMPILE_SETTINGS, RUN_SETTINGS

# What the fork server loads before it forks a kernel (its own steps, run in the kernel here), with
# ``batch``: what it imports for the notebook's batch (``fork_client.preload_for``).
PRELOAD = '''
import contextlib, importlib, os
from grader.fork_server import server as _server
os.environ.setdefault("MPLBACKEND", _server.INLINE_BACKEND)
for _name in _server.PRELOADED:
    with contextlib.suppress(Exception):
        importlib.import_module(_name)
with _server._triton_for_the_interpreter():
    for _name in _server.COMPILER + _server._check_modules() + {batch!r}:
        with contextlib.suppress(Exception):
            importlib.import_module(_name)
    from grader.checks.dynamo import skip_guard_probe
    skip_guard_probe()
    _server._warm_up()
'''
# What the fork server does for the kernels it forks after the first (the truths, Inductor).
AFTER_THE_FIRST = '''
from grader.checks import dynamo as _dynamo, truths as _truths
_truths.remember_for([{name!r}])
if _dynamo.holds_inductor_graphs(os.environ.get("TORCHINDUCTOR_CACHE_DIR")):
    with _server._triton_for_the_interpreter():
        _dynamo.warm_inductor()
'''


def tree_cpu(process: psutil.Process) -> float:
    """CPU seconds of a process, its reaped children and its living descendants."""
    times = process.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in process.children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def environment(scratch: Path) -> dict[str, str]:
    cache = scratch / CACHE
    env = dict(os.environ, HOME=str(scratch), TMPDIR=str(scratch), XDG_CACHE_HOME=str(cache), MPLCONFIGDIR=f"{cache}/matplotlib",
               TORCHINDUCTOR_CACHE_DIR=f"{cache}/torchinductor", TRITON_CACHE_DIR=f"{cache}/triton",
               TENSORCRAFT_CACHE_DIR=f"{cache}/tensorcraft", NBGRADER_EXECUTION="autograde", PYTHONPATH=str(REPO),
               **COMPILE_SETTINGS)
    for name, value in RUN_SETTINGS.items():
        env.setdefault(name, value)
    return env


def run(notebook: nbformat.NotebookNode, scratch: Path, setup: str) -> tuple[float, list[tuple[float, float, int, str, str]]]:
    """Run ``setup``, then every code cell, in a kernel working in ``scratch``: the setup's CPU seconds
    and, per cell, (CPU s, wall s, index, grade_id, error)."""
    from jupyter_client import KernelManager
    # IPC sockets in the scratch folder, as a graded kernel's: no warning about plain TCP on every start
    manager = KernelManager(kernel_name="python3", transport="ipc", ip=str(scratch / "kernel"))
    manager.start_kernel(cwd=str(scratch), env=environment(scratch))
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(120)
        kernel = psutil.Process(manager.provisioner.process.pid)

        def execute(source: str) -> tuple[float, float, str]:
            cpu, wall = tree_cpu(kernel), time.perf_counter()
            request, error = client.execute(source, store_history=False), ""
            while True:
                message = client.get_iopub_msg(timeout=600)
                if message["parent_header"].get("msg_id") != request:
                    continue
                if message["msg_type"] == "error":
                    error = message["content"]["ename"]
                if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                    return tree_cpu(kernel) - cpu, time.perf_counter() - wall, error

        setup_cpu, _, error = execute(setup)
        if error:
            raise RuntimeError(f"the fork server's preloads failed in the kernel: {error}")
        cells = []
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type == "code":
                cpu, wall, error = execute(cell.source)
                cells.append((cpu, wall, index, cell.metadata.get("nbgrader", {}).get("grade_id", ""), error))
        return setup_cpu, cells
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks kernel_cells", description=__doc__.splitlines()[0])
    parser.add_argument("assignment", metavar="NN_name")
    parser.add_argument("--top", type=int, default=12, help="how many of the costliest cells to list")
    args = parser.parse_args(argv)
    notebook = source_notebook(SOLUTIONS / f"{args.assignment}.py")
    with tempfile.TemporaryDirectory(prefix="kernel-cells-") as folder:
        cold, learner = Path(folder) / "cold", Path(folder) / "learner"
        cold.mkdir()
        saved = Path(folder) / f"{args.assignment}.ipynb"
        nbformat.write(notebook, saved)
        setup = PRELOAD.format(batch=fork_client.preload_for([saved]))   # matplotlib, nbformat, nbgrader
        run(notebook, cold, setup)
        if (cold / CACHE).is_dir():
            shutil.copytree(cold / CACHE, learner / CACHE, symlinks=True)
        learner.mkdir(exist_ok=True)
        preload, cells = run(notebook, learner, setup + AFTER_THE_FIRST.format(name=args.assignment))
    print(f"{args.assignment}, a learner's kernel (prefilled): cells {sum(c[0] for c in cells):.2f} CPU s "
          f"({sum(c[1] for c in cells):.1f} s wall); the fork server's share, paid once per worker: {preload:.2f} CPU s")
    for cpu, wall, index, grade_id, error in sorted(cells, reverse=True)[:args.top]:
        first = notebook.cells[index].source.strip().splitlines()[0][:60] if notebook.cells[index].source.strip() else ""
        print(f"  {cpu:6.2f} CPU s {wall:6.2f} s  cell {index:3d} {grade_id:<26} {first}" + (f"  [{error}]" if error else ""))
    errors = [c for c in cells if c[4]]
    return 1 if errors else 0
