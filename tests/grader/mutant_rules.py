"""The two rules issue 20 sets for an exercise's mutants, evaluated as ``grader check`` will:
(1) the PUBLIC cases reject every mutant not marked ``hidden_only``; (2) one mistake, one diagnosis:
a mutant run as a learner's answer on the public cases is shown its own hint on its first failing
group (another mutant's hint there is a collision). Run as a script it prints the verdict of every
mutant of the notebooks named: ``python -m tests.grader.mutant_rules nb07_graph_capture``."""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass

from grader.mutants import Mutant, mutants_for


@dataclass(frozen=True)
class Verdict:
    mutant: Mutant
    rejected_in_public: bool
    shown_hint: str | None      # the hint of its first failing public group

    @property
    def problem(self) -> str | None:
        if not self.rejected_in_public:
            return None if self.mutant.hidden_only else "passes the public cases"
        if self.shown_hint != self.mutant.hint:
            others = {m.hint: m.name for m in mutants_for(self.mutant.exercise)}
            shown = others.get(self.shown_hint, "a hint of no mutant")
            return f"is shown the hint of {shown}: {self.shown_hint!r:.140}"
        return None


def verdicts(exercise) -> list[Verdict]:
    """The verdict of each mutant of ``exercise`` (an Exercise)."""
    out = []
    for wrong in mutants_for(exercise.id):
        report = exercise.run(wrong.fn)
        failed = report.failed
        out.append(Verdict(wrong, bool(failed), failed[0].hint if failed else None))
    return out


def problems(exercise) -> list[str]:
    return [f"{v.mutant.name}: {v.problem}" for v in verdicts(exercise) if v.problem]


def main(modules: list[str]) -> int:
    bad = 0
    for module in modules:
        exercises = importlib.import_module(f"grader.checks.{module}").EXERCISES
        for exercise in exercises.values():
            for v in verdicts(exercise):
                bad += v.problem is not None
                print(f"{exercise.id:<40} {v.mutant.name:<48} {'ok' if v.problem is None else v.problem}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
