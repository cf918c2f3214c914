"""A sandbox per executed notebook: bubblewrap (``bwrap``) around the kernel process.

A submission is untrusted code. Its kernel sees a fresh root holding only what Python needs to
run the course (the system's /usr and /etc, the Python installation, the packages ``grader`` and
``tensorcraft``), all read-only, and nothing else of the checkout they come from (no
``solutions/``, ``tests/``, ``.git``, ``build/``); one scratch folder of its own, writable; no
network, no other process (a PID namespace of its own); and no course directory, gradebook,
submissions folder, exchange or other learner (``masked``: covered even where a readable folder
holds them).
Where the grader runs as root the kernel also runs under a uid of its own (one per worker,
through ``setpriv``), so that it holds no capability and its process cap is its own. Memory
(address space), processes and file sizes are capped with resource limits (``prlimit``).

When bubblewrap is missing or cannot create namespaces here, :func:`unavailable` says why, and
autograde refuses to run unless told ``--unsafe`` (``isolation="unsafe"``).
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psutil

FIRST_UID, UIDS = 61000, 1000          # sandbox uids (root only), one claimed per worker process
PROBE_UID = FIRST_UID - 1               # the uid of the one-off probe in unavailable()
ENVIRONMENT_KEPT = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "LC_CTYPE", "NBGRADER_EXECUTION", "OMP_NUM_THREADS",
                    "OMP_WAIT_POLICY", "MKL_NUM_THREADS", "TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES", "TENSORCRAFT_CHECK_SEED")
# A graded kernel's torch.compile compiles in the kernel's own process (Inductor's default is a pool of
# compile processes, one per core, each importing torch): the grading workers keep every core busy
# already, and a notebook's graphs are small. Sandboxed or not (worker/execute.py), forked or not.
COMPILE_IN_THE_KERNEL = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`, or `make sandbox`; "
                "Fedora: `dnf install bubblewrap`), or pass --unsafe to run learners' code with your own rights")


CACHE = ".cache"        # under the scratch folder: compiled code (inductor, triton, tensorcraft's C)
# How a kernel compiles, part of the key of the kept compiled code (compile_cache.cache_path). Inductor's
# precompiled C++ header lives in $TMPDIR (not its cache folder), which every learner's sandbox empties:
# with it on, a learner whose compile hits the prefilled cache still preprocesses and precompiles the
# header again (8-10 CPU s in notebook 10's cell); off, the hit compiles nothing, and a cold compile is
# no slower for the few kernels a notebook makes. The header decides no result, only compile time.
COMPILE_SETTINGS = {"TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS": "0"}
# How a kernel's OpenMP threads (torch's, and tensorcraft's C kernels') wait between parallel regions,
# unless the instructor's environment says: "passive" sleeps where the default spins, a core busy for
# nothing after every region. On shared cores that spinning took a third of notebook 09's CPU seconds
# and slowed the eager calls it timed (1 MiB chain: 1.7 ms against 0.34 ms); results are the same.
RUN_SETTINGS = {"OMP_WAIT_POLICY": "passive"}


@dataclass(frozen=True)
class Limits:
    """Resource caps of one kernel. Address space, not resident memory: torch reserves ~2 GB of it."""
    memory_bytes: int = 8 << 30
    processes: int = 64          # threads count too (torch's intra-op pool)
    file_bytes: int = 256 << 20  # the largest file the kernel may write
    open_files: int = 1024


@dataclass
class Sandbox:
    """How to start one kernel confined: ``wrap(argv)`` returns the command line to run instead."""
    scratch: Path                                   # the only writable folder (and the kernel's cwd)
    masked: list[Path] = field(default_factory=list)  # never visible, even when under a readable folder
    readable: list[Path] = field(default_factory=list)  # more read-only paths (the learner's own copy)
    uid: int | None = None                          # run as this uid (needs root); None: as we are
    limits: Limits = field(default_factory=Limits)

    def prepare(self) -> None:
        """Create the scratch folder, owned by the sandbox's uid."""
        self.scratch.mkdir(parents=True, exist_ok=True)
        if self.uid is not None:
            os.chown(self.scratch, self.uid, self.uid)
        self.scratch.chmod(0o700)

    def end(self, within: float = 10.0) -> None:
        """Kill whatever still runs under the sandbox's uid, and wait until it is gone: a notebook's
        children die with its PID namespace, but not at once, and the next kernel of this worker
        must not find its process cap already spent."""
        if self.uid is not None:
            kill_until_gone(lambda: _pids_of(self.uid), within)

    def give(self, path: Path) -> None:
        """Make a file the parent wrote in the scratch folder (the connection file) the kernel's."""
        if self.uid is not None:
            os.chown(path, self.uid, self.uid)

    def environment(self) -> dict[str, str]:
        """The kernel's environment: nothing of the parent's but what running the course needs."""
        env = {name: os.environ[name] for name in ENVIRONMENT_KEPT if name in os.environ}
        scratch = str(self.scratch)
        env.update(HOME=scratch, TMPDIR=scratch, IPYTHONDIR=f"{scratch}/.ipython", MPLCONFIGDIR=f"{scratch}/{CACHE}/matplotlib",
                   PYTHONDONTWRITEBYTECODE="1", TENSORCRAFT_PROGRESS="off", JUPYTER_PLATFORM_DIRS="1",
                   JUPYTER_RUNTIME_DIR=scratch, XDG_CACHE_HOME=f"{scratch}/{CACHE}",
                   TORCHINDUCTOR_CACHE_DIR=f"{scratch}/{CACHE}/torchinductor", TRITON_CACHE_DIR=f"{scratch}/{CACHE}/triton",
                   TENSORCRAFT_CACHE_DIR=f"{scratch}/{CACHE}/tensorcraft", USER="learner", LOGNAME="learner",
                   **COMPILE_SETTINGS, **COMPILE_IN_THE_KERNEL)
        for name, value in RUN_SETTINGS.items():
            env.setdefault(name, value)
        return env

    def layout(self) -> tuple[list[Path], list[Path], list[Path]]:
        """What the kernel sees of the file system: the folders bound read-only, the masked folders
        inside them covered with empty ones, and what is readable inside a covered folder (the course
        code in a checkout under /opt), bound again."""
        readable = _system_paths() + _python_paths() + [p for p in self.readable if p.exists()]
        masked = [p for p in self.masked + _checkouts() if p.exists()]
        bound = _outermost(readable)
        covered = _outermost([m for m in masked if any(_inside(m, b) and m != b for b in bound)])
        rebound = _outermost([r for r in readable if any(_inside(r, c) and r != c for c in covered)])
        return bound, covered, rebound

    def settings(self) -> dict[str, object]:
        """What a kernel in this sandbox sees, has and may do, whichever folder its scratch is and
        whichever uid it runs as (one per worker process): two sandboxes with the same settings
        run a notebook alike (``grader.instructor.preflight`` keys its verdicts on them). Masked
        paths that no readable folder holds (a course directory under /tmp) change nothing here."""
        scratch = str(self.scratch)
        return {"layout": [sorted(str(p) for p in paths) for paths in self.layout()],   # (in any process's order)
                "environment": {k: v.replace(scratch, "<scratch>") for k, v in sorted(self.environment().items())},
                "limits": repr(self.limits), "own uid": self.uid is not None,
                "devices": [str(p) for p in _nvidia_devices()]}

    def wrap(self, argv: list[str], as_pid_1: bool = False) -> list[str]:
        """``as_pid_1``: ``argv`` is the namespace's PID 1 (a fork server), with no init of bubblewrap's."""
        limits = self.limits
        processes = limits.processes if self.uid is not None else _processes_of(os.getuid()) + limits.processes
        command = ["prlimit", f"--as={limits.memory_bytes}", f"--nproc={processes}",
                   f"--fsize={limits.file_bytes}", f"--nofile={limits.open_files}", "--", "bwrap",
                   "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                   "--die-with-parent", "--clearenv"] + (["--as-pid-1"] if as_pid_1 else [])
        if os.getuid() != 0:
            command.append("--unshare-user")     # unprivileged: bwrap's own user namespace, no capability
        for name, value in self.environment().items():
            command += ["--setenv", name, value]
        command += ["--perms", "0755", "--tmpfs", "/", "--dev", "/dev", "--proc", "/proc",
                    "--perms", "1777", "--size", str(64 << 20), "--tmpfs", "/tmp"]
        made: set[Path] = {Path("/"), Path("/tmp")}
        bound, covered, rebound = self.layout()
        for path in bound:
            command += _parents(path, made)
            if path.is_symlink() and path.parent == Path("/"):       # /lib -> usr/lib on merged-/usr systems
                command += ["--symlink", os.readlink(path), str(path)]
            else:
                command += ["--ro-bind", str(path), str(path)]
        for path in _nvidia_devices():
            command += ["--dev-bind", str(path), str(path)]
        for path in covered:                # a readable folder holds it: cover it with an empty one
            made.update(path.parents)
            made.add(path)
            command += ["--tmpfs", str(path)]
        for path in rebound:
            command += _parents(path, made) + ["--ro-bind", str(path), str(path)]
        for path in covered:                # nothing can be written there (made read-only once filled)
            command += ["--remount-ro", str(path)]
        command += _parents(self.scratch, made)
        command += ["--bind", str(self.scratch), str(self.scratch), "--chdir", str(self.scratch), "--"]
        if self.uid is not None:
            command += ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                        "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        return command + argv


class NoSandboxError(RuntimeError):
    """No sandbox can be made here, and running learners' code unconfined was not asked for."""


_claimed: list = []      # the open lock file of the uid this process claimed (held until it exits)


def claim_uid() -> int | None:
    """A uid no other grading process on this machine uses now, for this process's kernels (root
    only; else None: the kernels run as we do). A uid is claimed by an exclusive lock on a file,
    which the system releases when the process ends, however it ends; two autograde runs at once
    (two courses, two instructors) never share one, so neither its process cap nor its clean-up."""
    if os.getuid() != 0:
        return None
    if _claimed:
        return _claimed[0][0]
    folder = Path(tempfile.gettempdir()) / "tensorcraft-sandbox-uids"
    folder.mkdir(mode=0o700, exist_ok=True)
    for uid in range(FIRST_UID, FIRST_UID + UIDS):
        handle = open(folder / f"{uid}.lock", "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _claimed.append((uid, handle))
        return uid
    raise RuntimeError(f"all {UIDS} sandbox uids from {FIRST_UID} are in use by other grading processes")


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why no sandbox can be made on this machine, or None when one can."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux namespaces (this is {sys.platform}); " + INSTALL_HINT
    missing = [tool for tool in ("bwrap", "prlimit") + (("setpriv",) if os.getuid() == 0 else ())
               if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found; " + INSTALL_HINT
    with tempfile.TemporaryDirectory(prefix="tensorcraft-probe-") as folder:
        probe = Sandbox(Path(folder) / "scratch", uid=PROBE_UID if os.getuid() == 0 else None)
        probe.prepare()
        result = subprocess.run(probe.wrap(["/bin/true"]), capture_output=True, text=True)
    if result.returncode != 0:
        return (f"bubblewrap cannot create a sandbox here ({result.stderr.strip() or result.returncode}); "
                "unprivileged user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1), "
                "or run the grader as root; else pass --unsafe")
    return None


# ---------------------------------------------------------------- what the kernel may read

def _system_paths() -> list[Path]:
    names = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "opt")
    return [Path("/", n) for n in names if os.path.lexists(Path("/", n))]


def _python_paths() -> list[Path]:
    """The Python installation, its site-packages, PYTHONPATH and the course's code (the folders of
    the packages ``grader`` and ``tensorcraft``, not the checkout that holds them), with symlinks
    resolved so that both names work. Not the rest of ``sys.path``: its first entry is the folder a
    command was started from, which may be anything."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), Path(sys.executable).parent,
             *_package_folders()}
    paths |= {Path(p) for p in site.getsitepackages() if Path(p).is_dir()}
    paths |= {Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).is_dir()}
    resolved = {p.resolve() for p in paths} | {Path(sys.executable).resolve().parent.parent}
    return sorted(p.absolute() for p in paths | resolved if p != Path("/"))


def _package_folders() -> list[Path]:
    import grader
    import tensorcraft
    return [Path(grader.__file__).resolve().parent, Path(tensorcraft.__file__).resolve().parent]


def _checkouts() -> list[Path]:
    """The source checkouts the course code was imported from (the folder holding ``grader/`` when it
    has a ``pyproject.toml`` or ``.git``): never visible but for the package folders and the
    environment inside, so that no kernel reads ``solutions/``, ``tests/``, ``.git``, ``build/`` or
    a course directory kept there. Empty for an installed (non-editable) course."""
    holders = {folder.parent for folder in _package_folders()} | {folder.parents[1] for folder in _package_folders()}
    return sorted(h for h in holders if h != Path("/") and ((h / "pyproject.toml").exists() or (h / ".git").exists()))


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _outermost(paths: list[Path]) -> list[Path]:
    """Drop every path that lies inside another of the list: binding the outer one suffices."""
    ordered = sorted(set(paths), key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in ordered:
        if not any(_inside(path, k) and not k.is_symlink() for k in kept):
            kept.append(path)
    return kept


def _parents(path: Path, made: set[Path]) -> list[str]:
    """bwrap arguments creating each missing parent of ``path`` traversable (bwrap's own are 0700)."""
    args = []
    for parent in reversed(path.parents):
        if parent not in made:
            made.add(parent)
            args += ["--perms", "0755", "--dir", str(parent)]
    return args


def _nvidia_devices() -> list[Path]:
    return sorted(Path("/dev").glob("nvidia*"))


def _pids_of(uid: int) -> list[int]:
    """The processes ``uid`` runs now (RLIMIT_NPROC counts them all, not only one sandbox's)."""
    return [p.pid for p in psutil.process_iter(["uids"]) if p.info["uids"] is not None and p.info["uids"].real == uid]


def _processes_of(uid: int) -> int:
    return len(_pids_of(uid))


def kill_until_gone(find: Callable[[], list[int]], within: float) -> list[int]:
    """SIGKILL the processes ``find()`` returns until it returns none (a fork loop is outrun) or
    ``within`` seconds passed; returns those still there."""
    deadline = time.monotonic() + within
    while (pids := find()) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    return find()


def descendants(root: int) -> list[int]:
    """Every process started by ``root``, its children's children and so on (not ``root`` itself)."""
    try:
        return [p.pid for p in psutil.Process(root).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def ns_pid(pid: int) -> int:
    """``pid``'s number inside its own PID namespace (1 for a sandbox's first process)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    raise ValueError(f"/proc/{pid}/status has no NSpid")


def interrupt(sandbox_pid: int, itself: bool = False) -> int:
    """Send SIGINT to every process inside the sandbox started as ``sandbox_pid`` (the kernel and
    what it started), not to bubblewrap's own: what Ctrl-C in a terminal does to a command. A
    kernel's own interrupt message cannot be relied on here (it never stopped a busy cell in the
    sandbox), and a signal to bubblewrap is not passed on. ``itself``: ``sandbox_pid`` is the kernel
    (one forked by a fork server), signalled too. Returns how many processes it reached."""
    reached = 0
    for pid in ([sandbox_pid] if itself else []) + descendants(sandbox_pid):
        with contextlib.suppress(OSError, psutil.Error):
            if psutil.Process(pid).name() != "bwrap":
                os.kill(pid, signal.SIGINT)
                reached += 1
    return reached
