"""Migration operator logic that needs no cluster: the refusal's trail, the refused task, the report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException
from ringward_airflow.migration_operators import (
    REFUSAL_KEY,
    MigrationPrecheckOperator,
    MigrationRefusedOperator,
    MigrationRepairOperator,
    MigrationReportOperator,
    PreviewVerifyOperator,
)
from ringward_airflow.spark_operators import SparkVerifyOperator


class FakeTI:
    """The few RuntimeTaskInstance calls the operators make, backed by dicts."""

    def __init__(
        self, xcoms: dict[tuple[str, str], Any] | None = None, breadcrumbs: list[dict[str, Any]] | None = None
    ) -> None:
        self.dag_id = "keyspace_migration"
        self.xcoms = dict(xcoms or {})
        self.pushed: dict[str, Any] = {}
        self.breadcrumbs = breadcrumbs
        self.breadcrumb_calls: list[dict[str, str]] = []

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value

    def xcom_pull(self, task_ids: Any, key: str = "return_value") -> Any:
        if isinstance(task_ids, list):
            return [self.xcoms.get((t, key)) for t in task_ids]
        return self.xcoms.get((task_ids, key))

    def get_task_breadcrumbs(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        self.breadcrumb_calls.append({"dag_id": dag_id, "run_id": run_id})
        if self.breadcrumbs is None:
            raise RuntimeError("no supervisor")
        return self.breadcrumbs


def test_a_refusal_is_kept_as_markdown_and_xcom_and_fails_without_retry() -> None:
    ti = FakeTI()
    operator = MigrationPrecheckOperator(task_id="precheck", keyspace="bad name!", replication={"class": "x"})
    with pytest.raises(AirflowFailException) as failure:
        operator.execute({"run_id": "r", "ti": ti})  # type: ignore[arg-type]
    assert "not a valid Cassandra keyspace name.\nFix: Give the keyspace's name" in str(failure.value)
    assert operator.summary.startswith("## REFUSED: replication change of `bad name!`")
    assert operator.template_fields_renderers == {"summary": "md"} and operator.overwrite_rtif_after_execution
    refusal = ti.pushed[REFUSAL_KEY]
    assert refusal["kind"] == "ConfigurationError" and refusal["markdown"] == operator.summary
    assert "not a valid" in refusal["problem"] and refusal["fix"].startswith("Give the keyspace's name")


def test_a_hostile_keyspace_name_stays_text_in_the_refusal_markdown() -> None:
    from markdown_it import MarkdownIt

    hostile = "ks`<img src=x onerror=alert(1)>`"
    operator = MigrationPrecheckOperator(task_id="precheck", keyspace=hostile, replication={"class": "x"})
    with pytest.raises(AirflowFailException):
        operator.execute({"run_id": "r", "ti": FakeTI()})  # type: ignore[arg-type]
    html = MarkdownIt("commonmark", {"html": True}).render(operator.summary)
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_the_target_param_refuses_a_datacenter_given_twice() -> None:
    # Security review (issue 25, finding 12 c): json.loads would keep the last dc1 silently.
    operator = MigrationPrecheckOperator(
        task_id="precheck", keyspace="ks", replication='{"class": "NetworkTopologyStrategy", "dc1": 3, "dc1": 1}'
    )
    ti = FakeTI()
    with pytest.raises(AirflowFailException, match="'dc1' is given twice"):
        operator.execute({"run_id": "r", "ti": ti})  # type: ignore[arg-type]
    assert ti.pushed[REFUSAL_KEY]["kind"] == "ReplicationError"


def test_an_unsafe_plans_folder_costs_the_picture_not_the_precheck(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ringward.plan import build_plan
    from ringward.replication import Replication
    from ringward.ring_sources import load_ring_file

    ring = load_ring_file(Path(__file__).resolve().parents[2] / "fixtures" / "rings" / "seed_num_tokens_4.txt")
    plan = build_plan(ring, Replication.simple(1), Replication.simple(2), keyspace="ks")
    shared = tmp_path / "plans"
    shared.mkdir()
    shared.chmod(0o777)
    operator = MigrationPrecheckOperator(task_id="precheck", plans_dir=str(shared))
    assert operator._show(plan, "ks@r") is None
    logged = capsys.readouterr().out  # Airflow's task logger writes to the captured stdout
    assert "ring picture was not written" in logged and "chmod 700" in logged
    assert list(shared.iterdir()) == []


def test_the_refused_task_fails_the_run_with_the_precheck_refusal() -> None:
    markdown = "## REFUSED: replication change of `ks`\n\n..."
    ti = FakeTI({("precheck", REFUSAL_KEY): {"problem": "Bad.", "fix": "Do this.", "markdown": markdown}})
    operator = MigrationRefusedOperator(task_id="refused")
    assert operator.trigger_rule == "all_failed"
    with pytest.raises(AirflowFailException) as failure:
        operator.execute({"ti": ti})  # type: ignore[arg-type]
    assert str(failure.value) == "The precheck refused the change; nothing was changed.\nBad.\nFix: Do this."
    assert operator.summary == markdown


def test_the_refused_task_after_an_unexpected_precheck_error_says_so() -> None:
    operator = MigrationRefusedOperator(task_id="refused")
    with pytest.raises(AirflowFailException, match="unexpected error"):
        operator.execute({"ti": FakeTI()})  # type: ignore[arg-type]
    assert "not a refusal" in operator.summary


RECORD = {
    "migration_id": "ks@run1",
    "lease_owner": "ks@run1",
    "keyspace": "ks",
    "old": {"class": "SimpleStrategy", "replication_factor": 2},
    "new": {"class": "NetworkTopologyStrategy", "dc1": 2},
    "steps": [{"class": "NetworkTopologyStrategy", "dc1": 2}],
    "affected_ranges": 6,
    "total_ranges": 12,
    "started_at": (datetime.now(UTC) - timedelta(minutes=10)).isoformat(),  # tests needing "now" set their own
}
TASK_IDS = ["precheck", "step_1.repair", "step_1.verify_preview", "step_1.verify_counts", "step_2.repair",
            "step_2.verify_preview", "step_2.verify_counts", "cleanup", "report"]  # fmt: skip


class FakeDag:
    """The report's view of the DAG: task ids in order, and each task's operator class (what it declares)."""

    task_ids = TASK_IDS
    classes: ClassVar[dict[str, type]] = {"repair": MigrationRepairOperator, "verify_preview": PreviewVerifyOperator,
                                          "verify_counts": SparkVerifyOperator}  # fmt: skip

    def get_task(self, task_id: str) -> Any:
        return self.classes.get(task_id.split(".")[-1], BaseOperator)


class FakeStore:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def set_migration_state(self, migration_id: str, state: str) -> None:
        self.calls.append(("state", migration_id, state))

    def release_lease(self, resource: str, owner: str) -> None:
        self.calls.append(("release", resource, owner))

    def acquire_lease(self, resource: str, owner: str, purpose: str) -> None:
        self.calls.append(("lease", resource, owner))


def run_report(monkeypatch: pytest.MonkeyPatch, ti: FakeTI) -> tuple[MigrationReportOperator, dict[str, Any]]:
    store = FakeStore()
    hook = SimpleNamespace(ops_store=lambda: store, close=lambda: None)
    monkeypatch.setattr(MigrationReportOperator, "cassandra", property(lambda self: hook))
    operator = MigrationReportOperator(task_id="report")
    context = {"ti": ti, "run_id": "run1", "dag": FakeDag()}
    report = operator.execute(context)  # type: ignore[arg-type]
    assert store.calls == [("state", "ks@run1", "done"), ("release", "keyspace:ks", "ks@run1")]
    return operator, report


def test_the_report_takes_stage_times_from_airflow_and_the_duration_from_the_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    breadcrumbs = [
        {"task_id": "precheck", "state": "success", "duration": 2.0, "map_index": -1, "operator": "x"},
        {"task_id": "step_1.repair", "state": "success", "duration": 31.0, "map_index": -1, "operator": "x"},
        {"task_id": "step_2.repair", "state": "skipped", "duration": None, "map_index": -1, "operator": "x"},
    ]
    # Ten minutes before now, when the test runs (not when the module was collected, minutes earlier in a suite).
    record = dict(RECORD, started_at=(datetime.now(UTC) - timedelta(minutes=10)).isoformat())
    xcoms = {
        ("precheck", "return_value"): record,
        ("step_1.repair", "return_value"): {"ranges": 6, "repaired": 6},
        ("step_1.verify_preview", "return_value"): {"preview_ranges_in_sync": 6},
        ("step_1.verify_counts", "return_value"): {"users": {"rows_verified": 50}},
        ("cleanup", "return_value"): ["127.0.0.2"],
    }
    ti = FakeTI(xcoms, breadcrumbs)
    operator, report = run_report(monkeypatch, ti)
    assert ti.breadcrumb_calls == [{"dag_id": "keyspace_migration", "run_id": "run1"}]
    assert report["stage_seconds"] == {"precheck": 2.0, "step_1.repair": 31.0}
    assert 599 <= report["total_seconds"] <= 660  # from the precheck record's started_at
    assert report["started_at"] == record["started_at"]
    # Only the steps that exist, and only tasks that returned something: no null entries.
    assert report["repairs"] == {"step_1.repair": {"ranges": 6, "repaired": 6}}
    assert set(report["verification"]) == {"step_1.verify_preview", "step_1.verify_counts"}
    assert None not in report.values() and "step_2" not in str(report)
    assert report["cleaned_nodes"] == ["127.0.0.2"]
    assert operator.summary.startswith("## Migration `ks@run1` done in 10m")
    assert "| step_1.repair | 31s  |" in operator.summary


def test_the_report_survives_missing_task_times(monkeypatch: pytest.MonkeyPatch) -> None:
    ti = FakeTI({("precheck", "return_value"): RECORD}, breadcrumbs=None)  # the SDK call fails
    operator, report = run_report(monkeypatch, ti)
    assert "stage_seconds" not in report or report["stage_seconds"] == {}
    assert "cleaned_nodes" not in report  # cleanup did not run: no entry rather than null
    assert "### Stages" not in operator.summary


# -- the stage operators read the stored record and call their stage: no planning after the precheck ----------
@pytest.fixture
def stored_record() -> dict[str, Any]:
    """A record as the precheck stores it (planned here, before `no_planning` forbids it)."""
    from pathlib import Path

    from ringward.migration import migration_steps
    from ringward.migration_record import MigrationRecord
    from ringward.plan import build_plan
    from ringward.replication import Replication
    from ringward.ring_sources import load_ring_file

    ring = load_ring_file(Path(__file__).resolve().parents[2] / "fixtures" / "rings" / "local_num_tokens_4.json")
    old, new = Replication.simple(2), Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2})
    steps = tuple(migration_steps(build_plan(ring, old, new, keyspace="ks")))
    return MigrationRecord("ks@run1", "ks", ring, old, new, new, steps, "ks@run1", "run1").to_json()


@pytest.fixture
def no_planning(monkeypatch: pytest.MonkeyPatch, stored_record: dict[str, Any]) -> dict[str, Any]:
    """The stored record, with planning forbidden from here on."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a stage after the precheck planned again")

    monkeypatch.setattr("ringward.plan.build_plan", refuse)
    monkeypatch.setattr("ringward_airflow.migration_operators.build_plan", refuse)
    return stored_record


def test_the_alter_task_alters_the_stored_step_and_records_the_state(
    monkeypatch: pytest.MonkeyPatch, no_planning: dict[str, Any]
) -> None:
    from ringward_airflow.migration_operators import KeyspaceAlterOperator

    record = no_planning
    store, calls = FakeStore(), []
    hook = SimpleNamespace(session=object(), ops_store=lambda: store, close=lambda: None)
    monkeypatch.setattr(KeyspaceAlterOperator, "cassandra", property(lambda self: hook))
    monkeypatch.setattr(KeyspaceAlterOperator, "_nodetool_client", lambda self: "nodetool")
    monkeypatch.setattr("ringward_airflow.migration_operators.apply_step", lambda *args: calls.append(args))
    ti = FakeTI({("precheck", "return_value"): record})
    result = KeyspaceAlterOperator(task_id="alter", step_index=1).execute({"ti": ti, "run_id": "run1"})  # type: ignore[arg-type]
    step, keyspace = calls[0][0], calls[0][1]
    assert (step.index, keyspace, calls[0][4]) == (1, "ks", "nodetool")
    assert result == step.after.to_cql() == "{'class': 'NetworkTopologyStrategy', 'dc1': '2'}"
    assert store.calls == [("lease", "keyspace:ks", "ks@run1"), ("state", "ks@run1", "altered:1")]  # renewed first


@pytest.mark.parametrize("allowed", [True, False])
def test_the_cleanup_task_cleans_the_nodes_the_stored_steps_took_ranges_from(
    monkeypatch: pytest.MonkeyPatch, no_planning: dict[str, Any], allowed: bool
) -> None:
    from ringward.migration import cleanup_nodes
    from ringward.migration_record import MigrationRecord
    from ringward_airflow.migration_operators import CleanupOperator

    record = no_planning
    store, done = FakeStore(), []
    hook = SimpleNamespace(ops_store=lambda: store, close=lambda: None)
    nodetool = SimpleNamespace(snapshot=lambda *a: done.append(("snapshot", a[0])),
                               cleanup=lambda *a: done.append(("cleanup", a[0])), close=lambda: None)  # fmt: skip
    monkeypatch.setattr(CleanupOperator, "cassandra", property(lambda self: hook))
    monkeypatch.setattr(CleanupOperator, "_nodetool_client", lambda self: nodetool)
    monkeypatch.setenv("AIRFLOW__RINGWARD__ALLOW_CLEANUP_WITHOUT_SNAPSHOT", str(allowed))
    operator = CleanupOperator(task_id="cleanup", snapshot_before_cleanup="false")
    nodes = operator.execute({"ti": FakeTI({("precheck", "return_value"): record}), "run_id": "run1"})  # type: ignore[arg-type]
    typed = MigrationRecord.from_json(record)
    assert nodes == cleanup_nodes(typed.ring, typed.old, typed.new)
    if allowed:  # the form's "false" means no snapshot, where the deployment allows it
        assert done == [("cleanup", node) for node in nodes]
    else:  # otherwise the snapshot is taken all the same (the precheck refuses such a run first)
        assert done == [step for node in nodes for step in (("snapshot", node), ("cleanup", node))]
    assert store.calls == [("lease", "keyspace:ks", "ks@run1"), ("state", "ks@run1", "cleaned")]


class _Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


def _leased_store(clock: _Clock) -> Any:
    """The in-memory ops store (leases expire as Cassandra's TTL drops them), with the migration states."""
    from ringward_cassandra.memory_ops_store import MemoryOpsStore

    class Store(MemoryOpsStore):
        def set_migration_state(self, migration_id: str, state: str) -> None:
            self.states.append(state)

    store = Store(clock=clock)
    store.states = []
    store.ensure_schema()
    return store


def _stages_on(monkeypatch: pytest.MonkeyPatch, store: Any) -> list[BaseOperator]:
    """The stages after the approval, on `store`, their cluster work faked (each renews the lease first)."""
    from ringward_airflow import migration_operators as ops

    hook = SimpleNamespace(session=object(), ops_store=lambda: store, close=lambda: None, native_port=lambda: 9042)
    for cls in (ops.KeyspaceAlterOperator, MigrationRepairOperator, PreviewVerifyOperator, ops.CleanupOperator):
        monkeypatch.setattr(cls, "cassandra", property(lambda self: hook))
        monkeypatch.setattr(cls, "_nodetool_client", lambda self: SimpleNamespace(close=lambda: None))
    monkeypatch.setattr(ops, "apply_step", lambda *args: None)
    monkeypatch.setattr(ops, "repair_ranges", lambda segments, **kwargs: ops.StageResult(len(segments), 0, 0))
    monkeypatch.setattr(ops, "preview_in_sync", lambda segments, *args: len(segments))
    monkeypatch.setattr(ops, "clean_up", lambda *args, **kwargs: [])
    return [
        ops.KeyspaceAlterOperator(task_id="step_1.alter", step_index=1),
        MigrationRepairOperator(task_id="step_1.repair", step_index=1, deferrable=False),
        PreviewVerifyOperator(task_id="step_1.verify_preview", step_index=1),
        ops.CleanupOperator(task_id="cleanup"),
    ]


def test_a_migration_approved_after_the_leases_first_ttl_keeps_the_nightly_repair_off_its_keyspace(
    monkeypatch: pytest.MonkeyPatch, no_planning: dict[str, Any]
) -> None:
    """The approval may wait 48 h. However late it comes, and however long the stages after it take, the
    keyspace stays leased from the first stage after the approval to the report: the nightly repair plans
    around `leased_keyspaces()` (ringward_airflow.repair_operators), so it never repairs it mid-migration."""
    from ringward_airflow.migration_stages import LEASE_PURPOSE, lease_resource

    clock = _Clock()
    store = _leased_store(clock)
    ttl = timedelta(seconds=store.lease_ttl_seconds)
    store.acquire_lease(lease_resource("ks"), "ks@run1", LEASE_PURPOSE)  # what the precheck takes
    clock.advance(ttl + timedelta(hours=1))  # approved an hour after the precheck's lease ran out
    context = {"ti": FakeTI({("precheck", "return_value"): no_planning}), "run_id": "run1"}
    for stage in _stages_on(monkeypatch, store):
        stage.execute(context)  # type: ignore[arg-type]
        assert "ks" in store.leased_keyspaces(), stage.task_id
        clock.advance(ttl - timedelta(minutes=1))  # the next stage starts just before the lease would lapse
        assert store.leased_keyspaces()["ks"].owner == "ks@run1", stage.task_id
    assert store.states == ["altered:1", "cleaned"]


def test_a_stage_refuses_when_another_migration_took_the_keyspace_after_its_lease_lapsed(
    monkeypatch: pytest.MonkeyPatch, no_planning: dict[str, Any]
) -> None:
    from ringward.errors import MigrationError
    from ringward_airflow import migration_operators as ops
    from ringward_airflow.migration_stages import LEASE_PURPOSE, lease_resource

    clock = _Clock()
    store = _leased_store(clock)
    store.acquire_lease(lease_resource("ks"), "ks@run1", LEASE_PURPOSE)
    clock.advance(timedelta(seconds=store.lease_ttl_seconds + 1))
    store.acquire_lease(lease_resource("ks"), "ks@other", LEASE_PURPOSE)
    alter = _stages_on(monkeypatch, store)[0]
    altered: list[object] = []
    monkeypatch.setattr(ops, "apply_step", lambda *args: altered.append(args))
    with pytest.raises(MigrationError, match="held by ks@other"):
        alter.execute({"ti": FakeTI({("precheck", "return_value"): no_planning}), "run_id": "run1"})  # type: ignore[arg-type]
    assert altered == [] and store.states == []
