"""Airflow's own API app with the ringward plugin mounted as the API server mounts it, and simple-auth tokens.

Test modules import the `airflow_api` fixture from here (tests/ is put on sys.path by the importing module).
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROLES = ("admin", "viewer", "user")


@pytest.fixture(scope="module")
def airflow_api() -> Iterator[tuple[Any, Any, dict[str, str]]]:
    """(TestClient of the whole API app, the mounted ringward app, a token per role)."""
    home = Path(os.environ["AIRFLOW_HOME"])
    marker = home / ".db-migrated-ui"
    if not marker.exists():  # the auth manager checks revoked tokens in the metadata database
        home.mkdir(parents=True, exist_ok=True)
        airflow = Path(sys.executable).parent / "airflow"
        subprocess.run([str(airflow), "db", "migrate"], check=True, stdout=subprocess.DEVNULL, env=dict(os.environ))
        marker.touch()
    patch = pytest.MonkeyPatch()
    patch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", ",".join(f"{r}:{r}" for r in ROLES))
    patch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "ringward-ui-test-" + "x" * 64)
    with warnings.catch_warnings():
        # Third-party deprecations: starlette's test client on httpx, pathspec's pattern name (plugin discovery).
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
        warnings.filterwarnings("ignore", message="GitWildMatchPattern")
        from airflow.api_fastapi.app import create_app, get_auth_manager, purge_cached_app
        from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
        from fastapi.testclient import TestClient
        from starlette.routing import Mount

        app = create_app(apps="core")
    mounted = [r.app for r in app.routes if isinstance(r, Mount) and r.path == "/ringward"]
    assert mounted, "the ringward plugin's app is not mounted under /ringward"
    manager = get_auth_manager()
    tokens = {role: manager.generate_jwt(SimpleAuthManagerUser(username=role, role=role)) for role in ROLES}
    try:
        yield TestClient(app), mounted[0], tokens
        # The plugin app is one object for the whole process (the integration UI test serves it too): a test
        # that swaps its source must put the factory back, never delete it (monkeypatch on a starlette State
        # deletes the attribute it undoes).
        assert callable(getattr(mounted[0].state, "source_factory", None)), "a test left the app without its source"
    finally:
        purge_cached_app()
        patch.undo()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
