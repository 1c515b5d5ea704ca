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
"""

from __future__ import annotations

import json
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


def password(name: str) -> str:
    return f"{name}-fab-test-password"


def main(result_file: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # third-party deprecations (FAB, starlette's test client): not this test's
        from airflow.api_fastapi.app import create_app, get_auth_manager
        from airflow.providers.fab.auth_manager.fab_auth_manager import FabAuthManager
        from fastapi.testclient import TestClient
        from starlette.routing import Mount
        from test_ui_plugin import GETS, _world

        app = create_app(apps="core")
        manager = get_auth_manager()
        assert isinstance(manager, FabAuthManager), f"the auth manager is {type(manager).__name__}, not FAB's"
        assert manager.flask_app is not None, "FAB's app was not created with the API app"
        mounted = [r.app for r in app.routes if isinstance(r, Mount) and r.path == "/ringward"]
        assert mounted, "the ringward plugin's app is not mounted under /ringward"
        with manager.flask_app.app_context():
            security = manager.security_manager
            role = security.add_role(NO_DAG_ROLE)
            for action, resource in NO_DAG_PERMISSIONS:
                security.add_permission_to_role(role, security.get_permission(action, resource))
            for name, role_name in USERS.items():
                created = security.add_user(name, name, "Tester", f"{name}@ringward.invalid",
                                            security.find_role(role_name), password(name))  # fmt: skip
                assert created, f"FAB did not create the user {name!r}"
            roles = sorted(r.name for r in security.get_all_roles())
        world = _world()
        mounted[0].state.source_factory = lambda request: world
        client = TestClient(app)
        tokens: dict[str, str] = {}
        logins: dict[str, int] = {}
        for name in USERS:
            response = client.post("/auth/token", json={"username": name, "password": password(name)})
            logins[name] = response.status_code
            tokens[name] = response.json()["access_token"]
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
        }
    result_file.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
