"""Replication settings: the forms Cassandra and users write, and every refusal."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ringward.errors import ReplicationError
from ringward.replication import Replication
from ringward.ring import Node, Ring


def test_parses_system_schema_form_with_qualified_class_and_string_factors() -> None:
    stored = {"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "2"}
    replication = Replication.parse(stored)
    assert replication == Replication.simple(2)
    assert replication.strategy == "SimpleStrategy"
    assert replication.factors == {"replication_factor": 2}


def test_parses_user_form_json_text() -> None:
    replication = Replication.parse('{"class": "NetworkTopologyStrategy", "dc1": 2, "DC2": "0"}')
    assert replication.strategy == "NetworkTopologyStrategy"
    assert replication.factors == {"dc1": 2, "DC2": 0}
    assert replication.datacenters() == ("dc1", "DC2")


def test_datacenter_names_are_case_sensitive() -> None:
    replication = Replication.network_topology({"dc1": 3})
    assert replication.factor_for("dc1") == 3
    assert replication.factor_for("DC1") == 0


def test_factor_for_simple_strategy_is_its_ring_wide_factor() -> None:
    assert Replication.simple(3).factor_for("anything") == 3
    assert Replication.simple(3).datacenters() == ()


def test_equality_ignores_option_order_and_is_hashable() -> None:
    a = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 1, "dc2": 2})
    b = Replication.parse({"class": "NetworkTopologyStrategy", "dc2": "2", "dc1": "1"})
    assert a == b and hash(a) == hash(b)
    assert a != Replication.network_topology({"dc1": 1, "dc2": 3})


def test_replication_factor_shorthand_expands_to_ring_datacenters() -> None:
    shorthand = Replication.parse({"class": "NetworkTopologyStrategy", "replication_factor": "3", "dc2": 1})
    assert shorthand.default_factor == 3
    assert shorthand.factor_for("dc9") == 3
    assert shorthand.expand(["dc1", "dc2"]) == Replication.network_topology({"dc1": 3, "dc2": 1})
    explicit = Replication.network_topology({"dc1": 1})
    assert explicit.expand(["dc1", "dc2"]) == explicit


def test_expand_on_alter_keeps_unmentioned_datacenters_and_drops_zeros() -> None:
    previous = Replication.network_topology({"dc1": 3, "dc2": 2, "dc3": 1})
    altered = Replication.parse({"class": "NetworkTopologyStrategy", "replication_factor": 2, "dc3": 0})
    assert altered.expand(["dc1", "dc2", "dc3", "dc4"], previous) == Replication.network_topology(
        {"dc1": 3, "dc2": 2, "dc4": 2}
    )


def test_bare_network_topology_after_simple_strategy_takes_the_old_factor() -> None:
    bare = Replication.parse({"class": "NetworkTopologyStrategy"})
    assert bare.expand(["dc1", "dc2"], Replication.simple(2)) == Replication.network_topology({"dc1": 2, "dc2": 2})


def test_bare_settings_on_create_take_default_keyspace_rf() -> None:
    """CREATE KEYSPACE with a bare NTS or a SimpleStrategy without factor: default_keyspace_rf (1)."""
    assert Replication.parse({"class": "NetworkTopologyStrategy"}).expand(["dc1", "dc2"]) == (
        Replication.network_topology({"dc1": 1, "dc2": 1})
    )
    assert Replication.parse({"class": "SimpleStrategy"}).expand(["dc1"]) == Replication.simple(1)


def test_string_factors_are_read_as_java_integer_valueof_reads_them() -> None:
    assert Replication.parse({"class": "NetworkTopologyStrategy", "dc1": "+3", "dc2": "03"}).factors == {
        "dc1": 3,
        "dc2": 3,
    }
    for spaced in (" 3", "3 ", "3\n"):
        with pytest.raises(ReplicationError, match="non-negative whole number"):
            Replication.parse({"class": "NetworkTopologyStrategy", "dc1": spaced})
    with pytest.raises(ReplicationError, match="non-negative whole number"):
        Replication.parse({"class": "NetworkTopologyStrategy", "dc1": str(2**31)})  # past a Java int


@pytest.mark.parametrize("strategy", ["NetworkTopologyStrategy", "SimpleStrategy"])
@pytest.mark.parametrize("key", ["Replication_Factor", "REPLICATION_FACTOR", "replication_Factor"])
def test_only_the_lowercase_shorthand_is_the_shorthand(strategy: str, key: str) -> None:
    """Cassandra expands only 'replication_factor'; NTS then refuses any other spelling of it as an option."""
    with pytest.raises(ReplicationError, match="lowercase") as refusal:
        Replication.parse({"class": strategy, key: "3"})
    assert "'replication_factor' in lowercase" in refusal.value.fix


def test_total_factor_caps_each_datacenter_at_its_nodes() -> None:
    ring = Ring.of([Node("a", "dc1", "r1", (1,)), Node("b", "dc1", "r2", (2,)), Node("c", "dc2", "r1", (3,))])
    assert Replication.network_topology({"dc1": 3, "dc2": 3, "dc3": 3}).total_factor(ring) == 3
    assert Replication.simple(2).total_factor(ring) == 2
    assert Replication.simple(5).total_factor(ring) == 3


def test_to_cql_quotes_and_escapes() -> None:
    replication = Replication.network_topology({"dc1": 3, "it's": 1})
    assert replication.to_cql() == "{'class': 'NetworkTopologyStrategy', 'dc1': '3', 'it''s': '1'}"


def test_as_json_round_trips() -> None:
    replication = Replication.network_topology({"dc1": 3, "dc2": 0})
    assert replication.as_json() == {"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 0}
    assert Replication.parse(json.dumps(replication.as_json())) == replication


@given(
    st.dictionaries(
        st.text(min_size=1).filter(lambda k: k.lower() not in {"class", "replication_factor"}),
        st.integers(0, 10**6),
        min_size=1,
    )
)
def test_any_datacenter_names_round_trip_through_json(factors: dict[str, int]) -> None:
    replication = Replication.network_topology(factors)
    assert Replication.parse(json.dumps(replication.as_json())) == replication


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("{'class': 'SimpleStrategy'}", "not valid JSON"),
        ("[1, 2]", "not a map"),
        ({"dc1": 3}, "no 'class'"),
        ({"class": "LocalStrategy"}, "not supported"),
        ({"class": "EverywhereStrategy"}, "not supported"),
        ({"class": "com.example.MyStrategy", "dc1": 1}, "not supported"),
        ({"class": "networktopologystrategy", "dc1": 1}, "not supported"),
        ({"class": 3}, "not a strategy name"),
        ({"class": "NetworkTopologyStrategy", "dc1": "3/1"}, "Transient replication"),
        ({"class": "NetworkTopologyStrategy", "dc1": -1}, "non-negative whole number"),
        ({"class": "NetworkTopologyStrategy", "dc1": "-2"}, "non-negative whole number"),
        ({"class": "NetworkTopologyStrategy", "dc1": 2.5}, "non-negative whole number"),
        ({"class": "NetworkTopologyStrategy", "dc1": "2.5"}, "non-negative whole number"),
        ({"class": "NetworkTopologyStrategy", "dc1": "three"}, "non-negative whole number"),
        ({"class": "NetworkTopologyStrategy", "dc1": True}, "non-negative whole number"),
        ({"class": "NetworkTopologyStrategy", "": 1}, "not a non-empty string"),
        ({"class": "SimpleStrategy", "replication_factor": 2, "dc1": 1}, "takes one option"),
        ({"class": "SimpleStrategy", "dc1": 1}, "takes one option"),
        ({"class": "SimpleStrategy", "replication_factor": "2/1"}, "Transient replication"),
        (
            {"class": "NetworkTopologyStrategy", "replication_factor": 1, "REPLICATION_FACTOR": 2},
            "not the replication_factor shorthand",
        ),
    ],
)
def test_refusals_name_problem_and_fix(value: str | dict[str, object], problem: str) -> None:
    with pytest.raises(ReplicationError, match=problem) as refusal:
        Replication.parse(value)
    assert refusal.value.fix


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ReplicationError, match="not supported"):
        Replication("OldNetworkTopologyStrategy", {"dc1": 1})
    with pytest.raises(ReplicationError, match="non-negative"):
        Replication.network_topology({"dc1": -3})


def test_direct_construction_refuses_a_mixed_case_shorthand() -> None:
    replication = Replication("NetworkTopologyStrategy", {"replication_factor": 3})
    assert replication.default_factor == 3
    assert replication.datacenters() == ()
    with pytest.raises(ReplicationError, match="not the replication_factor shorthand"):
        Replication("NetworkTopologyStrategy", {"Replication_Factor": 3})


# -- JSON from users (security review, issue 25, finding 12 b and c) -----------------------------------------
def test_a_datacenter_given_twice_in_json_is_refused() -> None:
    # json.loads keeps the last of duplicate keys: {"dc1": 3, "dc1": 0} would silently mean dc1: 0.
    with pytest.raises(ReplicationError, match="'dc1' is given twice") as refusal:
        Replication.parse('{"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 1, "dc1": 0}')
    assert "Give each datacenter once" in refusal.value.fix


@pytest.mark.parametrize("deep", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000])
def test_deeply_nested_json_is_refused_not_a_traceback(deep: str) -> None:
    with pytest.raises(ReplicationError, match="nested too deeply") as refusal:
        Replication.parse(deep)
    assert refusal.value.fix


def test_a_number_too_long_to_read_is_refused() -> None:
    with pytest.raises(ReplicationError, match="not valid JSON"):
        Replication.parse('{"class": "SimpleStrategy", "replication_factor": ' + "9" * 5000 + "}")
