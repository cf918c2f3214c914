"""Differential soundness fuzzer: tc.compile gives eager's answer on every call, or runs eagerly (issue 21).

Random programs (soundness_fuzz.py) are called several times, with their arguments, globals, closure
cells, helper functions' state, config attributes, module attributes and weights changed between
calls, through ``tensorcraft.compile`` and eagerly. A compiled answer that differs from eager's is a
failure, printed as a shrunk program and call sequence (a loud fallback runs eagerly: never differs).

Cases: ``TENSORCRAFT_FUZZ_CASES`` (default 240 on the python backend; a fifth of that on c, and 3
on triton, interpreted) — e.g. ``TENSORCRAFT_FUZZ_CASES=3000 pytest tests/compiler/test_fuzz_soundness.py``.
``TENSORCRAFT_FUZZ_SEED`` moves the seeds (default 0), to explore other cases.
"""
from __future__ import annotations

import os
import random

import pytest

from available_backends import _skip_reason
from soundness_fuzz import draw_case, run_case, show, shrink

CASES = int(os.environ.get("TENSORCRAFT_FUZZ_CASES", "240"))
SEED = int(os.environ.get("TENSORCRAFT_FUZZ_SEED", "0"))
COUNTS = {"python": CASES, "c": max(1, CASES // 5), "triton": 3}


@pytest.mark.parametrize("backend", ["python", "c", "triton"])
def test_compiled_calls_agree_with_eager_under_random_changes(backend):
    reason = _skip_reason(backend)
    if reason:
        pytest.skip(reason)
    rng = random.Random(f"{SEED}-{backend}")
    for i in range(COUNTS[backend]):
        case = draw_case(rng, backend, seed=SEED * 1_000_003 + i)
        why = run_case(case)
        if why is not None:
            small = shrink(case)
            pytest.fail(show(small, run_case(small) or why))
