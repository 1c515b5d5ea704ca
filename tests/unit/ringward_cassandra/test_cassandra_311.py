"""Cassandra 3.11, read-only (issue 26): its `nodetool ring`, `nodetool describering` and system tables, read
from fixtures in 3.11.19's formats (tests/fixtures/README.md), planned by `ringward plan`, and refused by the
migration's precheck with the commands to run the plan by hand."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cassandra import InvalidRequest
from ringward.cassandra_release import CassandraRelease
from ringward.errors import ClusterError, MigrationError
from ringward.migration import cleanup_nodes, migration_steps, repair_segments
from ringward.placement import replica_map
from ringward.plan import MigrationPlan, build_plan
from ringward.replication import Replication
from ringward.ring import MIN_TOKEN, Ring, TokenRange
from ringward.ring_sources import load_ring_file
from ringward_airflow.migration_stages import cluster_release_of
from ringward_cassandra import ring_reader, schema
from ringward_cassandra.manual_procedure import refuse_read_only_release
from ringward_cassandra.nodetool import parse_describering
from ringward_cli.main import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cassandra311"
RING_TEXT = FIXTURES / "nodetool_ring.txt"
TABLES: dict[str, list[dict[str, Any]]] = {
    name: rows
    for name, rows in json.loads((FIXTURES / "system_tables.json").read_text()).items()
    if not name.startswith("_")
}
V3_11 = CassandraRelease.parse("3.11.19")
TO_BOTH_DCS = '{"class": "NetworkTopologyStrategy", "dc1": 2, "dc2": 2}'


class Cassandra311Session:
    """Answers ringward's queries from the fixture's rows, and refuses what 3.11 does not have as 3.11 does
    (`ThriftValidation.validateColumnFamily`: "unconfigured table …", "Keyspace … does not exist")."""

    def __init__(self) -> None:
        host = SimpleNamespace(is_up=True, host_id=TABLES["system.local"][0]["host_id"])
        self.cluster = SimpleNamespace(metadata=SimpleNamespace(all_hosts=lambda: [host]), shutdown=lambda: None)
        self.queries: list[str] = []

    def execute(self, query: str, parameters: Any = None, host: Any = None) -> list[Any]:
        self.queries.append(query)
        table = re.search(r"FROM (\S+)", query)
        name = table.group(1) if table else ""
        if name == "system.peers_v2":
            raise InvalidRequest("unconfigured table peers_v2")
        if name.startswith("system_views."):
            raise InvalidRequest("Keyspace system_views does not exist")
        rows = TABLES[name]
        if parameters:
            rows = [row for row in rows if row["keyspace_name"] == parameters[0]]
        return [SimpleNamespace(**row) for row in rows]


def shop_replication() -> Replication:
    return schema.keyspace_replication(Cassandra311Session(), "shop")


# -- the fixtures, read by ringward's readers ----------------------------------------------------------------
def test_nodetool_ring_of_3_11_reads_every_node_with_its_place_tokens_and_load() -> None:
    ring = load_ring_file(RING_TEXT)
    rows = {row.get("peer") or row["broadcast_address"]: row for row in TABLES["system.local"] + TABLES["system.peers"]}
    assert {node.address for node in ring.nodes} == set(rows)
    for node in ring.nodes:
        row = rows[node.address]
        assert (node.datacenter, node.rack, node.state) == (row["data_center"], row["rack"], "UN")
        assert node.tokens == tuple(sorted(int(token) for token in row["tokens"]))
    loads = {node.address: node.load_bytes for node in ring.nodes}
    assert loads["10.40.1.13"] == round(987.4 * 2**20) and loads["10.40.2.11"] == round(402.77 * 2**20)


def test_the_ring_from_3_11_system_tables_falls_back_to_system_peers_and_matches_nodetool() -> None:
    session = Cassandra311Session()
    ring = ring_reader.ring_from_cluster(session)
    assert any(query.endswith("FROM system.peers") for query in session.queries)
    from_nodetool = load_ring_file(RING_TEXT)
    assert [(n.address, n.datacenter, n.rack, n.tokens) for n in ring.nodes] == [
        (n.address, n.datacenter, n.rack, n.tokens) for n in from_nodetool.nodes
    ]


def test_a_3_11_peer_error_names_the_table_it_came_from() -> None:
    row = SimpleNamespace(**{**TABLES["system.peers"][0], "tokens": []})
    with pytest.raises(ClusterError, match=r"no tokens in system\.peers"):
        ring_reader.ring_from_rows(SimpleNamespace(**TABLES["system.local"][0]), [row], peers_table="system.peers")


def test_3_11_schema_reads_replication_tables_and_the_default_factor() -> None:
    session = Cassandra311Session()
    assert shop_replication() == Replication.network_topology({"dc1": 2})
    assert schema.table_gc_grace(session, "shop") == {"carts": 10800, "orders": 864000}
    assert schema.default_keyspace_rf(session) == 1  # no system_views on 3.11: Cassandra's default
    addresses = [TABLES["system.local"][0]["broadcast_address"]] + [row["peer"] for row in TABLES["system.peers"]]
    assert schema.release_versions(session) == {"3.11.19": sorted(addresses)}


def test_describering_of_3_11_lists_the_replicas_ringward_places() -> None:
    """The fixture's replicas come from a walk after 3.11's NetworkTopologyStrategy, not ringward's code."""
    ring = load_ring_file(RING_TEXT)
    described = parse_describering((FIXTURES / "describering_shop.txt").read_text())
    placement = replica_map(ring, shop_replication())
    assert len(described) == len(ring.ranges())
    assert {token_range for token_range, _ in described} == set(ring.ranges())
    for token_range, replicas in described:
        assert set(placement.for_token(token_range.end)) == replicas


# -- `ringward plan` on the 3.11 ring --------------------------------------------------------------------------
@pytest.fixture
def live_3_11(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`ringward plan --ring <host> --keyspace …` answered by the fixture's rows."""
    monkeypatch.setattr(schema, "connect", lambda contact, **settings: Cassandra311Session())
    monkeypatch.setattr(
        ring_reader,
        "ring_from_contact_point",
        lambda host, port=9042, **s: ring_reader.ring_from_cluster(Cassandra311Session()),
    )
    yield


def test_ringward_plan_plans_a_3_11_ring_from_its_nodetool_output(capsys: pytest.CaptureFixture[str]) -> None:
    shop = next(row for row in TABLES["system_schema.keyspaces"] if row["keyspace_name"] == "shop")
    current = json.dumps(shop["replication"])
    code = main(["plan", "--ring", str(RING_TEXT), "--from", current, "--to", TO_BOTH_DCS, "--keyspace", "shop",
                 "--release", "3.11.19", "--format", "json"])  # fmt: skip
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert document["affected_ranges"] == len(load_ring_file(RING_TEXT).ranges())  # dc2 gains every range
    assert document["manual_procedure"][0].startswith("shop is on Cassandra 3.11.19")


def test_ringward_plan_reads_a_live_3_11_cluster_and_prints_the_way_on(
    live_3_11: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["plan", "--ring", "10.40.1.11", "--keyspace", "shop", "--to", TO_BOTH_DCS])
    out = capsys.readouterr().out
    assert code == 0
    assert "SAFE" in out
    assert "Cassandra 3.11.19" in out and "Upgrade the cluster to Cassandra 4.0 or later" in out
    assert "--table carts --pin-host 10.40.2.11" in out  # the live tables are named in the checks


def test_ringward_plan_refuses_the_shorthand_on_3_11(live_3_11: None, capsys: pytest.CaptureFixture[str]) -> None:
    target = '{"class": "NetworkTopologyStrategy", "replication_factor": 2}'
    code = main(["plan", "--ring", "10.40.1.11", "--keyspace", "shop", "--to", target])
    err = capsys.readouterr().err
    assert code == 2
    assert "3.11.19 refuses" in err and "Name every datacenter" in err


def test_a_release_that_is_no_version_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "--ring", str(RING_TEXT), "--from", '{"class": "SimpleStrategy", "replication_factor": 1}',
                 "--to", TO_BOTH_DCS, "--release", "three-eleven"])  # fmt: skip
    assert code == 2 and "--release 'three-eleven' is not a Cassandra version" in capsys.readouterr().err


def test_a_plan_on_4_0_prints_no_manual_procedure(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "--ring", str(RING_TEXT), "--from", '{"class": "NetworkTopologyStrategy", "dc1": 2}',
                 "--to", TO_BOTH_DCS, "--release", "4.0.19"])  # fmt: skip
    assert code == 0 and "by hand" not in capsys.readouterr().out


# -- the precheck's refusal and the procedure it prints ------------------------------------------------------
class Cql311:
    def release_versions(self) -> dict[str, list[str]]:
        return schema.release_versions(Cassandra311Session())


def refusal_of(plan: MigrationPlan, tables: list[str]) -> MigrationError:
    release = cluster_release_of(Cql311())  # type: ignore[arg-type]  # only release_versions is asked
    with pytest.raises(MigrationError) as refused:
        refuse_read_only_release(release, plan, migration_steps(plan), tables)
    return refused.value


def plan_to(target: Replication, ring: Ring | None = None) -> MigrationPlan:
    ring = ring or load_ring_file(RING_TEXT)
    return build_plan(ring, shop_replication(), target, keyspace="shop", release=V3_11)


def commands(lines: list[str], marker: str) -> list[list[str]]:
    """The command lines of the section starting at the line that contains `marker`, split into words."""
    start = next(i for i, line in enumerate(lines) if marker in line)
    section = []
    for line in lines[start + 1 :]:
        if not line.startswith("     "):
            break
        section.append(line.split())
    return section


def repaired_ranges(words: list[str]) -> list[TokenRange]:
    """The ranges of `nodetool -h H repair -full -st S1:E1,…,Sn -et En KS` (nodetool's encoding)."""
    starts = words[words.index("-st") + 1].split(",")
    pairs = [piece.split(":") for piece in starts[:-1]] + [[starts[-1], words[words.index("-et") + 1]]]
    return [TokenRange(int(start), int(end)) for start, end in pairs]


def test_the_precheck_refuses_3_11_naming_the_release_and_the_way_on() -> None:
    refusal = refusal_of(plan_to(Replication.parse(TO_BOTH_DCS)), ["carts", "orders"])
    assert "shop is on Cassandra 3.11.19" in refusal.problem
    assert "preview repair" in refusal.problem and "sjk" in refusal.problem
    assert refusal.fix.startswith("Upgrade the cluster to Cassandra 4.0 or later")
    assert "run this plan by hand" in refusal.fix


def test_the_printed_procedure_alters_each_step_and_repairs_what_each_new_replica_gains() -> None:
    ring = load_ring_file(RING_TEXT)
    plan = plan_to(Replication.parse(TO_BOTH_DCS))
    steps = migration_steps(plan)
    lines = refusal_of(plan, ["carts", "orders"]).fix.splitlines()
    alters = [line.strip() for line in lines if line.strip().startswith("ALTER KEYSPACE")]
    assert alters == [f'ALTER KEYSPACE "shop" WITH replication = {step.after.to_cql()};' for step in steps]
    assert alters[-1].endswith("{'class': 'NetworkTopologyStrategy', 'dc1': '2', 'dc2': '2'};")
    dc2 = {node.address for node in ring.nodes if node.datacenter == "dc2"}
    for step in steps:
        before, after = step.placements(ring)
        post = commands(lines[lines.index(f"Step {step.index} of {step.count}: {step.before.to_cql()} -> "
                                          f"{step.after.to_cql()}"):], "c. Stream")  # fmt: skip
        repaired: list[TokenRange] = []
        for words in post:
            assert words[:5] == ["nodetool", "-h", words[2], "repair", "-full"] and words[-1] == "shop"
            for token_range in repaired_ranges(words):
                gained = set(after.for_token(token_range.end)) - set(before.for_token(token_range.end))
                # Run among the range's new replicas, on one new to the step (any replica coordinates a full repair).
                assert gained and gained <= dc2 and words[2] in set(after.for_token(token_range.end)) & dc2
                repaired.append(token_range)
        expected = [s.range for s in repair_segments(ring, step, "shop", "post")]
        assert sorted(repaired, key=str) == sorted(expected, key=str)
    assert any(r.end == MIN_TOKEN for r in repaired)  # the wrap-around range, split at the minimum token
    counts = commands(lines, "d. Check")
    assert ["ringward", "spark", "range-counts", "--hosts", "10.40.1.11", "--keyspace", "shop", "--table", "carts",
            "--pin-host", "10.40.2.12"] in counts  # fmt: skip


def test_the_printed_procedure_cleans_up_the_nodes_that_lose_ranges() -> None:
    plan = plan_to(Replication.network_topology({"dc1": 1}))
    lines = refusal_of(plan, []).fix.splitlines()
    cleanup = commands(lines, "Cleanup")
    losing = cleanup_nodes(plan.ring, plan.old, plan.steps[-1])
    assert losing and cleanup == [
        words
        for node in losing
        for words in (["nodetool", "-h", node, "snapshot", "-t", "before-cleanup", "shop"],
                      ["nodetool", "-h", node, "cleanup", "shop"])
    ]  # fmt: skip
    assert "--table <table>" in "\n".join(lines)  # tables unknown: a placeholder to fill in


def test_the_precheck_refuses_a_cluster_mid_upgrade_before_planning() -> None:
    class MixedCql:
        def release_versions(self) -> dict[str, list[str]]:
            return {"3.11.19": ["10.40.1.11"], "4.0.19": ["10.40.1.12"]}

    with pytest.raises(ClusterError, match="different Cassandra releases"):
        cluster_release_of(MixedCql())  # type: ignore[arg-type]  # only release_versions is asked


@pytest.mark.parametrize("release", ["4.0.19", "4.1.10", "5.0.9"])
def test_4_0_and_later_are_not_refused(release: str) -> None:
    plan = plan_to(Replication.parse(TO_BOTH_DCS))
    refuse_read_only_release(CassandraRelease.parse(release), plan, migration_steps(plan))
