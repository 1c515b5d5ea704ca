"""ringward_ops.repair_runs on Cassandra: one small row per nightly run."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from ringward.repair import RepairRunRow

from ringward_cassandra.ops._cql import OpsKeyspace
from ringward_cassandra.ops.layout import utc

__all__ = ["CassandraRepairRuns"]


class CassandraRepairRuns:
    """`RepairRunStorage` on Cassandra: a run's state, report (summary) and config, read latest first."""

    def __init__(self, ops: OpsKeyspace) -> None:
        self.ops = ops

    def record_repair_run(self, run_id: str, state: str, summary: dict[str, object], config: dict[str, object]) -> None:
        """Upsert the run's row; it expires with the history TTL, so the table (read whole by the Repair page and
        the report) holds the runs of one history window, never every night since the cluster began."""
        self.ops.write(
            f"INSERT INTO {self.ops.keyspace}.repair_runs (run_id, state, summary, config, updated_at) "
            f"VALUES (%s, %s, %s, %s, %s) USING TTL {int(self.ops.history_ttl_seconds)}",
            (run_id, state, json.dumps(summary, default=str), json.dumps(config, default=str), datetime.now(UTC)),
        )

    def repair_runs(self) -> list[RepairRunRow]:
        """Recorded runs, latest first."""
        rows = self.ops.read(f"SELECT * FROM {self.ops.keyspace}.repair_runs", ())
        runs = [
            RepairRunRow(r.run_id, r.state, json.loads(r.summary or "{}"), json.loads(r.config or "{}"),
                         utc(r.updated_at))
            for r in rows
        ]  # fmt: skip
        return sorted(runs, key=lambda run: run.updated_at or datetime.min.replace(tzinfo=UTC), reverse=True)

    def latest_repair_run(self) -> RepairRunRow | None:
        """The latest recorded run (the table holds one small row per run)."""
        runs = self.repair_runs()
        return runs[0] if runs else None
