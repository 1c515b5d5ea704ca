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

__all__ = ["SCHEMA_AGREEMENT_WAIT_S", "connect", "pinned_session", "quote_identifier"]

# The driver's default is 10 s; a node that missed a push catches up at its next periodic pull, and a busy
# cluster has been seen to take over 30 s.
SCHEMA_AGREEMENT_WAIT_S = 120.0


@contextmanager
def connect(
    contact_points: Sequence[str],
    port: int = 9042,
    *,
    coordinator: str | None = None,
    timeout: float = 30.0,
    schema_agreement_wait: float = SCHEMA_AGREEMENT_WAIT_S,
) -> Iterator[Session]:
    """A session over the cluster, or one whose every request goes to `coordinator` only.

    A pinned session is how a read at CL ONE is made to hit one replica: a coordinator that is itself a
    replica serves ONE from its own data (the seed's hazard). A DDL statement returns once every live node
    has the change, or after `schema_agreement_wait` seconds (the driver then only logs a warning): the next
    statement may be coordinated by any node, and one that missed the change answers "does not exist".
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
        connect_timeout=10, control_connection_timeout=10, max_schema_agreement_wait=schema_agreement_wait,
    )  # fmt: skip
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


pinned_session = connect


def quote_identifier(name: str) -> str:
    """A CQL identifier, double-quoted so case and reserved words survive (and injection cannot)."""
    return '"' + name.replace('"', '""') + '"'
