"""Adapters from what the repair runtime hands the operators (a Cassandra hook or the simulator's stand-in, an ops
store) to the night's ports (`ringward.repair._ports`): the pure night functions never see a driver or Airflow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from ringward.migration_storage import Lease, LeaseStorage
from ringward.repair import (
    ClusterPlan,
    ClusterView,
    PlanStore,
    PreviewFinding,
    PreviewStorage,
    RecordUpdate,
    RepairCommand,
    RepairConfig,
    RepairHistoryRow,
    RepairHistoryStorage,
    RepairRunRow,
    RepairRunStorage,
    RepairStatus,
    ReportStore,
    RunPlanStorage,
    RunProgressStorage,
    RunStore,
    Segment,
    SegmentRecord,
    SwitchEvent,
    SwitchStorage,
)
from ringward.ring import Ring
from ringward_cassandra.cluster_repairs import ClusterRepairPlan, plan_cluster, table_statuses
from ringward_cassandra.ops.layout import history_bucket
from ringward_cassandra.ops_store import OpsStore
from ringward_cassandra.schema import data_disk_max_sizes

from ringward_airflow.hooks import RingwardCassandraHook

if TYPE_CHECKING:  # the in-memory store is the simulator's and the tests': only mypy reads it here
    from ringward_cassandra.memory_ops_store import MemoryOpsStore

__all__ = ["CassandraSource", "ClusterAdapter", "OpsStoreLike", "StoreAdapter"]


class OpsStoreLike(
    RepairHistoryStorage, RunPlanStorage, RunProgressStorage, RepairRunStorage, PreviewStorage, LeaseStorage,
    SwitchStorage, Protocol,
):  # fmt: skip
    """An ops store of every record kind the night uses, as `OpsStore` and `MemoryOpsStore` both are."""


class StoreAdapter:
    """An ops store as the night's store ports: the history read by segment from the partitions their ranges fall
    in (never a scan of the whole history table: at fleet size that is millions of rows across every node)."""

    def __init__(self, store: OpsStoreLike) -> None:
        self.store = store

    def segment_records(self, segments: Sequence[Segment], repair_type: str) -> dict[str, SegmentRecord]:
        units: dict[tuple[str, tuple[str, ...]], tuple[set[int], dict[tuple[int, int], str]]] = {}
        for segment in segments:
            buckets, ids = units.setdefault((segment.keyspace, segment.tables), (set(), {}))
            buckets.add(history_bucket(segment.range.start))
            ids[segment.range.start, segment.range.end] = segment.segment_id
        # The store's history arguments for one type: none for full (the history every store has).
        type_args = {} if repair_type == "full" else {"repair_type": repair_type}
        records: dict[str, SegmentRecord] = {}
        for (keyspace, tables), (buckets, ids) in units.items():
            records.update(self.store.records_of(keyspace, tables, buckets, ids, **type_args))
        return records

    def repair_history(self, keyspace: str | None = None, repair_type: str = "full") -> list[RepairHistoryRow]:
        if repair_type == "full":
            return self.store.repair_history(keyspace)
        return self.store.repair_history(keyspace, repair_type=repair_type)

    def record_repairs(self, updates: Iterable[RecordUpdate], ttl_seconds: int | None = None) -> None:
        self.store.record_repairs(updates, ttl_seconds=ttl_seconds)

    def save_run_plan(self, run_id: str, chunks: Iterable[Sequence[str]], ttl_seconds: int | None = None) -> int:
        return self.store.save_run_plan(run_id, chunks, ttl_seconds=ttl_seconds)

    def run_plan_chunk(self, run_id: str, chunk: int) -> list[str]:
        return self.store.run_plan_chunk(run_id, chunk)

    def drop_run_plan(self, run_id: str, chunks: int) -> None:
        self.store.drop_run_plan(run_id, chunks)

    def record_run_progress(self, run_id: str, progress: Mapping[str, Any]) -> None:
        self.store.record_run_progress(run_id, progress)

    def record_repair_run(self, run_id: str, state: str, summary: dict[str, object], config: dict[str, object]) -> None:
        self.store.record_repair_run(run_id, state, summary, config)

    def latest_repair_run(self) -> RepairRunRow | None:
        return self.store.latest_repair_run()

    def preview_findings(self, keyspace: str | None = None) -> list[PreviewFinding]:
        return self.store.preview_findings(keyspace)

    def leased_keyspaces(self) -> dict[str, Lease]:
        return self.store.leased_keyspaces()

    def switch_events(self, limit: int = 20) -> list[SwitchEvent]:
        return self.store.switch_events(limit=limit)

    def keep_preview(
        self, command: RepairCommand, keyspace: str, table: str, out_of_sync_ranges: int, found_at: datetime,
        run_id: str, ttl_seconds: int | None = None,
    ) -> None:  # fmt: skip
        finding = PreviewFinding(keyspace, table, tuple(command.ranges), out_of_sync_ranges, found_at, run_id,
                                 command.coordinator)  # fmt: skip
        self.store.record_preview(finding, ttl_seconds=ttl_seconds)


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


def _conformance(
    store: OpsStore, memory: MemoryOpsStore, cassandra: RingwardCassandraHook
) -> tuple[PlanStore, ReportStore, RunStore, ClusterView, OpsStoreLike]:
    """Never called: mypy checks here that both ops stores fit `OpsStoreLike` and the adapters fit the ports."""
    adapted = StoreAdapter(store)
    return adapted, adapted, adapted, ClusterAdapter(cassandra), memory
