"""Which read consistency levels can miss data on a range right after a placement change.

Right after an ALTER KEYSPACE the gained replicas of a range hold none of its data until repair streams
it to them. A read at a consistency level that blocks for `k` replicas merges what those `k` replicas
return, so it misses data exactly when the coordinator may pick `k` replicas that are all gained ones:
`k <= gained` within the level's scope (the whole replica set, or one datacenter for LOCAL_*).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["CONSISTENCY_LEVELS", "quorum", "safe_levels", "unsafe_levels"]

CONSISTENCY_LEVELS = (
    "ONE",
    "TWO",
    "THREE",
    "QUORUM",
    "ALL",
    "LOCAL_ONE",
    "LOCAL_QUORUM",
    "EACH_QUORUM",
)

_FIXED_BLOCK_FOR = {"ONE": 1, "TWO": 2, "THREE": 3}


def quorum(replica_count: int) -> int:
    """Cassandra's quorum of `replica_count` replicas."""
    return replica_count // 2 + 1


def unsafe_levels(
    new_replicas: Sequence[str], gained: Iterable[str], datacenter_of: Mapping[str, str]
) -> tuple[str, ...]:
    """The consistency levels whose reads may return incomplete results on one range.

    `new_replicas` are the replicas after the change, `gained` those among them that hold no data yet.
    """
    gained_set = set(gained)
    if not gained_set:
        return ()
    total = len(new_replicas)
    new_per_dc = Counter(datacenter_of.get(a, "?") for a in new_replicas)
    gained_per_dc = Counter(datacenter_of.get(a, "?") for a in gained_set)
    unsafe = [level for level, k in _FIXED_BLOCK_FOR.items() if k <= len(gained_set)]
    if quorum(total) <= len(gained_set):
        unsafe.append("QUORUM")
    if total <= len(gained_set):
        unsafe.append("ALL")
    # LOCAL_*: the coordinator's datacenter is unknown, so any datacenter that can miss counts.
    if any(gained_per_dc[dc] >= 1 for dc in new_per_dc):
        unsafe.append("LOCAL_ONE")
    if any(quorum(n) <= gained_per_dc[dc] for dc, n in new_per_dc.items()):
        unsafe.append("LOCAL_QUORUM")
    # EACH_QUORUM merges a quorum from every datacenter: it misses only if every one of them can.
    if all(quorum(n) <= gained_per_dc[dc] for dc, n in new_per_dc.items()):
        unsafe.append("EACH_QUORUM")
    return tuple(level for level in CONSISTENCY_LEVELS if level in unsafe)


def safe_levels(unsafe_counts: Mapping[str, int]) -> list[str]:
    """Levels with no unsafe range, strongest-first order of CONSISTENCY_LEVELS kept."""
    return [level for level in CONSISTENCY_LEVELS if unsafe_counts.get(level, 0) == 0]
