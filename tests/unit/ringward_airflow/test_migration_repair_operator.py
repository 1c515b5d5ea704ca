"""The migration's repair task decides, without a cluster, which participants are not ready for a session."""

from __future__ import annotations

import pytest
from ringward.errors import ClusterError
from ringward_airflow.migration_operators import MigrationRepairOperator


class FakeNodetool:
    """`status(address)` as each node answers it: a view (address -> UN/DN/...) or an error (JMX refused)."""

    def __init__(self, views: dict[str, dict[str, str] | Exception]) -> None:
        self.views = views

    def status(self, address: str) -> dict[str, str]:
        view = self.views[address]
        if isinstance(view, Exception):
            raise view
        return view


def _operator(views: dict[str, dict[str, str] | Exception]) -> MigrationRepairOperator:
    operator = MigrationRepairOperator(task_id="repair", phase="post", node_wait_seconds=0)
    operator._nodetool = FakeNodetool(views)  # type: ignore[assignment]
    return operator


UP = {"127.0.0.3": "UN", "127.0.0.4": "UN"}


def test_participants_up_everywhere_and_reachable_are_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ringward_airflow.migration_operators.accepts_connections", lambda *a, **k: True)
    assert _operator({"127.0.0.3": UP, "127.0.0.4": UP})._participant_problems(["127.0.0.4", "127.0.0.3"]) == {}


def test_a_node_without_jmx_and_a_node_seen_down_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ringward_airflow.migration_operators.accepts_connections", lambda *a, **k: True)
    views: dict[str, dict[str, str] | Exception] = {
        "127.0.0.2": {"127.0.0.2": "UN", "127.0.0.3": "DN", "127.0.0.4": "UN"},
        "127.0.0.3": ClusterError("nodetool status on 127.0.0.3 failed: Connection refused\nmore"),
        "127.0.0.4": {"127.0.0.2": "UN", "127.0.0.3": "UN", "127.0.0.4": "UN"},
    }
    problems = _operator(views)._participant_problems(["127.0.0.2", "127.0.0.3", "127.0.0.4"])
    assert problems == {"127.0.0.3": "JMX does not answer (nodetool status on 127.0.0.3 failed: Connection refused)"}
    # 127.0.0.3 answers JMX again, but 127.0.0.2 still sees it down (gossip has not caught up)
    views["127.0.0.3"] = UP | {"127.0.0.2": "UN"}
    problems = _operator(views)._participant_problems(["127.0.0.2", "127.0.0.3", "127.0.0.4"])
    assert problems == {"127.0.0.3": "DN as seen from 127.0.0.2"}


def test_a_node_refusing_cql_is_not_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "ringward_airflow.migration_operators.accepts_connections", lambda address, port: address != "127.0.0.3"
    )
    problems = _operator({"127.0.0.3": UP, "127.0.0.4": UP})._participant_problems(["127.0.0.4", "127.0.0.3"])
    assert problems == {"127.0.0.3": "refuses CQL connections on port 9042"}


def test_a_participant_that_stays_down_fails_the_try_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ringward_airflow.migration_operators.accepts_connections", lambda *a, **k: True)
    operator = _operator({"127.0.0.3": ClusterError("refused"), "127.0.0.4": UP})
    with pytest.raises(ClusterError) as failure:
        operator._await_participants(["127.0.0.4", "127.0.0.3"])
    assert "127.0.0.3: JMX does not answer" in failure.value.problem
    assert "post_repair" in failure.value.problem or "repair of step 1" in failure.value.problem


def test_the_deferred_repair_stores_its_stage_progress_each_wave_and_when_its_event_fails_the_try(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deferrable repair task on the in-memory ops store: its first call stores the stage's progress (all
    pending) before it defers; the trigger's event with a failed session fails the try, its progress already
    listing the failed ranges (no further call runs to store it)."""
    from pathlib import Path
    from types import SimpleNamespace

    from airflow.sdk.exceptions import TaskDeferred
    from ringward.errors import RepairError
    from ringward.migration import MigrationStep
    from ringward.migration_record import MigrationRecord
    from ringward.replication import Replication
    from ringward.ring_sources import load_ring_file
    from ringward_airflow import migration_operators
    from ringward_cassandra.memory_ops_store import MemoryOpsStore

    ring = load_ring_file(Path(__file__).resolve().parents[2] / "fixtures" / "rings" / "local_num_tokens_4.json")
    simple, nts = Replication.simple(2), Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 3})
    record = MigrationRecord("ks@run-1", "ks", ring, simple, nts, nts, (MigrationStep(1, 1, simple, nts),), "ks@run-1",
                             "run-1", dag_id="keyspace_migration")  # fmt: skip
    segments = record.repair_segments(1, "post")
    store = MemoryOpsStore()
    store.ensure_schema()
    hook = SimpleNamespace(native_port=lambda: 9042, ops_store=lambda: store, contact_points=lambda: ["127.0.0.1"],
                           close=lambda: None)  # fmt: skip
    nodetool = SimpleNamespace(start_repair=lambda address, keyspace, ranges: f"parent-{address}", close=lambda: None)
    operator = MigrationRepairOperator(task_id="repair", phase="post", step_index=1, deferrable=True,
                                       node_wait_seconds=0)  # fmt: skip
    operator._hook = hook  # type: ignore[assignment]
    operator._nodetool = nodetool  # type: ignore[assignment]
    monkeypatch.setattr(migration_operators, "load_migration", lambda context, task_id: record)
    monkeypatch.setattr(operator, "_await_participants", lambda nodes: None)
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute({})  # type: ignore[arg-type]
    [progress] = store.stage_progress(record.migration_id)
    assert (progress.step, progress.count, progress.done, progress.failed) == ("post_repair:1", len(segments), 0, 0)
    labels = deferred.value.trigger.labels  # type: ignore[attr-defined]
    event = {"status": "dead", "labels": labels,
             "sessions": {parent: {"ok": False, "error": "boom"} for parent in labels}}  # fmt: skip
    with pytest.raises(RepairError):
        operator.execute_complete({}, event)  # type: ignore[arg-type]
    [progress] = store.stage_progress(record.migration_id)
    failed = sum(len(label["ranges"]) for label in labels.values())
    assert failed > 0 and (progress.done, progress.failed) == (0, failed)
    assert progress.codes().triaged(0, failed) == sorted(
        i for i, s in enumerate(segments) if [s.range.start, s.range.end] in
        [r for label in labels.values() for r in label["ranges"]]
    )  # fmt: skip
