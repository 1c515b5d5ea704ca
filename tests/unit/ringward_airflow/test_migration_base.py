"""MigrationOperator's kill flag: made on first use (an operator must deep-copy), still shared by `on_kill`
and `execute`, as Airflow 3.3 runs `on_kill` from the SIGTERM handler and lets `execute` go on."""

from __future__ import annotations

import copy
import threading
import time

import pytest
from ringward.errors import MigrationError
from ringward_airflow.migration_base import MigrationOperator
from ringward_airflow.migration_operators import MigrationRepairOperator


def test_a_fresh_operator_holds_no_event_and_deep_copies() -> None:
    operator = MigrationRepairOperator(task_id="repair", step_index=1)
    assert not any(isinstance(value, threading.Event) for value in vars(operator).values())
    copied = copy.deepcopy(operator)
    assert copied.task_id == "repair" and copied is not operator


def test_on_kill_before_execute_looks_still_stops_it() -> None:
    operator = MigrationOperator(task_id="stage")
    operator.on_kill()  # the SIGTERM came before execute first asked
    with pytest.raises(MigrationError, match="killed"):
        operator._raise_if_killed()


def test_on_kill_wakes_a_wait_in_execute() -> None:
    operator = MigrationRepairOperator(task_id="repair", step_index=1)
    operator._raise_if_killed()  # not killed: nothing raised
    woke: list[float] = []

    def wait() -> None:
        started = time.monotonic()
        with pytest.raises(MigrationError, match="killed"):
            operator._sleep_unless_killed(30.0)
        woke.append(time.monotonic() - started)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    operator.on_kill()
    waiter.join(5.0)
    assert not waiter.is_alive() and woke and woke[0] < 5.0
