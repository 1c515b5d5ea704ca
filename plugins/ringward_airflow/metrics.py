"""Sends `ringward.repair` metric points through Airflow's own Stats, tags included.

How tags reach the wire depends on Airflow's `[metrics]` backend (read from the installed Airflow 3.3):
- StatsD (`statsd_on = True`): only with `statsd_influxdb_enabled = True`, appended InfluxDB-style to the
  name (`airflow.ringward.repair.table.coverage_ratio,cluster=prod,keyspace=shop,...:0.98|g`), which
  Prometheus' statsd_exporter parses into labels by default. Without it the tags are dropped and the points of
  different tables overwrite one another under one name: turn it on.
- DogStatsD (`statsd_datadog_enabled = True`, needs the `datadog` package): `|#cluster:prod,...` tags.
- OpenTelemetry (`otel_on = True`): attributes.
The operator's guide, "Metrics and alerts", lists the names and tags.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from airflow.sdk.observability.stats import Stats
from ringward.repair import MetricPoint, approval_points

__all__ = ["emit", "emit_approval"]

log = logging.getLogger(__name__)


def emit(points: Iterable[MetricPoint]) -> int:
    """Send each point as a gauge with its tags; returns how many were sent."""
    sent = 0
    for point in points:
        Stats.gauge(point.name, point.value, tags=point.tag_map)
        sent += 1
    return sent


def emit_approval(context: Mapping[str, Any], approval: str, waiting_since: datetime | None, cluster: str) -> None:
    """An approval's waiting gauge (`ringward.migration.approval_waiting_since_seconds`): when it started
    waiting, or 0 once answered. The keyspace comes from the precheck's record (else the run's params). A
    metric must not fail the approval: an error is logged."""
    try:
        record = context["ti"].xcom_pull(task_ids="precheck") if context.get("ti") is not None else None
        params = context.get("params") or {}
        keyspace = (record or {}).get("keyspace") or params.get("keyspace") or params.get("rollback_of") or "unknown"
        emit(approval_points(cluster, str(keyspace), approval, waiting_since))
    except Exception as error:  # the gauge is for dashboards; the approval goes on without it
        log.warning("Approval gauge of %s not sent (%s): %s", approval, type(error).__name__, error)
