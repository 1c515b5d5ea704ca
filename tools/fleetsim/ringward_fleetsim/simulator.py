"""One simulated cluster: ring, catalog, ops store, nodetool and virtual clock. `simulator_for(path)` gives the
process one per spec file; `ringward_fleetsim.runtime.SimulatedRuntime` puts it under the real nightly DAG's
operators in the process that runs the DAG (benchmarks/fleet/airflow_night.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ringward.ring import Ring

from ringward_fleetsim.cluster import DurationModel, SimCluster, SimNodetool, VirtualClock
from ringward_fleetsim.spec import FleetSpec, SimCatalog

if TYPE_CHECKING:
    from ringward_cassandra.memory_ops_store import MemoryOpsStore

__all__ = ["Simulator", "simulator_for"]


class Simulator:
    def __init__(self, spec: FleetSpec, model: DurationModel | None = None, record: bool = False) -> None:
        self.spec = spec
        self.cluster = SimCluster(spec, model, record=record)
        self.clock: VirtualClock = self.cluster.clock
        self._nodetool = SimNodetool(self.cluster)
        self._catalogs: dict[int, SimCatalog] = {}
        self._ops_store: MemoryOpsStore | None = None

    def ring(self) -> Ring:
        """The ring at the clock's now (joined nodes included from their join time)."""
        return self.cluster.ring()

    def catalog(self) -> SimCatalog:
        """Schema, replication, size estimates (of the current ring's ranges) and back-pressure."""
        ring = self.ring()
        key = len(ring.nodes)
        if key not in self._catalogs:
            self._catalogs[key] = (
                self.cluster.catalog if ring is self.cluster.initial_ring else SimCatalog(self.spec, ring)
            )
        return self._catalogs[key]

    def nodetool(self) -> SimNodetool:
        return self._nodetool

    def ops_store(self) -> MemoryOpsStore:
        """A MemoryOpsStore on the virtual clock (imported here: it lives with the Cassandra plugins)."""
        if self._ops_store is None:
            from ringward_cassandra.memory_ops_store import MemoryOpsStore

            self._ops_store = MemoryOpsStore(clock=self.clock.now)
        return self._ops_store


_SIMULATORS: dict[str, Simulator] = {}
_LOCK = threading.Lock()


def simulator_for(path: str) -> Simulator:
    """The process's simulator of the spec at `path` (built once)."""
    key = str(Path(path).resolve())
    with _LOCK:
        if key not in _SIMULATORS:
            _SIMULATORS[key] = Simulator(FleetSpec.load(key))
        return _SIMULATORS[key]
