"""The class report's parts on small inputs: item statistics against a hand computation, winnowing
on short strings, candidate pairs, and reading outcome records and faults from cells."""
import math

import pytest

from grader.instructor.class_report import items, similarity
from grader.instructor.class_report.build import excerpt
from grader.instructor.class_report.records import cell_faults, layout, outcome_records
from grader.checks.record import MIME


# ---------------------------------------------------------------- item statistics, by hand

def test_item_statistics_of_a_small_class_by_hand():
    scores = {"A": 2, "B": 2, "C": 0, "D": 2, "E": 0}          # the item, out of 2
    totals = {"A": 10, "B": 7, "C": 6, "D": 3, "E": 2}          # the course totals, the item included
    got = items.item_statistics(scores, totals, 2)
    # difficulty: mean score 6/5 over 2 points
    assert got.difficulty == pytest.approx((6 / 5) / 2)
    # rest = total - item: 8, 5, 6, 1, 2 (mean 4.4); item mean 1.2
    dx = [0.8, 0.8, -1.2, 0.8, -1.2]
    dy = [3.6, 0.6, 1.6, -3.4, -2.4]
    sxy = sum(x * y for x, y in zip(dx, dy))                    # 2.88 + 0.48 - 1.92 - 2.72 + 2.88 = 1.6
    r = sxy / math.sqrt(sum(x * x for x in dx) * sum(y * y for y in dy))   # 1.6 / sqrt(4.8 * 33.2)
    assert sxy == pytest.approx(1.6) and r == pytest.approx(0.12675, abs=1e-5)
    assert got.point_biserial == pytest.approx(r)
    # 27 % of 5 learners: round(1.35) = 1 each side; top by total is A (2 points), bottom E (0)
    assert got.upper_lower == pytest.approx((2 - 0) / 2)
    assert got.review == "poor"                                  # 0 <= r < 0.2


def test_an_item_the_weak_pass_and_the_strong_fail_is_negative():
    scores, totals = {"A": 0, "B": 0, "C": 2, "D": 2}, {"A": 9, "B": 8, "C": 3, "D": 2}
    got = items.item_statistics(scores, totals, 2)
    # rest 9, 8, 1, 0 (mean 4.5); item deviations -1, -1, 1, 1: sxy = -4.5 - 3.5 - 3.5 - 4.5 = -16
    assert got.point_biserial == pytest.approx(-16 / math.sqrt(4 * 65))
    assert got.upper_lower == pytest.approx((0 - 2) / 2)         # round(0.27 * 4) = 1: A against D
    assert got.review == "negative"


def test_an_item_everyone_passed_has_no_discrimination_and_is_not_marked():
    got = items.item_statistics({"A": 3, "B": 3, "C": 3}, {"A": 9, "B": 5, "C": 4}, 3)
    assert got.difficulty == 1.0 and got.point_biserial is None and got.review == ""
    assert got.upper_lower == 0.0


def test_a_discriminating_item_is_not_marked():
    got = items.item_statistics({"A": 2, "B": 2, "C": 0, "D": 0}, {"A": 9, "B": 8, "C": 2, "D": 1}, 2)
    assert got.point_biserial > items.POOR and got.review == ""


# ---------------------------------------------------------------- winnowing

def _words(text):
    return [w for w, _, _ in similarity.tokens(text)]


def test_renamed_variables_comments_and_blank_lines_change_no_token():
    one = "def f(a, b):\n    total = a + 1  # add\n\n    return total.sum(dim=0)\n"
    other = "def g(x, y):\n    s = x + 7\n    return s.sum(dim=0)\n"
    assert _words(one) == _words(other)
    assert "sum" in _words(one) and "def" in _words(one) and "V" in _words(one)
    assert _words("x.sum()") != _words("x.mean()")               # attribute names stay
    assert _words("'a string'") == ["S"] and _words("3.5") == ["N"]


def test_token_offsets_point_into_the_text_and_unparsable_text_is_still_tokenized():
    text = "x = foo(1)\nif x:\n    y = 'abc'\n"
    for _word, start, end in similarity.tokens(text):
        assert text[start:end] in ("x", "=", "foo", "(", "1", ")", "if", ":", "y", "'abc'")
    broken = "s = 'unterminated\nreturn s +"
    assert _words(broken)[:2] == ["V", "="]


def test_winnowing_keeps_the_minimum_of_every_window():
    hashes = [5, 3, 9, 7, 1, 8, 6, 4, 2]
    chosen = similarity.winnow(hashes)
    for start in range(len(hashes) - similarity.WINDOW + 1):
        assert min(hashes[start:start + similarity.WINDOW]) in chosen
    assert chosen <= set(hashes)
    assert similarity.winnow([4, 2]) == {2} and similarity.winnow([]) == set()


def test_a_shared_run_as_long_as_the_guarantee_always_shares_a_fingerprint():
    run = "q = w . e ( r , t ) * y".split()                     # 12 tokens >= K + WINDOW - 1
    assert len(run) >= similarity.K + similarity.WINDOW - 1
    left = " ".join(["alpha", "+"] * 7 + run)
    right = " ".join(run + ["-", "3", "/", "beta"] * 5)
    assert similarity.Document.of("l", "n", left).fingerprints & similarity.Document.of("r", "n", right).fingerprints


LONG = '''def outer(a, b):
    rows = a.reshape(-1, 1)
    cols = b.reshape(1, -1)
    product = rows * cols
    if product.dim() != 2:
        raise ValueError("the outer product of two vectors is a matrix")
    assert product.shape == (a.shape[0], b.shape[0]), "one row per entry of a"
    return product
'''


def test_only_the_copied_pair_is_flagged_not_the_course_code_nor_a_class_idiom():
    copy = LONG.replace("rows", "left").replace("cols", "right").replace("product", "table")
    scaffold = "def outer(a, b):\n    raise NotImplementedError()\n"
    idiom = "def outer(a, b):\n    return torch.einsum('i,j->ij', a, b).contiguous().clone().detach().reshape(len(a), len(b))\n"
    documents = [similarity.Document.of("ann", "00", LONG), similarity.Document.of("bob", "00", copy),
                 similarity.Document.of("cid", "00", scaffold), similarity.Document.of("dan", "00", scaffold)]
    documents += [similarity.Document.of(f"idiom{i}", "00", idiom) for i in range(similarity.common(10) + 1)]
    ignored = {"00": similarity.course_code([scaffold])}
    pairs = similarity.similar_pairs(documents, ignored, min_shared=3)
    assert [(p.one.learner, p.other.learner) for p in pairs] == [("ann", "bob")]
    one, other = pairs[0].marks(ignored["00"])
    assert "raise ValueError" in "".join(LONG[s:e] for s, e in one)
    assert "raise ValueError" in "".join(copy[s:e] for s, e in other)
    # the same documents in another notebook are never paired with these
    assert similarity.similar_pairs([documents[0], similarity.Document.of("bob", "01", copy)], {}, min_shared=3) == []


def test_an_answer_pasted_from_the_library_is_flagged_against_that_file(tmp_path):
    library = tmp_path / "tensorcraft"
    (library / "sub").mkdir(parents=True)
    (library / "sub" / "helpers.py").write_text("import torch\n\n\n" + LONG + "\n\ndef other():\n    return 1\n")
    (library / "unrelated.py").write_text("def unrelated(x):\n    return [x] * 3\n")
    files = similarity.library_documents(library)
    pairs = similarity.similar_pairs([similarity.Document.of("eve", "00", LONG.replace("rows", "r"))], {}, files,
                                     min_shared=3)
    assert [(p.one.learner, p.other.learner, p.other.assignment) for p in pairs] == [("eve", "library", "tensorcraft/sub/helpers.py")]


def test_an_excerpt_keeps_the_marked_lines_with_context_and_moves_the_marks():
    text = "".join(f"line {i}\n" for i in range(20))
    start = text.index("line 10")
    part, marks = excerpt(text, [(start, start + 7)], context=1)
    assert part == "...\nline 9\nline 10\nline 11\n"
    assert [part[s:e] for s, e in marks] == ["line 10"]


# ---------------------------------------------------------------- reading a graded notebook

def test_faults_are_read_from_the_graders_own_error_names_and_records_from_their_mime_type():
    def error(name):
        return {"output_type": "error", "ename": name, "evalue": "", "traceback": []}
    assert cell_faults({"outputs": [error("KeyboardInterrupt"), error("CellTimeoutError")]}) == ["timeout"]
    assert cell_faults({"outputs": [error("DeadKernelError")]}) == ["kernel died"]
    assert cell_faults({"outputs": [error("AssertionError")]}) == []
    assert cell_faults({"outputs": [error("NameError")]}) == ["error"]
    old, new = ({"exercise": "nb00_welcome.outer", "hidden": False, "failures": [], "n": n} for n in (1, 2))
    cell = {"outputs": [{"output_type": "display_data", "data": {MIME: old, "text/plain": ""}},
                        {"output_type": "display_data", "data": {MIME: new, "text/plain": ""}},
                        {"output_type": "stream", "text": "{}"}]}
    assert outcome_records(cell) == [new]                      # the last one per check and public/hidden


def test_the_layout_pairs_each_solution_cell_with_its_test_cells():
    def cell(grade_id, source, **meta):
        return {"cell_type": "code", "source": source, "metadata": {"nbgrader": {"grade_id": grade_id, **meta}}}
    release = {"cells": [cell("outer", "def outer(a, b):\n    raise NotImplementedError()", solution=True),
                         cell("outer_tests", "check_outer(outer)", grade=True, points=2),
                         cell("extra", "check_outer(outer, hidden=True)", grade=True, points=1)]}
    got = layout("00_welcome", release)
    assert got.exercises == ["outer"] and got.tests == {"outer": [("outer_tests", 2.0), ("extra", 1.0)]}
    assert got.stubs["outer"].endswith("NotImplementedError()")


def test_the_command_says_to_grade_first_when_nothing_was_graded(tmp_path, capsys):
    from grader.cli import main
    assert main(["report", "--course", str(tmp_path / "course")]) == 2
    assert "run `python -m grader autograde SUBMISSIONS" in capsys.readouterr().err
