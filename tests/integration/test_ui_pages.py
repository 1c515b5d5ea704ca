"""The ringward pages on the real cluster, after a real migration step of a small keyspace (operators driven
one by one as the scheduler would, as in test_migration_faults.py): what a person sees is what ringward_ops
and the cluster hold. The pause switch is pressed through the page's endpoint and read back the way the
nightly repair task reads it."""

from __future__ import annotations

import logging
import sys
import time
from fnmatch import fnmatchcase
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import ui_fixtures  # noqa: E402
from ui_fixtures import bearer  # noqa: E402

airflow_api = ui_fixtures.airflow_api  # the fixture, registered in this module

NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
KEYSPACE = "ui_pages"
RUN_ID = "ui-pages-run"


class FakeTaskInstance:
    def __init__(self) -> None:
        self.xcoms: dict[str, Any] = {}

    def xcom_pull(self, task_ids: str) -> Any:
        return self.xcoms.get(task_ids)


def _migrate() -> tuple[dict[str, Any], dict[str, Any]]:
    """RF 1 -> RF 2: precheck, ALTER, repair of the ranges that gained a replica. (record, repair result)"""
    from ringward_airflow.migration_operators import (
        KeyspaceAlterOperator,
        MigrationPrecheckOperator,
        MigrationRepairOperator,
    )

    with connect(NODES) as session:
        session.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}")
        session.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = {{'class': 'SimpleStrategy', "
                        "'replication_factor': 1}")  # fmt: skip
        session.execute(f"CREATE TABLE {KEYSPACE}.items (id int PRIMARY KEY, body text)")
        for i in range(50):
            session.execute(f"INSERT INTO {KEYSPACE}.items (id, body) VALUES (%s, %s)", (i, f"item {i}"))
    ti = FakeTaskInstance()
    # A real run's context names its DAG; the page serves a record only to its own DAG's run (finding 3).
    context: Any = {"run_id": RUN_ID, "ti": ti, "dag": SimpleNamespace(dag_id="keyspace_migration")}
    record = MigrationPrecheckOperator(
        task_id="precheck", keyspace=KEYSPACE, replication={"class": "NetworkTopologyStrategy", "dc1": 2}
    ).execute(context)
    ti.xcoms["precheck"] = record
    KeyspaceAlterOperator(task_id="alter").execute(context)
    repaired = MigrationRepairOperator(task_id="repair", phase="post", deferrable=False).execute(context)
    return record, repaired


def test_pages_after_a_real_migration(seed_cluster: LocalCluster, task_env: None, airflow_api: Any) -> None:
    from ringward.plan import build_plan
    from ringward.repair import RECENT_RUNS, parse_config, paused
    from ringward.ring_sources import ring_from_json
    from ringward_cassandra.ops_store import OpsStore

    record, repaired = _migrate()
    client, _, tokens = airflow_api
    admin = bearer(tokens["admin"])

    # Migration: the plan from ringward_ops, drawn and tabled; the journal's ranges done.
    url = f"/ringward/api/migration/keyspace_migration/{RUN_ID}"
    assert client.get(url).status_code == 401
    response = client.get(url, headers=admin)
    data = response.json()
    assert response.status_code == 200, data
    assert data["found"] and data["keyspace"] == KEYSPACE and data["state"] == "altered:1"
    plan = build_plan(ring_from_json(record["ring"]), record["old"], record["new"], keyspace=KEYSPACE)
    assert data["affected_ranges"] == record["affected_ranges"] == len(plan.affected) > 0
    post = data["steps"][0]["stages"][1]
    assert post["done"] == post["total"] == repaired["ranges"] > 0
    page = client.get(f"/ringward/migration/keyspace_migration/{RUN_ID}", headers=admin).text
    for change in plan.affected:
        assert f"<title>{change.range}: " in page and f"<td>({change.range.start}, {change.range.end}]</td>" in page
    assert f"<b>{post['total']}/{post['total']}</b> ranges done, 0 failed" in page

    # Cluster: every node, from the driver; the second load (session kept) well under a second.
    client.get("/ringward/api/cluster", headers=admin)
    started = time.monotonic()
    cluster = client.get("/ringward/api/cluster", headers=admin).json()
    assert time.monotonic() - started < 1.0
    nodes = {n["address"]: n for n in cluster["nodes"]}
    assert set(nodes) == {n.address for n in seed_cluster.topology().nodes}
    assert all(n["status"] == "up" and n["release_version"] == "5.0.9" and n["tokens"] > 0 for n in nodes.values())
    assert cluster["schema_agreement"]
    ring_svg = client.get("/ringward/api/cluster/ring.svg", headers=admin).text
    assert all(f"primary range of {address}" in ring_svg for address in nodes)

    # Every page, loaded again (the driver session is kept between requests), in under a second.
    for page_url in (f"/ringward/migration/keyspace_migration/{RUN_ID}", "/ringward/repair", "/ringward/cluster"):
        started = time.monotonic()
        assert client.get(page_url, headers=admin).status_code == 200
        seconds = time.monotonic() - started
        print(f"{page_url}: {seconds:.2f} s")
        assert seconds < 1.0, page_url

    # Repair: only what the nightly repair covers. The migrated keyspace's table is listed, unless the recorded
    # runs (of other tests) were all limited to other keyspaces: then it is listed as left out, saying so.
    repair = client.get("/ringward/api/repair", headers=admin).json()
    listed = [t["table"] for t in repair["tables"]]
    excluded = {e["name"]: e["reason"] for e in repair["excluded"]}
    assert "node-local" in excluded["system"] and not any(t.startswith("system.") for t in listed)
    with connect(NODES) as session:
        scopes = [parse_config(r.config) for r in OpsStore(session).repair_runs()[:RECENT_RUNS] if r.config]
    in_a_run = any(any(fnmatchcase(KEYSPACE, p) for p in c.keyspaces.include)
                   and not any(fnmatchcase(KEYSPACE, p) for p in c.keyspaces.exclude) for c in scopes)  # fmt: skip
    if not scopes or in_a_run:
        assert f"{KEYSPACE}.items" in listed, (listed, excluded)
    else:
        assert f"{KEYSPACE}.items" not in listed
        assert excluded[f"{KEYSPACE}.items"].startswith("outside the scope of"), excluded
    # The pause switch is pressed, recorded and read back.
    press = client.post("/ringward/api/repair/switch", headers=admin,
                        data={"action": "pause", "confirm": "yes", "reason": "ui test"})  # fmt: skip
    assert press.status_code == 200
    with connect(NODES) as session:
        store = OpsStore(session)
        assert store.switch_events(limit=1)[0].changed_by == "admin"
        log = logging.getLogger("test_ui_pages")
        assert paused(store, log)  # what the nightly task checks between segments
        client.post("/ringward/api/repair/switch", headers=admin, data={"action": "resume", "confirm": "yes"})
        assert not paused(store, log)
        store.release_lease(f"keyspace:{KEYSPACE}", record["lease_owner"])
        session.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}")
