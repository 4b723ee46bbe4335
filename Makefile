# One entry point per job; every target installs what it needs into .venv first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIND ?= 127.0.0.1:8888
SOURCE ?= snapshot
PYTEST_ARGS ?=
ARGS ?=

.PHONY: install run test bench lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $@

install: $(VENV)/.installed

## Run the webhook on 127.0.0.1:8888 with the embedded default cluster (config/snapshot.yaml).
run: install
	$(VENV)/bin/extender serve --bind $(BIND) --source $(SOURCE) $(ARGS)

## Run the test suite.
test: install
	$(VENV)/bin/pytest $(PYTEST_ARGS)

## Run every benchmark and print the table (not part of `make test`).
bench: install
	$(PY) -m bench

lint: install
	$(VENV)/bin/ruff check extender tests bench

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .benchmarks .ruff_cache build dist *.egg-info
