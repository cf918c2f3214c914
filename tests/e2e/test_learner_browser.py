"""What a learner sees, in a real JupyterLab in a real (headless) browser.

For every released notebook: open it, run every cell with the exercises blank (as a learner running
cell after cell would, going on past a failing check), and read what the page shows: each check
says its exercise is not implemented yet, every plot is rendered as an image, and no cell fails but
the checks. Then type in the solutions (through JupyterLab's own editor model), run the exercises
and their checks again, and see every check pass. Last, the course home shows the progress those
checks recorded. Screenshots go to build/e2e/<notebook>.png.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from grader.instructor.build import source_notebook
from grader.kernel.syllabus import NOTEBOOK_NAME

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "e2e"
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb") if NOTEBOOK_NAME.match(p.stem))
STUB_MESSAGE = re.compile(r"NotImplementedError|not implemented", re.IGNORECASE)
SOLVED: dict[str, int] = {}     # notebook -> number of exercises seen passing, for the course home test


class Stopwatch:
    """Seconds per step, appended to build/e2e/timings.txt (the run time is the test's budget)."""

    def __init__(self, name: str):
        self.name, self.last, self.steps = name, time.monotonic(), []

    def lap(self, step: str) -> None:
        now = time.monotonic()
        self.steps.append(f"{step} {now - self.last:.1f} s")
        self.last = now

    def write(self) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        with (SCREENSHOTS / "timings.txt").open("a") as out:
            out.write(f"{self.name}: {', '.join(self.steps)}\n")

OPEN = """async (path) => {
    const app = window.jupyterapp;
    const panel = await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
    await panel.context.ready;
    await panel.sessionContext.ready;
    app.shell.activateById(panel.id);
    const started = Date.now();
    for (;;) {
        const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
        if (kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle') break;
        if (Date.now() - started > 120000) throw new Error('the kernel of ' + path + ' did not start');
        await new Promise(resolve => setTimeout(resolve, 200));
    }
    return panel.content.widgets.length;
}"""

# Runs code cells one at a time, as Shift+Enter would, so that a failing check does not stop the
# cells after it (JupyterLab's Run All stops at the first error). which: 'all' or 'exercises'.
RUN = """async (which) => {
    const app = window.jupyterapp;
    const notebook = app.shell.currentWidget.content;
    for (let i = 0; i < notebook.widgets.length; i++) {
        const cell = notebook.widgets[i];
        if (cell.model.type !== 'code') continue;
        const nbgrader = cell.model.getMetadata('nbgrader') || {};
        if (which === 'exercises' && !(nbgrader.solution || nbgrader.grade)) continue;
        notebook.deselectAll();
        notebook.activeCellIndex = i;
        await app.commands.execute('notebook:run-cell');
    }
}"""

# What the page shows under each code cell (the rendered output area) and what the model holds.
COLLECT = """() => {
    const notebook = window.jupyterapp.shell.currentWidget.content;
    return notebook.widgets.map((cell, index) => {
        if (cell.model.type !== 'code') return null;
        const nbgrader = cell.model.getMetadata('nbgrader') || {};
        const area = cell.node.querySelector('.jp-OutputArea');
        return {
            index, grade_id: nbgrader.grade_id || '', graded: !!nbgrader.grade, solution: !!nbgrader.solution,
            executed: cell.model.executionCount !== null,
            outputs: cell.model.outputs.toJSON().map(o => ({type: o.output_type, ename: o.ename || '',
                                                            evalue: o.evalue || '', mimes: Object.keys(o.data || {})})),
            text: area ? area.innerText : '',
            images: area ? area.querySelectorAll('.jp-OutputArea-output img').length : 0,
            source: cell.model.sharedModel.getSource().split('\\n')[0],
        };
    }).filter(cell => cell !== null);
}"""

# Replaces the text of each solution cell, through the same shared model the editor edits.
FILL = """(solutions) => {
    const notebook = window.jupyterapp.shell.currentWidget.content;
    let filled = 0;
    for (const cell of notebook.widgets) {
        const nbgrader = cell.model.getMetadata('nbgrader') || {};
        if (nbgrader.solution && nbgrader.grade_id in solutions) {
            cell.model.sharedModel.setSource(solutions[nbgrader.grade_id]);
            filled += 1;
        }
    }
    return filled;
}"""

SHOW = """(index) => {
    const notebook = window.jupyterapp.shell.currentWidget.content;
    notebook.widgets[index].node.scrollIntoView({block: 'start'});
}"""

# Closes without saving (the copy on disk stays as released) and shuts the kernel down.
CLOSE = """async () => {
    const panel = window.jupyterapp.shell.currentWidget;
    const session = panel.sessionContext.session;
    panel.context.model.dirty = false;
    panel.dispose();
    // the server shuts the kernel down; the next notebook need not wait for it
    if (session) window.jupyterapp.serviceManager.sessions.shutdown(session.id);
}"""


def errors(cell: dict) -> list[str]:
    return [f"{o['ename']}: {o['evalue']}" for o in cell["outputs"] if o["type"] == "error"]


def describe(cell: dict) -> str:
    return f"cell {cell['index'] + 1} ({cell['grade_id'] or cell['source']!r})"


def check_images_rendered(cells: list[dict]) -> None:
    for cell in cells:
        pictures = sum(1 for o in cell["outputs"] for m in o["mimes"] if m.startswith("image/"))
        assert cell["images"] == pictures, f"{describe(cell)}: {pictures} image output(s), {cell['images']} shown"


def solutions_of(notebook: str) -> dict[str, str]:
    source = source_notebook(ROOT / "solutions" / f"{notebook}.py")
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
            if c.metadata.get("nbgrader", {}).get("solution")}


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_a_learner_runs_the_notebook_blank_then_solved(page, notebook):
    watch = Stopwatch(notebook)
    page.evaluate(OPEN, f"{notebook}.ipynb")
    watch.lap("open and start the kernel")
    try:
        # 1. every cell, exercises blank
        page.evaluate(RUN, "all")
        watch.lap("run blank")
        cells = page.evaluate(COLLECT)
        assert all(c["executed"] for c in cells), [describe(c) for c in cells if not c["executed"]]
        graded = [c for c in cells if c["graded"]]
        assert graded, f"{notebook} has no graded cell"
        for cell in graded:
            assert len(errors(cell)) == 1, f"{describe(cell)} must fail once, on its check, shows {errors(cell)}"
            assert STUB_MESSAGE.search(cell["text"]), \
                f"{describe(cell)} does not tell the learner the exercise is not implemented yet:\n{cell['text']}"
        unexpected = [f"{describe(c)}: {e}" for c in cells if not c["graded"] for e in errors(c)]
        assert not unexpected, f"errors outside the exercises' checks: {unexpected}"
        check_images_rendered(cells)

        # 2. the solutions typed in, the exercises and their checks run again
        solutions = solutions_of(notebook)
        assert page.evaluate(FILL, solutions) == len(solutions)
        page.evaluate(RUN, "exercises")
        watch.lap("run solved exercises")
        cells = page.evaluate(COLLECT)
        failing = [f"{describe(c)}: {e}" for c in cells if c["graded"] or c["solution"] for e in errors(c)]
        assert not failing, f"with the solutions filled in: {failing}"
        for cell in (c for c in cells if c["graded"]):
            assert "✓" in cell["text"] and "✗" not in cell["text"], f"{describe(cell)} does not pass:\n{cell['text']}"
        check_images_rendered(cells)
        SOLVED[notebook] = len([c for c in cells if c["graded"]])

        page.evaluate(SHOW, next(c["index"] for c in cells if c["graded"]))
        page.wait_for_timeout(300)
        page.screenshot(path=str(SCREENSHOTS / f"{notebook}.png"))
    finally:
        page.evaluate(CLOSE)
        watch.lap("close")
        watch.write()


def test_the_course_home_shows_modules_and_progress(page, lab):
    page.evaluate(OPEN, "course_home.ipynb")
    try:
        page.evaluate(SHOW, 0)
        page.wait_for_timeout(300)
        page.screenshot(path=str(SCREENSHOTS / "course_home.png"))   # what `make course` opens on
        page.evaluate(RUN, "all")
        cells = page.evaluate(COLLECT)
        assert not [e for c in cells for e in errors(c)], [errors(c) for c in cells]
        [progress] = cells
        assert progress["images"] == 1, "the progress chart is not shown"
        rows = page.evaluate("""() => [...document.querySelectorAll('table.tensorcraft-progress tbody tr')]
                                      .map(row => [...row.cells].map(cell => cell.innerText))""")
        titles = [row[0] for row in rows]
        assert [t[:2] for t in titles] == [n[:2] for n in NOTEBOOKS], titles
        for name, row in zip(NOTEBOOKS, rows):
            if name in SOLVED:          # every check of that notebook passed last: all passed, none else
                exercises = int(row[2].split("/")[1])
                assert row[2:5] == [f"{exercises} / {exercises}", f"0 / {exercises}", f"0 / {exercises}"], row
        page.evaluate(SHOW, progress["index"] - 1)
        page.wait_for_timeout(300)
        page.screenshot(path=str(SCREENSHOTS / "course_home_progress.png"))
    finally:
        page.evaluate(CLOSE)
