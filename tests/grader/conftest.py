"""Shared, expensive fixtures of the grader tests: one course build per test session."""
from pathlib import Path

import pytest

from grader.build import build
from grader.course import Course


@pytest.fixture(scope="session")
def built_course(tmp_path_factory) -> tuple[Course, Path]:
    """The whole course built from solutions/ into a fresh course directory and notebooks folder."""
    root = tmp_path_factory.mktemp("built")
    course, notebooks = Course(root / "course"), root / "notebooks"
    build(course, notebooks=notebooks)
    return course, notebooks
