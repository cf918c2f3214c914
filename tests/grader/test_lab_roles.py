"""The JupyterLab a learner gets (`make course`) hides nbgrader's instructor tools and JupyterLab's
news prompt; the instructor's (`make instructor`) shows them. Read through Jupyter's own tools,
`jupyter labextension list` and jupyter_server's extension config, with the config directory the
Makefile puts on the search path, and nothing from the user's ~/.jupyter."""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course import REPO

INSTRUCTOR_PLUGINS = {"@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:course-list",
                      "@jupyter/nbgrader:formgrader"}
LEARNER_PLUGINS = {"@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:validate-assignment",
                   "@jupyter/nbgrader:menu"}
NEWS = "@jupyterlab/apputils-extension:announcements"
INSTRUCTOR_SERVER = {"nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list"}
LEARNER_SERVER = {"nbgrader.server_extensions.assignment_list", "nbgrader.server_extensions.validate_assignment"}


def config_path_of(target: str) -> str:
    """The JUPYTER_CONFIG_PATH that `make TARGET` starts JupyterLab with (read from `make -n`)."""
    if not shutil.which("make"):
        pytest.fail("`make` is not installed: the README's commands need it")
    printed = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True, check=True).stdout
    [command] = [line for line in printed.replace("\\\n", " ").splitlines() if "jupyter lab" in line]
    [value] = [word.split("=", 1)[1] for word in shlex.split(command) if word.startswith("JUPYTER_CONFIG_PATH=")]
    return value


def _env(config_path: str, home: Path) -> dict[str, str]:
    return {**os.environ, "JUPYTER_CONFIG_PATH": config_path, "JUPYTER_CONFIG_DIR": str(home)}


def disabled_plugins(config_path: str, home: Path) -> set[str]:
    """The 'Disabled extensions' that `jupyter labextension list` reports."""
    listed = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], env=_env(config_path, home),
                            capture_output=True, text=True, check=True)
    text = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
    if "Disabled extensions:" not in text:
        return set()
    section = text.split("Disabled extensions:", 1)[1]
    return {line.split()[0] for line in section.splitlines() if line.startswith("    ") and line.strip()}


def server_extensions(config_path: str, home: Path) -> dict[str, bool]:
    """Which server extensions jupyter_server enables, merged over the search path as the server does."""
    code = ("import json; from jupyter_core.paths import jupyter_config_path; "
            "from jupyter_server.extension.config import ExtensionConfigManager; "
            "print(json.dumps(ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions()))")
    shown = subprocess.run([sys.executable, "-c", code], env=_env(config_path, home), capture_output=True,
                           text=True, check=True)
    return json.loads(shown.stdout.strip().splitlines()[-1])


def test_make_course_gives_a_learner_no_instructor_tools_and_no_news(tmp_path):
    config_path = config_path_of("course")
    assert Path(config_path) == REPO / "grader" / "jupyter" / "learner"
    disabled = disabled_plugins(config_path, tmp_path)
    assert INSTRUCTOR_PLUGINS | {NEWS} <= disabled
    assert not LEARNER_PLUGINS & disabled
    servers = server_extensions(config_path, tmp_path)
    assert not any(servers[name] for name in INSTRUCTOR_SERVER)
    assert all(servers[name] for name in LEARNER_SERVER)


def test_make_instructor_gives_the_instructor_tools_even_over_a_lower_level_that_hides_them(tmp_path):
    config_path = config_path_of("instructor")
    assert Path(config_path) == REPO / "grader" / "jupyter" / "instructor"
    # the environment's own settings (below ours on the search path) turned the tools off: ours win
    environment = tmp_path / "environment"
    shutil.copytree(REPO / "grader" / "jupyter" / "learner", environment)
    home = tmp_path / "home"
    assert INSTRUCTOR_PLUGINS <= disabled_plugins(str(environment), home)      # what it would hide alone
    for path in (config_path, os.pathsep.join([config_path, str(environment)])):
        assert not (INSTRUCTOR_PLUGINS | LEARNER_PLUGINS) & disabled_plugins(path, home)
        servers = server_extensions(path, home)
        assert all(servers[name] for name in INSTRUCTOR_SERVER | LEARNER_SERVER)
