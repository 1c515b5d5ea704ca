"""What Cassandra stores for an ALTER KEYSPACE, and that the plan analyses that, not the literal map."""

from __future__ import annotations

from pathlib import Path

from ringward.alter import altered_replication
from ringward.plan import build_plan
from ringward.replication import Replication
from ringward.ring_sources import load_ring_file
from ringward.staging import staged_steps

RINGS = Path(__file__).parent.parent / "fixtures" / "rings"
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
