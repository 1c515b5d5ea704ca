"""Assets per cluster and keyspace: the URI (ringward.assets), the events a task adds to its AssetAlias outlet
(ringward_airflow.assets), and the migration report's event when a migration finishes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import Asset, AssetAlias
from ringward.assets import asset_cluster, covered_keyspaces, keyspace_asset_uri, migrations_asset_uri
from ringward.errors import ConfigurationError
from ringward.repair import RepairStatus
from ringward_airflow.assets import MIGRATED, REPAIRED, add_keyspace_events, migrated_alias, repaired_alias

NOW = datetime(2026, 11, 28, tzinfo=UTC)


def test_the_uri_names_cluster_and_keyspace_and_refuses_what_cannot_be_one() -> None:
    assert keyspace_asset_uri("prod-eu.1", "shop") == "cassandra://prod-eu.1/shop"
    assert Asset(keyspace_asset_uri("cassandra_default", "ar_a")).uri == "cassandra://cassandra_default/ar_a"
    with pytest.raises(ConfigurationError, match="letters, digits"):
        keyspace_asset_uri("prod eu", "shop")
    with pytest.raises(ConfigurationError, match="not a Cassandra keyspace name"):
        keyspace_asset_uri("prod", "shop/../x")


def test_the_authority_is_the_declared_name_else_the_connection_and_airflow_keeps_the_uri_as_written() -> None:
    assert asset_cluster("eu_west", "cql_eu") == "eu_west"
    assert asset_cluster(None, "cql_eu") == "cql_eu"
    # No provider registers a `cassandra` URI normaliser: Airflow keeps the URI a downstream DAG writes by hand.
    for uri in (keyspace_asset_uri("eu_west", "Shop_1"), migrations_asset_uri("eu_west"), migrations_asset_uri(None)):
        assert Asset(uri).uri == uri
    assert migrations_asset_uri(None) == "cassandra://ringward/keyspace_migration"
    assert migrations_asset_uri("eu_west") == "cassandra://ringward/keyspace_migration__eu_west"


def test_the_single_cluster_keeps_its_aliases_and_a_declared_clusters_carry_its_name() -> None:
    assert (migrated_alias(None), repaired_alias(None)) == (MIGRATED, REPAIRED)
    assert (migrated_alias("eu"), repaired_alias("eu")) == (f"{MIGRATED}__eu", f"{REPAIRED}__eu")


def status(keyspace: str, share: float | None, age_days: float = 1.0) -> RepairStatus:
    return RepairStatus(keyspace, "t", 864000, NOW, share, NOW - timedelta(days=age_days), 0, 0)


def test_a_keyspace_is_covered_when_every_table_that_needs_repair_is_fully_repaired_in_time() -> None:
    statuses = [status("full", 1.0), status("full", None), status("half", 1.0), status("half", 0.5),
                status("late", 1.0, age_days=11), status("rf1", None)]  # fmt: skip
    assert covered_keyspaces(statuses) == ["full"]


class Events:
    def __init__(self) -> None:
        self.added: list[tuple[str, str, dict[str, Any]]] = []

    def __getitem__(self, alias: AssetAlias) -> Any:
        return SimpleNamespace(add=lambda asset, extra: self.added.append((alias.name, asset.uri, extra)))


def test_events_go_to_the_declared_alias_only() -> None:
    events = Events()
    declared = {"task": SimpleNamespace(outlets=[AssetAlias(REPAIRED)]), "outlet_events": events}
    assets = add_keyspace_events(declared, REPAIRED, "c1", ["a", "b"], {"run_id": "r"})
    assert [a.uri for a in assets] == ["cassandra://c1/a", "cassandra://c1/b"]
    assert events.added == [
        (REPAIRED, "cassandra://c1/a", {"run_id": "r"}),
        (REPAIRED, "cassandra://c1/b", {"run_id": "r"}),
    ]
    undeclared = {"task": SimpleNamespace(outlets=[AssetAlias(MIGRATED)]), "outlet_events": Events()}
    assert add_keyspace_events(undeclared, REPAIRED, "c1", ["a"], {}) == []


@pytest.mark.parametrize(
    ("cluster", "alias", "uri"),
    [
        (None, MIGRATED, "cassandra://cassandra_default/ks"),  # the single cluster: its CQL connection, as before
        ("eu_west", f"{MIGRATED}__eu_west", "cassandra://eu_west/ks"),  # a declared cluster: its name
    ],
)
def test_a_finished_migration_adds_an_event_of_its_keyspaces_asset(
    monkeypatch: pytest.MonkeyPatch, cluster: str | None, alias: str, uri: str
) -> None:
    from ringward_airflow.migration_operators import MigrationReportOperator

    new = {"class": "NetworkTopologyStrategy", "dc1": 2}
    record = {"migration_id": "ks@run1", "lease_owner": "ks@run1", "keyspace": "ks", "steps": [new], "new": new,
              "old": {"class": "SimpleStrategy", "replication_factor": 2}, "affected_ranges": 6,
              "total_ranges": 12}  # fmt: skip
    store = SimpleNamespace(set_migration_state=lambda *a: None, release_lease=lambda *a: None)
    hook = SimpleNamespace(ops_store=lambda: store, close=lambda: None)
    monkeypatch.setattr(MigrationReportOperator, "cassandra", property(lambda self: hook))
    operator = MigrationReportOperator(task_id="report", outlets=[AssetAlias(alias)], cluster=cluster)
    ti = SimpleNamespace(xcom_pull=lambda task_ids, key="return_value": record if task_ids == "precheck" else None,
                         dag_id="keyspace_migration", get_task_breadcrumbs=lambda **kw: [])  # fmt: skip
    dag = SimpleNamespace(task_ids=["precheck", "report"], get_task=lambda task_id: operator)
    events = Events()
    operator.execute({"ti": ti, "run_id": "run1", "dag": dag, "task": operator, "outlet_events": events})  # type: ignore[arg-type]
    assert events.added == [(alias, uri,
                             {"migration_id": "ks@run1", "from": record["old"], "to": record["new"]})]  # fmt: skip
