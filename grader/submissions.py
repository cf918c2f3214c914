"""The folder of submissions an instructor grades: SUBMISSIONS/<learner>/<assignment>.ipynb.

One folder per learner, holding the notebooks that learner handed in, under their release names
(``alice/00_welcome.ipynb``). Anything else is reported and left alone.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

LEARNER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]*")


@dataclass(frozen=True)
class Submission:
    learner: str
    assignment: str
    path: Path

    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def find_submissions(folder: Path, assignments: list[str]) -> tuple[list[Submission], list[str]]:
    """The submissions in ``folder`` for known assignments, and a line per thing that was skipped."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder of submissions (expected <learner>/<assignment>.ipynb)")
    found, skipped = [], []
    for learner_dir in sorted(p for p in folder.iterdir() if not p.name.startswith(".")):
        if not learner_dir.is_dir():
            skipped.append(f"{learner_dir}: not a learner folder (expected {folder}/<learner>/<assignment>.ipynb)")
            continue
        if not LEARNER_ID.fullmatch(learner_dir.name):
            skipped.append(f"{learner_dir}: a learner id may hold only letters, digits and _ . @ -")
            continue
        for notebook in sorted(learner_dir.glob("*.ipynb")):
            if notebook.stem in assignments:
                found.append(Submission(learner_dir.name, notebook.stem, notebook))
            else:
                skipped.append(f"{notebook}: no assignment named {notebook.stem!r} (known: {', '.join(assignments)})")
    return found, skipped
