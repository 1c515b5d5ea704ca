"""Driver sessions for ringward: whole-cluster sessions and sessions pinned to one coordinator."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, Session
from cassandra.policies import (
    DCAwareRoundRobinPolicy,
    RetryPolicy,
    TokenAwarePolicy,
    WhiteListRoundRobinPolicy,
)

__all__ = ["connect", "pinned_session", "quote_identifier"]


@contextmanager
def connect(
    contact_points: Sequence[str], port: int = 9042, *, coordinator: str | None = None, timeout: float = 30.0
) -> Iterator[Session]:
    """A session over the cluster, or one whose every request goes to `coordinator` only.

    A pinned session is how a read at CL ONE is made to hit one replica: a coordinator that is itself a
    replica serves ONE from its own data (the seed's hazard).
    """
    if coordinator:
        policy = WhiteListRoundRobinPolicy([coordinator])
        points = [coordinator]
    else:
        policy = TokenAwarePolicy(DCAwareRoundRobinPolicy())
        points = list(contact_points)
    profile = ExecutionProfile(load_balancing_policy=policy, request_timeout=timeout, retry_policy=RetryPolicy())
    cluster = Cluster(
        points, port=port, protocol_version=5, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=10, control_connection_timeout=10,
    )  # fmt: skip
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


pinned_session = connect


def quote_identifier(name: str) -> str:
    """A CQL identifier, double-quoted so case and reserved words survive (and injection cannot)."""
    return '"' + name.replace('"', '""') + '"'
