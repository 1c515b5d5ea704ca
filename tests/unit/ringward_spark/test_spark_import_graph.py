"""The production Spark path does not depend on the development cluster harness (ringward_cassandra.localcluster,
which resolves jars with Maven): not in the source of ringward_spark / ringward_airflow, not at import time."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PLUGINS = Path(__file__).resolve().parents[3] / "plugins"
PRODUCTION = ("ringward_spark", "ringward_airflow")
HARNESS = "ringward_cassandra.localcluster"


def _imports(source: Path) -> list[str]:
    """Every module an import statement in `source` names (top level or inside functions)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return names


def test_no_production_module_imports_the_local_cluster_harness() -> None:
    offenders = {
        f"{source.relative_to(PLUGINS)}: {name}"
        for package in PRODUCTION
        for source in (PLUGINS / package).rglob("*.py")
        for name in _imports(source)
        if name == HARNESS or name.startswith(HARNESS + ".")
    }
    assert offenders == set()


def test_the_scan_sees_a_harness_import() -> None:
    """The check above would notice one (the CLI's local commands do import the harness)."""
    names = _imports(PLUGINS / "ringward_cli" / "airflow_env.py")
    assert any(name.startswith(HARNESS) for name in names)


def test_importing_the_spark_path_loads_no_harness_module() -> None:
    modules = [
        "ringward_spark.submit",
        "ringward_spark.jars",
        "ringward_spark.ringward_job",
        "ringward_spark.counts",
        "ringward_airflow.spark_operators",
        "ringward_airflow.migration_operators",
        "ringward_airflow.hooks",
    ]
    probe = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules)
    probe += f"print(sorted(m for m in sys.modules if m.startswith({HARNESS!r})))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"
