"""Issue 39: the pages of every declared cluster. Two clusters declared in a clusters file ($RINGWARD_CLUSTERS, as a
deployment names it); each gets an in-memory world of its own, chosen by the cluster the app resolved for the
request. The pages must read the right cluster's connection, store and DAG runs, keep the cluster in their links,
list in the picker only the clusters the user may open, and refuse (403) a cluster the user may not open. Users
with per-DAG and per-connection permissions are made with an auth manager policy (the simple auth manager's roles
are all-or-nothing), as FAB or Keycloak grant them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ringward.clusters import ClusterTarget
from ringward_airflow.ui.source import ConnectionInfo

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests"))
import ui_fixtures  # noqa: E402
from test_ui_plugin import RUN_ID, FakeSource, _world  # noqa: E402
from ui_fixtures import bearer  # noqa: E402

airflow_api = ui_fixtures.airflow_api  # the fixture, registered in this module

CLUSTERS = ("a", "b")
NIGHTLY = "scheduled__2026-11-23T02:00:00+00:00"
COVERAGE = {"a": "90.0%", "b": "40.0%"}  # app.events in each cluster's latest report: which world was read


def _cluster_world(name: str) -> FakeSource:
    """test_ui_plugin's world as cluster `name`'s: its migration recorded by keyspace_migration__<name>, its runs
    under that cluster's DAG ids, its connection `cassandra_<name>`, its own repair coverage."""
    world = _world()
    row = world.store.migration_rows[0]
    world.store.migration_rows[0] = replace(row, record={**row.record, "dag_id": f"keyspace_migration__{name}"})
    report = world.store.runs[0]
    world.store.runs[0] = replace(report, summary={**report.summary, "tables": {"app.events": COVERAGE[name]}})
    world.runs = {
        (f"keyspace_migration__{name}", RUN_ID): replace(world.runs[("keyspace_migration", RUN_ID)],
                                                         dag_id=f"keyspace_migration__{name}"),
        (f"nightly_subrange_repair__{name}", None): replace(world.runs[("nightly_subrange_repair", None)],
                                                            dag_id=f"nightly_subrange_repair__{name}"),
    }  # fmt: skip
    world.connection = lambda: ConnectionInfo(  # type: ignore[method-assign]
        f"cassandra_{name}", "cassandra", (f"10.0.{CLUSTERS.index(name)}.1",), 9042, True, False, None, 5
    )
    return world


class Clusters:
    """The test's deployment: the app's client, each cluster's world, the connection each opened source was for."""

    def __init__(self, client: Any, subapp: Any, tokens: dict[str, str]) -> None:
        self.client = client
        self.subapp = subapp  # the mounted ringward app
        self.tokens = tokens
        self.worlds = {name: _cluster_world(name) for name in CLUSTERS}
        self.opened: list[str] = []  # the Cassandra connection of each source the app opened

    def source(self, request: Any) -> FakeSource:
        from ringward_airflow.ui.app import cluster_of

        cluster = cluster_of(request)
        self.opened.append(cluster.cassandra_conn_id)
        assert cluster.name is not None
        return self.worlds[cluster.name]

    def get(self, url: str, user: str = "admin", **kwargs: Any) -> Any:
        return self.client.get(url, headers=self.headers(user), **kwargs)

    def headers(self, user: str) -> dict[str, str]:
        return bearer(self.tokens[user])


def cluster_urls(name: str) -> list[str]:
    """Every page and API route (GET) of cluster `name`: its Repair, Cluster and Migration pages, their JSON and
    their pictures, the cluster named as each URL carries it (`?cluster=`, or the Migration page's DAG)."""
    return [
        f"/ringward/repair?cluster={name}", f"/ringward/api/repair?cluster={name}",
        f"/ringward/api/repair/coverage.svg?cluster={name}",
        f"/ringward/cluster?cluster={name}", f"/ringward/api/cluster?cluster={name}",
        f"/ringward/api/cluster/ring.svg?cluster={name}",
        f"/ringward/migration/keyspace_migration__{name}/{RUN_ID}",
        f"/ringward/api/migration/keyspace_migration__{name}/{RUN_ID}",
        f"/ringward/api/migration/keyspace_migration__{name}/{RUN_ID}/placement.svg",
    ]  # fmt: skip


def _clusters_file(path: Path) -> Path:
    lines = ["clusters:"]
    for name in CLUSTERS:
        lines += [
            f"  - name: {name}",
            f"    cassandra_conn_id: cassandra_{name}",
            f"    nodetool_conn_id: nodetool_{name}",
            f"    spark_cassandra_conn_id: spark_login_{name}",
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def clusters(
    airflow_api: tuple[Any, Any, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Clusters]:
    """Two declared clusters, each served from its own world; users `only_b` (every right on cluster b's DAGs and
    connection, none on a's) and `b_no_connection` (b's DAGs only) besides the simple auth manager's roles."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    test_client, subapp, tokens = airflow_api
    monkeypatch.setenv("RINGWARD_CLUSTERS", str(_clusters_file(tmp_path / "clusters.yaml")))
    manager = get_auth_manager()
    dag_rights = {"only_b": {"__b"}, "b_no_connection": {"__b"}}  # user -> the DAG id suffixes it may use
    connection_rights = {"only_b": {"cassandra_b"}, "b_no_connection": set()}
    any_dag, any_connection = manager.is_authorized_dag, manager.is_authorized_connection

    def is_authorized_dag(*, method: str, user: Any, access_entity: Any = None, details: Any = None) -> bool:
        if user.get_name() not in dag_rights:
            return bool(any_dag(method=method, user=user, access_entity=access_entity, details=details))
        return details is not None and any(details.id.endswith(s) for s in dag_rights[user.get_name()])

    def is_authorized_connection(*, method: str, user: Any, details: Any = None) -> bool:
        if user.get_name() not in connection_rights:
            return bool(any_connection(method=method, user=user, details=details))
        return method == "GET" and details is not None and details.conn_id in connection_rights[user.get_name()]

    monkeypatch.setattr(manager, "is_authorized_dag", is_authorized_dag)
    monkeypatch.setattr(manager, "is_authorized_connection", is_authorized_connection)
    users = {name: manager.generate_jwt(SimpleAuthManagerUser(username=name, role="viewer")) for name in dag_rights}
    deployment = Clusters(test_client, subapp, {**tokens, **users})
    real = subapp.state.source_factory
    subapp.state.source_factory = deployment.source
    try:
        yield deployment
    finally:
        subapp.state.source_factory = real


def test_the_pages_serve_the_clusters_the_dag_factory_builds_dags_for(clusters: Clusters, tmp_path: Path) -> None:
    """One source of truth: the DAG ids the pages use are the DAG factory's, from the same file."""
    from ringward_airflow.dag_factory import cluster_dags

    listed = clusters.get("/ringward/api/clusters").json()["clusters"]
    assert [c["name"] for c in listed] == ["a", "b"]
    assert sorted(dag for c in listed for dag in c["dags"]) == sorted(cluster_dags(path=tmp_path / "clusters.yaml"))


def test_the_picker_lists_only_the_clusters_the_user_may_open(clusters: Clusters) -> None:
    listed = clusters.get("/ringward/api/clusters", "only_b").json()["clusters"]
    assert listed == [{"name": "b", "dags": ["keyspace_migration__b", "keyspace_migration_rollback__b",
                                            "nightly_subrange_repair__b"],
                       "pages": {"repair": True, "cluster": True, "migration": True}}]  # fmt: skip
    # Cluster b's DAGs but not its connection: its Cluster page is not offered.
    (limited,) = clusters.get("/ringward/api/clusters", "b_no_connection").json()["clusters"]
    assert limited["name"] == "b" and limited["pages"] == {"repair": True, "cluster": False, "migration": True}

    page = clusters.get("/ringward/repair?cluster=b", "only_b").text
    picker = page[page.index("id='clusters'") : page.index("</p>", page.index("id='clusters'"))]
    assert "<b>b</b>" in picker and "cluster=a" not in picker and ">a<" not in picker
    admin = clusters.get("/ringward/repair?cluster=b").text
    picker = admin[admin.index("id='clusters'") : admin.index("</p>", admin.index("id='clusters'"))]
    assert "<a href='?cluster=a'>a</a>" in picker and "<b>b</b>" in picker
    cluster_page = clusters.get("/ringward/cluster?cluster=a").text
    assert "<a href='?cluster=b'>b</a>" in cluster_page and "<b>a</b>" in cluster_page


def test_a_cluster_the_user_may_not_open_is_refused(clusters: Clusters) -> None:
    for url in cluster_urls("a"):
        response = clusters.get(url, "only_b")
        assert response.status_code == 403, (url, response.text[:200])
        assert "90.0%" not in response.text and "10.0.0.1" not in response.text, url
    for url in cluster_urls("b"):  # the same pages of cluster b: served
        assert clusters.get(url, "only_b").status_code == 200, url
    # Its DAGs but not its connection: b's Repair page, not b's Cluster page.
    assert clusters.get("/ringward/repair?cluster=b", "b_no_connection").status_code == 200
    assert clusters.get("/ringward/cluster?cluster=b", "b_no_connection").status_code == 403
    # Pausing cluster a's repair: refused, nothing recorded in any cluster.
    press = {"action": "pause", "confirm": "yes"}
    refused = clusters.client.post("/ringward/api/repair/switch?cluster=a", data=press,
                                   headers=clusters.headers("only_b"))  # fmt: skip
    assert refused.status_code == 403
    assert clusters.worlds["a"].store.events == [] and clusters.worlds["b"].store.events == []
    assert "cassandra_a" not in clusters.opened  # no source of cluster a was even opened for the refused user


def test_each_page_reads_its_own_clusters_connection_store_and_dag_runs(clusters: Clusters) -> None:
    for name in CLUSTERS:
        clusters.opened.clear()
        repair = clusters.get(f"/ringward/api/repair?cluster={name}").json()
        assert (repair["cluster"], repair["repair_dag"]) == (name, f"nightly_subrange_repair__{name}")
        assert [t["repaired"] for t in repair["tables"]] == [COVERAGE[name]]  # this cluster's store
        assert repair["current_run"]["run_id"] == NIGHTLY  # this cluster's repair DAG's latest run
        cluster = clusters.get(f"/ringward/api/cluster?cluster={name}").json()
        assert cluster["cluster"] == name and cluster["connection"]["conn_id"] == f"cassandra_{name}"
        migration = clusters.get(f"/ringward/api/migration/keyspace_migration__{name}/{RUN_ID}").json()
        assert migration["found"] and migration["cluster"] == name and migration["run"]["state"] == "running"
        assert clusters.opened == [f"cassandra_{name}"] * 3
    # A migration DAG of no declared cluster (the unsuffixed id while clusters are declared): none is read.
    clusters.opened.clear()
    stray = clusters.get(f"/ringward/api/migration/keyspace_migration/{RUN_ID}")
    assert stray.status_code == 404 and "not the migration or rollback DAG of any declared cluster" in stray.text
    assert clusters.opened == []


def test_the_real_source_opens_the_clusters_connection(clusters: Clusters, monkeypatch: pytest.MonkeyPatch) -> None:
    from ringward_airflow.ui import app

    opened: list[str] = []

    def cassandra_source(runs: Any, conn_id: str) -> Any:
        opened.append(conn_id)
        return clusters.worlds[conn_id.removeprefix("cassandra_")]

    monkeypatch.setattr(app, "CassandraSource", cassandra_source)
    clusters.subapp.state.source_factory = app.viewer_source  # the fixture puts the real one back
    assert clusters.get("/ringward/api/cluster?cluster=b").json()["connection"]["conn_id"] == "cassandra_b"
    assert clusters.get("/ringward/api/repair?cluster=a").status_code == 200
    assert opened == ["cassandra_b", "cassandra_a"]


def test_links_keep_the_cluster(clusters: Clusters) -> None:
    page = clusters.get("/ringward/repair?cluster=b").text
    assert "<a href='repair?cluster=b'>Repair</a>" in page and "<a href='cluster?cluster=b'>Cluster</a>" in page
    assert "action='api/repair/switch?cluster=b'" in page
    migration = clusters.get(f"/ringward/migration/keyspace_migration__b/{RUN_ID}").text
    assert "<a href='../../repair?cluster=b'>Repair</a>" in migration
    # The form's press lands back on the same cluster's page, and pauses that cluster's repair only.
    back = clusters.client.post("/ringward/api/repair/switch?cluster=b", data={"action": "pause", "confirm": "yes"},
                                headers={**clusters.headers("admin"), "Accept": "text/html"},
                                follow_redirects=False)  # fmt: skip
    assert back.status_code == 303 and back.headers["location"] == "../../repair?cluster=b"
    assert [e.paused for e in clusters.worlds["b"].store.events] == [True] and clusters.worlds["a"].store.events == []
    assert "PAUSED by admin" in clusters.get("/ringward/repair?cluster=b").text
    assert "running (not paused)" in clusters.get("/ringward/repair?cluster=a").text


def test_the_pagers_links_keep_the_cluster() -> None:
    from ringward_airflow.ui.pages import PAGE_ROWS, _list_pager

    pager = _list_pager(0, PAGE_ROWS * 3, "nodes", "b")
    assert "href='?cluster=b&amp;page=2' rel='next'" in pager and "href='?cluster=b&amp;page=3'" in pager
    assert "href='?page=2' rel='next'" in _list_pager(0, PAGE_ROWS * 3, "nodes")  # the single cluster: as before


def test_a_page_without_a_cluster_goes_to_the_first_the_user_may_open(clusters: Clusters) -> None:
    assert clusters.get("/ringward/repair", follow_redirects=False).headers["location"] == "?cluster=a"
    moved = clusters.get("/ringward/cluster", "only_b", follow_redirects=False)
    assert moved.status_code == 303 and moved.headers["location"] == "?cluster=b"
    assert clusters.get("/ringward/cluster", "b_no_connection", follow_redirects=False).status_code == 403
    # JSON and pictures name none: told which to name (those the user may open).
    answer = clusters.get("/ringward/api/repair", "only_b")
    assert answer.status_code == 422 and "you may open: b)" in answer.json()["detail"]
    assert "?cluster=<name>" in answer.json()["detail"]
    unknown = clusters.get("/ringward/repair?cluster=c")
    assert unknown.status_code == 404 and "No cluster named “c” is declared" in unknown.text


def test_a_clusters_file_the_pages_cannot_use_is_named_with_its_fix(
    clusters: Clusters, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("clusters: []\n", encoding="utf-8")
    monkeypatch.setenv("RINGWARD_CLUSTERS", str(broken))
    page = clusters.get("/ringward/repair?cluster=a")
    assert page.status_code == 500 and "declares no cluster" in page.text and "Fix:" in page.text


def test_without_a_clusters_file_the_single_cluster_at_todays_urls(
    airflow_api: tuple[Any, Any, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    test_client, subapp, tokens = airflow_api
    monkeypatch.delenv("RINGWARD_CLUSTERS", raising=False)
    world = _world()
    seen: list[ClusterTarget] = []

    def source(request: Any) -> FakeSource:
        from ringward_airflow.ui.app import cluster_of

        seen.append(cluster_of(request))
        return world

    real = subapp.state.source_factory
    subapp.state.source_factory = source
    admin = bearer(tokens["admin"])
    try:
        listed = test_client.get("/ringward/api/clusters", headers=admin).json()["clusters"]
        assert [c["name"] for c in listed] == [None]
        page = test_client.get("/ringward/repair", headers=admin)
        assert page.status_code == 200 and "id='clusters'" not in page.text  # no picker for one cluster
        assert "<a href='repair'>Repair</a>" in page.text and "action='api/repair/switch'" in page.text
        assert test_client.get(f"/ringward/api/migration/keyspace_migration/{RUN_ID}", headers=admin).json()["found"]
        assert test_client.get("/ringward/repair?cluster=a", headers=admin).status_code == 404
    finally:
        subapp.state.source_factory = real
    assert {(c.name, c.cassandra_conn_id, c.repair_dag) for c in seen} == {
        (None, "cassandra_default", "nightly_subrange_repair")}  # fmt: skip
