"""The typed migration record: its state's predicates, the stored dict's round trip, older dicts, no re-planning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ringward.migration_record as migration_record
from ringward.errors import MigrationError
from ringward.migration import MigrationStep, migration_steps, repair_segments
from ringward.migration_record import MigrationPhase, MigrationRecord, MigrationState
from ringward.plan import build_plan
from ringward.replication import Replication
from ringward.ring import Ring
from ringward.ring_sources import load_ring_file, ring_to_json

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "rings"
SIMPLE_1 = Replication.simple(1)
SIMPLE_2 = Replication.simple(2)
NTS_2 = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2})


@pytest.fixture
def ring() -> Ring:
    return load_ring_file(FIXTURES / "local_num_tokens_4.json")


def _two_steps() -> tuple[MigrationStep, ...]:
    return (MigrationStep(1, 2, SIMPLE_1, SIMPLE_2), MigrationStep(2, 2, SIMPLE_2, NTS_2))


def _record(ring: Ring, **changes: object) -> MigrationRecord:
    fields: dict[str, object] = {
        "migration_id": "ks@run-1",
        "keyspace": "ks",
        "ring": ring,
        "old": SIMPLE_1,
        "new": NTS_2,
        "requested": NTS_2,
        "steps": _two_steps(),
        "lease_owner": "ks@run-1",
        "run_id": "run-1",
        "affected_ranges": 6,
        "total_ranges": 12,
        "summary": "plan",
        "approval_md": "## plan",
        "started_at": "2026-11-24T01:00:00+00:00",
        "dag_id": "keyspace_migration",
    }
    fields.update(changes)
    return MigrationRecord(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "phase", "altered", "done", "cleaned", "is_altered"),
    [
        ("planned", MigrationPhase.PLANNED, 0, False, False, False),
        ("", MigrationPhase.PLANNED, 0, False, False, False),
        ("altered:2", MigrationPhase.ALTERED, 2, False, False, True),
        ("cleaned", MigrationPhase.CLEANED, 0, False, True, True),
        ("done", MigrationPhase.DONE, 0, True, True, True),
    ],
)
def test_a_stored_state_parses_to_its_phase_and_predicates(
    text: str, phase: MigrationPhase, altered: int, done: bool, cleaned: bool, is_altered: bool
) -> None:
    state = MigrationState.parse(text)
    assert (state.phase, state.altered_steps) == (phase, altered)
    assert (state.is_done, state.is_cleaned, state.is_altered) == (done, cleaned, is_altered)
    assert str(state) == (text or "planned")


def test_which_steps_a_state_has_applied() -> None:
    assert [MigrationState.altered(1).step_applied(i, 3) for i in (1, 2, 3)] == [True, False, False]
    assert all(MigrationState.parse("cleaned").step_applied(i, 3) for i in (1, 2, 3))
    assert not MigrationState().step_applied(1, 3)


@pytest.mark.parametrize("text", ["altered:", "altered:0", "altered", "half-done"])
def test_a_state_ringward_never_writes_is_refused_with_the_fix(text: str) -> None:
    with pytest.raises(MigrationError) as refused:
        MigrationState.parse(text)
    assert repr(text) in refused.value.problem and "altered:<step>" in refused.value.fix


def test_the_record_round_trips_through_json_text(ring: Ring) -> None:
    record = _record(ring, state=MigrationState.altered(1), extra={"resumed_by": "run-2"}, deadline_seconds=864.0)
    stored = json.loads(json.dumps(record.to_json()))
    assert MigrationRecord.from_json(stored) == record
    assert stored["state"] == "altered:1" and stored["resumed_by"] == "run-2"
    assert stored["steps"] == [SIMPLE_2.as_json(), NTS_2.as_json()]


def test_the_row_state_wins_over_the_dicts_own(ring: Ring) -> None:
    stored = _record(ring).to_json()
    assert MigrationRecord.from_json(stored, state="cleaned").state.is_cleaned


def test_a_dict_of_the_older_format_reads_with_its_steps_chained(ring: Ring) -> None:
    """Before the typed record the precheck stored no `state` and a rollback had no `requested`."""
    old_format = {
        "migration_id": "ks@run-0",
        "keyspace": "ks",
        "ring": ring_to_json(ring),
        "old": SIMPLE_1.as_json(),
        "new": NTS_2.as_json(),
        "steps": [SIMPLE_2.as_json(), NTS_2.as_json()],
        "affected_ranges": 6,
        "total_ranges": 12,
        "summary": "plan",
        "run_id": "run-0",
    }
    record = MigrationRecord.from_json(old_format)
    assert record.steps == _two_steps()
    assert record.requested == NTS_2 and record.lease_owner == "ks@run-0"
    assert record.state == MigrationState() and record.keep_quorum


def test_an_unreadable_record_is_refused_with_the_fix(ring: Ring) -> None:
    stored = _record(ring).to_json()
    del stored["steps"]
    with pytest.raises(MigrationError) as refused:
        MigrationRecord.from_json(stored)
    assert "unreadable" in refused.value.problem and "precheck" in refused.value.fix


def test_a_step_the_route_does_not_have_is_refused(ring: Ring) -> None:
    with pytest.raises(MigrationError) as refused:
        _record(ring).step(3)
    assert "there is no step 3" in refused.value.problem


def test_later_stages_read_segments_from_the_record_without_planning(
    ring: Ring, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The precheck plans once; a stage's segments come from the stored ring and steps alone."""
    steps = migration_steps(build_plan(ring, SIMPLE_2, NTS_2, keyspace="ks"))
    record = MigrationRecord.from_json(_record(ring, old=SIMPLE_2, steps=tuple(steps)).to_json())

    def no_planning(*args: object, **kwargs: object) -> None:
        raise AssertionError("a later stage planned again")

    monkeypatch.setattr("ringward.plan.build_plan", no_planning)
    assert not hasattr(migration_record, "build_plan")
    assert record.repair_segments(1, "post") == repair_segments(ring, steps[0], "ks", "post")


def test_the_precheck_s_record_of_an_accepted_plan_carries_the_plan_once(ring: Ring) -> None:
    plan = build_plan(ring, SIMPLE_2, NTS_2, keyspace="ks")
    steps = migration_steps(plan)
    record = MigrationRecord.from_plan(
        plan, steps, migration_id="ks@r", requested=NTS_2, lease_owner="ks@r", run_id="r",
        started_at="2026-11-24T01:00:00+00:00", default_keyspace_rf=1, plan_picture="/plans/ks@r.svg",
    )  # fmt: skip
    assert (record.keyspace, record.ring, record.old, record.new, record.steps) == ("ks", ring, SIMPLE_2, NTS_2,
                                                                                     tuple(steps))  # fmt: skip
    assert (record.affected_ranges, record.total_ranges) == (len(plan.affected), plan.total_ranges)
    assert record.summary == plan.summary() and "/plans/ks@r.svg" in record.approval_md
    assert record.state == MigrationState() and MigrationRecord.from_json(record.to_json()) == record
