# `make test` and `make demo` set everything up on a fresh machine (a local .venv), then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: install browser test lint typecheck unit demo bench docs clean

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

# The HTML report is tested in headless Chromium: Debian's package, installed when missing.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Debian's chromium for the report tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

unit: install browser
	$(BIN)/pytest

test: lint typecheck unit

demo: install
	$(BIN)/turneval demo --out demo-output $(if $(JUDGE_BASE_URL),--judge-base-url $(JUDGE_BASE_URL) --judge-model $(or $(JUDGE_MODEL),default))

bench: install
	RAGAS_PYTHON=$$(benchmarks/setup_ragas.sh | tail -n 1) && export RAGAS_PYTHON && \
	$(BIN)/python benchmarks/run_tool_call_bench.py && \
	$(BIN)/python benchmarks/run_judge_bench.py && \
	$(BIN)/python benchmarks/run_simulation_bench.py

docs: install
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[docs]"
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage site
