"""The CQL permissions ringward's role needs on a cluster with CassandraAuthorizer, as the statements an
administrator runs once (and once per keyspace ringward may change).

This list is the one the operator's guide prints (`ringward grants`) and the one the secured test
cluster's setup runs: the integration tests on that cluster prove that it is enough, with nothing more.
The Spark verification logs in with a role of its own that may only read the managed keyspaces
(`spark_keyspace_grants`): ringward's role writes its state and ALTERs keyspaces, and its password never
travels to Spark executors.
Repair, cleanup and the other node operations go through JMX, whose credentials are separate. Every role
may read system.local, system.peers(_v2), system.size_estimates and system_schema without a GRANT
(measured on Cassandra 5.0.9); system_views and system_distributed need one, table by table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ringward._cql_values import cql_string_literal
from ringward.errors import ConfigurationError

__all__ = [
    "OPS_KEYSPACE",
    "SPARK_ROLE",
    "Grant",
    "cluster_grants",
    "create_role_statement",
    "grant_statements",
    "keyspace_grants",
    "ops_keyspace_statement",
    "spark_grant_statements",
    "spark_keyspace_grants",
]

OPS_KEYSPACE = "ringward_ops"
SPARK_ROLE = "ringward_spark"  # the read-only role the Spark verification logs in as (`cassandra_spark`)


@dataclass(frozen=True)
class Grant:
    """One GRANT: `permission` on `resource` (CQL's own words), and why ringward needs it."""

    permission: str
    resource: str
    why: str

    def statement(self, role: str) -> str:
        return f"GRANT {self.permission} ON {self.resource} TO {_identifier(role)};"


def cluster_grants() -> list[Grant]:
    """What ringward needs once per cluster, whatever keyspaces it manages."""
    return [
        Grant(
            "ALL PERMISSIONS",
            f"KEYSPACE {OPS_KEYSPACE}",
            "its own state: migration records and journal, leases, repair history and runs, the pause switch "
            "(it creates and alters its tables there)",
        ),
        Grant(
            "SELECT",
            "TABLE system_distributed.parent_repair_history",
            "repair sessions' outcomes, which the deferred repair's trigger and the migration's journal read",
        ),
        Grant(
            "SELECT",
            "TABLE system_views.settings",
            "the default keyspace replication factor of the plan; each node's data_disk_usage_max_disk_size for "
            "incremental repair's disk-headroom guard",
        ),
        Grant("SELECT", "TABLE system_views.gossip_info", "node restarts while a repair session runs"),
        Grant("SELECT", "TABLE system_views.disk_usage", "each node's data size on the Cluster page"),
    ]


def keyspace_grants(keyspace: str) -> list[Grant]:
    """What ringward needs on a keyspace whose replication it changes (or rolls back) and verifies."""
    quoted = _identifier(keyspace)
    return [Grant("ALTER", f"KEYSPACE {quoted}", "the ALTER KEYSPACE of each step and of a rollback")]


def spark_keyspace_grants(keyspace: str) -> list[Grant]:
    """What the Spark verification's read-only role needs on a keyspace ringward migrates: nothing but reads."""
    return [
        Grant("SELECT", f"KEYSPACE {_identifier(keyspace)}",
              "verification: row counts per range on the new replicas (the Spark job, with its own role)"),
    ]  # fmt: skip


def spark_grant_statements(role: str, keyspaces: Iterable[str]) -> list[str]:
    """Every GRANT for the Spark verification's `role` reading `keyspaces`."""
    return [grant.statement(role) for keyspace in keyspaces for grant in spark_keyspace_grants(keyspace)]


def grant_statements(role: str, keyspaces: Iterable[str]) -> list[str]:
    """Every GRANT for `role` managing `keyspaces`, cluster-wide ones first."""
    grants = cluster_grants() + [grant for keyspace in keyspaces for grant in keyspace_grants(keyspace)]
    return [grant.statement(role) for grant in grants]


def create_role_statement(role: str) -> str:
    """The CREATE ROLE an administrator runs for ringward (the password is theirs to fill in)."""
    return f"CREATE ROLE IF NOT EXISTS {_identifier(role)} WITH LOGIN = true AND PASSWORD = '<password>';"


def ops_keyspace_statement(datacenters: Mapping[str, int]) -> str:
    """The CREATE KEYSPACE an administrator runs before the GRANTs (Cassandra refuses a GRANT on a keyspace
    that does not exist, and creating it would need CREATE on every keyspace): NTS, up to 3 replicas per
    datacenter of `datacenters` (name -> node count), as ringward itself creates it when it may."""
    if not datacenters:
        raise ConfigurationError("No datacenter given for the ops keyspace.", "Give each datacenter's node count.")
    factors = ", ".join(
        f"{cql_string_literal(dc, 'datacenter name')}: {min(3, int(count))}"
        for dc, count in sorted(datacenters.items())
    )
    return (
        f"CREATE KEYSPACE IF NOT EXISTS {OPS_KEYSPACE} WITH replication = "
        f"{{'class': 'NetworkTopologyStrategy', {factors}}};"
    )


def _identifier(name: str) -> str:
    """A role or keyspace name as CQL reads it: bare when lower-case word characters, else double-quoted."""
    if not name or "\x00" in name:
        raise ConfigurationError(f"{name!r} is not a CQL name.", "Give a role or keyspace name.")
    if name.isidentifier() and name == name.lower() and name.isascii():
        return name
    return '"' + name.replace('"', '""') + '"'
