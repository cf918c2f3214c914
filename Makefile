# The two commands a fresh machine needs (see README):
#   make course   set up .venv, build the learner notebooks, open JupyterLab on notebooks/
#   make test     set up .venv, run the whole test suite
# Everything installs into .venv in this folder; nothing is needed beforehand but python3 (>= 3.10).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup course test check clean-venv

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

setup: $(STAMP)

# No browser is opened where there is no display (a server, a container): JupyterLab prints the URL.
NO_BROWSER := $(if $(or $(DISPLAY),$(WAYLAND_DISPLAY),$(filter Darwin,$(shell uname -s))),,--no-browser)

# Jupyter refuses to run as root (containers, CI machines) unless told that is intended.
AS_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

course: $(STAMP)
	$(PY) -m grader build
	$(PY) -m jupyter lab --notebook-dir=notebooks $(NO_BROWSER) $(AS_ROOT) $(LAB_ARGS)

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

check: $(STAMP)
	$(PY) -m grader check

clean-venv:
	rm -rf $(VENV)
