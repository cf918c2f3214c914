"""In-notebook checks: one module per notebook (``nb00_welcome``, ...) on shared machinery.

A notebook cell calls ``check_<exercise>(learner_fn)``; the machinery lives in
``exercise`` (the case runner), ``compare`` (results vs ground truth), ``tripwire``
(functions a learner must not call, by name), ``ops`` (the same, caught at the level of the
operation, by any route; and numpy where an exercise does not allow it), ``devices`` (CPU always, CUDA where present),
``seed`` (hidden randomized cases), ``report`` (the lines a learner reads) and ``record`` (the same
outcome as data in the graded notebook, which ``python -m grader report`` counts).

A new notebook ``solutions/NN_name.py`` gets ``grader/checks/nbNN_name.py`` holding, per exercise,
an :class:`~grader.checks.exercise.Exercise` (reference from the real tool, public cases, a
function drawing hidden cases from a ``torch.Generator``, forbidden names, ``forbidden_ops`` and
``numpy_allowed`` (which the notebook's text states, in the same words as the hints), a generic hint; ``call``
when the learner writes one stage of a pipeline; ``Case(..., raises=T)`` for error cases), a
``check_<name>(fn, hidden=False)`` wrapper, and an ``EXERCISES`` table that
``python -m grader check`` reads; and ``grader/mutants/nbNN_name.py`` with at least one
``@mutant("nbNN_name.<exercise>", hint=...)`` per exercise.
"""
