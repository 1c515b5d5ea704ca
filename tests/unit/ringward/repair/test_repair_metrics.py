"""ringward.repair._metrics: the tagged points of a night's report, a running night and a migration."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from ringward.repair import (
    METRIC_SPECS,
    RepairStatus,
    RunSummary,
    SegmentState,
    approval_points,
    live_points,
    migration_points,
    nightly_points,
    tag_value,
)

NOW = datetime(2026, 11, 28, 6, 0, tzinfo=UTC)
DAY = 86400


def status(table: str, age_days: float | None, *, never: int = 0, share: float | None = 1.0) -> RepairStatus:
    oldest = None if age_days is None else NOW - timedelta(days=age_days)
    return RepairStatus("shop", table, 10 * DAY, NOW, share, oldest, never, 0)


def values(points: list, name: str) -> dict[tuple[tuple[str, str], ...], float]:  # type: ignore[type-arg]
    return {p.tags: p.value for p in points if p.name == name}


def test_a_table_past_its_deadline_is_overdue_and_past_the_whole_gc_grace() -> None:
    summary = RunSummary.of([SegmentState.DONE] * 5 + [SegmentState.FAILED] * 2 + [SegmentState.POSTPONED])
    coverage = {"full": [status("orders", 11), status("carts", 2)], "preview": [status("carts", 0)]}
    points = nightly_points("prod eu", "PARTIAL", coverage, {"full": summary}, finished=NOW, run_seconds=62.4)
    tags = (("cluster", "prod_eu"), ("keyspace", "shop"), ("table", "orders"), ("repair_type", "full"))
    assert values(points, "ringward.repair.table.overdue")[tags] == 1.0
    assert values(points, "ringward.repair.table.gc_grace_used_ratio")[tags] == 1.1
    assert values(points, "ringward.repair.table.oldest_repair_age_seconds")[tags] == 11 * DAY
    carts = (("cluster", "prod_eu"), ("keyspace", "shop"), ("table", "carts"), ("repair_type", "full"))
    assert values(points, "ringward.repair.table.gc_grace_used_ratio")[carts] == 0.2
    # A preview compares ranges and repairs none: no coverage point of its own.
    assert {dict(t)["repair_type"] for t in values(points, "ringward.repair.table.coverage_ratio")} == {"full"}
    run = (("cluster", "prod_eu"), ("repair_type", "full"))
    assert values(points, "ringward.repair.run.segments_done") == {run: 5.0}
    assert values(points, "ringward.repair.run.segments_failed") == {run: 2.0}
    assert values(points, "ringward.repair.run.segments_postponed") == {run: 1.0}
    outcome = {dict(t)["state"]: v for t, v in values(points, "ringward.repair.run.outcome").items()}
    assert outcome == {"DONE": 0.0, "PARTIAL": 1.0, "FAILED": 0.0, "DISABLED": 0.0}
    assert values(points, "ringward.repair.run.duration_seconds") == {(("cluster", "prod_eu"),): 62.0}


def test_a_table_never_repaired_counts_as_overdue_and_one_nothing_to_repair_sends_nothing() -> None:
    coverage = {"full": [status("orders", None, never=3, share=0.0), status("local", None, share=None)]}
    points = nightly_points("c1", "DONE", coverage, {}, finished=NOW)
    tables = {dict(p.tags)["table"] for p in points if p.name.startswith("ringward.repair.table.")}
    assert tables == {"orders"}
    assert set(values(points, "ringward.repair.table.oldest_repair_age_seconds").values()) == {-1.0}
    assert set(values(points, "ringward.repair.table.gc_grace_used_ratio").values()) == {1.0}
    assert set(values(points, "ringward.repair.table.overdue").values()) == {1.0}


def test_every_point_carries_exactly_the_tags_its_metric_declares() -> None:
    summary = RunSummary.of([SegmentState.DONE])
    points = [
        *nightly_points("c1", "DONE", {"full": [status("t", 1)]}, {"full": summary}, finished=NOW,
                        run_seconds=1.0, longest_unrepaired_seconds=5),
        *live_points("c1", "incremental", {"done": 3, "sessions": 2, "held_back": 4, "total": 9}),
        *migration_points("c1", {"keyspace": "shop", "ranges_moved": 7, "total_ranges": 12, "steps": [{}, {}],
                                 "total_seconds": 30.2, "stage_seconds": {"precheck": 1.5}}, NOW),
        *approval_points("c1", "shop", "approval", NOW),
    ]  # fmt: skip
    assert len(points) > 20
    assert [p for p in points if tuple(k for k, _ in p.tags) != METRIC_SPECS[p.name].tags] == []


def test_live_points_read_the_progress_record_and_a_final_record_runs_no_session() -> None:
    running = live_points("c1", "full", {"done": 3, "failed": 1, "postponed": 2, "sessions": 2, "held_back": 4})
    tags = (("cluster", "c1"), ("repair_type", "full"))
    assert values(running, "ringward.repair.live.sessions_running") == {tags: 2.0}
    assert values(running, "ringward.repair.live.back_pressure_holds") == {tags: 4.0}
    assert values(running, "ringward.repair.live.segments_failed") == {tags: 1.0}
    final = live_points("c1", "full", {"done": 3, "sessions": 2, "final": True})
    assert values(final, "ringward.repair.live.sessions_running") == {tags: 0.0}


def test_migration_points_name_the_keyspace_and_each_stage() -> None:
    report = {"keyspace": "shop", "ranges_moved": 7, "total_ranges": 12, "steps": [{}, {}], "total_seconds": 30.2,
              "stage_seconds": {"precheck": 1.5, "step_1.alter": 3.0}}  # fmt: skip
    points = migration_points("c1", report, NOW)
    ks = (("cluster", "c1"), ("keyspace", "shop"))
    assert values(points, "ringward.migration.ranges_moved") == {ks: 7.0}
    assert values(points, "ringward.migration.steps") == {ks: 2.0}
    assert values(points, "ringward.migration.stage_seconds") == {(*ks, ("stage", "precheck")): 2.0,
                                                                  (*ks, ("stage", "step_1.alter")): 3.0}  # fmt: skip
    assert approval_points("c1", "shop", "approval", None)[0].value == 0.0


@pytest.mark.parametrize(
    ("raw", "safe"), [("prod eu:1", "prod_eu_1"), ("a,b=c", "a_b_c"), ("", "_"), ("x.y-z/1", "x.y-z/1")]
)
def test_tag_values_keep_only_what_airflow_lets_through(raw: str, safe: str) -> None:
    assert tag_value(raw) == safe


def test_the_emitter_sends_each_point_as_a_tagged_gauge_and_an_approval_names_its_keyspace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from ringward_airflow import metrics

    sent: list[tuple[str, float, dict[str, str]]] = []
    monkeypatch.setattr(metrics.Stats, "gauge", lambda name, value, tags: sent.append((name, value, tags)))
    ti = SimpleNamespace(xcom_pull=lambda task_ids: {"keyspace": "shop"} if task_ids == "precheck" else None)
    metrics.emit_approval({"ti": ti}, "cleanup_approval", NOW, "c1")
    metrics.emit_approval({"ti": ti}, "cleanup_approval", None, "c1")
    tags = {"cluster": "c1", "keyspace": "shop", "approval": "cleanup_approval"}
    assert sent == [("ringward.migration.approval_waiting_since_seconds", NOW.timestamp(), tags),
                    ("ringward.migration.approval_waiting_since_seconds", 0.0, tags)]  # fmt: skip
    broken = SimpleNamespace(xcom_pull=lambda task_ids: 1 / 0)
    metrics.emit_approval({"ti": broken}, "approval", NOW, "c1")  # logged, never raised into the approval
    assert len(sent) == 2
    assert metrics.emit(live_points("c1", "full", {"done": 1})) == 6 and len(sent) == 8
