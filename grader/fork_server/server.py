"""Kernels forked from a warm process inside the sandbox (a fork server, or "zygote").

Starting a kernel costs more than most notebooks' cells: a Python interpreter, ipykernel and
IPython, then torch, numpy, matplotlib and nbformat, about 3 s of CPU, again for every learner.
A fork server pays it once per worker. It runs *inside* the worker's sandbox (bubblewrap, PID 1 of
its namespace, with the sandbox's uid, limits and environment), imports all that, and then forks
one kernel per submission on request: the kernel starts in milliseconds with everything loaded,
and it is confined exactly as a kernel started on its own would be.

Learners who share a server one after another must not reach each other. So:

- The server is never reachable from a kernel: it is not dumpable (no ptrace, no /proc/1/mem, no
  reading its descriptors), and as PID 1 of the namespace it ignores every signal sent from inside
  but the ones it handles, which are none. A kernel's copy of its memory is its own (copy on write).
- Between two kernels the worker kills every process in the sandbox but the server
  (:meth:`ForkServer.clear`: orphans are re-parented to PID 1, so none escapes the walk), empties the
  scratch folder and refills it for the next learner; the server empties ``/tmp`` before each fork.
- The environment (cache folders, seeds, ``NBGRADER_EXECUTION``) is the kernel's own and fixed when
  the server starts; a sandbox with any other setting gets a server of its own (the old one ends).

Where a server cannot be started (an old bubblewrap, no pidfd), kernels start one by one as before,
and ``TENSORCRAFT_FORK_KERNELS=off`` asks for that. What still persists between two kernels of a
server: System V IPC objects of its IPC namespace, which no grading code looks at. What differs
for a notebook: the preloaded modules are imported before its first cell, so an environment
variable a library reads when it is loaded (``OMP_NUM_THREADS`` for torch) is read already, as in
a notebook that imported torch in an earlier cell; ``torch.set_num_threads`` works as ever.

The compiler notebooks (07-11) spend most of a fresh kernel's time importing ``torch._dynamo`` and
what its first compile loads (AOTAutograd, sympy, networkx...): seconds per learner, on every
learner, and so does notebook 00 (its checks' operation watch loads much of the same). The server
pays it once: it imports them and the course's checks, then compiles a tiny
function with the ``eager`` and ``aot_eager`` backends and resets Dynamo (:func:`_warm_up`), so
that a kernel finds Dynamo as a notebook finds it after its first ``torch.compile``, with empty
caches. It also switches off Dynamo's guard-latency probe, a cache flush and a timing after every
compiled frame for a metric nothing reads (``grader.checks.dynamo``): tens of milliseconds of CPU
per frame, in every graded notebook that compiles. Dynamo imports Triton, whose library functions are made for its CPU interpreter only if
``TRITON_INTERPRET`` is set when it is imported; notebook 10 sets it in its first cell where there
is no GPU, too late for a server's Triton. So where there is no GPU the server imports Triton with
it set, then removes it from its environment again: a kernel's environment is as before, and a
notebook that sets the variable gets a working interpreter (Triton reads it at each kernel
definition). With a GPU, nothing is set. Every kernel reseeds torch's and numpy's random generators
(a fresh interpreter draws a random seed for torch; a fork would share the server's).

Run as ``python -m grader.kernel_forks``, this module is the server; the rest is the worker's side,
which :class:`grader.provisioner.GradingProvisioner` asks for a kernel.
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib
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

from .sandbox import Sandbox, descendants, kill_until_gone, ns_pid

SWITCH = "TENSORCRAFT_FORK_KERNELS"     # "off": one sandbox per kernel, no fork server
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"    # what ipykernel sets for matplotlib
PRELOADED = ("ipykernel.kernelapp", "ipykernel.ipkernel", "matplotlib_inline.backend_inline", "torch", "numpy",
             "einops", "matplotlib.pyplot", "nbformat", "nbgrader.utils", "tensorcraft", "grader.checks")
COMPILER = ("torch._dynamo", "torch.fx", "torch._functorch.aot_autograd")  # after _triton_for_the_interpreter
TRITON_INTERPRET = "TRITON_INTERPRET"
START_TIMEOUT = 120.0       # seconds for the server's imports, on a loaded machine
REPLY_TIMEOUT = 30.0
PR_SET_DUMPABLE = 4


# ------------------------------------------------------------------ inside the sandbox: the server

def serve() -> None:
    """Import what kernels use (Dynamo and the checks too, warmed up), say ``ready``, then fork a
    kernel for each request read on stdin (one JSON line: its command line) and answer with its pid.
    Ends when stdin closes."""
    for name in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(name, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)      # the system reaps the kernels: no zombies
    _set_dumpable(False)
    if sys.path and Path(sys.path[0] or ".").resolve() == Path.cwd():
        del sys.path[0]                                 # as ipykernel_launcher does; the kernel adds "" back
    os.environ.setdefault("MPLBACKEND", INLINE_BACKEND)
    path = list(sys.path)
    for module in PRELOADED:
        with contextlib.suppress(Exception):
            importlib.import_module(module)
    with _triton_for_the_interpreter():
        for module in COMPILER + _check_modules():
            with contextlib.suppress(Exception):
                importlib.import_module(module)
        with contextlib.suppress(Exception):
            from .checks.dynamo import skip_guard_probe
            skip_guard_probe()              # every kernel's compiles: no guard-latency probe (decides nothing)
        with contextlib.suppress(Exception):
            _warm_up()
    sys.path[:] = path                      # some add to it (setuptools' vendored packages)
    control_in, control_out = sys.stdin.buffer, sys.stdout.buffer
    _answer(control_out, {"ready": True})
    for line in control_in:
        argv = json.loads(line)["argv"]
        if argv[1:3] != ["-m", "ipykernel_launcher"]:
            _answer(control_out, {"error": f"not a kernel command: {argv[:3]}"})
            continue
        with contextlib.suppress(OSError):      # the scratch folder may be there, and the course code
            empty("/tmp", keep=mount_points())
        pid = os.fork()
        if pid == 0:
            _become_kernel(argv[3:])
        _answer(control_out, {"pid": pid})
        with contextlib.suppress(Exception):    # while that kernel runs: for the kernels forked after it
            _remember_truths()


def _remember_truths() -> None:
    """The public ground truths that the checks of the notebook handed in (in the scratch folder,
    the kernel's working folder) compute once per worker: computed here, once per notebook, while
    the first kernel runs (it computes its own), so that every kernel forked after inherits them
    (``grader.checks.truths``)."""
    from grader.checks import truths
    truths.remember_for(sorted(p.stem for p in Path.cwd().glob("[0-9][0-9]_*.ipynb")))


def _check_modules() -> tuple[str, ...]:
    """The course's check modules (``grader.checks.nbNN_name``), which notebooks import in their first cell."""
    import pkgutil

    import grader.checks
    return tuple(f"grader.checks.{m.name}" for m in pkgutil.iter_modules(grader.checks.__path__)
                 if re.fullmatch(r"nb\d\d_\w+", m.name))


@contextlib.contextmanager
def _triton_for_the_interpreter() -> Iterator[None]:
    """Where there is no GPU (and the variable is not set already): ``TRITON_INTERPRET=1`` while
    the body imports Triton, removed afterwards (see the module's docstring)."""
    import torch
    setting = TRITON_INTERPRET not in os.environ and not torch.cuda.is_available()
    if setting:
        os.environ[TRITON_INTERPRET] = "1"
    try:
        yield
    finally:
        if setting:
            del os.environ[TRITON_INTERPRET]


def _warm_up() -> None:
    """Compile a tiny function as the notebooks do (``eager``, ``aot_eager``), then reset Dynamo: what a
    first compile loads is loaded, and no kernel inherits a compiled function, a counter or a random draw."""
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    state = torch.random.get_rng_state()
    try:
        for backend in ("eager", "aot_eager"):
            torch.compile(lambda x: torch.relu(x) * 2 + 1, backend=backend)(torch.ones(4))
            torch._dynamo.reset()
    finally:
        torch._dynamo.reset()
        counters.clear()
        torch.random.set_rng_state(state)


def _answer(stream, message: dict) -> None:
    stream.write(json.dumps(message).encode() + b"\n")
    stream.flush()


def _set_dumpable(dumpable: bool) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, int(dumpable), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE)")


def empty(folder: str | Path, keep: tuple[Path, ...] = ()) -> None:
    """Remove everything in ``folder`` (not the folder: it may be a mount point in a sandbox), whatever
    permissions a kernel set on what it left there, except the paths in ``keep`` (folders somewhere
    inside, e.g. the mount points in the sandbox's /tmp) and the folders that lead to them.
    Raises ``OSError`` if something stays. Only for a folder no process writes to any more: a
    symbolic link is never followed, but a link made while this runs could be."""
    _unlock(folder)
    def kept(path: Path) -> bool:
        return any(path == k or path in k.parents for k in keep)
    for entry in os.scandir(folder):
        path = Path(entry.path)
        if kept(path):
            if path not in keep:
                empty(path, keep)
        elif entry.is_dir(follow_symlinks=False):
            shutil.rmtree(path)
        else:
            path.unlink()
    if any(not kept(Path(e.path)) for e in os.scandir(folder)):
        raise OSError(f"{folder} could not be emptied")


def mount_points() -> tuple[Path, ...]:
    """Where something is mounted in this process's view (/proc/self/mountinfo, escapes decoded)."""
    with open("/proc/self/mountinfo") as table:
        return tuple(Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[4])) for line in table)


def _unlock(folder: str | Path) -> None:
    """Make ``folder`` and every folder under it listable and writable by us (its owner, or root)."""
    with contextlib.suppress(OSError):
        if os.stat(folder).st_uid == os.getuid():
            os.chmod(folder, os.stat(folder).st_mode | 0o700)
    for parent, folders, _ in os.walk(folder):          # top-down: unlocked before it is entered
        for name in folders:
            path = os.path.join(parent, name)
            if not os.path.islink(path):
                with contextlib.suppress(OSError):
                    os.chmod(path, 0o700)


def _become_kernel(arguments: list[str]) -> None:
    """In the forked child: drop the server's channels and signal settings, then run ipykernel."""
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for name in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
            signal.signal(name, signal.SIG_DFL)
        _set_dumpable(True)             # the kernel's own processes may inspect each other again
        if "numpy.random" in sys.modules:
            sys.modules["numpy"].random.seed()     # not the server's random state (Python's reseeds itself)
        if "torch" in sys.modules:
            sys.modules["torch"].seed()            # a random seed, as a fresh interpreter's torch draws
        import ipykernel
        sys.argv = [str(Path(ipykernel.__file__).parent.parent / "ipykernel_launcher.py"), *arguments]
        from ipykernel.kernelapp import launch_new_instance
        launch_new_instance()
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        os._exit(code)


# ------------------------------------------------------------------ the worker's side

class ForkServer:
    """A server running in ``sandbox`` (started here; raises ``OSError`` if it does not come up)."""

    def __init__(self, sandbox: Sandbox):
        self.sandbox = sandbox
        self.key = key(sandbox)
        sandbox.end()                   # nothing left under its uid by a grader that was killed
        self.process = subprocess.Popen(sandbox.wrap([sys.executable, "-m", "grader.kernel_forks"], as_pid_1=True),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        cwd=sandbox.scratch)
        try:
            if not self._reply(START_TIMEOUT).get("ready"):
                raise OSError("the fork server did not start")
            self.pid = next(p for p in descendants(self.process.pid) if ns_pid(p) == 1)
        except (OSError, StopIteration, ValueError) as error:
            self.close()
            raise OSError(f"the fork server did not start: {error}") from error

    def fork(self, argv: list[str]) -> int:
        """A new kernel running ``argv`` (an ipykernel command line), forked from the server: its pid
        here (not our child: ``grader.provisioner`` watches it through a pidfd)."""
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
        _end(self.process, self.sandbox)

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


def _end(process: subprocess.Popen, sandbox: Sandbox | None = None) -> None:
    """Kill a server's process (and so its namespace); with ``sandbox``, whatever still runs under its uid."""
    with contextlib.suppress(OSError):
        process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout):
        with contextlib.suppress(OSError):
            stream.close()
    if sandbox is not None:
        sandbox.end()


def key(sandbox: Sandbox) -> tuple:
    """What a server's kernels inherit from it: what it sees and may write, its uid, limits and environment."""
    return (sandbox.scratch, tuple(sandbox.hidden), tuple(sandbox.readable), sandbox.uid, sandbox.limits,
            tuple(sorted(sandbox.environment().items())))


class _Station(threading.local):
    """A worker thread's fork server and the folder its sandbox's scratch lives in (a Dask worker
    may grade in several threads: each has its own, since a server runs one kernel at a time)."""
    server: ForkServer | None = None
    folder: Path | None = None


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
    if current is not None and current.key == key(sandbox):
        return current
    stop()
    if not enabled() or _refused:
        return None
    try:
        _station.server = ForkServer(sandbox)
    except OSError as error:
        _refused.append(str(error))
        print(f"tensorcraft: kernels start one by one: {error}", file=sys.stderr)
        return None
    # at the process's end, or once the server is dropped (not holding it: a long-lived worker starts many)
    # (its process only: by then the uid may run the kernels of a newer server)
    Finalize(_station.server, _end, (_station.server.process,), exitpriority=2)
    return _station.server


@contextlib.contextmanager
def sandbox_for_a_learner(hidden: list[Path], uid: int | None) -> Iterator[Sandbox]:
    """This thread's sandbox for forked kernels, for one learner: emptied of the learner before
    (what its kernel left running killed, its scratch folder emptied) on entry, and again on exit."""
    sandbox = Sandbox(scratch(), hidden=hidden, uid=uid)
    try:
        _reset(sandbox)
    except OSError:                        # given up: a new folder (and server) instead
        sandbox = Sandbox(scratch(), hidden=hidden, uid=uid)
    try:
        yield sandbox
    finally:
        with contextlib.suppress(OSError):  # given up, so the next learner gets new ones
            _reset(sandbox)


def _reset(sandbox: Sandbox) -> None:
    """Kill what the last kernel left running and empty the scratch folder. Where either fails,
    the server and the folder are given up: the next learner gets new ones, never a used one."""
    try:
        if (server := running()) is not None:
            server.clear()
        else:                   # its kernel started on its own (no server): wait until its uid runs nothing
            sandbox.end()
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


if __name__ == "__main__":
    serve()
