"""ringward's Spark jobs on the real local cluster: the smoke count, range counts, and verify after an ALTER.

Each job is a real spark-submit: local[2] with the connector jars resolved into .cache/, or the image's layout
(the jars folder its Dockerfile builds, no Maven), or a real Spark standalone cluster through spark_default.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import Session
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.metadata import Murmur3Token
from cassandra.query import SimpleStatement
from ringward.ring import Ring, TokenRange
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.ring_reader import ring_from_contact_point
from ringward_spark.counts import stage_scans
from ringward_spark.stages import BASELINE, REFERENCE, REPLICAS, baseline_phases, verify_phases, verify_tables
from ringward_spark.submit import (
    SparkJobError,
    count_job_args,
    range_counts_job_args,
    run_job,
    stage_job_args,
    stage_plan,
)
from schema_agreement import settle_schema

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def _image_spark_jars(root: Path) -> Path:
    """The Dockerfile's connector-jars stage without Docker: its COPY of the pom and its `mvn` command, the output
    folder moved under `root`. Returns the folder as the image's RINGWARD_SPARK_JARS_DIR names it, under `root`."""
    logical = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())  # continuation lines joined
    stage = logical.split(" AS connector-jars\n", 1)[1].split("\nFROM ", 1)[0]
    source, target = re.findall(r"^COPY (\S+) (\S+)$", stage, re.MULTILINE)[0]
    maven = re.search(r"^RUN (mvn [^&]+)", stage, re.MULTILINE)
    image_dir = re.findall(r"^ENV RINGWARD_SPARK_JARS_DIR=(\S+)$", logical, re.MULTILINE)[0]
    assert maven and f"COPY --from=connector-jars {image_dir} {image_dir}" in logical
    build = root / "build"
    build.mkdir(parents=True)
    shutil.copy(ROOT / source, build / target)
    folder = root / image_dir.lstrip("/")
    command = [arg.replace(image_dir, str(folder)) for arg in maven.group(1).split()]
    built = subprocess.run(command, cwd=build, capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    return folder


def _path_without_maven(shadow: Path) -> str:
    """PATH with every command it had but mvn: links in one folder (java, sh, ... live beside mvn in /usr/bin)."""
    shadow.mkdir()
    for folder in [str(Path(sys.executable).parent), *os.environ["PATH"].split(os.pathsep)]:
        for entry in Path(folder).glob("*") if Path(folder).is_dir() else ():
            if not entry.name.startswith("mvn") and not (shadow / entry.name).exists():
                (shadow / entry.name).symlink_to(entry)
    assert shutil.which("mvn", path=str(shadow)) is None
    return str(shadow)


def _create(session: Session, keyspace: str, replication: str, table_ddl: str) -> None:
    session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
    session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {replication}")
    session.execute(f"CREATE TABLE {keyspace}.{table_ddl} WITH speculative_retry = 'NONE' AND read_repair = 'NONE'")


def _insert_all(session: Session, cql: str, rows: Sequence[tuple[object, ...]]) -> None:
    statement = session.prepare(cql)
    statement.consistency_level = ConsistencyLevel.ALL
    for ok, outcome in execute_concurrent_with_args(session, statement, rows, concurrency=32):
        assert ok, outcome


def test_count_job_from_the_image_layout_agrees_with_the_rows_inserted(
    seed_cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The jars folder as the image builds it (scala-library alone left out) and its variable; Maven unavailable."""
    image_jars = _image_spark_jars(tmp_path / "image")
    assert list(image_jars.glob("spark-cassandra-connector_2.12-*.jar"))
    monkeypatch.setenv("RINGWARD_SPARK_JARS_DIR", str(image_jars))
    monkeypatch.setenv("PATH", _path_without_maven(tmp_path / "bin"))
    hosts = seed_cluster.topology().addresses
    with connect(hosts) as session:
        _create(
            session,
            "spark_smoke",
            "{'class': 'SimpleStrategy', 'replication_factor': 3}",
            "events (id int, seq int, body text, PRIMARY KEY (id, seq))",
        )
        _insert_all(
            session,
            "INSERT INTO spark_smoke.events (id, seq, body) VALUES (?, ?, ?)",
            [(i % 37, i, f"event {i}") for i in range(500)],
        )

    started = time.monotonic()
    result = run_job(count_job_args(hosts, "spark_smoke", "events", consistency="ALL"))
    wall = time.monotonic() - started

    assert result["rows"] == 500
    with capsys.disabled():
        print(f"\n[spark] count job: {result['rows']} rows, wall {wall:.1f}s, in the job {result['seconds']}s")


def test_count_job_reads_at_the_consistency_asked(seed_cluster: LocalCluster) -> None:
    """Replication factor 4 on 3 nodes: CL ONE counts every row, CL ALL (4 replicas) is unavailable."""
    hosts = seed_cluster.topology().addresses
    with connect(hosts) as session:
        _create(session, "spark_cl", "{'class': 'SimpleStrategy', 'replication_factor': 4}",
                "kv (k int PRIMARY KEY, v int)")  # fmt: skip
        statement = session.prepare("INSERT INTO spark_cl.kv (k, v) VALUES (?, ?)")
        statement.consistency_level = ConsistencyLevel.THREE
        for ok, outcome in execute_concurrent_with_args(session, statement, [(i, i) for i in range(50)]):
            assert ok, outcome

    assert run_job(count_job_args(hosts, "spark_cl", "kv", consistency="ONE"))["rows"] == 50
    with pytest.raises(SparkJobError, match=r"(?i)unavailable|not enough replicas"):
        run_job(count_job_args(hosts, "spark_cl", "kv", consistency="ALL"))


def _client_side_counts(
    hosts: Sequence[str], ring: Ring, cutoff_us: int
) -> tuple[Counter[TokenRange], Counter[TokenRange]]:
    """Independent counts: every row's token read at CL ALL, bucketed into ring ranges here."""
    ranges = {r.end: r for r in ring.ranges()}
    dated: Counter[TokenRange] = Counter()
    later: Counter[TokenRange] = Counter()
    with connect(hosts) as session:
        statement = SimpleStatement(
            "SELECT token(tenant, region), writetime(payload) FROM spark_ranges.items",
            consistency_level=ConsistencyLevel.ALL,
            fetch_size=100,
        )
        for token, written in session.execute(statement):
            token_range = ranges[ring.primary_token(token)]
            (later if written is not None and written > cutoff_us else dated)[token_range] += 1
    return dated, later


def test_range_counts_on_the_standalone_cluster_match_local_and_client_side_bucketing(
    seed_cluster: LocalCluster, standalone_spark_default: str
) -> None:
    """Submitted to spark://127.0.0.1:PORT through spark_default (client mode, executors on a Python without
    ringward: its code comes with the job), the counts equal a local[*] run's and the client's own bucketing."""
    hosts = seed_cluster.topology().addresses
    with connect(hosts) as session:
        _create(
            session,
            "spark_ranges",
            "{'class': 'SimpleStrategy', 'replication_factor': 3}",
            "items (tenant int, region text, n int, payload text, PRIMARY KEY ((tenant, region), n))",
        )
        columns = "tenant, region, n, payload"
        insert = f"INSERT INTO spark_ranges.items ({columns}) VALUES (?, ?, ?, ?) USING TIMESTAMP ?"
        _insert_all(session, insert, [(i % 60, f"r{i % 3}", i, "early", 1_000) for i in range(300)])
        _insert_all(session, insert, [(i % 60, f"r{i % 3}", i, "late", 3_000) for i in range(300, 340)])
        # Rows with no regular cell cannot be dated: they count as written before the cutoff.
        keys_only = "INSERT INTO spark_ranges.items (tenant, region, n) VALUES (?, ?, ?) USING TIMESTAMP 1000"
        _insert_all(session, keys_only, [(i, "r0", 10_000 + i) for i in range(5)])
    ring = ring_from_contact_point(hosts[0])
    ranges = ring.ranges()
    assert ranges[0].wraps  # the wrap-around range is counted too, unwrapped inside the job

    job = range_counts_job_args(hosts, "spark_ranges", "items", ranges, cutoff_us=2_000, splits_per_range=2)
    result = run_job(job, conn_id="spark_default")
    local = run_job(job, master="local[*]")
    assert [result[k] for k in ("ranges", "rows", "later_rows")] == [local[k] for k in ("ranges", "rows", "later_rows")]

    dated, later = _client_side_counts(hosts, ring, cutoff_us=2_000)
    by_range = {TokenRange(e["start"], e["end"]): e for e in result["ranges"]}
    assert list(by_range) == ranges
    assert {r: e["rows"] for r, e in by_range.items() if e["rows"]} == dict(dated)
    assert {r: e["later_rows"] for r, e in by_range.items() if e["later_rows"]} == dict(later)
    assert (result["rows"], result["later_rows"]) == (305, 40)
    assert sum(e["undated_rows"] for e in result["ranges"]) == 5
    assert sum(1 for e in result["ranges"] if e["rows"]) > 1  # the rows really are spread over the ring
    # The connector's whole-table count (the jars shipped with --jars) on the standalone executors.
    assert run_job(count_job_args(hosts[:1], "spark_ranges", "items"), conn_id="spark_default")["rows"] == 345


def _replicas_by_range(hosts: Sequence[str], keyspace: str, ring: Ring) -> dict[TokenRange, frozenset[str]]:
    """Replicas per ring range as the driver computes them from the keyspace's current replication."""
    with connect(hosts) as session:
        token_map = session.cluster.metadata.token_map
        return {
            r: frozenset(h.address for h in token_map.get_replicas(keyspace, Murmur3Token(r.end)))
            for r in ring.ranges()
        }


def _insert_users(session: Session, table: str, rows: range) -> None:
    _insert_all(session, f"INSERT INTO spark_hazard.{table} (app_id, id, name) VALUES (?, ?, ?)",
                [(i % 40, i, f"user {i}") for i in rows])  # fmt: skip


def test_one_stage_application_finds_rows_missing_on_new_replicas_until_repaired(seed_cluster: LocalCluster) -> None:
    """The seed hazard, verified for two tables by one Spark application per stage (baseline, verify):
    SimpleStrategy RF 2 -> NTS dc1: 2 leaves new replicas empty."""
    hosts = seed_cluster.topology().addresses
    with connect(hosts) as session:
        _create(
            session,
            "spark_hazard",
            "{'class': 'SimpleStrategy', 'replication_factor': 2}",
            "users (app_id int, id int, name text, PRIMARY KEY (app_id, id))",
        )
        session.execute("CREATE TABLE spark_hazard.admins (app_id int, id int, name text, PRIMARY KEY (app_id, id)) "
                        "WITH speculative_retry = 'NONE' AND read_repair = 'NONE'")  # fmt: skip
        settle_schema(session)
        _insert_users(session, "users", range(200))
        _insert_users(session, "admins", range(30))
    tables = ["admins", "users"]
    ring = ring_from_contact_point(hosts[0])
    before = _replicas_by_range(hosts, "spark_hazard", ring)
    taken_at_us = time.time_ns() // 1000
    baseline_run = run_job(
        stage_job_args(hosts, "spark_hazard"), plan=stage_plan(baseline_phases(tables, ring.ranges()))
    )
    baselines = {scan["table"]: scan for scan in stage_scans(baseline_run, BASELINE)}
    assert {t: scan["rows"] for t, scan in baselines.items()} == {"admins": 30, "users": 200}

    with connect(hosts) as session:
        session.execute("ALTER KEYSPACE spark_hazard WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 2}")
        settle_schema(session)
        # A write during the migration: newer than the cutoff, so it must not raise an alarm.
        _insert_users(session, "users", range(9999, 10000))
    after = _replicas_by_range(hosts, "spark_hazard", ring)
    gained: dict[str, list[TokenRange]] = {}
    for token_range in ring.ranges():
        for replica in sorted(after[token_range] - before[token_range]):
            gained.setdefault(replica, []).append(token_range)
    affected = sorted({r for ranges in gained.values() for r in ranges})
    assert affected, "the strategy change must move some ranges to new replicas"
    # The baseline counted the whole ring; the verify stage compares the affected ranges.
    baselines = {t: {**scan, "ranges": [e for e in scan["ranges"] if TokenRange(e["start"], e["end"]) in affected]}
                 for t, scan in baselines.items()}  # fmt: skip

    def verify_stage() -> dict[str, Any]:
        plan = stage_plan(verify_phases(tables, affected, gained, taken_at_us))
        result = run_job(stage_job_args(hosts, "spark_hazard"), plan=plan)
        assert [phase["name"] for phase in result["phases"]] == [REPLICAS, REFERENCE]
        return {t.table: t for t in verify_tables(result, affected, baselines, taken_at_us)}

    verified = verify_stage()
    assert {t: v.whole_table_rows for t, v in verified.items()} == {"admins": 30, "users": 201}
    for table, verification in verified.items():
        reference = {c.token_range: c.reference_rows for c in verification.report.ranges}
        data_ranges = {r for r, rows in reference.items() if rows}
        assert data_ranges, f"some affected range of {table} must hold rows"
        assert {(f.token_range, f.replica) for f in verification.report.failures} == {
            (r, replica) for replica, ranges in gained.items() for r in ranges if r in data_ranges
        }
        assert all(f.replica_rows == 0 for f in verification.report.failures)  # the new replica has none of them
    assert sum(r.later_rows for r in verified["users"].report.ranges) <= 1  # the migration-time write, left out

    for node in hosts:  # full repair of the keyspace's ranges on every node, then verify again
        repaired = seed_cluster.nodetool(node, ["repair", "-full", "-pr", "spark_hazard"])
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    for table, verification in verify_stage().items():
        assert verification.report.ok, f"{table}: {verification.report.summary()}"
        assert verification.report.warnings == ()
