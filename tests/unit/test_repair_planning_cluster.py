"""plan_cluster against a fake driver session: selection, leased keyspaces, per-node size estimates."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ringward.repair import parse_config
from ringward.ring import Node, Ring
from ringward_cassandra.cluster_repairs import SIZE_ESTIMATES_QUERY, plan_cluster, size_estimates

RING = Ring.of(
    [
        Node("10.0.0.1", "dc1", "r1", (-6_000_000_000_000_000_000,)),
        Node("10.0.0.2", "dc1", "r1", (0,)),
        Node("10.0.0.3", "dc1", "r1", (6_000_000_000_000_000_000,)),
    ]
)
TABLES = {"shop": {"orders": 864000, "carts": 3600}, "audit": {"log": 864000}, "system": {"local": 0}}
REPLICATION = {
    "shop": {"class": "SimpleStrategy", "replication_factor": "3"},
    "audit": {"class": "SimpleStrategy", "replication_factor": "2"},
}


class FakeSession:
    def __init__(self) -> None:
        self.hosts = [SimpleNamespace(address=n.address, is_up=True) for n in RING.nodes]
        self.cluster = SimpleNamespace(metadata=SimpleNamespace(all_hosts=lambda: self.hosts))
        self.estimate_hosts: list[str] = []

    def execute(self, query: str, params: Any = (), host: Any = None) -> list[Any]:
        if query == SIZE_ESTIMATES_QUERY:
            self.estimate_hosts.append(host.address)
            low = int(host.address[-1]) * 1000  # each node reports only its own range
            row = {"keyspace_name": params[0], "table_name": "orders", "range_start": str(low)}
            row.update(range_end=str(low + 500), mean_partition_size=100, partitions_count=10)
            return [SimpleNamespace(**row)]
        if "system_schema.keyspaces" in query and "replication" in query:
            return [SimpleNamespace(replication=REPLICATION[params[0]])]
        if "system_schema.keyspaces" in query:
            return [SimpleNamespace(keyspace_name=k) for k in TABLES]
        if "system_schema.tables" in query:
            return [SimpleNamespace(table_name=t, gc_grace_seconds=g) for t, g in TABLES[params[0]].items()]
        raise AssertionError(query)


def test_selected_keyspaces_are_planned_and_leased_ones_reported() -> None:
    config = parse_config({"splitter": {"subranges_per_range": 2}})
    plan = plan_cluster(FakeSession(), RING, config, leased={"audit": "held by m1 (keyspace_migration)"})
    assert plan.excluded_keyspaces == {"audit": "held by m1 (keyspace_migration)"}
    assert {s.keyspace for s in plan.segments} == {"shop"}
    assert plan.tables() == [("shop", "carts"), ("shop", "orders")]
    assert plan.gc_grace["shop"]["carts"] == 3600
    covered = sum(s.range.width() for s in plan.segments)
    assert covered == 2**64  # RF 3 on 3 nodes: the whole ring, in pieces within single ring ranges


def test_size_estimates_come_from_every_live_node() -> None:
    session = FakeSession()
    session.hosts[2].is_up = False
    rows = size_estimates(session, "shop")
    assert session.estimate_hosts == ["10.0.0.1", "10.0.0.2"]
    assert [(r.range_start, r.range_end) for r in rows] == [("1000", "1500"), ("2000", "2500")]


def test_the_size_splitter_uses_the_estimates() -> None:
    config = parse_config({"splitter": {"type": "size", "max_partitions_per_segment": 1000}})
    session = FakeSession()
    plan = plan_cluster(session, RING, config)
    assert session.estimate_hosts  # asked only for the size splitter
    assert any(s.estimated_bytes for s in plan.segments)


def test_an_incremental_plan_leaves_out_tables_with_views_or_cdc_saying_why() -> None:
    from ringward.repair import TableFeatures
    from ringward_cassandra.cluster_repairs import CqlCatalog

    class Catalog(CqlCatalog):
        def table_features(self) -> dict[str, TableFeatures]:
            return {
                "shop.orders": TableFeatures(materialized_views=("orders_by_user",)),
                "audit.log": TableFeatures(cdc=True),
            }

    config = parse_config({"repair_type": "incremental", "splitter": {"subranges_per_range": 1}})
    plan = plan_cluster(Catalog(FakeSession()), RING, config)
    assert plan.tables() == [("shop", "carts")]
    assert set(plan.excluded_tables) == {"shop.orders", "audit.log"}
    assert "orders_by_user" in plan.excluded_tables["shop.orders"] and "CDC" in plan.excluded_tables["audit.log"]
    full = plan_cluster(Catalog(FakeSession()), RING, parse_config({"splitter": {"subranges_per_range": 1}}))
    assert full.excluded_tables == {} and ("shop", "orders") in full.tables()


def test_table_features_read_views_and_cdc_from_the_schema() -> None:
    from ringward.repair import TableFeatures
    from ringward_cassandra.cluster_repairs import table_features

    class Session:
        def execute(self, query: str) -> list[Any]:
            if "system_schema.views" in query:
                return [SimpleNamespace(keyspace_name="shop", view_name="v2", base_table_name="orders"),
                        SimpleNamespace(keyspace_name="shop", view_name="v1", base_table_name="orders")]  # fmt: skip
            return [SimpleNamespace(keyspace_name="shop", table_name="orders", cdc=None),
                    SimpleNamespace(keyspace_name="audit", table_name="log", cdc=True)]  # fmt: skip

    assert table_features(Session()) == {
        "audit.log": TableFeatures((), True), "shop.orders": TableFeatures(("v1", "v2"), False),
    }  # fmt: skip
