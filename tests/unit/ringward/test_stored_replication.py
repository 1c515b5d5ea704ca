"""What Cassandra stores for an ALTER KEYSPACE, and that the plan analyses that, not the literal map."""

from __future__ import annotations

from pathlib import Path

import pytest
from ringward.cassandra_release import CASSANDRA_5_0, CassandraRelease
from ringward.errors import ReplicationError
from ringward.migration import migration_steps
from ringward.placement import replica_map
from ringward.plan import build_plan
from ringward.replication import Replication
from ringward.ring import Node, Ring
from ringward.ring_sources import load_ring_file
from ringward.staging import staged_steps
from ringward.stored_replication import altered_replication

RINGS = Path(__file__).resolve().parents[2] / "fixtures" / "rings"
DCS = ["dc1", "dc2"]


def nts(factors: dict[str, int]) -> Replication:
    return Replication.network_topology(factors)


def test_explicit_factors_replace_the_whole_map() -> None:
    assert altered_replication(nts({"dc1": 3, "dc2": 3}), nts({"dc1": 2}), DCS) == nts({"dc1": 2})


def test_shorthand_keeps_existing_datacenters_and_fills_the_others() -> None:
    requested = nts({"replication_factor": 2})
    assert altered_replication(nts({"dc1": 3}), requested, DCS) == nts({"dc1": 3, "dc2": 2})


def test_bare_nts_after_simple_strategy_carries_the_factor_over() -> None:
    requested = Replication.parse({"class": "NetworkTopologyStrategy"})
    assert altered_replication(Replication.simple(3), requested, DCS) == nts({"dc1": 3, "dc2": 3})


def test_simple_strategy_is_stored_as_given() -> None:
    assert altered_replication(nts({"dc1": 3}), Replication.simple(2), DCS) == Replication.simple(2)


def test_shorthand_that_changes_nothing_is_a_no_op() -> None:
    ring = load_ring_file(RINGS / "two_dc.json")
    plan = build_plan(ring, nts({"dc1": 2, "dc2": 2}), nts({"replication_factor": 3}), keyspace="ks")
    assert "no_op" in {f.code for f in plan.refusals}
    assert not plan.affected


def test_staged_route_spells_out_a_shorthand_target() -> None:
    """After intermediate steps the shorthand would keep their factors: the last step must be explicit."""
    ring = load_ring_file(RINGS / "two_dc.json")
    old = nts({"dc1": 2, "dc2": 0})
    requested = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 0, "replication_factor": 2})
    steps = staged_steps(ring, old, requested)
    assert steps[-1] == nts({"dc1": 0, "dc2": 2})


# --- requested settings read as Cassandra 5.0 reads them (issue 15, section 4) ---------------------------
# Cases mirror Cassandra 5.0's own AlterTest (default_keyspace_rf test) and NetworkTopologyStrategy /
# SimpleStrategy.prepareOptions: DATA_CENTER, DATA_CENTER_REMOTE there are dc1, dc2 here.

SIMPLE = {"class": "SimpleStrategy"}
BARE_NTS = {"class": "NetworkTopologyStrategy"}


def parse(options: dict[str, object]) -> Replication:
    return Replication.parse(options)


@pytest.mark.parametrize("default_rf", [1, 2])
def test_create_without_factors_takes_default_keyspace_rf(default_rf: int) -> None:
    assert altered_replication(None, parse(SIMPLE), DCS, default_rf) == Replication.simple(default_rf)
    assert altered_replication(None, parse(BARE_NTS), DCS, default_rf) == nts({"dc1": default_rf, "dc2": default_rf})
    shorthand = parse({**BARE_NTS, "replication_factor": "2"})
    assert altered_replication(None, shorthand, DCS, default_rf) == nts({"dc1": 2, "dc2": 2})


def test_bare_nts_after_nts_keeps_the_keyspace_datacenters() -> None:
    """AlterTest: NTS {dc1: 2, dc2: 2} altered to a bare NTS stays {dc1: 2, dc2: 2}."""
    assert altered_replication(nts({"dc1": 2, "dc2": 2}), parse(BARE_NTS), DCS) == nts({"dc1": 2, "dc2": 2})


@pytest.mark.parametrize("default_rf", [1, 3])
def test_bare_nts_after_nts_gives_datacenters_not_in_the_keyspace_default_keyspace_rf(default_rf: int) -> None:
    """prepareOptions reads a bare NTS as the shorthand at default_keyspace_rf: existing datacenters keep
    their factor, the ring's other datacenters get the default."""
    altered = altered_replication(nts({"dc1": 3}), parse(BARE_NTS), DCS, default_rf)
    assert altered == nts({"dc1": 3, "dc2": default_rf})


def test_bare_nts_after_simple_strategy_keeps_its_factor_everywhere() -> None:
    """AlterTest: SimpleStrategy RF 2 altered to a bare NTS is {dc1: 2, dc2: 2}, whatever the default."""
    assert altered_replication(Replication.simple(2), parse(BARE_NTS), DCS, 3) == nts({"dc1": 2, "dc2": 2})


def test_simple_strategy_without_factor_after_nts_takes_default_keyspace_rf() -> None:
    """AlterTest: NTS {dc1: 2, dc2: 2} altered to SimpleStrategy without a factor gets default_keyspace_rf."""
    assert altered_replication(nts({"dc1": 2, "dc2": 2}), parse(SIMPLE), DCS, 1) == Replication.simple(1)
    assert altered_replication(nts({"dc1": 2, "dc2": 2}), parse(SIMPLE), DCS, 3) == Replication.simple(3)


def test_simple_strategy_without_factor_after_simple_keeps_the_factor() -> None:
    assert altered_replication(Replication.simple(3), parse(SIMPLE), DCS, 1) == Replication.simple(3)


def test_shorthand_on_alter_keeps_existing_factors_and_drops_zeros() -> None:
    requested = parse({**BARE_NTS, "replication_factor": "1", "dc2": "0"})
    assert altered_replication(nts({"dc1": 3, "dc2": 2}), requested, ["dc1", "dc2", "dc3"]) == nts({"dc1": 3, "dc3": 1})


def test_full_and_short_class_names_and_string_factors_read_alike() -> None:
    full = parse({"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "dc1": "3", "dc2": "+1"})
    assert full == parse({"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 1})
    assert parse({"class": "org.apache.cassandra.locator.SimpleStrategy"}) == parse(SIMPLE)


def test_issue_bare_nts_on_a_one_node_dc_keeps_its_factor() -> None:
    """The issue's example: --from NTS replication_factor 3 --to a bare NTS on a one-node dc1. Cassandra keeps
    dc1 at 3, so the plan is a no-op, not an empty placement."""
    ring = Ring.of([Node("127.0.0.2", "dc1", "rack1", (0,))])
    plan = build_plan(ring, parse({**BARE_NTS, "replication_factor": 3}), parse(BARE_NTS), keyspace="ks")
    codes = {f.code for f in plan.refusals}
    assert "no_op" in codes and "no_replicas" not in codes  # (rf 3 on one node is refused on its own)
    assert all(change.new == ("127.0.0.2",) for change in plan.ranges)


def test_simple_strategy_without_factor_is_planned_not_refused() -> None:
    ring = load_ring_file(RINGS / "seed_num_tokens_4.txt")
    plan = build_plan(ring, nts({"dc1": 2}), parse(SIMPLE), keyspace="ks", default_keyspace_rf=2)
    assert "malformed_replication" not in {f.code for f in plan.findings}
    assert {len(change.new) for change in plan.ranges} == {2}


def test_a_mixed_case_shorthand_is_refused_like_cassandra_refuses_it() -> None:
    with pytest.raises(ReplicationError, match="lowercase"):
        parse({**BARE_NTS, "Replication_Factor": 3})


def test_every_step_is_spelled_as_cassandra_stores_it() -> None:
    """A bare NTS after NTS {dc1: 2} means {dc1: 2, dc2: 1}: the route's ALTER says so, so the ALTER, the
    placement the migration checks after it and a retry's comparison all see one setting."""
    ring = load_ring_file(RINGS / "two_dc.json")
    plan = build_plan(ring, nts({"dc1": 2}), parse(BARE_NTS), keyspace="ks")
    assert plan.steps[-1] == nts({"dc1": 2, "dc2": 1})
    step = migration_steps(plan)[-1]
    assert step.placements(ring)[1] is replica_map(ring, nts({"dc1": 2, "dc2": 1}))


# --- the ALTER model per release (issue 26) ---------------------------------------------------------------
# Facts from the sources jars on Maven Central (org.apache.cassandra:cassandra-all:<v>:sources):
# - 3.11.19 cql3/statements/KeyspaceAttributes.asAlteredKeyspaceParams -> schema/ReplicationParams.fromMap: the
#   requested map as given (no prepareOptions); locator/NetworkTopologyStrategy.validateOptions: "replication_factor
#   is an option for SimpleStrategy, not NetworkTopologyStrategy" (equalsIgnoreCase); locator/SimpleStrategy
#   .validateOptions: "SimpleStrategy requires a replication_factor strategy option."; NTS has no
#   recognizedOptions (any datacenter name) and no "at least one datacenter" check.
# - 4.0.19 NetworkTopologyStrategy.prepareOptions: the shorthand and the SimpleStrategy carry-over, no
#   default_keyspace_rf (DatabaseDescriptor has no getDefaultKeyspaceRF); SimpleStrategy has no prepareOptions;
#   NTS.validateExpectedOptions: "Configuration for at least one datacenter must be present".
# - 4.1.10 NetworkTopologyStrategy.prepareOptions and SimpleStrategy.prepareOptions: identical to 5.0.9's.
V3_11, V4_0, V4_1 = (CassandraRelease.parse(text) for text in ("3.11.19", "4.0.19", "4.1.10"))


@pytest.mark.parametrize("release", [V4_0, V4_1, CASSANDRA_5_0])
def test_the_shorthand_expands_from_4_0_on(release: CassandraRelease) -> None:
    requested = parse({**BARE_NTS, "replication_factor": 2})
    assert altered_replication(nts({"dc1": 3}), requested, DCS, release=release) == nts({"dc1": 3, "dc2": 2})


def test_3_11_refuses_the_shorthand_in_any_spelling() -> None:
    with pytest.raises(ReplicationError, match=r"3\.11\.19 refuses.*option for SimpleStrategy"):
        altered_replication(nts({"dc1": 3}), parse({**BARE_NTS, "replication_factor": 2}), DCS, release=V3_11)
    with pytest.raises(ReplicationError, match=r"shorthand is new in 4\.0"):  # a current setting alike
        altered_replication(parse({**BARE_NTS, "replication_factor": 2}), nts({"dc1": 3}), DCS, release=V3_11)


def test_3_11_stores_the_map_as_given_without_carrying_datacenters_over() -> None:
    """No prepareOptions: ALTER to {dc2: 2} leaves dc1 without replicas, as on 5.0; a zero factor places none."""
    assert altered_replication(nts({"dc1": 3}), nts({"dc2": 2}), DCS, release=V3_11) == nts({"dc2": 2})
    assert altered_replication(nts({"dc1": 3}), nts({"dc1": 3, "dc2": 0}), DCS, release=V3_11) == nts({"dc1": 3})
    assert altered_replication(None, Replication.simple(2), DCS, release=V3_11) == Replication.simple(2)


@pytest.mark.parametrize("current", [None, Replication.simple(2), nts({"dc1": 2})])
def test_3_11_refuses_a_network_topology_without_any_replica(current: Replication | None) -> None:
    """3.11 accepts a bare NTS (or only zeros) and stores a keyspace without replicas: ringward refuses it."""
    for requested in (parse(BARE_NTS), nts({"dc1": 0})):
        with pytest.raises(ReplicationError, match="without a replica"):
            altered_replication(current, requested, DCS, 3, release=V3_11)


@pytest.mark.parametrize("release", [V3_11, V4_0])
@pytest.mark.parametrize("current", [None, Replication.simple(3), nts({"dc1": 2})])
def test_simple_strategy_needs_its_factor_below_4_1(release: CassandraRelease, current: Replication | None) -> None:
    with pytest.raises(ReplicationError, match="requires a replication_factor strategy option"):
        altered_replication(current, parse(SIMPLE), DCS, 3, release=release)


@pytest.mark.parametrize("default_rf", [1, 3])
def test_4_1_fills_a_simple_strategy_from_default_keyspace_rf(default_rf: int) -> None:
    altered = altered_replication(nts({"dc1": 2}), parse(SIMPLE), DCS, default_rf, release=V4_1)
    assert altered == Replication.simple(default_rf)


def test_4_0_bare_nts_takes_only_a_simple_strategy_factor() -> None:
    """prepareOptions of 4.0: the SimpleStrategy carry-over, and nothing else (no default_keyspace_rf)."""
    assert altered_replication(Replication.simple(2), parse(BARE_NTS), DCS, 3, release=V4_0) == nts(
        {"dc1": 2, "dc2": 2}
    )
    for current in (None, nts({"dc1": 2})):
        with pytest.raises(ReplicationError, match="at least one datacenter must be present"):
            altered_replication(current, parse(BARE_NTS), DCS, 3, release=V4_0)


@pytest.mark.parametrize("release", [V4_0, V4_1, CASSANDRA_5_0])
def test_only_zero_factors_are_refused_from_4_0_on(release: CassandraRelease) -> None:
    """Zeros are dropped before validateExpectedOptions, which then finds no datacenter."""
    with pytest.raises(ReplicationError, match="at least one datacenter must be present"):
        altered_replication(nts({"dc1": 2}), nts({"dc1": 0}), DCS, release=release)


def test_the_plan_reads_the_request_as_the_cluster_release_does() -> None:
    """Bare NTS after NTS {dc1: 2}: 5.0 adds dc2 at default_keyspace_rf; 4.0 and 3.11 refuse the request."""
    ring = load_ring_file(RINGS / "two_dc.json")
    plan = build_plan(ring, nts({"dc1": 2}), parse(BARE_NTS), keyspace="ks", release=V4_1)
    assert plan.steps[-1] == nts({"dc1": 2, "dc2": 1})
    for release, refusal in ((V4_0, "at least one datacenter"), (V3_11, "without a replica")):
        with pytest.raises(ReplicationError, match=refusal):
            build_plan(ring, nts({"dc1": 2}), parse(BARE_NTS), keyspace="ks", release=release)


def test_release_versions_parse_to_their_line() -> None:
    assert (V3_11.line, V4_0.line, str(V4_1)) == ("3.11", "4.0", "4.1.10")
    assert CassandraRelease.parse("5.0-rc1") == CASSANDRA_5_0
    assert V3_11.is_read_only and not V4_0.is_read_only
    assert (V4_0.has_default_keyspace_rf, V4_1.has_default_keyspace_rf) == (False, True)
