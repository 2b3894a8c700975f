# The two set-up commands (see README): `make demo` and `make test`.
# Both create .venv, install the package with TensorFlow (CPU) and what the
# tests need, and then run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.tfdarshan-installed
SOURCES := pyproject.toml setup.py $(wildcard native/*.c native/*.h native/*.def native/*.py)

.PHONY: demo test bench install clean

install: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel

$(STAMP): $(BIN)/python $(SOURCES)
	$(BIN)/pip install -q -e ".[tf-cpu,test]"
	touch $@

demo: $(STAMP)
	$(BIN)/python -m tfdarshan demo --logdir demo_logs

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_pread.py

clean:
	rm -rf $(VENV) build *.egg-info tfdarshan/_native_shim*.so demo_logs
