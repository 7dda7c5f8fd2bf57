# `make run`: the main job. Without a GPU: creates .venv (pinned) and runs the runner's default on
# the NumPy reference. With one (nvidia-smi present): creates .venv-gpu (numpy 2 + CuPy) and runs the
# runner's default, then a short sweep of every strategy (table, JSON and plot under out/).
# `make test`: the tests, in two environments: .venv (numpy 1.23 + mxnet 1.9.1) and .venv-np2
# (numpy 2 + mxnet 1.9.1 through ecornn's compatibility layer + torch CPU).
PYTHON ?= python3
VENV ?= .venv
VENV2 ?= .venv-np2
VENV_GPU ?= .venv-gpu
PY_GPU := $(VENV_GPU)/bin/python
PY := $(VENV)/bin/python
PY2 := $(VENV2)/bin/python
PIP_FLAGS := -q --disable-pip-version-check

.PHONY: run run-cpu run-gpu test test-np1 test-np2 env clean

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

# CuPy's wheel matches the driver's CUDA major version (12 or 13; 13 where nvidia-smi does not say).
CUDA_MAJOR = $(shell nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\).*/\1/p' | head -1)
CUPY_WHEEL = cupy-cuda$(if $(filter 12,$(CUDA_MAJOR)),12,13)x==14.2.0

$(VENV_GPU)/.ready: setup.py requirements/run-gpu.txt
	test -x $(PY_GPU) || $(PYTHON) -m venv $(VENV_GPU)
	$(PY_GPU) -m pip install $(PIP_FLAGS) -r requirements/run-gpu.txt "$(CUPY_WHEEL)"
	$(PY_GPU) -m pip install $(PIP_FLAGS) --no-deps --no-build-isolation -e .
	touch $@

env: $(VENV)/.ready

run:
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory run-gpu; else $(MAKE) --no-print-directory run-cpu; fi

run-cpu: $(VENV)/.ready
	$(PY) -m ecornn.run

run-gpu: $(VENV_GPU)/.ready
	mkdir -p out
	$(PY_GPU) -m ecornn.run
	$(PY_GPU) -m ecornn.run sweep --json out/sweep.json --csv out/sweep.csv --plot out/sweep.png

test: test-np1 test-np2

test-np1: $(VENV)/.ready
	$(PY) -m pytest -q

test-np2: $(VENV2)/.ready
	$(PY2) -m pytest -q -m "not kernel_build"

clean:
	rm -rf $(VENV) $(VENV2) $(VENV_GPU) build *.egg-info out
