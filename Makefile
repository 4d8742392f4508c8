# `make test` and `make demo` set everything up on a fresh machine (a local .venv), then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: install browser postgres prometheus test lint typecheck unit wheel-check demo bench docs clean check-constraints

$(STAMP): pyproject.toml constraints.txt Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[dev]"
	# BFCL's own tool backends, for the tests that check tool worlds against BFCL's state
	# checker: installed without their requirements (torch, faiss, provider SDKs), which the
	# backends the tests import do not need.
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps bfcl-eval==2026.3.23 mpmath==1.4.1
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check src tests examples benchmarks scripts .ci docs/_ext
	$(BIN)/ruff format --check src tests examples benchmarks scripts .ci docs/_ext

typecheck: install
	$(BIN)/mypy

# The HTML report is tested in headless Chromium: Debian's package, installed when missing.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Debian's chromium for the report tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The run store is tested on a real PostgreSQL too: the tests start a throwaway server with
# Debian's binaries (initdb, pg_ctl), installed when missing (in CI, missing ones fail the tests).
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		echo "installing Debian's postgresql for the run store tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }

# The alert rules `turneval watch --write-alert-rules` writes are checked and unit-tested by
# promtool: Debian's prometheus package, installed when missing (in CI, missing fails the test).
prometheus:
	@command -v promtool >/dev/null 2>&1 || { \
		echo "installing Debian's prometheus (promtool) for the alert rule tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }

# tests/test_api_reference.py reads the site the docs step has just built (else builds its own).
# pytest runs on two xdist workers (addopts in pyproject.toml). Bytecode is cached even where the
# environment sets PYTHONDONTWRITEBYTECODE: otherwise every worker rewrites the asserts of ~600
# modules and every Python subprocess of the tests compiles turneval again, on every run.
unit: install browser postgres prometheus docs
	TURNEVAL_DOCS_SITE=$(CURDIR)/site env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest

test: lint typecheck docs unit wheel-check

# The built wheel installs in a clean venv (no repository on the path) and works: import,
# a rule-based evaluation, the CLI and the pytest plugin's entry point. The venv borrows the
# dependencies already in .venv (a .pth line) to stay fast; WHEEL_DEPS=full resolves them
# from the index instead, as `pip install turneval` does.
WHEEL_DIR := .wheel-check
wheel-check: install
	rm -rf $(WHEEL_DIR) && $(BIN)/python -m build --wheel --outdir $(WHEEL_DIR)/dist . >/dev/null
	rm -rf build
	$(PYTHON) -m venv --without-pip $(WHEEL_DIR)/venv
	@if [ "$(WHEEL_DEPS)" = full ]; then \
		$(BIN)/pip --python $(WHEEL_DIR)/venv/bin/python install --quiet --disable-pip-version-check -c constraints.txt $(WHEEL_DIR)/dist/turneval-*.whl; \
	else \
		$(BIN)/python -c "import sysconfig; print(sysconfig.get_path('purelib'))" > "$$($(WHEEL_DIR)/venv/bin/python -c "import sysconfig; print(sysconfig.get_path('purelib'))")/deps.pth"; \
		$(BIN)/pip --python $(WHEEL_DIR)/venv/bin/python install --quiet --disable-pip-version-check --no-deps $(WHEEL_DIR)/dist/turneval-*.whl; \
	fi
	cd $(WHEEL_DIR) && venv/bin/python ../tests/wheel_smoke.py
	cd $(WHEEL_DIR) && venv/bin/turneval metrics >/dev/null
	rm -rf $(WHEEL_DIR)

demo: install
	$(BIN)/turneval demo --out demo-output --store demo-output/runs.db $(if $(JUDGE_BASE_URL),--judge-base-url $(JUDGE_BASE_URL) --judge-model $(or $(JUDGE_MODEL),default))
	$(BIN)/python examples/tool_world.py
	$(BIN)/python examples/grow_test_set.py demo-output/grown
	$(BIN)/python examples/optimize_judge.py demo-output/optimize

bench: install
	RAGAS_PYTHON=$$(benchmarks/setup_ragas.sh | tail -n 1) && export RAGAS_PYTHON && \
	$(BIN)/python benchmarks/run_tool_call_bench.py && \
	$(BIN)/python benchmarks/run_judge_bench.py && \
	$(BIN)/python benchmarks/run_simulation_bench.py

# Issue 44's "speed holds": every benchmark of benchmarks/README.md on the tree before issue 44
# (SPEED_BEFORE: a worktree of 3762701, made when missing) and on this one, rounds alternating in
# one session (~15 min on 2 cores); the Markdown table is also written to SPEED_MD, ready to
# paste. SPEED_ARGS passes more options (--rounds 5, --only stream, --quick).
.PHONY: speed-holds
SPEED_BEFORE ?= /tmp/speed-before
SPEED_MD ?= benchmarks/.data/speed-holds.md
speed-holds: install
	test -d $(SPEED_BEFORE) || git worktree add --detach $(SPEED_BEFORE) 3762701
	mkdir -p $(dir $(SPEED_MD))
	$(BIN)/python benchmarks/run_speed_holds.py --before $(SPEED_BEFORE) --markdown $(SPEED_MD) $(SPEED_ARGS)

# Needs the network (the package index): run after changing constraints.txt.
check-constraints: install
	$(BIN)/python .ci/check_constraints.py

# The site, API reference included (mkdocstrings; its griffe extension is docs/_ext/), built
# with --strict: a broken link or reference, or a griffe warning on a docstring, fails.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage site .wheel-check build dist
