"""ringward's LocalExecutor drops the end event of a workload superseded by a resumed one of the same key."""

from __future__ import annotations

import queue
from typing import Any

import pytest
from airflow.executors.local_executor import LocalExecutor as AirflowLocalExecutor
from airflow.models.taskinstancekey import TaskInstanceKey
from airflow.utils.state import TaskInstanceState
from ringward_airflow.executor import LocalExecutor

KEY = TaskInstanceKey("keyspace_migration", "step_1.repair", "manual__1", 1, -1)


class _Task:
    """Stands in for an ExecuteTask workload (only its key matters to the counting)."""

    def __init__(self, key: TaskInstanceKey) -> None:
        self.key = key


@pytest.fixture
def executor(monkeypatch: pytest.MonkeyPatch) -> LocalExecutor:
    monkeypatch.setattr("ringward_airflow.executor.ExecuteTask", _Task)
    monkeypatch.setattr(AirflowLocalExecutor, "_process_workloads", lambda self, workloads: None)
    monkeypatch.setattr(AirflowLocalExecutor, "start", lambda self: None)
    executor = LocalExecutor()
    executor.start()
    executor.result_queue = queue.SimpleQueue()  # type: ignore[assignment]
    return executor


def finish(executor: LocalExecutor, key: Any = KEY) -> None:
    executor.result_queue.put((key, TaskInstanceState.SUCCESS, None))
    executor._read_results()


def test_the_deferral_exit_is_dropped_when_the_resumed_run_is_already_handed_to_a_worker(
    executor: LocalExecutor,
) -> None:
    executor._process_workloads([_Task(KEY)])  # the first run, which defers
    executor._process_workloads([_Task(KEY)])  # the trigger fired: the resumed run, same key
    finish(executor)  # the first run's process ends only now
    assert KEY not in executor.event_buffer, "the stale end would make the scheduler fail the resumed run"
    finish(executor)  # the resumed run ends
    assert executor.event_buffer[KEY] == (TaskInstanceState.SUCCESS, None)


def test_a_deferral_exit_seen_before_the_resumption_is_reported(executor: LocalExecutor) -> None:
    executor._process_workloads([_Task(KEY)])
    finish(executor)
    assert executor.event_buffer.pop(KEY) == (TaskInstanceState.SUCCESS, None)
    executor._process_workloads([_Task(KEY)])
    finish(executor)
    assert executor.event_buffer[KEY] == (TaskInstanceState.SUCCESS, None)


def test_results_of_workloads_it_did_not_count_are_passed_on(executor: LocalExecutor) -> None:
    other = TaskInstanceKey("nightly_subrange_repair", "plan", "manual__2", 1, -1)
    finish(executor, other)
    assert executor.event_buffer[other] == (TaskInstanceState.SUCCESS, None)
