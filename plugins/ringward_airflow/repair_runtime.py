"""Where the nightly repair's operators get their cluster, their time and their repair sessions from.

The shipped runtime (`RepairRuntime`): the connections' hooks (a Cassandra session, nodetool over JMX), the
wall clock, and each repair session one nodetool command in a worker thread (the executor's
`ThreadSessionPool`). Nothing in a connection, a DAG file or a setting selects another. Only a process that
runs the DAG itself (a benchmark, a DAG test) may put another in its place, with `use_runtime`: a cluster in
virtual time (tools/fleetsim), for instance.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from ringward.repair import RepairCommand, SessionPool

from ringward_airflow.hooks import NodetoolHook, RingwardCassandraHook

__all__ = ["FindingKeeper", "RepairRuntime", "current_runtime", "use_runtime"]

# What a preview session found out of sync ({"keyspace.table": ranges}), handed back to the operator to keep.
FindingKeeper = Callable[[RepairCommand, Mapping[str, int]], None]


class RepairRuntime:
    """The real cluster behind the connections, on the wall clock."""

    # Whether the run reads each node's own state besides nodetool's answers: cassandra.yaml's data disk size
    # (incremental repair's disk guard) and tablestats' repaired share at the end of the run.
    reads_node_state = True

    def cassandra(self, conn_id: str) -> Any:
        """Ring, catalog, ops store and the cluster's time (`RingwardCassandraHook`); `close()` after use."""
        return RingwardCassandraHook(conn_id)

    def nodetool(self, conn_id: str) -> Any:
        """The nodetool client of the connection (`NodetoolClient`); `close()` after use."""
        return NodetoolHook(conn_id).client

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def monotonic(self) -> float:
        """Seconds for intervals (how often the switches, the ring and the backlogs are read again)."""
        return time.monotonic()

    def sessions(self, keep_finding: FindingKeeper) -> SessionPool | None:
        """The pool the run's repair commands go to. None: the executor's threads, each running the operator's
        own session (which keeps what a preview finds itself; `keep_finding` is for a pool of its own)."""
        return None

    def run_seconds(self, started: datetime) -> float | None:
        """How long the run took on this runtime's clock, when that is not the DAG run's wall time (the report's
        ClusterRepairTimeInSec); None: the wall time."""
        return None


_LOCK = threading.Lock()
_current: RepairRuntime = RepairRuntime()


def current_runtime() -> RepairRuntime:
    """The process's runtime: the shipped one unless `use_runtime` is in effect."""
    return _current


@contextmanager
def use_runtime(runtime: RepairRuntime) -> Iterator[RepairRuntime]:
    """Run the repair operators of this process on `runtime` inside the block (the shipped one again after)."""
    global _current
    with _LOCK:
        previous, _current = _current, runtime
    try:
        yield runtime
    finally:
        with _LOCK:
            _current = previous
