"""The learner's progress, shown by the course home's last cell (in the learner's own kernel).

``show_progress()`` reads the outcomes the learner's checks recorded (:mod:`grader.kernel.progress`)
and the installed release's modules (:mod:`grader.kernel.syllabus`), and displays a table and a chart:
per notebook, the exercises passed, attempted and not started. The page around it is written by
:mod:`grader.instructor.home`.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from ..course import NOTEBOOKS
from . import progress
from .syllabus import Module, modules_in

SYMBOL = {progress.PASSED: "✓", progress.ATTEMPTED: "✗", progress.NOT_STARTED: "·"}
COLOUR = {progress.PASSED: "#2e8b57", progress.ATTEMPTED: "#e0a030", progress.NOT_STARTED: "#d0d0d0"}


def notebook_link(name: str, fetched: bool = False) -> str:
    """Where a module's notebook lies, relative to the home: beside it, or in nbgrader's fetched folder."""
    return f"{name}/{name}.ipynb" if fetched else f"{name}.ipynb"


@dataclass(frozen=True)
class ProgressRow:
    module: Module
    states: dict[str, str]       # exercise name -> passed / attempted / not started

    def count(self, state: str) -> int:
        return sum(1 for s in self.states.values() if s == state)


def progress_rows(modules: list[Module], records: dict[str, dict]) -> list[ProgressRow]:
    """One row per module: the last recorded state of each of its graded exercises."""
    rows = []
    for module in modules:
        states = {}
        for exercise in module.exercises:
            status = records.get(module.exercise_id(exercise), {}).get("status")
            states[exercise] = status if status in progress.STATES else progress.NOT_STARTED
        rows.append(ProgressRow(module, states))
    return rows


def progress_table_html(rows: list[ProgressRow], fetched: bool = False) -> str:
    head = "".join(f'<th style="text-align:left">{h}</th>' for h in ("module", "time", "✓ passed", "✗ attempted", "· not started", "exercises"))
    body = []
    for row in rows:
        exercises = " ".join(f'<span title="{html.escape(state)}">{SYMBOL[state]}&nbsp;{html.escape(name)}</span>'
                             for name, state in row.states.items())
        cells = [f'<a href="{notebook_link(row.module.name, fetched)}">{html.escape(row.module.title)}</a>',
                 html.escape(row.module.time or "—"),
                 *(f"{row.count(s)} / {len(row.states)}" for s in progress.STATES), exercises]
        body.append("<tr>" + "".join(f'<td style="text-align:left">{c}</td>' for c in cells) + "</tr>")
    return f'<table class="tensorcraft-progress"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def progress_figure(rows: list[ProgressRow]):
    """A horizontal stacked bar per module: passed, attempted, not started."""
    import matplotlib.pyplot as plt

    labels = [row.module.title for row in rows]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.2))
    left = [0] * len(rows)
    for state in progress.STATES:
        counts = [row.count(state) for row in rows]
        ax.barh(labels, counts, left=left, color=COLOUR[state], label=f"{SYMBOL[state]} {state}")
        left = [a + b for a, b in zip(left, counts)]
    ax.invert_yaxis()
    ax.set_xlabel("exercises")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)
    fig.tight_layout()
    return fig


def show_progress(notebooks: Path = NOTEBOOKS, progress_path: Path | None = None, fetched: bool = False) -> None:
    """Display the progress table and chart in the notebook (returns nothing, so nothing is echoed).
    The modules are the installed release's; ``fetched``: link to nbgrader's fetched folders."""
    import matplotlib.pyplot as plt
    from IPython.display import HTML, display

    rows = progress_rows(modules_in(notebooks), progress.load(progress_path))
    done = sum(row.count(progress.PASSED) for row in rows)
    total = sum(len(row.states) for row in rows)
    where = progress_path or progress.progress_file()
    display(HTML(f"<p><b>{done} of {total} exercises pass</b> (from the checks recorded in <code>{html.escape(str(where))}</code>).</p>"
                 + progress_table_html(rows, fetched)))
    if rows:
        fig = progress_figure(rows)
        display(fig)
        plt.close(fig)
