"""The README's first command, `make course`, builds the notebooks and serves them in JupyterLab,
opening on the course home."""
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _get_json(url: str, patience: float = 60.0):
    """GET a JSON document; the URL is printed just before the server starts accepting."""
    deadline = time.monotonic() + patience
    while True:
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                return json.load(response)
        except urllib.error.URLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_make_course_serves_the_notebooks_and_prints_the_url():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    server = subprocess.Popen(["make", "--no-print-directory", "course", "LAB_ARGS=--port=18888 --port-retries=50"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    log: list[str] = []
    try:
        deadline = time.monotonic() + 120
        url = None
        while url is None and time.monotonic() < deadline and server.poll() is None:
            line = server.stdout.readline()
            log.append(line)
            found = re.search(r"(http://127\.0\.0\.1:\d+/)lab/tree/course_home\.ipynb\?token=(\w+)", line)
            if found:
                url = found.groups()
        assert url, "JupyterLab printed no URL of the course home:\n" + "".join(log[-30:])
        base, token = url
        listing = _get_json(f"{base}api/contents?token={token}")
        names = {item["name"] for item in listing["content"]}
        expected = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
        assert expected and expected <= names, f"served {sorted(names)}, expected {sorted(expected)}"
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
