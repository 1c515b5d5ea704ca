"""What the benchmarks against AutoRepair do to a local cluster: load tables at CL ALL, write missed rows with one
node down, and time AutoRepair's full-repair turns (`autorepair.py`, `side_by_side.py`).

Imported by those scripts with their own `sys.path` (include/, plugins/); nothing shipped imports it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cassandra import ConsistencyLevel, ReadTimeout, Unavailable
from cassandra.cluster import NoHostAvailable, Session
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import SimpleStatement
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.nodetool import NodetoolClient


@dataclass(frozen=True)
class Workload:
    """Keyspaces x tables of `(pk int, payload blob)` rows of `row_bytes` random bytes on `nodes`, replicated by
    NTS `replication`; `down` is the node stopped while the missed rows are written."""

    nodes: Sequence[str]
    down: str
    keyspaces: Sequence[str]
    tables: Sequence[str]
    replication: Mapping[str, int]
    row_bytes: int
    batch: int = 20_000
    concurrency: int = 96
    heap_mb: int = 512  # the down node's heap when it starts again

    def write(self, session: Any, rows: range, consistency: int, progress: Callable[[int], None] | None = None) -> None:
        done = 0
        for keyspace in self.keyspaces:
            for table in self.tables:
                insert = session.prepare(f"INSERT INTO {keyspace}.{table} (pk, payload) VALUES (?, ?)")
                insert.consistency_level = consistency
                for first in range(rows.start, rows.stop, self.batch):
                    # a fresh random payload per row: a repeated one compresses away on disk
                    last = min(rows.stop, first + self.batch)
                    batch = [(i, os.urandom(self.row_bytes)) for i in range(first, last)]
                    for ok, result in execute_concurrent_with_args(
                        session, insert, batch, concurrency=self.concurrency
                    ):
                        if not ok:
                            raise RuntimeError(result)
                    done += len(batch)
                    if progress:
                        progress(done)

    def load(self, rows: int, progress: Callable[[int], None] | None = None) -> None:
        """The keyspaces and tables created afresh, `rows` rows in each written at CL ALL (replicas in sync)."""
        replication = ", ".join(f"'{dc}': {factor}" for dc, factor in self.replication.items())
        with connect(list(self.nodes)) as session:
            for keyspace in self.keyspaces:
                session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
                session.execute(
                    f"CREATE KEYSPACE {keyspace} WITH replication = "
                    f"{{'class': 'NetworkTopologyStrategy', {replication}}}"
                )
                for table in self.tables:
                    session.execute(f"CREATE TABLE {keyspace}.{table} (pk int PRIMARY KEY, payload blob)")
            session.cluster.control_connection.wait_for_schema_agreement(wait_time=120)
            self.write(session, range(rows), ConsistencyLevel.ALL, progress)

    def flush(self, nodetool: NodetoolClient) -> None:
        for node in self.nodes:
            for keyspace in self.keyspaces:
                nodetool.flush(node, keyspace)

    def primary_range_repairs(self, nodetool: NodetoolClient) -> float:
        """Seconds for `nodetool repair -full -pr KS` on every node in turn, keyspace by keyspace (the reference)."""
        started = time.monotonic()
        for node in self.nodes:
            for keyspace in self.keyspaces:
                nodetool.checked(node, ["repair", "-full", "-pr", keyspace], timeout=7200)
            print(f"  -pr on {node} done at {time.monotonic() - started:.0f} s", flush=True)
        return time.monotonic() - started

    def drift(self, cluster: LocalCluster, nodetool: NodetoolClient, rows: range) -> None:
        """`rows` written at CL ONE with `down` stopped and hints off: the replicas out of sync, then flushed."""
        for node in self.nodes:
            nodetool.checked(node, ["disablehandoff"])
        cluster.stop(self.down)
        with connect([n for n in self.nodes if n != self.down]) as session:
            self.write(session, rows, ConsistencyLevel.ONE)
        cluster.start(self.down, heap_mb=self.heap_mb)
        for node in self.nodes:
            nodetool.checked(node, ["disablehandoff"])  # a restarted node has hints on again
        self.flush(nodetool)


def turns_finished_since(session: Session, since: datetime) -> set[str] | None:
    """The host ids whose full-repair turn started at or after `since` and has finished; None while no replica of
    the history answers (a node just restarted). system_distributed is SimpleStrategy: in a multi-DC cluster a
    row's replicas may all be in one DC, so the read is at ONE, not the driver's LOCAL_ONE."""
    query = SimpleStatement(
        "SELECT repair_type, host_id, repair_start_ts, repair_finish_ts FROM system_distributed.auto_repair_history",
        consistency_level=ConsistencyLevel.ONE,
    )
    try:
        rows = list(session.execute(query))
    except (NoHostAvailable, Unavailable, ReadTimeout) as error:
        print(f"  the repair history did not answer ({type(error).__name__}); asking again", flush=True)
        return None
    # AutoRepair gives a node it has no history of a stamp with start == finish when the type is switched on,
    # without repairing anything: a turn that repaired something finishes strictly after it starts.
    return {
        str(row.host_id)
        for row in rows
        if row.repair_type.lower() == "full"
        and row.repair_start_ts is not None
        and row.repair_finish_ts is not None
        and row.repair_start_ts.replace(tzinfo=UTC) >= since
        and row.repair_finish_ts > row.repair_start_ts
    }


def autorepair(nodetool: NodetoolClient, nodes: Sequence[str], timeout: float) -> float:
    """Seconds from switching AutoRepair's full repair on, on every node, until every node's turn finished; then
    switched off again."""
    since = datetime.now(UTC).replace(microsecond=0)
    started = time.monotonic()
    for node in nodes:
        nodetool.checked(node, ["setautorepairconfig", "-t", "full", "enabled", "true"])
    done: set[str] = set()
    # One session for the whole wait: a connection per 1 s poll (thousands in an hour-long row) added load to the
    # nodes under measurement that the ringward rows never had.
    with connect(list(nodes)) as session:
        while len(done) < len(nodes):
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"AutoRepair did not finish a full turn on every node within {timeout:.0f} s")
            time.sleep(1)
            # A node whose turn finished may start its next one at a later check (a short min_repair_interval), and
            # its history row then shows that turn: the nodes seen finished are kept across the polls.
            before = len(done)
            done |= turns_finished_since(session, since) or set()
            if len(done) != before:
                spent = time.monotonic() - started
                print(f"  AutoRepair: {len(done)}/{len(nodes)} turns finished at {spent:.0f} s", flush=True)
    seconds = time.monotonic() - started
    for node in nodes:
        nodetool.checked(node, ["setautorepairconfig", "-t", "full", "enabled", "false"])
    return seconds
