"""The ringward plugin's pages under Airflow's FAB auth manager (the one the compose stack runs), in one process.

Run by tests/unit/ringward_airflow/ui/test_ui_fab_permissions.py as `python tests/fab_pages.py RESULT.json` in an
environment whose AIRFLOW_HOME (SQLite, migrated with the FAB tables) and auth manager were set before Airflow is
imported here:
the pytest process has imported Airflow with the suite's home and simple auth manager long before.

It builds Airflow's API app as the API server does (`create_app(apps="core")`: the FAB auth manager's own app
under /auth, the ringward plugin under /ringward), creates FAB users of the roles Admin, Viewer and User and of a
role without DAG access, obtains their tokens from FAB's own login route (`POST /auth/token`, username and
password, as the API server hands them out), and asks the plugin's routes with each token and with none. The
cluster behind the pages is the in-memory world of tests/unit/ringward_airflow/ui/test_ui_plugin.py. It writes what
each route answered; the test asserts on it.

Then (issue 39) the same app with two declared clusters, a and b ($RINGWARD_CLUSTERS set to the clusters file of
tests/unit/ringward_airflow/ui/test_ui_clusters.py, read by the pages per request), each served from its own
in-memory world as in that test, and a FAB role that holds only cluster b's DAGs (their ids from the DAG factory):
the cluster picker, every page of each cluster and the pause switch, asked as that role's user, as Admin and as the
role without DAG access.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for folder in ("include", "plugins", "tests", "tests/unit/ringward_airflow/ui"):
    sys.path.insert(0, str(ROOT / folder))

# A role that may use Airflow's UI but holds no permission on any DAG (nor on the Cassandra connection).
NO_DAG_ROLE = "NoDagAccess"
NO_DAG_PERMISSIONS = [("can_read", "Website"), ("menu_access", "Browse")]
USERS = {"admin": "Admin", "viewer": "Viewer", "user": "User", "nodags": NO_DAG_ROLE}

# Issue 39: a role that may open cluster b's pages and nothing of cluster a's. FAB narrows DAG access per DAG
# (resource "DAG:<dag_id>"): the role reads cluster b's DAGs and edits b's repair DAG (the pause switch), nothing of
# a's DAGs. The rest FAB grants only role-wide: the runs of the DAGs the role may read ("DAG Runs"; the per-DAG
# permission is what narrows them to b's) and every connection ("Connections": FAB has no per-connection
# permission, so this role may read cluster a's connection too; a's Cluster page is still refused, as it also
# needs one of a's DAGs). A second role holds the same but no connection: b's Cluster page is not for it.
ONLY_B_ROLE, B_NO_CONNECTION_ROLE = "OnlyClusterB", "ClusterBWithoutConnections"
B_NO_CONNECTION_ROLE_WIDE = [("can_read", "Website"), ("can_read", "DAG Runs"), ("can_edit", "DAG Runs")]
ONLY_B_ROLE_WIDE = [*B_NO_CONNECTION_ROLE_WIDE, ("can_read", "Connections")]
CLUSTER_USERS = {"onlyb": ONLY_B_ROLE, "bnoconn": B_NO_CONNECTION_ROLE}


def password(name: str) -> str:
    return f"{name}-fab-test-password"


def cluster_b_permissions(clusters_yaml: Path) -> tuple[list[str], dict[str, list[tuple[str, str]]]]:
    """Cluster b's DAG ids as the DAG factory builds them from `clusters_yaml` (its DAGs tagged `cluster:b`), and
    the FAB permissions of each role of cluster b: its role-wide ones, read on each of those DAGs, edit on b's
    repair DAG."""
    from ringward_airflow.dag_factory import cluster_dags

    dags = sorted(dag_id for dag_id, dag in cluster_dags(path=clusters_yaml).items() if "cluster:b" in dag.tags)
    per_dag = [("can_read", f"DAG:{dag_id}") for dag_id in dags]
    per_dag += [("can_edit", f"DAG:{dag_id}") for dag_id in dags if dag_id.startswith("nightly_subrange_repair")]
    return dags, {ONLY_B_ROLE: ONLY_B_ROLE_WIDE + per_dag, B_NO_CONNECTION_ROLE: B_NO_CONNECTION_ROLE_WIDE + per_dag}


def two_clusters(client: Any, subapp: Any, tokens: dict[str, str], clusters_yaml: Path) -> dict[str, Any]:
    """Issue 39's answers: with `clusters_yaml` declared, what the picker lists to each user, what each page of
    each cluster answers to each, what the pause switch of each cluster answers to the user of ONLY_B_ROLE."""
    from test_ui_clusters import COVERAGE, Clusters, cluster_urls

    os.environ["RINGWARD_CLUSTERS"] = str(clusters_yaml)  # the pages read it per request
    deployment = Clusters(client, subapp, tokens)
    real = subapp.state.source_factory
    subapp.state.source_factory = deployment.source
    try:
        pickers = {user: deployment.get("/ringward/api/clusters", user).json()["clusters"] for user in tokens}
        gets = {url: {user: deployment.get(url, user).status_code for user in tokens}
                for url in cluster_urls("a") + cluster_urls("b")}  # fmt: skip
        deployment.opened.clear()
        refused = {(user, url): deployment.get(url, user).text for user in CLUSTER_USERS for url in cluster_urls("a")}
        opened_for_a = list(deployment.opened)  # the connections of the sources opened for those asks of a
        # What of cluster a the answers to cluster b's users showed: a's repair coverage, its node's address.
        shown = {f"{user} {url}": [mark for mark in (COVERAGE["a"], "10.0.0.1") if mark in text]
                 for (user, url), text in refused.items()}  # fmt: skip
        page = deployment.get("/ringward/repair?cluster=b", "onlyb").text
        picker = page[page.index("id='clusters'") : page.index("</p>", page.index("id='clusters'"))]
        unnamed = deployment.get("/ringward/repair", "onlyb", follow_redirects=False)
        press = {"action": "pause", "confirm": "yes"}
        switch = {name: client.post(f"/ringward/api/repair/switch?cluster={name}", data=press,
                                    headers=deployment.headers("onlyb")).status_code
                  for name in ("a", "b")}  # fmt: skip
    finally:
        subapp.state.source_factory = real
        del os.environ["RINGWARD_CLUSTERS"]
    return {
        "pickers": pickers,
        "gets": gets,
        "a_shown_to_cluster_b_users": {asked: marks for asked, marks in shown.items() if marks},
        "opened_for_cluster_b_users_on_a": opened_for_a,
        "onlyb_picker_on_b_page": picker,
        "onlyb_unnamed_repair": [unnamed.status_code, unnamed.headers.get("location")],
        "onlyb_switch": switch,
        "switch_pressed_by": {name: [e.changed_by for e in w.store.events] for name, w in deployment.worlds.items()},
    }


def main(result_file: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # third-party deprecations (FAB, starlette's test client): not this test's
        from airflow.api_fastapi.app import create_app, get_auth_manager
        from airflow.providers.fab.auth_manager.fab_auth_manager import FabAuthManager
        from fastapi.testclient import TestClient
        from starlette.routing import Mount
        from test_ui_clusters import _clusters_file
        from test_ui_plugin import GETS, _world

        app = create_app(apps="core")
        manager = get_auth_manager()
        assert isinstance(manager, FabAuthManager), f"the auth manager is {type(manager).__name__}, not FAB's"
        assert manager.flask_app is not None, "FAB's app was not created with the API app"
        mounted = [r.app for r in app.routes if isinstance(r, Mount) and r.path == "/ringward"]
        assert mounted, "the ringward plugin's app is not mounted under /ringward"
        clusters_yaml = _clusters_file(result_file.parent / "clusters.yaml")
        cluster_b_dags, cluster_b_roles = cluster_b_permissions(clusters_yaml)
        with manager.flask_app.app_context():
            security = manager.security_manager
            role = security.add_role(NO_DAG_ROLE)
            for action, resource in NO_DAG_PERMISSIONS:
                security.add_permission_to_role(role, security.get_permission(action, resource))
            for role_name, granted in cluster_b_roles.items():
                role = security.add_role(role_name)
                for action, resource in granted:  # DAG:<dag_id> exists once the DAG is synced: created here
                    permission = security.create_permission(action, resource)
                    assert permission is not None, f"FAB did not create the permission {action} on {resource}"
                    security.add_permission_to_role(role, permission)
            for name, role_name in (USERS | CLUSTER_USERS).items():
                created = security.add_user(name, name, "Tester", f"{name}@ringward.invalid",
                                            security.find_role(role_name), password(name))  # fmt: skip
                assert created, f"FAB did not create the user {name!r}"
            roles = sorted(r.name for r in security.get_all_roles())
            cluster_b_granted = {
                name: sorted([p.action.name, p.resource.name] for p in security.find_role(name).permissions)
                for name in cluster_b_roles
            }
        world = _world()
        mounted[0].state.source_factory = lambda request: world
        client = TestClient(app)
        tokens: dict[str, str] = {}
        logins: dict[str, int] = {}
        for name in USERS:
            response = client.post("/auth/token", json={"username": name, "password": password(name)})
            logins[name] = response.status_code
            tokens[name] = response.json()["access_token"]
        cluster_tokens = {"admin": tokens["admin"], "nodags": tokens["nodags"]}
        cluster_logins: dict[str, int] = {}
        for name in CLUSTER_USERS:
            response = client.post("/auth/token", json={"username": name, "password": password(name)})
            cluster_logins[name] = response.status_code
            cluster_tokens[name] = response.json()["access_token"]
        wrong = client.post("/auth/token", json={"username": "admin", "password": "not-the-password"})
        statuses: dict[str, dict[str, Any]] = {}
        for url in GETS:
            statuses[url] = {name: client.get(url, headers={"Authorization": f"Bearer {token}"}).status_code
                             for name, token in tokens.items()}  # fmt: skip
            statuses[url]["anonymous"] = client.get(url, follow_redirects=False).status_code
        press = {"action": "pause", "confirm": "yes"}
        switch = {name: client.post("/ringward/api/repair/switch", data=press,
                                    headers={"Authorization": f"Bearer {token}"}).status_code
                  for name, token in tokens.items()}  # fmt: skip
        switch["anonymous"] = client.post("/ringward/api/repair/switch", data=press).status_code
        result = {
            "auth_manager": type(manager).__name__,
            "roles": roles,
            "logins": logins,
            "wrong_password": wrong.status_code,
            "gets": statuses,
            "switch": switch,
            "switch_pressed_by": [e.changed_by for e in world.store.events],
            "cluster_logins": cluster_logins,
            "cluster_b_dags": cluster_b_dags,
            "cluster_b_permissions": cluster_b_granted,
            "two_clusters": two_clusters(client, mounted[0], cluster_tokens, clusters_yaml),
        }
    result_file.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
