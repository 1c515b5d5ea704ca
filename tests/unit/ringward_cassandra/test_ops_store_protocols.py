"""Both ops stores satisfy the storage Protocol of each record kind they hold, and every store port the nightly
repair uses (issue 37): statically (mypy checks `_static` and `_night_static`, this file being in its `files`) and
at runtime (each Protocol's members, with the same parameters, defaults and annotations, on `OpsStore`, on its
store of that kind and on `MemoryOpsStore`). The night's ports are the kinds' Protocols or narrower ones they
extend, declared once: no port declares a method of its own, so no adapter is needed between store and night."""

from __future__ import annotations

import ast
import inspect
import tomllib
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pytest
from ringward.migration_storage import ControllerPauseStorage, LeaseReader, LeaseStorage, MigrationStorage
from ringward.repair import (
    PlanStore,
    PreviewFindings,
    PreviewKeeper,
    PreviewStorage,
    RepairHistoryStorage,
    RepairRuns,
    RepairRunStorage,
    RepairSwitch,
    ReportStore,
    RunPlanStorage,
    RunProgress,
    RunProgressStorage,
    RunStore,
    SegmentHistory,
    SwitchStorage,
)
from ringward_cassandra.memory_ops_store import MemoryOpsStore
from ringward_cassandra.ops_store import OpsStore

ROOT = Path(__file__).resolve().parents[3]

# Record kind -> its storage Protocol, the attribute of `OpsStore` holding its Cassandra store, and whether the
# in-memory store holds that kind (it holds the nightly path's, and leases).
KINDS: dict[str, tuple[type[Any], str, bool]] = {
    "leases": (LeaseStorage, "lease_store", True),
    "migrations": (MigrationStorage, "migration_store", True),
    "controller_pauses": (ControllerPauseStorage, "controller_pause_store", False),
    "history": (RepairHistoryStorage, "history_store", True),
    "plans": (RunPlanStorage, "plan_store", True),
    "progress": (RunProgressStorage, "progress_store", True),
    "runs": (RepairRunStorage, "run_store", True),
    "previews": (PreviewStorage, "preview_store", True),
    "switch": (SwitchStorage, "switch_store", True),
}
# What only the Cassandra store has, in no record kind's Protocol: its schema and a tool's history delete.
CASSANDRA_ONLY = {"ensure_schema", "exists", "forget_repair_history"}


def _static(
    store: OpsStore, memory: MemoryOpsStore
) -> tuple[
    list[LeaseStorage], list[MigrationStorage], list[ControllerPauseStorage], list[RepairHistoryStorage],
    list[RunPlanStorage], list[RunProgressStorage], list[RepairRunStorage], list[PreviewStorage], list[SwitchStorage],
]:  # fmt: skip
    """Never called: mypy checks that the facade, each of its stores and the in-memory store fit their Protocols."""
    return (
        [store, store.lease_store, memory],
        [store, store.migration_store, memory],
        [store, store.controller_pause_store],
        [store, store.history_store, memory],
        [store, store.plan_store, memory],
        [store, store.progress_store, memory],
        [store, store.run_store, memory],
        [store, store.preview_store, memory],
        [store, store.switch_store, memory],
    )


# The store ports of the nightly repair: the night's three stores and the narrower Protocols they compose.
NIGHT_PORTS: list[type[Any]] = [PlanStore, ReportStore, RunStore, SegmentHistory, RunProgress, RepairRuns,
                                PreviewKeeper, PreviewFindings, RepairSwitch, LeaseReader]  # fmt: skip


def _night_static(
    store: OpsStore, memory: MemoryOpsStore
) -> tuple[
    list[PlanStore], list[ReportStore], list[RunStore], list[SegmentHistory], list[RunProgress], list[RepairRuns],
    list[PreviewKeeper], list[PreviewFindings], list[RepairSwitch], list[LeaseReader],
]:  # fmt: skip
    """Never called: mypy checks that both stores, as they are, are every store the night takes."""
    return [store, memory], [store, memory], [store, memory], [store, memory], [store, memory], [store, memory], \
        [store, memory], [store, memory], [store, memory], [store, memory]  # fmt: skip


def protocol_members(protocol: type[Any]) -> dict[str, Callable[..., Any] | None]:
    """The members a Protocol declares (its bases' too): method name -> function, attribute name -> None."""
    members: dict[str, Callable[..., Any] | None] = {}
    for klass in reversed(protocol.__mro__):
        if klass in (object, Protocol, typing.Generic) or not getattr(klass, "_is_protocol", False):
            continue
        for name in getattr(klass, "__annotations__", {}):
            members[name] = None
        for name, value in vars(klass).items():
            if not name.startswith("_") and inspect.isfunction(value):
                members[name] = value
    return members


def protocol_problems(protocol: type[Any], implementation: object) -> list[str]:
    """How `implementation` differs from `protocol`: a missing member, or a method whose parameters (names, kinds,
    defaults: `...` in the Protocol means "has one") or annotations differ."""
    problems = []
    for name, declared in protocol_members(protocol).items():
        actual = getattr(implementation, name, None)
        if actual is None:
            problems.append(f"{name}: missing")
            continue
        if declared is None:
            continue
        wanted = list(inspect.signature(declared).parameters.values())[1:]  # without self
        given = list(inspect.signature(actual).parameters.values())
        if [(p.name, p.kind) for p in wanted] != [(p.name, p.kind) for p in given]:
            problems.append(f"{name}: parameters {[p.name for p in given]}, not {[p.name for p in wanted]}")
            continue
        for w, g in zip(wanted, given, strict=True):
            has_default = g.default is not inspect.Parameter.empty
            if (w.default is inspect.Parameter.empty) == has_default or (
                w.default is not Ellipsis and has_default and w.default != g.default
            ):
                problems.append(f"{name}: default of {w.name} is {g.default!r}, not {w.default!r}")
        hints, declared_hints = typing.get_type_hints(actual), typing.get_type_hints(declared)
        for key, hint in declared_hints.items():
            if hints.get(key) != hint:
                problems.append(f"{name}: {key} is {hints.get(key)}, not {hint}")
    return problems


def _implementations() -> list[tuple[str, str, object]]:
    store = OpsStore(object())  # constructors only store their arguments: no statement is run here
    found: list[tuple[str, str, object]] = []
    for kind, (_, attribute, in_memory) in KINDS.items():
        found += [(kind, "OpsStore", store), (kind, f"OpsStore.{attribute}", getattr(store, attribute))]
        if in_memory:
            found.append((kind, "MemoryOpsStore", MemoryOpsStore()))
    return found


@pytest.mark.parametrize(("kind", "label", "implementation"), _implementations(),
                         ids=[f"{k}-{label}" for k, label, _ in _implementations()])  # fmt: skip
def test_each_store_has_its_kinds_protocol_with_the_same_signatures(
    kind: str, label: str, implementation: object
) -> None:
    protocol = KINDS[kind][0]
    assert protocol_members(protocol), f"{protocol.__name__} declares nothing"
    assert protocol_problems(protocol, implementation) == [], f"{label} does not fit {protocol.__name__}"


def test_the_runtime_check_finds_what_breaks_a_protocol() -> None:
    """A store missing a method, renaming a parameter, dropping a default or changing a type is reported."""

    class Broken:
        lease_ttl_seconds = 1

        def acquire_lease(self, resource: str, holder: str, purpose: str) -> None: ...

        def release_lease(self, resource: str, owner: str = "") -> None: ...

        def lease(self, resource: int) -> None: ...

    problems = protocol_problems(LeaseStorage, Broken())
    assert sorted(p.split(":")[0] for p in problems) == ["acquire_lease", "lease", "lease", "leased_keyspaces",
                                                         "release_lease"]  # fmt: skip
    assert "leased_keyspaces: missing" in problems
    assert any("default of owner" in p for p in problems)
    assert protocol_problems(SwitchStorage, MemoryOpsStore()) == []  # defaults given where the Protocol has `...`


def test_every_public_method_of_ops_store_belongs_to_a_record_kind() -> None:
    """The facade adds nothing outside the Protocols but the Cassandra-only extras it names."""
    public = {n for n, v in vars(OpsStore).items() if not n.startswith("_") and inspect.isfunction(v)}
    declared = {name for protocol, _, _ in KINDS.values() for name, f in protocol_members(protocol).items() if f}
    assert public - declared == CASSANDRA_ONLY
    assert declared - public == set()


def test_the_facades_ttls_are_its_stores_ttls() -> None:
    store = OpsStore(object(), lease_ttl_seconds=10, history_ttl_seconds=20)
    assert (store.lease_store.lease_ttl_seconds, store.history_store.ops.history_ttl_seconds) == (10, 20)
    store.lease_ttl_seconds, store.history_ttl_seconds = 3, 4  # as the contract's lease check sets it
    assert store.lease_store.lease_ttl_seconds == 3
    assert {s.ops.history_ttl_seconds for s in (store.history_store, store.plan_store, store.preview_store)} == {4}


def test_the_memory_store_imports_no_private_helper_of_the_cassandra_store() -> None:
    tree = ast.parse((ROOT / "plugins/ringward_cassandra/memory_ops_store.py").read_text())
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    modules = {node.module for node in imports}
    assert "ringward_cassandra.ops.layout" in modules
    assert not {m for m in modules if m and (m.endswith("ops_store") or "._" in m)}
    assert not [alias.name for node in imports for alias in node.names if alias.name.startswith("_")]


def test_the_static_check_and_the_contract_are_in_mypys_scope() -> None:
    """`_static` and the typed contract only check anything if mypy reads them."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]

    def checked(path: str) -> bool:  # named itself, or inside a folder mypy is given
        return any(path == entry or path.startswith(entry.rstrip("/") + "/") for entry in config["files"])

    for path in ("tests/ops_store_contract.py", "tests/unit/ringward_cassandra/test_ops_store_contract.py",
                 "tests/unit/ringward_cassandra/test_ops_store_protocols.py",
                 "plugins/ringward_cassandra/ops/history.py",
                 "plugins/ringward_cassandra/memory_ops_store.py"):  # fmt: skip
        assert checked(path), path
    # Issue 37: strict on the pure core and on every plugin package (operators and UI included).
    packages = ["include/ringward", *(f"plugins/{p.name}" for p in sorted((ROOT / "plugins").iterdir()) if p.is_dir()
                                      and (p / "__init__.py").exists())]  # fmt: skip
    assert len(packages) > 4 and all(checked(f"{package}/__init__.py") for package in packages), packages
    assert config["strict"] is True


@pytest.mark.parametrize("port", NIGHT_PORTS, ids=[p.__name__ for p in NIGHT_PORTS])
@pytest.mark.parametrize("label", ["OpsStore", "MemoryOpsStore"])
def test_both_stores_are_every_store_port_of_the_night(port: type[Any], label: str) -> None:
    implementation = OpsStore(object()) if label == "OpsStore" else MemoryOpsStore()
    assert protocol_members(port), f"{port.__name__} declares nothing"
    assert protocol_problems(port, implementation) == [], f"{label} does not fit {port.__name__}"


def not_declared_once(port: type[Any]) -> list[str]:
    """The methods of `port` that are not the very function one record kind's Protocol declares (a port that
    redeclares a method is a second layer to keep in step with the stores). Attributes are the kinds' own."""
    problems = []
    methods = {name: function for name, function in protocol_members(port).items() if function is not None}
    assert methods, f"{port.__name__} declares no method"
    for name, function in methods.items():
        owners = [kind for kind, (protocol, _, _) in KINDS.items() if protocol_members(protocol).get(name) is function]
        if len(owners) != 1:
            problems.append(f"{name}: declared by {owners or 'no record kind'}")
    return problems


@pytest.mark.parametrize("port", NIGHT_PORTS, ids=[p.__name__ for p in NIGHT_PORTS])
def test_each_night_port_is_made_of_record_kinds_protocols_declared_once(port: type[Any]) -> None:
    assert not_declared_once(port) == []


def test_the_declared_once_check_finds_a_redeclared_or_new_method() -> None:
    class Redeclared(SegmentHistory, Protocol):
        def repair_history(self, keyspace: str | None = None, repair_type: str = "full") -> list[Any]: ...

        def keep_preview(self, finding: object) -> None: ...

    assert not_declared_once(Redeclared) == [
        "repair_history: declared by no record kind",
        "keep_preview: declared by no record kind",
    ]


@pytest.mark.parametrize("port", [PlanStore, RunStore, ReportStore], ids=lambda p: p.__name__)
def test_the_night_reads_leases_and_cannot_take_or_release_one(port: type[Any]) -> None:
    """Leases belong to the migration: the night's stores offer at most `leased_keyspaces` (issue 37)."""
    members = protocol_members(port)
    assert not {"acquire_lease", "release_lease", "lease", "lease_ttl_seconds"} & set(members)
    assert ("leased_keyspaces" in members) == (port is not ReportStore)
