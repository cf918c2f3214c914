"""What runs in the fork server, inside a grading worker's sandbox (bubblewrap's PID 1): it imports
what kernels use once and forks one learner's kernel per request (``python -m grader.fork_server.server``).

Imports only the learner's kernel's side and the shared modules, never the worker's or the
instructor's (``tests/grader/test_parts.py``)."""
