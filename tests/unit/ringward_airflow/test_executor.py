"""ringward's LocalExecutor drops the end event of a workload superseded by a resumed one of the same key.

Airflow 3.3 reports a worker's result as `(key, state, exc)`, 3.4 as `(pid, key, state, exc)`; ringward's
subclass reads both, and `LocalExecutor` is Airflow's own class where the installed Airflow has the fix.
These tests run in the locked environment (3.3) and in `make test-airflow-3.4`'s.
"""

from __future__ import annotations

import queue
from typing import Any

import pytest
from airflow.executors.local_executor import LocalExecutor as AirflowLocalExecutor
from airflow.models.taskinstancekey import TaskInstanceKey
from airflow.utils.state import TaskInstanceState
from ringward_airflow.executor import (
    LocalExecutor,
    RingwardLocalExecutor,
    airflow_counts_dispatches,
    select_local_executor,
)

KEY = TaskInstanceKey("keyspace_migration", "step_1.repair", "manual__1", 1, -1)
PID = 4242


class _Task:
    """Stands in for an ExecuteTask workload (only its key matters to the counting)."""

    def __init__(self, key: TaskInstanceKey) -> None:
        self.key = key


@pytest.fixture
def executor(monkeypatch: pytest.MonkeyPatch) -> RingwardLocalExecutor:
    monkeypatch.setattr("ringward_airflow.executor.ExecuteTask", _Task)
    monkeypatch.setattr(AirflowLocalExecutor, "_process_workloads", lambda self, workloads: None)
    monkeypatch.setattr(AirflowLocalExecutor, "start", lambda self: None)
    executor = RingwardLocalExecutor()
    executor.start()
    executor.result_queue = queue.SimpleQueue()  # type: ignore[assignment]
    return executor


@pytest.fixture(params=[3, 4], ids=["airflow-3.3-shape", "airflow-3.4-shape"])
def shape(request: pytest.FixtureRequest) -> int:
    return int(request.param)


def _result(shape: int, key: Any, state: Any) -> tuple[Any, ...]:
    return (key, state, None) if shape == 3 else (PID, key, state, None)


def finish(executor: RingwardLocalExecutor, shape: int, key: Any = KEY) -> None:
    if shape == 4:  # 3.4's worker announces the pick-up first (state None for a task)
        executor.result_queue.put(_result(shape, key, None))
    executor.result_queue.put(_result(shape, key, TaskInstanceState.SUCCESS))
    executor._read_results()


def test_the_deferral_exit_is_dropped_when_the_resumed_run_is_already_handed_to_a_worker(
    executor: RingwardLocalExecutor, shape: int
) -> None:
    executor._process_workloads([_Task(KEY)])  # the first run, which defers
    executor._process_workloads([_Task(KEY)])  # the trigger fired: the resumed run, same key
    finish(executor, shape)  # the first run's process ends only now
    assert KEY not in executor.event_buffer, "the stale end would make the scheduler fail the resumed run"
    finish(executor, shape)  # the resumed run ends
    assert executor.event_buffer[KEY] == (TaskInstanceState.SUCCESS, None)


def test_a_deferral_exit_seen_before_the_resumption_is_reported(executor: RingwardLocalExecutor, shape: int) -> None:
    executor._process_workloads([_Task(KEY)])
    finish(executor, shape)
    assert executor.event_buffer.pop(KEY) == (TaskInstanceState.SUCCESS, None)
    executor._process_workloads([_Task(KEY)])
    finish(executor, shape)
    assert executor.event_buffer[KEY] == (TaskInstanceState.SUCCESS, None)


def test_results_of_workloads_it_did_not_count_are_passed_on(executor: RingwardLocalExecutor, shape: int) -> None:
    other = TaskInstanceKey("nightly_subrange_repair", "plan", "manual__2", 1, -1)
    finish(executor, shape, other)
    assert executor.event_buffer[other] == (TaskInstanceState.SUCCESS, None)


def test_the_pick_up_announcement_is_neither_an_end_nor_reported(executor: RingwardLocalExecutor) -> None:
    executor._process_workloads([_Task(KEY)])
    executor._process_workloads([_Task(KEY)])
    executor.result_queue.put((PID, KEY, None, None))
    executor.result_queue.put((PID + 1, KEY, None, None))
    executor._read_results()
    assert KEY not in executor.event_buffer
    assert executor._in_flight[KEY] == 2, "a pick-up must not count as a workload's end"


def test_a_result_of_an_unknown_shape_is_refused_with_the_way_out(executor: RingwardLocalExecutor) -> None:
    executor.result_queue.put((KEY, TaskInstanceState.SUCCESS))
    with pytest.raises(TypeError, match="AIRFLOW__CORE__EXECUTOR=LocalExecutor"):
        executor._read_results()


def test_airflows_own_executor_is_used_where_it_counts_dispatches() -> None:
    class FixedLocalExecutor(AirflowLocalExecutor):
        def _finish_dispatch(self, key: Any, state: Any) -> None:
            pass

    assert select_local_executor(FixedLocalExecutor) is FixedLocalExecutor
    assert airflow_counts_dispatches(FixedLocalExecutor)


def test_ringwards_executor_is_used_where_airflow_lacks_the_fix() -> None:
    class UnfixedLocalExecutor(AirflowLocalExecutor):
        pass

    if airflow_counts_dispatches(AirflowLocalExecutor):
        UnfixedLocalExecutor._finish_dispatch = None  # type: ignore[attr-defined,assignment]
    assert select_local_executor(UnfixedLocalExecutor) is RingwardLocalExecutor


def test_the_configured_executor_matches_the_installed_airflow() -> None:
    if airflow_counts_dispatches(AirflowLocalExecutor):
        assert LocalExecutor is AirflowLocalExecutor
    else:
        assert LocalExecutor is RingwardLocalExecutor


@pytest.mark.skipif(
    not airflow_counts_dispatches(AirflowLocalExecutor), reason="the installed Airflow lacks the fix (3.3)"
)
def test_airflows_own_fix_keeps_the_resumed_run_tracked() -> None:
    """3.4's executor: the superseded run's end leaves the key running, so the scheduler sees it still tracked."""
    executor: Any = AirflowLocalExecutor()
    executor.result_queue = queue.SimpleQueue()
    executor.workers = {PID: object(), PID + 1: object()}
    executor.running.add(KEY)
    executor._dispatch_counts[KEY] = 2  # the deferring run and the resumed run, as _process_workloads counts
    for result in [(PID, KEY, None, None), (PID + 1, KEY, None, None), (PID, KEY, TaskInstanceState.SUCCESS, None)]:
        executor.result_queue.put(result)
    executor._read_results()
    assert KEY in executor.running, "the resumed run must stay tracked after the deferring run's end"
    executor.result_queue.put((PID + 1, KEY, TaskInstanceState.SUCCESS, None))
    executor._read_results()
    assert KEY not in executor.running
    assert executor.event_buffer[KEY] == (TaskInstanceState.SUCCESS, None)
