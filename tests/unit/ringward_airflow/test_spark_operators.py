"""The Spark operators submit ONE application per stage for all tables, and turn its result into the verdict:
the submission is replaced by a recorder, the cluster's answers by fixed ones."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from ringward.errors import VerificationError
from ringward.ring import TokenRange
from ringward_airflow import spark_operators
from ringward_airflow.spark_operators import SparkBaselineOperator, SparkVerifyOperator, StageInputs
from ringward_spark.ringward_job import parse_args
from ringward_spark.stages import BASELINE, REFERENCE, REPLICAS
from ringward_spark.submit import CassandraOptions

R1, R2 = TokenRange(0, 100), TokenRange(200, 300)
GAINED = {"10.0.0.3": (R1, R2)}


class RecordedSubmission:
    """Stands in for SparkSubmission: keeps what was submitted, answers with `answer(plan)`."""

    submitted: ClassVar[list[tuple[list[str], dict[str, Any]]]] = []
    answer: Any = None

    def __init__(self, job_args: list[str], *, conn_id: str, cassandra: CassandraOptions, plan: dict[str, Any]):
        RecordedSubmission.submitted.append((job_args, plan))
        self.plan = plan

    def run(self) -> dict[str, Any]:
        result: dict[str, Any] = RecordedSubmission.answer(self.plan)
        return result


def _counts(scan: dict[str, Any], rows: dict[tuple[str, str | None], int]) -> dict[str, Any]:
    per_range = rows.get((scan["table"], scan["pinned_host"]), 0)
    return {"mode": "range-counts", **scan, "ranges": [
        {"start": s, "end": e, "rows": per_range, "later_rows": 0, "undated_rows": 0} for s, e in scan["ranges"]
    ]}  # fmt: skip


def _answering(rows: dict[tuple[str, str | None], int]) -> Any:
    def answer(plan: dict[str, Any]) -> dict[str, Any]:
        phases = [{"name": p["name"], "pieces": 1, "tasks": 1, "seconds": 0.1,
                   "scans": [_counts(s, rows) for s in p["scans"]]} for p in plan["phases"]]  # fmt: skip
        return {"mode": "stage", "phases": phases, "seconds": 1.0}

    return answer


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> type[RecordedSubmission]:
    RecordedSubmission.submitted = []
    monkeypatch.setattr(spark_operators, "SparkSubmission", RecordedSubmission)

    inputs = StageInputs("ks", ("a", "b"), (R1, R2), GAINED, ("10.0.0.1",), 9042, CassandraOptions())
    monkeypatch.setattr(spark_operators._SparkStage, "_inputs", lambda self, _: inputs)
    return RecordedSubmission


class _TI:
    def __init__(self, baseline: dict[str, Any]) -> None:
        self.baseline = baseline

    def xcom_pull(self, task_ids: str) -> dict[str, Any]:
        assert task_ids == "step_1.baseline"
        return self.baseline


def test_both_stages_are_one_application_each_and_missing_rows_fail_every_table_at_once(
    recorded: type[RecordedSubmission],
) -> None:
    recorded.answer = _answering({("a", None): 5, ("b", None): 7})
    baseline = SparkBaselineOperator(task_id="baseline").execute({})  # type: ignore[arg-type]
    assert len(recorded.submitted) == 1
    job_args, plan = recorded.submitted[0]
    assert parse_args([*job_args, "--plan", "p", "--output", "o"]).mode == "stage"
    assert [p["name"] for p in plan["phases"]] == [BASELINE]
    assert sorted(baseline["tables"]) == ["a", "b"]

    verify = SparkVerifyOperator(task_id="verify_counts", baseline_task_id="step_1.baseline")
    context: Any = {"ti": _TI(baseline)}
    recorded.answer = _answering({("a", None): 5, ("b", None): 7, ("a", "10.0.0.3"): 5, ("b", "10.0.0.3"): 7})
    evidence = verify.execute(context)
    assert len(recorded.submitted) == 2
    assert [p["name"] for p in recorded.submitted[1][1]["phases"]] == [REPLICAS, REFERENCE]
    assert evidence["a"]["replica_checks"] == 2 and evidence["a"]["rows_verified"] == 10
    assert evidence["b"]["whole_table_rows"] > 14  # the reference covers the rest of the ring too

    recorded.answer = _answering({("a", None): 5, ("b", None): 7, ("a", "10.0.0.3"): 5, ("b", "10.0.0.3"): 0})
    with pytest.raises(VerificationError, match=r"ks\.b verification FAILED") as failed:
        verify.execute(context)
    assert "ks.a" not in str(failed.value) and "full-repair the failed ranges" in str(failed.value)
    assert len(recorded.submitted) == 3


def test_the_stage_inputs_come_from_the_stored_record_and_the_connection_without_side_effects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The step's ranges from the precheck's record (no planning), the tables and settings from the cluster;
    the hook is closed before any Spark job, and the operator keeps nothing of the inputs."""
    from pathlib import Path

    from ringward.migration import migration_steps, verify_targets
    from ringward.migration_record import MigrationRecord
    from ringward.plan import build_plan
    from ringward.replication import Replication
    from ringward.ring_sources import load_ring_file

    ring = load_ring_file(Path(__file__).resolve().parents[2] / "fixtures" / "rings" / "local_num_tokens_4.json")
    old, new = Replication.simple(2), Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 3})
    steps = tuple(migration_steps(build_plan(ring, old, new, keyspace="ks")))
    record = MigrationRecord("ks@run1", "ks", ring, old, new, new, steps, "ks@run1", "run1")
    queries: list[tuple[str, tuple[str, ...]]] = []
    closed: list[bool] = []
    leases: list[tuple[str, str, str]] = []
    connection = SimpleNamespace(port=9142, login="reader", password="pw", extra_dejson={"local_dc": "dc1"})

    def execute(query: str, args: tuple[str, ...]) -> list[Any]:
        queries.append((query, args))
        return [SimpleNamespace(table_name="b"), SimpleNamespace(table_name="a")]

    hook = SimpleNamespace(
        session=SimpleNamespace(execute=execute), cassandra_conn_id="cassandra_default",
        contact_points=lambda: ["10.0.0.1", "10.0.0.2"], get_connection=lambda conn_id: connection,
        close=lambda: closed.append(True),
        ops_store=lambda: SimpleNamespace(acquire_lease=lambda *lease: leases.append(lease)),
    )  # fmt: skip
    spark_role = SimpleNamespace(login="reader_spark", password="spw", extra_dejson={})
    asked: list[str] = []
    monkeypatch.setattr(spark_operators, "_connection_or_none", lambda conn_id: asked.append(conn_id) or spark_role)
    operator = SparkBaselineOperator(task_id="baseline", step_index=len(steps))
    attributes = set(vars(operator))
    operator._hook = hook  # type: ignore[assignment]
    ti = SimpleNamespace(xcom_pull=lambda task_ids: record.to_json() if task_ids == "precheck" else None)

    inputs = operator._inputs({"ti": ti})  # type: ignore[arg-type]

    targets = verify_targets(ring, steps[-1])
    assert targets  # the step adds a replica: there are ranges to count
    assert inputs.keyspace == "ks" and inputs.tables == ("a", "b") and queries[0][1] == ("ks",)
    assert inputs.ranges == tuple(sorted({t.range for t in targets}))
    assert {replica: set(ranges) for replica, ranges in inputs.gained.items()} == {
        replica: {t.range for t in targets if t.replica == replica} for replica in {t.replica for t in targets}
    }
    assert inputs.hosts == ("10.0.0.1", "10.0.0.2") and inputs.port == 9142
    # The job logs in with the Spark connection's read-only role, never the cassandra connection's.
    assert inputs.cassandra == CassandraOptions(local_dc="dc1", username="reader_spark", password="spw")
    assert asked == ["cassandra_spark"]
    assert closed == [True]
    assert leases == [("keyspace:ks", "ks@run1", "keyspace_migration")]  # the stage renewed the migration's lease
    assert set(vars(operator)) == attributes  # no `_hosts`, `_port` or options left on the operator
    with pytest.raises(dataclasses.FrozenInstanceError):
        inputs.port = 1  # type: ignore[misc]
