# Two commands do all the set-up on a machine with only Python and make:
#   make run   -- create .venv, install, open the console on the embedded default
#   make test  -- install what the tests need, run them all
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test bench screenshots lab campaign clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	touch $@

run: $(VENV)/.installed
	$(BIN)/tether

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

bench: $(VENV)/.installed-bench
	$(BIN)/python -m tests.benchmarks

screenshots: $(VENV)/.installed-test
	$(BIN)/python -m tui.screenshots screenshots

lab: $(VENV)/.installed
	$(BIN)/tether lab

clean:
	rm -rf $(VENV) build *.egg-info
