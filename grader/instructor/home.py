"""The course home, ``notebooks/course_home.ipynb``: the page JupyterLab opens on (`make course`).

It lists the modules in order with their goals and time (written by `python -m grader build` from
the notebooks themselves, see :mod:`grader.syllabus`), and one cell that shows the learner's
progress per notebook, read from the outcomes their own checks recorded (:mod:`grader.progress`):
run it again and it is up to date. It is not an assignment: nothing in it is graded.
It also says, once, where the course comes from (the blog post notebooks 06 and 09 mention).

Two layouts, one page: the release's (``notebooks/NN_name.ipynb`` beside the home, as ``make course``
serves it) and nbgrader's fetched one (``~/NN_name/NN_name.ipynb``: on a JupyterHub, each notebook
fetched from the exchange lands in a folder of its name; ``python -m grader home DIR`` writes a home
whose links point there). Either way the progress shown is the learner's own (:mod:`grader.progress`).
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import progress
from .course import NOTEBOOKS
from .syllabus import Module, modules_in

HOME_NAME = "course_home.ipynb"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
SYMBOL = {progress.PASSED: "✓", progress.ATTEMPTED: "✗", progress.NOT_STARTED: "·"}
COLOUR = {progress.PASSED: "#2e8b57", progress.ATTEMPTED: "#e0a030", progress.NOT_STARTED: "#d0d0d0"}

PROGRESS_CODE = "from grader.home import show_progress\n\nshow_progress({})"

# Where the course comes from (notebooks 06 and 09 refer to "the blog post this course grew from").
SOURCE_NOTE = (
    "## Where this course comes from\n\n"
    "The course grew from a blog post written in Chinese, which is not among the course files: "
    "notes on the same three tools. It explains what happens when "
    "`torch.compile(model)` is called (the graph captured on the first call; optimisations such as "
    "operator fusion, constant folding, dead-code elimination and memory reuse; code generated for "
    "the CPU or the GPU; a compiled object with the model's own interface), how a `torch.einsum` "
    "equation reads and what it computes written as loops, and einops' `rearrange` and `reduce`. "
    "The notebooks are our own text, in their own order. Where the post says something that "
    "torch 2.13, numpy or einops do not do, the notebook on that topic says what they do instead, "
    "in a *common mistake* with a cell that shows it (notebooks 01, 02, 03, 06 and 09; 06 and 09 "
    "name the post).")


def notebook_link(name: str, fetched: bool = False) -> str:
    """Where a module's notebook lies, relative to the home: beside it, or in nbgrader's fetched folder."""
    return f"{name}/{name}.ipynb" if fetched else f"{name}.ipynb"


def _module_markdown(module: Module, fetched: bool) -> str:
    lines = [f"### [{module.title}]({notebook_link(module.name, fetched)})", ""]
    facts = [f"**Time:** {module.time}" if module.time else "",
             f"**Builds on:** {module.builds_on}" if module.builds_on else "",
             f"**Exercises:** {len(module.exercises)}"]
    lines += ["  \n".join(f for f in facts if f), ""]
    lines += [f"- {goal}" for goal in module.goals]
    return "\n".join(lines).rstrip()


def home_notebook(modules: list[Module], fetched: bool = False) -> nbformat.NotebookNode:
    """The home page for these modules (``fetched``: links into nbgrader's fetched folders); the same
    modules give the same bytes."""
    where = ("Each notebook is an assignment: fetch it first (menu Nbgrader → Assignment List, "
             "**Fetch**); it lands in a folder of its own name, where its title below opens it. Submit it "
             "from the same list when you are done, and fetch your feedback there once it is graded.\n\n"
             if fetched else "")
    intro = (
        "# tensorcraft · course home\n\n"
        "Rebuild `torch.einsum`, `einops` and `torch.compile` one stage at a time. Work through the "
        "modules below in order: click a title to open its notebook. In each exercise, replace "
        "`raise NotImplementedError()` with your code and run the check cell below it.\n\n"
        f"{where}"
        "**Your progress** is at the bottom of this page: run its cell (click it, then Shift+Enter) "
        "to see which exercises pass, and run it again after working on a notebook to bring it up to "
        "date. Each check you run records its outcome in a file of your own, in your Jupyter data "
        "folder (the cell shows where), wherever the notebook lies; nothing is sent anywhere.")
    cells = [nbformat.v4.new_markdown_cell(intro, id="home-intro"),
             nbformat.v4.new_markdown_cell(SOURCE_NOTE, id="home-source"),
             nbformat.v4.new_markdown_cell("## Modules", id="home-modules")]
    cells += [nbformat.v4.new_markdown_cell(_module_markdown(m, fetched), id=f"module-{m.name}") for m in modules]
    cells.append(nbformat.v4.new_markdown_cell(
        "## Your progress\n\n"
        "Per notebook, the exercises whose last check passed (✓), those tried but not passing yet "
        "(✗), and those not started (·: never checked, or still `raise NotImplementedError()`).",
        id="home-progress"))
    cells.append(nbformat.v4.new_code_cell(PROGRESS_CODE.format("fetched=True" if fetched else ""), id="show-progress"))
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = nbformat.from_dict({"kernelspec": KERNELSPEC, "language_info": {"name": "python"}})
    nbformat.validate(notebook)
    return notebook


def _sources(notebook: nbformat.NotebookNode) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


def write_home(modules: list[Module], notebooks: Path = NOTEBOOKS, fetched: bool = False) -> Path:
    """(Re)write the home page when its cells differ from these modules' (it holds no work of the
    learner's; a copy that differs only by the outputs of a run is kept)."""
    target = notebooks / HOME_NAME
    fresh = home_notebook(modules, fetched)
    text = nbformat.writes(fresh) + "\n"
    try:
        current = target.read_text(encoding="utf-8")
        kept = current == text or (fetched and _sources(nbformat.reads(current, as_version=4)) == _sources(fresh))
    except (OSError, ValueError):
        kept = False
    if not kept:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return target


def place_learner_home(folder: Path, notebooks: Path = NOTEBOOKS) -> Path:
    """The course home in a learner's own folder (their home on a JupyterHub), linking to the
    notebooks nbgrader fetches there; its modules are read from the installed release."""
    return write_home(modules_in(notebooks), folder, fetched=True)


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
