"""ringward_ops.repair_progress on Cassandra: a running run's live progress."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ringward_cassandra.ops._cql import OpsKeyspace
from ringward_cassandra.ops.layout import utc

__all__ = ["CassandraRunProgress"]


class CassandraRunProgress:
    """`RunProgressStorage` on Cassandra: one row per top-level key of a run's progress (JSON values)."""

    def __init__(self, ops: OpsKeyspace) -> None:
        self.ops = ops

    def record_run_progress(self, run_id: str, progress: Mapping[str, Any]) -> None:
        """The live progress of a run: one row per top-level key (JSON), written in one single-partition batch
        (atomic), expiring with the history. Keys missing from `progress` keep their last value."""
        from cassandra import ConsistencyLevel
        from cassandra.query import BatchStatement, BatchType

        if not progress:
            return
        ops = self.ops
        now = datetime.now(UTC)
        insert = ops.statement(f"INSERT INTO {ops.keyspace}.repair_progress (run_id, name, value, updated_at) "
                               f"VALUES (?, ?, ?, ?) USING TTL {ops.history_ttl_seconds}")  # fmt: skip
        batch = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=ConsistencyLevel.QUORUM)
        for name, value in progress.items():
            batch.add(insert, (run_id, str(name), json.dumps(value, default=str), now))
        ops.session.execute(batch)

    def run_progress(self, run_id: str) -> dict[str, Any] | None:
        """The last progress recorded for `run_id`; None when none was (or the table does not exist yet)."""
        if "repair_progress" not in self.ops.tables():
            return None
        rows = self.ops.read(f"SELECT name, value FROM {self.ops.keyspace}.repair_progress WHERE run_id = %s",
                             (run_id,))  # fmt: skip
        if not rows:
            return None
        return {r.name: json.loads(r.value) for r in rows}

    def progress_runs(self) -> dict[str, datetime | None]:
        """Run id -> when its progress was last stored, for every run with stored progress (a few rows per run,
        expiring with the history): how a reader without Airflow finds the run under way."""
        if "repair_progress" not in self.ops.tables():
            return {}
        found: dict[str, datetime | None] = {}
        for row in self.ops.read(f"SELECT run_id, updated_at FROM {self.ops.keyspace}.repair_progress", ()):
            run_id, when = row.run_id, utc(row.updated_at)
            known = found.get(run_id)
            found[run_id] = when if known is None or (when is not None and when > known) else known
        return found
