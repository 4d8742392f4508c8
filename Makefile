# `make test` and `make demo` set everything up on a fresh machine (a local .venv), then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: install test lint typecheck unit demo bench docs clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/pytest

test: lint typecheck unit

demo: install
	$(BIN)/python examples/quickstart.py

bench: install
	RAGAS_PYTHON=$$(benchmarks/setup_ragas.sh | tail -n 1) && export RAGAS_PYTHON && \
	$(BIN)/python benchmarks/run_tool_call_bench.py && \
	$(BIN)/python benchmarks/run_judge_bench.py

docs: install
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[docs]"
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage site
