"""The instructor's class report (``python -m grader report``), after ``autograde`` on the same course.

One module per job: ``records`` (read the autograded notebooks, the checks' outcome records and the
scores CSV), ``items`` (item statistics), ``exercises`` (the per-exercise table), ``misconceptions``
(mutants counted; what went wrong besides the answers), ``learners`` (totals, who needs help),
``similarity`` (winnowing fingerprints), ``build`` (every table, as JSON and CSV), ``render_html`` (the
self-contained page) and ``render_notebook`` (the JupyterLab version).
"""
