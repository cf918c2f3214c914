"""The course home, ``notebooks/course_home.ipynb``: the page JupyterLab opens on (`make course`).

It lists the modules in order with their goals and time (written by `python -m grader build` from
the notebooks themselves, see :mod:`grader.kernel.syllabus`), and one cell that shows the learner's
progress per notebook, read from the outcomes their own checks recorded (:mod:`grader.kernel.progress`):
run it again and it is up to date (that cell runs in the learner's kernel: :mod:`grader.kernel.progress_page`).
It is not an assignment: nothing in it is graded.
It also says, once, where the course comes from (the blog post notebooks 06 and 09 mention).

Two layouts, one page: the release's (``notebooks/NN_name.ipynb`` beside the home, as ``make course``
serves it) and nbgrader's fetched one (``~/NN_name/NN_name.ipynb``: on a JupyterHub, each notebook
fetched from the exchange lands in a folder of its name; ``python -m grader home DIR`` writes a home
whose links point there). Either way the progress shown is the learner's own (:mod:`grader.kernel.progress`).
"""
from __future__ import annotations

from pathlib import Path

import nbformat

from ..course import NOTEBOOKS
from ..kernel.progress_page import notebook_link
from ..kernel.syllabus import Module, modules_in

HOME_NAME = "course_home.ipynb"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}

PROGRESS_CODE = "from grader.kernel.progress_page import show_progress\n\nshow_progress({})"

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
