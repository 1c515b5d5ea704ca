"""Issue 39: the `cluster` tag of ringward's metrics is the declared cluster's name, threaded from the DAG factory
into the operators as an argument; the single-cluster deployment (no name) tags its CQL connection id, as before."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from ringward.clusters import metrics_cluster
from ringward.errors import ConfigurationError
from ringward.repair import MetricPoint
from ringward.repair._night import RecordedNight
from ringward_airflow import repair_operators
from ringward_airflow.migration_operators import MigrationReportOperator
from ringward_airflow.repair_operators import RepairFailureNotifier, RepairReportOperator, RepairRunOperator

LIVE = {"done": 3, "failed": 1, "postponed": 0, "total": 10, "running": {}, "held_back": 0}


def _clusters(points: list[MetricPoint]) -> set[str]:
    return {point.tag_map["cluster"] for point in points}


def test_the_tag_is_the_declared_name_else_the_cql_connection_id() -> None:
    assert metrics_cluster("eu_west", "cassandra_eu_west") == "eu_west"
    assert metrics_cluster(None, "cassandra_default") == "cassandra_default"
    with pytest.raises(ConfigurationError, match="Cluster name 'EU west' is not allowed"):
        metrics_cluster("EU west", "cassandra_default")


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[MetricPoint]:
    """What the repair operators send through Airflow's Stats."""
    points: list[MetricPoint] = []

    def emit(batch: Any) -> int:
        batch = list(batch)
        points.extend(batch)
        return len(batch)

    monkeypatch.setattr(repair_operators, "emit", emit)
    return points


@pytest.mark.parametrize(("cluster", "tag"), [("eu_west", "eu_west"), (None, "cql_eu")])
def test_the_live_metrics_carry_the_clusters_name(sent: list[MetricPoint], cluster: str | None, tag: str) -> None:
    operator = RepairRunOperator(task_id="repair", cassandra_conn_id="cql_eu", cluster=cluster)
    operator._progressed("full", LIVE)
    assert sent and _clusters(sent) == {tag}


@pytest.mark.parametrize(
    ("cluster", "tag", "alias"),
    [("eu_west", "eu_west", "ringward_keyspace_repaired__eu_west"), (None, "cql_eu", "ringward_keyspace_repaired")],
)
def test_the_nights_metrics_alerts_and_assets_carry_the_clusters_name(
    sent: list[MetricPoint], monkeypatch: pytest.MonkeyPatch, cluster: str | None, tag: str, alias: str
) -> None:
    """A declared cluster's metrics, alerts and keyspace Assets (cassandra://eu_west/<keyspace>, through its own
    alias) name it; the single cluster's name its CQL connection, as before clusters were declared."""
    delivered: list[Any] = []
    events: list[tuple[str, str]] = []
    monkeypatch.setattr(repair_operators, "deliver", lambda alerts, notifiers, context: delivered.extend(alerts))
    monkeypatch.setattr(repair_operators, "add_keyspace_events",
                        lambda context, alias, cluster, keyspaces, extra: events.append((alias, cluster)))  # fmt: skip
    operator = RepairReportOperator(task_id="report", cassandra_conn_id="cql_eu", cluster=cluster, alert_notifiers=[])
    night = RecordedNight("scheduled__1", "PARTIAL", {}, {}, [], 0, 4, datetime.now(UTC), 60.0, 0)
    operator._observed(night, {"run_id": "scheduled__1"})
    assert sent and _clusters(sent) == {tag}
    assert [alert.cluster for alert in delivered] == [tag]  # the PARTIAL night's alert names the cluster
    assert events == [(alias, tag)]  # cassandra://<tag>/<keyspace>


@pytest.mark.parametrize(("cluster", "tag"), [("eu_west", "eu_west"), (None, "cql_eu")])
def test_a_failed_task_of_the_night_reports_its_clusters_name(
    monkeypatch: pytest.MonkeyPatch, cluster: str | None, tag: str
) -> None:
    failed: list[str] = []
    monkeypatch.setattr(repair_operators, "night_failed", lambda context, name: failed.append(name))
    task = RepairRunOperator(task_id="repair", cassandra_conn_id="cql_eu", cluster=cluster)
    RepairFailureNotifier().notify({"task": task, "ti": SimpleNamespace(task_id="repair"), "run_id": "r"})
    assert failed == [tag]


def test_a_migration_task_tags_its_clusters_name() -> None:
    named = MigrationReportOperator(task_id="report", cassandra_conn_id="cql_eu", cluster="eu_west")
    single = MigrationReportOperator(task_id="report", cassandra_conn_id="cql_eu")
    assert (named.metrics_cluster, single.metrics_cluster) == ("eu_west", "cql_eu")
