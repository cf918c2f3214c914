"""Ground truths computed once per grading worker, not once per learner.

Some exercises' ground truth is costly (notebook 07's: Dynamo compiles each case's program; 08, 09 and
11's: the library's compiler passes and stages, tenths of a CPU second per check in a kernel) and the
same for every learner on the public cases. An exercise with ``truth_once=True`` lets the grading
fork server (``grader.fork_server.server``) compute its public cases' truths once, while it forks the
first kernel for that notebook (:func:`remember`); every kernel forked after inherits them, and
``Exercise`` reads them back (:func:`recall`) instead of calling the reference. Hidden cases are
random per learner and are always computed; but a part of a reference that depends on a label alone,
not on the case's tensors (07: whether Dynamo breaks a program's graph, whatever the input), is
listed by the exercise's ``shared_truths`` and kept the same way, and the reference reads it with
:func:`shared` on hidden cases too (07's hidden refusal cases: 1 CPU s a learner, Dynamo on eleven
programs, then a tenth of that).

A truth cannot be stale: its key is a digest of the exercise's id, the source of the module that
defines it, torch's version, and the case's arguments as they would be passed (every tensor's dtype,
shape, strides, offset, device, requires_grad, which arguments share storage, and its bytes), so a
changed check or case finds nothing and computes its truth as ever. The truths are kept as one
tuple of (key, pickled result) pairs: immutable, so a notebook cannot edit them, and replacing the
tuple is a change the grading-code check (``grader.kernel.integrity``) reports. Each recall unpickles a
fresh copy.
"""
from __future__ import annotations

import hashlib
import io
import pickle
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import torch

if TYPE_CHECKING:
    from .exercise import Exercise

MISSING = object()                               # recall's answer when no truth is kept for a case
_known: tuple[tuple[str, bytes], ...] = ()       # (key, pickled truth); replaced whole, never edited
_done: set[str] = set()                          # the notebooks remember_for has seen (in the fork server)


class _Fingerprint(pickle.Pickler):
    """Pickles a case's arguments with each tensor written as what a reference can observe of it."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=4)
        self._storages: dict[int, int] = {}

    def persistent_id(self, obj: Any) -> Any:
        if not isinstance(obj, torch.Tensor):
            return None
        t = obj.detach()
        meta = t.device.type == "meta"
        storage = id(t) if meta else t.untyped_storage().data_ptr()
        data = b"" if meta else t.cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        return (type(obj).__qualname__, str(t.dtype), tuple(t.shape), t.stride(), t.storage_offset(), str(t.device),
                obj.requires_grad, self._storages.setdefault(storage, len(self._storages)),
                hashlib.sha256(data).hexdigest())


def _source_digest(exercise: "Exercise") -> str:
    """The digest of the source file of the module that defines the exercise's reference."""
    path = getattr(sys.modules.get(exercise.reference.__module__), "__file__", None)
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else ""


def key(exercise: "Exercise", args: tuple) -> str | None:
    """The key of the truth of ``exercise`` on ``args``; None when the arguments cannot be written down."""
    buffer = io.BytesIO()
    try:
        _Fingerprint(buffer).dump(args)
    except Exception:               # a function or another object pickle cannot write: never kept
        return None
    digest = hashlib.sha256()
    for part in (exercise.id, _source_digest(exercise), torch.__version__):
        digest.update(part.encode() + b"\0")
    digest.update(buffer.getvalue())
    return digest.hexdigest()


def _label_key(exercise: "Exercise", label: str) -> str:
    """The key of a shared truth (:func:`shared`): the exercise, its source, torch's version, the label."""
    digest = hashlib.sha256()
    for part in (exercise.id, _source_digest(exercise), torch.__version__, f"label {label}"):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


def shared(exercise: "Exercise", label: str, compute: Callable[[], Any]) -> Any:
    """The truth named ``label`` of the exercise's ``shared_truths`` (a fresh copy) where the fork server
    kept it (:func:`remember`), else ``compute()``."""
    kept = _kept(_label_key(exercise, label)) if _known else MISSING
    return compute() if kept is MISSING else kept


def recall(exercise: "Exercise", args: tuple) -> Any:
    """The kept truth of ``exercise`` on ``args`` (a fresh copy), or ``MISSING``."""
    return _kept(key(exercise, args)) if _known else MISSING


def _kept(wanted: str | None) -> Any:
    """A fresh copy of the truth kept under ``wanted``, or ``MISSING``."""
    for kept, blob in _known:
        if kept == wanted:
            return pickle.loads(blob)
    return MISSING


def remember(exercise: "Exercise") -> int:
    """Compute and keep the truths of the exercise's public cases on the CPU (not its error cases) and
    its ``shared_truths``; returns how many are kept. The random generators are left as they were. One thread: where a
    process has run an OpenMP parallel region, a process it forks hangs in its first one (GNU
    OpenMP's threads do not survive a fork), and the fork server forks every kernel after this."""
    global _known
    from .devices import clone, to_device
    found = []
    state, threads = torch.random.get_rng_state(), torch.get_num_threads()
    torch.set_num_threads(1)    # no OpenMP thread pool in the fork server: a kernel forked after one hangs
    try:
        for group in exercise.public():
            for case in group.cases:
                args = to_device(case.args, "cpu")
                wanted = key(exercise, args)
                if case.raises is not None or wanted is None or any(k == wanted for k, _ in _known):
                    continue
                try:
                    found.append((wanted, pickle.dumps(exercise.reference(*clone(args)), protocol=4)))
                except Exception:   # a truth that cannot be computed or pickled here is computed in the kernel
                    continue
        for label, compute in (exercise.shared_truths() if exercise.shared_truths else {}).items():
            wanted = _label_key(exercise, label)
            if any(k == wanted for k, _ in _known):
                continue
            try:
                found.append((wanted, pickle.dumps(compute(), protocol=4)))
            except Exception:       # computed in the kernel, as ever
                continue
    finally:
        torch.random.set_rng_state(state)
        torch.set_num_threads(threads)
    _known = _known + tuple(found)
    return len(found)


def remember_for(notebooks: list[str]) -> None:
    """For each notebook (``07_graph_capture``) whose checks are imported, once: remember the truths
    of its exercises marked ``truth_once``. Dynamo's counters are left empty, as a kernel expects them."""
    for name in notebooks:
        if name in _done:
            continue
        _done.add(name)
        module = sys.modules.get(f"grader.checks.nb{name}")
        for exercise in getattr(module, "EXERCISES", {}).values():
            if getattr(exercise, "truth_once", False):
                remember(exercise)
    if "torch._dynamo" in sys.modules:
        sys.modules["torch._dynamo"].utils.counters.clear()
