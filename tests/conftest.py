"""Test-wide setup: Airflow must see a project-local home before anything imports it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_AIRFLOW_HOME = Path(os.environ.get("AIRFLOW_HOME") or ROOT / ".airflow-test")
# Under pytest-xdist (`make test` runs the unit and DAG tests on both cores), and in each lane of the integration
# tests (tests/integration/conftest.py), each process has a home and an SQLite database of its own: two processes
# migrating or writing one SQLite file would lock each other out.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER") or (
    f"lane-{os.environ['RINGWARD_TEST_LANE']}" if os.environ.get("RINGWARD_TEST_LANE") else None
)
if _WORKER:
    _AIRFLOW_HOME = _AIRFLOW_HOME / _WORKER
    _AIRFLOW_HOME.mkdir(parents=True, exist_ok=True)
    os.environ["AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
    os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_AIRFLOW_HOME}/airflow.db"
    if os.environ.get("RINGWARD_AIRFLOW_HOME"):
        os.environ["RINGWARD_AIRFLOW_HOME"] = str(Path(os.environ["RINGWARD_AIRFLOW_HOME"]) / _WORKER)
os.environ.setdefault("AIRFLOW_HOME", str(_AIRFLOW_HOME))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{_AIRFLOW_HOME}/airflow.db")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(ROOT / "dags"))
os.environ.setdefault("AIRFLOW__CORE__PLUGINS_FOLDER", str(ROOT / "plugins"))
# tools/fleetsim: the fleet simulator (ringward_fleetsim), for tests and benchmarks only: nothing shipped imports it.
for folder in ("include", "plugins", "tools/fleetsim"):
    if str(ROOT / folder) not in sys.path:
        sys.path.insert(0, str(ROOT / folder))
