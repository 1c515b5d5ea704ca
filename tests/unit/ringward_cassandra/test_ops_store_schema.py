"""The ops store on a cluster where an administrator made the keyspace and ringward may not create keyspaces."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ringward_cassandra.ops_store import OpsStore


class _Schema:
    """A session answering system_schema reads from `tables`, recording every other statement."""

    def __init__(self, keyspace: bool, tables: set[str], migrations: list[Any] | None = None) -> None:
        self.keyspace, self.tables = keyspace, tables
        self.migrations = migrations or []  # rows of ringward_ops.migrations
        self.statements: list[str] = []
        self.params: list[Any] = []
        self.cluster = SimpleNamespace(
            control_connection=SimpleNamespace(wait_for_schema_agreement=lambda wait_time: True),
            refresh_table_metadata=lambda *a: None,
            metadata=SimpleNamespace(keyspaces={"ringward_ops": SimpleNamespace(tables={
                "repair_history": SimpleNamespace(columns=dict.fromkeys(
                    ["started_at", "finished_at", "coordinator", "replicas"]))})}),
        )  # fmt: skip

    def execute(self, statement: Any, params: Any = None) -> list[Any]:
        text = str(getattr(statement, "query_string", statement))  # a SimpleStatement (QUORUM) or the DDL text
        if "system_schema.keyspaces" in text:
            return [SimpleNamespace(keyspace_name="ringward_ops")] if self.keyspace else []
        if "system_schema.tables" in text:
            return [SimpleNamespace(table_name=name) for name in sorted(self.tables)]
        self.statements.append(text)
        self.params.append(params)
        if text.startswith("SELECT") and "FROM ringward_ops.migrations" in text:
            return list(self.migrations)
        return []


def test_a_keyspace_without_ringwards_tables_is_not_a_store_yet() -> None:
    assert not OpsStore(_Schema(keyspace=True, tables=set())).exists()  # type: ignore[arg-type]
    assert not OpsStore(_Schema(keyspace=True, tables={"leases", "migrations"})).exists()  # type: ignore[arg-type]


def test_an_existing_keyspace_is_not_created_again_only_the_tables() -> None:
    """CREATE KEYSPACE IF NOT EXISTS needs CREATE on all keyspaces even when the keyspace exists."""
    session = _Schema(keyspace=True, tables=set())
    OpsStore(session).ensure_schema([("dc1", 3)])  # type: ignore[arg-type]
    assert not any("CREATE KEYSPACE" in statement for statement in session.statements)
    assert sum("CREATE TABLE IF NOT EXISTS ringward_ops." in statement for statement in session.statements) == 14


def test_a_missing_keyspace_is_created_as_the_grants_command_prints_it() -> None:
    from ringward.permissions import ops_keyspace_statement

    session = _Schema(keyspace=False, tables=set())
    OpsStore(session).ensure_schema([("dc1", 3)])  # type: ignore[arg-type]
    assert session.statements[0] == ops_keyspace_statement({"dc1": 3}).rstrip(";")


def test_ensure_schema_on_a_complete_store_runs_no_ddl_and_waits_for_nothing() -> None:
    """Several tasks call it: with every table there (and the legacy repair_history of an upgraded cluster), it
    reads system_schema once and changes nothing."""
    from ringward_cassandra.ops.schema import TABLES

    session = _Schema(keyspace=True, tables=set(TABLES) | {"repair_history"})
    waits: list[int] = []
    session.cluster.control_connection.wait_for_schema_agreement = lambda wait_time: waits.append(wait_time)
    OpsStore(session).ensure_schema([("dc1", 3)])  # type: ignore[arg-type]
    assert session.statements == [] and waits == []


def test_an_upgraded_store_gets_only_its_missing_tables() -> None:
    old = {"leases", "migration_journal", "migrations", "repair_history", "repair_runs", "repair_switch",
           "controller_pauses"}  # fmt: skip
    session = _Schema(keyspace=True, tables=old)
    assert OpsStore(session).exists()  # type: ignore[arg-type]  # an older version's store is a store (its UI must not say "none")
    OpsStore(session).ensure_schema([("dc1", 3)])  # type: ignore[arg-type]
    created = sorted(s.split("ringward_ops.", 1)[1].split(" ", 1)[0] for s in session.statements if "CREATE" in s)
    assert created == ["migration_pages", "migration_progress", "migration_runs", "repair_plan", "repair_previews",
                       "repair_progress", "repair_segments", "repair_type_segments"]  # fmt: skip
    assert not any("ALTER" in s or "repair_history" in s for s in session.statements)


def test_an_upgraded_store_indexes_the_migrations_recorded_before_by_their_runs() -> None:
    """migration_runs, created on an upgraded store, is filled from the migrations table once: each migration under
    the run its record names and the run that started it (a taken-over one under both); none without a DAG."""
    import json

    old = {"leases", "migration_journal", "migrations", "repair_runs", "repair_switch", "controller_pauses"}

    def row(migration_id: str, record: dict[str, Any]) -> Any:
        return SimpleNamespace(migration_id=migration_id, keyspace_name=record["keyspace"], state="altered:1",
                               plan=json.dumps(record), updated_at=None)  # fmt: skip

    rows = [
        row("shop@run1", {"keyspace": "shop", "dag_id": "keyspace_migration", "run_id": "run2"}),  # taken over
        row("users@run3", {"keyspace": "users", "dag_id": None, "run_id": "run3"}),
    ]
    session = _Schema(keyspace=True, tables=old, migrations=rows)
    OpsStore(session).ensure_schema([("dc1", 3)])  # type: ignore[arg-type]
    indexed = sorted(tuple(params[:3]) for text, params in zip(session.statements, session.params, strict=True)
                     if text.startswith("INSERT INTO ringward_ops.migration_runs"))  # fmt: skip
    assert indexed == [("keyspace_migration", "run1", "shop@run1"), ("keyspace_migration", "run2", "shop@run1")]
    session = _Schema(
        keyspace=True, tables=old | {"migration_runs", "migration_pages", "migration_progress"}, migrations=rows
    )
    OpsStore(session).ensure_schema([("dc1", 3)])  # type: ignore[arg-type]
    assert not any("migration" in text for text in session.statements)  # indexed once, when the table is created


def test_history_bucket_is_the_unsigned_top_byte_of_the_start_token() -> None:
    from ringward_cassandra.ops_store import bucket_bounds, history_bucket

    assert history_bucket(-(2**63)) == 0 and history_bucket(2**63 - 1) == 255
    assert history_bucket(-1) == 127 and history_bucket(0) == 128
    for bucket in (0, 1, 127, 128, 254, 255):
        first, last = bucket_bounds(bucket)
        assert history_bucket(first) == history_bucket(last) == bucket
        assert bucket == 0 or history_bucket(first - 1) == bucket - 1
