"""Repair types as units of scheduling (CEP-37 `repair_type_overrides`), and what each type's sessions need.

Each type (full, incremental, preview, paxos) has its own history, found by `history_key`, so its cadence is
its own: a preview never makes a full or incremental repair wait. `select_due_by_type` decides per type what
is due tonight, with CEP-37's per-host controls (priority hosts first; force-repair hosts and nodes that
joined since the last run regardless of cadence). `repair_flags` is the nodetool repair options of a type,
checked against Cassandra 5.0's nodetool `Repair.java`. The incremental guard on tables with materialized views
or CDC takes the schema's features as arguments (the disk-headroom guard is `_headroom`): no IO here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from ringward.repair._config import RepairConfig, RepairType, RepairTypeSettings
from ringward.repair._run import DueSelection, GcGrace, select_due
from ringward.repair._segments import RepairUnit, Segment
from ringward.repair._state import DueRecord, SegmentRecord

__all__ = [
    "TableFeatures",
    "TypeDue",
    "coverage_view",
    "history_key",
    "incremental_repaired_shares",
    "incremental_skip_reason",
    "incremental_unit",
    "joined_nodes",
    "prioritised",
    "repair_flags",
    "select_due_by_type",
    "type_plan_id",
]


def history_key(segment_id: str, repair_type: str) -> str:
    """The key of a segment's history for one type: the segment id for full (the history written before
    repair types existed is full history), `id:type` for the others."""
    return segment_id if repair_type == "full" else f"{segment_id}:{repair_type}"


def type_plan_id(run_id: str, repair_type: str, replan: int = 0) -> str:
    """The id of the stored plan of one type in run `run_id` (`replan`: the n-th plan again on a new ring)."""
    return f"{run_id}#{repair_type}" + (f"#replan{replan}" if replan else "")


def repair_flags(repair_type: RepairType, settings: RepairTypeSettings) -> list[str]:
    """nodetool repair options of one type's session (names from Cassandra 5.0 nodetool Repair.java).

    full: `-full`. incremental: no flag (incremental is nodetool's default since 4.0). preview: `-full
    --preview` (PreviewKind.ALL: compares all data, streams nothing; `--preview` alone would compare only
    unrepaired data, `--validate` only repaired data). paxos: `--paxos-only` (no table data; without `-full`
    nodetool sends incremental=false for a paxos-only repair). Then `-seq` or `-dcpar` (parallel is the
    default and has no flag), `-local`, and `-j N` when N > 1.
    """
    flags = {
        "full": ["-full"],
        "incremental": [],
        "preview": ["-full", "--preview"],
        "paxos": ["--paxos-only"],
    }[repair_type]
    if settings.parallelism == "sequential":
        flags.append("-seq")
    elif settings.parallelism == "dc_parallel":
        flags.append("-dcpar")
    if settings.local_dc_only:
        flags.append("-local")
    if settings.job_threads > 1:
        flags += ["-j", str(settings.job_threads)]
    return flags


def joined_nodes(host_ids: Mapping[str, str], last_run_host_ids: Iterable[str]) -> frozenset[str]:
    """Addresses whose host id (`host_ids`: address -> host id, the ring now) the last run's record did not
    hold: they joined since. With no last run recorded nothing counts as joined (everything is due anyway)."""
    seen = set(last_run_host_ids)
    if not seen:
        return frozenset()
    return frozenset(address for address, host_id in host_ids.items() if host_id not in seen)


def prioritised(segments: Sequence[Segment], priority_hosts: Iterable[str]) -> list[Segment]:
    """`segments` with those replicated on a priority host first; order within each part is kept."""
    hosts = set(priority_hosts)
    if not hosts:
        return list(segments)
    first = [s for s in segments if not hosts.isdisjoint(s.replicas)]
    return first + [s for s in segments if hosts.isdisjoint(s.replicas)]


@dataclass(frozen=True)
class TypeDue:
    """One type's work tonight: the config its sessions run with (`config.for_type`) and what is due."""

    repair_type: RepairType
    config: RepairConfig
    selection: DueSelection
    forced: int  # segments due only because a replica is a force-repair host or joined since the last run


def select_due_by_type(
    segments: Sequence[Segment],
    records: Mapping[str, SegmentRecord | DueRecord] | Sequence[SegmentRecord | DueRecord | None],
    *,
    run_id: str,
    now: datetime,
    config: RepairConfig,
    joined: Iterable[str] = (),
    types: Iterable[RepairType] | None = None,
    gc_grace: GcGrace | None = None,
) -> list[TypeDue]:
    """What each enabled type repairs tonight, in the order a night runs them (`RUN_ORDER`: full, incremental,
    paxos, preview); `types` narrows them to those of the enabled types it names (their order is kept).

    `records` is keyed by `history_key` (whole records, or `DueRecord`s as the plan task reads them): a type's
    cadence reads only its own history. Or `records` is one type's history by position (a sequence: the i-th is
    `segments[i]`'s record of that type, or None; as `SegmentHistory.due_records_in_order` reads it): `types` must
    then name exactly one type. A segment with a replica
    in `force_repair_hosts` or in `joined` (when `repair_new_nodes`) is due whatever its cadence, unless its
    retries in this run are used up (a segment held back behind the backlog, `backlog_first`, too). Due segments
    on `priority_hosts` come first. `gc_grace`: the plan's `{keyspace: {table: seconds}}` (`select_due`).
    """
    forced_hosts = set(config.force_repair_hosts) | (set(joined) if config.repair_new_nodes else set())
    if not config.enabled:  # the kill switch wins over every forced host
        forced_hosts = set()
    plans: list[TypeDue] = []
    wanted = None if types is None else set(types)
    if not isinstance(records, Mapping) and (wanted is None or len(wanted) != 1):
        raise ValueError("records by position are one type's: name that type alone in `types`")
    for kind in config.enabled_types:
        if wanted is not None and kind not in wanted:
            continue
        typed = config.for_type(kind)
        # Full history is keyed by the segment id itself (`history_key`), and `select_due` only looks the planned
        # segments up: the records as they are. Other types' are re-keyed to the segment ids. Records by position
        # are the type's own already.
        own: Mapping[str, SegmentRecord | DueRecord] | Sequence[SegmentRecord | DueRecord | None] = records
        if kind != "full" and isinstance(records, Mapping):
            own = {s.segment_id: r for s in segments if (r := records.get(history_key(s.segment_id, kind))) is not None}
        selection = select_due(segments, own, run_id=run_id, now=now, config=typed, gc_grace=gc_grace)
        forced = [s for s in selection.not_due if not forced_hosts.isdisjoint(s.replicas)] if forced_hosts else []
        if forced:
            forced_ids = {s.segment_id for s in forced}
            selection = DueSelection(
                (*forced, *selection.due),
                tuple(s for s in selection.not_due if s.segment_id not in forced_ids),
                selection.exhausted,
                tuple(s for s in selection.held_back if s.segment_id not in forced_ids),
            )
        if config.priority_hosts:
            selection = DueSelection(
                tuple(prioritised(selection.due, config.priority_hosts)),
                selection.not_due,
                selection.exhausted,
                selection.held_back,
            )
        plans.append(TypeDue(kind, typed, selection, len(forced)))
    return plans


@dataclass(frozen=True)
class TableFeatures:
    """What makes a table unfit for incremental repair, as the schema says."""

    materialized_views: tuple[str, ...] = ()
    cdc: bool = False


def incremental_skip_reason(table: str, features: TableFeatures) -> str | None:
    """Why `table` gets no incremental repair (CEP-37 skips the same tables), or None.

    Streams of a table with materialized views or CDC go through the write path, not as SSTables, so the
    repaired/unrepaired split that incremental repair keeps cannot hold; repair such tables with `full`."""
    if features.materialized_views:
        views = ", ".join(features.materialized_views)
        return f"{table} has materialized views ({views}): incremental repair skipped; the full type repairs it"
    if features.cdc:
        return f"{table} has CDC enabled: incremental repair skipped; the full type repairs it"
    return None


def incremental_unit(
    unit: RepairUnit, all_tables: Sequence[str], features: Mapping[str, TableFeatures]
) -> tuple[RepairUnit | None, list[str]]:
    """`unit` as incremental repair may take it: without the tables `incremental_skip_reason` refuses (named
    explicitly then), or None when none is left; with the reasons of each table left out. `features` is keyed
    by "keyspace.table"; a table missing from it has neither views nor CDC."""
    tables = unit.tables or tuple(sorted(set(all_tables)))
    reasons: list[str] = []
    kept: list[str] = []
    for table in tables:
        name = f"{unit.keyspace}.{table}"
        reason = incremental_skip_reason(name, features.get(name, TableFeatures()))
        if reason is None:
            kept.append(table)
        else:
            reasons.append(reason)
    if not reasons:
        return RepairUnit(unit.keyspace, unit.tables, "incremental", unit.nodes), []
    if not kept:
        return None, reasons
    return RepairUnit(unit.keyspace, tuple(kept), "incremental", unit.nodes), reasons


def incremental_repaired_shares(per_node: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float | int]]:
    """Per "keyspace.table", its repaired share across the nodes (`per_node`: node -> table -> the node's "Percent
    repaired", the share of its data of the table that incremental repair marked repaired): `repaired` the mean
    over the nodes that reported the table, `lowest` the least repaired node's, `nodes` how many reported it.
    The rest (100 - repaired) is unrepaired: written since the last incremental session, or never repaired."""
    by_table: dict[str, list[float]] = {}
    for shares in per_node.values():
        for table, share in shares.items():
            by_table.setdefault(table, []).append(share)
    return {
        table: {"repaired": round(sum(shares) / len(shares), 1), "lowest": min(shares), "nodes": len(shares)}
        for table, shares in sorted(by_table.items())
    }


def coverage_view(record: SegmentRecord) -> SegmentRecord:
    """A record as a type's coverage reads it. The status counts `last_full_success`, which only a full repair
    moves; for the other types it is the type's own last success, so each type's coverage is the share of
    ranges that type repaired (a preview: compared) within gc_grace. A full record is left as it is."""
    if record.repair_type == "full":
        return record
    return replace(record, last_full_success=record.last_success)
