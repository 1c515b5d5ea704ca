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

from collections.abc import Iterable

from airflow.sdk.observability.stats import Stats
from ringward.repair import MetricPoint

__all__ = ["emit"]


def emit(points: Iterable[MetricPoint]) -> int:
    """Send each point as a gauge with its tags; returns how many were sent."""
    sent = 0
    for point in points:
        Stats.gauge(point.name, point.value, tags=point.tag_map)
        sent += 1
    return sent
