"""Shared pytest set-up: hypothesis profiles and the CUDA marker."""
import os

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
    config.addinivalue_line("markers", "cuda: needs a CUDA device; skipped, with its reason, where none is present")


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device on this machine (torch.cuda.is_available() is False)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
