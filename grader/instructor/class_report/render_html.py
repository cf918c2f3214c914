"""The report as one self-contained HTML page: tables, the score distributions as inline PNG
(matplotlib, base64 in the page), and each flagged pair side by side with the shared passages marked.
No external assets: the page opens from a file, offline, and can be mailed."""
from __future__ import annotations

import base64
import html
import io
from pathlib import Path

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; } h3 { margin-bottom: .3em; }
table { border-collapse: collapse; margin: .5em 0 1em; }
td, th { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.review { background: #fde2e1; color: #a40000; padding: 0 .4em; border-radius: 3px; font-weight: 600; }
.help { background: #fff4d6; } .muted { color: #777; } pre { margin: 0; white-space: pre-wrap; font: 12px/1.35 monospace; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; margin-bottom: 1.5em; }
.pair > div { border: 1px solid #ddd; padding: .5em; overflow-x: auto; background: #fafafa; }
mark { background: #ffe066; } .example { margin: .2em 0 .6em 1em; }
"""


def esc(value: object) -> str:
    return html.escape(str(value))


def number(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def distribution_png(scores: list[float], max_score: float) -> str:
    """A small bar chart of how many learners scored each number of points, as a data: URL."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    figure, axes = plt.subplots(figsize=(2.6, 1.3), dpi=72)
    values = sorted(set(scores) | {0.0, float(max_score)})
    axes.bar([f"{v:g}" for v in values], [scores.count(v) for v in values], color="#4a7bb7")
    axes.tick_params(labelsize=7)
    axes.spines[["top", "right"]].set_visible(False)
    figure.tight_layout(pad=0.2)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def table(header: list[str], rows: list[list[str]], numeric: set[int] = frozenset(), classes: list[str] | None = None) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join(
        f"<tr{' class=' + repr(classes[r]) if classes and classes[r] else ''}>"
        + "".join(f"<td{' class=n' if i in numeric else ''}>{cell}</td>" for i, cell in enumerate(row)) + "</tr>"
        for r, row in enumerate(rows))
    return f"<table><tr>{head}</tr>{body}</table>"


def marked(text: str, marks: list[list[int]]) -> str:
    out, at = [], 0
    for start, end in marks:
        out += [esc(text[at:start]), f"<mark>{esc(text[start:end])}</mark>"]
        at = end
    out.append(esc(text[at:]))
    return "".join(out)


def exercises_section(data: dict) -> str:
    rows = []
    for e in data["exercises"]:
        review = f"<span class=review>{esc(e['review'])}</span>" if e["review"] else ""
        plot = f"<img alt='scores of {esc(e['exercise'])}' src='{distribution_png(e['scores'], e['max_score'])}'>" \
            if e["scores"] else ""
        rows.append([esc(e["assignment"]), esc(e["exercise"]), f"{e['max_score']:g}", str(e["submitted"]),
                     str(e["attempted"]), str(e["passed"]), number(e["difficulty"]), number(e["point_biserial"]),
                     number(e["upper_lower"]), review, plot])
    return ("<h2 id=exercises>Per exercise</h2><p class=muted>difficulty: share of the points earned; r: corrected "
            "point-biserial (item against the rest of the course total); D: upper − lower 27 % index. Items with "
            "r &lt; 0.2 are marked for review (negative: strong learners fail it more than weak ones).</p>"
            + table(["notebook", "exercise", "points", "submitted", "attempted", "passed", "difficulty", "r", "D",
                     "review", "scores"], rows, numeric={2, 3, 4, 5, 6, 7, 8}))


def misconceptions_section(data: dict) -> str:
    parts = ["<h2 id=misconceptions>Misconceptions</h2><p class=muted>Learners whose wrong answer matched each "
             "known mistake (mutant), as their own feedback diagnosed it; and wrong answers no known mistake explains.</p>"]
    for m in data["misconceptions"]:
        if not m["wrong"]:
            continue
        parts.append(f"<h3>{esc(m['assignment'])} · {esc(m['exercise'])} <span class=muted>({m['wrong']} wrong "
                     f"answer{'s' * (m['wrong'] != 1)})</span></h3>")
        rows = [[str(x["learners"]), f"<code>{esc(x['mutant'])}</code>", esc(x["hint"])] for x in m["mutants"]]
        if m["unexplained"]:
            rows.append([str(m["unexplained"]), "<i>no known mistake</i>", "write the next mutant from these:"])
        parts.append(table(["learners", "mutant", "hint"], rows, numeric={0}))
        for example in m["examples"]:
            parts.append(f"<div class=example><b>{esc(example['learner'])}</b> ({esc(example['reason'])}): "
                         f"<pre>{esc(example['shown'])}\n{esc(example['difference'])}</pre></div>")
    return "".join(parts)


def faults_section(data: dict) -> str:
    kinds = data["faults"]["kinds"]
    by_exercise = [r for r in data["faults"]["by_exercise"] if any(r[k] for k in kinds)]
    rows = [[esc(r["assignment"]), esc(r["exercise"]), *[str(r[k]) for k in kinds]] for r in by_exercise]
    learners = [[esc(r["learner"]), *[str(r[k]) for k in kinds]] for r in data["faults"]["by_learner"]]
    numeric = set(range(2, 2 + len(kinds)))
    return ("<h2 id=faults>Besides the answers</h2><p class=muted>Time-outs, dead kernels, cells not run, other errors "
            "of a test cell, forbidden calls (tripwires), inputs changed in place, and grading code modified.</p>"
            "<h3>Per exercise (learners)</h3>" + (table(["notebook", "exercise", *kinds], rows, numeric) if rows else "<p>none</p>")
            + "<h3>Per learner (cells)</h3>"
            + (table(["learner", *kinds], learners, {n - 1 for n in numeric}) if learners else "<p>none</p>"))


def learners_section(data: dict) -> str:
    notebooks = data["notebooks"]
    rows, classes = [], []
    for r in data["learner_table"]:
        rows.append([esc(r["learner"]), *[f"{r['notebooks'][n]:g}" if n in r["notebooks"] else "—" for n in notebooks],
                     f"{r['total']:g} / {r['max']:g}", f"{100 * r['share']:.0f} %", str(r["attempted_not_passed"]),
                     "needs help" if r["needs_help"] else ""])
        classes.append("help" if r["needs_help"] else "")
    return ("<h2 id=learners>Per learner</h2><p class=muted>Those who need help first: the lowest share of points, "
            "then the most exercises attempted without a pass.</p>"
            + table(["learner", *notebooks, "total", "share", "attempted, not passed", ""], rows,
                    set(range(1, len(notebooks) + 4)), classes))


def similarity_section(data: dict) -> str:
    s = data["similarity"]
    parts = [f"<h2 id=similarity>Similar answers</h2><p class=muted>Winnowing fingerprints of the solution cells "
             f"({s['documents']} notebooks; {s['k']}-token k-grams, window {s['window']}; identifiers and literals "
             f"normalised; the course's own code and the class's common idioms ignored) and of {s['library_files']} "
             f"library files. A pair sharing {s['min_shared']} or more fingerprints is shown. Flagging only: no grade "
             f"changes.</p>"]
    if not s["pairs"]:
        parts.append("<p>No pair flagged.</p>")
    for p in s["pairs"]:
        parts.append(f"<h3>{esc(p['notebook'])}: {esc(p['one'])} and {esc(p['other'])} "
                     f"<span class=muted>({p['shared']} shared fingerprints, {100 * p['similarity']:.0f} %)</span></h3>"
                     f"<div class=pair><div><b>{esc(p['one'])}</b><pre>{marked(p['one_text'], p['one_marks'])}</pre></div>"
                     f"<div><b>{esc(p['other'])}</b><pre>{marked(p['other_text'], p['other_marks'])}</pre></div></div>")
    return "".join(parts)


def render(data: dict) -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>Class report · {esc(data['course'])}</title>"
            f"<style>{STYLE}</style></head><body><h1>Class report</h1>"
            f"<p class=muted>{esc(data['course'])} · {data['learners']} learners · notebooks "
            f"{esc(', '.join(data['notebooks']))} · generated {esc(data['generated'])}</p>"
            "<p><a href=#exercises>exercises</a> · <a href=#misconceptions>misconceptions</a> · <a href=#faults>"
            "besides the answers</a> · <a href=#learners>learners</a> · <a href=#similarity>similar answers</a></p>"
            + exercises_section(data) + misconceptions_section(data) + faults_section(data)
            + learners_section(data) + similarity_section(data) + "</body></html>")


def write_html(data: dict, path: Path) -> Path:
    path.write_text(render(data), encoding="utf-8")
    return path
