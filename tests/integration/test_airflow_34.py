"""Airflow 3.4 in its side environment (`make venv-af34`: the project installed beside apache-airflow 3.4, the
only 3.4 the registry serves being 3.4.0b2): one keyspace migration through 3.4's own api-server, scheduler,
dag-processor and triggerer on the seed cluster, approved through the REST API as soon as it asks, driven by
this environment's official client (3.3.2), so a change in 3.4's API would show. On 3.4 ringward runs Airflow's
own LocalExecutor (it carries the deferral/approval race fix ringward's subclass adds to 3.3)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_stack import ROOT, AirflowStack, start_stack
from ringward_cassandra.localcluster import LocalCluster
from test_airflow_scheduler import (
    MIGRATION,
    NODES,
    assert_repair_deferred_and_resumed_in_one_try,
    assert_seed_hazard_repaired,
    failed_tries,
    run_approved_migration,
)

pytestmark = pytest.mark.integration

AIRFLOW_34 = ROOT / ".venv-af34" / "bin" / "airflow"
READY = ROOT / ".venv-af34" / ".ready"  # `make venv-af34` writes it once the install has ended


def wait_for_side_environment(timeout: float = 900.0) -> None:
    """`make test` installs the side environment in its unit stream, beside the lanes (the install took 47 s
    before the lanes started): wait for that install to end."""
    deadline = time.monotonic() + timeout
    while not READY.exists():
        if not READY.parent.exists() or time.monotonic() > deadline:
            pytest.fail(f"No Airflow 3.4 side environment at {READY.parent} (or its install never ended: no "
                        f"{READY.name}). Fix: make venv-af34")  # fmt: skip
        time.sleep(2)


@pytest.fixture(scope="module")
def airflow_34(cluster_manager: Any) -> Iterator[AirflowStack]:
    wait_for_side_environment()
    cluster_manager.ensure("seed")
    yield from start_stack(airflow=str(AIRFLOW_34))


def test_a_migration_approved_through_the_api_runs_on_airflow_34(
    seed_cluster: LocalCluster, airflow_34: AirflowStack
) -> None:
    assert airflow_34.version().startswith("3.4"), airflow_34.version()
    python = AIRFLOW_34.parent / "python"
    probe = ("from airflow.executors.local_executor import LocalExecutor as Airflows;"
             "from ringward_airflow.executor import LocalExecutor; print(LocalExecutor is Airflows)")  # fmt: skip
    assert subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "True"

    run_id, approval = run_approved_migration(airflow_34, NODES, "seed_af34")
    assert airflow_34.run(MIGRATION, run_id)["state"] == "success", airflow_34.describe(MIGRATION, run_id)
    assert approval["task_instance"]["task_id"] and failed_tries(airflow_34, MIGRATION, run_id) == []
    assert_repair_deferred_and_resumed_in_one_try(airflow_34, run_id)
    assert_seed_hazard_repaired(seed_cluster, NODES, "seed_af34")  # streamed to the new replica, former cleaned
