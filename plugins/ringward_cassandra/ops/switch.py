"""ringward_ops.repair_switch on Cassandra: the presses of a pause switch, newest first."""

from __future__ import annotations

from datetime import UTC, datetime

from ringward.repair import SwitchEvent

from ringward_cassandra.ops._cql import OpsKeyspace
from ringward_cassandra.ops.layout import REPAIR_SWITCH, utc
from ringward_cassandra.ops.schema import table_ddl

__all__ = ["CassandraSwitch"]


class CassandraSwitch:
    """`SwitchStorage` on Cassandra: every press a row; the latest row of a switch is its state."""

    def __init__(self, ops: OpsKeyspace) -> None:
        self.ops = ops

    def switch_events(self, name: str = REPAIR_SWITCH, limit: int = 20) -> list[SwitchEvent]:
        """The latest presses of a switch, newest first; none (or no table yet) means never pressed: running."""
        if not self.ops.has_table("repair_switch"):
            return []
        rows = self.ops.read(f"SELECT * FROM {self.ops.keyspace}.repair_switch WHERE name = %s LIMIT {int(limit)}",
                             (name,))  # fmt: skip
        return [SwitchEvent(bool(r.paused), utc(r.changed_at), r.changed_by or "", r.reason or "") for r in rows]

    def repair_paused(self, name: str = REPAIR_SWITCH) -> bool:
        """Whether the switch's latest press paused the repair."""
        events = self.switch_events(name, limit=1)
        return bool(events and events[0].paused)

    def set_switch(self, paused: bool, changed_by: str, reason: str = "", name: str = REPAIR_SWITCH) -> SwitchEvent:
        """Record a press (creating the table on a cluster whose ringward_ops predates it)."""
        if not self.ops.has_table("repair_switch"):
            self.ops.session.execute(table_ddl("repair_switch", self.ops.keyspace))
            self.ops.session.cluster.control_connection.wait_for_schema_agreement(wait_time=30)
        event = SwitchEvent(paused, datetime.now(UTC), changed_by, reason[:500])
        self.ops.write(
            f"INSERT INTO {self.ops.keyspace}.repair_switch (name, changed_at, paused, changed_by, reason) "
            "VALUES (%s, %s, %s, %s, %s)",
            (name, event.changed_at, paused, changed_by, event.reason),
        )
        return event
