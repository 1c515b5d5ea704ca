"""`ringward airflow` copies the local cluster's connections into Airflow's metadata database, once."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from ringward_cli.airflow_env import (
    airflow_environment,
    connections_to_import,
    ensure_airflow_connections,
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
