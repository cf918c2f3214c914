"""A class on a real JupyterHub, end to end, loopback only (README, "Running a class on JupyterHub").

The hub runs the recipe's own config (grader/jupyter/hub/jupyterhub_config.py): PAM logins of local
users, each learner's JupyterLab started as that user in their home by the LocalProcessSpawner, with
the learner's Jupyter configuration and the course's nbgrader settings, behind a real
configurable-http-proxy (npm, `make hub-proxy`). The test creates two local users (so it runs as
root), an exchange and a course directory holding notebook 00, and starts and stops every server.

In Chromium, each learner logs in, fetches notebook 00 from the Assignment List, answers it (one
right, one wrong) and runs its checks, sees their own progress in the course home, and submits. The
instructor collects and grades with ``python -m grader autograde`` (sandboxed) and releases the
feedback; each learner fetches their own. Screenshots: build/e2e/hub_<step>_<learner>.png; seconds per
step: build/e2e/hub_timings.txt.
"""
from __future__ import annotations

import html
import importlib.util
import json
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import urllib.parse
from pathlib import Path

import pytest

import fake_class
from grader.worker import sandbox
from grader.instructor.build import build
from grader.course import Course, put_python_scripts_on_path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
HUB_CONFIG = ROOT / "grader" / "jupyter" / "hub" / "jupyterhub_config.py"
PROXY = ROOT / ".venv" / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
ASSIGNMENT = "00_welcome"
ANSWERS = {"a": "correct", "b": "wrong"}        # learner suffix -> the fake class's learner they answer as


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


e2e = _load("e2e_conftest", HERE / "conftest.py")           # Chromium, free ports
browser_test = _load("e2e_learner_browser", HERE / "test_learner_browser.py")   # the page scripts

pytestmark = pytest.mark.hub


def _needs() -> str | None:
    """Why this machine cannot run the class, or None."""
    if os.getuid() != 0:
        return "the JupyterHub test creates local users and spawns their servers: it runs as root"
    if not (PROXY.exists() or shutil.which("configurable-http-proxy")):
        return (f"no configurable-http-proxy ({PROXY}): `make hub-proxy` installs it with npm "
                "(Debian's 'nodejs' and 'npm' packages)")
    if shutil.which("useradd") is None or shutil.which("chpasswd") is None:
        return "useradd/chpasswd not found: the test makes its learners local users"
    closed = [p for p in (ROOT, Path(sysconfig.get_paths()["purelib"])) if not _traversable_by_anyone(p)]
    if closed:
        return (f"the learners' servers run as other users and import the course from {closed[0]}, which a "
                "folder above closes to them (e.g. a clone under /root): clone it where others may read")
    return sandbox.unavailable()


def _traversable_by_anyone(path: Path) -> bool:
    """Every folder on the way (and the file itself) open to other users (the execute bit)."""
    real = path.resolve()
    return all(p.stat().st_mode & stat.S_IXOTH for p in (real, *real.parents))


def learner_environment(root: Path) -> tuple[str, dict[str, str]]:
    """The Python the learners' servers run, and the variables it needs. This environment's own where
    every learner may run it; else (e.g. a pyenv Python under /root) a thin virtual environment over
    the system's Python of the same version that sees this environment's packages, as a class's
    shared read-only environment would: Jupyter's data and settings then come from here by name."""
    if _traversable_by_anyone(Path(sys.executable)):
        return sys.executable, {}
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = Path("/usr/bin") / version
    if not system.exists():
        pytest.skip(f"the learners cannot run this environment's Python ({Path(sys.executable).resolve()}: a "
                    f"folder above it is closed to other users), and there is no {system} to build theirs on")
    folder = root / "learner-env"
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True)
    packages = Path(sysconfig.get_paths()["purelib"])
    [theirs] = folder.glob(f"lib/{version}/site-packages")
    (theirs / "tensorcraft-environment.pth").write_text(f"import site; site.addsitedir({str(packages)!r})\n")
    return str(folder / "bin" / "python"), {
        "JUPYTER_PATH": str(Path(sys.prefix) / "share" / "jupyter"),
        "JUPYTERLAB_DIR": str(Path(sys.prefix) / "share" / "jupyter" / "lab"),
        "JUPYTER_CONFIG_PATH": str(Path(sys.prefix) / "etc" / "jupyter")}


def run(command: list[str], cwd: Path, home: Path) -> str:
    """An instructor's command: their home, nothing of the test's Jupyter settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env["HOME"] = str(home)
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def nbgrader(*args: str) -> list[str]:
    return [sys.executable, "-m", "nbgrader", *args]


def _pids_of(uid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


def _megabytes_of(uid: int) -> float:
    """Resident memory of everything this user runs (their server and kernel), for the README's sizing."""
    total = 0
    for pid in _pids_of(uid):
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            pass
    return total / 2**20


def _answer(kind: str) -> dict[str, str]:
    outer, rows = fake_class.LEARNERS[kind]
    return {"outer": f"def outer(a, b):\n    {outer}\n", "normalize_rows": f"def normalize_rows(x):\n    {rows}\n"}


class Learner:
    def __init__(self, name: str, answers_as: str, root: Path):
        self.name, self.answers_as = name, answers_as
        self.password = secrets.token_urlsafe(12)
        self.home = root / "homes" / name
        self.page = None

    @property
    def uid(self) -> int:
        return pwd.getpwnam(self.name).pw_uid

    def shot(self, step: str) -> None:
        self.page.screenshot(path=str(e2e.SCREENSHOTS / f"hub_{step}_{self.answers_as}.png"))


@pytest.fixture(scope="module")
def hub():
    """(hub URL, learners, course, exchange, instructor home): a running hub, its users and course."""
    e2e._browser_or_skip()
    reason = _needs()
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="tensorcraft-hub-"))
    server = None
    made = []
    try:
        root.chmod(0o755)                           # learners reach their homes and the exchange through it
        (root / "homes").mkdir(mode=0o755)
        tag = secrets.token_hex(3)
        learners = [Learner(f"tc{tag}{suffix}", kind, root) for suffix, kind in ANSWERS.items()]
        exchange, course, instructor = root / "exchange", Course(root / "course"), root / "instructor"
        exchange.mkdir()
        exchange.chmod(0o777)                       # nbgrader's exchange: everyone reads and hands in
        instructor.mkdir(mode=0o700)
        hub_dir = root / "hub"
        hub_dir.mkdir(mode=0o700)
        port, hub_port, api_port = e2e._free_port(), e2e._free_port(), e2e._free_port()
        url = f"http://127.0.0.1:{port}"
        python, extra = learner_environment(root)
        (hub_dir / "jupyterhub_config.py").write_text(
            f"load_subconfig({str(HUB_CONFIG)!r})\n"
            "c = get_config()\n"
            f"c.JupyterHub.hub_port = {hub_port}\n"
            f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{api_port}'\n"
            "# the test reads the page through window.jupyterapp, as the browser test does\n"
            "c.Spawner.args = ['--LabApp.expose_app_in_browser=True']\n"
            f"extra = {extra!r}\n"
            "if 'JUPYTER_CONFIG_PATH' in extra:\n"
            "    extra['JUPYTER_CONFIG_PATH'] = c.Spawner.environment['JUPYTER_CONFIG_PATH'] + ':' + extra['JUPYTER_CONFIG_PATH']\n"
            "c.Spawner.environment = {**c.Spawner.environment, **extra}\n")
        for learner in learners:
            subprocess.run(["useradd", "--create-home", "--home-dir", str(learner.home), "--user-group",
                            "--shell", "/bin/sh", learner.name], check=True, capture_output=True)
            made.append(learner)
            subprocess.run(["chpasswd"], input=f"{learner.name}:{learner.password}\n", text=True, check=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
        env.update(TENSORCRAFT_HUB_URL=url, TENSORCRAFT_EXCHANGE=str(exchange), TENSORCRAFT_LEARNER_PYTHON=python,
                   TENSORCRAFT_LEARNERS=" ".join(learner.name for learner in learners),
                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', os.defpath)}")
        log = root / "hub.log"
        with log.open("w") as out:
            server = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(hub_dir / "jupyterhub_config.py")],
                                      cwd=hub_dir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        # while the hub starts: the instructor's course directory, notebook 00 released into the exchange
        build(course, notebooks=root / "release-notebooks", only=[ASSIGNMENT])
        course.root.chmod(0o700)                # the gradebook and submissions are the instructor's alone
        put_python_scripts_on_path()
        run(nbgrader("release_assignment", ASSIGNMENT, f"--Exchange.root={exchange}"), course.root, instructor)
        e2e._wait_until_up(f"{url}/hub/api", server, log)
        yield url, learners, course, exchange, instructor, log
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)     # the hub stops the learners' servers and its proxy
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        for learner in made:
            for pid in _pids_of(learner.uid):         # anything of theirs still running (we started it)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            subprocess.run(["userdel", "--remove", learner.name], capture_output=True)
        if (root / "hub.log").exists():               # what the hub said, kept with the screenshots
            e2e.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / "hub.log", e2e.SCREENSHOTS / "hub.log")
        shutil.rmtree(root, ignore_errors=True)


LOGGED_IN = ("window.jupyterapp && window.jupyterapp.shell && document.querySelector('.jp-DirListing-content')")
ON_THE_COURSE_HOME = """() => { const widget = window.jupyterapp.shell.currentWidget;
    return widget && widget.context && widget.context.path === 'course_home.ipynb'
           && widget.content.widgets.length > 0; }"""
OPEN_ASSIGNMENTS = "() => window.jupyterapp.commands.execute('nbgrader:open-assignment-list')"


def _log_in(browser, url: str, learner: Learner) -> None:
    """Submit the hub's login form; the hub then starts the learner's server (waited for apart, so
    that the learners' servers start at once)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    learner.page = page = context.new_page()
    page.set_default_timeout(90_000)
    page.goto(f"{url}/hub/login")
    page.fill("#username_input", learner.name)
    page.fill("#password_input", learner.password)
    page.click("#login_submit", no_wait_after=True)


def _wait_for_lab(learner: Learner) -> None:
    try:
        learner.page.wait_for_function(LOGGED_IN, timeout=150_000)   # spawned, as the learner
    except Exception:
        learner.shot("login_failed")
        raise


def _progress_rows(page) -> list[list[str]]:
    return page.evaluate("""() => [...document.querySelectorAll('table.tensorcraft-progress tbody tr')]
                                  .map(row => [...row.cells].map(cell => cell.innerText))""")


@pytest.fixture(scope="module")
def class_run(hub):
    """The whole class, once: what each learner saw, and the instructor's autograde output."""
    from playwright.sync_api import sync_playwright

    url, learners, course, exchange, instructor, log = hub
    e2e.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    seen: dict[str, dict] = {learner.name: {} for learner in learners}
    watch = browser_test.Stopwatch(f"jupyterhub class of {len(learners)}")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=e2e.CHROMIUM,
                                             args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        try:
            for learner in learners:
                _log_in(browser, url, learner)
            for learner in learners:
                _wait_for_lab(learner)
            watch.lap("log in and spawn both")
            for learner in learners:
                mine = seen[learner.name]
                page = learner.page
                mine["home placed"] = (learner.home / "course_home.ipynb").stat().st_uid == learner.uid
                page.wait_for_function(ON_THE_COURSE_HOME)           # where the hub's default URL lands
                page.wait_for_timeout(500)
                learner.shot("course_home")

                # fetch notebook 00 from the exchange, in the Assignment List
                page.evaluate(OPEN_ASSIGNMENTS)
                page.click("#released_assignments_list button:has-text('Fetch')")
                page.wait_for_selector("#fetched_assignments_list button:has-text('Submit')")
                fetched = learner.home / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
                mine["fetched"] = fetched.exists() and fetched.stat().st_uid == learner.uid
                learner.shot("fetched")
                watch.lap("fetch")

                # answer it and run every cell, checks included; save
                page.evaluate(browser_test.OPEN, f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb")
                assert page.evaluate(browser_test.FILL, _answer(learner.answers_as)) == 2
                page.evaluate(browser_test.RUN, "all")
                mine["cells"] = page.evaluate(browser_test.COLLECT)
                watch.lap(f"answer and check ({_megabytes_of(learner.uid):.0f} MB resident: server and kernel)")
                page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
                page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty")
                learner.shot("notebook")
                page.evaluate(browser_test.CLOSE)

                # the course home shows this learner's own progress
                page.evaluate(browser_test.OPEN, "course_home.ipynb")
                page.evaluate(browser_test.RUN, "all")
                mine["home cells"] = page.evaluate(browser_test.COLLECT)
                mine["progress"] = _progress_rows(page)
                page.evaluate(browser_test.SHOW, mine["home cells"][-1]["index"] - 1)
                page.wait_for_timeout(300)
                learner.shot("course_home_progress")
                page.evaluate(browser_test.CLOSE)
                watch.lap("course home")

                # hand it in
                page.evaluate(OPEN_ASSIGNMENTS)
                page.click("#fetched_assignments_list button:has-text('Submit')")
                page.wait_for_selector("#submitted_assignments_list .list_item")
                learner.shot("submitted")
                watch.lap("submit")

            # the instructor: collect, grade (sandboxed), release the feedback
            run(nbgrader("collect", ASSIGNMENT, f"--Exchange.root={exchange}"), course.root, instructor)
            graded = run([sys.executable, "-m", "grader", "autograde", str(course.root / "submitted"),
                          "--course", str(course.root), "--timeout", "60", "--workers", "2"], course.root, instructor)
            run(nbgrader("release_feedback", ASSIGNMENT, f"--Exchange.root={exchange}"), course.root, instructor)
            watch.lap("collect, autograde, release feedback")

            for learner in learners:
                page = learner.page
                page.reload()
                page.wait_for_function(LOGGED_IN)
                page.evaluate(OPEN_ASSIGNMENTS)
                page.click("#submitted_assignments_list button:has-text('Fetch Feedback')")
                page.wait_for_selector("#submitted_assignments_list :text('view feedback')")
                learner.shot("feedback_fetched")
                pages = sorted((learner.home / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html"))
                seen[learner.name]["feedback"] = pages
                if pages:
                    relative = urllib.parse.quote(str(pages[-1].relative_to(learner.home)))
                    page.goto(f"{url}/user/{learner.name}/files/{relative}")
                    page.wait_for_selector("text=Score")
                    seen[learner.name]["feedback page"] = page.inner_text("body")
                    learner.shot("feedback")
                watch.lap("fetch feedback")
        finally:
            browser.close()
            # a file of its own: the browser test's page fixture starts timings.txt afresh
            (e2e.SCREENSHOTS / "hub_timings.txt").write_text(f"{watch.name}: {', '.join(watch.steps)}\n")
    return learners, seen, graded, course


def _cell(cells: list[dict], grade_id: str) -> dict:
    return next(c for c in cells if c["grade_id"] == grade_id)


def test_each_learner_logs_in_fetches_and_runs_the_checks_as_themselves(class_run):
    learners, seen, _, _ = class_run
    for learner in learners:
        mine = seen[learner.name]
        assert mine["home placed"], "the course home was not written into the learner's home, as the learner"
        assert mine["fetched"], "notebook 00 was not fetched into ~/00_welcome/, as the learner"
        passing = fake_class.PASSING[learner.answers_as]
        for grade_id in fake_class.POINTS:
            text = _cell(mine["cells"], grade_id)["text"]
            if grade_id in passing:
                assert "✓" in text and "✗" not in text, f"{learner.answers_as}, {grade_id}:\n{text}"
            else:
                assert "✗" in text, f"{learner.answers_as}, {grade_id} should fail:\n{text}"


def test_each_course_home_shows_that_learners_own_progress_kept_in_their_home(class_run):
    learners, seen, _, _ = class_run
    installed = ROOT / "notebooks" / ".progress.json"
    for learner in learners:
        mine = seen[learner.name]
        kept = learner.home / ".local" / "share" / "jupyter" / "tensorcraft" / "progress.json"
        assert kept.stat().st_uid == learner.uid
        recorded = json.loads(kept.read_text())["exercises"]
        passing = fake_class.PASSING[learner.answers_as]
        graded = {name: recorded[f"nb{ASSIGNMENT}.{name}"]["status"] for name in ("outer", "normalize_rows")}
        assert graded == {name: "passed" if f"{name}_tests" in passing else "attempted" for name in graded}
        [welcome] = [row for row in mine["progress"] if row[0].startswith("00")]
        passed = sum(1 for status in graded.values() if status == "passed")
        assert welcome[2:5] == [f"{passed} / 2", f"{2 - passed} / 2", "0 / 2"], welcome
        shown = mine["home cells"][-1]["text"]
        assert str(kept) in shown, f"the course home does not read {kept}:\n{shown}"
    assert not installed.exists(), "a check wrote progress into the installed course"


def test_the_instructor_grades_the_collected_class_and_each_learner_fetches_their_own_feedback(class_run):
    learners, seen, graded, course = class_run
    assert f"{len(learners)} graded" in graded and "0 errors" in graded, graded
    for learner in learners:
        mine = seen[learner.name]
        assert mine["feedback"], f"{learner.name} fetched no feedback"
        score = sum(fake_class.EXPECTED[learner.answers_as].values())
        assert f"Score: {score:.1f} / {fake_class.MAX_SCORE:.1f}" in mine["feedback page"]
        assert not [s for s in fake_class.HIDDEN_SOURCE if s in html.unescape(mine["feedback page"])]
    transpose = "your result is the transpose"
    wrong = next(l for l in learners if l.answers_as == "wrong")
    right = next(l for l in learners if l.answers_as == "correct")
    assert transpose in seen[wrong.name]["feedback page"] and transpose not in seen[right.name]["feedback page"]
