"""The seed of the hidden, randomized cases: chosen when the check runs, so no answer can be
hard-coded; printed, and overridable with an environment variable to reproduce a run.

While the grader runs a notebook (``NBGRADER_EXECUTION=autograde``) the variable is ignored:
the learner's own code runs in the same process and could set it, choose its hidden cases, and
hard-code their answers. To replay a graded run, set the variable outside grading (in JupyterLab,
or around a call to the check) to the seed printed in the feedback.
"""
from __future__ import annotations

import os
import secrets
from typing import Any, Sequence

import torch

SEED_VARIABLE = "TENSORCRAFT_CHECK_SEED"


def grading() -> bool:
    """True while `python -m grader autograde` (or nbgrader's autograde) runs the notebook."""
    return os.environ.get("NBGRADER_EXECUTION") == "autograde"


def hidden_seed() -> int:
    """``$TENSORCRAFT_CHECK_SEED`` when set (to reproduce a run) and not grading, else a fresh random seed."""
    text = os.environ.get(SEED_VARIABLE, "").strip()
    if text and not grading():
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{SEED_VARIABLE}={text!r}: expected an integer seed") from None
    return secrets.randbits(31)


def draw(g: torch.Generator, *bounds: int) -> int:
    """An integer drawn by ``g`` from ``range(*bounds)``: ``draw(g, n)`` is one of 0 .. n - 1, ``draw(g, low, stop)``
    one of low .. stop - 1. The one random draw of every hidden case (``g`` is seeded by ``hidden_seed``)."""
    return int(torch.randint(*bounds, (1,), generator=g))


def pick(g: torch.Generator, options: Sequence[Any]) -> Any:
    """One of ``options``, drawn by ``g`` (``options[draw(g, len(options))]``)."""
    return options[draw(g, len(options))]
