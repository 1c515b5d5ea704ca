"""The nightly repair's runtime: the shipped one is the connections' real cluster on the wall clock; no
connection can put the fleet simulator in its place, and nothing shipped imports the simulator. Only a
process that runs the DAG itself swaps the runtime (`use_runtime`), for the time of a block."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from ringward_airflow import hooks
from ringward_airflow.hooks import RingwardCassandraHook
from ringward_airflow.repair_runtime import RepairRuntime, current_runtime, use_runtime
from ringward_cassandra.nodetool import NodetoolClient
from ringward_fleetsim import FleetSpec, Simulator
from ringward_fleetsim.runtime import SimulatedRuntime

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ("include", "plugins", "dags")


class _RealDriver(Exception):
    pass


def test_a_connection_naming_a_fleet_spec_still_gets_the_real_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The extra that once switched a DAG to the simulator (`fleet_simulator`) is an unknown extra now."""
    spec = tmp_path / "spec.json"
    FleetSpec.small().dump(spec)
    extra = {"fleet_simulator": str(spec)}
    monkeypatch.setenv("AIRFLOW_CONN_CASSANDRA_DEFAULT",
                       json.dumps({"conn_type": "cassandra", "host": "10.0.0.9", "extra": extra}))  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_RINGWARD_NODETOOL",
                       json.dumps({"conn_type": "generic", "host": "{address}", "extra": extra}))  # fmt: skip
    contacted: list[list[str]] = []

    def build_cluster(**settings: object) -> None:
        contacted.append(list(settings["contact_points"]))  # type: ignore[call-overload]
        raise _RealDriver

    monkeypatch.setattr(hooks, "build_cluster", build_cluster)
    runtime = current_runtime()
    assert type(runtime) is RepairRuntime and runtime.reads_node_state
    cassandra = runtime.cassandra("cassandra_default")
    assert isinstance(cassandra, RingwardCassandraHook)
    with pytest.raises(_RealDriver):
        cassandra.ring()  # the driver, on the connection's host: not the simulator's three nodes
    assert contacted == [["10.0.0.9"]]
    assert isinstance(runtime.nodetool("ringward_nodetool"), NodetoolClient)


def test_use_runtime_holds_for_its_block_only() -> None:
    simulated = SimulatedRuntime(Simulator(FleetSpec.small()))
    shipped = current_runtime()
    with use_runtime(simulated):
        assert current_runtime() is simulated
        assert current_runtime().cassandra("cassandra_default").ring().addresses() == [
            "127.0.0.2", "127.0.0.3", "127.0.0.4",
        ]  # fmt: skip
    assert current_runtime() is shipped
    with pytest.raises(RuntimeError), use_runtime(simulated):
        raise RuntimeError("a failed run")
    assert current_runtime() is shipped


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_nothing_shipped_imports_or_names_the_simulator() -> None:
    files = [path for folder in SHIPPED for path in (ROOT / folder).rglob("*.py")]
    assert len(files) > 50
    importing = sorted(str(p.relative_to(ROOT)) for p in files
                       if any(name.split(".")[0] == "ringward_fleetsim" for name in _imports(p)))  # fmt: skip
    assert importing == []
    naming = sorted(str(p.relative_to(ROOT)) for p in files if "fleet_simulator" in p.read_text())
    assert naming == []
