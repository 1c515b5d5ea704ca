"""The nightly repair's operators on a simulator: a `RepairRuntime` whose cluster, clock and sessions are the
simulator's (ring, catalog, in-memory ops store, nodetool answers, sessions in virtual time).

Installed only by a process that runs the DAG itself, around the run: `with use_runtime(SimulatedRuntime(sim)):
dag.test(...)` (benchmarks/fleet/airflow_night.py, tests/dags). The shipped operators never import this module,
and no connection, DAG file or setting reaches it. Imports Airflow (through the operators' runtime module):
kept out of the package's `__init__`, which stays pure Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ringward.repair import RepairCommand, SessionResult
from ringward.ring import Ring
from ringward_airflow.repair_runtime import FindingKeeper, RepairRuntime

from ringward_fleetsim.cluster import SimNodetool, VirtualSessionPool
from ringward_fleetsim.simulator import Simulator
from ringward_fleetsim.spec import SimCatalog

__all__ = ["SimulatedCassandra", "SimulatedRuntime"]


class SimulatedCassandra:
    """What the operators ask `RingwardCassandraHook`, answered by the simulator."""

    def __init__(self, simulator: Simulator) -> None:
        self._simulator = simulator

    def ring(self) -> Ring:
        return self._simulator.ring()

    def catalog(self) -> SimCatalog:
        return self._simulator.catalog()

    def ops_store(self) -> Any:
        return self._simulator.ops_store()

    def now(self) -> datetime:
        return self._simulator.clock.now()

    def close(self) -> None:
        return None


class _KeepingFindings:
    """The simulator's session pool; what a successful session's preview finds goes to `keep_finding` (a real
    preview's finding is kept by the operator's own session, which the simulator's sessions do not go through)."""

    def __init__(self, pool: VirtualSessionPool, nodetool: SimNodetool, keep_finding: FindingKeeper) -> None:
        self._pool = pool
        self._nodetool = nodetool
        self._keep = keep_finding

    def submit(self, command: RepairCommand) -> None:
        self._pool.submit(command)

    def close(self) -> None:
        self._pool.close()

    def wait(self, timeout: float) -> list[tuple[RepairCommand, SessionResult]]:
        done = self._pool.wait(timeout)
        for command, result in done:
            if result.succeeded:
                found: Mapping[str, int] = self._nodetool.out_of_sync(command)
                if found:
                    self._keep(command, found)
        return done


class SimulatedRuntime(RepairRuntime):
    """The repair operators' cluster, time and sessions, all the simulator's (the connections are not read)."""

    reads_node_state = False  # no cassandra.yaml and no SSTables: the configured disk capacity, no repaired share

    def __init__(self, simulator: Simulator) -> None:
        self.simulator = simulator

    def cassandra(self, conn_id: str) -> SimulatedCassandra:
        return SimulatedCassandra(self.simulator)

    def nodetool(self, conn_id: str) -> SimNodetool:
        return self.simulator.nodetool()

    def now(self) -> datetime:
        return self.simulator.clock.now()

    def sleep(self, seconds: float) -> None:
        self.simulator.clock.sleep(seconds)

    def monotonic(self) -> float:
        return self.simulator.clock.now().timestamp()

    def sessions(self, keep_finding: FindingKeeper) -> _KeepingFindings:
        nodetool = self.simulator.nodetool()
        return _KeepingFindings(nodetool.session_pool(), nodetool, keep_finding)

    def run_seconds(self, started: datetime) -> float:
        return (self.now() - started).total_seconds()
