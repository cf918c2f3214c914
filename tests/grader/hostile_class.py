"""A small class of hostile notebook-00 submissions, next to correct ones (``fake_class`` style).

Each hostile learner's cell is written as a real attacker would write it: it knows the paths the
grader uses (they are passed in, as if guessed), walks up from its working folder, and reads other
processes' command lines. Without a sandbox several of them would destroy or leak the class; with
one, each gets the score its answers deserve and nothing outside its sandbox changes.
"""
from __future__ import annotations

import copy
from pathlib import Path

import nbformat

from fake_class import CORRECT_OUTER, CORRECT_ROWS, POINTS, submission

# Empties every notebook, gradebook and CSV it can reach: up from its folder, in the folders named
# on its parents' command lines (/proc/*/cmdline), and at the paths it was told.
DESTROYER = '''import os, pathlib
_targets = set()
for _root in [pathlib.Path.cwd(), *pathlib.Path.cwd().parents[:-1], *map(pathlib.Path, {known!r})]:
    _targets.add(_root)
for _status in pathlib.Path("/proc").glob("[0-9]*/cmdline"):   # where the grader keeps the class
    try:
        _targets.update(pathlib.Path(a) for a in _status.read_bytes().decode().split("\\0")
                        if a.startswith("/") and ("course" in a or "submi" in a))
    except OSError:
        pass
_destroyed = []
for _root in _targets:
    try:
        _files = [_root] if _root.is_file() else list(_root.rglob("*"))
    except OSError:
        continue
    for _file in _files:
        if _file.suffix in (".ipynb", ".db", ".csv", ".json"):
            try:
                _file.write_bytes(b"")
                _destroyed.append(str(_file))
            except OSError:
                pass
print("destroyed outside its folder:", len([d for d in _destroyed if not d.startswith(os.getcwd())]))


def outer(a, b):
    {body}
'''

# Switches the check machinery off from a solution cell, then hands in wrong answers.
PATCHES_COMPARE = '''import grader.checks.exercise as _exercise
_exercise.mismatch = lambda expected, got: None


def outer(a, b):
    return b[:, None] * a[None, :]
'''
PATCHES_CHECK = '''from grader.checks.exercise import Exercise
Exercise.check = lambda self, fn, hidden=False: None


def outer(a, b):
    return a + b
'''
# Forbidden operations through other routes.
KEEPS_A_REFERENCE = '''_tools = {"o": torch.outer}


def outer(a, b):
    return _tools["o"](a, b)
'''
BY_OPERATOR_NAME = "return torch.ops.aten.outer(a, b)"
THROUGH_NUMPY = "import numpy as np\n    return torch.from_numpy(np.outer(a.numpy(), b.numpy()))"
# Forks until its process cap stops it; the children wait, holding their slots.
FORK_BOMB = '''import os, time
_children = 0
while _children < 100000:
    try:
        _pid = os.fork()
    except OSError:
        break
    if _pid == 0:
        time.sleep(20)
        os._exit(0)
    _children += 1
print("forked", _children)


def outer(a, b):
    return a[:, None] * b[None, :]
'''
# Sends what it can read to a server on this machine.
NETWORK = '''import socket
try:
    with socket.create_connection(("127.0.0.1", {port}), timeout=3) as _s:
        _s.sendall(b"leaked")
except OSError as _error:
    print("no network:", _error)


def outer(a, b):
    return a[:, None] * b[None, :]
'''
# Writes where it must not: the course code, the instructor's home, /tmp, the marker paths given.
WRITER = '''import pathlib
for _path in {paths!r}:
    try:
        pathlib.Path(_path).write_text("written by a learner")
    except OSError as _error:
        print("refused:", _path, type(_error).__name__)


def outer(a, b):
    return a[:, None] * b[None, :]
'''

# Reads and prints every instructor file it can find: the answers, the history, the tests, the
# course directories, gradebooks and submissions, the exchange, the folders beside the checkout.
READER = """import os, pathlib
def _show(_path):
    _path = pathlib.Path(_path)
    try:
        if _path.is_dir():
            _found = sorted(os.listdir(_path))
            if not _found:
                return print("nothing at", _path)
            print("FOUND", _path, _found[:5])
            for _file in sorted(_path.rglob("*"))[:50]:
                if _file.is_file():
                    print("FOUND", _file, _file.read_text(errors="replace")[:200])
        else:
            print("FOUND", _path, _path.read_text(errors="replace")[:200])
    except OSError as _error:
        print("nothing at", _path, type(_error).__name__)
for _target in {targets!r}:
    _show(_target)
print("the checkout holds:", sorted(os.listdir({checkout!r})) if os.path.isdir({checkout!r}) else [])


def outer(a, b):
    {body}
"""

FULL = set(POINTS)
ROWS_ONLY = {"normalize_rows_tests"}


def _with_outer_cell(source: str, rows: str | None = CORRECT_ROWS) -> nbformat.NotebookNode:
    notebook = copy.deepcopy(submission(None, rows))
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "outer":
            cell.source = source
    return notebook


def write_hostile_class(folder: Path, known: list[str], port: int, markers: list[str],
                        secrets: list[str] = (), checkout: str = "") -> dict[str, set[str]]:
    """Write the class into ``folder``; return learner -> the graded cells that must pass.
    ``secrets``: the instructor's files and folders the reader tries to read and print."""
    learners = {
        "reader": (_with_outer_cell(READER.format(targets=list(secrets), checkout=checkout, body=CORRECT_OUTER)), FULL),
        "correct": (submission(CORRECT_OUTER, CORRECT_ROWS), FULL),
        "destroyer": (_with_outer_cell(DESTROYER.format(known=known, body=CORRECT_OUTER)), FULL),
        "patches_compare": (_with_outer_cell(PATCHES_COMPARE), set()),
        "patches_check": (_with_outer_cell(PATCHES_CHECK, "return x"), set()),
        "keeps_reference": (_with_outer_cell(KEEPS_A_REFERENCE), ROWS_ONLY),
        "operator_name": (submission(BY_OPERATOR_NAME, CORRECT_ROWS), ROWS_ONLY),
        "numpy": (submission(THROUGH_NUMPY, CORRECT_ROWS), ROWS_ONLY),
        "fork_bomb": (_with_outer_cell(FORK_BOMB), FULL),
        "network": (_with_outer_cell(NETWORK.format(port=port)), FULL),
        "writer": (_with_outer_cell(WRITER.format(paths=markers)), FULL),
    }
    for learner, (notebook, _) in learners.items():
        (folder / learner).mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, folder / learner / "00_welcome.ipynb")
    return {learner: passing for learner, (_, passing) in learners.items()}
