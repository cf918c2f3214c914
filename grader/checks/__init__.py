"""In-notebook checks: one module per notebook (``nb00_welcome``, ...) on shared machinery.

A notebook cell calls ``check_<exercise>(learner_fn)``; the machinery lives in
``exercise`` (the case runner), ``compare`` (results vs ground truth), ``tripwire``
(functions a learner must not call), ``devices`` (CPU always, CUDA where present),
``seed`` (hidden randomized cases) and ``report`` (the lines a learner reads).
"""
