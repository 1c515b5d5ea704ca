"""The gate at the head of each staged step of the migration DAG.

The DAG holds `MAX_STAGED_STEPS` step groups; a plan uses as many as its route has. A ShortCircuitOperator
skipping only its direct downstream lets the skip travel down the rest by trigger rules, one scheduler pass per
level: four absent steps of eight tasks each cost about 10 s of a migration's run. The gate of the first absent
step skips the tasks of that step and of every later step at once, nothing else (cleanup and the report run
after the last step that exists).
"""

from __future__ import annotations

import re
from typing import Any

from airflow.providers.standard.utils.skipmixin import SkipMixin
from airflow.sdk import BaseOperator

__all__ = ["STEP_GROUP", "StepGateOperator", "step_of"]

STEP_GROUP = "step_{index}"  # the task group of staged step `index` (1-based)
_STEP_TASK = re.compile(r"step_(\d+)\.")


def step_of(task_id: str) -> int | None:
    """The staged step a task belongs to, from its group; None for the tasks outside the steps."""
    match = _STEP_TASK.match(task_id)
    return int(match.group(1)) if match else None


class StepGateOperator(BaseOperator, SkipMixin):
    """Passes when the precheck's accepted plan has at least `step_index` steps; otherwise skips this step's
    tasks and every later step's in one go (the gate itself ends successful, as a short circuit does)."""

    ui_color = "#e8f7e4"

    def __init__(self, *, step_index: int, precheck_task_id: str = "precheck", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step_index = step_index
        self.precheck_task_id = precheck_task_id

    def execute(self, context: Any) -> bool:
        record = context["ti"].xcom_pull(task_ids=self.precheck_task_id)
        planned = len(record["steps"])
        if planned >= self.step_index:
            self.log.info("Step %d of %d: running it.", self.step_index, planned)
            return True
        absent = [
            task
            for task in self.get_flat_relatives(upstream=False)
            if (step := step_of(task.task_id)) is not None and step >= self.step_index
        ]
        self.log.info(
            "The plan has %d step(s): skipping the %d tasks of step %d and later at once.",
            planned,
            len(absent),
            self.step_index,
        )
        self.skip(ti=context["ti"], tasks=absent)  # raises Airflow's skip signal when there is anything to skip
        return False
