"""Kernels forked from a warm process inside the sandbox (a fork server, or "zygote").

Starting a kernel costs more than most notebooks' cells: a Python interpreter, ipykernel and
IPython, then torch, numpy, matplotlib (nbformat and nbgrader instead for notebook 00), about 3 s of
CPU, again for every learner.
A fork server pays it once per worker. It runs *inside* the worker's sandbox (bubblewrap, PID 1 of
its namespace, with the sandbox's uid, limits and environment), imports all that, and then forks
one kernel per submission on request: the kernel starts in milliseconds with everything loaded,
and it is confined exactly as a kernel started on its own would be.

Learners who share a server one after another must not reach each other. So:

- The server is never reachable from a kernel: it is not dumpable (no ptrace, no /proc/1/mem, no
  reading its descriptors), and as PID 1 of the namespace it ignores every signal sent from inside
  but the ones it handles, which are none. A kernel's copy of its memory is its own (copy on write).
- When a kernel ends, the worker's provisioner kills every process in the sandbox but the server
  (:meth:`grader.worker.fork_client.ForkServer.clear`: orphans are re-parented to PID 1, so none
  escapes the walk); the worker then empties the scratch folder and refills it for the next learner;
  the server empties ``/tmp`` before each fork.
- The environment (cache folders, seeds, ``NBGRADER_EXECUTION``) is the kernel's own and fixed when
  the server starts; a sandbox with any other setting gets a server of its own (the old one ends).

Where a server cannot be started (an old bubblewrap, no pidfd), kernels start one by one as before,
and ``TENSORCRAFT_FORK_KERNELS=off`` (``grader.worker.fork_client.SWITCH``) asks for that. What still persists between two kernels of a
server: System V IPC objects of its IPC namespace, which no grading code looks at. What differs
for a notebook: the preloaded modules are imported before its first cell, so an environment
variable a library reads when it is loaded (``OMP_NUM_THREADS`` for torch) is read already, as in
a notebook that imported torch in an earlier cell; ``torch.set_num_threads`` works as ever.

The compiler notebooks (07-11) spend most of a fresh kernel's time importing ``torch._dynamo`` and
what its first compile loads (AOTAutograd, sympy, networkx...): seconds per learner, on every
learner, and so do most others (a torch function wrapped by ``torch._disable_dynamo`` imports it on
its first call: the checks' operation watch, torch.einsum under a mode). Where the batch names
``torch._dynamo`` (all but a batch of notebooks that never load it: ``fork_client.WITHOUT_DYNAMO``), the server
pays it once: it imports them and the course's checks, then compiles a tiny
function with the ``eager`` and ``aot_eager`` backends and resets Dynamo (:func:`_warm_up`), so
that a kernel finds Dynamo as a notebook finds it after its first ``torch.compile``, with empty
caches. It also switches off Dynamo's guard-latency probe, a cache flush and a timing after every
compiled frame for a metric nothing reads (``grader.checks.dynamo``): tens of milliseconds of CPU
per frame, in every graded notebook that compiles. Where a kernel's prefilled compiled code holds
Inductor graphs (notebook 10), the server then loads Inductor's compiler and computes its cache keys
once, for the kernels it forks after (:func:`_warm_inductor`; 1.2 CPU s each).
Dynamo imports Triton, whose library functions are made for its CPU interpreter only if ``TRITON_INTERPRET``
is set when it is imported; notebook 10 sets it in its first cell where there
is no GPU, too late for a server's Triton. So where there is no GPU the server imports Triton with
it set, then removes it from its environment again: a kernel's environment is as before, and a
notebook that sets the variable gets a working interpreter (Triton reads it at each kernel
definition). With a GPU, nothing is set. Every kernel reseeds torch's and numpy's random generators
(a fresh interpreter draws a random seed for torch; a fork would share the server's).

Run as ``python -m grader.fork_server.server [MODULE ...]`` (the MODULEs: what the batch's notebooks
import besides, ``grader.worker.fork_client.ON_DEMAND``; by :class:`grader.worker.fork_client.ForkServer`, inside
the worker's sandbox), this module is the server; the worker's side, which
:class:`grader.worker.provisioner.GradingProvisioner` asks for a kernel, is :mod:`grader.worker.fork_client`.
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Iterator

from ..checks.dynamo import DYNAMO, INDUCTOR
from ..files import empty

INLINE_BACKEND = "module://matplotlib_inline.backend_inline"    # what ipykernel sets for matplotlib
# Not ipykernel's debugger (debugpy), which each kernel imports while starting (0.1 CPU s): imported here
# instead, it made the first check cell of every kernel forked after 0.25 s slower (measured on notebook 03).
PRELOADED = ("ipykernel.kernelapp", "ipykernel.ipkernel", "torch", "numpy", "einops", "tensorcraft", "grader.checks")
MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")   # a module named on the command line
COMPILER = ("torch._dynamo", "torch.fx", "torch._functorch.aot_autograd")  # after _triton_for_the_interpreter
TRITON_INTERPRET = "TRITON_INTERPRET"
CHECKS = "grader.checks.nb"     # a batch's check module, grader.checks.nb07_graph_capture: its truths at start
PR_SET_DUMPABLE = 4
_inductor_warm = False      # _warm_inductor has run


def serve(batch: list[str]) -> None:
    """Import what kernels use (Dynamo and the checks too, warmed up) and the modules ``batch`` names
    (what the notebooks of the batch import besides: ``grader.worker.fork_client.ON_DEMAND``), say
    ``ready``, then fork a kernel for each request read on stdin (one JSON line: its command line)
    and answer with its pid. Ends when stdin closes."""
    for name in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(name, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)      # the system reaps the kernels: no zombies
    _set_dumpable(False)
    if sys.path and Path(sys.path[0] or ".").resolve() == Path.cwd():
        del sys.path[0]                                 # as ipykernel_launcher does; the kernel adds "" back
    os.environ.setdefault("MPLBACKEND", INLINE_BACKEND)
    path = list(sys.path)
    for module in PRELOADED + tuple(m for m in batch if MODULE_NAME.fullmatch(m) and m not in (DYNAMO, INDUCTOR)
                                    and not m.startswith(CHECKS)):
        with contextlib.suppress(Exception):
            importlib.import_module(module)
    with _triton_for_the_interpreter():
        named = tuple(m for m in batch if m.startswith(CHECKS) and MODULE_NAME.fullmatch(m))
        for module in (COMPILER if DYNAMO in batch else ()) + (named or _check_modules()):  # the batch's, else all
            with contextlib.suppress(Exception):
                importlib.import_module(module)
        if DYNAMO in batch:                 # a notebook of the batch loads Dynamo while graded
            with contextlib.suppress(Exception):
                from ..checks.dynamo import skip_guard_probe
                skip_guard_probe()          # every kernel's compiles: no guard-latency probe (decides nothing)
            with contextlib.suppress(Exception):
                _warm_up()
        with contextlib.suppress(Exception):    # the batch's notebooks': no kernel computes its own
            _remember_truths([m.removeprefix(CHECKS) for m in named])
        if INDUCTOR in batch:               # a notebook of the batch compiles with Inductor while graded
            with contextlib.suppress(Exception):
                _warm_inductor(at_start=True)
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
        with contextlib.suppress(Exception):
            _warm_inductor()


def _remember_truths(notebooks: list[str] | None = None) -> None:
    """The public ground truths that the checks of ``notebooks`` compute once per worker, computed here
    once per notebook so that every kernel forked after inherits them (``grader.checks.truths``): at
    start for the notebooks the batch names (``grader.checks.nbNN_name``: its check modules), and after
    each fork for the notebook handed in (in the scratch folder, the kernel's working folder) if it
    was not named, while that kernel runs (it computes its own)."""
    from grader.checks import truths
    truths.remember_for(sorted(p.stem for p in Path.cwd().glob("[0-9][0-9]_*.ipynb")) if notebooks is None
                        else notebooks)


def _warm_inductor(at_start: bool = False) -> None:
    """Once, where the prefilled compiled code holds Inductor graphs (the notebook's solution compiles
    with Inductor while graded): what each kernel's first Inductor compile would load, hash and probe
    again, done here (``grader.checks.dynamo.warm_inductor``). ``at_start``, where the batch's kept
    code holds Inductor graphs: the loading and hashing only, so that the first kernel finds them
    done too; the processor's probe waits for the prefilled cache, which holds its compiled test
    programs (at start it would compile them: 12 s on two cores)."""
    global _inductor_warm
    from grader.checks import dynamo
    if _inductor_warm:
        return
    if at_start:        # the scratch folder is empty yet: no processor probe, which would compile its test programs
        with _triton_for_the_interpreter():
            dynamo.warm_inductor(probe_processor=False)
        return
    if not dynamo.holds_inductor_graphs(os.environ.get("TORCHINDUCTOR_CACHE_DIR")):
        return
    _inductor_warm = True
    with _triton_for_the_interpreter():
        dynamo.warm_inductor()


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


def mount_points() -> tuple[Path, ...]:
    """Where something is mounted in this process's view (/proc/self/mountinfo, escapes decoded)."""
    with open("/proc/self/mountinfo") as table:
        return tuple(Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[4])) for line in table)


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



if __name__ == "__main__":
    serve(sys.argv[1:])
