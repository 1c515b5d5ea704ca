"""On the seed ring, the fleet simulator and the real local cluster agree (issue 23): the same keyspaces and
tables give the same segments and repair commands, and one night of the real nightly DAG on each (through
`ringward airflow dags test` on the cluster, through benchmarks/fleet/airflow_night.py on the simulator)
runs the same sessions (the same ranges together on the same coordinator) and covers every table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from dag_test_runs import run_dag_test
from ringward.repair import SegmentState, SizeSplitter, group_segments, parse_config
from ringward_cassandra.cluster_repairs import CqlCatalog, plan_cluster
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.ops_store import OPS_KEYSPACE, OpsStore
from ringward_cassandra.ring_reader import ring_from_cluster
from ringward_fleetsim import FleetSpec, Simulator
from schema_agreement import settle_schema

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "fleet"))
from airflow_night import sessions_of  # noqa: E402

NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
RINGWARD = str(Path(sys.executable).parent / "ringward")


def _create(session: Any, spec: FleetSpec) -> None:
    for table in spec.table_specs():
        if table.name == spec.table_list()[0]:
            session.execute(f"DROP KEYSPACE IF EXISTS {table.keyspace}")
            session.execute(f"CREATE KEYSPACE {table.keyspace} WITH replication = "
                            f"{{'class': 'NetworkTopologyStrategy', 'dc1': {spec.rf_per_dc}}}")  # fmt: skip
        session.execute(f"CREATE TABLE {table.qualified} (k int PRIMARY KEY, v text) "
                        f"WITH gc_grace_seconds = {table.gc_grace}")  # fmt: skip
    if OPS_KEYSPACE in session.cluster.metadata.keyspaces:
        for keyspace in spec.keyspace_list():
            OpsStore(session).forget_repair_history(keyspace)
    settle_schema(session)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}


def test_segments_sessions_and_coverage_agree_with_the_seed_cluster(seed_cluster: LocalCluster, tmp_path: Path) -> None:
    spec = FleetSpec.small()
    keyspaces = spec.keyspace_list()
    config = parse_config({"keyspaces": {"include": keyspaces}})
    simulator = Simulator(spec)
    with connect(NODES) as session:
        _create(session, spec)
        ring = ring_from_cluster(session)
        real_plan = plan_cluster(CqlCatalog(session), ring, config)
    # The same ring: the simulator's small spec carries the seed cluster's tokens.
    assert {n.address: sorted(n.tokens) for n in ring.nodes} == {
        n.address: sorted(n.tokens) for n in simulator.ring().nodes
    }
    sim_plan = plan_cluster(simulator.catalog(), simulator.ring(), config)
    assert [(s.segment_id, s.replicas) for s in real_plan.segments] == [
        (s.segment_id, s.replicas) for s in sim_plan.segments
    ]
    assert real_plan.tables() == sim_plan.tables() and len(real_plan.tables()) == 6
    commands = [c.ranges for c in group_segments(real_plan.segments, config.ranges_per_command)]
    assert commands == [c.ranges for c in group_segments(sim_plan.segments, config.ranges_per_command)]

    # One night of the real DAG on each.
    conf = {"keyspaces": keyspaces}
    real = run_dag_test("nightly_subrange_repair", json.dumps(conf), env=_env(), timeout=600)
    assert real.returncode == 0, (real.stdout + real.stderr)[-3000:]
    with connect(NODES) as session:
        store = OpsStore(session)
        rows = [row for keyspace in keyspaces for row in store.repair_history(keyspace)]
    assert {r.record.state for r in rows} == {SegmentState.DONE}
    assert sorted(r.record.segment_id for r in rows) == sorted(s.segment_id for s in real_plan.segments)

    spec_path, out = tmp_path / "spec.json", tmp_path / "night.json"
    spec.dump(spec_path)
    from ringward_cli.airflow_env import airflow_environment, ensure_airflow_db

    env = airflow_environment(ROOT)
    ensure_airflow_db(env)
    night = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "fleet" / "airflow_night.py"), "--spec", str(spec_path),
         "--json", str(out), "--conf", json.dumps(conf)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert night.returncode == 0, (night.stdout + night.stderr)[-3000:]
    figures = json.loads(out.read_text())
    assert figures["run_state"] == "DONE" and figures["tables_fully_repaired"] == figures["tables"] == 6
    assert figures["sessions"] == sessions_of(rows)  # the same ranges together, on the same coordinator


def test_each_node_sums_its_size_estimates_as_the_plan_reads_them(seed_cluster: LocalCluster) -> None:
    """The nightly plan reads system.size_estimates summed per table by each node (one row per table, not one per
    table and range): the sums equal the node's own rows added up, and the size splitter spreads each node's sum
    over its primary ranges, so the plan's estimated bytes add up to the cluster's."""
    from ringward_cassandra.cluster_repairs import node_size_estimates, size_estimates

    keyspace = "sized_estimates"
    nodes = seed_cluster.topology().addresses
    with connect(nodes) as session:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
        session.execute(
            f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'NetworkTopologyStrategy', 'dc1': 2}}"
        )
        for table in ("a", "b"):
            session.execute(f"CREATE TABLE {keyspace}.{table} (k int PRIMARY KEY, v text)")
        settle_schema(session)
        insert = {t: session.prepare(f"INSERT INTO {keyspace}.{t} (k, v) VALUES (?, ?)") for t in ("a", "b")}
        for k in range(1500):
            session.execute(insert["a" if k % 3 else "b"], (k, "x" * (k % 200)))
        for node in nodes:
            assert seed_cluster.nodetool(node, ["flush", keyspace]).returncode == 0
            assert seed_cluster.nodetool(node, ["refreshsizeestimates"]).returncode == 0
        per_range = size_estimates(session, keyspace)
        per_node = node_size_estimates(session, keyspace)
        ring = ring_from_cluster(session)
        # 50 partitions a segment is below the configuration's floor (4096): built without validation on purpose,
        # so 1500 rows still make several segments per range for the comparison.
        config = parse_config({"keyspaces": {"include": [keyspace]}}).model_copy(
            update={"splitter": SizeSplitter.model_construct(type="size", max_partitions_per_segment=50)}
        )
        plan = plan_cluster(CqlCatalog(session), ring, config)
    summed: dict[tuple[str, str], list[int]] = {}
    for row in per_range:  # each node lists its primary ranges (the wrapping one in two): the node that sent it
        owner = ring.token_owner[ring.primary_token(int(row.range_end))].address
        found = summed.setdefault((owner, row.table), [0, 0])
        found[0] += row.partitions_count
        found[1] += row.data_bytes
    assert {(r.node, r.table): [r.partitions_count, r.data_bytes] for r in per_node} == summed
    total = sum(r.data_bytes for r in per_node)
    assert total > 0  # the estimates were refreshed after the flush
    assert len(plan.segments) > len(ring.ranges())  # the splitter cut ranges by their estimated partitions
    planned = sum(s.estimated_bytes or 0 for s in plan.segments)
    assert abs(planned - total) <= len(plan.segments)  # each segment's estimate is rounded to a byte
