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
