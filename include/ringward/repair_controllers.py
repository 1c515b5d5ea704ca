"""Other repair controllers during a migration: Cassandra's own AutoRepair (CEP-37) and Cassandra Reaper.

A controller that repairs the keyspace while a migration runs (incremental repair above all) interferes with
the migration's full repair of the affected ranges and its journal. The migration turns them off for its
duration and restores exactly what it found afterwards.

AutoRepair is configured per node and per repair type (`full`, `incremental`, `preview_repaired`);
`nodetool setautorepairconfig -t <type> enabled false` changes one node only and is not persisted (a restart
reads cassandra.yaml again). So the pause reads every node's settings first, turns off each enabled type on
each node, and the restore sets back on each node each type whose setting differs from what was read.

Reaper schedules are paused per schedule of the keyspace (state ACTIVE -> PAUSED) and only those the pause
paused are resumed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ringward.errors import ClusterError
from ringward.markdown import markdown_escape

__all__ = [
    "AUTO_REPAIR_TYPES",
    "AutoRepairChange",
    "AutoRepairSettings",
    "ReaperSchedule",
    "autorepair_pause_changes",
    "autorepair_restore_changes",
    "describe_autorepair",
    "parse_autorepair_config",
    "reaper_schedules_to_pause",
    "reaper_schedules_to_resume",
    "settings_from_json",
    "settings_to_json",
]

AUTO_REPAIR_TYPES = ("full", "incremental", "preview_repaired")
# GetAutoRepairConfig prints this when the node runs without -Dcassandra.autorepair.enable=true or with
# auto_repair.enabled false; SetAutoRepairConfig says "not supported or not enabled".
_NOT_ENABLED = re.compile(r"Auto-repair is not (?:supported or not )?enabled", re.IGNORECASE)
_TYPE_HEADER = re.compile(r"^configuration for repair_type:\s*(\S+)\s*$")
_SETTING = re.compile(r"^\s+([A-Za-z0-9_.]+):\s*(.*?)\s*$")


@dataclass(frozen=True)
class AutoRepairSettings:
    """What `nodetool getautorepairconfig` reports on one node: whether AutoRepair runs at all, and which
    repair types it schedules."""

    node: str
    available: bool
    enabled: Mapping[str, bool] = field(default_factory=dict)
    # Why the node was not asked (e.g. its Cassandra predates AutoRepair); "" when it was.
    skipped_because: str = ""

    @property
    def active_types(self) -> tuple[str, ...]:
        """Repair types AutoRepair schedules on this node, in Cassandra's order."""
        if not self.available:
            return ()
        return tuple(kind for kind in _ordered(self.enabled) if self.enabled[kind])


@dataclass(frozen=True)
class AutoRepairChange:
    """One `nodetool setautorepairconfig -t <repair_type> enabled <enabled>` on `node`."""

    node: str
    repair_type: str
    enabled: bool

    @property
    def nodetool_args(self) -> tuple[str, ...]:
        return ("setautorepairconfig", "-t", self.repair_type, "enabled", "true" if self.enabled else "false")

    def __str__(self) -> str:
        return f"{self.node}: {self.repair_type} {'on' if self.enabled else 'off'}"


def parse_autorepair_config(node: str, output: str) -> AutoRepairSettings:
    """The settings in `nodetool getautorepairconfig` output (Cassandra 5.0.9's format)."""
    if _NOT_ENABLED.search(output):
        return AutoRepairSettings(node, available=False)
    enabled: dict[str, bool] = {}
    current: str | None = None
    for line in output.splitlines():
        header = _TYPE_HEADER.match(line)
        if header:
            current = header.group(1).lower()
            continue
        setting = _SETTING.match(line)
        if current is not None and setting and setting.group(1) == "enabled":
            enabled[current] = _boolean(node, current, setting.group(2))
    if not enabled:
        raise ClusterError(
            f"nodetool getautorepairconfig on {node} printed no repair type settings: {output.strip()[:300]!r}.",
            f"Run `nodetool getautorepairconfig` on {node} by hand; ringward reads Cassandra 5.0.9's format "
            "(`configuration for repair_type: <type>` then `enabled: true|false`).",
        )
    return AutoRepairSettings(node, available=True, enabled=enabled)


def autorepair_pause_changes(settings: Iterable[AutoRepairSettings]) -> list[AutoRepairChange]:
    """Turn off every repair type AutoRepair schedules, on every node that schedules one."""
    return [AutoRepairChange(s.node, kind, False) for s in _by_node(settings) for kind in s.active_types]


def autorepair_restore_changes(
    saved: Iterable[AutoRepairSettings], current: Mapping[str, AutoRepairSettings]
) -> list[AutoRepairChange]:
    """Set back, node by node, each repair type whose setting differs from the one read before the pause.

    `current` maps node -> its settings now. A node read before but missing now is refused by name: its
    settings cannot be restored, and saying nothing would leave AutoRepair off there for good.
    """
    changes = []
    missing = []
    for before in _by_node(saved):
        if not before.available:
            continue
        now = current.get(before.node)
        if now is None:
            missing.append(before.node)
            continue
        if not now.available:
            # The node restarted without AutoRepair (or it was turned off in cassandra.yaml): nothing to set.
            continue
        for kind in _ordered(before.enabled):
            if now.enabled.get(kind) != before.enabled[kind]:
                changes.append(AutoRepairChange(before.node, kind, before.enabled[kind]))
    if missing:
        raise ClusterError(
            f"AutoRepair settings of {', '.join(missing)} cannot be restored: the node did not answer.",
            "Bring the node up and clear the `restore_repair_controllers` task, or on the node run "
            "`nodetool setautorepairconfig -t <type> enabled true` for each type the pause turned off (logged "
            "by the `pause_repair_controllers` task).",
        )
    return changes


def describe_autorepair(settings: Sequence[AutoRepairSettings]) -> str:
    """One Markdown paragraph for the approval: where AutoRepair runs and what the migration does about it."""
    active = [s for s in _by_node(settings) if s.active_types]
    reasons = sorted({s.skipped_because for s in settings if s.skipped_because})
    if not active and reasons:
        return f"**AutoRepair** (CEP-37): skipped: {markdown_escape('; '.join(reasons))}; nothing to pause."
    if not active:
        return "**AutoRepair** (CEP-37): not scheduling repairs on any node; nothing to pause."
    lines = [
        f"**AutoRepair** (CEP-37) schedules repairs on {len(active)} of {len(settings)} node(s); the migration "
        "turns them off on every node after approval, before the first ALTER, and restores these settings at "
        "the end (also when the run fails):"
    ]
    lines += [f"- {markdown_escape(s.node)}: {', '.join(map(markdown_escape, s.active_types))}" for s in active]
    return "\n".join(lines)


def settings_to_json(settings: Iterable[AutoRepairSettings]) -> list[dict[str, object]]:
    return [{"node": s.node, "available": s.available, "enabled": dict(s.enabled)} for s in settings]


def settings_from_json(rows: Iterable[Mapping[str, object]]) -> list[AutoRepairSettings]:
    result = []
    for row in rows:
        enabled = row.get("enabled") or {}
        assert isinstance(enabled, Mapping)
        result.append(
            AutoRepairSettings(str(row["node"]), bool(row["available"]), {str(k): bool(v) for k, v in enabled.items()})
        )
    return result


# -- Reaper -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReaperSchedule:
    """A Reaper repair schedule as its REST API lists it (`GET /repair_schedule`)."""

    id: str
    keyspace: str
    cluster: str
    state: str  # ACTIVE, PAUSED, DELETED

    @classmethod
    def from_json(cls, row: Mapping[str, object]) -> ReaperSchedule:
        return cls(str(row["id"]), str(row.get("keyspace_name", "")), str(row.get("cluster_name", "")),
                   str(row.get("state", "")).upper())  # fmt: skip


def reaper_schedules_to_pause(
    schedules: Iterable[ReaperSchedule], keyspace: str, cluster: str | None = None
) -> list[ReaperSchedule]:
    """The active schedules that repair `keyspace` (of `cluster`, when Reaper manages several)."""
    return [
        s
        for s in schedules
        if s.keyspace == keyspace and s.state == "ACTIVE" and (cluster is None or s.cluster == cluster)
    ]


def reaper_schedules_to_resume(paused_ids: Iterable[str], schedules: Iterable[ReaperSchedule]) -> list[ReaperSchedule]:
    """Of the schedules the pause paused, those still paused (one deleted or resumed meanwhile is left alone)."""
    wanted = set(paused_ids)
    return [s for s in schedules if s.id in wanted and s.state == "PAUSED"]


def _boolean(node: str, kind: str, text: str) -> bool:
    if text.lower() in {"true", "false"}:
        return text.lower() == "true"
    raise ClusterError(
        f"nodetool getautorepairconfig on {node} reports `enabled: {text}` for {kind}, neither true nor false.",
        f"Check `nodetool getautorepairconfig` on {node} by hand.",
    )


def _ordered(enabled: Mapping[str, bool]) -> list[str]:
    known = [kind for kind in AUTO_REPAIR_TYPES if kind in enabled]
    return known + sorted(kind for kind in enabled if kind not in AUTO_REPAIR_TYPES)


def _by_node(settings: Iterable[AutoRepairSettings]) -> list[AutoRepairSettings]:
    return sorted(settings, key=lambda s: (tuple(int(p) if p.isdigit() else -1 for p in s.node.split(".")), s.node))
