"""The migration's Spark stages: a baseline count before each ALTER and the count-based verification after
its repair, each ONE Spark application for all tables of the keyspace (ringward_spark.stages). The jobs run
through the Spark provider's SparkSubmitHook on `spark_conn_id` (plugins/ringward_spark), with the Cassandra
connection's settings; the rule is ringward.verification.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow.sdk import BaseHook, Context
from airflow.sdk.exceptions import AirflowNotFoundException
from ringward.errors import ConfigurationError, VerificationError
from ringward.migration import verify_targets
from ringward.ring import TokenRange
from ringward_spark.counts import stage_scans
from ringward_spark.stages import BASELINE, baseline_phases, verify_phases, verify_tables
from ringward_spark.submit import CassandraOptions, SparkSubmission, StagePhase, stage_job_args, stage_plan

from ringward_airflow.migration_base import MigrationOperator, load_migration
from ringward_airflow.migration_stages import hold_lease

__all__ = ["SparkBaselineOperator", "SparkVerifyOperator", "StageInputs", "cassandra_options", "spark_login"]

SPARK_CASSANDRA_CONN_ID = "cassandra_spark"


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


def spark_login(main: Any, spark: Any | None, spark_conn_id: str) -> CassandraOptions:
    """How the Spark job logs in to Cassandra: with the read-only role of the `spark_conn_id` connection, never
    with ringward's own role, whose password Spark would hand to its executors (it may write ringward_ops and ALTER
    keyspaces). Contact points and port stay the `cassandra` connection's; TLS and the local DC too unless the
    Spark connection gives its own. A cluster without logins needs no Spark connection."""
    base = cassandra_options(main)
    if spark is None:
        if base.username:
            raise ConfigurationError(
                f"The cassandra connection logs in as {base.username!r}, and there is no connection "
                f"{spark_conn_id!r} for the Spark verification's own read-only role.",
                f"Create the connection {spark_conn_id!r} (type cassandra, login and password of the role that "
                "`ringward grants` prints as ringward_spark, with SELECT on the migrated keyspace only): the Spark "
                "job must not log in with ringward's own role.",
            )
        return base
    own = cassandra_options(spark)
    if base.username and (not own.username or own.username == base.username):
        raise ConfigurationError(
            f"The connection {spark_conn_id!r} logs in as {own.username or 'nobody'!r}: the Spark verification "
            "needs a role of its own, other than the cassandra connection's.",
            f"Give {spark_conn_id!r} the login and password of the read-only role `ringward grants` prints "
            "(ringward_spark).",
        )
    return CassandraOptions(
        local_dc=own.local_dc or base.local_dc, username=own.username, password=own.password,
        ssl_options=own.ssl_options or base.ssl_options,
    )  # fmt: skip


def _connection_or_none(conn_id: str) -> Any | None:
    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None


@dataclass(frozen=True)
class StageInputs:
    """What one Spark stage works on: the keyspace and its tables, the step's affected ranges, per new replica
    the ranges it gained, and how the job reaches Cassandra (contact points, CQL port, login and DC)."""

    keyspace: str
    tables: tuple[str, ...]
    ranges: tuple[TokenRange, ...]
    gained: Mapping[str, tuple[TokenRange, ...]]
    hosts: tuple[str, ...]
    port: int
    cassandra: CassandraOptions


class _SparkStage(MigrationOperator):
    def __init__(
        self,
        *,
        step_index: int = 1,
        spark_conn_id: str = "spark_default",
        spark_cassandra_conn_id: str = SPARK_CASSANDRA_CONN_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.step_index = step_index
        self.spark_conn_id = spark_conn_id
        self.spark_cassandra_conn_id = spark_cassandra_conn_id
        self._submission: SparkSubmission | None = None  # the running Spark application, for on_kill

    def _inputs(self, context: Context) -> StageInputs:
        """The stage's inputs: the step's ranges from the precheck's record, the tables and the connection's
        settings from the cluster (the hook is closed again before the Spark job runs)."""
        record = load_migration(context, self.precheck_task_id)
        targets = verify_targets(record.ring, record.steps[self.step_index - 1])
        gained: dict[str, list[TokenRange]] = {}
        for target in targets:
            gained.setdefault(target.replica, []).append(target.range)
        hook = self.cassandra
        try:
            hold_lease(hook.ops_store(), record)
            rows = hook.session.execute(
                "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (record.keyspace,)
            )
            tables = tuple(sorted(row.table_name for row in rows))
            hosts = tuple(hook.contact_points())
            connection = hook.get_connection(hook.cassandra_conn_id)
        finally:
            hook.close()
        return StageInputs(
            keyspace=record.keyspace,
            tables=tables,
            ranges=tuple(sorted({t.range for t in targets})),
            gained={replica: tuple(ranges) for replica, ranges in gained.items()},
            hosts=hosts,
            port=int(connection.port or 9042),
            cassandra=spark_login(connection, _connection_or_none(self.spark_cassandra_conn_id),
                                  self.spark_cassandra_conn_id),
        )  # fmt: skip

    def _run_stage(self, inputs: StageInputs, phases: Sequence[StagePhase]) -> dict[str, Any]:
        """One Spark application for the whole stage."""
        self._raise_if_killed()
        self._submission = SparkSubmission(
            stage_job_args(inputs.hosts, inputs.keyspace, port=inputs.port), conn_id=self.spark_conn_id,
            cassandra=inputs.cassandra, plan=stage_plan(phases),
        )  # fmt: skip
        try:
            result = self._submission.run()
        finally:
            self._submission = None
            self._raise_if_killed()
        for phase in result["phases"]:
            self.log.info("Spark phase %s: %d pieces in %d tasks, %.1fs", phase["name"], phase["pieces"],
                          phase["tasks"], phase["seconds"])  # fmt: skip
        self.log.info("Spark application: %.1fs in the job", result["seconds"])
        return result

    def on_kill(self) -> None:
        super().on_kill()
        if self._submission is not None:
            self._submission.kill()


class SparkBaselineOperator(_SparkStage):
    """Rows per affected range at CL ALL, before the ALTER; its start time is the cutoff of verification."""

    def execute(self, context: Context) -> dict[str, Any]:
        inputs = self._inputs(context)
        if not inputs.ranges or not inputs.tables:
            return {"taken_at_us": int(time.time() * 1_000_000), "tables": {}}
        taken_at_us = int(time.time() * 1_000_000)
        result = self._run_stage(inputs, baseline_phases(inputs.tables, inputs.ranges))
        results = {scan["table"]: scan for scan in stage_scans(result, BASELINE)}
        for table, scan in results.items():
            rows = sum(entry["rows"] for entry in scan["ranges"])
            self.log.info(
                "baseline %s.%s: %d rows in %d affected ranges", inputs.keyspace, table, rows, len(inputs.ranges)
            )
        return {"taken_at_us": taken_at_us, "tables": results}


class SparkVerifyOperator(_SparkStage):
    """Every new replica holds every row of the ranges it gained (host-pinned CL ONE counts against CL ALL),
    and each table's whole row count at CL ALL, from the same pass, reported as evidence."""

    report_section = "verification"

    def __init__(self, *, baseline_task_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.baseline_task_id = baseline_task_id

    def execute(self, context: Context) -> dict[str, Any]:
        inputs = self._inputs(context)
        if not inputs.ranges:  # the step only removed replicas: no node has data to receive
            self.log.info("No replica gained ranges in step %d: nothing to count.", self.step_index)
            return {}
        if not inputs.tables:
            self.log.info("Keyspace %s has no tables: nothing to count.", inputs.keyspace)
            return {}
        baseline_record = context["ti"].xcom_pull(task_ids=self.baseline_task_id)
        cutoff = int(baseline_record["taken_at_us"])
        keyspace = inputs.keyspace
        result = self._run_stage(inputs, verify_phases(inputs.tables, inputs.ranges, inputs.gained, cutoff))
        verified = verify_tables(result, inputs.ranges, baseline_record["tables"], cutoff)
        for table in verified:
            self.log.info("%s.%s %s", keyspace, table.table, table.report.summary())
            self.log.info("%s.%s whole-table rows at ALL: %d", keyspace, table.table, table.whole_table_rows)
        failed = [table for table in verified if not table.report.ok]
        if failed:
            raise VerificationError(
                "\n".join(f"{keyspace}.{t.table} {t.report.summary()}" for t in failed),
                "Keep the former replicas (no cleanup): full-repair the failed ranges, then verify again.",
            )
        return {table.table: table.evidence() for table in verified}
