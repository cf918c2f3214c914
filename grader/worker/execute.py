"""Run one learner notebook the way nbgrader's autograde does, but safe to run in parallel.

nbgrader's ``autograde`` sanitizes a submission (locked and test cells restored from the
gradebook, outputs cleared), executes it, and saves the scores. Here the first two steps run in a
worker process and only *read* the gradebook; the scores are saved by the parent process alone
(see ``autograde``), because SQLite allows one writer at a time.

Two things nbgrader's own executor handles badly are handled here: a cell whose kernel dies, and
a cell that does not stop when interrupted at its time limit. In both cases the cell gets an error
output (so it scores 0), the kernel is given up, and every later code cell gets an error output
saying why it did not run (so it scores 0 too, instead of passing with no output).

Its kernel starts, is interrupted and ends through :class:`grader.worker.provisioner.GradingProvisioner`
(in the worker's sandbox, forked or spawned; unconfined without one). The submission to grade is
one :class:`grader.worker.job.GradingJob`.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import nbformat
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute

from . import chains, fork_client

from .integrity_watch import IntegrityWatch, check_module
from .kernel_client import ReadyClient
from .job import GradingJob
from .provisioner import GradingKernelManager, GradingProvisioner
from .sandbox import CACHE, COMPILE_IN_THE_KERNEL, Sandbox, claim_uid
from .timings import FORKED_CPU, KERNEL_CPU, WORKER_CPU, Timings, cell_kind, cell_step, cpu_seconds


def _error_output(ename: str, evalue: str) -> NotebookNode:
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue,
                                  traceback=[f"\x1b[0;31m{ename}\x1b[0m: {evalue}"])


def _cell_name(cell: NotebookNode, index: int) -> str:
    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
    return f"cell {index + 1} ({grade_id})" if grade_id else f"cell {index + 1}"


class GuardedExecute(Execute):
    """nbgrader's Execute, which gives 0 to a cell that kills or hangs its kernel, and to every
    cell after it, instead of aborting the whole notebook.

    One hung function costs one time limit, not one per cell that calls it: when a cell is
    interrupted at its limit inside a function the notebook defined (its interrupted traceback ends
    in a frame of a notebook cell, ``in outer``), that function is marked hung, and every later
    code cell that names it is not run, saying why, instead of hanging again."""

    lost: str | None = None         # why the kernel was given up, once it was
    hung: dict[str, str] = {}       # function the notebook defined -> the cell where it ran past the limit
    _running = ""                   # the name of the cell being run, for the messages
    _timed_out = False              # whether the cell being run was interrupted at its limit
    _reply: dict | None = None      # the execute reply of the cell being run

    def __init__(self, sandbox: Sandbox | None = None, assignment: str | None = None, fork: bool = False, **kwargs):
        kwargs.setdefault("shutdown_kernel", "immediate")  # a hung kernel is killed, not waited for
        kwargs.setdefault("kernel_manager_class", GradingKernelManager)  # its end is awaited, not polled for
        # The kernel's start-up warnings (plain-TCP transport) would repeat once per learner.
        kwargs.setdefault("extra_arguments", ["--IPKernelApp.log_level=ERROR"])
        self._given = {name: value for name, value in kwargs.items() if name != "config"}
        super().__init__(**kwargs)
        self.sandbox = sandbox      # where the kernel runs confined; None: with our own rights
        self.fork = fork            # the provisioner may fork it from the sandbox's fork server (``fork_client``)
        self.assignment = assignment  # when given, its grading code is verified after every cell
        self.integrity: IntegrityWatch | None = None
        self.timings = Timings()    # where this notebook's time went (``grader.worker.timings``)

    def reset_execution_trackers(self):
        """Also put back the settings this executor was made with (a --timeout): nbconvert's
        ``preprocess`` runs ``NotebookClient.__init__`` again, which loads the config over them."""
        super().reset_execution_trackers()
        for name, value in getattr(self, "_given", {}).items():
            setattr(self, name, value)

    def create_kernel_manager(self):
        """The manager of the kernel, with the provisioner that starts it (``grader.worker.provisioner``)."""
        km = super().create_kernel_manager()
        km.provisioner = GradingProvisioner.for_kernel(km, self.sandbox, self.fork)
        km.client_factory = ReadyClient     # ready when the kernel answers (``grader.worker.kernel_client``)
        return km

    def start_new_kernel(self, **kwargs):
        with self.timings.measure("kernel start"):
            return super().start_new_kernel(**kwargs)

    def start_new_kernel_client(self):
        with self.timings.measure("kernel start"):
            return super().start_new_kernel_client()

    def _cleanup_kernel(self):
        provisioner = self.km and self.km.provisioner
        if provisioner is not None and provisioner.pid:     # a forked kernel's is no process's child's
            self.timings.add(FORKED_CPU if provisioner.forked else KERNEL_CPU, cpu_seconds(provisioner.pid))
        with self.timings.measure("kernel shutdown"):
            return super()._cleanup_kernel()

    def preprocess(self, nb, resources=None, km=None):
        self.lost, self.integrity, self.hung, self.timings = None, None, {}, Timings()
        try:
            return super().preprocess(nb, resources, km)
        except (DeadKernelError, CellTimeoutError, RuntimeError):
            # Shutting down a dead kernel can fail too; the cells already carry their outputs.
            if self.lost is None:
                raise
            return self.nb, resources

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.source.strip():
            return cell, resources
        if self.lost is not None:
            cell.outputs = [_error_output("CellNotRun", f"this cell did not run: {self.lost}")]
            return cell, resources
        named = [f for f in self.hung if re.search(rf"(?<![\w.]){re.escape(f)}\b", cell.source)]
        if named:
            cell.outputs = [_error_output("CellNotRun", f"this cell did not run: it uses {named[0]}, which ran past "
                                                        f"the {self.timeout} s time limit in {self.hung[named[0]]}")]
            return cell, resources
        self._running, self._timed_out = _cell_name(cell, index), False
        if self.assignment and self.integrity is None:
            with self.timings.measure("integrity check"):
                self.integrity = IntegrityWatch(self.kc, check_module(self.assignment))
                self.integrity.before_first_cell()
        last, self._reply = index == len(self.nb.cells) - 1, None
        try:
            graded = bool(cell.metadata.get("nbgrader", {}).get("grade"))
            with self.timings.measure(cell_step(index, cell_kind(cell.source, graded))):
                with self.integrity.sending(cell, last) if self.integrity else contextlib.nullcontext():
                    cell, resources = super().preprocess_cell(cell, resources, index)
            if self._timed_out and (function := _hung_function(cell)):
                self.hung.setdefault(function, self._running)
            if self.integrity:
                with self.timings.measure("integrity check"):
                    self.integrity.after_cell(cell, index, last=last, reply=self._reply)
            return cell, resources
        except DeadKernelError:
            self.lost = f"the kernel died in {_cell_name(cell, index)}"
            cell.outputs.append(_error_output("DeadKernelError", "the kernel died while this cell ran"))
        except CellTimeoutError:
            self.lost = f"{_cell_name(cell, index)} did not stop when interrupted at its {self.timeout} s limit"
            cell.outputs.append(_error_output(
                "CellTimeoutError", f"this cell ran past its {self.timeout} s limit and ignored the interrupt"))
        return cell, resources

    async def _async_poll_for_reply(self, *args, **kwargs):
        """nbclient's wait for the cell's execute reply, kept: it carries the cell's verification."""
        self._reply = await super()._async_poll_for_reply(*args, **kwargs)
        return self._reply

    async def _async_handle_timeout(self, timeout, cell=None):
        """Interrupt the cell (as nbgrader does) with an error that states the limit."""
        self._timed_out = True
        why = f"this cell ran past its {timeout} s time limit and was interrupted"
        self.error_on_timeout = {"ename": "CellTimeoutError", "evalue": why,
                                 "traceback": [f"\x1b[0;31mCellTimeoutError\x1b[0m: {why}"]}
        return await super()._async_handle_timeout(timeout, cell)


ANSI = re.compile(r"\x1b\[[0-9;]*m")
CELL_FRAME = re.compile(r"Cell In\[\d+\], line \d+, in (\w+)")


def _hung_function(cell: NotebookNode) -> str | None:
    """The function defined in the notebook that was running when the cell was interrupted: the
    innermost frame of a notebook cell in its KeyboardInterrupt traceback (None at module level)."""
    for output in cell.outputs:
        if output.output_type == "error" and output.ename == "KeyboardInterrupt":
            frames = CELL_FRAME.findall(ANSI.sub("", "\n".join(output.traceback)))
            if frames and frames[-1] != "<module>":
                return frames[-1]
    return None


@dataclass
class Executed:
    """What a worker hands back: the executed notebook (JSON) or why it could not be produced."""
    learner: str
    assignment: str
    notebook_json: str = ""
    problem: str = ""                      # empty when the notebook was executed
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)    # seconds per step (``grader.worker.timings``)


WORKER_MODULES = ("grader.worker.execute", "grader.worker.solution_run")   # what a local pool's worker runs


def worker_context():
    """The multiprocessing context of a local grading pool: its workers are forked from one process
    that imported :data:`WORKER_MODULES` once (multiprocessing's "forkserver", started with the first
    pool of the parent and kept for every pool after; not the kernels' fork server), instead of each
    spawned worker importing nbgrader, nbclient and the rest again (1.1 CPU s a worker). That process
    runs no thread and holds nothing of a batch; each worker takes the parent's environment as it is
    when the pool starts (:func:`start_worker`). It is started here, not at the pool's first task:
    its imports (0.7 s) go on while the parent registers the batch."""
    import multiprocessing
    import multiprocessing.forkserver
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(WORKER_MODULES))
    multiprocessing.forkserver.ensure_running()
    return context


def start_worker(environment: dict[str, str] | None = None) -> None:
    """Pool initializer: ``environment`` (the parent's, when the pool started) replaces the worker's,
    which a worker forked by :func:`worker_context`'s process has from when that process started.
    Ctrl-C is left to the parent (it starts nothing more), so that the notebook a worker runs ends
    normally, without tracebacks."""
    if environment is not None:
        os.environ.clear()
        os.environ.update(environment)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def execute_submission(job: GradingJob) -> Executed:
    """Sanitize and execute one submission with nbgrader's configured chains (``chains``; the
    course's ``config_file``, ``timeout`` over its ``Execute.timeout``); read-only on the gradebook.
    Runs in a worker process. ``job.sandboxed``: the kernel runs in this worker thread's sandbox,
    which cannot see the ``masked`` paths, and starts with a copy of ``compile_cache``
    (``compile_cache.warm_cache``); whether it is forked from the worker's fork server or started on
    its own is the provisioner's choice (``grader.worker.provisioner``)."""
    timings, cpu = Timings(), time.process_time()
    with timings.measure("worker total"):
        executed = _confined(job, timings)
    timings.add(WORKER_CPU, time.process_time() - cpu)
    executed.timings = {**timings, **executed.timings}
    return executed


def _confined(job: GradingJob, timings: Timings) -> Executed:
    if not job.sandboxed:
        return _execute(job, None)
    with contextlib.ExitStack() as stack:       # (its reset on exit counts in "worker total" only)
        with timings.measure("sandbox reset"):
            sandbox = stack.enter_context(fork_client.sandbox_for_a_learner(list(job.masked), claim_uid(), job.preload))
        _fill(sandbox, job.submitted, job.compile_cache, timings)
        return _execute(job, sandbox)


@contextlib.contextmanager
def _grading_environment():
    """``NBGRADER_EXECUTION=autograde`` while the body runs, as nbgrader sets it for the kernels it starts,
    and Inductor compiling in the kernel's process (``sandbox.COMPILE_IN_THE_KERNEL``) where the kernel
    is not sandboxed (a sandboxed one gets both from ``Sandbox.environment``)."""
    with mock.patch.dict(os.environ, {"NBGRADER_EXECUTION": "autograde", **COMPILE_IN_THE_KERNEL}):
        yield


def start_fork_server(masked: tuple[Path, ...] = (), preload: tuple[str, ...] = ()) -> float:
    """A pool task for the time the parent runs its preflight: start this worker's fork server (the
    one ``execute_submission`` will fork its kernels from, in the same sandbox and environment), so
    that its first learner does not wait for it. Returns the seconds it took (0.0: one was running)."""
    started = time.perf_counter()
    if not fork_client.enabled() or fork_client.running() is not None:
        return 0.0
    with _grading_environment(), fork_client.sandbox_for_a_learner(list(masked), claim_uid(), preload) as sandbox:
        sandbox.prepare()
        fork_client.server_for(sandbox)
    return time.perf_counter() - started


def _fill(sandbox: Sandbox, submitted: Path, compile_cache: Path | None, timings: Timings) -> None:
    """Make the scratch folder, with the kept compiled code and the learner's own copy (read-only)."""
    sandbox.prepare()
    with timings.measure("compile cache copy"):
        prefill(compile_cache, sandbox)
    own_copy = sandbox.scratch / submitted.name
    shutil.copyfile(submitted, own_copy)
    own_copy.chmod(0o444)


def prefill(cache: Path | None, sandbox: Sandbox) -> None:
    """Give ``sandbox`` a copy of ``cache`` as its own compiled-code cache (``compile_cache``), owned by its uid."""
    if cache is None or not cache.is_dir():
        return
    target = sandbox.scratch / CACHE
    shutil.copytree(cache, target, symlinks=True, dirs_exist_ok=True)
    if sandbox.uid is not None:
        for folder, names, files in os.walk(target):
            for name in (folder, *(os.path.join(folder, n) for n in names + files)):
                os.lchown(name, sandbox.uid, sandbox.uid)


def _execute(job: GradingJob, sandbox: Sandbox | None) -> Executed:
    submitted, learner, assignment = job.submitted, job.learner, job.assignment
    try:
        notebook = nbformat.read(submitted, as_version=4)
    except Exception as error:  # not a notebook at all: reported, the batch goes on
        return Executed(learner, assignment, problem=f"{submitted} is not a readable notebook: {error}")
    resources = job.resources(sandbox.scratch if sandbox else job.autograded_dir)
    job.autograded_dir.mkdir(parents=True, exist_ok=True)
    sanitizing = Timings()
    try:
        with sanitizing.measure("sanitize"):
            steps = chains.build_chains(chains.course_config(job.config_file), GuardedExecute,
                                           sandbox=sandbox, assignment=assignment, fork=sandbox is not None,
                                           **({"timeout": job.timeout} if job.timeout is not None else {}))
            notebook, resources = chains.run(steps.sanitize, notebook, resources)
        with _grading_environment():
            notebook, resources = chains.run(steps.autograde, notebook, resources)
    except Exception as error:
        return Executed(learner, assignment, problem=f"could not grade {submitted}: {type(error).__name__}: {error}")
    notes, timings = [], sanitizing
    for executor in (step for step in steps.autograde if isinstance(step, GuardedExecute)):
        integrity = executor.integrity
        notes += [n for n in (executor.lost, integrity and (integrity.modified or integrity.problem)) if n]
        for step, seconds in executor.timings.items():
            timings.add(step, seconds)
    return Executed(learner, assignment, nbformat.writes(notebook), notes=notes, timings=dict(timings))
