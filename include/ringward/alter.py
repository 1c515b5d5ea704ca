"""What an ALTER KEYSPACE actually stores, given the current replication (Cassandra 4.0+ semantics).

NetworkTopologyStrategy's options are prepared against the previous ones: the `replication_factor`
shorthand fills in only datacenters that have no factor yet (existing ones keep theirs, "for safety"),
and `{'class': 'NetworkTopologyStrategy'}` alone after SimpleStrategy carries its factor over to every
datacenter. Explicit datacenter factors replace the whole map: a datacenter left out gets no replicas.
"""

from __future__ import annotations

from collections.abc import Iterable

from ringward.replication import NETWORK_TOPOLOGY, REPLICATION_FACTOR, Replication

__all__ = ["altered_replication"]


def altered_replication(current: Replication, requested: Replication, datacenters: Iterable[str]) -> Replication:
    """The replication Cassandra stores for `ALTER KEYSPACE ... WITH replication = <requested>`."""
    if requested.strategy != NETWORK_TOPOLOGY:
        return requested
    factors = {dc: f for dc, f in requested.factors.items() if dc != REPLICATION_FACTOR}
    default = requested.factors.get(REPLICATION_FACTOR)
    if default is None and not factors and current.is_simple:
        default = current.factors[REPLICATION_FACTOR]
    elif default is not None and not current.is_simple:
        for dc, factor in current.factors.items():
            if dc != REPLICATION_FACTOR and factor > 0:  # Cassandra stores no zero factors
                factors.setdefault(dc, factor)
    if default is not None:
        for dc in datacenters:
            factors.setdefault(dc, default)
    return Replication(NETWORK_TOPOLOGY, factors)
