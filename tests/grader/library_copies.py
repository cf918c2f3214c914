"""Correct answers for the checks' tests: the library's own functions under function objects of their own.

While a check runs, a stage's library function refuses every caller but the pipeline's stage
(``grader.checks.tripwire``), however it was reached; a copy of its code is a function of the test's
own, as a learner's right answer would be. Make the copy outside the check (at import)."""
import types


def copy_of(fn):
    """The same code, defaults and closure under a new function object."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_copy", fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy
