"""The repair package exposes exactly its `__all__` and stays pure (no Airflow, Spark or driver)."""

from __future__ import annotations

import ast
from pathlib import Path

import ringward.repair as repair

PACKAGE = Path(repair.__file__).parent
FORBIDDEN = ("airflow", "pyspark", "cassandra")


def test_all_lists_every_public_name_once_and_each_resolves() -> None:
    assert len(repair.__all__) == len(set(repair.__all__))
    public = {name for name in vars(repair) if not name.startswith("_") and name != "annotations"}
    submodules = {p.stem for p in PACKAGE.glob("_*.py")}
    assert public - submodules == set(repair.__all__)
    for name in repair.__all__:
        assert getattr(repair, name) is not None


def test_modules_behind_the_package_are_private_and_declare_all() -> None:
    for module in PACKAGE.glob("*.py"):
        assert module.name.startswith("_"), f"{module.name}: keep modules private behind __init__"
        tree = ast.parse(module.read_text())
        names = {
            t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)
        }
        assert "__all__" in names, f"{module.name} has no __all__"


def test_no_forbidden_imports() -> None:
    for module in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            assert not set(roots) & set(FORBIDDEN), f"{module.name} imports {roots}"
