"""The base of every operator of the `keyspace_migration` DAG (migration stages, Spark stages, repair
controllers): its connections (one cached Cassandra hook, one nodetool client) and the one way to read the
precheck's `MigrationRecord` (`load_migration`).

Kept apart from `migration_operators` so that modules the precheck itself uses (`repair_controller_operators`)
can subclass it without an import cycle.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context
from ringward.clusters import metrics_cluster
from ringward.errors import MigrationError
from ringward.migration_record import MigrationRecord
from ringward_cassandra.nodetool import NodetoolClient

from ringward_airflow.hooks import NodetoolHook, RingwardCassandraHook

__all__ = ["MigrationOperator", "load_migration", "load_record", "stored_record"]


def stored_record(context: Context, precheck_task_id: str = "precheck") -> dict[str, Any] | None:
    """The precheck's record as the stored dict (`MigrationRecord.to_json`), None when it left none (it
    refused, or did not run); `load_record` and `load_migration` refuse that."""
    record = context["ti"].xcom_pull(task_ids=precheck_task_id)
    return dict(record) if record else None


def load_record(context: Context, precheck_task_id: str = "precheck") -> dict[str, Any]:
    """The precheck's record as the stored dict; `load_migration` types it."""
    record = stored_record(context, precheck_task_id)
    if record is None:
        raise MigrationError("The precheck left no plan for this run.", "Clear and rerun the precheck task.")
    return record


def load_migration(context: Context, precheck_task_id: str = "precheck") -> MigrationRecord:
    """The precheck's record, typed: the ring and steps it decided (later tasks never plan again)."""
    return MigrationRecord.from_json(load_record(context, precheck_task_id))


class MigrationOperator(BaseOperator):
    """Connections and the precheck record, shared by every stage.

    One Cassandra hook per task (`self.cassandra`, opened on first use in `execute`) and one nodetool
    client; `_release()` closes both at the end of `execute`.
    """

    template_fields: Sequence[str] = ()
    # Where the migration report lists what this task returned ("repairs", "verification"), if anywhere.
    report_section: str | None = None

    def __init__(
        self,
        *,
        cassandra_conn_id: str = "cassandra_default",
        nodetool_conn_id: str = "ringward_nodetool",
        reaper_conn_id: str = "reaper_default",
        precheck_task_id: str = "precheck",
        cluster: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.cassandra_conn_id = cassandra_conn_id
        # The declared cluster's name (None: the single-cluster deployment): the `cluster` tag of the metrics.
        self.cluster = cluster
        self.nodetool_conn_id = nodetool_conn_id
        # The Reaper managing this cluster's schedules (absent connection: no Reaper); only the precheck and the
        # pause/restore of repair controllers use it.
        self.reaper_conn_id = reaper_conn_id
        self.precheck_task_id = precheck_task_id
        self._nodetool: NodetoolClient | None = None
        self._hook: RingwardCassandraHook | None = None

    @property
    def metrics_cluster(self) -> str:
        """The `cluster` tag of this task's metrics: the declared cluster's name, else the CQL connection id."""
        return metrics_cluster(self.cluster, self.cassandra_conn_id)

    @property
    def cassandra(self) -> RingwardCassandraHook:
        """The task's Cassandra hook (session, ring, ops store), built once."""
        if self._hook is None:
            self._hook = RingwardCassandraHook(self.cassandra_conn_id)
        return self._hook

    def _release(self) -> None:
        """Close the session and stop nodetool's resident JVM; a later use opens them again."""
        if self._hook is not None:
            self._hook.close()
        self._close_nodetool()

    def _nodetool_client(self) -> NodetoolClient:
        if self._nodetool is None:
            self._nodetool = NodetoolHook(self.nodetool_conn_id).client
        return self._nodetool

    def _close_nodetool(self) -> None:
        """Stop the client's resident JVM, if it started one (a later command starts another)."""
        if self._nodetool is not None:
            self._nodetool.close()

    @property
    def _killed(self) -> threading.Event:
        """Set once the task is killed. Made on first use, not in the constructor: an Event holds a lock, and
        Airflow deep-copies operators (`dag.partial_subset`, clearing a task with its downstream). `setdefault`
        is one step under the GIL, so `on_kill` (from the SIGTERM handler, between any two bytecodes of
        `execute`) and `execute` always share one Event."""
        event: threading.Event | None = self.__dict__.get("_kill_event")
        if event is None:
            event = self.__dict__.setdefault("_kill_event", threading.Event())
        return event

    def on_kill(self) -> None:
        # Airflow 3.3 lets execute() go on after SIGTERM: flag it and stop our nodetool processes.
        self._killed.set()
        if self._nodetool is not None:
            self._nodetool.terminate_all()

    def _raise_if_killed(self) -> None:
        if self._killed.is_set():
            raise MigrationError("The task was killed; it stopped what it had started.", "Clear the task to resume.")
