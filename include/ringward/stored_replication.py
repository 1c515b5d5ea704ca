"""The replication Cassandra stores for a requested one: what an ALTER (or CREATE) KEYSPACE request becomes,
given the current replication and the cluster's release. Nothing here issues a statement.

Cassandra 4.0 and later prepare the requested options against the keyspace's current ones before they
validate them (`prepareOptions` of SimpleStrategy and NetworkTopologyStrategy, CASSANDRA-14303):

- SimpleStrategy without `replication_factor` keeps the current SimpleStrategy factor, else takes
  `default_keyspace_rf` (cassandra.yaml, 1 by default). 4.1 and later only: 4.0's SimpleStrategy has no
  prepareOptions and refuses the request.
- NetworkTopologyStrategy without any option (a bare NTS) is read as `replication_factor` = the current
  SimpleStrategy factor, else `default_keyspace_rf` (4.1 and later; 4.0 takes only the SimpleStrategy
  factor, and without one refuses: "Configuration for at least one datacenter must be present").
- NetworkTopologyStrategy's `replication_factor` shorthand (lowercase only; any other spelling is refused)
  keeps the factor of every datacenter the keyspace already has ("for safety"), and gives every other
  datacenter of the ring the shorthand's factor. So a bare NTS after NTS keeps the current datacenters
  and adds the others at `default_keyspace_rf`.
- Explicit datacenter factors without the shorthand replace the whole map: a datacenter left out gets no
  replicas. Zero factors are dropped; nothing left is refused (validateExpectedOptions).

Cassandra 3.11 prepares nothing: the requested map is stored as given (ReplicationParams.fromMap). Its
NetworkTopologyStrategy refuses `replication_factor` in any spelling, its SimpleStrategy a request without
a factor; a NetworkTopologyStrategy with no datacenter (or only zeros) is accepted there and leaves the
keyspace without a replica, which ringward refuses.
"""

from __future__ import annotations

from collections.abc import Iterable

from ringward.cassandra_release import CASSANDRA_5_0, CassandraRelease
from ringward.errors import ReplicationError
from ringward.replication import DEFAULT_KEYSPACE_RF, NETWORK_TOPOLOGY, REPLICATION_FACTOR, SIMPLE, Replication

__all__ = ["altered_replication"]


def altered_replication(
    current: Replication | None,
    requested: Replication,
    datacenters: Iterable[str],
    default_keyspace_rf: int = DEFAULT_KEYSPACE_RF,
    *,
    release: CassandraRelease = CASSANDRA_5_0,
    refuse_no_replicas: bool = True,
) -> Replication:
    """The replication a cluster on `release` stores for `ALTER KEYSPACE ... WITH replication = <requested>`;
    ReplicationError for what that release refuses.

    `current` None reads `requested` as CREATE KEYSPACE does (no previous options). `current` itself may
    be given in any spelling: it is first read as created. `default_keyspace_rf` counts from 4.1 only.
    `refuse_no_replicas` False: a setting without any replica is read as one that places none (what placement
    needs of any setting, and of a current one that exists already), not refused as an ALTER of it would be.
    """
    dcs = list(datacenters)
    if not release.prepares_replication_options:
        if current is not None:
            _stored_as_given(current, release, refuse_no_replicas=False)
        return _stored_as_given(requested, release, refuse_no_replicas=refuse_no_replicas)
    previous: dict[str, int] = {}
    if current is not None:
        stored = (
            current
            if _is_stored(current)
            else altered_replication(None, current, dcs, default_keyspace_rf, release=release, refuse_no_replicas=False)
        )
        previous = dict(stored.factors)
    default_rf = default_keyspace_rf if release.has_default_keyspace_rf else None
    options = dict(requested.factors)
    if requested.strategy == SIMPLE:
        if REPLICATION_FACTOR not in options:
            if not release.has_default_keyspace_rf:  # SimpleStrategy.prepareOptions is new in 4.1
                raise _simple_without_factor(release)
            options[REPLICATION_FACTOR] = previous.get(REPLICATION_FACTOR, default_keyspace_rf)
        return Replication(SIMPLE, options)
    if not options:  # a bare NTS: the shorthand from the previous SimpleStrategy, else the default factor
        factor = previous.get(REPLICATION_FACTOR, default_rf)
        if factor is not None:
            options[REPLICATION_FACTOR] = factor
    shorthand = options.pop(REPLICATION_FACTOR, None)
    if shorthand is None and not options:
        shorthand = previous.get(REPLICATION_FACTOR)
    elif shorthand is not None:
        for dc, factor in previous.items():
            if dc != REPLICATION_FACTOR:  # a SimpleStrategy factor is no datacenter
                options.setdefault(dc, factor)
    if shorthand is not None:
        for dc in dcs:
            options.setdefault(dc, shorthand)
    kept = {dc: factor for dc, factor in options.items() if factor != 0}
    if not kept and refuse_no_replicas:
        raise ReplicationError(
            f'Cassandra {release} refuses {requested.to_cql()}: "Configuration for at least one datacenter must '
            'be present" (no datacenter has a factor above 0'
            + ("" if release.has_default_keyspace_rf else ", and 4.0 has no default_keyspace_rf to take")
            + ").",
            "Give every datacenter that keeps replicas its factor, e.g. "
            '{"class": "NetworkTopologyStrategy", "dc1": 3}.',
        )
    return Replication(NETWORK_TOPOLOGY, kept)


def _stored_as_given(requested: Replication, release: CassandraRelease, *, refuse_no_replicas: bool) -> Replication:
    """What Cassandra 3.11 stores: the map as requested, after its own strategy's checks."""
    if requested.strategy == SIMPLE:
        if REPLICATION_FACTOR not in requested.factors:
            raise _simple_without_factor(release)
        return requested
    if REPLICATION_FACTOR in requested.factors:
        raise ReplicationError(
            f'Cassandra {release} refuses {requested.to_cql()}: "replication_factor is an option for '
            'SimpleStrategy, not NetworkTopologyStrategy" (the shorthand is new in 4.0).',
            'Name every datacenter with its factor, e.g. {"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 3}.',
        )
    stored = {dc: factor for dc, factor in requested.factors.items() if factor != 0}
    if not stored and refuse_no_replicas:
        raise ReplicationError(
            f"Cassandra {release} would store {requested.to_cql()} as given: a keyspace without a replica in "
            "any datacenter, every read and write of it failing.",
            "Name every datacenter that keeps replicas with its factor, e.g. "
            '{"class": "NetworkTopologyStrategy", "dc1": 3}.',
        )
    # 3.11 keeps a zero factor in the map; it places no replica, as leaving the datacenter out does.
    return Replication(NETWORK_TOPOLOGY, stored)


def _simple_without_factor(release: CassandraRelease) -> ReplicationError:
    return ReplicationError(
        f'Cassandra {release} refuses SimpleStrategy without a factor: "SimpleStrategy requires a '
        'replication_factor strategy option." (default_keyspace_rf fills it from 4.1 on).',
        'Give the factor: {"class": "SimpleStrategy", "replication_factor": 3}.',
    )


def _is_stored(replication: Replication) -> bool:
    """Already in the form Cassandra stores (no shorthand, no implicit factor, no zero factor)."""
    if replication.strategy == SIMPLE:
        return REPLICATION_FACTOR in replication.factors
    return (
        bool(replication.factors)
        and REPLICATION_FACTOR not in replication.factors
        and all(replication.factors.values())
    )
