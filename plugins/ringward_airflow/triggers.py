"""Triggers (loaded by the triggerer from plugins/, never from dags/)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from ringward.session_watch import DOWN_GRACE_SECONDS, CoordinatorView, DownTracker, dead_session_reason
from ringward_cassandra.cql import accepts_connections

__all__ = ["RepairSessionTrigger"]


class RepairSessionTrigger(BaseTrigger):
    """Waits for repair sessions started by a deferred task, polling `system_distributed.parent_repair_history`.

    Every repair coordinator records its parent session there with `finished_at` and, on failure,
    `exception_message`, so the trigger needs only CQL (no JMX) and holds no worker slot. A coordinator
    that dies never writes either: the trigger also watches each coordinator (its gossip generation and
    whether it accepts connections) and reports the session dead as soon as it cannot finish
    (`ringward.session_watch`), instead of waiting for `timeout_seconds`.

    `labels` maps each parent id to {"ranges": [[start, end], ...], "coordinator": address}.

    `cassandra_conn_id` names the connection the triggerer logs in with (its hosts, port, credentials, TLS),
    read when the trigger runs: the serialized trigger, stored in Airflow's database, holds no secret.
    Without it (a trigger serialized by an older ringward) it connects to `contact_points` anonymously.
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
        down_grace_seconds: float = DOWN_GRACE_SECONDS,
        cassandra_conn_id: str | None = None,
    ) -> None:
        super().__init__()
        self.cassandra_conn_id = cassandra_conn_id
        self.contact_points = contact_points
        self.parent_ids = parent_ids
        self.port = port
        self.poll_interval = poll_interval
        self.timeout_seconds = timeout_seconds
        self.started_at = started_at if started_at is not None else time.time()
        # What the deferred task needs back about each session (its range and coordinator), echoed in events.
        self.labels = labels or {}
        self.down_grace_seconds = down_grace_seconds

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
                "down_grace_seconds": self.down_grace_seconds,
                "cassandra_conn_id": self.cassandra_conn_id,
            },
        )

    async def _cluster_settings(self) -> dict[str, Any]:
        """`build_cluster`'s arguments: the connection's (credentials and TLS included), or the bare points."""
        if self.cassandra_conn_id is None:
            return {"contact_points": self.contact_points, "port": self.port}
        from airflow.sdk.bases.hook import BaseHook

        from ringward_airflow.hooks import connection_settings

        settings = connection_settings(await BaseHook.aget_connection(self.cassandra_conn_id))
        settings.pop("schema_agreement_wait", None)  # the trigger only reads
        return settings

    async def run(self) -> AsyncIterator[TriggerEvent]:
        # One driver connection for the whole run, not one per poll.
        watch = _SessionWatch(self, await self._cluster_settings())
        try:
            while True:
                try:
                    sessions = await asyncio.to_thread(watch.poll)
                except Exception as error:  # a node restarting is not a failed repair: poll again
                    self.log.warning("could not read repair history yet: %s", error)
                    sessions = {}
                dead = {pid: s for pid, s in sessions.items() if s.get("dead")}
                if dead:
                    for pid, session in dead.items():
                        self.log.warning("repair session %s: %s", pid, session["error"])
                    yield TriggerEvent({"status": "dead", "sessions": sessions, "labels": self.labels})
                    return
                if sessions and all(session["finished"] for session in sessions.values()):
                    yield TriggerEvent({"status": "finished", "sessions": sessions, "labels": self.labels})
                    return
                if time.time() - self.started_at > self.timeout_seconds:
                    yield TriggerEvent({"status": "timeout", "sessions": sessions, "labels": self.labels})
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            await asyncio.to_thread(watch.close)


class _SessionWatch:
    """The trigger's blocking side: one driver session, read from a worker thread."""

    def __init__(self, trigger: RepairSessionTrigger, settings: dict[str, Any]) -> None:
        self.trigger = trigger
        self.settings = settings
        self.down = DownTracker()
        self._internode_ports: dict[str, int] = {}  # address -> storage port, as gossip tells it
        self._cluster: Any = None
        self._session: Any = None
        self._gossip_readable = True

    def _connect(self) -> Any:
        if self._session is None:
            from ringward_cassandra.cql import build_cluster

            self._cluster = build_cluster(**{**self.settings, "timeout": 15})
            self._session = self._cluster.connect()
        return self._session

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = self._session = None

    def poll(self) -> dict[str, dict[str, Any]]:
        from cassandra import ConsistencyLevel
        from cassandra.query import SimpleStatement

        try:
            session = self._connect()
        except Exception:
            self.close()  # reconnect on the next poll
            raise
        statement = SimpleStatement(
            "SELECT parent_id, started_at, finished_at, exception_message "
            "FROM system_distributed.parent_repair_history WHERE parent_id = %s",
            consistency_level=ConsistencyLevel.ONE,
        )
        generations = self._generations(session)
        now = time.time()
        sessions: dict[str, dict[str, Any]] = {}
        for parent_id in self.trigger.parent_ids:
            row = session.execute(statement, (uuid.UUID(parent_id),)).one()
            finished = bool(row and (row.finished_at or row.exception_message))
            entry: dict[str, Any] = {
                "finished": finished,
                "ok": bool(row and row.finished_at and not row.exception_message),
                "error": (row.exception_message if row else None) or "",
                "dead": False,
            }
            coordinator = (self.trigger.labels.get(parent_id) or {}).get("coordinator")
            if not finished and coordinator:
                # Alive if it answers on CQL or on its internode port: `nodetool disablebinary` closes the
                # first on a node that still coordinates its session (and a client-drain does exactly that).
                reachable = accepts_connections(coordinator, self.trigger.port) or accepts_connections(
                    coordinator, self._internode_ports.get(coordinator, DEFAULT_STORAGE_PORT)
                )
                down_since = self.down.observe(coordinator, reachable, now)
                # The driver returns naive UTC datetimes; before the row exists, the task's start stands in.
                began = _epoch(row.started_at) if row and row.started_at else None
                view = CoordinatorView(
                    coordinator,
                    generation=generations.get(coordinator, 0 if generations is _UNKNOWN else None),
                    reachable=reachable,
                )
                reason = dead_session_reason(
                    view, began or self.trigger.started_at, down_since, now, self.trigger.down_grace_seconds
                )
                if reason:
                    entry.update(dead=True, error=f"the repair session cannot finish: {reason}")
            sessions[parent_id] = entry
        return sessions

    def _generations(self, session: Any) -> dict[str, int]:
        """address -> gossip generation, as the node answering sees the ring (Cassandra 4.1+)."""
        if not self._gossip_readable:
            return _UNKNOWN
        try:
            rows = list(session.execute("SELECT address, port, generation FROM system_views.gossip_info"))
        except Exception as error:  # older Cassandra: only reachability can tell a dead coordinator
            self.trigger.log.warning("system_views.gossip_info unreadable (%s): restarts go unnoticed", error)
            self._gossip_readable = False
            return _UNKNOWN
        self._internode_ports = {str(row.address): int(row.port) for row in rows if row.port is not None}
        return {str(row.address): int(row.generation) for row in rows if row.generation is not None}


_UNKNOWN: dict[str, int] = {}
DEFAULT_STORAGE_PORT = 7000  # cassandra.yaml's storage_port, when gossip does not say


def _epoch(moment: datetime) -> float:
    """Epoch seconds of a driver timestamp (naive datetimes from the driver are UTC)."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
