"""What a check tells the learner: one line per group of cases, per device."""
from __future__ import annotations

from dataclasses import dataclass, field

PASS, FAIL, PENDING = "✓", "✗", "…"


@dataclass
class GroupOutcome:
    device: str
    title: str
    cases: int
    status: str                  # PASS, FAIL or PENDING
    detail: str = ""             # for FAIL: which case, expected vs got; for PENDING: why
    hint: str = ""               # for FAIL: what to look at

    def line(self) -> str:
        head = f"  {self.status} {self.device:<4} {self.title} ({self.cases} case{'s' * (self.cases != 1)})"
        if self.status == PASS:
            return head
        text = f"{head}: {self.detail}"
        if self.hint:
            text += f"\n         hint: {self.hint}"
        return text


@dataclass
class CheckReport:
    check: str                   # "check_outer"
    hidden: bool
    seed: int | None = None
    outcomes: list[GroupOutcome] = field(default_factory=list)

    @property
    def failed(self) -> list[GroupOutcome]:
        return [o for o in self.outcomes if o.status == FAIL]

    @property
    def pending(self) -> list[GroupOutcome]:
        return [o for o in self.outcomes if o.status == PENDING]

    @property
    def passed(self) -> bool:
        """True when no group failed (pending GPU groups neither pass nor fail a grade)."""
        return not self.failed and any(o.status == PASS for o in self.outcomes)

    def failed_summary(self, with_pending: bool = True) -> str:
        """'2 of 3 groups failed', counting the groups that ran (pending ones are reported apart)."""
        ran = len(self.outcomes) - len(self.pending)
        return f"{len(self.failed)} of {ran} group{'s' * (ran != 1)} failed" + (
            f" ({len(self.pending)} pending, not run)" if self.pending and with_pending else "")

    def text(self) -> str:
        kind = "hidden randomized cases" if self.hidden else "public cases"
        lines = [f"{self.check}: {kind}"]
        if self.seed is not None:
            from .seed import SEED_VARIABLE
            lines[0] += f", seed {self.seed} (set {SEED_VARIABLE}={self.seed} to draw the same cases)"
        lines += [o.line() for o in self.outcomes if o.status != PENDING]
        for device in sorted({o.device for o in self.pending}):  # one line per device that could not run
            groups = [o for o in self.pending if o.device == device]
            lines.append(f"  {PENDING} {device:<4} pending, {len(groups)} group{'s' * (len(groups) != 1)} "
                         f"not run: {groups[0].detail.removeprefix('pending: ')}")
        ran = sorted({o.device for o in self.outcomes if o.status != PENDING})
        waiting = sorted({o.device for o in self.pending})
        if self.failed:
            lines.append(f"{self.failed_summary()}; read the lines marked {FAIL}.")
        else:
            lines.append(f"All {kind} pass on {', '.join(ran)}."
                         + (f" Pending (not run, not counted as passed): {', '.join(waiting)}." if waiting else ""))
        return "\n".join(lines)
