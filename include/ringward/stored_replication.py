"""The replication Cassandra stores for a requested one: what an ALTER (or CREATE) KEYSPACE request becomes,
given the current replication (Cassandra 5.0 semantics). Nothing here issues a statement.

Cassandra prepares the requested options against the keyspace's current ones before it validates them
(`prepareOptions` of SimpleStrategy and NetworkTopologyStrategy):

- SimpleStrategy without `replication_factor` keeps the current SimpleStrategy factor, else takes
  `default_keyspace_rf` (cassandra.yaml, 1 by default).
- NetworkTopologyStrategy without any option (a bare NTS) is read as `replication_factor` = the current
  SimpleStrategy factor, else `default_keyspace_rf`.
- NetworkTopologyStrategy's `replication_factor` shorthand (lowercase only; any other spelling is refused)
  keeps the factor of every datacenter the keyspace already has ("for safety"), and gives every other
  datacenter of the ring the shorthand's factor. So a bare NTS after NTS keeps the current datacenters
  and adds the others at `default_keyspace_rf`.
- Explicit datacenter factors without the shorthand replace the whole map: a datacenter left out gets no
  replicas. Zero factors are dropped.
"""

from __future__ import annotations

from collections.abc import Iterable

from ringward.replication import DEFAULT_KEYSPACE_RF, NETWORK_TOPOLOGY, REPLICATION_FACTOR, SIMPLE, Replication

__all__ = ["altered_replication"]


def altered_replication(
    current: Replication | None,
    requested: Replication,
    datacenters: Iterable[str],
    default_keyspace_rf: int = DEFAULT_KEYSPACE_RF,
) -> Replication:
    """The replication Cassandra stores for `ALTER KEYSPACE ... WITH replication = <requested>`.

    `current` None reads `requested` as CREATE KEYSPACE does (no previous options). `current` itself may
    be given in any spelling: it is first read as created.
    """
    previous: dict[str, int] = {}
    if current is not None:
        stored = (
            current if _is_stored(current) else altered_replication(None, current, datacenters, default_keyspace_rf)
        )
        previous = dict(stored.factors)
    options = dict(requested.factors)
    if requested.strategy == SIMPLE:
        if REPLICATION_FACTOR not in options:
            options[REPLICATION_FACTOR] = previous.get(REPLICATION_FACTOR, default_keyspace_rf)
        return Replication(SIMPLE, options)
    if not options:  # a bare NTS: the shorthand from the previous SimpleStrategy, else the default factor
        options[REPLICATION_FACTOR] = previous.get(REPLICATION_FACTOR, default_keyspace_rf)
    shorthand = options.pop(REPLICATION_FACTOR, None)
    if shorthand is None and not options:
        shorthand = previous.get(REPLICATION_FACTOR)
    elif shorthand is not None:
        for dc, factor in previous.items():
            if dc != REPLICATION_FACTOR:  # a SimpleStrategy factor is no datacenter
                options.setdefault(dc, factor)
    if shorthand is not None:
        for dc in datacenters:
            options.setdefault(dc, shorthand)
    return Replication(NETWORK_TOPOLOGY, {dc: factor for dc, factor in options.items() if factor != 0})


def _is_stored(replication: Replication) -> bool:
    """Already in the form Cassandra stores (no shorthand, no implicit factor, no zero factor)."""
    if replication.strategy == SIMPLE:
        return REPLICATION_FACTOR in replication.factors
    return (
        bool(replication.factors)
        and REPLICATION_FACTOR not in replication.factors
        and all(replication.factors.values())
    )
