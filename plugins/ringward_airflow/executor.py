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

This executor counts the workloads it has handed to its workers per key. A result that arrives while a newer
workload of the same key is still in flight belongs to the superseded process (the deferral or the parking,
whose state the task already reported through the Execution API), so it is dropped instead of reported. The
counting changes nothing else: every other result is passed on unchanged. Remove this class once Airflow
releases the fix for the QUEUED and RUNNING cases.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any

from airflow.executors.local_executor import LocalExecutor as _AirflowLocalExecutor
from airflow.executors.workloads import ExecuteTask

__all__ = ["LocalExecutor"]


class LocalExecutor(_AirflowLocalExecutor):
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
            key, state, _error = self.result_queue.get()
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
