"""nbgrader's settings for every learner's server on the hub (on their Jupyter search path, set by
jupyterhub_config.py beside this file): the course and the exchange they fetch from and submit to."""
import os

c = get_config()  # noqa: F821 (nbgrader's config loader defines it)
c.CourseDirectory.course_id = "tensorcraft"
c.Exchange.root = os.environ.get("TENSORCRAFT_EXCHANGE", "/usr/local/share/nbgrader/exchange")
