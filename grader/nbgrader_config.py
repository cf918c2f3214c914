"""nbgrader configuration of the tensorcraft course.

`python -m grader build` copies this file into the course directory (build/course/ by default),
so that nbgrader's own commands, run from there, behave exactly as `python -m grader` does.
"""
c = get_config()  # noqa: F821 (nbgrader provides get_config when it loads this file)

c.CourseDirectory.course_id = "tensorcraft"

# The learner's stub, in place of each ### BEGIN SOLUTION ... ### END SOLUTION region.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# Per-cell time limit while autograding (python -m grader autograde --timeout overrides it).
c.Execute.timeout = 30

# Feedback shows each test cell's output and score, never the source of its hidden tests
# (neither in the cell nor quoted by its traceback).
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearHiddenTests",
    "grader.instructor.feedback_tracebacks.ShortenTestCellTracebacks",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# Autograding runs nbgrader's own chains, Autograde.sanitize_preprocessors and
# Autograde.autograde_preprocessors (grader/worker/chains.py): what is set here for them (say
# c.IgnorePattern.pattern, c.LimitOutput.max_lines, c.ClearMetadataPreprocessor.enabled) applies to
# `python -m grader autograde` exactly as to `nbgrader autograde`.
# nbgrader's default list, with two of ours: SandboxedExecute in place of nbgrader's Execute, so that
# `nbgrader autograde` and formgrader's Autograde button run each learner's notebook in the grading
# sandbox too (grader/worker/nbgrader_sandbox.py; `python -m grader autograde` puts its own executor there),
# and PartialCredit before the scores are saved (off unless enabled below).
c.Autograde.autograde_preprocessors = [
    "grader.worker.nbgrader_sandbox.SandboxedExecute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "grader.worker.partial_credit.PartialCredit",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# Partial credit per group of cases: a test cell whose check fails some groups earns its points times
# the share of groups that passed (8 of 10 groups -> 2.4 of 3 points). Off: all or nothing per cell.
c.PartialCredit.enabled = False

# Late submissions: a submission's timestamp.txt against its assignment's due date
# (`nbgrader db assignment add NAME --duedate="2027-01-31 17:00:00 UTC"` in this directory).
# 'none' records how late it was and takes nothing off; 'zero' takes the whole score off.
# A plugin of one's own: c.AssignLatePenalties.plugin_class = "module.ClassName".
c.LateSubmissionPlugin.penalty_method = "none"
