"""The GRANTs ringward's role needs: one list, printed by the guide and run by the secured test cluster."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ringward.errors import ConfigurationError
from ringward.permissions import (
    JMX_ROLE,
    SPARK_ROLE,
    cluster_grants,
    grant_statements,
    jmx_grant_statements,
    jmx_grants,
    keyspace_grants,
    ops_keyspace_statement,
    spark_grant_statements,
)

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "operators-guide.md"


def test_the_statements_name_the_role_and_each_managed_keyspace() -> None:
    statements = grant_statements("ringward", ["shop", "Orders"])
    assert statements[0] == "GRANT ALL PERMISSIONS ON KEYSPACE ringward_ops TO ringward;"
    assert "GRANT ALTER ON KEYSPACE shop TO ringward;" in statements
    assert 'GRANT ALTER ON KEYSPACE "Orders" TO ringward;' in statements  # case survives: quoted
    assert len(statements) == len(cluster_grants()) + 2 * len(keyspace_grants("x"))


def test_ringwards_role_reads_no_managed_keyspace_and_the_spark_role_only_reads_it() -> None:
    """The Spark verification reads rows with a role of its own (issue 36): ringward's role, which writes its state
    and ALTERs keyspaces, holds no SELECT on a managed keyspace, and the Spark role holds nothing but that."""
    assert not [s for s in grant_statements("ringward", ["shop"]) if "KEYSPACE shop" in s and "SELECT" in s]
    assert spark_grant_statements(SPARK_ROLE, ["shop", "Orders"]) == [
        "GRANT SELECT ON KEYSPACE shop TO ringward_spark;",
        'GRANT SELECT ON KEYSPACE "Orders" TO ringward_spark;',
    ]


def test_no_grant_reaches_beyond_what_ringward_reads_or_changes() -> None:
    """No keyspace-wide or ALL KEYSPACES grant outside ringward_ops and the managed keyspaces."""
    for statement in grant_statements("ringward", ["shop"]):
        assert "ALL KEYSPACES" not in statement
        if "system" in statement:
            assert statement.startswith("GRANT SELECT ON TABLE system"), statement


def test_names_that_would_break_the_statement_are_quoted() -> None:
    [alter] = [grant.statement('evil"; DROP') for grant in keyspace_grants("shop")]
    assert alter == 'GRANT ALTER ON KEYSPACE shop TO "evil""; DROP";'


def test_the_ops_keyspace_is_created_with_up_to_three_replicas_per_datacenter() -> None:
    statement = ops_keyspace_statement({"dc2": 2, "dc1": 5})
    assert statement.endswith("{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 2};")
    with pytest.raises(ConfigurationError, match="No datacenter"):
        ops_keyspace_statement({})


def test_the_guide_lists_exactly_these_grants() -> None:
    """The guide's permissions section is the list the code (and the secured tests) use, statement by statement
    (with `my_keyspace` standing for each managed keyspace)."""
    section = GUIDE.read_text().split("### 2.6 Permissions", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^GRANT .*;$", section, re.MULTILINE))
    assert listed == set(
        grant_statements("ringward", ["my_keyspace"]) + spark_grant_statements(SPARK_ROLE, ["my_keyspace"])
    )
    assert ops_keyspace_statement({"dc1": 3}) in section


def test_the_grants_command_prints_what_an_administrator_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from ringward_cli.main import main

    assert main(["grants", "--keyspace", "shop", "--datacenter", "dc1=6", "--datacenter", "dc2=2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ops_keyspace_statement({"dc1": 6, "dc2": 2})
    assert lines[1].startswith("CREATE ROLE IF NOT EXISTS ringward WITH LOGIN = true")
    ringward = grant_statements("ringward", ["shop"])
    assert lines[2 : 2 + len(ringward)] == ringward
    assert lines[2 + len(ringward)].startswith("CREATE ROLE IF NOT EXISTS ringward_spark WITH LOGIN = true")
    assert lines[3 + len(ringward)] == "GRANT SELECT ON KEYSPACE shop TO ringward_spark;"
    # Then the JMX role and its per-MBean GRANTs (Cassandra's JMX authorizer, issue 36 finding 6).
    assert lines[4 + len(ringward)].startswith(f"CREATE ROLE IF NOT EXISTS {JMX_ROLE} WITH LOGIN = true")
    assert lines[5 + len(ringward) :] == jmx_grant_statements(JMX_ROLE)


def test_a_malformed_datacenter_is_refused_with_the_form_to_use(capsys: pytest.CaptureFixture[str]) -> None:
    from ringward_cli.main import main

    assert main(["grants", "--datacenter", "dc1"]) == 2
    assert "NAME=NODES" in capsys.readouterr().err


def test_the_cli_logs_in_from_the_environment_never_from_a_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ringward plan --contact` on a secured cluster: role, password and CA from RINGWARD_CQL_*."""
    from ringward_cli.login import cql_login

    assert cql_login({}) == {}
    environ = {"RINGWARD_CQL_USERNAME": "ringward", "RINGWARD_CQL_PASSWORD": "pw", "RINGWARD_CQL_CA_CERTS": "/ca.pem"}
    assert cql_login(environ) == {
        "username": "ringward", "password": "pw", "ssl_options": {"ca_certs": "/ca.pem", "check_hostname": True},
    }  # fmt: skip
    with pytest.raises(ConfigurationError, match="RINGWARD_CQL_PASSWORD"):
        cql_login({"RINGWARD_CQL_USERNAME": "ringward"})
    built: list[dict[str, object]] = []

    def refuse(*args: object, **settings: object) -> object:
        built.append(settings)
        raise RuntimeError("no cluster here")

    monkeypatch.setattr("ringward_cassandra.cql.build_cluster", refuse)
    monkeypatch.setenv("RINGWARD_CQL_USERNAME", "ringward")
    monkeypatch.setenv("RINGWARD_CQL_PASSWORD", "pw")
    from ringward_cli.main import main

    with pytest.raises(RuntimeError, match="no cluster here"):
        main(["plan", "--ring", "127.0.0.9:9042", "--to", '{"class": "NetworkTopologyStrategy", "dc1": 2}'])
    assert built and built[0]["username"] == "ringward" and built[0]["password"] == "pw"


def test_datacenter_names_are_cql_string_literals_in_the_ops_keyspace_statement() -> None:
    """A datacenter name cannot end the literal and add CQL of its own (issue 36): quotes are doubled."""
    statement = ops_keyspace_statement({"dc1': 1}; DROP KEYSPACE shop; --": 3, "o'hare": 2})
    assert statement == (
        "CREATE KEYSPACE IF NOT EXISTS ringward_ops WITH replication = {'class': 'NetworkTopologyStrategy', "
        "'dc1'': 1}; DROP KEYSPACE shop; --': 3, 'o''hare': 2};"
    )  # every ' inside a name is doubled: the names stay string literals
    with pytest.raises(ConfigurationError, match="control character"):
        ops_keyspace_statement({"dc1\n": 3})


def test_ringward_grants_quotes_datacenter_names(capsys: pytest.CaptureFixture[str]) -> None:
    from ringward_cli.main import main

    assert main(["grants", "--datacenter", "o'hare=3"]) == 0
    assert "{'class': 'NetworkTopologyStrategy', 'o''hare': 3};" in capsys.readouterr().out


# --- issue 36, finding 6: the JMX role's per-MBean GRANTs -------------------------------------------------------

# The JVM's own MBeans: DiagnosticCommand (jvmtiAgentLoad, JFR, VM.system_properties), HotSpotDiagnostic (heap
# dumps, VM options), Runtime (the command line, with any -D secret) and MLet act as code execution or leak secrets.
JVM_DOMAINS = ("java.lang", "com.sun.management", "java.util.logging", "JMImplementation", "jdk.management.jfr")


def test_the_jmx_role_gets_no_grant_on_the_jvms_own_mbeans_and_executes_only_named_mbeans() -> None:
    grants = jmx_grants(auto_repair=True)
    assert grants
    for grant in grants:
        assert grant.permission in {"DESCRIBE", "SELECT", "EXECUTE"}, grant  # never MODIFY, never ALL PERMISSIONS
        assert not any(domain in grant.resource for domain in JVM_DOMAINS), grant
        if grant.resource == "ALL MBEANS":
            assert grant.permission == "DESCRIBE", grant  # names and types only, on every MBean
        if grant.permission == "EXECUTE":
            assert re.fullmatch(r"MBEAN 'org\.apache\.cassandra\.db:type=\w+'", grant.resource), grant
        if grant.resource.startswith("MBEANS "):
            assert grant.resource.endswith(":*'") and grant.permission == "SELECT", grant


def test_the_auto_repair_mbean_is_granted_only_where_auto_repair_runs() -> None:
    """A GRANT on an MBean that is not registered is refused (5.0.9 without AutoRepair: "Resource <mbean
    org.apache.cassandra.db:type=AutoRepairService> doesn't exist", found by the secured cluster's setup)."""
    grant = "GRANT EXECUTE ON MBEAN 'org.apache.cassandra.db:type=AutoRepairService' TO ringward_jmx;"
    assert grant not in jmx_grant_statements("ringward_jmx")
    assert jmx_grant_statements("ringward_jmx", auto_repair=True) == [*jmx_grant_statements("ringward_jmx"), grant]


def test_the_jmx_grants_cover_repair_cleanup_snapshot_and_the_reads() -> None:
    statements = jmx_grant_statements("ringward_jmx")
    assert "GRANT EXECUTE ON MBEAN 'org.apache.cassandra.db:type=StorageService' TO ringward_jmx;" in statements
    assert "GRANT EXECUTE ON MBEAN 'org.apache.cassandra.db:type=EndpointSnitchInfo' TO ringward_jmx;" in statements
    assert "GRANT DESCRIBE ON ALL MBEANS TO ringward_jmx;" in statements
    reads = {grant.resource for grant in jmx_grants() if grant.permission == "SELECT"}
    assert reads == {f"MBEANS 'org.apache.cassandra.{domain}:*'" for domain in ("db", "metrics", "net")}
    whys = " ".join(grant.why for grant in jmx_grants())
    for operation in ("repairAsync", "forceKeyspaceCleanup", "takeSnapshot", "forceTerminateAllRepairSessions"):
        assert operation in whys, operation
    assert len(set(statements)) == len(statements)


def test_the_guide_lists_exactly_the_jmx_grants() -> None:
    section = GUIDE.read_text().split("### 2.2 nodetool over JMX", 1)[1].split("\n### 2.3", 1)[0]
    listed = re.findall(r"^GRANT .*;$", section, re.MULTILINE)
    assert listed == jmx_grant_statements(JMX_ROLE, auto_repair=True)  # the AutoRepair one: its own block
