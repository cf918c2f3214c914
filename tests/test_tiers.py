"""The tiers stay true: every file given a tier exists (a renamed file would drop to the fast tier),
and so does every file said to share the executed course; `make test-fast` leaves out every
registered marker but cuda."""
import importlib.util
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("tests_conftest", TESTS / "conftest.py")
conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conftest)


def test_every_file_given_a_tier_exists():
    assert [name for name in conftest.NEEDS_BY_FILE if not (TESTS / name).is_file()] == []


def test_the_files_sharing_the_executed_course_exist():
    """A renamed file would leave the process that shares the session's runs of every solution."""
    assert [name for name in conftest.SHARED_COURSE if not (TESTS / name).is_file()] == []


def test_make_test_fast_leaves_out_every_marker_of_a_need_but_cuda(pytestconfig):
    needs = {conftest.KERNEL, conftest.SANDBOX, conftest.BROWSER, conftest.DASK, conftest.HUB, conftest.NBGRADER}
    registered = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert needs | {"cuda"} <= registered
    fast = re.search(r"^FAST := (.+)$", (TESTS.parent / "Makefile").read_text(), re.M).group(1)
    assert set(re.findall(r"\w+", fast)) - {"not", "or", "and"} == needs
