"""Issue 23's configuration: per-table units for outliers, table_max_repair_time, back-pressure, history_ttl."""

from __future__ import annotations

from datetime import timedelta

import pytest
from ringward.errors import ConfigurationError
from ringward.repair import (
    BackPressure,
    NodeBacklog,
    RepairUnit,
    back_pressure_reason,
    bytes_per_replica_node,
    dump_config,
    load_config,
    parse_config,
    select_units,
    unit_time_exceeded,
)
from ringward.replication import Replication
from ringward.ring import Node, Ring

GiB = 2**30
SCHEMA = {"ks": ["a", "b", "c", "big"], "other": ["x", "y"]}
# Bytes per replica node: `big` is 500x the median and 500 GiB, over the shipped 256 GiB floor.
SIZES = {"ks.a": GiB, "ks.b": 1.2 * GiB, "ks.c": 0.8 * GiB, "ks.big": 500 * GiB, "other.x": 10, "other.y": 11}
SIZES = {name: int(size) for name, size in SIZES.items()}


def test_an_outlier_table_becomes_its_own_unit_after_the_rest_named_explicitly() -> None:
    units = select_units(SCHEMA, parse_config({}), SIZES)
    assert units == [RepairUnit("ks", ("a", "b", "c")), RepairUnit("ks", ("big",)), RepairUnit("other")]


def test_without_sizes_or_with_the_split_off_units_are_as_before() -> None:
    before = [RepairUnit("ks"), RepairUnit("other")]
    assert select_units(SCHEMA, parse_config({})) == before
    assert select_units(SCHEMA, parse_config({"split_outlier_tables": 0}), SIZES) == before
    assert select_units(SCHEMA, parse_config({"split_outlier_tables": 1000}), SIZES) == before


def test_an_outlier_under_split_outlier_min_size_stays_with_the_other_tables() -> None:
    # 100x the median but 100 GiB a node: it validates in minutes, and a unit of its own would double the
    # sessions on every range (issue 23: 506,734 sessions instead of 256,001 on the 1000-node fleet).
    modest = {**SIZES, "ks.big": 100 * GiB}
    assert select_units(SCHEMA, parse_config({}), modest) == [RepairUnit("ks"), RepairUnit("other")]
    assert select_units(SCHEMA, parse_config({"split_outlier_min_size": "64GiB"}), modest)[1] == RepairUnit(
        "ks", ("big",)
    )
    # 0: the factor alone decides, as before the floor existed.
    tiny = {"ks.a": 100, "ks.b": 120, "ks.c": 80, "ks.big": 50_000}
    assert select_units(SCHEMA, parse_config({"split_outlier_min_size": 0}), tiny)[1] == RepairUnit("ks", ("big",))
    assert select_units(SCHEMA, parse_config({}), tiny)[0] == RepairUnit("ks")


def test_the_median_is_of_the_selected_tables_and_unknown_sizes_are_never_outliers() -> None:
    # Excluding the small tables leaves `big` alone: a keyspace of one table has no outlier.
    config = parse_config({"tables": {"exclude": ["ks.a", "ks.b", "ks.c"]}})
    assert select_units(SCHEMA, config, SIZES)[0] == RepairUnit("ks", ("big",))
    partial = {"ks.a": GiB, "ks.b": GiB}  # c and big have no size
    assert select_units(SCHEMA, parse_config({}), partial)[0] == RepairUnit("ks")
    empty = {"ks.a": 0, "ks.b": 0, "ks.c": 0, "ks.big": 500 * GiB}  # median 0: nothing to compare against
    assert select_units(SCHEMA, parse_config({}), empty)[0] == RepairUnit("ks")


def test_bytes_per_replica_node_spreads_one_copy_over_the_nodes_that_hold_the_keyspace() -> None:
    nodes = [Node(f"10.0.{dc}.{i}", f"dc{dc}", "r1", (dc * 1000 + i,)) for dc in (1, 2) for i in range(6)]
    nodes += [Node(f"10.0.3.{i}", "dc3", "r1", (3000 + i,)) for i in range(2)]
    ring = Ring.of(nodes)
    one_copy = 1400 * GiB
    # NTS dc1: 3, dc2: 3, dc3 holds nothing: 6 replicas over the 12 nodes of dc1 and dc2.
    nts = Replication.network_topology({"dc1": 3, "dc2": 3})
    assert bytes_per_replica_node(one_copy, ring, nts) == 700 * GiB
    # A factor above a datacenter's node count stores one copy per node there: 3 + 2 replicas over 8 nodes.
    assert bytes_per_replica_node(one_copy, ring, Replication.network_topology({"dc1": 3, "dc3": 5})) == 875 * GiB
    # SimpleStrategy: RF copies over every node of the ring.
    assert bytes_per_replica_node(one_copy, ring, Replication.simple(2)) == 200 * GiB


def test_unit_time_exceeded_names_the_time_and_the_limit() -> None:
    config = parse_config({})
    assert config.table_max_repair_time == timedelta(hours=6)
    assert unit_time_exceeded(6 * 3600, config) is None
    reason = unit_time_exceeded(6 * 3600 + 65, config)
    assert reason is not None
    assert "6h01m05s" in reason and "table_max_repair_time (6h00m00s)" in reason and "next run" in reason
    assert unit_time_exceeded(10**9, parse_config({"table_max_repair_time": None})) is None


@pytest.mark.parametrize(
    ("backlog", "expected"),
    [
        (NodeBacklog(), None),
        (NodeBacklog(pending_compactions=100, max_sstables_per_table=10000), None),
        (NodeBacklog(pending_compactions=230), "127.0.0.3 has 230 pending compactions (limit 100"),
        (NodeBacklog(max_sstables_per_table=12000), "127.0.0.3 has 12000 SSTables in one table (limit 10000"),
        (NodeBacklog(streaming=True), "127.0.0.3 is streaming (bootstrap, decommission or repair)"),
        (NodeBacklog(cleanup_running=True), "127.0.0.3 is running cleanup"),
        (NodeBacklog(pending_ranges=True), "127.0.0.3 has pending ranges (joining/leaving/moving)"),
    ],
)
def test_back_pressure_reason(backlog: NodeBacklog, expected: str | None) -> None:
    reason = back_pressure_reason("127.0.0.3", backlog, parse_config({}))
    assert reason == expected if expected is None else reason is not None and reason.startswith(expected)


def test_back_pressure_limits_come_from_the_configuration() -> None:
    config = parse_config({"back_pressure": {"max_pending_compactions": 500}})
    assert config.back_pressure == BackPressure(max_pending_compactions=500, sstable_upper_threshold=10000)
    assert back_pressure_reason("n", NodeBacklog(pending_compactions=230), config) is None


@pytest.mark.parametrize(
    ("data", "field", "reason"),
    [
        ({"split_outlier_tables": 0.5}, "split_outlier_tables", "0 (never split) or a factor of at least 1"),
        ({"split_outlier_tables": -1}, "split_outlier_tables", "0 (never split)"),
        ({"split_outlier_min_size": "lots"}, "split_outlier_min_size", "expected a size"),
        ({"split_outlier_min_size": -1}, "split_outlier_min_size", "greater than or equal to 0"),
        ({"table_max_repair_time": 0}, "table_max_repair_time", "null for no limit"),
        ({"back_pressure": {"max_pending_compactions": 0}}, "back_pressure.max_pending_compactions", "greater than 0"),
        ({"back_pressure": {"sstable_upper_threshold": -5}}, "back_pressure.sstable_upper_threshold", "greater than 0"),
        ({"back_pressure": {"max_pending": 5}}, "back_pressure.max_pending", "Extra inputs"),
        ({"history_ttl": "0s"}, "history_ttl", "longer than the largest gc_grace_seconds"),
        ({"history_ttl": "soon"}, "history_ttl", "expected a duration"),
    ],
)
def test_invalid_new_fields_name_the_field_and_the_fix(data: dict[str, object], field: str, reason: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_config(data, "test.yaml")
    assert f"`{field}`" in caught.value.problem
    assert reason in caught.value.problem
    assert caught.value.fix


def test_new_fields_ship_in_the_default_file_and_round_trip_through_dump_config() -> None:
    shipped = load_config()
    assert shipped == parse_config({**dump_config(shipped)})
    assert shipped.split_outlier_tables == 10.0
    assert shipped.split_outlier_min_size == 256 * GiB
    assert shipped.table_max_repair_time == timedelta(hours=6)
    assert shipped.back_pressure == BackPressure()
    assert shipped.history_ttl == timedelta(days=30)
    custom = parse_config(
        {"split_outlier_tables": 0, "table_max_repair_time": None, "history_ttl": "45d",
         "back_pressure": {"max_pending_compactions": 20, "sstable_upper_threshold": 500}}
    )  # fmt: skip
    plain = dump_config(custom)
    assert plain["table_max_repair_time"] is None
    assert plain["history_ttl"] == 45 * 86400.0
    assert plain["back_pressure"] == {"max_pending_compactions": 20, "sstable_upper_threshold": 500}
    assert parse_config(plain) == custom
