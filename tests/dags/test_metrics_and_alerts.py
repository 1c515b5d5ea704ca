"""The tagged metrics and the alerts of a real night. The shipped nightly_subrange_repair DAG runs through
Airflow (`dag.test()` on the fleet simulator, as test_nightly_on_fleet_simulator does) with Airflow's own
StatsD settings (`[metrics] statsd_on`, `statsd_influxdb_enabled`) pointed at a loopback UDP
socket this test opens (the lines parsed back into names, tags and values), and with alert_recorder's notifier
configured as a deployment configures its own ($RINGWARD_ALERT_NOTIFIERS)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from airflow.sdk import Asset, AssetAlias
from ringward.repair import METRIC_SPECS
from ringward_airflow.assets import MIGRATED, REPAIRED
from ringward_fleetsim import FleetSpec

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from statsd_lines import Gauge, gauges  # noqa: E402

NIGHT = ROOT / "benchmarks" / "fleet" / "airflow_night.py"
# What a task's process does first (airflow.sdk.execution_time.task_runner.main): set Stats up from the config;
# dag.test() runs the tasks in its own process, which does not.
CHILD = """
import runpy, sys
from airflow.sdk._shared.observability.metrics import stats
from airflow.sdk.configuration import conf
from airflow.sdk.observability.metrics import stats_utils
legacy = conf.getboolean("metrics", "legacy_names_on")
stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=legacy)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def night_with_statsd(
    tmp_path: Path, spec: FleetSpec, conf: dict[str, Any] | None = None, *options: str, **more_env: str
) -> tuple[dict[str, Any], list[Gauge]]:
    """One night on `spec` with StatsD sent to a loopback socket: (the night's figures, the gauge lines);
    `options`: more of airflow_night.py's command line, `more_env`: more of the child's environment."""
    from ringward_cli.airflow_env import ensure_airflow_db

    spec_path, out = tmp_path / "spec.json", tmp_path / "night.json"
    spec.dump(spec_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    ensure_airflow_db(env)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(0.2)
        env.update(
            AIRFLOW__METRICS__STATSD_ON="True",
            AIRFLOW__METRICS__STATSD_HOST="127.0.0.1",
            AIRFLOW__METRICS__STATSD_PORT=str(server.getsockname()[1]),
            AIRFLOW__METRICS__STATSD_PREFIX="airflow",
            AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED="True",
            **more_env,
        )
        log = tmp_path / "night.log"
        with log.open("w") as output:
            child = subprocess.Popen(
                [sys.executable, "-c", CHILD, str(NIGHT), "--spec", str(spec_path), "--json", str(out),
                 "--conf", json.dumps(conf or {}), *options],
                stdout=output, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
            )  # fmt: skip
            received: list[str] = []
            while True:
                try:
                    received.append(server.recv(65536).decode())
                except TimeoutError:
                    if child.poll() is not None:
                        break
    assert child.returncode == 0, log.read_text()[-4000:]
    return json.loads(out.read_text()), [line for datagram in received for line in gauges(datagram)]


def last(lines: list[Gauge], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The last value of each tag set of `name` (a gauge keeps its last value)."""
    values: dict[tuple[tuple[str, str], ...], float] = {}
    for line_name, tags, value in lines:
        if line_name == f"airflow.{name}":
            values[tags] = value
    return values


def test_a_night_sends_each_tables_coverage_and_the_nights_outcome_tagged(tmp_path: Path) -> None:
    spec = FleetSpec.small()
    figures, lines, calls = recorded_night(tmp_path, {})
    assert figures["run_state"] == "DONE" and figures["tables"] == 6

    coverage = last(lines, "ringward.repair.table.coverage_ratio")
    expected_tables = {(table.keyspace, table.name) for table in spec.table_specs()}
    assert len(expected_tables) == 6
    assert {(dict(tags)["keyspace"], dict(tags)["table"]) for tags in coverage} == expected_tables
    # The shipped single-cluster DAG: no declared name, so the tag is its CQL connection id (a declared cluster's
    # DAGs tag its name: tests/unit/ringward_airflow/test_metrics_cluster_tag.py, tests/dags/test_dag_factory.py).
    assert {dict(tags)["cluster"] for tags in coverage} == {"cassandra_default"}
    assert {dict(tags)["repair_type"] for tags in coverage} == {"full"}
    assert set(coverage.values()) == {1.0}  # the night repaired every range of every table
    assert all(tags[0] == ("cluster", "cassandra_default") and len(tags) == 4 for tags in coverage)

    ages = last(lines, "ringward.repair.table.oldest_repair_age_seconds")
    assert ages.keys() == coverage.keys() and all(0 <= age < 86400 for age in ages.values())
    assert set(last(lines, "ringward.repair.table.overdue").values()) == {0.0}
    assert set(last(lines, "ringward.repair.table.gc_grace_seconds").values()) == {864000.0}

    done = last(lines, "ringward.repair.run.segments_done")
    assert done == {(("cluster", "cassandra_default"), ("repair_type", "full")): float(figures["due"])}
    outcome = {dict(tags)["state"]: value for tags, value in last(lines, "ringward.repair.run.outcome").items()}
    assert outcome == {"DONE": 1.0, "PARTIAL": 0.0, "FAILED": 0.0, "DISABLED": 0.0}

    live = last(lines, "ringward.repair.live.segments_done")
    assert live == {(("cluster", "cassandra_default"), ("repair_type", "full")): float(figures["due"])}
    assert set(last(lines, "ringward.repair.live.sessions_running").values()) == {0.0}  # the night's last record
    # The untagged CEP-37 gauges are still sent as before.
    assert last(lines, "ringward.repair.SucceededTokenRangesCount") == {(): float(figures["due"])}
    sent = {name.removeprefix("airflow.") for name, *_ in lines if name.startswith("airflow.ringward.")}
    tagged = {name for name in sent if name in METRIC_SPECS}
    assert tagged >= {"ringward.repair.table.gc_grace_used_ratio", "ringward.repair.live.back_pressure_holds"}
    assert calls == []  # every table repaired in time, the night DONE: nothing to page anyone about
    # Each keyspace's coverage completed: an event of its own Asset, cassandra://<cluster>/<keyspace>.
    events = asset_events(figures["run_id"])
    assert sorted(events) == [f"cassandra://cassandra_default/{ks}" for ks in ("ar_a", "ar_b", "ar_c")]
    assert {extra["state"] for extra in events.values()} == {"DONE"}


def asset_events(run_id: str) -> dict[str, dict[str, Any]]:
    """The asset events the run emitted, from Airflow's metadata database: {asset URI: extra}."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(AssetModel.uri, AssetEvent.extra).join(AssetEvent, AssetEvent.asset_id == AssetModel.id)
    with create_session() as session:
        return {uri: extra for uri, extra in session.execute(query.where(AssetEvent.source_run_id == run_id))}


def recorded_night(
    tmp_path: Path, conf: dict[str, Any], *options: str
) -> tuple[dict[str, Any], list[Gauge], list[dict[str, Any]]]:
    """A night on the seed cluster's twin whose notifiers are alert_recorder's: (figures, StatsD lines, the
    notifier's recorded calls)."""
    recorded = tmp_path / "alerts.jsonl"
    path = os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))
    figures, lines = night_with_statsd(tmp_path, FleetSpec.small(), conf, *options, PYTHONPATH=path,
                                       RINGWARD_ALERT_NOTIFIERS="alert_recorder:NOTIFIERS",
                                       RINGWARD_TEST_ALERTS=str(recorded))  # fmt: skip
    calls = [json.loads(line) for line in recorded.read_text().splitlines()] if recorded.exists() else []
    return figures, lines, calls


def test_tables_past_their_gc_grace_deadline_reach_the_configured_notifier(tmp_path: Path) -> None:
    # Every range last repaired 11 days ago (gc_grace_seconds: 10 days), and the kill switch keeps tonight
    # from repairing any: every table is past its deadline when the report runs.
    figures, lines, calls = recorded_night(tmp_path, {"enabled": "off"}, "--seed-history", "264")
    assert figures["run_state"] == "DISABLED"
    assert set(last(lines, "ringward.repair.table.overdue").values()) == {1.0}
    assert [call["alert"]["kind"] for call in calls] == ["gc_grace_passed"]
    call = calls[0]
    tables = sorted(f"{t.keyspace}.{t.name}" for t in FleetSpec.small().table_specs())
    assert call["alert"]["tables"] == tables and call["alert"]["cluster"] == "cassandra_default"
    assert call["subject"] == call["alert"]["subject"] and call["subject"].startswith("[ringward critical] ")
    assert call["message"].startswith("Cluster cassandra_default, run ")  # rendered from the notifier's template
    assert f"Tables: {', '.join(tables)}" in call["message"]
    assert "Fix: Repair them now: trigger nightly_subrange_repair" in call["message"]


def test_the_shipped_dags_declare_the_aliases_on_their_report_tasks() -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    # The parsed DAGs themselves: `get_dag` may read the metadata database (3.4 does), which this test has no need of.
    nightly = bag.dags["nightly_subrange_repair"]
    migration = bag.dags["keyspace_migration"]
    assert AssetAlias(REPAIRED) in nightly.get_task("report").outlets
    outlets = migration.get_task("report").outlets
    assert AssetAlias(MIGRATED) in outlets and Asset("cassandra://ringward/keyspace_migration") in outlets
