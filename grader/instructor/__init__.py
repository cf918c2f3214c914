"""What runs in the instructor's process (``python -m grader ...``): building the course, checking
it, grading a class (the parent of the grading workers), feedback and the class report.

May import every other part of the grader; nothing outside ``cli`` imports it
(``tests/grader/test_parts.py``)."""
