"""One JupyterLab server and one headless Chromium for the browser tests, shared by the whole module.

The server runs from this Python (the project's environment) on a free local port with a token of
our own, on a copy of notebooks/ (the repository's notebooks are never edited), with JupyterLab's
settings and workspaces in a temporary folder, and the learner's progress recorded to a file of the
test's own. The browser is Debian's Chromium (``/usr/bin/chromium``, or ``TENSORCRAFT_CHROMIUM``)
driven by Playwright; nothing is downloaded. Where either is missing, the tests are skipped with
that reason (``pytest -ra`` prints it).
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "e2e"
# the learner's JupyterLab settings, as `make course` applies them (tests/grader/test_lab_roles.py)
LEARNER_JUPYTER = ROOT / "grader" / "jupyter" / "learner"
CHROMIUM = os.environ.get("TENSORCRAFT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
SETTINGS = {
    # every cell stays in the page (JupyterLab otherwise detaches the cells scrolled out of view)
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    # no "news" or "update" notification over the notebook
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                          "checkForUpdates": False},
}


def _browser_or_skip() -> None:
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"Chromium not found at {CHROMIUM}: the browser test needs Debian's 'chromium' package "
                    "(`make test` installs it when run as root where apt-get exists)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as error:
        pytest.skip(f"Playwright is not installed ({error}): `pip install -e '.[test]'` installs it")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until_up(url: str, server: subprocess.Popen, log: Path, patience: float = 120.0) -> None:
    deadline = time.monotonic() + patience
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"JupyterLab exited ({server.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=10):
                return
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not answer at {url}:\n{log.read_text()[-3000:]}") from None
            time.sleep(0.5)


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of Debian's Chromium for a test that drives it without JupyterLab, or a skip saying what is missing."""
    _browser_or_skip()
    return CHROMIUM


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(base URL, token, notebook folder, progress file) of a running JupyterLab."""
    _browser_or_skip()
    root = tmp_path_factory.mktemp("lab")
    notebooks = root / "notebooks"
    shutil.copytree(ROOT / "notebooks", notebooks, ignore=shutil.ignore_patterns(".*"))
    settings = root / "settings"
    for name, values in SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(values))
    progress = root / "progress.json"
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "TENSORCRAFT_PROGRESS": str(progress), "JUPYTER_CONFIG_DIR": str(root / "config"),
           "JUPYTER_CONFIG_PATH": str(LEARNER_JUPYTER)}
    env.pop("NBGRADER_EXECUTION", None)
    log = root / "lab.log"
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--port-retries=0",
               "--ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--notebook-dir={notebooks}",
               "--LabApp.expose_app_in_browser=True", f"--LabApp.user_settings_dir={settings}",
               f"--LabApp.workspaces_dir={root / 'workspaces'}", "--ServerApp.allow_root=True"]
    with log.open("w") as out:
        server = subprocess.Popen(command, cwd=notebooks, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}/"
    try:
        _wait_until_up(f"{base}api/status?token={token}", server, log)
        yield base, token, notebooks, progress
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="module")
def page(lab):
    """One Chromium page on JupyterLab, the app reachable as ``window.jupyterapp``."""
    from playwright.sync_api import sync_playwright

    base, token, _, _ = lab
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / "timings.txt").unlink(missing_ok=True)   # this run's seconds per step only
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                             args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{base}lab?token={token}")
            page.wait_for_function("window.jupyterapp && window.jupyterapp.shell && "
                                   "document.querySelector('.jp-DirListing-content')", timeout=120_000)
            yield page
        finally:
            browser.close()
