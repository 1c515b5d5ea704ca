"""Adapters from what the repair runtime hands the operators to the night's ports (`ringward.repair._ports`): the
pure night functions never see a driver or Airflow. Only the cluster view needs one (it plans on the driver's
catalog and reads the nodes' settings through the session); the ops stores (`OpsStore`, and `MemoryOpsStore` on the
fleet simulator) are the night's stores as they are (tests/unit/ringward_cassandra/test_ops_store_protocols.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from ringward.repair import ClusterPlan, ClusterView, RepairConfig, RepairStatus, SegmentRecord
from ringward.ring import Ring
from ringward_cassandra.cluster_repairs import ClusterRepairPlan, plan_cluster, table_statuses
from ringward_cassandra.schema import data_disk_max_sizes

from ringward_airflow.hooks import RingwardCassandraHook

__all__ = ["CassandraSource", "ClusterAdapter"]


class CassandraSource(Protocol):
    """What the runtime's `cassandra(conn_id)` hands out (the hook, or the simulator's stand-in)."""

    def ring(self) -> Ring: ...

    def catalog(self) -> Any: ...

    @property
    def session(self) -> Any: ...

    def now(self) -> datetime: ...


class ClusterAdapter:
    """The cluster view of a Cassandra source: its ring and time, its catalog planned by `plan_cluster`."""

    def __init__(self, cassandra: CassandraSource) -> None:
        self.cassandra = cassandra

    def ring(self) -> Ring:
        return self.cassandra.ring()

    def now(self) -> datetime:
        return self.cassandra.now()

    def plan(self, ring: Ring, config: RepairConfig, excluded: Mapping[str, str]) -> ClusterRepairPlan:
        return plan_cluster(self.cassandra.catalog(), ring, config, excluded)

    def table_statuses(
        self, plan: ClusterPlan, records: Mapping[str, SegmentRecord], now: datetime, alarm_share: float
    ) -> list[RepairStatus]:
        if not isinstance(plan, ClusterRepairPlan):  # only this adapter's own plans come back to it
            plan = ClusterRepairPlan(plan.segments, (), plan.gc_grace, plan.excluded_keyspaces, plan.excluded_tables)
        return table_statuses(plan, records, now, alarm_share)

    def disk_max_sizes(self, addresses: Sequence[str]) -> dict[str, int | None]:
        return data_disk_max_sizes(self.cassandra.session, addresses)


def _conformance(cassandra: RingwardCassandraHook) -> ClusterView:
    """Never called: mypy checks here that the adapter of the hook fits the night's cluster port."""
    return ClusterAdapter(cassandra)
