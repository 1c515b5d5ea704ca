"""The disk-headroom guard of incremental repair (CEP-37): no session on a replica short of free disk.

Anticompaction after an incremental session rewrites the SSTables holding repaired ranges, so a replica needs
room for a second copy of them. Free space is a node's data size (nodetool's Load) against its data disk's
capacity: Cassandra 4.1+'s `data_disk_usage_max_disk_size` where the node sets it, else the repair
configuration's `data_disk_capacity`. The readings are injected: no IO here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ringward.repair._segments import RepairCommand

__all__ = [
    "DISK_SIZE_SETTING",
    "DiskCapacity",
    "DiskHeadroomGuard",
    "configured_disk_capacity",
    "disk_capacity",
    "disk_headroom_reason",
    "free_ratio",
    "unchecked_headroom_note",
]

# cassandra.yaml (4.1+), listed in system_views.settings: the data disk size its disk-usage guardrail assumes.
DISK_SIZE_SETTING = "data_disk_usage_max_disk_size"


@dataclass(frozen=True)
class DiskCapacity:
    """A node's data disk size in bytes and where ringward read it (named in every refusal)."""

    size: int
    source: str


def configured_disk_capacity(node: str, datacenter: str, configured: int | Mapping[str, int] | None) -> int | None:
    """The configured `data_disk_capacity` of `node`: one size for every node, or {address or datacenter:
    size} with a node's own entry over its datacenter's; None when it names neither."""
    if configured is None or isinstance(configured, int):
        return configured
    return configured.get(node, configured.get(datacenter))


def disk_capacity(
    node: str, datacenter: str, node_setting: int | None, configured: int | Mapping[str, int] | None
) -> DiskCapacity | None:
    """The capacity the guard measures `node` against: the node's own `data_disk_usage_max_disk_size`
    (`node_setting`, None when unset or unreadable) first (it knows its disk), else the configured one."""
    if node_setting is not None and node_setting > 0:
        return DiskCapacity(node_setting, f"its {DISK_SIZE_SETTING}")
    size = configured_disk_capacity(node, datacenter, configured)
    return None if size is None else DiskCapacity(size, "data_disk_capacity")


def free_ratio(load_bytes: int, capacity_bytes: int) -> float:
    """The free share of a disk holding `load_bytes` of `capacity_bytes` (0 when the data exceeds it)."""
    return max(0.0, 1.0 - load_bytes / capacity_bytes)


def disk_headroom_reason(
    node: str, free: float | None, min_free_ratio: float | None, capacity: DiskCapacity | None = None
) -> str | None:
    """Why no incremental session may start on `node` (`free` of its data disk is below `min_free_ratio`), or
    None. A free share that could not be measured (None) refuses nothing: the guard says once per run that
    it could not check (`unchecked_headroom_note`)."""
    if not min_free_ratio or free is None or free >= min_free_ratio:
        return None
    against = f" of {capacity.size} bytes ({capacity.source})" if capacity is not None else ""
    return (
        f"{node}: {free:.0%} of its data disk{against} is free, below min_free_disk_ratio {min_free_ratio:.0%} "
        "(incremental repair's anticompaction rewrites SSTables); free space or add disk, correct the capacity "
        "if it is wrong, or lower repair_types.incremental.min_free_disk_ratio"
    )


def unchecked_headroom_note(nodes: list[str]) -> str:
    """The once-per-run line for nodes whose free disk cannot be measured: why, and how to make it so."""
    listed = ", ".join(sorted(nodes))
    return (
        f"Disk headroom not checked on {listed}: no capacity known for the data disk (the node sets no "
        f"{DISK_SIZE_SETTING} in cassandra.yaml, Cassandra 4.1+, and the repair configuration has no "
        "data_disk_capacity for it) or its Load unreadable; their incremental sessions run unchecked. Set "
        "data_disk_capacity (a size, or {datacenter or address: size}) to check them."
    )


class DiskHeadroomGuard:
    """The executor's `refused` check before each incremental session: the first replica of the command whose
    free disk share is under `min_free_ratio` refuses it. `capacities` holds every node's `disk_capacity` (read
    once a run); `load(node)` is its current data size in bytes, None when unreadable. Nodes that cannot be
    checked are named once per run through `log`, and their sessions run."""

    def __init__(
        self,
        min_free_ratio: float | None,
        capacities: Mapping[str, DiskCapacity | None],
        load: Callable[[str], int | None],
        log: Callable[[str], None],
    ) -> None:
        self._min = min_free_ratio
        self._capacities = dict(capacities)
        self._load = load
        self._log = log
        self._unchecked_said = False

    def _free(self, node: str) -> float | None:
        capacity = self._capacities.get(node)
        load = self._load(node) if capacity is not None else None
        return None if capacity is None or load is None else free_ratio(load, capacity.size)

    def __call__(self, command: RepairCommand) -> str | None:
        if not self._min:
            return None
        unchecked: list[str] = []
        reason = None
        for node in command.replicas:
            free = self._free(node)
            if free is None:
                unchecked.append(node)
            elif reason is None:
                reason = disk_headroom_reason(node, free, self._min, self._capacities.get(node))
        if unchecked and not self._unchecked_said:  # once per run, naming every node unmeasured by then
            self._unchecked_said = True
            self._log(unchecked_headroom_note([n for n in self._capacities if self._free(n) is None] or unchecked))
        return reason
