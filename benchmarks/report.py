"""`python -m benchmarks report [--learners N] [--notebooks M] [--keep DIR]`: the class report's time
for a large class.

A class of N learners x M notebooks (default 500 x 12) is synthesised as `autograde` leaves it: per
learner and notebook an autograded notebook (the course's own release, its solution cells answered
by the model answer with the variables renamed and lines of the learner's own added, or left as
the stub; its test cells holding the checks' outcome records, passed, failed with a known mistake
or without, or timed out) and a row of the scores CSV; a few pairs of learners hand in the same
answers renamed. The report is then written, timing each stage (reading, tables, similarity,
HTML and notebook). Side by side, the similarity stage's candidate pairs from the inverted index
against comparing every pair's fingerprint sets (what the index avoids), on one notebook.
"""
from __future__ import annotations

import argparse
import csv
import json
import random
import re
import resource
import shutil
import tempfile
import time
from pathlib import Path

from grader.instructor.build import source_notebook
from grader.checks.record import MIME
from grader.instructor.class_report import similarity
from grader.instructor.class_report.build import HTML_NAME, JSON_NAME, NOTEBOOK_NAME, report_data, write_tables
from grader.instructor.class_report.records import load
from grader.instructor.class_report.render_html import write_html
from grader.instructor.class_report.render_notebook import write_notebook
from grader.course import NOTEBOOKS, SOLUTIONS, Course
from grader.instructor.export import CSV_NAME

NAME = re.compile(r"\b([a-z_][a-z0-9_]{2,})\b")
KEEP = {"def", "return", "for", "in", "if", "else", "elif", "not", "and", "or", "None", "True", "False", "range",
        "len", "torch", "self", "raise", "import", "from", "while", "with", "lambda", "yield", "tuple", "list", "dict"}


def model_answers(notebook) -> dict[str, str]:
    """Solution cell grade_id -> the model answer's source (the source notebook's cell, markers removed)."""
    return {c.metadata["nbgrader"]["grade_id"]: re.sub(r"\s*### (BEGIN|END) SOLUTION", "", c.source)
            for c in notebook.cells if c.metadata.get("nbgrader", {}).get("solution")}


METHODS = ("sum", "mean", "max", "min", "abs", "exp", "log", "sqrt", "float", "int", "clone", "flatten", "reshape",
           "view", "permute", "transpose", "contiguous", "unsqueeze", "squeeze", "size", "numel", "dim", "tolist",
           "item", "sort", "argmax", "cumsum", "prod", "norm", "round")
OPERATORS = ("+", "-", "*", "/", "//", "%", "**", "@")


def own_line(rng: random.Random) -> str:
    """A line of a learner's own: its structure (methods, operators) varies, so that it survives
    the report's normalisation of names and numbers."""
    one, two = rng.sample(METHODS, 2)
    return (f"    note_{rng.randrange(10**6)} = (x{rng.randrange(9)}.{one}() {rng.choice(OPERATORS)} "
            f"y{rng.randrange(9)}.{two}({rng.randrange(3)})) {rng.choice(OPERATORS)} {rng.randrange(100)}\n")


def learner_answer(model: str, rng: random.Random) -> str:
    """The model answer with its local names renamed and a few lines of the learner's own."""
    names = sorted({n for n in NAME.findall(model) if n not in KEEP})
    renamed = {n: f"{n}_{rng.randrange(1000)}" for n in rng.sample(names, k=min(len(names), 3))}
    body = NAME.sub(lambda m: renamed.get(m.group(1), m.group(1)), model)
    extra = "".join(own_line(rng) for _ in range(rng.randrange(2, 7)))
    lines = body.splitlines(keepends=True)
    return "".join(lines[:1]) + extra + "".join(lines[1:])


def record(exercise: str, hidden: bool, outcome: str, rng: random.Random) -> dict:
    failures = [] if outcome == "pass" else [{
        "device": "cpu", "group": "a group of cases", "case": 1, "cases": 4,
        "reason": "not implemented" if outcome == "stub" else "wrong result", "error": "",
        "mutant": f"mistake_{rng.randrange(4)}" if outcome == "mutant" else None,
        "hint": "what to look at", "shown": f"{exercise.split('.')[-1]}(tensor([1, 2, 3]))",
        "difference": "element [0, 1]: expected 2, got 3"}]
    return {"version": 1, "exercise": exercise, "check": f"check_{exercise.split('.')[-1]}", "hidden": hidden,
            "seed": rng.randrange(10**6) if hidden else None,
            "groups": {"passed": 3 if outcome == "pass" else 2, "failed": len(failures), "pending": 1},
            "failures": failures}


def synthesise(root: Path, learners: int, notebooks: int, seed: int = 0) -> Course:
    """The course directory `autograde` would leave for such a class (see the module docstring)."""
    rng = random.Random(seed)
    course = Course(root / "course")
    assignments = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))[:notebooks]
    rows, columns = [], []
    copies = {f"learner{i:04d}": f"learner{i + 1:04d}" for i in range(0, learners - 1, 50)}   # 2 % copy
    for assignment in assignments:
        release = json.loads((NOTEBOOKS / f"{assignment}.ipynb").read_text())
        source = source_notebook(SOLUTIONS / f"{assignment}.py")
        for path, notebook in ((course.release(assignment), release), (course.source(assignment), source)):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(notebook))
        models = model_answers(source)
        tests = [c for c in release["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]
        columns += [c["metadata"]["nbgrader"]["grade_id"] for c in tests if c["metadata"]["nbgrader"]["grade_id"] not in columns]
        answered: dict[str, dict[str, str]] = {}
        for number in range(learners):
            learner = f"learner{number:04d}"
            notebook = json.loads(json.dumps(release))
            row = {"learner": learner, "assignment": assignment}
            mine = answered.setdefault(learner, {})
            for cell in notebook["cells"]:
                meta = cell["metadata"].get("nbgrader", {})
                if meta.get("solution") and meta["grade_id"] in models:
                    copied = next((a for a, b in copies.items() if b == learner), None)
                    if copied and meta["grade_id"] in answered.get(copied, {}):
                        source = NAME.sub(lambda m: m.group(1) + "_c" if m.group(1).startswith("note_") else m.group(1),
                                          answered[copied][meta["grade_id"]])
                    elif rng.random() < 0.08:
                        source = "".join(cell["source"])
                    else:
                        source = learner_answer(models[meta["grade_id"]], rng)
                    mine[meta["grade_id"]] = cell["source"] = source
                if meta.get("grade"):
                    name = meta["grade_id"].removesuffix("_tests")
                    exercise = f"nb{assignment}.{name}"
                    stub = mine.get(name, "").rstrip().endswith("raise NotImplementedError()")
                    outcome = "stub" if stub else rng.choices(["pass", "mutant", "wrong", "timeout"], [70, 18, 10, 2])[0]
                    if outcome == "timeout":
                        cell["outputs"] = [{"output_type": "error", "ename": "CellTimeoutError", "traceback": [],
                                            "evalue": "this cell ran past its 30 s time limit and was interrupted"}]
                    else:
                        cell["outputs"] = [{"output_type": "display_data", "metadata": {},
                                            "data": {"text/plain": "check report text\n" * 8,
                                                     MIME: record(exercise, hidden, outcome, rng)}}
                                           for hidden in (False, True)]
                        if outcome != "pass":
                            cell["outputs"].append({"output_type": "error", "ename": "AssertionError", "traceback": [],
                                                    "evalue": f"check_{name}: 1 of 3 groups failed"})
                    row[meta["grade_id"]] = meta["points"] if outcome == "pass" else 0
            path = course.autograded(learner, assignment)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(notebook))
            rows.append(row)
    with (course.root / CSV_NAME).open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=["learner", "assignment", *columns, "total", "max"], restval="")
        writer.writeheader()
        writer.writerows(rows)
    return course


def cpu_seconds() -> float:
    """CPU time of this process and of its finished worker processes (the fingerprints' pool)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def all_pairs(documents: list[similarity.Document], ignored: set[int]) -> int:
    """Shared fingerprints of every pair, compared set against set: what the inverted index avoids."""
    flagged = 0
    prints = [d.fingerprints - ignored for d in documents]
    for i, one in enumerate(prints):
        for other in prints[i + 1:]:
            flagged += len(one & other) >= similarity.MIN_SHARED
    return flagged


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=500)
    parser.add_argument("--notebooks", type=int, default=12)
    parser.add_argument("--keep", type=Path, help="synthesise the class here and keep it (default: a temporary folder)")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="tensorcraft-report-bench-"))
    try:
        started = time.perf_counter()
        course = synthesise(root, args.learners, args.notebooks)
        print(f"synthesised {args.learners} learners x {args.notebooks} notebooks in {time.perf_counter() - started:.1f} s")
        out, times = root / "report", {}
        clock = (time.perf_counter(), cpu_seconds())

        def lap(stage: str) -> None:
            nonlocal clock
            now = (time.perf_counter(), cpu_seconds())
            times[stage] = (now[0] - clock[0], now[1] - clock[1])
            clock = now
        records = load(course)
        lap("read the autograded notebooks and CSV")
        data = report_data(course, records)
        lap("tables and similarity")
        write_tables(data, out)
        write_html(data, out / HTML_NAME)
        write_notebook(out / NOTEBOOK_NAME, JSON_NAME)
        lap("JSON, CSV, HTML (plots) and notebook")
        print(f"{'stage':<42} {'wall':>7}   {'CPU':>7}   (CPU: this process's and its workers', whatever else the machine runs)")
        for stage, (wall, cpu) in times.items():
            print(f"{stage:<42} {wall:7.1f} s {cpu:7.1f} s")
        print(f"{'the whole report':<42} {sum(w for w, _ in times.values()):7.1f} s "
              f"{sum(c for _, c in times.values()):7.1f} s   ({len(data['similarity']['pairs'])} pairs flagged)")

        from grader.instructor.class_report.build import course_code, documents
        first = sorted(records.layouts)[0]
        docs = [d for d in documents(records) if d.assignment == first]
        ignored = course_code(course, first)
        started = time.perf_counter()
        indexed = len([p for p in similarity.similar_pairs(docs, {first: ignored}) if p.other.learner != similarity.LIBRARY])
        index_seconds = time.perf_counter() - started
        started = time.perf_counter()
        every = all_pairs(docs, ignored)
        pair_seconds = time.perf_counter() - started
        print(f"similarity of {first} ({len(docs)} notebooks): inverted index {index_seconds:.2f} s ({indexed} pairs), "
              f"all pairs {pair_seconds:.2f} s ({every} pairs, no idiom filter): {pair_seconds / max(index_seconds, 1e-9):.1f}x")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0
