"""grader.worker.job.GradingJob: one value per submission, run the same way by the local pool and by Dask."""
import pickle
from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import pytest

from grader.course import Course
from grader.instructor.dask_pool import _sent
from grader.worker.job import GradingJob, nbgrader_resources
from grader.worker.compile_cache import FOLDER as COMPILED
from grader.worker.compile_cache import cache_root


@pytest.fixture
def job(tmp_path) -> GradingJob:
    course = Course(tmp_path / "course")
    return GradingJob.of(course, "alice", "00_welcome", timeout=7, sandboxed=True,
                         masked=(tmp_path / "course", tmp_path / "submissions"))


def test_a_job_is_frozen_and_pickles(job):
    assert pickle.loads(pickle.dumps(job)) == job
    with pytest.raises(FrozenInstanceError):
        job.learner = "bob"


def test_a_job_names_the_course_paths_of_its_learner(job, tmp_path):
    root = tmp_path / "course"
    assert job.submitted == root / "submitted" / "alice" / "00_welcome" / "00_welcome.ipynb"
    assert job.autograded_dir == root / "autograded" / "alice" / "00_welcome"
    assert job.config_file == root / "nbgrader_config.py"
    assert job.gradebook == root / "gradebook.db"


def test_nbgraders_resources_are_made_in_one_place(job, tmp_path):
    assert job.resources() == {"nbgrader": {"student": "alice", "assignment": "00_welcome", "notebook": "00_welcome",
                                            "db_url": f"sqlite:///{tmp_path / 'course' / 'gradebook.db'}"}}
    assert job.resources(tmp_path)["metadata"] == {"path": str(tmp_path)}
    assert nbgrader_resources("alice", "00_welcome", job.db_url) == job.resources()


def test_the_dask_path_sends_course_paths_relative_and_the_worker_gets_the_same_job_on_its_copy(job, tmp_path):
    course = Course(tmp_path / "course")
    cached = replace(job, compile_cache=cache_root() / "00_welcome-abc")
    sent = _sent(cached, course)
    assert sent.submitted == Path("submitted/alice/00_welcome/00_welcome.ipynb")
    assert sent.db_url == "sqlite:///gradebook.db"
    assert sent.compile_cache == Path(COMPILED, "00_welcome-abc")
    assert sent.masked == job.masked and sent.timeout == 7 and sent.sandboxed
    assert pickle.loads(pickle.dumps(sent)) == sent
    kit = tmp_path / "kit" / "course"
    on_worker = sent.moved(lambda path: kit / path)
    assert on_worker.compile_cache == kit / COMPILED / "00_welcome-abc"
    back_home = sent.moved(lambda path: course.root / path)
    assert replace(back_home, compile_cache=None) == job       # the same job, so the same resources
    assert back_home.resources(tmp_path) == job.resources(tmp_path)
    assert on_worker.resources()["nbgrader"] == {**job.resources()["nbgrader"], "db_url": f"sqlite:///{kit / 'gradebook.db'}"}
