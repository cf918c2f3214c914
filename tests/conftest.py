"""Shared pytest set-up: hypothesis profiles, and the markers that say what a test needs.

The markers (registered in pyproject.toml) sort the suite into tiers: ``make test-fast`` runs what
needs none of ``kernel``, ``sandbox``, ``browser``, ``dask``, ``hub`` or ``nbgrader`` (the library
and the checks); ``make test`` runs everything; ``make test-gpu`` what is marked ``cuda``. A test
gets them from where it is, so that a new test in an existing file lands in that file's tier:
its file (``NEEDS_BY_FILE``), the fixtures it uses (``NEEDS_BY_FIXTURE``), and its own decorators
(in a file whose other tests need less).

``make test`` and ``make test-fast`` run the suite on two processes (pytest-xdist, with the
scheduler below): the tests of one file stay in one process (a module's fixtures, a class graded
once, serve all its tests), the files that grade every notebook (``SHARED_COURSE``) share one
process (the session's executed course, tests/grader/conftest.py, serves them both), and those
groups start first, the ones that need something before the library's (``needs``), so that neither
process is left with a long file at the end while the other waits.
"""
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# CI machines have 2 slow cores: no deadlines, a fixed budget of examples, reproducible runs.
settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", max_examples=30, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


TESTS = Path(__file__).resolve().parent
KERNEL, SANDBOX, BROWSER, DASK, HUB, NBGRADER = "kernel", "sandbox", "browser", "dask", "hub", "nbgrader"
# test file (relative to tests/) -> what every test in it needs
NEEDS_BY_FILE = {
    "test_course_command.py": (KERNEL,),                                # `make course` serves JupyterLab
    "e2e/test_learner_browser.py": (BROWSER, KERNEL),
    "e2e/test_learner_tools.py": (BROWSER, KERNEL),
    "e2e/test_jupyterhub_class.py": (HUB, BROWSER, KERNEL, SANDBOX, NBGRADER),
    "grader/test_autograde.py": (KERNEL, NBGRADER),
    "grader/test_autograde_faults.py": (KERNEL, NBGRADER),
    "grader/test_build.py": (NBGRADER,),                               # nbgrader generate_assignment
    "grader/test_class_report.py": (KERNEL, NBGRADER),                 # a planted class built and autograded
    "grader/test_dask_grading.py": (DASK, KERNEL, NBGRADER),
    "grader/test_exchange.py": (KERNEL, NBGRADER),
    "grader/test_execute.py": (KERNEL,),
    "grader/test_hostile_class.py": (KERNEL, SANDBOX, NBGRADER),
    "grader/test_kernel_forks.py": (KERNEL, SANDBOX),
    "grader/test_lab_roles.py": (KERNEL,),                             # Jupyter's own commands, per role
    "grader/test_nbgrader_sandbox.py": (KERNEL, SANDBOX, NBGRADER),
    "grader/test_chains.py": (KERNEL, NBGRADER),
    "grader/test_preflight.py": (KERNEL, NBGRADER),
    "grader/test_provisioner.py": (KERNEL, SANDBOX),
    "grader/test_sandbox.py": (KERNEL, SANDBOX),
}
# fixture -> what a test that uses it needs
NEEDS_BY_FIXTURE = {
    "built_course": (NBGRADER,),       # the whole course built by nbgrader's converters (tests/grader/conftest.py)
    "lab": (BROWSER, KERNEL),          # JupyterLab and Chromium (tests/e2e/conftest.py)
    "page": (BROWSER, KERNEL),
}


# files that grade every solution notebook: in one process they share its runs (tests/grader/conftest.py)
SHARED_COURSE = ("grader/test_check_command.py", "grader/test_chains.py")


def _relative(item) -> str:
    path = item.path.resolve()
    return path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else str(path)


def needs(item) -> set[str]:
    """What ``item`` needs, by its file and its fixtures (its own markers come on top)."""
    found = set(NEEDS_BY_FILE.get(_relative(item), ()))
    for fixture in getattr(item, "fixturenames", ()):
        found.update(NEEDS_BY_FIXTURE.get(fixture, ()))
    return found


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_configure(config):
    # checks run by the tests must not record into the progress file of whoever runs them
    # (tests of the recording set TENSORCRAFT_PROGRESS to a file of their own)
    os.environ["TENSORCRAFT_PROGRESS"] = "off"


def group(nodeid: str) -> str:
    """Which process group a test is in under pytest-xdist: its file, or the shared course."""
    file = nodeid.split("::", 1)[0].removeprefix("tests/")
    return "executed course" if file in SHARED_COURSE else file


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's scope scheduling, with ``group`` as the scope: a group goes to one process,
    whole, in the order the processes collected the groups (``--no-loadscope-reorder``)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group(nodeid)
    return ByGroup(config, log)


NEEDS = {KERNEL, SANDBOX, BROWSER, DASK, HUB, NBGRADER}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for name in sorted(needs(item) - {m.name for m in item.iter_markers()}):
            item.add_marker(name)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # the shared course first, then the other groups that need something, then the library's; each
        # group's tests in their own order (a stable sort: every process collects the same order)
        slow = {group(item.nodeid) for item in items if NEEDS & {m.name for m in item.iter_markers()}}
        items.sort(key=lambda item: (group(item.nodeid) != "executed course", group(item.nodeid) not in slow))
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device on this machine (torch.cuda.is_available() is False)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
