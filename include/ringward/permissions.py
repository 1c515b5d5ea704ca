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

With Cassandra's JMX authorizer (`-Dcassandra.jmx.authorizer=org.apache.cassandra.auth.jmx.AuthorizationProxy`,
JMX logins checked against Cassandra's roles), the JMX role gets `jmx_grants`: per-MBean GRANTs for what
ringward's nodetool commands (and the resident nodetool, which runs the same NodeTool class) touch, and nothing
on the JVM's own MBeans (java.lang, com.sun.management: DiagnosticCommand and HotSpotDiagnostic act as code
execution). The authorizer maps a JMX call to a permission: getAttribute(s) SELECT, invoke EXECUTE,
queryNames/getMBeanInfo/isInstanceOf DESCRIBE (setAttribute MODIFY: ringward sets none). A GRANT is per MBean,
not per operation: EXECUTE on StorageService covers every operation of that MBean.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ringward._cql_values import cql_string_literal
from ringward.errors import ConfigurationError

__all__ = [
    "JMX_ROLE",
    "OPS_KEYSPACE",
    "SPARK_ROLE",
    "Grant",
    "cluster_grants",
    "create_role_statement",
    "grant_statements",
    "jmx_grant_statements",
    "jmx_grants",
    "keyspace_grants",
    "ops_keyspace_statement",
    "spark_grant_statements",
    "spark_keyspace_grants",
]

OPS_KEYSPACE = "ringward_ops"
SPARK_ROLE = "ringward_spark"  # the read-only role the Spark verification logs in as (`cassandra_spark`)
JMX_ROLE = "ringward_jmx"  # the role nodetool logs in as over JMX when Cassandra's roles authenticate JMX

STORAGE_SERVICE = "org.apache.cassandra.db:type=StorageService"
AUTO_REPAIR_SERVICE = "org.apache.cassandra.db:type=AutoRepairService"


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


def jmx_grants(auto_repair: bool = False) -> list[Grant]:
    """The JMX role's GRANTs under Cassandra's JMX authorizer: the MBeans ringward's nodetool commands use.

    The commands (plugins/ringward_cassandra/nodetool.py, repair_controllers.py, repair_controller_operators.py):
    status, describering, getendpoints, netstats, compactionstats, tablestats, repair (full, incremental,
    preview), snapshot, cleanup, flush, refreshsizeestimates, version, statusbinary, get/setautorepairconfig, and
    `sjk mx` calling StorageService.forceTerminateAllRepairSessions.

    `auto_repair`: the nodes run CEP-37 AutoRepair (`-Dcassandra.autorepair.enable=true`, 5.0.9+), whose MBean
    ringward pauses during a migration. Only then does the MBean exist, and a GRANT on an MBean that does not
    exist is refused ("Resource <mbean ...AutoRepairService> doesn't exist", measured on 5.0.9)."""
    grants = [
        Grant("DESCRIBE", "ALL MBEANS",
              "nodetool's connection: queryNames and isInstanceOf (MBean names and types, no values), e.g. the "
              "platform proxies every NodeProbe creates and the table MBeans tablestats lists"),
        Grant("SELECT", "MBEANS 'org.apache.cassandra.db:*'",
              "attributes of StorageService (status, load, release version, native transport), the table MBeans "
              "(tablestats), CompactionManager (compactionstats) and AutoRepairService (getautorepairconfig)"),
        Grant("SELECT", "MBEANS 'org.apache.cassandra.metrics:*'",
              "table, compaction and read-repair metrics: tablestats' SSTable counts and percent repaired, "
              "compactionstats' pending tasks, netstats"),
        Grant("SELECT", "MBEANS 'org.apache.cassandra.net:*'",
              "MessagingService, StreamManager and FailureDetector (netstats: is the node streaming; status)"),
        Grant("EXECUTE", f"MBEAN '{STORAGE_SERVICE}'",
              "repair (repairAsync), cleanup (forceKeyspaceCleanup), snapshot (takeSnapshot), flush "
              "(forceKeyspaceFlush), refreshsizeestimates, forceTerminateAllRepairSessions, and the reads that are "
              "operations: describering, getendpoints, status' ownership"),
        Grant("EXECUTE", "MBEAN 'org.apache.cassandra.db:type=EndpointSnitchInfo'",
              "status: each node's datacenter and rack"),
    ]  # fmt: skip
    if auto_repair:
        grants.append(Grant("EXECUTE", f"MBEAN '{AUTO_REPAIR_SERVICE}'",
                            "setautorepairconfig: pausing AutoRepair during a migration and restoring it "
                            "(Cassandra 5.0.9+, AutoRepair on)"))  # fmt: skip
    return grants


def jmx_grant_statements(role: str = JMX_ROLE, auto_repair: bool = False) -> list[str]:
    """Every GRANT for the JMX `role` (a Cassandra role when JMX logs in through CassandraLogin)."""
    return [grant.statement(role) for grant in jmx_grants(auto_repair)]


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
