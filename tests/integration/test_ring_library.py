"""`ringward endpoints` and `ringward plan` agree with real Cassandra 5.0: replicas per key as
`nodetool getendpoints` prints them (same order), and every range's replicas as `nodetool describering`
reports them, before and after the ALTER the plan describes. Seed topology and a two-DC topology."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from ringward.replication import Replication
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from schema_agreement import settle_schema

RINGWARD = str(Path(sys.executable).with_name("ringward"))
KEYS = (1, 42, -7)
_DESCRIBED_RANGE = re.compile(r"TokenRange\(start_token:(-?\d+), end_token:(-?\d+), endpoints:\[([^\]]*)\]")

NTS, SIMPLE = "NetworkTopologyStrategy", "SimpleStrategy"
# A schema change on a fresh 5-node cluster, beside the other lane on 2 cores, once waited over 30 s (the driver's
# default) for its coordinator (CI, 2026-11-29): DDL here has a minute.
DDL_TIMEOUT = 60.0
Setting = dict[str, object]
# keyspace -> (current replication, target replication)
SEED_CHANGES: dict[str, tuple[Setting, Setting]] = {
    "rl_simple2": ({"class": SIMPLE, "replication_factor": 2}, {"class": NTS, "dc1": 2}),  # the seed's change
    "rl_nts2": ({"class": NTS, "dc1": 2}, {"class": NTS, "dc1": 3}),
    "rl_simple1": ({"class": SIMPLE, "replication_factor": 1}, {"class": SIMPLE, "replication_factor": 2}),
}
TWO_DC_CHANGES: dict[str, tuple[Setting, Setting]] = {
    "rl_both": ({"class": NTS, "dc1": 2, "dc2": 1}, {"class": NTS, "dc1": 2, "dc2": 2}),
    "rl_simple3": ({"class": SIMPLE, "replication_factor": 3}, {"class": NTS, "dc1": 2, "dc2": 1}),
}


def ringward(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RINGWARD, *args], capture_output=True, text=True, timeout=120, check=False)


def described(cluster: LocalCluster, node: str, keyspace: str) -> dict[int, set[str]]:
    """Range end token -> replicas, as `nodetool describering` on `node` reports them."""
    result = cluster.nodetool(node, ["describering", keyspace])
    assert result.returncode == 0, result.stderr
    ranges = _DESCRIBED_RANGE.findall(result.stdout)
    assert ranges, result.stdout
    return {int(end): {e.strip() for e in endpoints.split(",")} for _, end, endpoints in ranges}


def check_against_cluster(cluster: LocalCluster, changes: dict[str, tuple[Setting, Setting]]) -> None:
    contact = cluster.topology().addresses[0]
    # Every DDL statement through one coordinator, each settled before the next (see `settle_schema`).
    with connect(cluster.topology().addresses, coordinator=contact, timeout=DDL_TIMEOUT) as session:
        for keyspace, (current, _) in changes.items():
            for statement in (
                f"DROP KEYSPACE IF EXISTS {keyspace}",
                f"CREATE KEYSPACE {keyspace} WITH replication = {Replication.parse(current).to_cql()}",
                f"CREATE TABLE {keyspace}.t (id int PRIMARY KEY)",
            ):
                session.execute(statement)
                settle_schema(session)

    plans: dict[str, dict[str, Any]] = {}
    for keyspace, (current, target) in changes.items():
        for key in KEYS:
            ours = ringward(
                "endpoints", "--ring", contact, "--replication", json.dumps(current), "--type", "int", "--", str(key)
            )
            assert ours.returncode == 0, ours.stderr
            theirs = cluster.nodetool(contact, ["getendpoints", keyspace, "t", str(key)])
            assert ours.stdout.split() == theirs.stdout.split(), f"{keyspace} key {key}"
        plan = ringward(
            "plan", "--ring", contact, "--keyspace", keyspace, "--to", json.dumps(target), "--format", "json"
        )
        assert plan.returncode in (0, 3), plan.stderr  # 3: refused (the staged route); the ranges are still exact
        plans[keyspace] = json.loads(plan.stdout)
        old = {r["end"]: set(r["old"]) for r in plans[keyspace]["ranges"]}
        assert old == described(cluster, contact, keyspace), f"{keyspace} before the ALTER"

    with connect(cluster.topology().addresses, coordinator=contact, timeout=DDL_TIMEOUT) as session:
        for keyspace, (_, target) in changes.items():
            session.execute(f"ALTER KEYSPACE {keyspace} WITH replication = {Replication.parse(target).to_cql()}")
            settle_schema(session)
    for keyspace in changes:
        new = {r["end"]: set(r["new"]) for r in plans[keyspace]["ranges"]}
        assert new == described(cluster, contact, keyspace), f"{keyspace} after the ALTER"
        assert plans[keyspace]["affected_ranges"] == sum(
            set(r["old"]) != set(r["new"]) for r in plans[keyspace]["ranges"]
        )


def test_endpoints_and_plan_match_the_seed_cluster(seed_cluster: LocalCluster) -> None:
    check_against_cluster(seed_cluster, SEED_CHANGES)


def test_endpoints_and_plan_match_a_two_dc_cluster(two_dc_cluster: LocalCluster) -> None:
    check_against_cluster(two_dc_cluster, TWO_DC_CHANGES)


def test_schema_and_release_versions_name_every_node_of_the_cluster(seed_cluster: LocalCluster) -> None:
    from ringward_cassandra.schema import release_versions, schema_versions

    with connect(seed_cluster.topology().addresses) as session:
        settle_schema(session)
        versions = schema_versions(session)
        releases = release_versions(session)
    assert len(versions) == 1, versions
    assert next(iter(versions.values())) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    # the release every node reports: the precheck refuses a cluster where they differ
    assert releases == {"5.0.9": ["127.0.0.2", "127.0.0.3", "127.0.0.4"]}


def test_alter_keyspace_stores_what_ringward_reads_a_request_as(two_dc_cluster: LocalCluster) -> None:
    """Cassandra 5.0's own option processing against `ringward.stored_replication`: bare NTS after NTS, SimpleStrategy
    without a factor, the shorthand on ALTER; a mixed-case shorthand is refused by both."""
    from ringward.stored_replication import altered_replication
    from ringward_cassandra.schema import default_keyspace_rf, keyspace_replication

    cases: list[tuple[Setting, Setting]] = [
        ({"class": NTS, "dc1": 2}, {"class": NTS}),  # keeps dc1 at 2, gives dc2 default_keyspace_rf
        ({"class": NTS, "dc1": 2, "dc2": 1}, {"class": SIMPLE}),  # default_keyspace_rf
        ({"class": SIMPLE, "replication_factor": 2}, {"class": NTS}),  # 2 everywhere
        ({"class": NTS, "dc1": 1}, {"class": NTS, "replication_factor": "2", "dc1": "3"}),
    ]
    addresses = two_dc_cluster.topology().addresses
    with connect(addresses, coordinator=addresses[0], timeout=DDL_TIMEOUT) as session:
        default_rf = default_keyspace_rf(session)
        datacenters = ["dc1", "dc2"]
        for number, (current, requested) in enumerate(cases):
            keyspace = f"rl_alter_{number}"
            session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
            settle_schema(session)
            session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {Replication.parse(current).to_cql()}")
            settle_schema(session)
            session.execute(f"ALTER KEYSPACE {keyspace} WITH replication = {Replication.parse(requested).to_cql()}")
            expected = altered_replication(Replication.parse(current), Replication.parse(requested), datacenters,
                                           default_rf)  # fmt: skip
            assert keyspace_replication(session, keyspace) == expected, (current, requested)
            session.execute(f"DROP KEYSPACE {keyspace}")
            settle_schema(session)
        refused = "CREATE KEYSPACE rl_alter_case WITH replication = {'class': 'NetworkTopologyStrategy', "
        try:
            session.execute(refused + "'Replication_Factor': '1'}")
        except Exception as error:  # the driver's ConfigurationException / InvalidRequest
            assert "Replication_Factor" in str(error) or "replication_factor" in str(error), error
        else:
            session.execute("DROP KEYSPACE IF EXISTS rl_alter_case")
            raise AssertionError("Cassandra accepted a mixed-case replication_factor")
        settle_schema(session)


def test_size_estimates_are_read_from_the_nodes_of_every_datacenter(two_dc_cluster: LocalCluster) -> None:
    """The nightly plan's per-node size estimates on a two-DC cluster, from a session local to dc1: the driver
    opens no connection to dc2's nodes, and their estimates were silently missing (issue 40). Every node of both
    datacenters now answers, with data only a dc2 node can report (a keyspace replicated to dc2 alone)."""
    from ringward_cassandra.cluster_repairs import node_size_estimates

    nodes = two_dc_cluster.topology().addresses
    keyspace = "rl_sized_dc2"
    with connect(nodes, local_dc="dc1") as session:
        for statement in (
            f"DROP KEYSPACE IF EXISTS {keyspace}",
            f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': '{NTS}', 'dc1': 1, 'dc2': 2}}",
            f"CREATE TABLE {keyspace}.t (k int PRIMARY KEY, v text)",
        ):
            session.execute(statement, timeout=DDL_TIMEOUT)
            settle_schema(session)
        insert = session.prepare(f"INSERT INTO {keyspace}.t (k, v) VALUES (?, ?)")
        for k in range(600):
            session.execute(insert, (k, "x" * 100))
        for node in nodes:
            assert two_dc_cluster.nodetool(node, ["flush", keyspace]).returncode == 0
            assert two_dc_cluster.nodetool(node, ["refreshsizeestimates"]).returncode == 0
        rows = node_size_estimates(session, keyspace)
        session.execute(f"DROP KEYSPACE {keyspace}", timeout=DDL_TIMEOUT)
        settle_schema(session)
    by_node = {r.node: r for r in rows}
    assert sorted(by_node) == sorted(nodes), rows  # 127.0.0.5 and .6 are dc2's
    for dc2_node in ("127.0.0.5", "127.0.0.6"):
        assert by_node[dc2_node].partitions_count > 0, by_node[dc2_node]  # its primary ranges hold dc2's copies
