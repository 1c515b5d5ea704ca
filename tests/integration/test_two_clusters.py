"""Two Cassandra clusters served by one Airflow (issue 39), through the real scheduler, dag-processor, triggerer
and api-server (LocalExecutor), as the guide's §0.3a and §7 set them up.

A clusters file declares `alpha` (the seed cluster, its usual connections) and `beta` (a two-node cluster of its
own on other loopback addresses, its own connections and repair configuration). The DAG file gives each its
suffixed DAGs. Beta's scheduled night (started by unpausing its DAG) runs while alpha's migration is triggered
and approved through the REST API; each touches only its own cluster and keeps its state in its own
`ringward_ops`; the pages list both clusters and each cluster's Repair page shows only its own keyspaces; the
StatsD lines of both arrive tagged with their cluster's name. Beta's night also repairs a keyspace whose table
has a gc_grace_seconds of 1 s: when the report runs, that table is past its deadline, and the notifier configured
as a deployment configures its own ($RINGWARD_ALERT_NOTIFIERS: tests/dags/alert_recorder.py) is called with
beta's name, that table and the fix. The Asset events the REST API lists are each cluster's own keyspace:
`cassandra://alpha/<migrated keyspace>` from alpha's migration, `cassandra://beta/<repaired keyspace>` from beta's
night (not the keyspace past its deadline).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from airflow_stack import AirflowStack, nightly_config, start_stack, topology_under_test
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster, load_topology
from ringward_cassandra.ops_store import OpsStore
from ringward_cassandra.seed_scenario import create_seed_keyspace
from schema_agreement import settle_schema
from test_airflow_scheduler import approve_when_asked

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from statsd_lines import gauges

pytestmark = pytest.mark.integration

ALPHA_NODES = list(load_topology(topology_under_test("seed")).addresses)  # 127.0.0.2-4, or the lane's own
# Beta beside it: 127.0.0.30-31, shifted as the lane shifts the seed (127.0.0.40-41 in the second lane).
_SHIFT = int(ALPHA_NODES[0].rsplit(".", 1)[1]) - 2
BETA_NODES = [f"127.0.0.{30 + _SHIFT}", f"127.0.0.{31 + _SHIFT}"]
BETA_TOKENS = [[-9000000000000000000, -4500000000000000000, 0, 4500000000000000000],
               [-6750000000000000000, -2250000000000000000, 2250000000000000000, 6750000000000000000]]  # fmt: skip
ALPHA_KEYSPACE, BETA_KEYSPACE = "two_alpha", "two_beta"
RECORDER = Path(__file__).resolve().parents[1] / "dags"  # alert_recorder.py, the test's notifier
BETA_LATE = "two_beta_late"  # its table's gc_grace_seconds is 1 s: past its deadline when the report runs
MIGRATION, NIGHTLY = "keyspace_migration__alpha", "nightly_subrange_repair__beta"


def beta_root() -> Path:
    """Beside the lane's own cluster, where `make test` stops it whatever the run's outcome."""
    from ringward_cassandra.localcluster import runtime

    return runtime.cluster_root().parent / "beta-cluster"


@pytest.fixture(scope="module")
def beta(cluster_manager: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Path]]:
    """The second cluster, its own LocalCluster folder and topology file; stopped and purged afterwards."""
    cluster_manager.ensure("seed")
    topology = tmp_path_factory.mktemp("beta") / "beta.json"
    nodes = [{"address": a, "datacenter": "dc1", "rack": "rack1", "tokens": t} for a, t in zip(BETA_NODES, BETA_TOKENS,
                                                                                            strict=True)]  # fmt: skip
    topology.write_text(json.dumps({"name": "beta", "description": "issue 39's second cluster", "nodes": nodes}))
    with pytest.MonkeyPatch.context() as patch:  # a LocalCluster keeps the root it was made with
        patch.setenv("RINGWARD_CLUSTER_HOME", str(beta_root()))
        cluster = LocalCluster()
    cluster.down(purge=True)
    try:
        cluster.up(str(topology))
        yield cluster, topology
    finally:
        cluster.down(purge=True)


def beta_connections(cluster: LocalCluster, topology: Path) -> dict[str, str]:
    """Beta's connections under its own ids, made as `ringward airflow` makes the local cluster's."""
    from ringward_cli.airflow_env import local_connections

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RINGWARD_CLUSTER_HOME", str(cluster.root))
        local = local_connections(Path(__file__).resolve().parents[2], str(topology))
    return {
        "AIRFLOW_CONN_CASSANDRA_BETA": local["AIRFLOW_CONN_CASSANDRA_DEFAULT"],
        "AIRFLOW_CONN_CASSANDRA_SPARK_BETA": local["AIRFLOW_CONN_CASSANDRA_SPARK"],
        "AIRFLOW_CONN_NODETOOL_BETA": local["AIRFLOW_CONN_RINGWARD_NODETOOL"],
    }


class StatsdSink:
    """A loopback UDP socket that keeps every StatsD gauge line it receives: (name, tags, value)."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.5)
        self.port = int(self.socket.getsockname()[1])
        self.lines: list[tuple[str, dict[str, str], float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._receive, daemon=True)
        self.thread.start()

    def _receive(self) -> None:
        while not self.stop.is_set():
            try:
                datagram = self.socket.recv(65536).decode(errors="replace")
            except TimeoutError:
                continue
            self.lines.extend((name, dict(tags), value) for name, tags, value in gauges(datagram))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.socket.close()

    def clusters_of(self, name: str) -> set[str]:
        return {tags.get("cluster", "") for line, tags, _ in self.lines if line == f"airflow.{name}"}


@pytest.fixture(scope="module")
def statsd() -> Iterator[StatsdSink]:
    sink = StatsdSink()
    try:
        yield sink
    finally:
        sink.close()


@pytest.fixture(scope="module")
def two_cluster_stack(
    beta: tuple[LocalCluster, Path], statsd: StatsdSink, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AirflowStack]:
    folder = tmp_path_factory.mktemp("two-clusters")
    beta_config = nightly_config(folder, [BETA_KEYSPACE, BETA_LATE]).rename(folder / "beta_repair.yaml")
    alpha_config = nightly_config(folder, [ALPHA_KEYSPACE]).rename(folder / "alpha_repair.yaml")
    clusters = {"clusters": [
        {"name": "alpha", "cassandra_conn_id": "cassandra_default", "nodetool_conn_id": "ringward_nodetool",
         "repair_config": str(alpha_config)},
        {"name": "beta", "cassandra_conn_id": "cassandra_beta", "nodetool_conn_id": "nodetool_beta",
         "spark_cassandra_conn_id": "cassandra_spark_beta", "repair_config": str(beta_config)},
    ]}  # fmt: skip
    clusters_file = folder / "clusters.yaml"
    clusters_file.write_text(yaml.safe_dump(clusters))
    settings = {
        "RINGWARD_CLUSTERS": str(clusters_file),
        **beta_connections(*beta),
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(statsd.port),
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
        "AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED": "True",
        # The alerts go to the test's notifier, named as a deployment names its own; each call a line in a file.
        "RINGWARD_ALERT_NOTIFIERS": "alert_recorder:NOTIFIERS",
        "RINGWARD_TEST_ALERTS": str(folder / "alerts.jsonl"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(RECORDER), os.environ.get("PYTHONPATH")])),
    }
    dags = tuple(f"{kind}__{name}" for kind in ("keyspace_migration", "keyspace_migration_rollback",
                                                "nightly_subrange_repair") for name in ("alpha", "beta"))  # fmt: skip
    stacks = start_stack(settings=settings, dags=dags)
    stack = next(stacks)
    try:
        for name in ("alpha", "beta"):  # each cluster's own pool (guide §0.3a)
            command = [stack.airflow, "pools", "set", f"ringward_repair__{name}", "1", f"ringward repairs, {name}"]
            subprocess.run(command, env=stack.env, check=True, capture_output=True, timeout=120)
        yield stack
    finally:
        stacks.close()  # stops the stack


def test_a_migration_on_one_cluster_while_the_others_night_runs(
    beta: tuple[LocalCluster, Path], two_cluster_stack: AirflowStack, statsd: StatsdSink
) -> None:
    stack = two_cluster_stack
    beta_cluster, _ = beta
    dag_ids = {dag["dag_id"] for dag in httpx.get(f"{stack.url}/api/v2/dags", headers=_bearer(stack), timeout=60)
               .json()["dags"]}  # fmt: skip
    assert {MIGRATION, NIGHTLY, "keyspace_migration__beta", "nightly_subrange_repair__alpha"} <= dag_ids
    assert "keyspace_migration" not in dag_ids  # a clusters file: no unsuffixed DAGs

    with connect(BETA_NODES) as session:
        session.execute(f"DROP KEYSPACE IF EXISTS {BETA_KEYSPACE}")
        session.execute(f"CREATE KEYSPACE {BETA_KEYSPACE} WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 2}")  # fmt: skip
        session.execute(f"CREATE TABLE {BETA_KEYSPACE}.t (k int PRIMARY KEY, v text)")
        settle_schema(session)
        insert = session.prepare(f"INSERT INTO {BETA_KEYSPACE}.t (k, v) VALUES (?, ?)")
        for k in range(200):
            session.execute(insert, (k, "beta"))
        session.execute(f"DROP KEYSPACE IF EXISTS {BETA_LATE}")
        session.execute(f"CREATE KEYSPACE {BETA_LATE} WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 2}")  # fmt: skip
        session.execute(f"CREATE TABLE {BETA_LATE}.t (k int PRIMARY KEY, v text) WITH gc_grace_seconds = 1")
        settle_schema(session)
        for k in range(20):
            session.execute(f"INSERT INTO {BETA_LATE}.t (k, v) VALUES (%s, 'late')", (k,))
    with connect(ALPHA_NODES) as session:
        create_seed_keyspace(session, ALPHA_KEYSPACE)

    # Beta's night: the scheduled run its first unpause starts, in beta's own pool.
    stack.set_paused(NIGHTLY, False)
    stack.wait_until(lambda: bool(stack.runs(NIGHTLY)), 180, "beta's scheduled night to be created")
    night_id = stack.runs(NIGHTLY)[0]["dag_run_id"]
    # Alpha's migration, triggered and approved through the API while beta's night runs.
    stack.set_paused(MIGRATION, False)
    target = {"class": "NetworkTopologyStrategy", "dc1": 2}
    migration_id = stack.trigger(MIGRATION, {"keyspace": ALPHA_KEYSPACE, "replication": target,
                                             "require_approval": True})  # fmt: skip
    approve_when_asked(stack, MIGRATION, migration_id)
    night = stack.wait_for_state(NIGHTLY, night_id, {"success", "failed"}, timeout=600)
    migration = stack.wait_for_state(MIGRATION, migration_id, {"success", "failed"}, timeout=900)
    assert night["state"] == "success", stack.describe(NIGHTLY, night_id)
    assert migration["state"] == "success", stack.describe(MIGRATION, migration_id)
    # side by side: neither waited for the other (their own pools; the migration's tasks in the default pool)
    assert night["start_date"] < migration["end_date"] and migration["start_date"] < night["end_date"]

    # Each touched only its own cluster, and keeps its state there.
    with connect(ALPHA_NODES) as session:
        alpha_keyspaces = set(session.cluster.metadata.keyspaces)
        replication = session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                                      (ALPHA_KEYSPACE,)).one().replication  # fmt: skip
        alpha_store = OpsStore(session)
        alpha_migrations = {row.keyspace: row.state for row in alpha_store.migrations()}
        alpha_runs = alpha_store.repair_runs()
    with connect(BETA_NODES) as session:
        beta_keyspaces = set(session.cluster.metadata.keyspaces)
        beta_store = OpsStore(session)
        beta_migrations = beta_store.migrations()
        beta_runs = beta_store.repair_runs()
        beta_history = beta_store.repair_history(BETA_KEYSPACE)
    assert replication["class"].endswith("NetworkTopologyStrategy") and replication["dc1"] == "2", replication
    assert alpha_migrations.get(ALPHA_KEYSPACE) == "done", alpha_migrations
    assert BETA_KEYSPACE not in alpha_keyspaces and ALPHA_KEYSPACE not in beta_keyspaces
    assert beta_migrations == []  # the migration's record lives in alpha's ringward_ops only
    assert beta_runs and beta_runs[0].state == "DONE", beta_runs[:1]
    assert beta_history and {r.keyspace for r in beta_history} == {BETA_KEYSPACE}
    assert {r.record.state.value for r in beta_history} == {"DONE"}
    assert all(run.run_id != beta_runs[0].run_id for run in alpha_runs)  # the night is recorded on beta only

    # The pages: both clusters listed; each Repair page shows its own cluster's keyspaces only.
    listed = httpx.get(f"{stack.url}/ringward/api/clusters", headers=_bearer(stack), timeout=60)
    assert listed.status_code == 200, listed.text
    assert {c["name"] for c in listed.json()["clusters"]} == {"alpha", "beta"}, listed.text
    beta_page = httpx.get(f"{stack.url}/ringward/api/repair?cluster=beta", headers=_bearer(stack), timeout=120)
    alpha_page = httpx.get(f"{stack.url}/ringward/api/repair?cluster=alpha", headers=_bearer(stack), timeout=120)
    assert beta_page.status_code == 200 and alpha_page.status_code == 200, (beta_page.text, alpha_page.text)
    assert BETA_KEYSPACE in beta_page.text and BETA_KEYSPACE not in alpha_page.text

    # The metrics of both, each tagged with its cluster's name.
    stack.wait_until(lambda: "beta" in statsd.clusters_of("ringward.repair.table.coverage_ratio"), 60,
                     "beta's table coverage gauge")  # fmt: skip
    assert statsd.clusters_of("ringward.repair.table.coverage_ratio") == {"beta"}
    assert statsd.clusters_of("ringward.migration.ranges_moved") == {"alpha"}
    coverage = [(tags, value) for name, tags, value in statsd.lines
                if name == "airflow.ringward.repair.table.coverage_ratio"]  # fmt: skip
    assert {tags["keyspace"] for tags, _ in coverage} == {BETA_KEYSPACE, BETA_LATE}
    on_time = [value for tags, value in coverage if tags["keyspace"] == BETA_KEYSPACE]
    assert on_time[-1] == 1.0  # the night repaired every range of beta's table
    late = [value for tags, value in coverage if tags["keyspace"] == BETA_LATE]
    assert late[-1] == 0.0  # repaired tonight, but longer ago than its 1 s of gc_grace when the report ran

    # The alert: beta's table past its deadline reached the configured notifier, with the cluster and the fix.
    alerts = Path(stack.env["RINGWARD_TEST_ALERTS"])
    calls = [json.loads(line) for line in alerts.read_text().splitlines()] if alerts.exists() else []
    assert [call["alert"]["kind"] for call in calls] == ["gc_grace_passed"], calls
    alert = calls[0]["alert"]
    assert alert["cluster"] == "beta" and alert["tables"] == [f"{BETA_LATE}.t"], alert
    assert calls[0]["subject"].startswith("[ringward critical] ")
    assert "Fix: Repair them now: trigger nightly_subrange_repair" in calls[0]["message"], calls[0]["message"]

    # The Asset events: each cluster's own keyspace, from its own DAG; none for the keyspace past its deadline.
    listed_events = httpx.get(f"{stack.url}/api/v2/assets/events", params={"limit": 100}, headers=_bearer(stack),
                              timeout=60)  # fmt: skip
    assert listed_events.status_code == 200, listed_events.text
    keyspace_events = {(event["uri"], event["source_dag_id"]) for event in listed_events.json()["asset_events"]
                       if event["uri"].startswith(("cassandra://alpha/", "cassandra://beta/"))}  # fmt: skip
    assert keyspace_events == {(f"cassandra://alpha/{ALPHA_KEYSPACE}", MIGRATION),
                               (f"cassandra://beta/{BETA_KEYSPACE}", NIGHTLY)}, keyspace_events  # fmt: skip
    assert beta_cluster.running_pids()  # beta still up: nothing of alpha's run stopped it


def _bearer(stack: AirflowStack) -> dict[str, str]:
    return {"Authorization": f"Bearer {stack.token()}"}
