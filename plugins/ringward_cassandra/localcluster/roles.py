"""Roles of the secured local cluster, set up once after its first start, as an administrator would:
system_auth on every node, a superuser of our own instead of the default `cassandra`, the ops keyspace,
and ringward's least-privilege role with exactly `ringward.permissions`' GRANTs."""

from __future__ import annotations

import secrets as random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cassandra import InvalidRequest
from cassandra.cluster import Session
from ringward._cql_values import cql_string_literal
from ringward.permissions import JMX_ROLE, grant_statements, jmx_grant_statements, ops_keyspace_statement

from ringward_cassandra.cql import build_cluster
from ringward_cassandra.localcluster.errors import LocalClusterError
from ringward_cassandra.localcluster.security import ADMIN_ROLE, RINGWARD_ROLE, SPARK_ROLE, ClusterSecrets
from ringward_cassandra.localcluster.topology import Topology

__all__ = ["ADMIN_LOGINS_READY", "admin_settings", "ensure_roles", "roles_created"]

_DONE = ".roles-created"
_SPARK_DONE = ".spark-role-created"
_JMX_DONE = ".jmx-role-created"
ADMIN_LOGINS_READY = ADMIN_ROLE  # the JMX login of the setup's own nodetool calls once the roles exist


def roles_created(found: ClusterSecrets) -> bool:
    return (Path(found.folder) / _DONE).exists()


def admin_settings(found: ClusterSecrets) -> dict[str, Any]:
    """`connect`'s settings for the test setup's superuser (keyspaces, data, GRANTs: never ringward's work)."""
    return {"username": ADMIN_ROLE, "password": found.admin_password, "ssl_options": found.ssl_options()}


def ensure_roles(topology: Topology, found: ClusterSecrets, deadline: float, log: Callable[[str], None]) -> bool:
    """Create the roles and GRANTs once (a marker file records it); True when it did so now."""
    marker = Path(found.folder) / _DONE
    if marker.exists():
        spark = _ensure_spark_role(topology, found, deadline, log)
        return _ensure_jmx_role(topology, found, deadline, log) or spark
    points = topology.addresses
    datacenters: dict[str, int] = {}
    for node in topology.nodes:
        datacenters[node.datacenter] = datacenters.get(node.datacenter, 0) + 1
    factors = ", ".join(
        f"{cql_string_literal(dc, 'datacenter name')}: {count}" for dc, count in sorted(datacenters.items())
    )
    # The default superuser appears a moment after the first start; its password is the well-known one.
    default = {"username": "cassandra", "password": "cassandra", "ssl_options": found.ssl_options()}
    with _session_when_ready(points, default, deadline) as session:
        log("secured cluster: system_auth on every node, superuser " + ADMIN_ROLE)
        session.execute(
            f"ALTER KEYSPACE system_auth WITH replication = {{'class': 'NetworkTopologyStrategy', {factors}}}"
        )
        session.execute(
            f"CREATE ROLE IF NOT EXISTS {ADMIN_ROLE} WITH SUPERUSER = true AND LOGIN = true AND PASSWORD = %s",
            (found.admin_password,),
        )
    with _session_when_ready(points, admin_settings(found), deadline) as session:
        # The well-known default superuser can no longer log in (what every hardening guide asks first).
        session.execute("ALTER ROLE cassandra WITH PASSWORD = %s AND LOGIN = false", (random.token_urlsafe(18),))
        session.execute(ops_keyspace_statement(datacenters))
        # A GRANT on a keyspace its coordinator does not know yet is refused ("doesn't exist"): every node must
        # have the new keyspace first (the driver's own wait after DDL gives up early on a loaded machine).
        session.cluster.control_connection.wait_for_schema_agreement(wait_time=max(1.0, deadline - time.monotonic()))
        session.execute(
            f"CREATE ROLE IF NOT EXISTS {RINGWARD_ROLE} WITH LOGIN = true AND PASSWORD = %s",
            (found.ringward_password,),
        )
        grants = grant_statements(RINGWARD_ROLE, [])
        for statement in grants:
            _execute_until_known(session, statement, deadline)
        log(f"secured cluster: role {RINGWARD_ROLE} with {len(grants)} GRANTs")
    marker.touch(mode=0o600)
    _ensure_spark_role(topology, found, deadline, log)
    _ensure_jmx_role(topology, found, deadline, log)
    return True


def _ensure_jmx_role(topology: Topology, found: ClusterSecrets, deadline: float, log: Callable[[str], None]) -> bool:
    """ringward's JMX role: a login with exactly `ringward.permissions.jmx_grants` (JMX calls are authorized per
    MBean by Cassandra's AuthorizationProxy against them)."""
    marker = Path(found.folder) / _JMX_DONE
    if marker.exists():
        return False
    with _session_when_ready(topology.addresses, admin_settings(found), deadline) as session:
        session.execute(
            f"CREATE ROLE IF NOT EXISTS {JMX_ROLE} WITH LOGIN = true AND PASSWORD = %s", (found.jmx_password,)
        )
        grants = jmx_grant_statements(JMX_ROLE, auto_repair=bool(topology.auto_repair))
        for statement in grants:
            session.execute(statement)
    log(f"secured cluster: JMX role {JMX_ROLE} with {len(grants)} per-MBean GRANTs")
    marker.touch(mode=0o600)
    return True


def _ensure_spark_role(topology: Topology, found: ClusterSecrets, deadline: float, log: Callable[[str], None]) -> bool:
    """The Spark verification's read-only role, without GRANTs: a keyspace's SELECT is granted when an
    administrator lets ringward manage it (`ringward.permissions.spark_keyspace_grants`)."""
    marker = Path(found.folder) / _SPARK_DONE
    if marker.exists():
        return False
    with _session_when_ready(topology.addresses, admin_settings(found), deadline) as session:
        session.execute(
            f"CREATE ROLE IF NOT EXISTS {SPARK_ROLE} WITH LOGIN = true AND PASSWORD = %s", (found.spark_password,)
        )
    log(f"secured cluster: read-only role {SPARK_ROLE} for the Spark verification")
    marker.touch(mode=0o600)
    return True


def _execute_until_known(session: Session, statement: str, deadline: float) -> None:
    """Run a GRANT, again while its coordinator does not know the keyspace yet (schema still spreading)."""
    while True:
        try:
            session.execute(statement)
            return
        except InvalidRequest as refused:
            if "doesn't exist" not in str(refused) or time.monotonic() >= deadline:
                raise
            time.sleep(1.0)


@contextmanager
def _session_when_ready(points: list[str], settings: dict[str, Any], deadline: float) -> Iterator[Session]:
    """A session for `settings`, retried until `deadline` (a new role is not readable for a moment)."""
    error: Exception | None = None
    while time.monotonic() < deadline:
        cluster = build_cluster(points, timeout=30, **settings)
        try:
            session = cluster.connect()
        except Exception as failed:  # NoHostAvailable wrapping AuthenticationFailed, until the role exists
            cluster.shutdown()
            error = failed
            time.sleep(2.0)
            continue
        try:
            yield session
        finally:
            cluster.shutdown()
        return
    raise LocalClusterError(
        f"Could not log in to the secured local cluster as {settings['username']}: {error}.",
        "Run `ringward cluster down --purge` and `ringward cluster up --topology secured` again.",
    )
