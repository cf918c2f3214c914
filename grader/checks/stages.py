"""The one way a stage exercise (notebooks 07-11) runs the learner's stage: inside the library's real pipeline.

Every such exercise checks a function that tensorcraft's pipeline calls (capture, a graph pass, a planner,
a code printer, the wrapper generator). Its check plugs the function in with ``tensorcraft.substitute``,
runs a program through ``tensorcraft.compile`` (or the lower ``compile_graph``), and then needs two things:
what the compiled program returned (compared with eager PyTorch), and what the stage was given and returned
at each call (a :class:`~grader.checks.spy.Recorder`, whose type check reports a wrong return type as the
stage's). :func:`substituted` is the ``with`` block for checks that drive the pipeline themselves;
:func:`run_stage` compiles a program, runs it once and hands back both.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

import tensorcraft

from .spy import Call, Recorder


@contextlib.contextmanager
def substituted(stage: str, fn: Callable[..., Any], *, name: str = "", returns: tuple[type, ...] = (),
                what: str = "", then: Callable[..., Any] | None = None, note: Callable[..., Any] | None = None,
                also: dict[str, Callable[..., Any]] | None = None) -> Iterator[Recorder]:
    """Inside the block the pipeline's ``stage`` is ``fn``, recorded (see ``Recorder`` for ``returns``,
    ``what``, ``then`` and ``note``); ``also`` substitutes other stages (a recorder of a library stage)."""
    spy = Recorder(fn, name or stage, returns, what, then, note)
    with tensorcraft.substitute(**{stage: spy}, **(also or {})):
        yield spy


@dataclass
class StageRun:
    """What one run of a program through the pipeline gave: its result, the stage's calls, the compiled program."""
    result: Any
    calls: list[Call]
    compiled: Any

    @property
    def last(self) -> Call:
        return self.calls[-1]


def run_stage(stage: str, fn: Callable[..., Any], program: Callable[..., Any], args: tuple, *,
              compile_with: dict[str, Any] | None = None, grad: bool | None = None, required: bool = True,
              **recorder: Any) -> StageRun:
    """``tensorcraft.compile(program, **compile_with)`` called once on ``args`` while ``stage`` is ``fn``
    (``recorder``: the keywords of :func:`substituted`). ``grad``: run with gradients on or off (None: as the
    caller has it). ``required``: a run that never called the stage is the check's own bug, said as such."""
    compiled = tensorcraft.compile(program, **(compile_with or {}))
    mode = contextlib.nullcontext() if grad is None else torch.set_grad_enabled(grad)
    with mode, substituted(stage, fn, **recorder) as spy:
        result = compiled(*args)  # while a stage is substituted, every call compiles afresh and runs the result
    if required and not spy.calls:
        raise RuntimeError(f"tensorcraft.compile never called your {spy.name}")
    return StageRun(result, spy.calls, compiled)
