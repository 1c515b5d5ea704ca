"""The plugin's pages under the FAB auth manager that the compose stack runs (docker-compose.yaml): FAB's own
roles decide who sees what, with tokens from FAB's own login route.

Airflow reads its home and auth manager when first imported, and this process imported it long ago with the
suite's simple auth manager: the pages are asked in a Python process of their own (tests/fab_pages.py: Airflow's
API app and a test client in that process, no server), with a fresh AIRFLOW_HOME on SQLite migrated with FAB's
tables. That process reports what each route answered to whom; this test says what it must be.

The same process then declares two clusters (issue 39): a FAB role granted only cluster b's DAGs sees nothing of
cluster a, under FAB's own per-DAG permissions (test_ui_clusters.py proves the same with a patched simple auth
manager).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ringward_cli.airflow_env import migrate_airflow_db

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests"))
from fab_pages import (  # noqa: E402
    B_NO_CONNECTION_ROLE,
    B_NO_CONNECTION_ROLE_WIDE,
    CLUSTER_USERS,
    ONLY_B_ROLE,
    ONLY_B_ROLE_WIDE,
    USERS,
)
from test_ui_clusters import cluster_urls  # noqa: E402

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
    # Neither the suite's Airflow settings nor a clusters file: the first pages are the single cluster's.
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("AIRFLOW") and key != "RINGWARD_CLUSTERS"}  # fmt: skip
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
    migrate_airflow_db(env, str(airflow))
    result = home / "result.json"
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "fab_pages.py"), str(result)], env=env,
                         capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    answers: dict[str, Any] = json.loads(result.read_text())
    return answers


def test_the_pages_ran_under_fab_with_fab_tokens(fab: dict[str, Any]) -> None:
    assert fab["auth_manager"] == "FabAuthManager"
    assert {"Admin", "Viewer", "User", "NoDagAccess", ONLY_B_ROLE, B_NO_CONNECTION_ROLE} <= set(fab["roles"])
    assert fab["logins"] == dict.fromkeys(USERS, 201)  # every user's token from POST /auth/token
    assert fab["cluster_logins"] == dict.fromkeys(CLUSTER_USERS, 201)
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


# -- two declared clusters (issue 39) -----------------------------------------------------------------------------


def test_the_roles_hold_cluster_bs_dags_as_the_factory_names_them_and_nothing_of_as(fab: dict[str, Any]) -> None:
    """Each cluster-b role's per-DAG grants are the DAG factory's DAGs of cluster b, the same the picker lists for
    b; no grant names a DAG of cluster a, nor every DAG ("DAGs"); the rest is the role-wide grants it was given."""
    admin = {c["name"]: c["dags"] for c in fab["two_clusters"]["pickers"]["admin"]}
    assert fab["cluster_b_dags"] == sorted(admin["b"]) and len(admin["b"]) == 3
    role_wide = {ONLY_B_ROLE: ONLY_B_ROLE_WIDE, B_NO_CONNECTION_ROLE: B_NO_CONNECTION_ROLE_WIDE}
    assert set(fab["cluster_b_permissions"]) == set(role_wide)
    for role, granted in fab["cluster_b_permissions"].items():
        per_dag = {(action, resource.removeprefix("DAG:")) for action, resource in granted
                   if resource.startswith("DAG:")}  # fmt: skip
        assert {dag for _, dag in per_dag} == set(admin["b"]), role
        assert {dag for action, dag in per_dag if action == "can_edit"} == {"nightly_subrange_repair__b"}, role
        assert {tuple(p) for p in granted} - {(a, f"DAG:{d}") for a, d in per_dag} == set(role_wide[role]), role


def test_the_picker_lists_only_cluster_b_to_its_roles(fab: dict[str, Any]) -> None:
    """GET /ringward/api/clusters under FAB: the cluster-b role sees b (all three pages; without the connection
    permission not b's Cluster page), Admin both, the role without DAG access none; the page's picker offers no
    link to a, and a page naming no cluster goes to b."""
    two = fab["two_clusters"]
    assert [(c["name"], c["pages"]) for c in two["pickers"]["onlyb"]] == [
        ("b", {"repair": True, "cluster": True, "migration": True})]  # fmt: skip
    assert [(c["name"], c["pages"]) for c in two["pickers"]["bnoconn"]] == [
        ("b", {"repair": True, "cluster": False, "migration": True})]  # fmt: skip
    assert [c["name"] for c in two["pickers"]["admin"]] == ["a", "b"]
    assert two["pickers"]["nodags"] == []
    assert "<b>b</b>" in two["onlyb_picker_on_b_page"] and "cluster=a" not in two["onlyb_picker_on_b_page"]
    assert two["onlyb_unnamed_repair"] == [303, "?cluster=b"]


def test_every_page_of_cluster_a_is_refused_to_cluster_bs_roles_and_bs_pages_served(fab: dict[str, Any]) -> None:
    """Repair, Cluster and Migration of cluster a (pages, JSON, pictures): 403 to both cluster-b roles, with nothing
    of a in the answer and no source of a opened, although FAB lets them read every connection; the same of
    cluster b: 200 (its Cluster page: 403 without the connection permission); Admin: 200 on both; no DAG access:
    403 on both."""
    two = fab["two_clusters"]
    a, b = cluster_urls("a"), cluster_urls("b")
    assert set(two["gets"]) == set(a) | set(b)
    for user in CLUSTER_USERS:
        assert {url: two["gets"][url][user] for url in a} == dict.fromkeys(a, 403), user
    assert {url: two["gets"][url]["onlyb"] for url in b} == dict.fromkeys(b, 200)
    b_cluster_page = {url for url in b if "/cluster" in url}
    assert len(b_cluster_page) == 3
    assert {url: two["gets"][url]["bnoconn"] for url in b} == {url: 403 if url in b_cluster_page else 200 for url in b}
    assert {url: answers["admin"] for url, answers in two["gets"].items()} == dict.fromkeys(a + b, 200)
    assert {url: answers["nodags"] for url, answers in two["gets"].items()} == dict.fromkeys(a + b, 403)
    assert two["a_shown_to_cluster_b_users"] == {}
    assert two["opened_for_cluster_b_users_on_a"] == []


def test_the_role_pauses_cluster_bs_repair_only(fab: dict[str, Any]) -> None:
    """The role edits b's repair DAG only: its press on cluster a's switch is refused and recorded nowhere."""
    two = fab["two_clusters"]
    assert two["onlyb_switch"] == {"a": 403, "b": 200}
    assert two["switch_pressed_by"] == {"a": [], "b": ["onlyb"]}
