"""The pure core's `__all__` lists exactly its public modules; each declares `__all__` and imports no
Airflow, Spark or driver module."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import ringward

PACKAGE = Path(ringward.__file__).parent
FORBIDDEN = {"airflow", "pyspark", "cassandra", "ringward_airflow", "ringward_cassandra", "ringward_spark"}


def _public_modules() -> set[str]:
    files = {p.stem for p in PACKAGE.glob("*.py") if not p.name.startswith("_")}
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file() and not p.name.startswith("_")}
    return files | packages


def test_all_names_exactly_the_public_modules_once() -> None:
    assert len(ringward.__all__) == len(set(ringward.__all__))
    assert set(ringward.__all__) == _public_modules()


def test_every_public_module_declares_all_and_each_name_resolves() -> None:
    for name in ringward.__all__:
        module = importlib.import_module(f"ringward.{name}")
        assert isinstance(getattr(module, "__all__", None), list), f"ringward.{name} has no __all__"
        for exported in module.__all__:
            assert hasattr(module, exported), f"ringward.{name}.__all__ names {exported!r}, which it lacks"


def test_the_core_imports_no_airflow_spark_driver_or_plugin_module() -> None:
    for source in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = {(node.module or "").split(".")[0]}
            else:
                continue
            assert not roots & FORBIDDEN, f"{source.relative_to(PACKAGE)} imports {sorted(roots & FORBIDDEN)}"
