"""Airflow's LocalExecutor without its stale-event race on deferred and human-in-the-loop tasks.

Set `AIRFLOW__CORE__EXECUTOR=ringward_airflow.executor.LocalExecutor` (`ringward airflow` and the compose file do).

The race (Airflow 3.3.2; apache/airflow#66374, #67287, #71580, #72716): a task that defers (a deferrable
repair) or parks for approval (HITL's AWAITING_INPUT) ends its worker process, and the executor reports that
process's end as an event keyed by the task instance key (dag, task, run, try number). When the trigger fires
or the approver answers within about a scheduler loop, the scheduler queues the resumed run under the same key
before it drains that event. It then reads the stale "finished with state success" while the task instance is
queued or running again, finds the executor no longer tracking the key (the LocalExecutor keeps no running set,
and the resumed workload has already left `queued_tasks`), decides the task was killed externally and marks it
UP_FOR_RETRY; the resumed run's own state updates then fail with 404 (its try was replaced). Airflow 3.3.2
guards only the case where the task instance is still SCHEDULED.

`RingwardLocalExecutor` counts the workloads it has handed to its workers per key. A result that arrives while
a newer workload of the same key is still in flight belongs to the superseded process (the deferral or the
parking, whose state the task already reported through the Execution API), so it is dropped instead of
reported. The counting changes nothing else: every other result is passed on unchanged.

Airflow 3.4's own LocalExecutor carries the fix (it counts dispatches per key and keeps the key running until
the last one ends; its `_finish_dispatch`) and reports results as `(pid, key, state, exc)` instead of
`(key, state, exc)`. Subclassing it would undo its own bookkeeping, so `LocalExecutor` here is Airflow's class
itself wherever the installed Airflow has the fix, and ringward's subclass only where it lacks it. The check is
on the feature, not the version string, so a backport to a 3.3.x is picked up as well.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any

from airflow.executors.local_executor import LocalExecutor as _AirflowLocalExecutor
from airflow.executors.workloads import ExecuteTask

__all__ = ["LocalExecutor", "RingwardLocalExecutor", "airflow_counts_dispatches", "select_local_executor"]


def airflow_counts_dispatches(executor_class: type) -> bool:
    """True when an Airflow LocalExecutor class already counts dispatches per key (Airflow 3.4's fix)."""
    return callable(getattr(executor_class, "_finish_dispatch", None))


def _unpack_result(result: Sequence[Any]) -> tuple[Any, Any, Any]:
    """`(key, state, exc)` from a worker's result: Airflow 3.3's 3-tuple or the `(pid, key, state, exc)` of 3.4."""
    if len(result) == 4:
        _pid, key, state, exc = result
    elif len(result) == 3:
        key, state, exc = result
    else:
        raise TypeError(
            f"Unexpected LocalExecutor result {result!r}: expected (key, state, exc) or (pid, key, state, exc). "
            "The installed Airflow's LocalExecutor changed its result shape; set AIRFLOW__CORE__EXECUTOR="
            "LocalExecutor (Airflow's own) until ringward_airflow.executor supports it."
        )
    return key, state, exc


class RingwardLocalExecutor(_AirflowLocalExecutor):
    """LocalExecutor that drops the end event of a task workload superseded by a newer one of the same key."""

    def start(self) -> None:
        super().start()
        self._in_flight: Counter[Hashable] = Counter()

    def _process_workloads(self, workload_list: Sequence[Any]) -> None:
        for workload in workload_list:
            if isinstance(workload, ExecuteTask):
                self._in_flight[workload.key] += 1
        super()._process_workloads(workload_list)

    def _read_results(self) -> None:
        while not self.result_queue.empty():
            key, state, _error = _unpack_result(self.result_queue.get())
            if state is None:
                # The 4-tuple shape's "a worker picked the workload up": not an end, and nothing to report.
                continue
            if self._superseded(key):
                self.log.info(
                    "Dropping the end (%s) of a superseded workload of %s: the task resumed under the same "
                    "key after deferring or awaiting input, and its new run is still going.",
                    state,
                    key,
                )
                continue
            self.change_state(key, state)

    def _superseded(self, key: Hashable) -> bool:
        """Count one workload of `key` as ended; True while a newer one of the same key is still running."""
        in_flight = getattr(self, "_in_flight", None)
        if in_flight is None or key not in in_flight:
            return False
        in_flight[key] -= 1
        if in_flight[key] <= 0:
            del in_flight[key]
            return False
        return True


def select_local_executor(airflow_class: type[_AirflowLocalExecutor]) -> type[_AirflowLocalExecutor]:
    """Airflow's own LocalExecutor where it has the fix, ringward's subclass where it lacks it."""
    return airflow_class if airflow_counts_dispatches(airflow_class) else RingwardLocalExecutor


LocalExecutor = select_local_executor(_AirflowLocalExecutor)
