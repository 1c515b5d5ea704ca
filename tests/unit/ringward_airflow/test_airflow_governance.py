"""The approval as a control: the precheck refuses unsafe run settings, another person must approve."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException, TaskAwaitingInput
from ringward_airflow.governance import MigrationApprovalOperator, approval_needed, pre_repair_wanted
from ringward_airflow.migration_operators import REFUSAL_KEY, MigrationPrecheckOperator


class _TI:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}
        self.id = "ti-1"

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


@pytest.fixture(autouse=True)
def _no_permissions(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("ALLOW_UNAPPROVED_MIGRATIONS", "ALLOW_SKIPPING_PRE_REPAIR", "ALLOW_CLEANUP_WITHOUT_SNAPSHOT",
                "ALLOW_QUORUM_GAP", "ALLOW_SELF_APPROVAL", "APPROVERS"):  # fmt: skip
        monkeypatch.delenv(f"AIRFLOW__RINGWARD__{key}", raising=False)


def _untouchable(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    touched: list[str] = []

    def cassandra(self: Any) -> Any:
        touched.append("cassandra")
        raise RuntimeError("the precheck touched the cluster")

    monkeypatch.setattr(MigrationPrecheckOperator, "cassandra", property(cassandra))
    return touched


UNSAFE_RUN = {"keyspace": "orders", "replication": {"class": "NetworkTopologyStrategy", "dc1": 3},
              "require_approval": False, "pre_repair": False, "snapshot_before_cleanup": False}  # fmt: skip


def test_a_run_skipping_the_safety_steps_is_refused_before_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    touched = _untouchable(monkeypatch)
    ti = _TI()
    operator = MigrationPrecheckOperator(task_id="precheck", keyspace="orders", replication=UNSAFE_RUN["replication"])
    with pytest.raises(AirflowFailException) as failure:
        operator.execute({"run_id": "r", "ti": ti, "params": UNSAFE_RUN})  # type: ignore[arg-type]
    assert touched == []
    text = str(failure.value)
    for name, permission in (("require_approval", "allow_unapproved_migrations"),
                             ("pre_repair", "allow_skipping_pre_repair"),
                             ("snapshot_before_cleanup", "allow_cleanup_without_snapshot")):  # fmt: skip
        assert f"{name}=false" in text and f"AIRFLOW__RINGWARD__{permission.upper()}" in text
    assert ti.pushed[REFUSAL_KEY]["kind"] == "ConfigurationError"


def test_a_quorum_gap_needs_the_deployments_permission(monkeypatch: pytest.MonkeyPatch) -> None:
    touched = _untouchable(monkeypatch)
    operator = MigrationPrecheckOperator(task_id="precheck", keyspace="orders", replication={"class": "x"},
                                         allow_quorum_gap="True")  # fmt: skip
    with pytest.raises(AirflowFailException, match="allow_quorum_gap=true"):
        operator.execute({"run_id": "r", "ti": _TI(), "params": {}})  # type: ignore[arg-type]
    assert touched == []


def test_with_the_deployments_permission_the_precheck_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    touched = _untouchable(monkeypatch)
    for key in ("ALLOW_UNAPPROVED_MIGRATIONS", "ALLOW_SKIPPING_PRE_REPAIR", "ALLOW_CLEANUP_WITHOUT_SNAPSHOT"):
        monkeypatch.setenv(f"AIRFLOW__RINGWARD__{key}", "True")
    operator = MigrationPrecheckOperator(task_id="precheck", keyspace="orders", replication=UNSAFE_RUN["replication"])
    with pytest.raises(RuntimeError, match="touched the cluster"):
        operator.execute({"run_id": "r", "ti": _TI(), "params": UNSAFE_RUN})  # type: ignore[arg-type]
    assert touched == ["cassandra"]


def test_the_gates_take_the_safe_value_without_the_permission(monkeypatch: pytest.MonkeyPatch) -> None:
    assert approval_needed({"require_approval": False}) is True
    assert pre_repair_wanted({"pre_repair": False}) is True
    monkeypatch.setenv("AIRFLOW__RINGWARD__ALLOW_UNAPPROVED_MIGRATIONS", "True")
    assert approval_needed({"require_approval": False}) is False
    assert pre_repair_wanted({"pre_repair": False}) is True


def _approval() -> MigrationApprovalOperator:
    return MigrationApprovalOperator(task_id="approval", subject="Approve", body="The plan.")


def _context(triggered_by: str | None, **params: Any) -> dict[str, Any]:
    return {"dag_run": SimpleNamespace(triggering_user_name=triggered_by), "params": params,
            "task_instance": _TI(), "ti": _TI()}  # fmt: skip


def _asked(
    monkeypatch: pytest.MonkeyPatch, operator: MigrationApprovalOperator, context: dict[str, Any]
) -> dict[str, Any]:
    """What the approval wrote for Airflow's Required Actions (it then waits for the answer)."""
    written: dict[str, Any] = {}
    monkeypatch.setattr("airflow.providers.standard.operators.hitl.upsert_hitl_detail",
                        lambda **kwargs: written.update(kwargs))  # fmt: skip
    with pytest.raises(TaskAwaitingInput):
        operator.execute(context)  # type: ignore[arg-type]
    return written


def test_the_approval_lists_the_runs_unsafe_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    written = _asked(monkeypatch, _approval(), _context("alice", pre_repair=False, repair_parallelism=3))
    body = written["body"]
    assert body.startswith("The plan.") and "triggered by `alice`" in body
    assert "| `pre_repair` **(gives up a safety step)** | `false` | `true` |" in body
    assert "| `repair_parallelism` | `3` | `2` |" in body
    assert "cannot approve it" in body and written["assigned_users"] is None


def test_the_deployments_approvers_are_assigned_without_the_triggerer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__RINGWARD__APPROVERS", "alice, 7:bob")
    written = _asked(monkeypatch, _approval(), _context("alice"))
    assert written["assigned_users"] == [{"id": "7", "name": "bob"}]
    monkeypatch.setenv("AIRFLOW__RINGWARD__APPROVERS", "alice")
    with pytest.raises(AirflowFailException, match="only user"):
        _approval().execute(_context("alice"))  # type: ignore[arg-type]


def _answer(by: dict[str, str] | None, option: str = "Approve") -> dict[str, Any]:
    return {"chosen_options": [option], "params_input": {}, "responded_at": datetime.now(UTC),
            "responded_by_user": by}  # fmt: skip


def test_the_triggerer_cannot_approve_their_own_run(monkeypatch: pytest.MonkeyPatch) -> None:
    operator = _approval()
    with pytest.raises(AirflowFailException) as refused:
        operator.execute_complete(_context("alice"), _answer({"id": "alice", "name": "alice"}))  # type: ignore[arg-type]
    assert "alice triggered this run and approved it" in str(refused.value)
    assert "AIRFLOW__RINGWARD__ALLOW_SELF_APPROVAL" in str(refused.value)
    with pytest.raises(AirflowFailException, match="did not record who triggered"):
        operator.execute_complete(_context(None), _answer({"id": "bob", "name": "bob"}))  # type: ignore[arg-type]
    approved = operator.execute_complete(_context("alice"), _answer({"id": "bob", "name": "bob"}))  # type: ignore[arg-type]
    assert approved["chosen_options"] == ["Approve"]
    monkeypatch.setenv("AIRFLOW__RINGWARD__ALLOW_SELF_APPROVAL", "True")  # single-operator automation
    assert operator.execute_complete(_context("alice"), _answer({"id": "alice", "name": "alice"}))  # type: ignore[arg-type]
