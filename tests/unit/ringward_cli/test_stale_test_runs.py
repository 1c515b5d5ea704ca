"""A killed `airflow dags test` leaves its run `running` in the home's database; the next `ringward airflow`
command marks it failed, unless a `dags test` still holds the home's lock (it is then not stale)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from ringward_cli.airflow_env import fail_stale_test_runs, hold_dags_test_lock


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A home whose database has Airflow's dag_run and task_instance columns that matter here."""
    database = tmp_path / "airflow.db"
    with closing(sqlite3.connect(database)) as connection, connection:
        connection.execute("CREATE TABLE dag_run (dag_id, run_id, state, triggered_by, end_date)")
        connection.execute("CREATE TABLE task_instance (dag_id, run_id, task_id, state, end_date)")
        connection.executemany(
            "INSERT INTO dag_run VALUES (?, ?, ?, ?, NULL)",
            [
                # triggered_by as Airflow stores it: the enum member's name
                ("keyspace_migration", "killed", "running", "TEST"),
                ("nightly_subrange_repair", "killed_early", "queued", "TEST"),
                ("keyspace_migration", "finished", "success", "TEST"),
                ("keyspace_migration", "scheduled", "running", "UI"),  # the scheduler's: not ours to touch
            ],
        )
        connection.executemany(
            "INSERT INTO task_instance VALUES (?, ?, ?, ?, NULL)",
            [
                ("keyspace_migration", "killed", "precheck", "success"),
                ("keyspace_migration", "killed", "step_1.repair", "deferred"),
                ("keyspace_migration", "killed", "approval", "awaiting_input"),
                ("keyspace_migration", "killed", "report", None),
                ("keyspace_migration", "scheduled", "precheck", "running"),
            ],
        )
    return {"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{database}"}


def _runs(env: dict[str, str]) -> dict[str, str]:
    with closing(sqlite3.connect(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"][len("sqlite:///") :])) as connection:
        runs = dict(connection.execute("SELECT run_id, state FROM dag_run"))
        tasks = dict(connection.execute("SELECT run_id || '/' || task_id, state FROM task_instance"))
    return {**runs, **tasks}


def test_unfinished_test_runs_are_marked_failed_with_their_unfinished_tasks(env: dict[str, str]) -> None:
    assert sorted(fail_stale_test_runs(env)) == [
        ("keyspace_migration", "killed"),
        ("nightly_subrange_repair", "killed_early"),
    ]
    assert _runs(env) == {
        "killed": "failed",
        "killed_early": "failed",
        "finished": "success",
        "scheduled": "running",
        "killed/precheck": "success",
        "killed/step_1.repair": "failed",
        "killed/approval": "failed",
        "killed/report": None,  # never started: stays so
        "scheduled/precheck": "running",
    }
    assert fail_stale_test_runs(env) == []  # nothing left


def test_nothing_is_touched_while_a_dags_test_holds_the_lock(env: dict[str, str]) -> None:
    lock = hold_dags_test_lock(env)
    try:
        assert fail_stale_test_runs(env) == []
        assert _runs(env)["killed"] == "running"
    finally:
        os.close(lock)
    assert ("keyspace_migration", "killed") in fail_stale_test_runs(env)


def test_the_lock_outlives_exec_and_ends_with_the_killed_process(env: dict[str, str], tmp_path: Path) -> None:
    """What `ringward airflow dags test` does: take the lock, then exec airflow (here: sleep), which is killed."""
    ready = tmp_path / "ready"
    script = (
        "import os, sys; from ringward_cli.airflow_env import hold_dags_test_lock; "
        f"hold_dags_test_lock({env!r}); open({str(ready)!r}, 'w').close(); "
        "os.execv('/bin/sleep', ['sleep', '60'])"
    )
    process = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert time.monotonic() < deadline and process.poll() is None, "the child never took the lock"
            time.sleep(0.05)
        time.sleep(0.2)  # past the exec
        assert fail_stale_test_runs(env) == []  # the exec'd process still holds it: its run is live
    finally:
        process.kill()
        process.wait()
    assert ("keyspace_migration", "killed") in fail_stale_test_runs(env)


def test_test_runs_are_told_by_what_airflow_stores() -> None:
    import sqlalchemy
    from airflow.models.dagrun import DagRun
    from airflow.utils.types import DagRunTriggeredByType

    column = DagRun.__table__.c.triggered_by
    assert isinstance(column.type, sqlalchemy.Enum)
    assert column.type._db_value_for_elem(DagRunTriggeredByType.TEST) == "TEST"


def test_only_a_sqlite_home_that_was_migrated_is_looked_at(tmp_path: Path) -> None:
    assert (
        fail_stale_test_runs({"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql://x"})
        == []
    )
    empty = {"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/new.db"}
    assert fail_stale_test_runs(empty) == []
    sqlite3.connect(tmp_path / "new.db").close()  # exists, not migrated
    assert fail_stale_test_runs(empty) == []
