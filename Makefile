# `make run`: the main job (creates .venv with pinned dependencies, then runs the runner's default).
# `make test`: the tests, in two environments: .venv (numpy 1.23 + mxnet 1.9.1) and .venv-np2
# (numpy 2 + mxnet 1.9.1 through ecornn's compatibility layer + torch CPU).
PYTHON ?= python3
VENV ?= .venv
VENV2 ?= .venv-np2
PY := $(VENV)/bin/python
PY2 := $(VENV2)/bin/python
PIP_FLAGS := -q --disable-pip-version-check

.PHONY: run test test-np1 test-np2 env clean

$(VENV)/.ready: setup.py requirements/test-np1.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(PIP_FLAGS) -r requirements/test-np1.txt
	$(PY) -m pip install $(PIP_FLAGS) --no-deps --no-build-isolation -e .
	touch $@

$(VENV2)/.ready: setup.py requirements/test-np2.txt requirements/mxnet-nodeps.txt
	test -x $(PY2) || $(PYTHON) -m venv $(VENV2)
	$(PY2) -m pip install $(PIP_FLAGS) -r requirements/test-np2.txt
	$(PY2) -m pip install $(PIP_FLAGS) --no-deps -r requirements/mxnet-nodeps.txt
	$(PY2) -m pip install $(PIP_FLAGS) --no-deps --no-build-isolation -e .
	touch $@

env: $(VENV)/.ready

run: $(VENV)/.ready
	$(PY) -m ecornn.run

test: test-np1 test-np2

test-np1: $(VENV)/.ready
	$(PY) -m pytest -q

test-np2: $(VENV2)/.ready
	$(PY2) -m pytest -q -m "not kernel_build"

clean:
	rm -rf $(VENV) $(VENV2) build *.egg-info
