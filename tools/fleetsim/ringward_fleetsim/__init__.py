"""Fleet simulator: a synthetic Cassandra cluster in virtual time, for ringward's nightly repair and the
two peers modelled by their rules (CEP-37 AutoRepair, Reaper), and the lower bound no scheduler beats.
Pure Python: ringward.* only, no Airflow, driver or Spark (`ringward_fleetsim.runtime`, which puts a
simulator under the DAG's operators, imports Airflow: import it by name). For benchmarks and tests only: it
lives in tools/fleetsim, off the path of anything shipped."""

from __future__ import annotations

from ringward_fleetsim.anchors import SchedulerResult, run_cep37, run_reaper
from ringward_fleetsim.bound import LowerBound, lower_bound
from ringward_fleetsim.cluster import (
    EPOCH,
    DurationModel,
    SessionRecord,
    SimCluster,
    SimNodetool,
    VirtualClock,
    VirtualSessionPool,
)
from ringward_fleetsim.simulator import Simulator, simulator_for
from ringward_fleetsim.spec import Faults, FleetSpec, NodeDown, NodeJoin, SimCatalog, TableSpec

__all__ = [
    "EPOCH",
    "DurationModel",
    "Faults",
    "FleetSpec",
    "LowerBound",
    "NodeDown",
    "NodeJoin",
    "SchedulerResult",
    "SessionRecord",
    "SimCatalog",
    "SimCluster",
    "SimNodetool",
    "Simulator",
    "TableSpec",
    "VirtualClock",
    "VirtualSessionPool",
    "lower_bound",
    "run_cep37",
    "run_reaper",
    "simulator_for",
]
