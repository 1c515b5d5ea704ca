"""plan_cluster against a fake driver session: selection, leased keyspaces, per-node size estimates."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ringward.repair import parse_config
from ringward.ring import Node, Ring
from ringward_cassandra.cluster_repairs import (
    NODE_SIZE_ESTIMATES_QUERY,
    SIZE_ESTIMATES_QUERY,
    CqlCatalog,
    node_size_estimates,
    plan_cluster,
    size_estimates,
)

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
        # The driver connects to rpc addresses; the ring names nodes by broadcast address.
        self.hosts = [SimpleNamespace(address=f"192.168.0.{i}", broadcast_address=n.address, is_up=True)
                      for i, n in enumerate(RING.nodes, 1)]  # fmt: skip
        self.cluster = SimpleNamespace(metadata=SimpleNamespace(all_hosts=lambda: self.hosts))
        self.estimate_hosts: list[str] = []

    def execute(self, query: str, params: Any = (), host: Any = None) -> list[Any]:
        if query == NODE_SIZE_ESTIMATES_QUERY:
            self.estimate_hosts.append(host.broadcast_address)
            partitions = 10 * int(host.broadcast_address[-1])
            return [SimpleNamespace(table_name="orders", partitions_count=partitions, data_bytes=100 * partitions)]
        if query == SIZE_ESTIMATES_QUERY:
            self.estimate_hosts.append(host.broadcast_address)
            low = int(host.broadcast_address[-1]) * 1000  # each node reports only its own range
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


def test_node_size_estimates_are_summed_by_each_live_node_and_named_as_the_ring_names_it() -> None:
    session = FakeSession()
    session.hosts[0].is_up = False
    rows = node_size_estimates(session, "shop")
    assert session.estimate_hosts == ["10.0.0.2", "10.0.0.3"]
    assert [(r.node, r.table, r.partitions_count, r.data_bytes) for r in rows] == [
        ("10.0.0.2", "orders", 20, 2000),
        ("10.0.0.3", "orders", 30, 3000),
    ]


def test_a_node_without_arithmetic_in_selectors_has_its_rows_summed_here() -> None:
    from cassandra import InvalidRequest

    class Release311(FakeSession):
        def execute(self, query: str, params: Any = (), host: Any = None) -> list[Any]:
            if query == NODE_SIZE_ESTIMATES_QUERY:
                raise InvalidRequest('Error from server: code=2200 [Invalid query] message="line 1:43 no viable"')
            return super().execute(query, params, host)

    rows = node_size_estimates(Release311(), "shop")
    assert [(r.node, r.partitions_count, r.data_bytes) for r in rows] == [
        ("10.0.0.1", 10, 1000),
        ("10.0.0.2", 10, 1000),
        ("10.0.0.3", 10, 1000),
    ]


def test_the_size_splitter_uses_the_estimates() -> None:
    config = parse_config({"splitter": {"type": "size", "max_partitions_per_segment": 4096}})
    session = FakeSession()
    plan = plan_cluster(session, RING, config)
    assert session.estimate_hosts  # asked only for the size splitter
    # Each node's total lands on its primary range (the range ending at its token), for every table summed.
    by_primary: dict[int, int] = {}
    for segment in (s for s in plan.segments if s.keyspace == "shop"):  # the wrapping range comes in two pieces
        token = RING.primary_token(segment.range.end)
        by_primary[token] = by_primary.get(token, 0) + (segment.estimated_bytes or 0)
    assert by_primary == {n.tokens[0]: 100 * 10 * int(n.address[-1]) for n in RING.nodes}


def test_an_incremental_plan_leaves_out_tables_with_views_or_cdc_saying_why() -> None:
    from ringward.repair import TableFeatures

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


class TwoDatacenterSession(FakeSession):
    """dc1 is the session's local datacenter; its load balancing keeps no connection to dc2's node (the driver's
    DC-aware policy gives it the distance IGNORED), so a request sent there with `host=` fails."""

    def __init__(self) -> None:
        from cassandra.policies import HostDistance

        super().__init__()
        for host, datacenter in zip(self.hosts, ("dc1", "dc1", "dc2"), strict=True):
            host.datacenter = datacenter
        self.hosts[2].is_up = None  # the driver keeps no state of a node it does not connect to
        distance = {id(h): HostDistance.IGNORED if h.datacenter == "dc2" else HostDistance.LOCAL for h in self.hosts}
        self.cluster.profile_manager = SimpleNamespace(distance=lambda host: distance[id(host)])
        self.side_sessions: list[tuple[str, list[str]]] = []
        self.shut_down: list[str] = []

    def execute(self, query: str, params: Any = (), host: Any = None) -> list[Any]:
        from cassandra.cluster import NoHostAvailable

        if host is not None and host.datacenter == "dc2":
            raise NoHostAvailable("no pool to a remote datacenter's node", {})
        return super().execute(query, params, host)

    def open_dc_session(self, base: Any, datacenter: str, contact_points: list[str]) -> Any:
        """A session local to `datacenter` that reaches its nodes (by their rpc address, as the driver names them)."""
        assert base is self.cluster
        self.side_sessions.append((datacenter, contact_points))
        outer = self
        by_address = {h.address: h for h in self.hosts}

        class Side:
            cluster = SimpleNamespace(
                metadata=SimpleNamespace(get_host=lambda address: by_address[address]),
                shutdown=lambda: outer.shut_down.append(datacenter),
            )

            def execute(self, query: str, params: Any = (), host: Any = None) -> list[Any]:
                return FakeSession.execute(outer, query, params, host)

        return Side()


def test_size_estimates_of_a_remote_datacenter_are_read_through_a_session_local_to_it() -> None:
    """The driver opens no connection to another datacenter's nodes: their per-node reads went through a session
    local to that datacenter, not silently dropped (issue 40: 8,658 failed requests on a 3-DC fleet)."""
    session = TwoDatacenterSession()
    rows = node_size_estimates(session, "shop", open_dc_session=session.open_dc_session)
    assert sorted(r.node for r in rows) == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert session.side_sessions == [("dc2", ["192.168.0.3"])]
    assert session.shut_down == ["dc2"]  # the side session is closed after its reads
    per_range = size_estimates(session, "shop", open_dc_session=session.open_dc_session)
    assert sorted(r.range_start for r in per_range) == ["1000", "2000", "3000"]


def test_a_remote_node_the_driver_last_saw_down_is_still_asked_through_its_datacenters_session() -> None:
    """A gossip DOWN event marks a remote node `is_up=False` in the main session, and no UP event follows for a
    node it keeps no pool to: its estimates were dropped on a loaded two-DC cluster (CI, 2026-11-28)."""
    session = TwoDatacenterSession()
    session.hosts[2].is_up = False
    rows = node_size_estimates(session, "shop", open_dc_session=session.open_dc_session)
    assert sorted(r.node for r in rows) == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert session.side_sessions == [("dc2", ["192.168.0.3"])]


def test_a_catalog_reads_every_keyspace_of_a_remote_datacenter_through_one_side_session() -> None:
    """A plan reads the size estimates of many keyspaces: one side session per remote datacenter for the whole
    catalog, closed once by `close` (was one connection to the remote datacenter per keyspace)."""
    session = TwoDatacenterSession()
    catalog = CqlCatalog(session, open_dc_session=session.open_dc_session)
    for keyspace in ("shop", "audit", "shop"):
        assert sorted(r.node for r in catalog.size_estimates(keyspace)) == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert session.side_sessions == [("dc2", ["192.168.0.3"])]
    assert session.shut_down == []
    catalog.close()
    assert session.shut_down == ["dc2"]


def test_a_remote_datacenter_that_cannot_be_opened_is_tried_once_per_catalog(caplog: Any) -> None:
    session = TwoDatacenterSession()
    tries: list[str] = []

    def unreachable(base: Any, datacenter: str, contact_points: list[str]) -> Any:
        tries.append(datacenter)
        raise OSError("connect timeout")

    catalog = CqlCatalog(session, open_dc_session=unreachable)
    for keyspace in ("shop", "audit"):
        assert sorted(r.node for r in catalog.size_estimates(keyspace)) == ["10.0.0.1", "10.0.0.2"]
    assert tries == ["dc2"]  # the timeout is paid once per plan, not once per keyspace
    catalog.close()


def test_a_node_whose_estimates_cannot_be_read_is_named_in_a_warning(caplog: Any) -> None:
    import logging

    session = TwoDatacenterSession()

    def unreachable(base: Any, datacenter: str, contact_points: list[str]) -> Any:
        raise OSError("connection refused")

    with caplog.at_level(logging.WARNING, logger="ringward_cassandra.cluster_repairs"):
        rows = node_size_estimates(session, "shop", open_dc_session=unreachable)
    assert sorted(r.node for r in rows) == ["10.0.0.1", "10.0.0.2"]
    [warning] = [r.getMessage() for r in caplog.records]
    assert "1 node(s)" in warning and "10.0.0.3 (datacenter dc2 unreachable: connection refused)" in warning
    assert "Fix:" in warning


class _Host(SimpleNamespace):
    __hash__ = object.__hash__


class OpeningPools(FakeSession):
    """A session right after connect: the driver waited for its first pool only; the pool to the last node opens
    in the background and exists from the third look at the pool state on (`None` given: it never opens)."""

    def __init__(self, opens_after: int | None) -> None:
        super().__init__()
        self.hosts = [_Host(**vars(h)) for h in self.hosts]  # hashable, as the driver's Host
        self.cluster.connect_timeout = 0.2
        self.looks = 0
        self.opens_after = opens_after

    def get_pool_state(self) -> dict[Any, Any]:
        self.looks += 1
        opened = self.opens_after is not None and self.looks >= self.opens_after
        return {host: {} for host in (self.hosts if opened else self.hosts[:2])}

    def execute(self, query: str, params: Any = (), host: Any = None) -> list[Any]:
        from cassandra.cluster import NoHostAvailable

        if host is not None and host not in self.get_pool_state():
            raise NoHostAvailable("no connection pool to the node yet", {})
        return super().execute(query, params, host)


def test_a_node_whose_pool_is_still_opening_is_waited_for_and_read() -> None:
    """Right after connect a live node may have no pool yet: its estimates were silently missing on a loaded
    two-DC cluster (CI, 2026-11-28). The read waits for the pool and asks again."""
    session = OpeningPools(opens_after=4)
    rows = node_size_estimates(session, "shop")
    assert sorted(r.node for r in rows) == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]


def test_a_node_whose_pool_never_opens_is_given_up_after_the_wait(caplog: Any, monkeypatch: Any) -> None:
    import logging
    import time

    from ringward_cassandra import cluster_repairs

    monkeypatch.setattr(cluster_repairs, "POOL_WAIT_SECONDS", 0.3)
    session = OpeningPools(opens_after=None)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="ringward_cassandra.cluster_repairs"):
        rows = node_size_estimates(session, "shop")
    assert sorted(r.node for r in rows) == ["10.0.0.1", "10.0.0.2"]
    assert 0.5 <= time.monotonic() - started < 0.5 + 2  # connect timeout + the wait, then given up
    assert "10.0.0.3 (no connection)" in caplog.records[0].getMessage()


def test_a_node_the_session_marked_down_is_not_waited_for() -> None:
    import time

    session = OpeningPools(opens_after=None)
    session.hosts[2].is_up = True
    looks = []

    def read(on: Any, host: Any) -> list[Any]:
        looks.append(host.broadcast_address)
        host.is_up = False  # its pool failed: the driver marks it down
        return on.execute(NODE_SIZE_ESTIMATES_QUERY, ("shop",), host=host)

    from ringward_cassandra.cluster_repairs import _from_each_live_node

    started = time.monotonic()
    read_nodes = [node for node, _ in _from_each_live_node(session, None, read)]
    assert read_nodes == ["10.0.0.1", "10.0.0.2"]
    assert time.monotonic() - started < 1.0  # not the full wait
