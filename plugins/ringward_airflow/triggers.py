"""Triggers (loaded by the triggerer from plugins/, never from dags/)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

__all__ = ["RepairSessionTrigger"]


class RepairSessionTrigger(BaseTrigger):
    """Waits for repair sessions started by a deferred task, polling `system_distributed.parent_repair_history`.

    Every repair coordinator records its parent session there with `finished_at` and, on failure,
    `exception_message`, so the trigger needs only CQL (no JMX) and holds no worker slot.
    """

    def __init__(
        self,
        contact_points: list[str],
        parent_ids: list[str],
        port: int = 9042,
        poll_interval: float = 5.0,
        timeout_seconds: float = 3600.0,
        started_at: float | None = None,
        labels: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.contact_points = contact_points
        self.parent_ids = parent_ids
        self.port = port
        self.poll_interval = poll_interval
        self.timeout_seconds = timeout_seconds
        self.started_at = started_at if started_at is not None else time.time()
        # What the deferred task needs back about each session (its range and coordinator), echoed in events.
        self.labels = labels or {}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "contact_points": self.contact_points,
                "parent_ids": self.parent_ids,
                "port": self.port,
                "poll_interval": self.poll_interval,
                "timeout_seconds": self.timeout_seconds,
                "started_at": self.started_at,
                "labels": self.labels,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            try:
                sessions = await asyncio.to_thread(self._poll)
            except Exception as error:  # a node restarting is not a failed repair: poll again
                self.log.warning("could not read repair history yet: %s", error)
                sessions = {}
            if sessions and all(session["finished"] for session in sessions.values()):
                yield TriggerEvent({"status": "finished", "sessions": sessions, "labels": self.labels})
                return
            if time.time() - self.started_at > self.timeout_seconds:
                yield TriggerEvent({"status": "timeout", "sessions": sessions, "labels": self.labels})
                return
            await asyncio.sleep(self.poll_interval)

    def _poll(self) -> dict[str, dict[str, Any]]:
        from cassandra import ConsistencyLevel
        from cassandra.query import SimpleStatement
        from ringward_cassandra.cql import connect

        statement = SimpleStatement(
            "SELECT parent_id, finished_at, exception_message, successful_ranges "
            "FROM system_distributed.parent_repair_history WHERE parent_id = %s",
            consistency_level=ConsistencyLevel.ONE,
        )
        sessions: dict[str, dict[str, Any]] = {}
        with connect(self.contact_points, self.port) as session:
            for parent_id in self.parent_ids:
                row = session.execute(statement, (uuid.UUID(parent_id),)).one()
                finished = bool(row and (row.finished_at or row.exception_message))
                sessions[parent_id] = {
                    "finished": finished,
                    "ok": bool(row and row.finished_at and not row.exception_message),
                    "error": (row.exception_message if row else None) or "",
                }
        return sessions
