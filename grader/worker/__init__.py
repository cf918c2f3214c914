"""What runs in a grading worker (a process of autograde's local pool, or a Dask worker): one
submission executed with nbgrader's chains, its kernel sandboxed and started by the provisioner.

Imports the learner's kernel's side and the shared modules (``grader.files``, ``grader.course``),
never the instructor's (``tests/grader/test_parts.py``)."""
