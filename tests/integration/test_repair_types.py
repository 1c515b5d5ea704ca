"""Issue 24 on real Cassandra 5.0: each repair type's nodetool command as ringward builds it.

Incremental repair marks SSTables repaired (repairedAt, seen as `Percent repaired` in tablestats) where a
full repair does not, repairs a write a replica missed while down and leaves nothing for the next run to
stream; a preview finds the ranges a stopped node missed, per table, and repairs nothing; a paxos-only repair
and the parallelism flags are accepted; preview and paxos nights of the DAG keep their own history; on two
datacenters the coordinator records the datacenter-parallel and local-DC options it received; the nightly
DAG's disk-headroom guard refuses the incremental sessions of nodes short of free disk.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement
from ringward.repair import RepairTypeSettings, SegmentState, repair_flags
from ringward.ring import TokenRange
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.ops_store import OpsStore
from schema_agreement import settle_schema
from test_nightly_repair import conf, latest_run, output, restart, run_dag

pytestmark = pytest.mark.integration

NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
ROWS = 200
_PERCENT_REPAIRED = re.compile(r"Percent repaired:\s*([\d.]+)")
# The repair log's line for a command the disk-headroom guard refused: the node and its free share.
_DISK_REFUSAL = re.compile(
    r"refused types_disk\.\S* .*? \(postponed to the next run\): (\S+): (\d+)% of its data disk of 1024 bytes "
    r"\(data_disk_capacity\) is free, below min_free_disk_ratio 20%"
)


def create(keyspace: str, factor: int = 3) -> None:
    with connect(NODES) as session:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
        session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                        f"{{'class': 'SimpleStrategy', 'replication_factor': {factor}}}")  # fmt: skip
        session.execute(f"CREATE TABLE {keyspace}.t (k int PRIMARY KEY, v text)")
        settle_schema(session)


def write(keyspace: str, addresses: list[str], consistency: int) -> None:
    with connect(addresses) as session:
        insert = SimpleStatement(f"INSERT INTO {keyspace}.t (k, v) VALUES (%s, 'x')", consistency_level=consistency)
        for key in range(ROWS):
            session.execute(insert, (key,))


def ranges_by_replicas(cluster: LocalCluster, keyspace: str) -> list[tuple[str, list[TokenRange]]]:
    """(coordinator, its non-wrapping ranges) per replica set: every range of the ring once."""
    client = cluster.nodetool_client()
    try:
        described = client.describe_ring(NODES[0], keyspace)
    finally:
        client.close()
    groups: dict[frozenset[str], list[TokenRange]] = {}
    for token_range, replicas in described:
        groups.setdefault(replicas, []).extend(token_range.unwrap())
    return [(sorted(replicas)[0], ranges) for replicas, ranges in groups.items()]


def repair_everything(cluster: LocalCluster, keyspace: str, flags: list[str]) -> list[Any]:
    client = cluster.nodetool_client()
    try:
        return [client.repair(coordinator, keyspace, ranges, tables=["t"], flags=flags, timeout=600)
                for coordinator, ranges in ranges_by_replicas(cluster, keyspace)]  # fmt: skip
    finally:
        client.close()


def percent_repaired(cluster: LocalCluster, node: str, keyspace: str) -> float:
    result = cluster.nodetool(node, ["tablestats", f"{keyspace}.t"])
    assert result.returncode == 0, result.stdout
    match = _PERCENT_REPAIRED.search(result.stdout)
    assert match, result.stdout
    return float(match.group(1))


def flush(cluster: LocalCluster, keyspace: str) -> None:
    for node in NODES:
        assert cluster.nodetool(node, ["flush", keyspace]).returncode == 0


def test_incremental_repair_marks_sstables_repaired_and_repairs_a_missed_write_full_does_not(
    seed_cluster: LocalCluster,
) -> None:
    create("types_inc")
    write("types_inc", NODES, ConsistencyLevel.ALL)
    flush(seed_cluster, "types_inc")
    full = repair_everything(seed_cluster, "types_inc", repair_flags("full", RepairTypeSettings()))
    assert all(o.succeeded for o in full), [o.output[-800:] for o in full]
    assert all(percent_repaired(seed_cluster, node, "types_inc") == 0.0 for node in NODES)  # 4.0+: no anticompaction

    incremental = repair_everything(seed_cluster, "types_inc", repair_flags("incremental", RepairTypeSettings()))
    assert all(o.succeeded for o in incremental), [o.output[-800:] for o in incremental]
    # nodetool's "Starting repair command ... (incremental: true ...)" line, where it came: a lost JMX notification
    # can drop it (the repairedAt check below is the proof either way).
    started = [o.output for o in incremental if "repair options" in o.output]
    assert all("incremental: true" in output for output in started), started[0][-1500:]
    await_all_repaired(seed_cluster, "types_inc")

    # A write made with a replica down (no hints): unrepaired data out of sync, which an incremental preview sees
    # and the next incremental repair streams to the replica; after it, nothing is left for a run to stream.
    down, up = NODES[2], NODES[:2]
    for node in NODES:
        assert seed_cluster.nodetool(node, ["disablehandoff"]).returncode == 0
    seed_cluster.stop(down)
    try:
        with connect(up) as session:
            missed = SimpleStatement("INSERT INTO types_inc.t (k, v) VALUES (%s, 'missed')",
                                     consistency_level=ConsistencyLevel.ONE)  # fmt: skip
            for key in range(ROWS, ROWS + 20):
                session.execute(missed, (key,))
    finally:
        restart(seed_cluster, down)
        for node in NODES:
            seed_cluster.nodetool(node, ["enablehandoff"])
    flush(seed_cluster, "types_inc")
    unrepaired_preview = ["--preview"]  # no -full: compares unrepaired data, what an incremental run would stream
    before = repair_everything(seed_cluster, "types_inc", unrepaired_preview)
    assert any(o.in_sync is False for o in before), [o.output[-800:] for o in before]
    again = repair_everything(seed_cluster, "types_inc", repair_flags("incremental", RepairTypeSettings()))
    assert all(o.succeeded for o in again), [o.output[-800:] for o in again]
    await_all_repaired(seed_cluster, "types_inc")
    with connect([down], coordinator=down) as session:  # the replica answers ONE from its own data
        count = SimpleStatement("SELECT count(*) FROM types_inc.t", consistency_level=ConsistencyLevel.ONE)
        assert session.execute(count).one()[0] == ROWS + 20
    after = repair_everything(seed_cluster, "types_inc", unrepaired_preview)
    assert all(o.in_sync is True for o in after), [o.output[-800:] for o in after]


def await_all_repaired(cluster: LocalCluster, keyspace: str) -> None:
    """Every node's data of the table marked repaired: a session's anticompaction and finalisation end after
    nodetool returns."""
    deadline = time.monotonic() + 120
    while any(percent_repaired(cluster, node, keyspace) < 100.0 for node in NODES):
        assert time.monotonic() < deadline, {n: percent_repaired(cluster, n, keyspace) for n in NODES}
        time.sleep(2)


def test_a_preview_finds_what_a_stopped_node_missed_per_table_and_repairs_nothing(seed_cluster: LocalCluster) -> None:
    create("types_prv")
    down, up = NODES[2], NODES[:2]
    for node in NODES:  # no hints: the stopped node must really miss the writes
        assert seed_cluster.nodetool(node, ["disablehandoff"]).returncode == 0
    seed_cluster.stop(down)
    try:
        write("types_prv", up, ConsistencyLevel.ONE)
    finally:
        restart(seed_cluster, down)
        for node in NODES:
            seed_cluster.nodetool(node, ["enablehandoff"])
    flush(seed_cluster, "types_prv")
    preview_flags = repair_flags("preview", RepairTypeSettings())
    assert preview_flags == ["-full", "--preview"]
    first = repair_everything(seed_cluster, "types_prv", preview_flags)
    assert all(o.succeeded for o in first), [o.output[-800:] for o in first]
    assert any(o.in_sync is False for o in first)
    found = [o.out_of_sync for o in first if o.out_of_sync]
    assert found and all(set(f) == {"types_prv.t"} and f["types_prv.t"] > 0 for f in found), found
    again = repair_everything(seed_cluster, "types_prv", preview_flags)  # a preview streamed nothing
    assert [bool(o.out_of_sync) for o in again] == [bool(o.out_of_sync) for o in first]

    repaired = repair_everything(seed_cluster, "types_prv", repair_flags("full", RepairTypeSettings()))
    assert all(o.succeeded for o in repaired)
    after = repair_everything(seed_cluster, "types_prv", preview_flags)
    assert all(o.in_sync is True and not o.out_of_sync for o in after), [o.output[-800:] for o in after]


@pytest.mark.parametrize(
    "settings",
    [
        RepairTypeSettings(parallelism="sequential"),
        RepairTypeSettings(parallelism="dc_parallel", job_threads=2),
        RepairTypeSettings(local_dc_only=True, job_threads=4),
    ],
    ids=["seq", "dcpar-j2", "local-j4"],
)
def test_parallelism_flags_are_accepted(seed_cluster: LocalCluster, settings: RepairTypeSettings) -> None:
    create("types_par", factor=2)
    write("types_par", NODES, ConsistencyLevel.ALL)
    outcomes = repair_everything(seed_cluster, "types_par", repair_flags("full", settings))
    assert all(o.succeeded for o in outcomes), [o.output[-800:] for o in outcomes]


def test_dc_parallel_and_local_dc_options_reach_cassandra_on_two_datacenters(two_dc_cluster: LocalCluster) -> None:
    """The options each repair command arrived with, as the coordinator recorded them in
    system_distributed.parent_repair_history: datacenter-parallel with 2 job threads, then local-DC-only."""
    topology = two_dc_cluster.topology()
    nodes = list(topology.addresses)
    coordinator = nodes[0]
    local_dc = next(node.datacenter for node in topology.nodes if node.address == coordinator)
    with connect(nodes) as session:
        session.execute("DROP KEYSPACE IF EXISTS types_two_dc")
        session.execute("CREATE KEYSPACE types_two_dc WITH replication = "
                        "{'class': 'NetworkTopologyStrategy', 'dc1': 2, 'dc2': 2}")  # fmt: skip
        session.execute("CREATE TABLE types_two_dc.t (k int PRIMARY KEY, v text)")
        settle_schema(session)
    client = two_dc_cluster.nodetool_client()
    try:
        owned = [r for token_range, replicas in client.describe_ring(coordinator, "types_two_dc")
                 if coordinator in replicas for r in token_range.unwrap()]  # fmt: skip
        modes = {
            "dc_parallel": RepairTypeSettings(parallelism="dc_parallel", job_threads=2),
            "local": RepairTypeSettings(local_dc_only=True),
        }
        for settings in modes.values():
            outcome = client.repair(coordinator, "types_two_dc", owned, tables=["t"],
                                    flags=repair_flags("full", settings), timeout=600)  # fmt: skip
            assert outcome.succeeded, outcome.output[-800:]
    finally:
        client.close()
    with connect([coordinator], coordinator=coordinator) as session:
        rows = session.execute(
            "SELECT options, started_at FROM system_distributed.parent_repair_history "
            "WHERE keyspace_name = 'types_two_dc' ALLOW FILTERING"
        )
        recorded = [dict(row.options) for row in sorted(rows, key=lambda row: row.started_at)]
    assert len(recorded) == 2, recorded
    dc_parallel, local = recorded
    assert dc_parallel["parallelism"].lower() in {"dc_parallel", "datacenter_aware"}, dc_parallel
    assert dc_parallel["jobThreads"] == "2" and dc_parallel["incremental"] == "false", dc_parallel
    assert dc_parallel.get("dataCenters", "") == "", dc_parallel  # every datacenter
    assert local["dataCenters"] == local_dc, local  # -local: the coordinator's datacenter only


def test_a_paxos_only_repair_runs(seed_cluster: LocalCluster) -> None:
    create("types_paxos")
    with connect(NODES) as session:
        session.execute("INSERT INTO types_paxos.t (k, v) VALUES (1, 'x') IF NOT EXISTS")
    outcomes = repair_everything(seed_cluster, "types_paxos", repair_flags("paxos", RepairTypeSettings()))
    assert all(o.succeeded for o in outcomes), [o.output[-800:] for o in outcomes]


def test_preview_and_paxos_nights_through_the_dag_keep_their_own_history(seed_cluster: LocalCluster) -> None:
    """The nightly DAG, run with `repair_type` as the trigger form sets it: a full night, then a preview night
    and a paxos night (after a lightweight transaction). Each type's segments are recorded in its own history;
    the preview never counts as a repair: the full history is left as the full night wrote it."""
    create("types_night")
    write("types_night", NODES, ConsistencyLevel.ALL)
    with connect(NODES) as session:
        session.execute("INSERT INTO types_night.t (k, v) VALUES (-1, 'lwt') IF NOT EXISTS")

    def recorded(repair_type: str) -> dict[str, Any]:
        with connect(NODES) as session:
            rows = OpsStore(session).repair_history("types_night", repair_type=repair_type)
        return {row.record.segment_id: row.record for row in rows}

    nights: dict[str, str] = {}
    for repair_type in ("full", "preview", "paxos"):
        result = run_dag({**conf("types_night"), "repair_type": repair_type})
        assert result.returncode == 0, output(result)[-3000:]
        nights[repair_type] = latest_run(NODES).run_id
        if repair_type == "full":
            full = recorded("full")
    for repair_type, run_id in nights.items():
        records = recorded(repair_type)
        assert records and {r.state for r in records.values()} == {SegmentState.DONE}, (repair_type, records)
        assert {r.run_id for r in records.values()} == {run_id}, (repair_type, records)
        assert {r.repair_type for r in records.values()} == {repair_type}
    assert recorded("full") == full  # neither the preview nor the paxos night moved full's cadence or coverage


def test_the_disk_guard_postpones_incremental_sessions_on_a_disk_too_small_saying_why(
    seed_cluster: LocalCluster, tmp_path: Path
) -> None:
    """A configured data disk of 1 KiB, below any node's Load (the local nodes set no
    data_disk_usage_max_disk_size): every incremental session is refused before it starts, its segments are
    postponed to the next run with the reason in the log, and no SSTable is marked repaired."""
    create("types_disk")
    write("types_disk", NODES, ConsistencyLevel.ALL)
    flush(seed_cluster, "types_disk")
    # data_disk_capacity is file-only (a run's params cannot loosen the disk guard): the configuration file sets it.
    settings = tmp_path / "repair.yaml"
    settings.write_text("data_disk_capacity: 1KiB\n")
    result = run_dag(
        {**conf("types_disk"), "repair_type": "incremental"}, env={"RINGWARD_REPAIR_CONFIG": str(settings)}
    )
    text = output(result)
    assert result.returncode == 0, text[-3000:]  # postponed, not failed: due again next run
    run = latest_run(NODES)
    assert run.state == "PARTIAL"
    with connect(NODES) as session:
        history = OpsStore(session).repair_history("types_disk", repair_type="incremental")
    rows = [r for r in history if r.record.run_id == run.run_id]
    assert rows and {r.record.state for r in rows} == {SegmentState.POSTPONED}
    refusals = _DISK_REFUSAL.findall(text)
    assert refusals, text[-3000:]
    assert {node for node, _ in refusals} <= set(NODES) and all(int(free) < 20 for _, free in refusals)
    assert "Disk headroom not checked" not in text  # every node measured: Load read, capacity configured
    assert all(percent_repaired(seed_cluster, node, "types_disk") == 0.0 for node in NODES)  # no session ran
