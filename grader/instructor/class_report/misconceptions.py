"""What the class got wrong, per exercise: how many learners' wrong answers each known mistake
(mutant) explains, and how many no known mistake explains (the place to write the next mutant).

A learner counts once per mutant per exercise, for every mutant that any of their failed cases
(public or hidden, any device) was diagnosed as, by the check that gave them the hint; a wrong answer
none of whose failed cases matched a mutant counts as unexplained, with its first failed case kept
for the instructor to read. Only attempted answers that did not earn full marks and whose checks
recorded a failure are wrong answers here: the untouched stub is not, and an answer that timed
out or crashed before its check could record belongs to ``faults``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .records import FAULTS, Answer, ClassRecords

EXAMPLES = 3            # unexplained failing cases shown per exercise


@dataclass
class Misconceptions:
    assignment: str
    exercise: str
    exercise_id: str
    wrong: int                                            # learners with a wrong answer (recorded)
    mutants: list[dict] = field(default_factory=list)     # {"mutant", "hint", "learners", "names"} by count
    unexplained: int = 0
    unexplained_learners: list[str] = field(default_factory=list)
    examples: list[dict] = field(default_factory=list)    # {"learner", "shown", "difference", "reason"}


def is_wrong(answer: Answer) -> bool:
    return answer.attempted and not answer.passed and bool(answer.failures)


def misconceptions(records: ClassRecords) -> list[Misconceptions]:
    """Per exercise in course order, its known mistakes sorted by how many learners made them."""
    found = []
    for assignment, layout in sorted(records.layouts.items()):
        for name in layout.exercises:
            answers = [a for s in records.submissions if s.assignment == assignment
                       for a in s.answers if a.exercise == name and is_wrong(a)]
            counts: Counter[str] = Counter()
            hints: dict[str, str] = {}
            who: dict[str, list[str]] = {}
            unexplained, examples = [], []
            for answer in sorted(answers, key=lambda a: a.learner):
                named = {}
                for failure in answer.failures:
                    if failure.get("mutant"):
                        named.setdefault(failure["mutant"], failure.get("hint", ""))
                for mutant, hint in named.items():
                    counts[mutant] += 1
                    hints.setdefault(mutant, hint)
                    who.setdefault(mutant, []).append(answer.learner)
                if not named:
                    unexplained.append(answer.learner)
                    if len(examples) < EXAMPLES:
                        first = answer.failures[0]
                        examples.append({"learner": answer.learner, "shown": first.get("shown", ""),
                                         "difference": first.get("difference", ""), "reason": first.get("reason", "")})
            exercise_id = next((a.exercise_id for a in answers), f"nb{assignment}.{name}")
            found.append(Misconceptions(
                assignment, name, exercise_id, len(answers),
                [{"mutant": m, "hint": hints[m], "learners": c, "names": who[m]}
                 for m, c in sorted(counts.items(), key=lambda item: (-item[1], item[0]))],
                len(unexplained), unexplained, examples))
    return found


def faults_by_exercise(records: ClassRecords) -> list[dict]:
    """Per exercise: how many learners' answers timed out, crashed, hit a tripwire, ... (``records.FAULTS``)."""
    rows = []
    for assignment, layout in sorted(records.layouts.items()):
        for name in layout.exercises:
            answers = [a for s in records.submissions if s.assignment == assignment for a in s.answers if a.exercise == name]
            row = {"assignment": assignment, "exercise": name}
            row.update({fault: sum(fault in a.faults for a in answers) for fault in FAULTS})
            rows.append(row)
    return rows


def faults_by_learner(records: ClassRecords) -> list[dict]:
    """Per learner with anything gone wrong: how many cells of each kind, over every notebook."""
    rows = []
    for learner in records.learners:
        counts = Counter(f for s in records.submissions if s.learner == learner for f in s.faults)
        if counts:
            rows.append({"learner": learner, **{fault: counts.get(fault, 0) for fault in FAULTS}})
    return rows
