"""Files written whole or not at all: what the grader leaves behind is never half a file; and folders
emptied whatever a kernel left in them (:func:`empty`, for the worker and the fork server).

A run killed half-way (autograde is resumable: its tests SIGKILL it at random moments), a full disk,
or a reader at the same time (JupyterLab reading the learner's progress file) must see the old file
or the new one. Each write goes to a temporary ``*.partial`` file beside the target (the same file
system; autograde deletes the ones a killed run left), then ``os.replace`` puts it in place in one
step; a failed write removes it. The file gets the permissions a plain write would (the umask's), or
the owner's only with ``private``.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path


def _partial(target: Path) -> Path:
    return target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.partial")


def write_atomically(path: Path, data: str | bytes, *, private: bool = False, encoding: str = "utf-8") -> Path:
    """Write ``data`` to ``path`` (its folder made if need be) whole or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = _partial(path)
    try:
        with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o666), "wb") as stream:
            stream.write(data.encode(encoding) if isinstance(data, str) else data)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path


def copy_atomically(source: Path, target: Path) -> Path:
    """Copy ``source``'s content to ``target`` (its folder made if need be) whole or not at all."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = _partial(target)
    try:
        shutil.copyfile(source, partial)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return target


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
