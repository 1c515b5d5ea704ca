"""`ringward airflow` copies the local cluster's connections into Airflow's metadata database, once."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ringward_cli import airflow_env
from ringward_cli.airflow_env import (
    REPAIR_POOL_COMMAND,
    airflow_environment,
    connections_to_import,
    ensure_airflow_connections,
    ensure_airflow_db,
    migrate_airflow_db,
    private_database,
)

ROOT = Path(__file__).resolve().parents[3]


class FakeRun:
    def __init__(self) -> None:
        self.commands: list[list[str]] = []
        self.imported: list[dict[str, Any]] = []

    def __call__(self, command: list[str], **kwargs: Any) -> None:
        assert kwargs["check"] is True
        self.commands.append(command)
        self.imported.append(json.loads(Path(command[-1]).read_text()))


def environment(tmp_path: Path, topology: str = "seed") -> dict[str, str]:
    return airflow_environment(ROOT, topology) | {"AIRFLOW_HOME": str(tmp_path)}


def test_the_local_connections_are_imported_in_airflow_form(tmp_path: Path) -> None:
    env = environment(tmp_path)
    wanted = connections_to_import(env)
    assert set(wanted) == {"cassandra_default", "ringward_nodetool", "spark_default"}
    cassandra = wanted["cassandra_default"]
    assert cassandra["host"] == "127.0.0.2,127.0.0.3,127.0.0.4" and cassandra["port"] == 9042
    assert json.loads(cassandra["extra"]) == {}  # extra as JSON text; the protocol is negotiated
    assert "ringward" in cassandra["description"] and "(seed)" in cassandra["description"]


def test_the_import_runs_once_and_again_only_when_the_cluster_changes(tmp_path: Path) -> None:
    run = FakeRun()
    env = environment(tmp_path)
    assert ensure_airflow_connections(env, run=run) is True
    assert run.commands[0][1:4] == ["connections", "import", "--overwrite"]
    assert run.imported[0] == connections_to_import(env)
    assert ensure_airflow_connections(env, run=run) is False  # unchanged: no second airflow start
    two_dc = environment(tmp_path, "two-dc")
    assert ensure_airflow_connections(two_dc, run=run) is True  # the nodes changed: the UI must show them
    assert "127.0.0.6" in run.imported[1]["cassandra_default"]["host"]
    assert len(run.commands) == 2


def test_a_connection_the_user_set_as_a_uri_is_left_alone(tmp_path: Path) -> None:
    env = environment(tmp_path) | {"AIRFLOW_CONN_CASSANDRA_DEFAULT": "cassandra://user:secret@db:9042"}
    assert "cassandra_default" not in connections_to_import(env)
    assert "other" not in connections_to_import(env | {"AIRFLOW_CONN_OTHER": '{"conn_type": "x"}'})


def test_only_automation_gets_the_settings_that_skip_safety_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo and the tests run unattended (`automation=True`); `ringward airflow` and the compose deployment
    keep every safety step (docs/operators-guide.md, "Governance")."""
    from ringward_cli.airflow_env import AUTOMATION_SETTINGS

    for key in AUTOMATION_SETTINGS:
        monkeypatch.delenv(key, raising=False)
    assert not any(key.startswith("AIRFLOW__RINGWARD__") for key in airflow_environment(ROOT, "seed"))
    automation = airflow_environment(ROOT, "seed", automation=True)
    assert {key: automation[key] for key in AUTOMATION_SETTINGS} == AUTOMATION_SETTINGS
    assert "AIRFLOW__RINGWARD__ALLOW_QUORUM_GAP" not in automation  # nothing here needs it
    compose = (ROOT / "docker-compose.yaml").read_text()
    assert "AIRFLOW__RINGWARD__ALLOW" not in compose and "ALLOW_SELF_APPROVAL" not in compose


def test_the_local_airflow_home_and_its_password_files_are_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The home is 0700 (a home made 0755 before is narrowed), ringward-connections.json and airflow.db 0600:
    both hold the local cluster's passwords (issue 36)."""
    home = tmp_path / "shared" / "airflow-home"
    monkeypatch.setenv("RINGWARD_AIRFLOW_HOME", str(home))
    old = os.umask(0o022)
    try:
        env = airflow_environment(ROOT, "seed")
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        home.chmod(0o755)
        env = airflow_environment(ROOT, "seed")
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        run = FakeRun()
        assert ensure_airflow_connections(env, run=run) is True
        assert stat.S_IMODE((home / "ringward-connections.json").stat().st_mode) == 0o600
        (home / "airflow.db").write_text("")
        (home / "airflow.db").chmod(0o644)
        assert stat.S_IMODE(private_database(home).stat().st_mode) == 0o600
        (home / "airflow.db").unlink()
        assert stat.S_IMODE(private_database(home).stat().st_mode) == 0o600  # created 0600, before Airflow
    finally:
        os.umask(old)


def test_local_spark_drivers_compile_with_c1_only_unless_the_user_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    assert airflow_environment(ROOT, "seed")["SPARK_SUBMIT_OPTS"] == "-XX:TieredStopAtLevel=1"
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xss4m")
    assert airflow_environment(ROOT, "seed")["SPARK_SUBMIT_OPTS"] == "-Xss4m"


def fake_airflow(folder: Path, version: str) -> tuple[Path, Path]:
    """An installation whose `airflow db migrate` writes one table naming the settings it ran with, and counts its
    runs in calls.log: (its `airflow`, the log)."""
    (folder / "lib" / "python3.11" / "site-packages" / f"apache_airflow-{version}.dist-info").mkdir(parents=True)
    calls = folder / "calls.log"
    airflow = folder / "bin" / "airflow"
    airflow.parent.mkdir()
    writer = (
        "import os, sqlite3, sys; c = sqlite3.connect(os.environ['AIRFLOW__DATABASE__SQL_ALCHEMY_CONN'][10:]); "
        "c.execute('CREATE TABLE IF NOT EXISTS made (version, auth)'); "
        f"c.execute('INSERT INTO made VALUES (?, ?)', ({version!r}, os.environ.get('AIRFLOW__CORE__AUTH_MANAGER'))); "
        "c.commit()"
    )
    airflow.write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\n'
        f'case "$AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in sqlite*) exec {sys.executable} -c "{writer}";; esac\n'
    )
    airflow.chmod(0o755)
    return airflow, calls


def made(home: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(home / "airflow.db") as connection:
        return list(connection.execute("SELECT version, auth FROM made"))


def test_a_new_database_is_a_copy_of_the_first_one_the_same_installation_and_settings_migrated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RINGWARD_HOME", str(tmp_path / "checkout"))  # the templates go to its .cache/airflow-db
    airflow, calls = fake_airflow(tmp_path / "venv", "3.3.2")
    other, other_calls = fake_airflow(tmp_path / "venv-af34", "3.4.0b2")

    def env(name: str, **settings: str) -> dict[str, str]:
        home = tmp_path / name
        home.mkdir()
        return {"AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
                **settings}  # fmt: skip

    first = env("first")
    migrate_airflow_db(first, str(airflow))  # the command runs; its database is kept
    assert calls.read_text().splitlines() == ["db migrate"] and made(tmp_path / "first") == [("3.3.2", None)]
    migrate_airflow_db(second := env("second"), str(airflow))
    assert len(calls.read_text().splitlines()) == 1, "the second new database is a copy, the command not run"
    assert made(Path(second["AIRFLOW_HOME"])) == [("3.3.2", None)]
    assert stat.S_IMODE((Path(second["AIRFLOW_HOME"]) / "airflow.db").stat().st_mode) == 0o600

    migrate_airflow_db(first, str(airflow))  # a written database: the command, always
    assert len(calls.read_text().splitlines()) == 2
    fab = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
    migrate_airflow_db(env("fab", AIRFLOW__CORE__AUTH_MANAGER=fab), str(airflow))  # other settings: its own
    assert len(calls.read_text().splitlines()) == 3 and made(tmp_path / "fab") == [("3.3.2", fab)]
    migrate_airflow_db(env("af34"), str(other))  # another installation: its own
    assert other_calls.read_text().splitlines() == ["db migrate"] and made(tmp_path / "af34") == [("3.4.0b2", None)]
    migrate_airflow_db(env("af34-again"), str(other))
    assert len(other_calls.read_text().splitlines()) == 1 and made(tmp_path / "af34-again") == [("3.4.0b2", None)]

    server = {"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql://db/airflow"}
    migrate_airflow_db(server, str(other))  # not SQLite: the command
    assert len(other_calls.read_text().splitlines()) == 2


def test_a_new_home_is_migrated_and_given_the_repair_pool_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ringward airflow` on a new home: the database migrated, then the pool the nightly repair task runs in; an
    existing home: neither again (the marker files)."""
    monkeypatch.setenv("RINGWARD_HOME", str(tmp_path / "checkout"))
    airflow, calls = fake_airflow(tmp_path / "venv", "3.3.2")
    monkeypatch.setattr(airflow_env, "_airflow_binary", lambda: str(airflow))
    home = tmp_path / "home"
    home.mkdir()
    env = {"AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db"}
    ensure_airflow_db(env)
    ensure_airflow_db(env)
    assert calls.read_text().splitlines() == ["db migrate", " ".join(REPAIR_POOL_COMMAND)]


def test_airflow_waits_a_minute_for_sqlites_writer_not_five_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow's own engines, made from `ringward airflow`'s environment, open SQLite with a 60 s busy timeout:
    the synchronous one (sqlite3) and the asynchronous one (aiosqlite), each asked by `PRAGMA busy_timeout` on a
    connection it made (sqlite3's default is 5 s: 5000)."""
    env = environment(tmp_path) | {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/airflow.db"}
    probe = (
        "import asyncio\n"
        "from airflow import settings\n"
        "with settings.engine.connect() as c:\n"
        "    print('sync', c.exec_driver_sql('PRAGMA busy_timeout').scalar())\n"
        "async def main():\n"
        "    async with settings.async_engine.connect() as c:\n"
        "        print('async', (await c.exec_driver_sql('PRAGMA busy_timeout')).scalar())\n"
        "    await settings.async_engine.dispose()\n"
        "asyncio.run(main())\n"
    )
    found = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stderr[-3000:]
    assert found.stdout.split() == ["sync", "60000", "async", "60000"], found.stdout + found.stderr[-3000:]
    # a deployment's own choice stands
    monkeypatch.setenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS", "mine.ARGS")
    assert airflow_environment(ROOT, "seed")["AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS"] == "mine.ARGS"
