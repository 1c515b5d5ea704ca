"""The Spark operators submit ONE application per stage for all tables, and turn its result into the verdict:
the submission is replaced by a recorder, the cluster's answers by fixed ones."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from ringward.errors import VerificationError
from ringward.ring import TokenRange
from ringward_airflow import spark_operators
from ringward_airflow.spark_operators import SparkBaselineOperator, SparkVerifyOperator
from ringward_spark.ringward_job import parse_args
from ringward_spark.stages import BASELINE, REFERENCE, REPLICAS
from ringward_spark.submit import CassandraOptions

R1, R2 = TokenRange(0, 100), TokenRange(200, 300)
GAINED = {"10.0.0.3": [R1, R2]}


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

    def context(self: Any, _: Any) -> tuple[Any, list[str], list[TokenRange], dict[str, Any]]:
        self._hosts, self._port, self._cassandra_options = ["10.0.0.1"], 9042, CassandraOptions()
        return SimpleNamespace(keyspace="ks"), ["a", "b"], [R1, R2], GAINED

    monkeypatch.setattr(spark_operators._SparkStage, "_context", context)
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
