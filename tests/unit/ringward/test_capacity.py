"""Capacity precheck arithmetic: bytes each node receives, growth warnings, refusals past a configured capacity."""

from __future__ import annotations

import math

import pytest
from ringward.capacity import (
    capacity_report,
    configured_capacities,
    format_bytes,
    incoming_bytes,
    parse_size,
    parse_status_loads,
)
from ringward.diff import RangeChange
from ringward.errors import ConfigurationError, UnsafeChangeError
from ringward.plan import build_plan
from ringward.repair import SizeEstimate
from ringward.repair._estimates import SizeIndex
from ringward.replication import Replication
from ringward.ring import Node, Ring, TokenRange

GIB = 1024**3

# Three nodes of dc1 with one token each and one of dc2: SimpleStrategy 1 -> 2 makes each range gain its
# next node on the ring.
RING = Ring.of(
    [
        Node("10.0.0.1", "dc1", "r1", (-6000,)),
        Node("10.0.0.2", "dc1", "r1", (0,)),
        Node("10.0.0.3", "dc1", "r1", (6000,)),
        Node("10.0.1.1", "dc2", "r1", (3000,)),
    ]
)


def test_sizes_read_as_nodetool_and_operators_write_them() -> None:
    assert parse_size(1234) == 1234
    assert parse_size("500GiB") == 500 * GIB
    assert parse_size("1.5 TiB") == int(1.5 * 1024**4)
    assert parse_size("123.45 KiB") == int(123.45 * 1024)
    assert parse_size("800MB") == 800 * 1000**2
    assert parse_size("17 bytes") == 17
    for bad in ("lots", "5 parsecs", -3, True, "1,5GiB"):
        with pytest.raises(ConfigurationError) as refusal:
            parse_size(bad, "capacity of x")
        assert "GiB" in refusal.value.fix or "zero" in refusal.value.fix
    assert format_bytes(1536) == "1.50 KiB"
    assert format_bytes(12) == "12 B"
    assert format_bytes(3 * GIB) == "3.00 GiB"


def test_status_loads_per_node_including_unknown() -> None:
    output = """Datacenter: dc1
===============
Status=Up/Down
|/ State=Normal/Leaving/Joining/Moving
--  Address    Load        Tokens  Owns (effective)  Host ID                               Rack
UN  127.0.0.2  205.94 KiB  4       ?                 8a9f0b8e-6a3c-4a8e-9f9a-0d0c1c1b2a3d  rack1
UN  127.0.0.3  1.2 GiB     4       ?                 9a9f0b8e-6a3c-4a8e-9f9a-0d0c1c1b2a3d  rack1
DN  127.0.0.4  ?           4       ?                 aa9f0b8e-6a3c-4a8e-9f9a-0d0c1c1b2a3d  rack2
"""
    assert parse_status_loads(output) == {
        "127.0.0.2": int(205.94 * 1024),
        "127.0.0.3": int(1.2 * GIB),
        "127.0.0.4": None,
    }


def test_capacities_by_node_win_over_their_datacenter_and_typos_are_refused() -> None:
    capacities = configured_capacities({"dc1": "100GiB", "10.0.0.2": "50GiB"}, RING)
    assert capacities == {"10.0.0.1": 100 * GIB, "10.0.0.2": 50 * GIB, "10.0.0.3": 100 * GIB}
    assert configured_capacities(None, RING) == {}
    with pytest.raises(ConfigurationError) as refusal:
        configured_capacities({"dc3": "1TiB"}, RING)
    assert "dc3" in refusal.value.problem and "dc1" in refusal.value.fix


@pytest.mark.parametrize(
    "capacity",
    ["9" * 60, "9" * 400, 10**400, 2**60 + 1, "1048577 TiB", "1" * 70 + "TiB"],
    ids=["60 digits", "400 digits (float infinity)", "10**400", "1 EiB + 1", "1048577 TiB", "70-digit TiB"],
)
def test_a_node_capacity_past_the_cap_is_refused_naming_the_cap_not_a_traceback(capacity: object) -> None:
    """node_capacity is a run param: a size no disk has (or a number that overflows a float) is refused with the
    limit it broke, before the report's arithmetic meets it."""
    with pytest.raises(ConfigurationError) as refusal:
        configured_capacities({"dc1": capacity}, RING)
    problem = refusal.value.problem
    assert "capacity of 10.0.0.1" in problem
    assert "above the cap of 1152921504606846976 bytes (1 EiB)" in problem or "not a size ringward can read" in problem
    assert len(problem) < 300  # a huge value is shown cut short
    assert "TiB" in refusal.value.fix


def test_a_capacity_at_the_cap_is_still_read_and_reported() -> None:
    capacities = configured_capacities({"dc1": 2**60, "10.0.0.2": "1048576 TiB"}, RING)
    assert capacities == dict.fromkeys(("10.0.0.1", "10.0.0.2", "10.0.0.3"), 2**60)
    changes = [RangeChange(TokenRange(0, 100), ("10.0.1.1",), ("10.0.1.1", "10.0.0.1"))]
    report = capacity_report(changes, lambda _: GIB, {"10.0.0.1": GIB}, capacities)
    assert report.over_capacity == ()
    assert "| 10.0.0.1 | 1.00 GiB | 1.00 GiB | 2.00 GiB | 1048576.00 TiB |" in report.markdown()


def test_each_gained_range_brings_one_copy_of_its_bytes() -> None:
    changes = [
        RangeChange(TokenRange(0, 100), ("a",), ("a", "b")),
        RangeChange(TokenRange(100, 300), ("a",), ("c", "b")),  # b and c gain; a loses (sends, receives nothing)
        RangeChange(TokenRange(300, 400), ("a", "b"), ("b", "a")),  # reordering: nothing moves
    ]
    sizes = {TokenRange(0, 100): 10.0, TokenRange(100, 300): 20.5, TokenRange(300, 400): 1000.0}
    assert incoming_bytes(changes, sizes.__getitem__) == {"b": 31, "c": 21}  # fractions round up


def test_growth_warns_above_half_the_load_and_capacity_refuses_naming_node_and_bytes() -> None:
    changes = [RangeChange(TokenRange(0, 100), ("a",), ("a", "b", "c", "d"))]
    report = capacity_report(
        changes,
        lambda _: 60 * GIB,
        loads={"b": 100 * GIB, "c": 120 * GIB, "d": 0},
        capacities={"b": 150 * GIB, "c": 200 * GIB},
    )
    by_node = {i.node: i for i in report.intakes}
    assert by_node["b"].growth == pytest.approx(0.6) and by_node["b"].warns
    assert by_node["c"].growth == pytest.approx(0.5) and not by_node["c"].warns  # exactly 50%: no warning
    assert by_node["d"].growth == math.inf and by_node["d"].warns
    assert [i.node for i in report.over_capacity] == ["b"]  # 160 GiB > 150; c: 180 <= 200
    text = report.markdown()
    assert "WARNING: b grows by 60%" in text and "WARNING: d grows by unbounded" in text
    assert "| c | 60.00 GiB | 120.00 GiB | 180.00 GiB | 200.00 GiB |" in text
    with pytest.raises(UnsafeChangeError) as refusal:
        report.refuse_if_over()
    assert "b would hold 160.00 GiB (100.00 GiB now + 60.00 GiB received) of its 150.00 GiB" in refusal.value.problem
    assert "c would" not in refusal.value.problem
    assert "Add disk or nodes" in refusal.value.fix


def test_unknown_load_neither_warns_nor_hides_a_capacity_overflow() -> None:
    changes = [RangeChange(TokenRange(0, 100), ("a",), ("a", "b"))]
    report = capacity_report(changes, lambda _: 10 * GIB, loads={}, capacities={"b": 5 * GIB})
    (intake,) = report.intakes
    assert intake.growth is None and not intake.warns
    assert intake.exceeds  # the received bytes alone are past the capacity
    assert "| b | 10.00 GiB | unknown | unknown | 5.00 GiB |" in report.markdown()


def test_plan_intakes_from_size_estimates() -> None:
    """SimpleStrategy 1 -> 2: each range gains the next node clockwise, and receives that range's bytes."""
    plan = build_plan(RING, Replication.simple(1), Replication.simple(2), keyspace="shop")
    mib_by_end = {-6000: 1, 0: 2, 3000: 3, 6000: 4}  # a range's data, by its end token (its owner's token)
    rows = [SizeEstimate("shop", "orders", r.start, r.end, 1024**2, mib_by_end[r.end]) for r in RING.ranges()]
    rows.append(SizeEstimate("other", "t", -6000, 0, 1024**3, 1000))  # another keyspace: not counted
    index = SizeIndex(rows, "shop", ())
    report = capacity_report(plan.diff.affected(), lambda r: index.estimate(r)[0], {}, {})
    mib = 1024**2
    assert {i.node: i.incoming for i in report.intakes} == {
        "10.0.0.2": 1 * mib,  # gains (6000, -6000], owned by 10.0.0.1
        "10.0.1.1": 2 * mib,  # gains (-6000, 0], owned by 10.0.0.2
        "10.0.0.3": 3 * mib,  # gains (0, 3000], owned by 10.0.1.1
        "10.0.0.1": 4 * mib,  # gains (3000, 6000], owned by 10.0.0.3
    }
