"""The folder of submissions an instructor grades, in either of two layouts:

- ours: ``SUBMISSIONS/<learner>/<assignment>.ipynb``, one folder per learner holding the notebooks
  that learner handed in, under their release names (``alice/00_welcome.ipynb``);
- nbgrader's, as ``nbgrader collect`` leaves it: ``submitted/<learner>/<assignment>/<assignment>.ipynb``,
  beside the exchange's ``timestamp.txt`` and ``submission_secret.txt`` (kept with the grade, since
  ``nbgrader release_feedback`` needs both to hand the feedback back to the right learner).

A learner folder may mix the two. Anything else is reported and left alone.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

LEARNER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]*")
# Files nbgrader's exchange puts beside a collected notebook; they travel with it to feedback/.
EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")


@dataclass(frozen=True)
class Submission:
    learner: str
    assignment: str
    path: Path
    companions: tuple[Path, ...] = ()      # the exchange's files beside it (nbgrader's layout only)

    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def _collected(learner_dir: Path, folder: Path, assignments: list[str],
               skipped: list[str]) -> list[Submission]:
    """nbgrader's layout: <learner>/<assignment>/<assignment>.ipynb and its exchange files."""
    found = []
    for assignment_dir in sorted(p for p in learner_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        notebook = assignment_dir / f"{assignment_dir.name}.ipynb"
        if assignment_dir.name not in assignments:
            skipped.append(f"{assignment_dir}: no assignment named {assignment_dir.name!r} "
                           f"(known: {', '.join(assignments)})")
        elif not notebook.is_file():
            skipped.append(f"{assignment_dir}: holds no {notebook.name} (expected {folder}/<learner>/"
                           f"<assignment>/<assignment>.ipynb, as nbgrader collect leaves it)")
        else:
            companions = tuple(assignment_dir / name for name in EXCHANGE_FILES if (assignment_dir / name).is_file())
            found.append(Submission(learner_dir.name, assignment_dir.name, notebook, companions))
    return found


def find_submissions(folder: Path, assignments: list[str]) -> tuple[list[Submission], list[str]]:
    """The submissions in ``folder`` for known assignments, and a line per thing that was skipped."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder of submissions (expected <learner>/<assignment>.ipynb "
                                "or nbgrader's <learner>/<assignment>/<assignment>.ipynb)")
    found, skipped = [], []
    for learner_dir in sorted(p for p in folder.iterdir() if not p.name.startswith(".")):
        if not learner_dir.is_dir():
            skipped.append(f"{learner_dir}: not a learner folder (expected {folder}/<learner>/<assignment>.ipynb)")
            continue
        if not LEARNER_ID.fullmatch(learner_dir.name):
            skipped.append(f"{learner_dir}: a learner id may hold only letters, digits and _ . @ -")
            continue
        collected = {s.assignment: s for s in _collected(learner_dir, folder, assignments, skipped)}
        for notebook in sorted(learner_dir.glob("*.ipynb")):
            if notebook.stem not in assignments:
                skipped.append(f"{notebook}: no assignment named {notebook.stem!r} (known: {', '.join(assignments)})")
            elif notebook.stem in collected:
                skipped.append(f"{notebook}: handed in twice; graded {collected[notebook.stem].path} "
                               "(nbgrader's layout) instead")
            else:
                found.append(Submission(learner_dir.name, notebook.stem, notebook))
        found.extend(collected.values())
    found.sort(key=lambda s: (s.learner, s.assignment))
    return found, skipped
