"""What one night hands from task to task (XCom) and keeps in ringward_ops: frozen records, each with
`to_json` (the JSON value as it has always been written, key for key) and `from_json` (which also reads the
shapes written before a record had a field: a plan of one type, a repair result without `run_seconds`).

- `NightPlanReference`: the plan task's return value, a few hundred bytes whatever the ring: per type (in run
  order) its stored plan id, chunk count and due count.
- `NightPlan`: the plan summary (XCom key `summary`): counts, skipped keyspaces and tables, the effective config.
- `NightOutcome`: the repair task's return value: segment counts per type, why it stopped, failures.
- `NightReport`: the report task's return value and ringward_ops.repair_runs' `summary`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ringward.errors import ConfigurationError
from ringward.repair._config import REPAIR_TYPES, RepairType
from ringward.repair._run import RunState

__all__ = ["NightOutcome", "NightPlan", "NightPlanReference", "NightReport", "TypePlan", "TypePlanRef", "TypeReport"]

_KINDS: dict[str, RepairType] = {kind: kind for kind in REPAIR_TYPES}


def repair_type_of(name: object) -> RepairType:
    """`name` as a repair type; anything else names the problem and the fix."""
    kind = _KINDS.get(str(name))
    if kind is None:
        raise ConfigurationError(
            f"{name!r} is not a repair type (a plan or report of another ringward version?).",
            f"Use one of {', '.join(REPAIR_TYPES)}; clear the DAG run from the plan task to plan again.",
        )
    return kind


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float | str) and value != "" else 0


def _dict(value: object) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class TypePlanRef:
    """One type's stored plan, as the repair task finds it: ringward_ops.repair_plan partitions `plan_id`."""

    repair_type: RepairType
    plan_id: str
    chunks: int
    due: int


@dataclass(frozen=True)
class NightPlanReference:
    """The plan task's XCom: the stored plans of the night (`types`, in run order) and their totals.

    `types` is None for a reference written before several types ran in one night: one plan of the run's type
    under the run id (`type_plans`)."""

    run_id: str
    chunks: int
    due: int
    fingerprint: str | None
    types: tuple[TypePlanRef, ...] | None

    def type_plans(self, default_type: RepairType) -> tuple[TypePlanRef, ...]:
        """The stored plans in run order; a reference without types is one plan of `default_type`."""
        if self.types is None:
            return (TypePlanRef(default_type, self.run_id, self.chunks, self.due),)
        return self.types

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {"run_id": self.run_id, "chunks": self.chunks, "due": self.due,
                                 "fingerprint": self.fingerprint}  # fmt: skip
        if self.types is not None:
            value["types"] = [[t.repair_type, t.plan_id, t.chunks, t.due] for t in self.types]
        return value

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> NightPlanReference:
        types = value.get("types")
        refs = None
        if types is not None:
            refs = tuple(TypePlanRef(repair_type_of(kind), str(plan_id), int(chunks), int(due))
                         for kind, plan_id, chunks, due in types)  # fmt: skip
        fingerprint = value.get("fingerprint")
        return cls(str(value.get("run_id") or ""), _int(value.get("chunks")), _int(value.get("due")),
                   None if fingerprint is None else str(fingerprint), refs)  # fmt: skip


@dataclass(frozen=True)
class TypePlan:
    """One type's part of the plan summary."""

    plan_id: str
    chunks: int
    due: int
    not_due: int
    exhausted: int
    forced: int  # due only because a replica is a force-repair host or joined since the last run
    segments: int

    def to_json(self) -> dict[str, Any]:
        return {"plan_id": self.plan_id, "chunks": self.chunks, "due": self.due, "not_due": self.not_due,
                "exhausted": self.exhausted, "forced": self.forced, "segments": self.segments}  # fmt: skip

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> TypePlan:
        return cls(str(value.get("plan_id") or ""), *(_int(value.get(name)) for name in _TYPE_PLAN_COUNTS))


_TYPE_PLAN_COUNTS = ("chunks", "due", "not_due", "exhausted", "forced", "segments")


@dataclass(frozen=True)
class NightPlan:
    """The plan summary (XCom key `summary`). Counts are of segment x type: a segment planned for two types counts
    twice. `types` is empty for a summary written before several types ran in one night (`type_plans`)."""

    run_id: str
    enabled: bool
    fingerprint: str | None
    parallelism: int
    segments: int
    due: int
    chunks: int
    exhausted: int
    not_due: int
    skipped_ranges: int
    skipped_keyspaces: Mapping[str, str]
    keyspaces: tuple[str, ...]
    skipped_tables: Mapping[str, str]
    down_nodes: tuple[str, ...]
    planning_cpu_seconds: float
    config: Mapping[str, Any]
    types: Mapping[str, TypePlan]
    host_ids: Mapping[str, str]
    forced: int
    repair_type: str = "full"  # the night's types, comma-separated in run order

    def reference(self) -> NightPlanReference:
        """What the plan task returns (XCom): the stored plans in run order with the totals, not the summary."""
        types = tuple(TypePlanRef(repair_type_of(kind), t.plan_id, t.chunks, t.due) for kind, t in self.types.items())
        return NightPlanReference(self.run_id, self.chunks, self.due, self.fingerprint, types)

    def type_plans(self, default_type: str) -> dict[str, TypePlan]:
        """Each type's part; a summary without types is one part of `default_type` (the whole plan)."""
        if self.types:
            return dict(self.types)
        return {default_type: TypePlan(self.run_id, self.chunks, self.due, self.not_due, self.exhausted,
                                       self.forced, self.segments)}  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "enabled": self.enabled,
            "fingerprint": self.fingerprint,
            "parallelism": self.parallelism,
            "segments": self.segments,
            "due": self.due,
            "chunks": self.chunks,
            "exhausted": self.exhausted,
            "not_due": self.not_due,
            "skipped_ranges": self.skipped_ranges,
            "skipped_keyspaces": dict(self.skipped_keyspaces),
            "keyspaces": list(self.keyspaces),
            "skipped_tables": dict(self.skipped_tables),
            "down_nodes": list(self.down_nodes),
            "planning_cpu_seconds": self.planning_cpu_seconds,
            "config": dict(self.config),
            "repair_type": self.repair_type,
            "repair_types": list(self.types),
            "types": {kind: entry.to_json() for kind, entry in self.types.items()},
            "host_ids": dict(self.host_ids),
            "forced": self.forced,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> NightPlan:
        fingerprint = value.get("fingerprint")
        return cls(
            run_id=str(value.get("run_id") or ""),
            enabled=bool(value.get("enabled", True)),
            fingerprint=None if fingerprint is None else str(fingerprint),
            parallelism=_int(value.get("parallelism")),
            segments=_int(value.get("segments")),
            due=_int(value.get("due")),
            chunks=_int(value.get("chunks")),
            exhausted=_int(value.get("exhausted")),
            not_due=_int(value.get("not_due")),
            skipped_ranges=_int(value.get("skipped_ranges")),
            skipped_keyspaces={str(k): str(v) for k, v in _dict(value.get("skipped_keyspaces")).items()},
            keyspaces=tuple(str(k) for k in value.get("keyspaces") or ()),
            skipped_tables={str(k): str(v) for k, v in _dict(value.get("skipped_tables")).items()},
            down_nodes=tuple(str(n) for n in value.get("down_nodes") or ()),
            planning_cpu_seconds=float(value.get("planning_cpu_seconds") or 0.0),
            config=_dict(value.get("config")),
            types={str(kind): TypePlan.from_json(entry) for kind, entry in _dict(value.get("types")).items()},
            host_ids={str(k): str(v) for k, v in _dict(value.get("host_ids")).items()},
            forced=_int(value.get("forced")),
            repair_type=str(value.get("repair_type") or "full"),
        )


@dataclass(frozen=True)
class NightOutcome:
    """The repair task's result: segment states counted (`counts`, and per type), why it stopped early (None: it
    did not), the first 100 failed segments and how many failed, how often the ring changed under it, the run's
    duration on the runtime's clock (None: the DAG run's wall time) and the incremental tables' repaired shares."""

    counts: Mapping[str, int]
    types: Mapping[str, Mapping[str, int]]
    stop_reason: str | None
    failed: tuple[str, ...]
    failed_count: int
    replans: int
    run_seconds: float | None
    repaired_shares: Mapping[str, Mapping[str, float | int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "types": {kind: dict(c) for kind, c in self.types.items()},
                "stop_reason": self.stop_reason, "failed": list(self.failed), "failed_count": self.failed_count,
                "replans": self.replans, "run_seconds": self.run_seconds,
                "repaired_shares": {table: dict(share) for table, share in self.repaired_shares.items()}}  # fmt: skip

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> NightOutcome:
        seconds = value.get("run_seconds")
        reason = value.get("stop_reason")
        return cls(
            counts={str(k): _int(v) for k, v in _dict(value.get("counts")).items()},
            types={
                str(kind): {str(state): _int(n) for state, n in _dict(counts).items()}
                for kind, counts in _dict(value.get("types")).items()
            },
            stop_reason=None if reason is None else str(reason),
            failed=tuple(str(f) for f in value.get("failed") or ()),
            failed_count=_int(value.get("failed_count")),
            replans=_int(value.get("replans")),
            run_seconds=None if seconds is None else float(seconds),
            repaired_shares={str(t): dict(s) for t, s in _dict(value.get("repaired_shares")).items()},
        )


@dataclass(frozen=True)
class TypeReport:
    """One type's part of the report: its state and CEP-37-named gauges, each table's coverage by this type (a
    preview's is of ranges compared: `previewed`, never `repaired`), a preview's kept findings (None: unreadable
    when reported) and the incremental tables' repaired shares."""

    repair_type: RepairType
    state: RunState
    metrics: Mapping[str, int]
    coverage: Mapping[str, str]
    out_of_sync_findings: int | None = None  # preview only
    repaired_share: Mapping[str, Mapping[str, float | int]] = field(default_factory=dict)  # incremental only

    def to_json(self) -> dict[str, Any]:
        coverage = "previewed" if self.repair_type == "preview" else "repaired"  # a preview compares, never repairs
        value: dict[str, Any] = {
            "state": self.state.value,
            "metrics": dict(self.metrics),
            coverage: dict(self.coverage),
        }
        if self.repair_type == "preview":
            value["out_of_sync_findings"] = self.out_of_sync_findings
        if self.repair_type == "incremental":
            value["repaired_share"] = {table: dict(share) for table, share in self.repaired_share.items()}
        return value

    @classmethod
    def from_json(cls, repair_type: str, value: Mapping[str, Any]) -> TypeReport:
        kind = repair_type_of(repair_type)
        findings = value.get("out_of_sync_findings")
        return cls(
            kind,
            RunState(value.get("state", RunState.DONE.value)),
            {str(k): _int(v) for k, v in _dict(value.get("metrics")).items()},
            {str(k): str(v) for k, v in _dict(value.get("previewed" if kind == "preview" else "repaired")).items()},
            None if findings is None else _int(findings),
            {str(t): dict(s) for t, s in _dict(value.get("repaired_share")).items()},
        )


@dataclass(frozen=True)
class NightReport:
    """The night's report: its state (DISABLED when the kill switch was off from the start), the repairs' gauges
    (a preview never counts as a repair), each type's part, and each planned table's full-repair coverage."""

    run_id: str
    state: RunState
    metrics: Mapping[str, int]
    skipped_keyspaces: Mapping[str, str]
    repair_type: str
    types: Mapping[str, TypeReport]
    host_ids: Mapping[str, str]
    tables: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "state": self.state.value,
            "metrics": dict(self.metrics),
            "skipped_keyspaces": dict(self.skipped_keyspaces),
            "repair_type": self.repair_type,
            "types": {kind: entry.to_json() for kind, entry in self.types.items()},
            "host_ids": dict(self.host_ids),
            "tables": dict(self.tables),
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> NightReport:
        return cls(
            run_id=str(value.get("run_id") or ""),
            state=RunState(value.get("state", RunState.DONE.value)),
            metrics={str(k): _int(v) for k, v in _dict(value.get("metrics")).items()},
            skipped_keyspaces={str(k): str(v) for k, v in _dict(value.get("skipped_keyspaces")).items()},
            repair_type=str(value.get("repair_type") or "full"),
            types={str(k): TypeReport.from_json(str(k), v) for k, v in _dict(value.get("types")).items()},
            host_ids={str(k): str(v) for k, v in _dict(value.get("host_ids")).items()},
            tables={str(k): str(v) for k, v in _dict(value.get("tables")).items()},
        )
