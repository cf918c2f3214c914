"""The worker's side of the fork server (:mod:`grader.fork_server.server`): a thread's server and sandbox.

A grading worker keeps, per thread, one fork server running in one sandbox (:class:`ForkServer`,
started as ``python -m grader.fork_server.server`` inside bubblewrap) and one scratch folder, and
hands the sandbox to one learner after another (:func:`sandbox_for_a_learner`). A kernel's own
processes are ended by the provisioner's clean-up (:meth:`grader.worker.provisioner.GradingProvisioner.cleanup`:
the server's other children, or the sandbox uid's processes); between two learners this module only
empties the scratch folder, and gives the server and the folder up where that fails.
Where a server cannot be started (an old bubblewrap, no pidfd), kernels start one by one, and
``TENSORCRAFT_FORK_KERNELS=off`` asks for that.

A server imports what every notebook's kernel uses; the modules of :data:`ON_DEMAND` only for a
batch whose notebooks import their package (:func:`preload_for`, handed to the server's command
line): nbformat and nbgrader (1.2 CPU s a server), which only notebook 00 imports, for its demo of
nbgrader's rule; matplotlib with its inline backend (0.6 CPU s), which every notebook but 00 imports;
and Inductor where the kept compiled code of a notebook of the batch holds Inductor graphs (notebook 10
compiles with it while graded): the server loads it and hashes its keys before its first kernel
(2 CPU s a server, else paid by the first kernel of each worker and again by the server after it).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.util import Finalize
from pathlib import Path
from typing import Iterator

from ..files import empty
from .integrity_watch import check_module
from .sandbox import Sandbox, descendants, kill_until_gone, ns_pid

SWITCH = "TENSORCRAFT_FORK_KERNELS"     # "off": one sandbox per kernel, no fork server
SERVER = "grader.fork_server.server"    # the module run as the server
ON_DEMAND = {"nbformat": ("nbformat",), "nbgrader": ("nbgrader.utils",),   # a package a notebook imports ->
             "matplotlib": ("matplotlib_inline.backend_inline", "matplotlib.pyplot")}  # what its server imports
# Notebooks whose graded run never loads Dynamo (their solutions' do not: tests/grader/test_kernel_forks.py). Every
# other notebook loads it, most through a torch function that imports it on its first call
# (``torch._disable_dynamo``: the checks' operation watch, torch.einsum under a mode) if not by torch.compile;
# a batch of these only gets servers without it (1.7 CPU s a server: Dynamo, AOTAutograd, a first compile).
WITHOUT_DYNAMO = frozenset({"01_einsum_notation", "02_einsum_parsing", "05_rearrange"})
START_TIMEOUT = 120.0       # seconds for the server's imports, on a loaded machine
REPLY_TIMEOUT = 30.0


class ForkServer:
    """A server running in ``sandbox`` (started here; raises ``OSError`` if it does not come up)."""

    def __init__(self, sandbox: Sandbox, preload: tuple[str, ...] = ()):
        self.sandbox = sandbox
        self.key = key(sandbox, preload)
        sandbox.end()                   # nothing left under its uid by a grader that was killed
        self.process = subprocess.Popen(sandbox.wrap([sys.executable, "-m", SERVER, *preload], as_pid_1=True),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        cwd=sandbox.scratch)
        try:
            if not self._reply(START_TIMEOUT).get("ready"):
                raise OSError("the fork server did not start")
            self.pid = next(p for p in descendants(self.process.pid) if ns_pid(p) == 1)
            pidfd = os.pidfd_open(self.pid)
        except (OSError, StopIteration, ValueError) as error:
            _end(self.process, sandbox=sandbox)
            raise OSError(f"the fork server did not start: {error}") from error
        # at close(), at the process's end, or once the server is dropped (not holding it: a long-lived
        # worker starts many); its namespace only: by then the uid may run the kernels of a newer server
        self._ended = Finalize(self, _end, (self.process, pidfd), exitpriority=2)

    def fork(self, argv: list[str]) -> int:
        """A new kernel running ``argv`` (an ipykernel command line), forked from the server: its pid
        here (not our child: ``grader.worker.provisioner`` watches it through a pidfd)."""
        self.process.stdin.write(json.dumps({"argv": argv}).encode() + b"\n")
        self.process.stdin.flush()
        reply = self._reply(REPLY_TIMEOUT)
        if "pid" not in reply:
            raise OSError(reply.get("error", "the fork server did not answer"))
        inner = reply["pid"]
        host = next((p for p in descendants(self.pid) if ns_pid(p) == inner), None)
        if host is None:
            raise OSError(f"the forked kernel {inner} ended before it started")
        return host

    def clear(self, within: float = 10.0) -> None:
        """Kill every process in the sandbox but the server (a kernel and whatever it started)."""
        if kill_until_gone(lambda: descendants(self.pid), within):
            raise OSError(f"processes of the last kernel outlived {within} s of SIGKILL")

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        self._ended()
        self.sandbox.end()

    def _reply(self, timeout: float) -> dict:
        line, deadline, fd = b"", time.monotonic() + timeout, self.process.stdout.fileno()
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise OSError(f"the fork server gave no answer within {timeout:.0f} s")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise OSError("the fork server ended")
            line += chunk
        return json.loads(line)


def _end(process: subprocess.Popen, pidfd: int | None = None, within: float = 10.0,
         sandbox: Sandbox | None = None) -> None:
    """Kill a server (``pidfd``: the namespace's PID 1, so every process in it) and bubblewrap's
    ``process``, and return once the server has ended; with ``sandbox``, whatever still runs under
    its uid. Killing bubblewrap alone does not end the server (its parent-death signal is dropped
    when it takes the sandbox's uid): it ended 1.7 s later, on its own, after the scratch folder
    holding it was gone."""
    if pidfd is not None:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    with contextlib.suppress(OSError):
        process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout):
        with contextlib.suppress(OSError):
            stream.close()
    if pidfd is not None:
        select.select([pidfd], [], [], within)     # readable once it ended, and its namespace with it
        os.close(pidfd)
    if sandbox is not None:
        sandbox.end()


def key(sandbox: Sandbox, preload: tuple[str, ...] = ()) -> tuple:
    """What a server's kernels inherit from it: what it sees and may write, its uid, limits and
    environment, and the modules it imported for its batch's notebooks."""
    return (sandbox.scratch, tuple(sandbox.masked), tuple(sandbox.readable), sandbox.uid, sandbox.limits,
            tuple(sorted(sandbox.environment().items())), preload)


def preload_for(notebooks: list[Path], compiled: list[Path] = ()) -> tuple[str, ...]:
    """The modules of :data:`ON_DEMAND` whose package a code cell of one of ``notebooks`` imports
    (the course's own notebooks: an instructor's, never a learner's, decides what a server loads),
    Dynamo unless every notebook is one of :data:`WITHOUT_DYNAMO`, each notebook's check module (the
    server computes their shared ground truths before its first kernel: ``grader.checks.truths``), and
    Inductor where one of the kept caches ``compiled`` (``compile_cache.cache_path``) holds its graphs."""
    import nbformat

    from ..checks.dynamo import DYNAMO, INDUCTOR, holds_inductor_graphs
    sources = "\n".join(cell.source for notebook in notebooks
                        for cell in nbformat.read(notebook, as_version=4).cells if cell.cell_type == "code")
    dynamo = () if all(Path(notebook).stem in WITHOUT_DYNAMO for notebook in notebooks) else (DYNAMO,)
    inductor = (INDUCTOR,) if any(holds_inductor_graphs(str(kept / "torchinductor")) for kept in compiled) else ()
    checks = tuple(name for name in (check_module(Path(notebook).stem) for notebook in notebooks) if name)
    return tuple(module for package, modules in ON_DEMAND.items()
                 if re.search(rf"^\s*(import|from)\s+{re.escape(package)}\b", sources, re.MULTILINE)
                 for module in modules) + dynamo + checks + inductor


class _Station(threading.local):
    """A worker thread's fork server and the folder its sandbox's scratch lives in (a Dask worker
    may grade in several threads: each has its own, since a server runs one kernel at a time)."""
    server: ForkServer | None = None
    folder: Path | None = None
    preload: tuple[str, ...] = ()       # what the batch being graded asks its server to import (ON_DEMAND)


_station = _Station()
_refused: list[str] = []                  # why a server could not be started here (then never retried)


def enabled() -> bool:
    return os.environ.get(SWITCH, "on").lower() not in ("off", "0", "no", "false") and hasattr(os, "pidfd_open")


def scratch() -> Path:
    """This thread's scratch folder for forked kernels: made once, kept for every learner after."""
    if _station.folder is None:
        folder = Path(tempfile.mkdtemp(prefix="tensorcraft-sandbox-"))
        folder.chmod(0o711)     # the sandbox's uid may pass through to its scratch folder, not list it
        _station.folder = folder
        # multiprocessing's workers end without running atexit handlers, but with these finalizers
        Finalize(None, shutil.rmtree, (folder,), {"ignore_errors": True}, exitpriority=1)
    return _station.folder / "scratch"


def server_for(sandbox: Sandbox) -> ForkServer | None:
    """The thread's running server for ``sandbox``'s settings, started if need be; None when
    servers are off or cannot be had here (the caller starts its kernel on its own)."""
    current = running()
    if current is not None and current.key == key(sandbox, _station.preload):
        return current
    stop()
    if not enabled() or _refused:
        return None
    try:
        _station.server = ForkServer(sandbox, _station.preload)
    except OSError as error:
        _refused.append(str(error))
        print(f"tensorcraft: kernels start one by one: {error}", file=sys.stderr)
        return None
    return _station.server


@contextlib.contextmanager
def sandbox_for_a_learner(masked: list[Path], uid: int | None, preload: tuple[str, ...] = ()) -> Iterator[Sandbox]:
    """This thread's sandbox for forked kernels, for one learner: its scratch folder emptied of the
    learner before on entry, and again on exit (what a kernel left running, the provisioner ends).
    ``preload``: the modules of :data:`ON_DEMAND` the batch's server imports (:func:`preload_for`)."""
    _station.preload = tuple(preload)
    sandbox = Sandbox(scratch(), masked=masked, uid=uid)
    try:
        _reset(sandbox)
    except OSError:                        # given up: a new folder (and server) instead
        sandbox = Sandbox(scratch(), masked=masked, uid=uid)
    try:
        yield sandbox
    finally:
        with contextlib.suppress(OSError):  # given up, so the next learner gets new ones
            _reset(sandbox)


def _reset(sandbox: Sandbox) -> None:
    """Empty the scratch folder of the last learner (their kernel's processes were ended by the
    provisioner's clean-up). Where that fails, the server and the folder are given up: the next
    learner gets new ones, never a used one."""
    try:
        if sandbox.scratch.exists():
            empty(sandbox.scratch)
    except OSError:
        stop()
        if _station.folder is not None:
            shutil.rmtree(_station.folder, ignore_errors=True)
            _station.folder = None
        raise


def running() -> ForkServer | None:
    """This thread's fork server, if one runs."""
    current = _station.server
    return current if current is not None and current.alive() else None


def stop() -> None:
    """End the thread's server, if one runs."""
    current, _station.server = _station.server, None
    if current is not None:
        current.close()
