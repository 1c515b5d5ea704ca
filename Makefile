# ringward: `make demo` runs the main job on the embedded local cluster; `make test` runs the suite.
# Both do their own setup (uv, the locked virtualenv, Cassandra's jars from Maven Central).

SHELL := /bin/bash
UV ?= $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
VENV := .venv
RINGWARD := $(VENV)/bin/ringward

.PHONY: setup demo test test-unit test-integration lint typecheck benchmark clean-cluster

# Into ~/.local/bin. A Debian/Ubuntu python3 refuses pip installs (PEP 668) unless told that a --user install
# is meant; that touches only ~/.local, never the system's packages.
$(UV):
	python3 -m pip install --user --quiet uv || python3 -m pip install --quiet uv \
		|| python3 -m pip install --user --break-system-packages --quiet uv

setup: $(UV)
	$(UV) sync --frozen
	$(RINGWARD) cluster jars
	@echo "ready: run ringward as $(RINGWARD) (uv is $(UV); add $$(dirname $(UV)) to PATH to use 'uv run')"

demo: setup
	$(VENV)/bin/python -m ringward_cli.demo

lint: setup
	$(VENV)/bin/ruff check include plugins dags tests benchmarks
	$(VENV)/bin/ruff format --check include plugins dags tests benchmarks

typecheck: setup
	$(VENV)/bin/mypy

test-unit: setup
	$(VENV)/bin/python -m pytest tests/unit tests/dags -q

# The integration tests start and stop their own cluster (and stop it also when a test fails).
test-integration: setup
	$(VENV)/bin/python -m pytest tests/integration -q

test: lint typecheck
	$(VENV)/bin/python -m pytest tests -q -p no:cacheprovider; status=$$?; $(RINGWARD) cluster down >/dev/null 2>&1; exit $$status

benchmark: setup
	$(VENV)/bin/python benchmarks/placement.py

clean-cluster:
	-$(RINGWARD) cluster down --purge
