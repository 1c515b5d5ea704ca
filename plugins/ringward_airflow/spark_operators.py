"""The migration's Spark stages: a baseline count before each ALTER and the count-based verification after
its repair. The jobs run through the Spark provider's SparkSubmitHook on `spark_conn_id` (plugins/ringward_spark),
with the Cassandra connection's settings; the rule is ringward.verification.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context
from ringward.migration import verify_targets
from ringward.ring import TokenRange
from ringward.verification import verify
from ringward_spark.counts import baseline_from_result, scan_counts_from_result
from ringward_spark.submit import CassandraOptions, SparkSubmission, count_job_args, range_counts_job_args

from ringward_airflow.migration_operators import _MigrationOperator, load_record, record_plan

__all__ = ["SparkBaselineOperator", "SparkVerifyOperator", "cassandra_options"]


def cassandra_options(conn: Any) -> CassandraOptions:
    """What a Spark job needs of a `cassandra` connection besides its contact points and port: the local DC
    (`extra.local_dc` or the provider's `load_balancing_policy_args.local_dc`), the role, `extra.ssl_options`."""
    extra = conn.extra_dejson
    local_dc = extra.get("local_dc") or (extra.get("load_balancing_policy_args") or {}).get("local_dc")
    return CassandraOptions(
        local_dc=local_dc or None,
        username=conn.login or None,
        password=conn.password or None,
        ssl_options=extra.get("ssl_options") or None,
    )


class _SparkStage(_MigrationOperator):
    def __init__(self, *, step_index: int = 1, spark_conn_id: str = "spark_default", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step_index = step_index
        self.spark_conn_id = spark_conn_id

    def _context(
        self, context: Context
    ) -> tuple[dict[str, Any], list[str], list[TokenRange], dict[str, list[TokenRange]]]:
        """Record, tables, the affected ranges, and per new replica the ranges it gained."""
        record = load_record(context, self.precheck_task_id)
        ring, steps = record_plan(record)
        targets = verify_targets(ring, steps[self.step_index - 1])
        gained: dict[str, list[TokenRange]] = {}
        for target in targets:
            gained.setdefault(target.replica, []).append(target.range)
        ranges = sorted({t.range for t in targets})
        hook = self._cassandra()
        try:
            rows = hook.session.execute(
                "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (record["keyspace"],)
            )
            tables = sorted(row.table_name for row in rows)
            self._hosts = hook.contact_points()
            connection = hook.get_connection(hook.cassandra_conn_id)
            self._port = int(connection.port or 9042)
            self._cassandra_options = cassandra_options(connection)
        finally:
            hook.close()
        return record, tables, ranges, gained

    def _run(self, job_args: Sequence[str]) -> dict[str, Any]:
        self._raise_if_killed()
        self._submission = SparkSubmission(job_args, conn_id=self.spark_conn_id, cassandra=self._cassandra_options)
        try:
            return self._submission.run()
        finally:
            self._submission = None
            self._raise_if_killed()

    def on_kill(self) -> None:
        super().on_kill()
        submission = getattr(self, "_submission", None)
        if submission is not None:
            submission.kill()


class SparkBaselineOperator(_SparkStage):
    """Rows per affected range at CL ALL, before the ALTER; its start time is the cutoff of verification."""

    def execute(self, context: Context) -> dict[str, Any]:
        record, tables, ranges, _ = self._context(context)
        if not ranges:
            return {"taken_at_us": int(time.time() * 1_000_000), "tables": {}}
        taken_at_us = int(time.time() * 1_000_000)
        results = {}
        for table in tables:
            results[table] = self._run(
                range_counts_job_args(self._hosts, record["keyspace"], table, ranges, port=self._port)
            )
            rows = sum(entry["rows"] for entry in results[table]["ranges"])
            self.log.info("baseline %s.%s: %d rows in %d affected ranges", record["keyspace"], table, rows, len(ranges))
        return {"taken_at_us": taken_at_us, "tables": results}


class SparkVerifyOperator(_SparkStage):
    """Every new replica holds every row of the ranges it gained (host-pinned CL ONE counts against CL ALL),
    plus a whole-table count through the Spark Cassandra Connector, reported as evidence."""

    def __init__(self, *, baseline_task_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.baseline_task_id = baseline_task_id

    def execute(self, context: Context) -> dict[str, Any]:
        record, tables, ranges, gained = self._context(context)
        if not ranges:  # the step only removed replicas: no node has data to receive
            self.log.info("No replica gained ranges in step %d: nothing to count.", self.step_index)
            return {}
        baseline_record = context["ti"].xcom_pull(task_ids=self.baseline_task_id)
        cutoff = int(baseline_record["taken_at_us"])
        evidence: dict[str, Any] = {}
        for table in tables:
            keyspace = record["keyspace"]
            baseline = baseline_from_result(baseline_record["tables"][table], cutoff)
            replicas = [
                scan_counts_from_result(self._run(self._pinned_args(keyspace, table, replica, replica_ranges, cutoff)))
                for replica, replica_ranges in sorted(gained.items())
            ]
            # The reference (CL ALL) comes second: a read at ALL read-repairs the replicas it finds
            # lacking, which would hide exactly what the pinned counts are looking for.
            reference = scan_counts_from_result(
                self._run(
                    range_counts_job_args(self._hosts, keyspace, table, ranges, cutoff_us=cutoff, port=self._port)
                )
            )
            report = verify(baseline, reference, replicas)
            self.log.info("%s.%s %s", keyspace, table, report.summary())
            # One contact point: the connector refuses contact points from several datacenters.
            whole = self._run(count_job_args(self._hosts[:1], keyspace, table, consistency="ALL", port=self._port))
            self.log.info("%s.%s whole-table count at ALL (connector): %s", keyspace, table, whole.get("rows"))
            report.raise_for_failures()
            evidence[table] = {
                "replica_checks": len(report.checks),
                "rows_verified": sum(c.replica_rows for c in report.checks),
                "not_in_sync": [c.describe() for c in report.warnings],
                "whole_table_rows": whole.get("rows"),
            }
        return evidence

    def _pinned_args(
        self, keyspace: str, table: str, replica: str, ranges: Sequence[TokenRange], cutoff: int
    ) -> list[str]:
        """Counts `replica` holds itself: it is the only coordinator and reads at CL ONE."""
        return range_counts_job_args(
            self._hosts,
            keyspace,
            table,
            ranges,
            consistency="ONE",
            pinned_host=replica,
            cutoff_us=cutoff,
            port=self._port,
        )
