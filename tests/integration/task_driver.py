"""Running the DAG's operators one by one in the test process, as the scheduler and triggerer would."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from airflow.sdk.exceptions import TaskDeferred


class FakeTaskInstance:
    """Just enough of a TaskInstance for operators that read their upstream's XCom."""

    def __init__(self) -> None:
        self.xcoms: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value

    def xcom_pull(self, task_ids: str | list[str]) -> Any:
        if isinstance(task_ids, list):
            return [self.xcoms.get(task_id) for task_id in task_ids]
        return self.xcoms.get(task_ids)


class Deferred:
    """Runs a deferrable operator as Airflow does: execute, and on each deferral the real trigger's run loop
    until its first event, then the method the deferral names. `on_session(labels)` sees each started wave
    before its trigger runs (the place to inject a fault)."""

    def __init__(self, operator: Any, context: Any) -> None:
        self.operator = operator
        self.context = context
        self.events: list[tuple[float, dict[str, Any]]] = []

    def run(self, on_session: Any = None) -> Any:
        call: Any = lambda: self.operator.execute(self.context)  # noqa: E731
        while True:
            try:
                return call()
            except TaskDeferred as deferred:
                trigger = deferred.trigger
                if on_session is not None:
                    on_session(trigger.labels)
                payload = asyncio.run(_first_event(trigger))
                self.events.append((time.monotonic(), payload))
                method = getattr(self.operator, deferred.method_name)
                call = lambda method=method, payload=payload: method(self.context, payload)  # noqa: E731


async def _first_event(trigger: Any) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise AssertionError("the trigger ended without an event")
