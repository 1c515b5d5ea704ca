"""AutoRepair on the real cluster: the migration turns it off on every node for its duration and sets back
exactly what it found, after a finished run and after a failed one; a restore that cannot reach a node fails
naming it. No Reaper runs here (its REST calls are unit-tested against a fake)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ringward.errors import ClusterError, MigrationError
from ringward.repair_controllers import parse_autorepair_config
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from task_driver import FakeTaskInstance

ROOT = Path(__file__).resolve().parents[2]
NODES = ("127.0.0.2", "127.0.0.3")
AS_STARTED = {"127.0.0.2": ("full", "incremental"), "127.0.0.3": ("full", "incremental")}


@pytest.fixture
def autorepair_env(autorepair_cluster: LocalCluster) -> Iterator[LocalCluster]:
    from ringward_cli.airflow_env import local_connections

    saved = dict(os.environ)
    os.environ.update(local_connections(ROOT, topology="autorepair"))
    try:
        yield autorepair_cluster
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _active(cluster: LocalCluster) -> dict[str, tuple[str, ...]]:
    """Repair types AutoRepair schedules on each node, as `nodetool getautorepairconfig` reports them."""
    found = {}
    for node in NODES:
        result = cluster.nodetool(node, ["getautorepairconfig"])
        assert result.returncode == 0, result.stdout + result.stderr
        found[node] = parse_autorepair_config(node, result.stdout).active_types
    return found


def _keyspace(keyspace: str, rows: int) -> None:
    with connect(list(NODES)) as session:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
        session.execute(
            f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'NetworkTopologyStrategy', 'dc1': 1}}"
        )
        session.execute(f"CREATE TABLE {keyspace}.items (id int PRIMARY KEY, body text)")
        insert = session.prepare(f"INSERT INTO {keyspace}.items (id, body) VALUES (?, ?)")
        for key in range(rows):
            session.execute(insert, (key, "x" * 200))


def _replication(keyspace: str) -> dict[str, str]:
    with connect(list(NODES)) as session:
        row = session.execute(
            "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (keyspace,)
        ).one()
        return dict(row.replication)


def test_autorepair_is_off_during_the_migration_and_restored_after(autorepair_env: LocalCluster) -> None:
    from ringward_airflow.migration_operators import (
        KeyspaceAlterOperator,
        MigrationPrecheckOperator,
        MigrationRepairOperator,
    )
    from ringward_airflow.repair_controller_operators import (
        PauseRepairControllersOperator,
        RestoreRepairControllersOperator,
    )

    cluster = autorepair_env
    keyspace = "autorepair_done"
    assert _active(cluster) == AS_STARTED
    _keyspace(keyspace, 400)
    for node in NODES:
        cluster.nodetool(node, ["flush", keyspace])
    target = {"class": "NetworkTopologyStrategy", "dc1": 2}

    # Capacity: a configured capacity below what a node holds refuses, naming the node; nothing changes.
    refused_ti = FakeTaskInstance()
    tiny = {"run_id": "autorepair-refused", "ti": refused_ti, "params": {"node_capacity": {"dc1": "1KiB"}}}
    with pytest.raises(Exception, match="past their configured capacity"):
        MigrationPrecheckOperator(task_id="precheck", keyspace=keyspace, replication=target).execute(tiny)
    assert "127.0.0.2 would hold" in refused_ti.xcoms["refusal"]["problem"]
    assert _replication(keyspace)["dc1"] == "1"

    ti = FakeTaskInstance()
    context: Any = {"run_id": "autorepair-run", "ti": ti, "params": {}}
    record = MigrationPrecheckOperator(task_id="precheck", keyspace=keyspace, replication=target).execute(context)
    ti.xcoms["precheck"] = record
    approval = record["approval_md"]
    assert "**AutoRepair** (CEP-37) schedules repairs on 2 of 2 node(s)" in approval
    assert "- 127.0.0.2: full, incremental" in approval and "- 127.0.0.3: full, incremental" in approval
    assert "**Capacity**" in approval and "| node | receives |" in approval

    PauseRepairControllersOperator(task_id="pause_repair_controllers").execute(context)
    assert _active(cluster) == {"127.0.0.2": (), "127.0.0.3": ()}
    KeyspaceAlterOperator(task_id="alter").execute(context)
    repaired = MigrationRepairOperator(task_id="repair", phase="post", deferrable=False).execute(context)
    assert repaired["repaired"] == repaired["ranges"] > 0
    assert _active(cluster) == {"127.0.0.2": (), "127.0.0.3": ()}  # still off after the migration's repair
    # A retried pause keeps the settings the first try saved (not the "off" it finds now).
    PauseRepairControllersOperator(task_id="pause_repair_controllers").execute(context)

    restored = RestoreRepairControllersOperator(task_id="restore_repair_controllers").execute(context)
    assert sorted(restored["autorepair_on"]) == sorted(
        f"{node}: {kind} on" for node, kinds in AS_STARTED.items() for kind in kinds
    )
    assert _active(cluster) == AS_STARTED


def test_autorepair_is_restored_after_a_failed_run_and_an_unreachable_node_is_named(
    autorepair_env: LocalCluster,
) -> None:
    from ringward_airflow.migration_operators import KeyspaceAlterOperator, MigrationPrecheckOperator
    from ringward_airflow.repair_controller_operators import (
        PauseRepairControllersOperator,
        RestoreRepairControllersOperator,
    )

    cluster = autorepair_env
    # Only full on 127.0.0.3 before this run: the restore must bring back exactly that, not "everything".
    cluster.nodetool("127.0.0.3", ["setautorepairconfig", "-t", "incremental", "enabled", "false"])
    before = {"127.0.0.2": ("full", "incremental"), "127.0.0.3": ("full",)}
    assert _active(cluster) == before
    keyspace = "autorepair_failed"
    _keyspace(keyspace, 50)
    ti = FakeTaskInstance()
    context: Any = {"run_id": "autorepair-failed-run", "ti": ti, "params": {}}
    ti.xcoms["precheck"] = MigrationPrecheckOperator(
        task_id="precheck", keyspace=keyspace, replication={"class": "NetworkTopologyStrategy", "dc1": 2}
    ).execute(context)
    PauseRepairControllersOperator(task_id="pause_repair_controllers").execute(context)
    assert _active(cluster) == {"127.0.0.2": (), "127.0.0.3": ()}

    # The run fails: someone else changed the keyspace, the ALTER task refuses.
    with connect(list(NODES)) as session:
        session.execute(
            f"ALTER KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
        )
    with pytest.raises(MigrationError, match="someone else changed it"):
        KeyspaceAlterOperator(task_id="alter").execute(context)

    # The restore (all_done) runs next. 127.0.0.3's JMX is out of reach for it: it restores 127.0.0.2, then
    # fails naming 127.0.0.3 and what to set back there.
    good = os.environ["AIRFLOW_CONN_RINGWARD_NODETOOL"]
    broken = json.loads(good)
    broken["extra"]["jmx_ports"]["127.0.0.3"] = 9  # nothing listens there
    os.environ["AIRFLOW_CONN_RINGWARD_NODETOOL"] = json.dumps(broken)
    try:
        with pytest.raises(ClusterError) as failed:
            RestoreRepairControllersOperator(task_id="restore_repair_controllers").execute(context)
    finally:
        os.environ["AIRFLOW_CONN_RINGWARD_NODETOOL"] = good
    assert "127.0.0.3 did not answer (AutoRepair to set back on: full)" in failed.value.problem
    assert "127.0.0.2" not in failed.value.problem
    assert _active(cluster) == {"127.0.0.2": ("full", "incremental"), "127.0.0.3": ()}

    # Cleared once the node is reachable again: sets back only what still differs.
    restored = RestoreRepairControllersOperator(task_id="restore_repair_controllers").execute(context)
    assert restored["autorepair_on"] == ["127.0.0.3: full on"]
    assert _active(cluster) == before
