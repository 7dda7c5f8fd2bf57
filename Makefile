# `make run`: the main job (creates .venv with pinned dependencies, then runs the runner's default).
# `make test`: the tests, in two environments: numpy 1.23 + mxnet 1.9.1, and numpy 2 + mxnet 1.9.1
# through ecornn's compatibility layer.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test env clean

$(VENV)/.ready: setup.py requirements/test-np1.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements/test-np1.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

env: $(VENV)/.ready

run: $(VENV)/.ready
	$(PY) -m ecornn.run

test: $(VENV)/.ready
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info
