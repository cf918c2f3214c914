"""A JupyterHub for a tensorcraft class (README, "Running a class on JupyterHub").

Learners log in as local users (PAM, JupyterHub's default authenticator, so the hub runs as root)
and each gets a JupyterLab of their own, started as that user in their home folder by JupyterHub's
LocalProcessSpawner:
- from the learners' environment: the Python of a copy of the course that holds the library, the
  grading code and the release, never ``solutions/`` (``TENSORCRAFT_LEARNER_PYTHON``; default: the
  ``.venv`` of the copy this file lies in);
- with the learner's Jupyter configuration first on its search path (``grader/jupyter/learner``: no
  instructor tools), then this folder (``nbgrader_config.py``: the course id and the exchange,
  ``TENSORCRAFT_EXCHANGE``, default nbgrader's ``/usr/local/share/nbgrader/exchange``);
- opening on the course home, which ``python -m grader home ~`` writes into the learner's home,
  run as the learner before each start: its links lead to the notebooks nbgrader fetches there.

Run it as root from the instructor's environment: ``jupyterhub -f grader/jupyter/hub/jupyterhub_config.py``.
The other settings come from the environment, so that one file serves a class and the test
(tests/e2e/test_jupyterhub_class.py): ``TENSORCRAFT_HUB_URL`` (default ``http://127.0.0.1:8000``: put TLS in front of it, or
set ``c.JupyterHub.ssl_cert``/``ssl_key``, before opening it to the network), ``TENSORCRAFT_LEARNERS``
(the user names allowed to log in, separated by spaces) and ``TENSORCRAFT_PROXY`` (the
configurable-http-proxy to run; default: the one ``make hub-proxy`` installs, else the one on PATH).
"""
import os
import pwd
import subprocess
from pathlib import Path

c = get_config()  # noqa: F821 (JupyterHub's config loader defines it)

HERE = Path(__file__).resolve().parent
COURSE = HERE.parents[2]                                   # grader/jupyter/hub -> the course's copy
LEARNER_PYTHON = os.environ.get("TENSORCRAFT_LEARNER_PYTHON", str(COURSE / ".venv" / "bin" / "python"))
LEARNER_JUPYTER = [str(HERE.parent / "learner"), str(HERE)]
PROXY = COURSE / ".venv" / "node" / "node_modules" / ".bin" / "configurable-http-proxy"

c.JupyterHub.bind_url = os.environ.get("TENSORCRAFT_HUB_URL", "http://127.0.0.1:8000")
c.ConfigurableHTTPProxy.command = [os.environ.get("TENSORCRAFT_PROXY")
                                   or (str(PROXY) if PROXY.exists() else "configurable-http-proxy")]
c.Authenticator.allowed_users = set(os.environ.get("TENSORCRAFT_LEARNERS", "").split())

c.Spawner.cmd = [LEARNER_PYTHON, "-m", "jupyterhub.singleuser"]
c.Spawner.notebook_dir = "~"
c.Spawner.default_url = "/lab/tree/course_home.ipynb"
c.Spawner.environment = {"JUPYTER_CONFIG_PATH": os.pathsep.join(LEARNER_JUPYTER),
                         "TENSORCRAFT_EXCHANGE": os.environ.get("TENSORCRAFT_EXCHANGE",
                                                                "/usr/local/share/nbgrader/exchange")}
# a learner's kernel imports torch: give a busy machine time to start it
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 90


def place_course_home(spawner) -> None:
    """``python -m grader home ~``, as the learner (their files stay theirs), before their server starts.
    A failure is logged, never fatal: the learner's notebooks do not depend on it."""
    user = pwd.getpwnam(spawner.user.name)
    as_learner = dict(user=user.pw_uid, group=user.pw_gid, extra_groups=[]) if os.getuid() == 0 else {}
    done = subprocess.run([LEARNER_PYTHON, "-m", "grader", "home", user.pw_dir], cwd=user.pw_dir,
                          env={"HOME": user.pw_dir, "PATH": os.defpath, "LANG": "C.UTF-8"},
                          capture_output=True, text=True, timeout=120, **as_learner)
    if done.returncode:
        spawner.log.warning("no course home for %s: %s", user.pw_name, done.stderr.strip()[-500:])


c.Spawner.pre_spawn_hook = place_course_home
