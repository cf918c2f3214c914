"""Checking and grading the tensorcraft course.

``python -m grader build | check | autograde | feedback`` (see ``cli``); the checks a notebook
calls live in ``grader.checks``, the known-wrong answers they must reject in ``grader.mutants``.
"""
import sys

# jsonschema (imported by nbformat) imports rfc3987_syntax when it is installed (jupyter-events pulls
# it in), which builds some 35 Lark parsers as it loads: 1.4 CPU s in every process that reads a
# notebook (the grader, each worker, each fork server and kernel), for jsonschema's "iri" format,
# which no notebook schema uses (python-jsonschema/jsonschema#1428). Marked missing, jsonschema
# leaves that one format unchecked; nbformat validates as before.
sys.modules.setdefault("rfc3987_syntax", None)
