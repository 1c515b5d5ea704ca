"""Hooks: a Cassandra session and a nodetool client per connection, built lazily and cached.

Constructors only store arguments (the provider's CassandraHook connects in its constructor, so it is
built on first use, inside `execute`).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow.providers.apache.cassandra.hooks.cassandra import CassandraHook
from airflow.sdk.bases.hook import BaseHook
from cassandra.cluster import Session
from ringward.ring import Ring
from ringward_cassandra.nodetool import NodetoolClient
from ringward_cassandra.ops_store import OpsStore
from ringward_cassandra.ring_source import ring_from_cluster

__all__ = ["NodetoolHook", "RingwardCassandraHook"]


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
    def provider_hook(self) -> CassandraHook:
        return CassandraHook(cassandra_conn_id=self.cassandra_conn_id)

    @cached_property
    def session(self) -> Session:
        return self.provider_hook.get_conn()

    def ring(self) -> Ring:
        return ring_from_cluster(self.session)

    def ops_store(self) -> OpsStore:
        store = OpsStore(self.session)
        store.ensure_schema((dc, len(nodes)) for dc, nodes in self.ring().datacenters().items())
        return store

    def contact_points(self) -> list[str]:
        return [host.strip() for host in (self.get_connection(self.cassandra_conn_id).host or "").split(",")]

    def close(self) -> None:
        if "provider_hook" in self.__dict__:
            self.provider_hook.shutdown_cluster()


class NodetoolHook(BaseHook):
    """nodetool over JMX. Connection: host = JMX host (may be `{address}`), port = default JMX port,
    login/password = JMX credentials; extra: `nodetool_path`, `jmx_host`, `jmx_ports` {node: port}, `ssl`."""

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
        )
