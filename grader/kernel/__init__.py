"""What runs in the learner's Jupyter kernel besides the checks (``grader.checks``) and mutants
(``grader.mutants``): the fingerprint of the grading code the worker asks for (``integrity``), the
learner's record of their checks (``progress``) and the course home's view of it (``progress_page``),
and the syllabus both that view and the build read.

Imports only the kernel's side and the shared modules, never the worker's, the fork server's or the
instructor's (``tests/grader/test_parts.py``)."""
