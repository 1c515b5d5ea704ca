"""ringward_ops.controller_pauses on Cassandra: what a migration paused of another repair controller."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ringward_cassandra.ops._cql import OpsKeyspace

__all__ = ["CassandraControllerPauses"]


class CassandraControllerPauses:
    """`ControllerPauseStorage` on Cassandra: one row per (migration, controller), written before the pause."""

    def __init__(self, ops: OpsKeyspace) -> None:
        self.ops = ops

    def record_controller_pause(self, migration_id: str, controller: str, saved: object) -> None:
        """What `controller` looked like before the migration paused it (JSON), not yet restored."""
        self.ops.write(
            f"INSERT INTO {self.ops.keyspace}.controller_pauses (migration_id, controller, saved, paused_at, "
            "restored_at) VALUES (%s, %s, %s, %s, null)",
            (migration_id, controller, json.dumps(saved), datetime.now(UTC)),
        )

    def controller_pause(self, migration_id: str, controller: str) -> tuple[Any, bool] | None:
        """(saved settings, restored yet) of a pause, None when the migration never paused `controller`."""
        rows = self.ops.read(
            f"SELECT saved, restored_at FROM {self.ops.keyspace}.controller_pauses WHERE migration_id = %s "
            "AND controller = %s",
            (migration_id, controller),
        )
        if not rows:
            return None
        return json.loads(rows[0].saved), rows[0].restored_at is not None

    def mark_controller_restored(self, migration_id: str, controller: str) -> None:
        self.ops.write(
            f"UPDATE {self.ops.keyspace}.controller_pauses SET restored_at = %s WHERE migration_id = %s "
            "AND controller = %s",
            (datetime.now(UTC), migration_id, controller),
        )
