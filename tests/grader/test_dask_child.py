"""The child process a Dask worker runs its notebooks in (grader.worker.dask_worker._Child): calls and
their answers travel pickled through multiprocessing.connection; a child that dies is reported."""
import math
import os

import pytest

from grader.worker.dask_worker import ChildDied, _Child


def test_the_child_answers_raises_and_dies_as_the_call_did():
    child = _Child()
    try:
        assert child.call({}, math.sqrt, (6.25,), {}) == 2.5
        assert child.call({"TENSORCRAFT_TEST_CHILD": "set"}, os.getenv, ("TENSORCRAFT_TEST_CHILD",), {}) == "set"
        with pytest.raises(ValueError, match="math domain error"):
            child.call({}, math.sqrt, (-1.0,), {})
        assert child.call({}, divmod, (7, 2), {}) == (3, 1), "the child did not go on after an error"
        with pytest.raises(ChildDied, match="exit status 3"):
            child.call({}, os._exit, (3,), {})
    finally:
        child.process.kill()
        child.process.wait()
