# The two commands a fresh machine needs (see README):
#   make course   set up .venv, build the learner notebooks, open JupyterLab on the course home
#   make test     set up .venv (and Chromium, for the browser test; bubblewrap, for the grading sandbox;
#                 Graphviz, for the graph drawings), run the whole test suite
# Also: make test-fast (the library and the checks, a few minutes), make test-gpu (what needs a CUDA device).
# Everything installs into .venv in this folder; nothing is needed beforehand but python3 (>= 3.10).
# For instructors (README, "For instructors"):
#   make instructor   JupyterLab in the course directory with nbgrader's instructor tools

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup browser sandbox graphviz hub-proxy course instructor test test-fast test-gpu check clean-venv

# The stamp holds pyproject.toml's hash: a newer file with the same content (a fresh clone, a git
# checkout) installs nothing again.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if [ -f $@ ] && [ "$$(cat $@)" = "$$(sha256sum pyproject.toml)" ]; then touch $@; else \
		$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]' && sha256sum pyproject.toml > $@; fi

setup: $(STAMP) graphviz

# The graph drawings (tensorcraft.compiler.draw, notebooks 07-09) are laid out by Graphviz's `dot`;
# installed here where we may (root, apt-get). Elsewhere it is said; the drawings then fall back
# to one row per depth, which is readable only for small graphs, and say so.
graphviz:
	@if command -v dot >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing Graphviz for the graph drawings (apt-get install graphviz)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null \
		|| echo "could not install Graphviz: graph drawings fall back to a simple layout"; \
	else echo "no dot, and apt-get cannot be run here (not root, or no apt-get): install Debian's" \
		"'graphviz' package for readable graph drawings; they fall back to a simple layout until then"; fi

# No browser is opened where there is no display (a server, a container): JupyterLab prints the URL.
NO_BROWSER := $(if $(or $(DISPLAY),$(WAYLAND_DISPLAY),$(filter Darwin,$(shell uname -s))),,--no-browser)

# Jupyter refuses to run as root (containers, CI machines) unless told that is intended.
AS_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

# Who sees what in JupyterLab: a Jupyter config directory per role, put first on Jupyter's search
# path (grader/jupyter/README.md). A learner gets no instructor tools and no news prompt.
LEARNER_JUPYTER    := $(CURDIR)/grader/jupyter/learner
INSTRUCTOR_JUPYTER := $(CURDIR)/grader/jupyter/instructor

course: $(STAMP) graphviz
	$(PY) -m grader build
	JUPYTER_CONFIG_PATH=$(LEARNER_JUPYTER) $(PY) -m jupyter lab --notebook-dir=notebooks \
		--LabApp.default_url=/lab/tree/course_home.ipynb $(NO_BROWSER) $(AS_ROOT) $(LAB_ARGS)

# nbgrader's formgrader, course list and Create Assignment panel, in the course directory (where
# its nbgrader_config.py applies), built first (only the notebooks whose source changed are generated again).
COURSE_DIR ?= build/course
instructor: $(STAMP) graphviz
	$(PY) -m grader build --course $(COURSE_DIR)
	cd $(COURSE_DIR) && JUPYTER_CONFIG_PATH=$(INSTRUCTOR_JUPYTER) $(abspath $(PY)) -m jupyter lab \
		$(NO_BROWSER) $(AS_ROOT) $(LAB_ARGS)

# The browser test (tests/e2e) drives Debian's Chromium; installed here where we may (root, apt-get).
# Elsewhere it is said, and that test is skipped with the reason.
CHROMIUM ?= /usr/bin/chromium
browser:
	@if [ -x $(CHROMIUM) ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing Chromium for the browser test (apt-get install chromium)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
		|| echo "could not install Chromium: the browser test (tests/e2e) will be skipped"; \
	else echo "no $(CHROMIUM), and apt-get cannot be run here (not root, or no apt-get): install Debian's" \
		"'chromium' package to run the browser test (tests/e2e); it is skipped until then"; fi

# autograde runs every learner's kernel in a bubblewrap sandbox (grader/worker/sandbox.py); installed here
# where we may (root, apt-get). Elsewhere it is said; autograde then refuses to run unless --unsafe.
sandbox:
	@if command -v bwrap >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing bubblewrap for the grading sandbox (apt-get install bubblewrap)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null \
		|| echo "could not install bubblewrap: autograde will refuse to run without --unsafe"; \
	else echo "no bwrap, and apt-get cannot be run here (not root, or no apt-get): install Debian's" \
		"'bubblewrap' package for the grading sandbox; its tests are skipped until then"; fi

# The JupyterHub test (tests/e2e/test_jupyterhub_class.py) runs a real hub, whose proxy is configurable-http-proxy (npm), pinned
# and installed into .venv/node where npm exists. Elsewhere it is said, and that test is skipped with the reason.
hub-proxy:
	@if [ -x $(VENV)/node/node_modules/.bin/configurable-http-proxy ]; then :; \
	elif command -v npm >/dev/null; then \
		echo "installing configurable-http-proxy for the JupyterHub test (npm, into $(VENV)/node)"; \
		npm install --silent --no-audit --no-fund --prefix $(VENV)/node configurable-http-proxy@5.3.0 >/dev/null 2>&1 \
		|| echo "could not install configurable-http-proxy: the JupyterHub test (tests/e2e/test_jupyterhub_class.py) will be skipped"; \
	else echo "no npm here: install Node.js and npm (Debian's 'nodejs' and 'npm' packages) to run the" \
		"JupyterHub test (tests/e2e/test_jupyterhub_class.py); it is skipped until then"; fi

# Two processes (pytest-xdist), one per core of a 2-core machine: much of the slow tier waits on kernels,
# servers and browsers, and the library's tests use one core. Each file's tests stay in one process
# (tests/conftest.py says which go together and in what order). JOBS=0: one process, as plain pytest.
JOBS  ?= 2
XDIST := $(if $(filter-out 0,$(JOBS)),-n $(JOBS) --dist loadscope --no-loadscope-reorder)

test: $(STAMP) browser sandbox graphviz hub-proxy
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# The library and the checks: no kernel, sandbox, browser, Dask, hub or nbgrader run (markers: tests/conftest.py).
FAST := not (kernel or sandbox or browser or dask or hub or nbgrader)
test-fast: $(STAMP) graphviz
	$(PY) -m pytest -m "$(FAST)" $(XDIST) $(PYTEST_ARGS)

# Everything that needs a CUDA device (the cuda tests, Triton compiled natively, `grader check` with
# its CUDA groups, the GPU benchmarks), results in $(OUT) or build/gpu-results/. Without a device
# every part says it was skipped and why, and the command succeeds.
test-gpu: $(STAMP) sandbox
	$(PY) scripts/test_gpu.py

check: $(STAMP) graphviz
	$(PY) -m grader check

clean-venv:
	rm -rf $(VENV)
