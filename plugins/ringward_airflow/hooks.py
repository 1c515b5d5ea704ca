"""Hooks: a Cassandra session and a nodetool client per connection, built lazily and cached.

Constructors only store arguments; the session is opened on first use, inside `execute`.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow.sdk.bases.hook import BaseHook
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, Session
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
from ringward.ring import Ring
from ringward_cassandra.cql import agreement_wait
from ringward_cassandra.nodetool import NodetoolClient
from ringward_cassandra.ops_store import OpsStore
from ringward_cassandra.ring_source import ring_from_cluster

__all__ = ["NodetoolHook", "RingwardCassandraHook", "cluster_options"]


class RingwardCassandraHook(BaseHook):
    """Session, live ring and ops store for the cluster behind `cassandra_conn_id`."""

    conn_name_attr = "cassandra_conn_id"
    default_conn_name = "cassandra_default"
    conn_type = "cassandra"
    hook_name = "ringward Cassandra"

    def __init__(self, cassandra_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cassandra_conn_id = cassandra_conn_id

    @cached_property
    def _cluster(self) -> Cluster:
        return Cluster(**cluster_options(self.get_connection(self.cassandra_conn_id)))

    @cached_property
    def session(self) -> Session:
        return self._cluster.connect()

    def ring(self) -> Ring:
        return ring_from_cluster(self.session)

    def ops_store(self) -> OpsStore:
        store = OpsStore(self.session)
        store.ensure_schema((dc, len(nodes)) for dc, nodes in self.ring().datacenters().items())
        return store

    def connection_extra(self) -> dict[str, Any]:
        return dict(self.get_connection(self.cassandra_conn_id).extra_dejson)

    def contact_points(self) -> list[str]:
        return [host.strip() for host in (self.get_connection(self.cassandra_conn_id).host or "").split(",")]

    def native_port(self) -> int:
        """The CQL port of the connection (every node's, as the driver assumes)."""
        return int(self.get_connection(self.cassandra_conn_id).port or 9042)

    def close(self) -> None:
        if "_cluster" in self.__dict__:
            self._cluster.shutdown()


class NodetoolHook(BaseHook):
    """nodetool over JMX. Connection: host = JMX host (may be `{address}`), port = default JMX port,
    login/password = JMX credentials; extra: `nodetool_path`, `jmx_host`, `jmx_ports` {node: port}, `ssl`, and
    optionally `java_classpath` (Cassandra's jars, e.g. "/usr/share/cassandra/lib/*"), `java_options`,
    `java_binary`: then the commands run in one resident JVM per task instead of a nodetool process each."""

    conn_name_attr = "nodetool_conn_id"
    default_conn_name = "ringward_nodetool"
    conn_type = "generic"
    hook_name = "ringward nodetool"

    def __init__(self, nodetool_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.nodetool_conn_id = nodetool_conn_id

    @cached_property
    def client(self) -> NodetoolClient:
        conn = self.get_connection(self.nodetool_conn_id)
        extra = conn.extra_dejson
        return NodetoolClient(
            nodetool_path=extra.get("nodetool_path", "nodetool"),
            jmx_host=extra.get("jmx_host", conn.host or "{address}"),
            jmx_ports={str(k): int(v) for k, v in extra.get("jmx_ports", {}).items()},
            default_jmx_port=int(conn.port or 7199),
            username=conn.login or None,
            password=conn.password or None,
            ssl=bool(extra.get("ssl", False)),
            java_classpath=extra.get("java_classpath") or None,
            java_options=tuple(extra.get("java_options", ())),
            java_binary=extra.get("java_binary", "java"),
        )


def cluster_options(conn: Any) -> dict[str, Any]:
    """The driver's `Cluster` arguments for a `cassandra` connection.

    Built from the provider's connection type, but with execution profiles (the provider's CassandraHook
    passes legacy execution parameters, which the driver deprecates) and always token- and DC-aware
    routing: the local DC comes from `extra.local_dc` or the provider's `load_balancing_policy_args`.
    """
    extra = conn.extra_dejson
    local_dc = extra.get("local_dc") or (extra.get("load_balancing_policy_args") or {}).get("local_dc")
    request_timeout = float(extra.get("request_timeout", 60))
    wanted_wait = extra.get("schema_agreement_wait")
    schema_wait = agreement_wait(request_timeout, None if wanted_wait is None else float(wanted_wait))
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=local_dc)),
        request_timeout=request_timeout,
    )
    options: dict[str, Any] = {
        "contact_points": [host.strip() for host in (conn.host or "127.0.0.1").split(",")],
        "port": int(conn.port or 9042),
        "protocol_version": int(extra.get("protocol_version", 5)),
        "execution_profiles": {EXEC_PROFILE_DEFAULT: profile},
        # The ops keyspace's DDL must have reached every node before its statements are prepared.
        "max_schema_agreement_wait": schema_wait,
    }
    if conn.login:
        options["auth_provider"] = PlainTextAuthProvider(username=conn.login, password=conn.password)
    if extra.get("ssl_options"):
        options["ssl_options"] = extra["ssl_options"]
    return options
