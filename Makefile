# ringward: `make demo` runs the main job on the embedded local cluster; `make test` runs the suite.
# Both do their own setup (uv, the locked virtualenv, Cassandra's jars from Maven Central).

SHELL := /bin/bash
UV ?= $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
VENV := .venv
RINGWARD := $(VENV)/bin/ringward

.PHONY: setup browser demo test test-unit test-integration lint typecheck benchmark clean-cluster

# Into ~/.local/bin. A Debian/Ubuntu python3 refuses pip installs (PEP 668) unless told that a --user install
# is meant; that touches only ~/.local, never the system's packages.
$(UV):
	python3 -m pip install --user --quiet uv || python3 -m pip install --quiet uv \
		|| python3 -m pip install --user --break-system-packages --quiet uv

setup: $(UV)
	$(UV) sync --frozen
	$(RINGWARD) cluster jars
	@echo "ready: run ringward as $(RINGWARD) (uv is $(UV); add $$(dirname $(UV)) to PATH to use 'uv run')"

# The browser test drives Debian's Chromium (playwright's own browsers cannot be downloaded here).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
		echo "installing Debian's chromium for the browser test"; \
		export DEBIAN_FRONTEND=noninteractive; apt-get install -y chromium || { apt-get update && apt-get install -y chromium; }; \
	fi

# `make demo SECURED=1`: the same on the secured topology (authentication, authorization, JMX password, TLS).
demo: setup
	$(VENV)/bin/python -m ringward_cli.demo $(if $(SECURED),--secured)

lint: setup
	$(VENV)/bin/ruff check include plugins dags tests benchmarks
	$(VENV)/bin/ruff format --check include plugins dags tests benchmarks

typecheck: setup
	$(VENV)/bin/mypy

test-unit: setup
	$(VENV)/bin/python -m pytest tests/unit tests/dags -q

# The integration tests start and stop their own cluster (and stop it also when a test fails).
test-integration: setup browser
	$(VENV)/bin/python -m pytest tests/integration -q

test: lint typecheck browser
	$(VENV)/bin/python -m pytest tests -q -p no:cacheprovider --durations=25; status=$$?; $(RINGWARD) cluster down >/dev/null 2>&1; exit $$status

benchmark: setup
	$(VENV)/bin/python benchmarks/placement.py

clean-cluster:
	-$(RINGWARD) cluster down --purge
