"""The plugin's pages under the FAB auth manager that the compose stack runs (docker-compose.yaml): FAB's own
roles decide who sees what, with tokens from FAB's own login route.

Airflow reads its home and auth manager when first imported, and this process imported it long ago with the
suite's simple auth manager: the pages are asked in a Python process of their own (tests/fab_pages.py: Airflow's
API app and a test client in that process, no server), with a fresh AIRFLOW_HOME on SQLite migrated with FAB's
tables. That process reports what each route answered to whom; this test says what it must be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests"))
from fab_pages import USERS  # noqa: E402

FAB = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
MIGRATION = "/ringward/migration/keyspace_migration/manual__2026-11-23T10:00:00+00:00"
DAG_PAGES = [
    MIGRATION, "/ringward/api/migration/keyspace_migration/manual__2026-11-23T10:00:00+00:00",
    "/ringward/api/migration/keyspace_migration/manual__2026-11-23T10:00:00+00:00/placement.svg",
    "/ringward/repair", "/ringward/api/repair", "/ringward/api/repair/coverage.svg",
]  # fmt: skip
CLUSTER_PAGES = ["/ringward/cluster", "/ringward/api/cluster", "/ringward/api/cluster/ring.svg"]


@pytest.fixture(scope="module")
def fab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("airflow-fab")
    env = {key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")}
    env |= {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__AUTH_MANAGER": FAB,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
        "AIRFLOW__API_AUTH__JWT_SECRET": "ringward-fab-test-" + "x" * 64,
        "AIRFLOW__API__SECRET_KEY": "ringward-fab-test-secret-key",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    }
    airflow = Path(sys.executable).parent / "airflow"
    migrate = subprocess.run([str(airflow), "db", "migrate"], env=env, capture_output=True, text=True, check=False)
    assert migrate.returncode == 0, migrate.stdout[-3000:] + migrate.stderr[-3000:]
    result = home / "result.json"
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "fab_pages.py"), str(result)], env=env,
                         capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    answers: dict[str, Any] = json.loads(result.read_text())
    return answers


def test_the_pages_ran_under_fab_with_fab_tokens(fab: dict[str, Any]) -> None:
    assert fab["auth_manager"] == "FabAuthManager"
    assert {"Admin", "Viewer", "User", "NoDagAccess"} <= set(fab["roles"])
    assert fab["logins"] == dict.fromkeys(USERS, 201)  # every user's token from POST /auth/token
    assert fab["wrong_password"] == 401
    assert set(fab["gets"]) == set(DAG_PAGES) | set(CLUSTER_PAGES)


def test_admin_is_served_every_page(fab: dict[str, Any]) -> None:
    assert {url: answers["admin"] for url, answers in fab["gets"].items()} == dict.fromkeys(fab["gets"], 200)


def test_viewer_reads_the_dag_pages_but_not_where_the_connection_points(fab: dict[str, Any]) -> None:
    assert {url: fab["gets"][url]["viewer"] for url in DAG_PAGES} == dict.fromkeys(DAG_PAGES, 200)
    # FAB's Viewer may not read connections: the cluster page names the connection's hosts.
    assert {url: fab["gets"][url]["viewer"] for url in CLUSTER_PAGES} == dict.fromkeys(CLUSTER_PAGES, 403)


def test_a_role_without_dag_access_is_refused_every_page(fab: dict[str, Any]) -> None:
    assert {url: answers["nodags"] for url, answers in fab["gets"].items()} == dict.fromkeys(fab["gets"], 403)


def test_anonymous_is_refused_every_page(fab: dict[str, Any]) -> None:
    assert {url: answers["anonymous"] for url, answers in fab["gets"].items()} == dict.fromkeys(fab["gets"], 401)


def test_only_roles_that_edit_dag_runs_press_the_pause_switch(fab: dict[str, Any]) -> None:
    # Admin and User edit DAG runs in FAB; Viewer and the role without DAG access do not; no token: 401.
    assert fab["switch"] == {"admin": 200, "user": 200, "viewer": 403, "nodags": 403, "anonymous": 401}
    assert fab["switch_pressed_by"] == ["user", "admin"]  # newest first; the refused presses recorded nothing
