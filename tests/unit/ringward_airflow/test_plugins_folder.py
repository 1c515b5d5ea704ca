"""Airflow's plugin manager over plugins/: it imports every .py file its .airflowignore leaves, each as a
top-level module named after the file, in every Airflow component. Only ringward_plugin.py may be one; the
packages beside it (and nothing else) are imported normally, under their own names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# Run in a fresh interpreter: the plugin manager loads once per process, and what it imports stays imported.
DISCOVERY = """
import json, sys
from pathlib import Path
folder = Path(sys.argv[1]).resolve()
before = set(sys.modules)
from airflow import plugins_manager
from airflow._shared.module_loading import find_path_from_directory
files = find_path_from_directory(str(folder), ".airflowignore", "glob")
listed = sorted(str(Path(p).relative_to(folder)) for p in files if p.endswith(".py"))
plugins, errors = plugins_manager._get_plugins()
bare = []
for name, module in list(sys.modules.items()):
    file = getattr(module, "__file__", None)
    if name in before or not file or not Path(file).resolve().is_relative_to(folder):
        continue
    relative = Path(file).resolve().relative_to(folder).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    if name != ".".join(parts) or ("." not in name and relative.name != "__init__"):
        bare.append(name)  # imported by file, not under its package's name
print(json.dumps({"listed": listed, "bare": sorted(bare), "plugins": sorted(p.name for p in plugins),
                  "errors": errors}))
"""


def discover(plugins_folder: Path) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__CORE__PLUGINS")}
    env["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(plugins_folder)
    env["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"  # no example plugins beside ours
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "include"), str(plugins_folder)])
    result = subprocess.run([sys.executable, "-c", DISCOVERY, str(plugins_folder)], capture_output=True, text=True,
                            env=env, cwd=ROOT, timeout=300, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    found: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


def test_only_ringward_plugin_is_imported_as_a_plugin_module() -> None:
    found = discover(ROOT / "plugins")
    assert found["listed"] == ["ringward_plugin.py"]  # .airflowignore leaves nothing else
    assert found["bare"] == ["ringward_plugin"]  # no `cluster`, `spec`, `hooks`, ... as top-level modules
    assert found["plugins"] == ["ringward"] and found["errors"] == {}


def test_the_fleet_simulator_is_not_on_the_plugins_path() -> None:
    assert not list((ROOT / "plugins").rglob("*fleetsim*"))
    assert (ROOT / "tools" / "fleetsim" / "ringward_fleetsim" / "__init__.py").is_file()
