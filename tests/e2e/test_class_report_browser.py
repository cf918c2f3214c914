"""The instructor's class report (`python -m grader report`) as a browser shows it: Debian's Chromium
opens report.html from a file, offline, and every plot is an image that decoded, the flagged pair's
shared passages are marked, and nothing is fetched from anywhere. Screenshot: build/e2e/class_report.png.

The class is synthesised as `autograde` leaves it (benchmarks/report.py, small), so that this test
needs no grading run; tests/grader/test_class_report.py grades a planted class for real."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "e2e"
_spec = importlib.util.spec_from_file_location("report_benchmark", ROOT / "benchmarks" / "report.py")
report_benchmark = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report_benchmark)


@pytest.fixture(scope="module")
def report_page(tmp_path_factory, chromium):
    from grader.instructor.class_report.build import write_report
    root = tmp_path_factory.mktemp("class_report")
    course = report_benchmark.synthesise(root, learners=12, notebooks=2)
    written = write_report(course, root / "report")
    return next(p for p in written if p.name == "report.html")


def test_the_report_opens_offline_with_its_plots_and_marked_pairs(report_page, chromium):
    from playwright.sync_api import sync_playwright
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    fetched = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium,
                                             args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("request", lambda request: fetched.append(request.url))
            page.goto(report_page.as_uri())
            page.wait_for_load_state("load")
            shown = page.evaluate("""() => ({
                images: [...document.images].map(i => i.complete && i.naturalWidth > 0),
                sections: [...document.querySelectorAll('h2')].map(h => h.textContent),
                marks: document.querySelectorAll('.pair mark').length,
                pairs: document.querySelectorAll('.pair').length,
                rows: document.querySelectorAll('table tr').length,
            })""")
            page.screenshot(path=str(SCREENSHOTS / "class_report.png"), full_page=True)
        finally:
            browser.close()
    assert shown["sections"] == ["Per exercise", "Misconceptions", "Besides the answers", "Per learner", "Similar answers"]
    assert shown["images"] and all(shown["images"]), "a plot did not decode"
    assert shown["pairs"] >= 1 and shown["marks"] >= 2, shown          # the synthesised class has copied answers
    assert [url for url in fetched if not url.startswith(("file:", "data:"))] == []
