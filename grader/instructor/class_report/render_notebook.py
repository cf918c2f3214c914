"""The report as a notebook for JupyterLab: it loads ``report.json`` beside it and shows the same
tables (rendered by ``render_html``, so the page and the notebook never disagree) and plots, to be
explored further with the instructor's own code."""
from __future__ import annotations

from pathlib import Path

import nbformat

INTRO = """# Class report

The tables of `python -m grader report`, loaded from `{json}` beside this notebook (run the command
again to refresh it). `data` holds everything as plain Python: `data["exercises"]`,
`data["misconceptions"]`, `data["faults"]`, `data["learner_table"]`, `data["similarity"]["pairs"]`."""

LOAD = """import json
from pathlib import Path

from IPython.display import HTML, display
from grader.instructor.class_report import render_html

data = json.loads(Path({json!r}).read_text())
print(f"{{data['learners']}} learners, notebooks {{', '.join(data['notebooks'])}}, generated {{data['generated']}}")"""

SCATTER = """%matplotlib inline
from matplotlib import pyplot as plt

items = [e for e in data["exercises"] if e["difficulty"] is not None]
figure, axes = plt.subplots(figsize=(6, 4))
axes.scatter([e["difficulty"] for e in items], [e["point_biserial"] or 0 for e in items],
             c=["#c00" if e["review"] else "#4a7bb7" for e in items])
for e in items:
    axes.annotate(e["exercise"], (e["difficulty"], e["point_biserial"] or 0), fontsize=7)
axes.axhline(0.2, color="#999", linestyle=":")
axes.set_xlabel("difficulty (share of points earned)")
axes.set_ylabel("discrimination (corrected point-biserial)")
plt.show()"""


def write_notebook(path: Path, json_name: str) -> Path:
    cells = [nbformat.v4.new_markdown_cell(INTRO.format(json=json_name)),
             nbformat.v4.new_code_cell(LOAD.format(json=json_name)),
             nbformat.v4.new_markdown_cell("## Per exercise"),
             nbformat.v4.new_code_cell("display(HTML(render_html.exercises_section(data)))"),
             nbformat.v4.new_code_cell(SCATTER),
             nbformat.v4.new_markdown_cell("## Misconceptions"),
             nbformat.v4.new_code_cell("display(HTML(render_html.misconceptions_section(data)))"),
             nbformat.v4.new_markdown_cell("## Besides the answers"),
             nbformat.v4.new_code_cell("display(HTML(render_html.faults_section(data)))"),
             nbformat.v4.new_markdown_cell("## Per learner"),
             nbformat.v4.new_code_cell("display(HTML(render_html.learners_section(data)))"),
             nbformat.v4.new_markdown_cell("## Similar answers"),
             nbformat.v4.new_code_cell("display(HTML(render_html.STYLE.join(['<style>', '</style>']) "
                                       "+ render_html.similarity_section(data)))")]
    notebook = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}})
    nbformat.write(notebook, path)
    return path
