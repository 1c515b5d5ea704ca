"""Hooks: a Cassandra session and a nodetool client per connection, built lazily and cached.

Constructors only store arguments; the session is opened on first use, inside `execute`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from airflow.sdk.bases.hook import BaseHook
from cassandra.cluster import Cluster, Session
from ringward.ring import Ring
from ringward_cassandra.cluster_repairs import ClusterCatalog, CqlCatalog
from ringward_cassandra.connection_extras import checked_nodetool_extra
from ringward_cassandra.cql import build_cluster, cluster_arguments
from ringward_cassandra.nodetool import NodetoolClient
from ringward_cassandra.ops_store import OpsStore
from ringward_cassandra.ring_reader import ring_from_cluster

__all__ = ["NodetoolHook", "RingwardCassandraHook", "cluster_options", "connection_settings"]


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
        return build_cluster(**connection_settings(self.get_connection(self.cassandra_conn_id)))

    @cached_property
    def session(self) -> Session:
        return self._cluster.connect()

    def ring(self) -> Ring:
        return ring_from_cluster(self.session)

    def catalog(self) -> ClusterCatalog:
        """Keyspaces, tables, replication and size estimates, as the nightly repair plans from them."""
        return CqlCatalog(self.session)

    def now(self) -> datetime:
        """The cluster's time (the wall clock, in UTC)."""
        return datetime.now(UTC)

    def ops_store(self) -> OpsStore:
        """The ops keyspace's store; its schema is ensured once per session (DDL and an agreement wait)."""
        store = self.__dict__.get("_ops_store")
        if store is None:
            store = OpsStore(self.session)
            store.ensure_schema((dc, len(nodes)) for dc, nodes in self.ring().datacenters().items())
            self.__dict__["_ops_store"] = store
        return store

    def connection_extra(self) -> dict[str, Any]:
        return dict(self.get_connection(self.cassandra_conn_id).extra_dejson)

    def contact_points(self) -> list[str]:
        return [host.strip() for host in (self.get_connection(self.cassandra_conn_id).host or "").split(",")]

    def native_port(self) -> int:
        """The CQL port of the connection (every node's, as the driver assumes)."""
        return int(self.get_connection(self.cassandra_conn_id).port or 9042)

    def close(self) -> None:
        """Shut the driver down; a later use of the hook connects again."""
        cluster = self.__dict__.pop("_cluster", None)
        self.__dict__.pop("session", None)
        self.__dict__.pop("_ops_store", None)
        if cluster is not None:
            cluster.shutdown()


class NodetoolHook(BaseHook):
    """nodetool over JMX. Connection: host = JMX host (may be `{address}`), port = default JMX port,
    login/password = JMX credentials (handed to nodetool in a 0600 file, never on its command line); extra:
    `password_file` (an existing nodetool password file instead of the password), `nodetool_path`, `jmx_host`,
    `jmx_ports` {node: port}, `ssl`, and
    optionally `java_classpath` (Cassandra's jars, e.g. "/usr/share/cassandra/lib/*"), `java_options`,
    `java_binary`: then the commands run in one resident JVM per task instead of a nodetool process each;
    `share_jvm`: one resident JVM for every task the process runs (`airflow dags test`).

    Its connection type is `ringward_nodetool` (the form in Airflow's UI, ringward_airflow.provider_info); the
    hook reads any connection by id, so one of type `generic` works the same. Empty form fields mean the
    defaults."""

    conn_name_attr = "nodetool_conn_id"
    default_conn_name = "ringward_nodetool"
    conn_type = "ringward_nodetool"
    hook_name = "ringward nodetool"

    def __init__(self, nodetool_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.nodetool_conn_id = nodetool_conn_id

    @cached_property
    def client(self) -> NodetoolClient:
        conn = self.get_connection(self.nodetool_conn_id)
        extra = checked_nodetool_extra(conn.extra_dejson, self.nodetool_conn_id)  # plain paths and options only
        return NodetoolClient(
            nodetool_path=extra.get("nodetool_path") or "nodetool",
            jmx_host=extra.get("jmx_host") or conn.host or "{address}",
            jmx_ports={str(k): int(v) for k, v in (extra.get("jmx_ports") or {}).items()},
            default_jmx_port=int(conn.port or 7199),
            username=conn.login or None,
            password=conn.password or None,
            password_file=extra.get("password_file") or None,
            ssl=bool(extra.get("ssl", False)),
            java_classpath=extra.get("java_classpath") or None,
            java_options=tuple(extra.get("java_options") or ()),
            java_binary=extra.get("java_binary") or "java",
            share_jvm=bool(extra.get("share_jvm", False)),
        )


def cluster_options(conn: Any) -> dict[str, Any]:
    """The driver's `Cluster` arguments for a `cassandra` connection (what `build_cluster` passes)."""
    return cluster_arguments(**connection_settings(conn))


def connection_settings(conn: Any) -> dict[str, Any]:
    """`build_cluster`'s keyword arguments for a `cassandra` connection.

    Read from the provider's connection type, but always with execution profiles (the provider's
    CassandraHook passes legacy execution parameters, which the driver deprecates) and token- and DC-aware
    routing: the local DC comes from `extra.local_dc` or the provider's `load_balancing_policy_args`.
    """
    extra = conn.extra_dejson
    local_dc = extra.get("local_dc") or (extra.get("load_balancing_policy_args") or {}).get("local_dc")
    wanted_wait = extra.get("schema_agreement_wait")
    return {
        "contact_points": [host.strip() for host in (conn.host or "127.0.0.1").split(",")],
        "port": int(conn.port or 9042),
        "timeout": float(extra.get("request_timeout", 60)),
        "local_dc": local_dc,
        "username": conn.login or None,
        "password": conn.password or None,
        "ssl_options": extra.get("ssl_options") or None,
        # Absent: negotiated, v4 with a node below Cassandra 5.0 (cql.RingwardCluster).
        "protocol_version": int(extra["protocol_version"]) if extra.get("protocol_version") is not None else None,
        "schema_agreement_wait": None if wanted_wait is None else float(wanted_wait),
    }
