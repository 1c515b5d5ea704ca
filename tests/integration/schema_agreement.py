"""Waiting for a test's own DDL to reach every node of the local cluster."""

from __future__ import annotations

import time
from typing import Any

from ringward_cassandra.localcluster import LocalCluster

QUERY_TIMEOUT = 10.0  # each look at the schema versions; a node that cannot answer in this is asked again


def settle_schema(session: Any, patience: float = 30.0) -> None:
    """Return once every node has the DDL just run through `session`.

    A node of a fresh cluster on two loaded cores has stayed on its own schema version for minutes, pulls
    notwithstanding (CI, 2026-11-23; again on an idle machine, 2026-11-29): after `patience` seconds the nodes
    still on a minority version get `nodetool resetlocalschema`, which the cluster log records.

    The versions are read here, each query with its own timeout: the driver's `wait_for_schema_agreement` once
    never returned (over 15 minutes, 2026-11-29, with a node missing a table), although asked to wait 30 s.
    """
    if _agreed_within(session, patience):
        return
    cluster = LocalCluster(log=lambda line: print(f"[cluster] {line}"))
    cluster.wait_schema_agreement(cluster.topology(), time.monotonic() + 120, reset_after=0)
    assert _agreed_within(session, patience), f"the nodes still disagree: {_versions(session)}"


def _agreed_within(session: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        versions = _versions(session)
        if versions is not None and len(set(versions.values())) == 1:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


def _versions(session: Any) -> dict[str, str] | None:
    """Node -> schema version of every node the driver sees up, as one of them sees itself (system.local) and
    the others (system.peers, from gossip): what the driver's own wait compares. None when it did not answer in
    time."""
    # Every node not known to be down counts, as in the driver's own wait (`is_up is not False`): a DC-local
    # session keeps no connection to the other datacenter's nodes, whose `is_up` stays None. Counting only
    # `is_up` True left them out: a dc2 node alone on its version passed for agreement, no reset followed, and
    # the two-DC tests failed on it (CI runs of 2026-11-29 and 2026-11-30, 127.0.0.6).
    hosts = [host for host in session.cluster.metadata.all_hosts() if host.is_up is not False]
    pooled = [host for host in session.get_pool_state() if host.is_up]  # a pinned or DC-local session's own
    if not pooled:
        return None
    host = pooled[0]
    try:
        local = session.execute("SELECT schema_version FROM system.local", timeout=QUERY_TIMEOUT, host=host).one()
        peers = session.execute("SELECT peer, schema_version FROM system.peers", timeout=QUERY_TIMEOUT, host=host)
    except Exception:  # a timeout or a node going down: look again
        return None
    up = {str(up_host.address) for up_host in hosts}  # as the driver's wait does, nodes known down do not count
    versions = {str(host.address): str(local.schema_version)}
    versions.update({str(row.peer): str(row.schema_version) for row in peers if str(row.peer) in up})
    return versions
