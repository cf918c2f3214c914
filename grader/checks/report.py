"""What a check tells the learner, read in five seconds: one line per group of cases that ran; under
a failed group, the failed case as the learner would write it, what differs (shape, dtype, the first
differing index with both values, the largest error), and the hint, each on lines of their own; the
groups a missing device kept from running said once, on one line, and never counted as failures.

Outcomes are data (GroupOutcome: the case's index, why it failed, the difference), rendered to text
only here, at a width that reads without scrolling in a narrow JupyterLab pane and in the feedback
HTML: long text wraps onto lines indented under the group's title."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

PASS, FAIL, PENDING = "✓", "✗", "…"
WIDTH = 92                  # columns of a report line, indentation included
INDENT = " " * 9            # continuation lines start under the group's title: "  ✗ cpu  "


def wrap(text: str, first: str = "", rest: str = INDENT) -> str:
    """``first + text`` wrapped at WIDTH, continuation lines indented by ``rest``. Words are never
    split (a long tensor or name stays whole, on a line of its own), and the text's own line
    breaks are kept."""
    lines = []
    for number, paragraph in enumerate(text.split("\n")):
        lines += textwrap.wrap(paragraph, WIDTH, initial_indent=first if number == 0 else rest,
                               subsequent_indent=rest, break_long_words=False, break_on_hyphens=False) or [rest]
    return "\n".join(lines)



def flat(text: str) -> str:
    """``text`` on one line with single spaces: what a report says, whatever its wrapping (to search it)."""
    return " ".join(text.split())


# Why a case failed (GroupOutcome.reason): data, so that code reads it without parsing the text.
FORBIDDEN, NOT_IMPLEMENTED, RAISED, WRONG_ERROR, NO_ERROR, CHANGED_INPUT, WRONG_RESULT = (
    "forbidden", "not implemented", "raised", "wrong error", "no error", "changed input", "wrong result")


@dataclass
class GroupOutcome:
    device: str
    title: str
    cases: int
    status: str                  # PASS, FAIL or PENDING
    detail: str = ""             # for FAIL: the failure as one text (which case, how it differs); for PENDING: why
    hint: str = ""               # for FAIL: what to look at
    # For FAIL, the same failure as data (what `line` shows, each on a line of its own):
    case: int = 0                # which case failed, counted from 1 in its group (0: no one case)
    shown: str = ""              # that case as the learner would write it (a call, an equation, a program)
    reason: str = ""             # why: one of FORBIDDEN, NOT_IMPLEMENTED, RAISED, ... above
    difference: str = ""         # what happened: how the result differs, or the error raised
    error: str = ""              # the type name of the exception the learner's code raised, if any
    note: str = ""               # what the failed case is about, in words
    mutant: str = ""             # the known mistake whose hint ``hint`` is, by name ("" when none explains it)

    def line(self) -> str:
        head = f"  {self.status} {self.device:<4} {self.title} ({self.cases} case{'s' * (self.cases != 1)})"
        if self.status == PASS:
            return head
        if not (self.difference or self.shown):  # an outcome made from text alone
            text = wrap(f"{head}: {self.detail}")
        else:
            text = wrap(head)
            if self.case or self.shown:
                which = f"case {self.case} of {self.cases}" if self.case else "case"
                if self.note and self.note not in self.shown:
                    which += f" ({self.note})"
                text += "\n" + wrap(f"{which}: {self.shown}" if self.shown else which, first=INDENT)
            if self.difference:
                text += "\n" + wrap(self.difference, first=INDENT)
        if self.hint:
            text += "\n" + wrap(self.hint, first=f"{INDENT}hint: ", rest=INDENT + " " * len("hint: "))
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

    def failed_summary(self, with_pending: bool = False) -> str:
        """'2 of 3 groups failed', counting only the groups that ran; with_pending adds the groups
        that could not run, apart ('; 3 cuda groups not run: ...'), never among the failures."""
        ran = len(self.outcomes) - len(self.pending)
        text = f"{len(self.failed)} of {ran} group{'s' * (ran != 1)} failed"
        if with_pending:
            text += "".join(f"; {self._pending_text(device)}" for device in self._pending_devices())
        return text

    def _pending_devices(self) -> list[str]:
        return sorted({o.device for o in self.pending})

    def _pending_text(self, device: str, named: bool = True) -> str:
        groups = [o for o in self.pending if o.device == device]
        return (f"{len(groups)}{f' {device}' * named} group{'s' * (len(groups) != 1)} not run, "
                f"{groups[0].detail.removeprefix('pending: ')}")

    def text(self) -> str:
        kind = "hidden randomized cases" if self.hidden else "public cases"
        first = f"{self.check}: {kind}"
        if self.seed is not None:
            from .seed import SEED_VARIABLE
            first += f", seed {self.seed} (set {SEED_VARIABLE}={self.seed} to draw the same cases)"
        lines = [wrap(first, rest="  ")]
        lines += [o.line() for o in self.outcomes if o.status != PENDING]
        for device in self._pending_devices():  # said once, on one line per device that could not run
            lines.append(wrap(f"  {PENDING} {device:<4} pending: {self._pending_text(device, named=False)}"))
        ran = sorted({o.device for o in self.outcomes if o.status != PENDING})
        if self.failed:
            lines.append(f"{self.failed_summary()}; read the lines marked {FAIL}.")
        else:
            lines.append(wrap(f"All {kind} pass on {', '.join(ran)}.", rest=""))
        return "\n".join(lines)
