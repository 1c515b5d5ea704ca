"""`make demo`: the seed's hazard with a plain ALTER, then the same change carried safely by the DAG.

Starts the embedded cluster, runs both scenarios, prints placement and evidence, and stops the cluster.
With `--secured` (`make demo SECURED=1`) the cluster is the `secured` topology: authentication,
authorization, JMX password, client TLS; the demo's own reads and writes use the setup's superuser, the DAG
ringward's least-privilege role with the GRANTs of docs/operators-guide.md §2.6.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ringward.permissions import SPARK_ROLE, keyspace_grants, spark_keyspace_grants
from ringward.plan import build_plan
from ringward.replication import Replication
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.localcluster.roles import admin_settings
from ringward_cassandra.localcluster.runtime import project_home
from ringward_cassandra.localcluster.security import RINGWARD_ROLE
from ringward_cassandra.localcluster.spark_jars import ensure_connector_jars
from ringward_cassandra.ops_store import OPS_KEYSPACE
from ringward_cassandra.ring_reader import ring_from_cluster
from ringward_cassandra.seed_scenario import count_at_one_from, create_seed_keyspace

from ringward_cli.airflow_env import airflow_environment, ensure_airflow_db, fail_stale_test_runs, hold_dags_test_lock

NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
TARGET = {"class": "NetworkTopologyStrategy", "dc1": 2}
# The demo's own sessions: nothing on the open cluster; the setup's superuser (TLS) on the secured one.
LOGIN: dict[str, Any] = {}


def banner(text: str) -> None:
    print(f"\n{'=' * 100}\n{text}\n{'=' * 100}", flush=True)


def endpoints(cluster: LocalCluster, keyspace: str) -> str:
    return ", ".join(cluster.nodetool("127.0.0.2", ["getendpoints", keyspace, "users", "1"]).stdout.split())


def plain_alter(cluster: LocalCluster) -> None:
    banner("1. The hazard: a plain ALTER KEYSPACE (seed 000), keyspace `hazard`")
    with connect(NODES, **LOGIN) as session:
        create_seed_keyspace(session, "hazard")
        print(f"SimpleStrategy RF 2, one row (app_id 1). Replicas of app_id 1: {endpoints(cluster, 'hazard')}")
        rows = count_at_one_from("127.0.0.4", "hazard", **LOGIN)
        print(f"CL ONE read with 127.0.0.4 as the only coordinator: {rows} row")
        statement = f"ALTER KEYSPACE hazard WITH replication = {Replication.parse(TARGET).to_cql()}"
        print(f"cqlsh> {statement}")
        session.execute(statement)
        session.cluster.control_connection.wait_for_schema_agreement(wait_time=30)
    print(f"Replicas of app_id 1 now: {endpoints(cluster, 'hazard')}")
    rows = count_at_one_from("127.0.0.4", "hazard", **LOGIN)
    print(f"CL ONE read from 127.0.0.4, now a replica holding nothing: {rows} rows  <-- the data looks lost")


def safe_migration(cluster: LocalCluster, home: Path, topology: str) -> int:
    banner("2. The same change through ringward's keyspace_migration DAG, keyspace `test`")
    with connect(NODES, **LOGIN) as session:
        create_seed_keyspace(session, "test")
        if LOGIN:  # what an administrator grants ringward's role on a keyspace it may migrate
            for grant in keyspace_grants("test"):
                session.execute(grant.statement(RINGWARD_ROLE))
            for grant in spark_keyspace_grants("test"):  # the Spark verification's read-only role
                session.execute(grant.statement(SPARK_ROLE))
        ring = ring_from_cluster(session)
    plan = build_plan(ring, Replication.simple(2), TARGET, keyspace="test")
    print("Placement before -> after (ringward plan):")
    print(plan.table())
    print(plan.summary())
    # The demo runs unattended: its deployment allows a migration without an approval (docs: "Governance").
    env = airflow_environment(home, topology=topology, automation=True)
    ensure_connector_jars(home)  # once (Maven): the folder the local spark_default's ringward-jars-dir names
    ensure_airflow_db(env)
    conf = {"keyspace": "test", "replication": TARGET, "require_approval": False}
    command = [
        str(Path(sys.executable).parent / "airflow"),
        "dags",
        "test",
        "keyspace_migration",
        "--conf",
        json.dumps(conf),
    ]
    print(f"\n$ ringward airflow dags test keyspace_migration --conf '{json.dumps(conf)}'", flush=True)
    fail_stale_test_runs(env)  # an earlier demo killed mid-run left its run `running`
    started = time.monotonic()
    lock = hold_dags_test_lock(env)
    try:
        result = subprocess.run(command, env=env, capture_output=True, text=True)
    finally:
        os.close(lock)
    log = result.stdout + result.stderr
    for line in log.splitlines():
        if "[DAG TEST] end task" in line:
            print("  finished", line.split("task_id=", 1)[1].split(" ", 1)[0])
    state = next((ln.split("state=", 1)[1].split(",")[0] for ln in log.splitlines() if "DagRun Finished" in ln), "?")
    print(f"DAG run {state} in {time.monotonic() - started:.0f}s")
    if state != "success":
        print(log[-5000:])
        return 1
    show_evidence(cluster)
    return 0


def show_evidence(cluster: LocalCluster) -> None:
    banner("3. Evidence")
    print(f"Replicas of app_id 1: {endpoints(cluster, 'test')}")
    print(f"CL ONE read with 127.0.0.4 as the only coordinator: {count_at_one_from('127.0.0.4', 'test', **LOGIN)} row")
    cluster.nodetool("127.0.0.2", ["flush", "test"])
    sstables = cluster.nodetool("127.0.0.2", ["getsstables", "test", "users", "1"]).stdout.strip()
    print(f"SSTables of app_id 1 left on the former replica 127.0.0.2 after cleanup: {sstables or 'none'}")
    with connect(NODES, **LOGIN) as session:
        rows = session.execute(
            f"SELECT step, range_start, range_end, status, coordinator FROM {OPS_KEYSPACE}.migration_journal"
        )
        print("Repair journal (ringward_ops.migration_journal):")
        for row in rows:
            print(f"  {row.step:<14} ({row.range_start}, {row.range_end}] {row.status} on {row.coordinator}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__)
    parser.add_argument("--secured", action="store_true", help="run on the secured topology")
    topology = "secured" if parser.parse_args(argv).secured else "seed"
    home = project_home()
    cluster = LocalCluster()
    secured = ", secured" if topology == "secured" else ""
    banner(f"Starting the embedded Cassandra 5.0 cluster (the seed's topology{secured})")
    cluster.down(purge=True)
    try:
        cluster.up(topology)
        if topology == "secured":
            LOGIN.update(admin_settings(cluster.secrets_required()))
            print(
                "Secured: PasswordAuthenticator, CassandraAuthorizer, JMX password file, client TLS; the DAG logs "
                f"in as {RINGWARD_ROLE!r} with the GRANTs of `ringward grants`."
            )
        print(cluster.nodetool("127.0.0.2", ["ring"]).stdout)
        plain_alter(cluster)
        return safe_migration(cluster, home, topology)
    finally:
        banner("Stopping the cluster")
        cluster.down(purge=True)


if __name__ == "__main__":
    sys.exit(main())
