"""Checking and grading the tensorcraft course.

``python -m grader build | check | autograde | feedback`` (see ``cli``); the checks a notebook
calls live in ``grader.checks``, the known-wrong answers they must reject in ``grader.mutants``.
"""
