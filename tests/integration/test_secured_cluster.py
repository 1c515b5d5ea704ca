"""ringward on a cluster secured as production clusters are, through the real scheduler and triggerer.

The `secured` topology: PasswordAuthenticator and CassandraAuthorizer (the default `cassandra` role
disabled, system_auth on every node), JMX behind a password file, client-to-node TLS with a test CA.
ringward's connections log in as the role `ringward`, which holds exactly `ringward.permissions`' GRANTs
(the guide's §2.6) and the per-keyspace ones for the keyspaces these tests migrate. Data and keyspaces are
made by the test setup's own superuser, as an administrator would.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from airflow_stack import AirflowStack, start_stack, topology_under_test
from cassandra import ConsistencyLevel
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster, NoHostAvailable
from cassandra.query import SimpleStatement
from ringward.permissions import (
    JMX_ROLE,
    SPARK_ROLE,
    cluster_grants,
    jmx_grants,
    keyspace_grants,
    spark_keyspace_grants,
)
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster, load_topology
from ringward_cassandra.localcluster.roles import admin_settings
from ringward_cassandra.localcluster.security import ADMIN_ROLE
from ringward_cassandra.ops_store import OpsStore
from ringward_cassandra.seed_scenario import count_at_one_from, create_seed_keyspace
from test_airflow_scheduler import approve_when_asked, failed_tries

pytestmark = pytest.mark.integration

NODES = list(load_topology(topology_under_test("secured")).addresses)  # 127.0.0.2-4, or the lane's own
FIRST, SECOND, THIRD = NODES  # rack1, rack1, rack2: the seed article's nodes
MIGRATION, ROLLBACK, NIGHTLY = "keyspace_migration", "keyspace_migration_rollback", "nightly_subrange_repair"
MIGRATED, NIGHTLY_KEYSPACE = "sec_safe", "sec_nightly"


def admin(cluster: LocalCluster) -> dict[str, Any]:
    """The test setup's superuser (never ringward's connections)."""
    return admin_settings(cluster.secrets_required())


@pytest.fixture(scope="module")
def secured_stack(cluster_manager: Any) -> Iterator[AirflowStack]:
    """Airflow's components with the secured cluster's connections (ringward's role, TLS, JMX password)."""
    cluster_manager.ensure("secured")
    running = start_stack(nightly_keyspaces=[NIGHTLY_KEYSPACE], topology="secured")
    stack = next(running)
    try:
        yield stack
    finally:
        for _ in running:  # start_stack's `finally`: every component stopped
            pass


def test_only_ringwards_own_role_over_tls_gets_in(secured_cluster: LocalCluster, secured_stack: AirflowStack) -> None:
    found = secured_cluster.secrets_required()
    connection = json.loads(secured_stack.env["AIRFLOW_CONN_CASSANDRA_DEFAULT"])
    assert connection["login"] == "ringward" and connection["extra"]["ssl_options"]["ca_certs"] == found.ca_certificate
    with (
        pytest.raises(NoHostAvailable, match="requires authentication"),
        connect(NODES, ssl_options=found.ssl_options()),
    ):
        pass
    plaintext = Cluster(NODES, auth_provider=PlainTextAuthProvider("ringward", found.ringward_password),
                        protocol_version=5, connect_timeout=5)  # fmt: skip
    with pytest.raises(NoHostAvailable):  # no TLS: the node never answers the startup
        plaintext.connect()
    plaintext.shutdown()
    # The default superuser cannot log in; ringward's role is no superuser and holds exactly the listed GRANTs.
    default_superuser = {"username": "cassandra", "password": "cassandra", "ssl_options": found.ssl_options()}
    with pytest.raises(NoHostAvailable, match=r"AuthenticationFailed"), connect(NODES, **default_superuser):
        pass
    with connect(NODES, **admin(secured_cluster)) as session:
        roles = {row.role: row.super for row in session.execute("LIST ROLES")}
        held = {(row.permission, row.resource) for row in session.execute("LIST ALL PERMISSIONS OF ringward")}
    assert roles["ringward"] is False
    wanted = {(p, _resource(g.resource)) for g in cluster_grants() for p in _permissions(g.permission)}
    assert {(p, r) for p, r in held if "sec_" not in r} == wanted
    # JMX runs over TLS only (issue 36): a plain-text nodetool is refused whatever its login, before any login.
    node = secured_cluster.topology().node(FIRST)
    plain = [str(secured_cluster.nodetool_path), "-h", "127.0.0.1", "-p", str(node.jmx_port)]
    admin_login = ["-u", ADMIN_ROLE, "-pwf", found.admin_jmx_password_file(True)]
    in_clear = subprocess.run([*plain, *admin_login, "status"], capture_output=True, text=True, check=False)
    assert in_clear.returncode != 0 and f"UN  {FIRST}" not in in_clear.stdout, in_clear.stdout[-600:]
    assert "FailedLoginException" not in in_clear.stdout + in_clear.stderr  # refused by TLS, not by the login
    # JMX logins are Cassandra roles: nodetool over TLS without one is refused.
    base = [str(secured_cluster.nodetool_path), "--ssl", "-h", "127.0.0.1", "-p", str(node.jmx_port)]
    anonymous = subprocess.run([*base, "status"], capture_output=True, text=True, check=False)
    assert anonymous.returncode != 0 and "FailedLoginException" in anonymous.stdout + anonymous.stderr
    # ringward's JMX role holds exactly the per-MBean grants (issue 36, finding 6), and every JMX call is
    # authorized against them: what ringward runs works, the JVM's own MBeans are refused (`nodetool info` reads
    # java.lang:type=Memory; DiagnosticCommand would be code execution).
    with connect(NODES, **admin(secured_cluster)) as session:
        jmx_held = {(row.permission, row.resource) for row in session.execute(f"LIST ALL PERMISSIONS OF {JMX_ROLE}")}
    assert jmx_held == {(g.permission, _mbean_resource(g.resource)) for g in jmx_grants(auto_repair=False)}
    as_jmx_role = [*base, "-u", JMX_ROLE, "-pwf", found.jmx_password_file]
    allowed = subprocess.run([*as_jmx_role, "status"], capture_output=True, text=True, check=False)
    assert allowed.returncode == 0 and f"UN  {FIRST}" in allowed.stdout, allowed.stdout + allowed.stderr
    refused = subprocess.run([*as_jmx_role, "info"], capture_output=True, text=True, check=False)
    assert refused.returncode != 0 and "Access Denied" in refused.stdout + refused.stderr, refused.stderr[-600:]


@pytest.fixture(scope="module")
def approved_migration(cluster_manager: Any, secured_stack: AirflowStack) -> tuple[str, str]:
    """One keyspace_migration approved through the API, cleanup left for the rollback; (run id, migration id)."""
    cluster_manager.ensure("secured")
    cluster = cluster_manager.cluster
    with connect(NODES, **admin(cluster)) as session:
        create_seed_keyspace(session, MIGRATED)
        for grant in keyspace_grants(MIGRATED):  # what an administrator grants per managed keyspace
            session.execute(grant.statement("ringward"))
        for grant in spark_keyspace_grants(MIGRATED):  # and the Spark verification's read-only role
            session.execute(grant.statement(SPARK_ROLE))
    secured_stack.set_paused(MIGRATION, False)
    run_id = secured_stack.trigger(
        MIGRATION,
        {"keyspace": MIGRATED, "replication": {"class": "NetworkTopologyStrategy", "dc1": 2},
         "require_approval": True, "cleanup": False},
    )  # fmt: skip
    approve_when_asked(secured_stack, MIGRATION, run_id)
    secured_stack.wait_for_state(MIGRATION, run_id, {"success", "failed"}, timeout=900)
    with connect(NODES, **admin(cluster)) as session:
        rows = session.execute("SELECT migration_id, keyspace_name FROM ringward_ops.migrations")
        (migration_id,) = [row.migration_id for row in rows if row.keyspace_name == MIGRATED]
    return run_id, migration_id


def test_a_migration_approved_deferred_and_verified_on_the_secured_cluster(
    secured_cluster: LocalCluster, secured_stack: AirflowStack, approved_migration: tuple[str, str]
) -> None:
    run_id, _ = approved_migration
    assert secured_stack.run(MIGRATION, run_id)["state"] == "success", secured_stack.describe(MIGRATION, run_id)
    assert failed_tries(secured_stack, MIGRATION, run_id) == []
    # The repair deferred, and the triggerer, logged in with the connection's role over TLS, saw it finish.
    log = secured_stack.log(MIGRATION, run_id, "step_1.repair", 1)
    assert "Pausing task as DEFERRED" in log, log[-3000:]
    resumed = re.search(r"post_repair:1: 0 ranges to repair, (\d+) ranges?\b.*already done", log)
    assert resumed and int(resumed.group(1)) > 0, log[-3000:]
    # Spark verification ran (connector over TLS with the trust store, as ringward's role) and passed.
    states = {ti["task_id"]: ti["state"] for ti in secured_stack.task_instances(MIGRATION, run_id)}
    assert states["step_1.baseline"] == states["step_1.verify_counts"] == "success", states
    verify_log = secured_stack.log(MIGRATION, run_id, "step_1.verify_counts", 1)
    assert secured_cluster.secrets_required().store_password not in verify_log
    # It read the keyspace as the Spark role, which holds SELECT on it and nothing else; ringward's role reads
    # no managed keyspace (issue 36: the password Spark hands to executors can neither write nor ALTER).
    with connect(NODES, **admin(secured_cluster)) as session:
        spark_held = {(r.permission, r.resource) for r in session.execute(f"LIST ALL PERMISSIONS OF {SPARK_ROLE}")}
        ringward_held = {(r.permission, r.resource) for r in session.execute("LIST ALL PERMISSIONS OF ringward")}
    assert spark_held == {("SELECT", f"<keyspace {MIGRATED}>")}, spark_held
    assert ("SELECT", f"<keyspace {MIGRATED}>") not in ringward_held, ringward_held
    assert json.loads(secured_stack.env["AIRFLOW_CONN_CASSANDRA_SPARK"])["login"] == SPARK_ROLE
    # The seed's hazard, carried through on the secured cluster: the new replica serves the row at CL ONE.
    assert count_at_one_from(THIRD, MIGRATED, **admin(secured_cluster)) == 1


def test_the_rollback_restores_the_previous_replication_and_cleans_up(
    secured_cluster: LocalCluster, secured_stack: AirflowStack, approved_migration: tuple[str, str]
) -> None:
    _, migration_id = approved_migration
    with connect(NODES, **admin(secured_cluster)) as session:  # written after the ALTER: only on SECOND and THIRD
        session.execute(SimpleStatement(f"INSERT INTO {MIGRATED}.users (app_id, id, name) VALUES (1, 2, 'during')",
                                        consistency_level=ConsistencyLevel.ALL))  # fmt: skip
    secured_stack.set_paused(ROLLBACK, False)
    run_id = secured_stack.trigger(ROLLBACK, {"rollback_of": migration_id, "require_approval": False})
    run = secured_stack.wait_for_state(ROLLBACK, run_id, {"success", "failed"}, timeout=900)
    assert run["state"] == "success", secured_stack.describe(ROLLBACK, run_id)
    assert failed_tries(secured_stack, ROLLBACK, run_id) == []
    endpoints = secured_cluster.nodetool(FIRST, ["getendpoints", MIGRATED, "users", "1"]).stdout.split()
    assert endpoints == [SECOND, FIRST]
    assert count_at_one_from(FIRST, MIGRATED, **admin(secured_cluster)) == 2
    cleanup = secured_stack.task_instance(ROLLBACK, run_id, "cleanup")
    assert cleanup["state"] == "success"
    assert secured_cluster.nodetool(THIRD, ["flush", MIGRATED]).returncode == 0
    held = secured_cluster.nodetool(THIRD, ["getsstables", MIGRATED, "users", "1"])
    assert held.returncode == 0 and held.stdout.strip() == ""  # the former replica cleaned up


def test_a_nightly_run_on_the_secured_cluster(secured_cluster: LocalCluster, secured_stack: AirflowStack) -> None:
    with connect(NODES, **admin(secured_cluster)) as session:
        create_seed_keyspace(session, NIGHTLY_KEYSPACE)  # no GRANT: the nightly repair repairs over JMX
    secured_stack.set_paused(NIGHTLY, False)
    try:
        run_id = secured_stack.trigger(
            NIGHTLY,
            {"keyspaces": [NIGHTLY_KEYSPACE], "config_overrides": {"splitter": {"subranges_per_range": 1},
                                                                   "retry_backoff": 1}},
        )  # fmt: skip
        run = secured_stack.wait_for_state(NIGHTLY, run_id, {"success", "failed"}, timeout=600)
    finally:
        secured_stack.set_paused(NIGHTLY, True)
    assert run["state"] == "success", secured_stack.describe(NIGHTLY, run_id)
    assert failed_tries(secured_stack, NIGHTLY, run_id) == []
    with connect(NODES, **admin(secured_cluster)) as session:
        latest = OpsStore(session).repair_runs()[0]
    assert (latest.run_id, latest.state) == (run_id, "DONE"), latest
    assert latest.summary["tables"][f"{NIGHTLY_KEYSPACE}.users"] == "100.0%", latest.summary


def test_the_ui_pages_read_the_secured_cluster(
    secured_cluster: LocalCluster, secured_stack: AirflowStack, approved_migration: tuple[str, str]
) -> None:
    run_id, _ = approved_migration
    bearer = {"Authorization": f"Bearer {secured_stack.token()}"}
    cluster = httpx.get(f"{secured_stack.url}/ringward/api/cluster", headers=bearer, timeout=60)
    assert cluster.status_code == 200, cluster.text[:2000]
    body = cluster.json()
    assert sorted(node["address"] for node in body["nodes"]) == NODES
    assert body["connection"]["ssl"] is True and body["connection"]["login_set"] is True
    assert secured_cluster.secrets_required().ringward_password not in cluster.text
    pages = {
        "cluster": THIRD,
        "repair": NIGHTLY_KEYSPACE,
        f"migration/{MIGRATION}/{run_id}": MIGRATED,
    }
    for path, shown in pages.items():
        page = httpx.get(f"{secured_stack.url}/ringward/{path}", headers=bearer, timeout=60)
        assert page.status_code == 200 and shown in page.text, (path, page.status_code, page.text[:2000])
    assert httpx.get(f"{secured_stack.url}/ringward/api/cluster", timeout=60).status_code in {401, 403}


def _permissions(permission: str) -> list[str]:
    """LIST PERMISSIONS' rows for a GRANT: ALL PERMISSIONS is one row per permission of a keyspace."""
    if permission != "ALL PERMISSIONS":
        return [permission]
    return ["CREATE", "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE", "UNMASK", "SELECT_MASKED"]


def _mbean_resource(resource: str) -> str:
    """A JMX GRANT's resource as LIST PERMISSIONS names it (`<all mbeans>`, `<mbean org.apache...:type=X>`)."""
    if resource == "ALL MBEANS":
        return "<all mbeans>"
    return f"<mbean {resource.split(' ', 1)[1].strip(chr(39))}>"


def _resource(resource: str) -> str:
    """A GRANT's resource as LIST PERMISSIONS names it (`<keyspace ks>`, `<table ks.t>`)."""
    kind, name = resource.split(" ", 1)
    return f"<{kind.lower()} {name}>"
