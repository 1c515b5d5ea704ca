"""The ringward plugin's pages and JSON, through Airflow's own API app (plugins mounted as the API server mounts
them) with tokens of Airflow's simple auth manager. The cluster side is an in-memory `Source` holding what
ringward stores (a precheck record, a journal, repair history); every view, picture and check runs for real.
One test uses the real source against a closed port: the pages must answer at once that the cluster is down.
"""

from __future__ import annotations

import html
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote, urljoin

import pytest
from ringward.migration import migration_steps, repair_segments
from ringward.migration_pages import PLACEMENT_ARCS
from ringward.migration_progress import StageProgress
from ringward.migration_storage import JournalSpan, migration_run_keys
from ringward.placement import replica_map
from ringward.plan import build_plan
from ringward.repair import (
    SegmentRecord,
    SegmentState,
    dump_config,
    load_config,
    parse_config,
    plan_segments,
    select_units,
)
from ringward.replication import Replication
from ringward.ring import Ring
from ringward.ring_sources import load_ring_file, ring_to_json
from ringward_airflow.ui.source import ConnectionInfo, NodeInfo, RunInfo, TaskTiming
from ringward_airflow.ui.views import JSON_ROWS
from ringward_cassandra.cluster_repairs import ClusterRepairPlan
from ringward_cassandra.ops_store import JournalEntry, MigrationRow, RepairHistoryRow, RepairRunRow, SwitchEvent

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests"))
import ui_fixtures  # noqa: E402
from ui_fixtures import bearer  # noqa: E402

airflow_api = ui_fixtures.airflow_api  # the fixture, registered in this module

RING_FILE = ROOT / "tests" / "fixtures" / "rings" / "local_num_tokens_4.json"
OLD = {"class": "SimpleStrategy", "replication_factor": 1}
NEW = {"class": "NetworkTopologyStrategy", "dc1": 3}
RUN_ID = "manual__2026-11-23T10:00:00+00:00"
SECRET_PASSWORD = "s3cret-never-shown"
CLOSED_PORT_CONNECTION = (
    f'{{"conn_type": "cassandra", "host": "127.0.0.1", "port": 1, "login": "ops", "password": "{SECRET_PASSWORD}"}}'
)

# -- an in-memory cluster holding what ringward stores ------------------------------------------------------


@dataclass
class FakeStore:
    migration_rows: list[MigrationRow] = field(default_factory=list)
    journal: list[JournalEntry] = field(default_factory=list)
    history: list[RepairHistoryRow] = field(default_factory=list)
    runs: list[RepairRunRow] = field(default_factory=list)
    events: list[SwitchEvent] = field(default_factory=list)
    progress: dict[str, dict[str, Any]] = field(default_factory=dict)  # run id -> its live progress
    pages: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (migration id, version) -> its stored view
    stages: dict[tuple[str, str], StageProgress] = field(default_factory=dict)  # (migration id, stage) -> progress

    def migrations(self) -> list[MigrationRow]:
        return list(self.migration_rows)

    def run_migrations(self, dag_id: str, run_id: str) -> list[MigrationRow]:
        """As the stores index them (`migration_run_keys`)."""
        rows = self.migrations()
        return [row for row in rows if (dag_id, run_id) in migration_run_keys(row.migration_id, row.record)]

    def journal_of(self, migration_id: str) -> list[JournalEntry]:
        return list(self.journal)

    def record_journal(self, migration_id: str, entry: JournalEntry) -> None:
        """As a store writes an entry: it replaces the entry of the same (stage, range)."""
        key = (entry.step, entry.range.start, entry.range.end)
        self.journal = [e for e in self.journal if (e.step, e.range.start, e.range.end) != key] + [entry]
        self.journal.sort(key=lambda e: (e.step, e.range.start, e.range.end))

    def journal_spans(self, migration_id: str, step: str, spans: Sequence[JournalSpan]) -> list[JournalEntry]:
        """As the stores read spans (each a slice of (stage, range start, range end) order, with its limit)."""
        ordered = sorted((e for e in self.journal if e.step == step), key=lambda e: (e.range.start, e.range.end))
        found: list[JournalEntry] = []
        for first, last, limit in spans:
            found += [e for e in ordered if first <= (e.range.start, e.range.end) <= last][:limit]
        return found

    def record_stage_progress(self, migration_id: str, progress: StageProgress) -> None:
        self.stages[migration_id, progress.step] = progress

    def stage_progress(self, migration_id: str) -> list[StageProgress]:
        return [progress for (mid, _), progress in sorted(self.stages.items()) if mid == migration_id]

    def record_migration_pages(self, migration_id: str, version: str, chunks: Sequence[bytes]) -> None:
        self.pages[migration_id, version] = b"".join(chunks)

    def migration_pages(self, migration_id: str, version: str) -> bytes | None:
        return self.pages.get((migration_id, version))

    def repair_history(self) -> list[RepairHistoryRow]:
        return list(self.history)

    def repair_runs(self) -> list[RepairRunRow]:
        return list(self.runs)

    def run_progress(self, run_id: str) -> dict[str, Any] | None:
        return self.progress.get(run_id)

    def switch_events(self, name: str = "nightly_subrange_repair", limit: int = 20) -> list[SwitchEvent]:
        return self.events[:limit]

    def set_switch(self, paused: bool, changed_by: str, reason: str = "") -> SwitchEvent:
        event = SwitchEvent(paused, datetime.now(UTC), changed_by, reason)
        self.events.insert(0, event)
        return event


@dataclass
class FakeSource:
    ring_: Ring
    store: FakeStore
    runs: dict[tuple[str, str | None], RunInfo]
    gc_grace: dict[str, dict[str, int]]  # keyspace -> table -> gc_grace_seconds
    replication: dict[str, Replication]

    def connection(self) -> ConnectionInfo:
        return ConnectionInfo("cassandra_default", "cassandra", tuple(self.ring_.addresses()), 9042, True, False,
                              None, 5)  # fmt: skip

    def ring(self) -> Ring:
        return self.ring_

    def nodes(self) -> list[NodeInfo]:
        return [NodeInfo(n.address, n.datacenter, n.rack, "up", 12.5, len(n.tokens), "v1", "5.0.9", f"id-{n.address}")
                for n in self.ring_.nodes]  # fmt: skip

    def schema(self) -> dict[str, list[str]]:
        return {ks: sorted(tables) for ks, tables in self.gc_grace.items()}

    def ops(self) -> FakeStore:
        return self.store

    def repair_plan(self, config: Any) -> ClusterRepairPlan:
        """As plan_cluster plans it, from the in-memory schema."""
        units = select_units(self.schema(), config)
        segments, skipped = [], []
        for unit in units:
            entries = replica_map(self.ring_, self.replication[unit.keyspace]).entries()
            plan = plan_segments(self.ring_, entries, unit, config)
            segments.extend(plan.segments)
            skipped.extend(plan.skipped)
        return ClusterRepairPlan(
            tuple(segments), tuple(skipped), {u.keyspace: self.gc_grace[u.keyspace] for u in units}
        )

    def dag_run(self, dag_id: str, run_id: str | None) -> RunInfo | None:
        return self.runs.get((dag_id, run_id))

    def close(self) -> None:
        pass


def _world() -> FakeSource:
    ring = load_ring_file(RING_FILE)
    plan = build_plan(ring, OLD, NEW, keyspace="shop")
    steps = migration_steps(plan)
    record = {
        "migration_id": f"shop@{RUN_ID}", "keyspace": "shop", "ring": ring_to_json(ring), "old": plan.old.as_json(),
        "new": plan.new.as_json(), "steps": [s.after.as_json() for s in steps], "summary": plan.summary(),
        "affected_ranges": len(plan.affected), "total_ranges": plan.total_ranges, "dag_id": "keyspace_migration",
        "run_id": RUN_ID, "started_at": "2026-11-23T10:00:01+00:00",
    }  # fmt: skip
    store = FakeStore(migration_rows=[MigrationRow(f"shop@{RUN_ID}", "shop", "altered:1", None, record)])
    pre = repair_segments(ring, steps[0], "shop", "pre")
    post = repair_segments(ring, steps[0], "shop", "post")
    store.journal = [JournalEntry("pre_repair:1", s.range, "done", s.replicas[0], 1, 2.5, "") for s in pre]
    store.journal.append(JournalEntry("post_repair:1", post[0].range, "done", post[0].replicas[0], 1, 3.0, ""))
    store.journal.append(
        JournalEntry("post_repair:1", post[1].range, "failed", post[1].replicas[0], 3, 9.0, "stream failed")
    )
    # Nightly repair: keyspace `app` at RF 3, one run under way with two segments done and one failed.
    config = load_config(None)
    replication = {"app": Replication.parse(NEW)}
    schema = {"app": {"events": 864000}}
    source = FakeSource(ring, store, {}, schema, replication)
    segments = source.repair_plan(config).segments
    now = datetime.now(UTC)
    nightly = "scheduled__2026-11-23T02:00:00+00:00"
    history = []
    for i, segment in enumerate(segments[:3]):
        failed = i == 2
        success = None if failed else now - timedelta(hours=1)
        state = SegmentState.FAILED if failed else SegmentState.DONE
        error = "Repair session failed: node down" if failed else None
        record_ = SegmentRecord(segment.segment_id, state, success, success, 2 if failed else 1, error, 4.0, nightly)
        started, finished = now - timedelta(minutes=10 - i), now - timedelta(minutes=9 - i)
        history.append(
            RepairHistoryRow("app", segment.tables, segment.range, record_, started, finished, segment.replicas[0],
                             segment.replicas)
        )  # fmt: skip
    store.history = history
    store.runs = [RepairRunRow("scheduled__2026-11-22T02:00:00+00:00", "DONE",
                               {"tables": {"app.events": "40.0%"}, "metrics": {"FailedTokenRangesCount": 0}},
                               {}, now - timedelta(days=1))]  # fmt: skip
    # The running run's progress as its repair worker stores it.
    store.progress[nightly] = {
        "done": 2, "failed": 1, "postponed": 0, "total": 6, "running": {"127.0.0.2": 1},
        "per_node": {"127.0.0.2": {"done": 2, "failed": 0}, "127.0.0.3": {"done": 0, "failed": 1}},
        "eta_seconds": 600.0, "updated_at": (now - timedelta(seconds=5)).isoformat(),
    }  # fmt: skip
    source.runs = {
        ("keyspace_migration", RUN_ID): RunInfo(
            "keyspace_migration", RUN_ID, "running", now, None, {"step_1.verify_preview": {"mismatches": 0}},
            (TaskTiming("precheck", -1, "success", now, now + timedelta(seconds=3), 1),),
        ),
        ("nightly_subrange_repair", None): RunInfo("nightly_subrange_repair", nightly, "running",
                                                    now - timedelta(minutes=11), None,
                                                    {"plan:summary": {"due": 6, "segments": len(segments)}}),
    }  # fmt: skip
    return source


# -- Airflow's API app with the plugin mounted -------------------------------------------------------------


@pytest.fixture
def client(airflow_api: tuple[Any, Any, dict[str, str]]) -> Iterator[tuple[Any, FakeSource, dict[str, str]]]:
    test_client, subapp, tokens = airflow_api
    world = _world()
    real = subapp.state.source_factory
    subapp.state.source_factory = lambda request: world
    try:
        yield test_client, world, tokens
    finally:
        subapp.state.source_factory = real


MIGRATION = f"/ringward/migration/keyspace_migration/{RUN_ID}"
GETS = [
    MIGRATION, f"/ringward/api/migration/keyspace_migration/{RUN_ID}",
    f"/ringward/api/migration/keyspace_migration/{RUN_ID}/placement.svg",
    "/ringward/repair", "/ringward/api/repair", "/ringward/api/repair/coverage.svg",
    "/ringward/cluster", "/ringward/api/cluster", "/ringward/api/cluster/ring.svg",
]  # fmt: skip


def test_plugin_registers_the_app_and_the_views(airflow_api: Any) -> None:
    from airflow import plugins_manager

    plugins = {p.name: p for p in plugins_manager._get_plugins()[0]}
    ringward = plugins["ringward"]
    assert [a["url_prefix"] for a in ringward.fastapi_apps] == ["/ringward"]
    views = {v["name"]: v for v in ringward.external_views}
    assert views["Repair"]["destination"] == "nav" and views["Cluster"]["destination"] == "nav"
    assert views["Migration"]["destination"] == "dag_run"
    assert views["Migration"]["href"] == "ringward/migration/{DAG_ID}/{RUN_ID}"
    # What the migration's approval links to: the same page, the run id quoted.
    from ringward_airflow.ui.plugin import migration_page_path

    assert migration_page_path("keyspace_migration", RUN_ID) == (
        "ringward/migration/keyspace_migration/manual__2026-11-23T10%3A00%3A00%2B00%3A00"
    )


def test_every_endpoint_refuses_anonymous_and_bad_tokens(client: tuple[Any, FakeSource, dict[str, str]]) -> None:
    test_client, world, _ = client
    for url in GETS:
        assert test_client.get(url).status_code == 401, url
        assert test_client.get(url, headers=bearer("not-a-jwt")).status_code == 403, url
    response = test_client.post("/ringward/api/repair/switch", data={"action": "pause", "confirm": "yes"})
    assert response.status_code == 401
    assert world.store.events == []  # a refused press records nothing


def test_every_endpoint_serves_an_admin_by_header_and_by_cookie(client: tuple[Any, FakeSource, dict[str, str]]) -> None:
    test_client, _, tokens = client
    for url in GETS:
        response = test_client.get(url, headers=bearer(tokens["admin"]))
        assert response.status_code == 200, (url, response.text[:300])
    test_client.cookies.set("_token", tokens["admin"])
    try:
        assert test_client.get("/ringward/repair").status_code == 200
    finally:
        test_client.cookies.clear()


def test_permissions_follow_the_auth_manager(client: tuple[Any, FakeSource, dict[str, str]]) -> None:
    test_client, world, tokens = client
    viewer = bearer(tokens["viewer"])
    assert test_client.get(MIGRATION, headers=viewer).status_code == 200
    assert test_client.get("/ringward/repair", headers=viewer).status_code == 200
    # The cluster page shows where the connection points: connection read access (op role and up).
    assert test_client.get("/ringward/cluster", headers=viewer).status_code == 403
    # Pausing the repair edits its runs: refused to a viewer, allowed to a user.
    press = {"action": "pause", "confirm": "yes"}
    assert test_client.post("/ringward/api/repair/switch", data=press, headers=viewer).status_code == 403
    assert world.store.events == []
    assert (
        test_client.post("/ringward/api/repair/switch", data=press, headers=bearer(tokens["user"])).status_code == 200
    )


def test_migration_page_shows_plan_picture_ranges_and_journal(client: tuple[Any, FakeSource, dict[str, str]]) -> None:
    test_client, world, tokens = client
    ring = world.ring_
    plan = build_plan(ring, OLD, NEW, keyspace="shop")
    steps = migration_steps(plan)
    data = test_client.get(
        f"/ringward/api/migration/keyspace_migration/{RUN_ID}", headers=bearer(tokens["admin"])
    ).json()
    assert data["found"] and data["keyspace"] == "shop" and data["state"] == "altered:1"
    assert data["affected_ranges"] == len(plan.affected) and len(data["ranges"]) == plan.total_ranges
    changed = {tuple(r["range"]): (r["gained"], r["lost"]) for r in data["ranges"] if r["gained"] or r["lost"]}
    assert changed == {(c.range.start, c.range.end): (list(c.gained), list(c.lost)) for c in plan.affected}
    pre, post = data["steps"][0]["stages"]
    assert (pre["done"], pre["total"]) == (len(repair_segments(ring, steps[0], "shop", "pre")),) * 2
    assert (post["done"], post["failed"]) == (1, 1)
    assert post["total"] == len(repair_segments(ring, steps[0], "shop", "post"))
    failed = [r for r in post["ranges"] if r["status"] == "failed"]
    assert failed[0]["detail"] == "stream failed" and failed[0]["attempts"] == 3
    assert data["steps"][0]["altered"] and data["steps"][0]["verification"] == {"verify_preview": {"mismatches": 0}}

    page = test_client.get(MIGRATION, headers=bearer(tokens["admin"])).text
    assert "<svg" in page and "id='ranges'" in page
    for change in plan.affected:  # each moved range is drawn (hover title) and listed in the table
        assert f"<title>{change.range}: " in page
        assert f"<td>({change.range.start}, {change.range.end}]</td>" in page
    assert f"<b>{post['done']}/{post['total']}</b> ranges done, 1 failed" in page
    assert "stream failed" in page and "precheck" in page  # journal detail and the run's timings
    svg = test_client.get(f"/ringward/api/migration/keyspace_migration/{RUN_ID}/placement.svg",
                          headers=bearer(tokens["admin"]))  # fmt: skip
    assert svg.headers["content-type"].startswith("image/svg+xml") and svg.text.count('class="moved"') == len(
        plan.affected
    )


def test_migration_page_by_its_quoted_path(client: tuple[Any, FakeSource, dict[str, str]]) -> None:
    from ringward_airflow.ui.plugin import migration_page_path

    test_client, _, tokens = client
    page = test_client.get("/" + migration_page_path("keyspace_migration", RUN_ID), headers=bearer(tokens["admin"]))
    assert page.status_code == 200 and "Migration of <span id='keyspace'>shop</span>" in page.text


def test_migration_page_of_a_run_without_a_plan_says_so(client: tuple[Any, FakeSource, dict[str, str]]) -> None:
    test_client, _, tokens = client
    page = test_client.get("/ringward/migration/keyspace_migration/other-run", headers=bearer(tokens["admin"]))
    assert page.status_code == 200 and "No ringward migration is recorded for this run" in page.text
    svg = test_client.get("/ringward/api/migration/keyspace_migration/other-run/placement.svg",
                          headers=bearer(tokens["admin"]))  # fmt: skip
    assert svg.status_code == 404


def test_repair_page_shows_the_stored_report_and_the_live_progress_without_planning(
    client: tuple[Any, FakeSource, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    test_client, world, tokens = client
    admin = bearer(tokens["admin"])

    def no_planning(config: Any) -> ClusterRepairPlan:
        raise AssertionError("the Repair page must not plan the cluster")

    def no_history() -> list[RepairHistoryRow]:
        raise AssertionError("the Repair page must not scan the repair history")

    monkeypatch.setattr(world, "repair_plan", no_planning)
    monkeypatch.setattr(world.store, "repair_history", no_history)
    data = test_client.get("/ringward/api/repair", headers=admin).json()
    previous = world.store.runs[0].run_id
    assert data["tables"] == [{"table": "app.events", "repaired": "40.0%", "run_id": previous,
                               "recorded_at": world.store.runs[0].updated_at.isoformat()}]  # fmt: skip
    assert data["latest_run"]["run_id"] == previous and data["latest_run"]["state"] == "DONE"
    run = data["current_run"]
    assert run["run_id"] == "scheduled__2026-11-23T02:00:00+00:00" and run["state"] == "running"
    progress = run["progress"]
    assert (progress["finished"], progress["total"], progress["percent"], progress["running"]) == (3, 6, 50.0, 1)
    assert progress["eta_seconds"] == 600.0 and progress["eta"] != "-"
    # Per node, what needs a look first: the node with a failure, then the busy one.
    assert [(n["node"], n["running"], n["done"], n["failed"]) for n in progress["nodes"]] == [
        ("127.0.0.3", 0, 0, 1), ("127.0.0.2", 1, 2, 0)]  # fmt: skip

    page = test_client.get("/ringward/repair", headers=admin).text
    assert "<b id='progress'>3/6</b> segments (50.0%)" in page and "aria-valuenow='50.0'" in page
    assert "2 done, 1 failed, 0 postponed, 1 running" in page and "<meta http-equiv='refresh' content='15'>" in page
    assert "app.events" in page and "40.0%" in page and "running (not paused)" in page
    assert "FailedTokenRangesCount" in page
    svg = test_client.get("/ringward/api/repair/coverage.svg", headers=admin).text
    assert "app.events: 40.0%" in svg and svg.count("class='bar'") == 1

    # A run without stored progress yet, and a finished run: no figures made up, no reload.
    world.store.progress.clear()
    page = test_client.get("/ringward/repair", headers=admin).text
    assert "no progress recorded for this run" in page
    key = ("nightly_subrange_repair", None)
    world.runs[key] = replace(world.runs[key], state="success")
    assert "http-equiv='refresh'" not in test_client.get("/ringward/repair", headers=admin).text


def test_repair_page_indexes_the_reports_once_and_sees_a_rewritten_report(
    client: tuple[Any, FakeSource, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reports' per-table index is built once per set of stored reports (not on each 15 s reload); a report
    written again (its time changes) is indexed anew and shown."""
    from ringward_airflow.ui import views

    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    built: list[int] = []
    index_reports = views._index_reports
    monkeypatch.setattr(views, "_index_reports", lambda runs: built.append(len(runs)) or index_reports(runs))
    views._REPORT_INDEXES.clear()
    first = test_client.get("/ringward/api/repair", headers=admin).json()
    again = test_client.get("/ringward/api/repair", headers=admin).json()
    assert first["tables"][0]["repaired"] == again["tables"][0]["repaired"] == "40.0%"
    assert built == [len(world.store.runs)]  # indexed once for both requests
    latest = world.store.runs[0]
    world.store.runs[0] = replace(latest, summary={**latest.summary, "tables": {"app.events": "77.0%"}},
                                  updated_at=latest.updated_at + timedelta(minutes=1))  # fmt: skip
    rewritten = test_client.get("/ringward/api/repair", headers=admin).json()
    assert rewritten["tables"][0]["repaired"] == "77.0%" and len(built) == 2


def test_the_report_index_is_kept_per_cluster_and_for_the_latest_sets_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two clusters' nightly DAGs share run ids (one schedule): each cluster's reports get an index of their own.
    Only the latest-used indexes are kept."""
    from types import SimpleNamespace

    from ringward_airflow.ui import views

    built: list[tuple[str, ...]] = []
    monkeypatch.setattr(views, "_index_reports", lambda runs: built.append(tuple(r.cluster for r in runs)) or runs)
    views._REPORT_INDEXES.clear()
    night = "scheduled__2026-11-23T02:00:00+00:00"
    alpha = [SimpleNamespace(run_id=night, state="success", updated_at=None, cluster="alpha")]
    beta = [SimpleNamespace(run_id=night, state="success", updated_at=None, cluster="beta")]
    assert views._report_index("alpha", alpha) is alpha and views._report_index("beta", beta) is beta
    assert views._report_index("alpha", alpha) is alpha and built == [("alpha",), ("beta",)]
    for other in range(views._REPORT_INDEXES.kept):  # alpha's becomes the least recently used, then goes
        views._report_index(f"other-{other}", [])
    views._report_index("alpha", alpha)
    assert built[-1] == ("alpha",) and len(built) == 3 + views._REPORT_INDEXES.kept


def test_repair_page_escapes_what_it_reads_from_the_store(client: tuple[Any, FakeSource, dict[str, str]]) -> None:
    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    evil = "<script>alert(1)</script>"
    world.store.runs[0] = replace(world.store.runs[0], state=evil,
                                  summary={"tables": {"app.events": evil}, "metrics": {evil: evil}})  # fmt: skip
    nightly = "scheduled__2026-11-23T02:00:00+00:00"
    world.store.progress[nightly] = {"done": 1, "total": 2, "per_node": {evil: {"done": 1}}, "updated_at": evil}
    page = test_client.get("/ringward/repair", headers=admin).text
    svg = test_client.get("/ringward/api/repair/coverage.svg", headers=admin).text
    assert evil not in page and evil not in svg and "&lt;script&gt;" in page and "&lt;script&gt;" in svg


def test_repair_page_lists_only_what_the_nightly_repair_covers_and_says_what_it_leaves_out(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    world.gc_grace.update({
        "system": {"local": 0, "peers_v2": 0}, "system_traces": {"events": 0, "sessions": 0},
        "ringward_ops": {"leases": 864000, "repair_history": 864000}, "solo": {"notes": 864000},
    })  # fmt: skip
    world.replication.update({"ringward_ops": Replication.parse(NEW), "solo": Replication.parse(OLD)})

    # No run limited the scope: the configuration's selection (everything but system_traces) is listed; tables
    # no report covered yet say so (the page does not plan: solo.notes at RF 1 is listed, never reported).
    data = test_client.get("/ringward/api/repair", headers=admin).json()
    assert [t["table"] for t in data["tables"]] == ["app.events", "ringward_ops.leases", "ringward_ops.repair_history",
                                                    "solo.notes"]  # fmt: skip
    assert [t["repaired"] for t in data["tables"]] == ["40.0%", None, None, None]
    excluded = {e["name"]: e["reason"] for e in data["excluded"]}
    assert set(excluded) == {"system", "system_traces"}
    assert "node-local" in excluded["system"] and "exclude ['system_traces']" in excluded["system_traces"]

    # The latest run repaired only `app` (its parameters): ringward_ops is not overdue, it is left out, by that run.
    scoped = parse_config({"keyspaces": {"include": ["app"]}})
    world.store.runs[0] = replace(world.store.runs[0], config=dump_config(scoped))
    data = test_client.get("/ringward/api/repair", headers=admin).json()
    assert [t["table"] for t in data["tables"]] == ["app.events"]
    reason = {e["name"]: e["reason"] for e in data["excluded"]}["ringward_ops"]
    latest = world.store.runs[0].run_id
    assert reason.startswith(f"all 2 tables: outside the scope of the latest run (latest: {latest},")
    page = test_client.get("/ringward/repair", headers=admin).text
    tables = page[page.index("id='tables'") : page.index("</table>", page.index("id='tables'"))]
    assert "ringward_ops" not in tables and "system" not in tables and "40.0%" in tables  # app.events
    assert "Not repaired by the nightly repair: 4 keyspace(s) or table(s)" in page
    assert "<td>ringward_ops</td>" in page and "node-local system keyspace" in page
    # A keyspace the latest run skipped (a migration's lease) is named with the reason the report stored.
    world.store.runs[0] = replace(world.store.runs[0], summary={**world.store.runs[0].summary,
                                  "skipped_keyspaces": {"app": "held by m-1 (keyspace_migration)"}})  # fmt: skip
    reason = {e["name"]: e["reason"] for e in test_client.get("/ringward/api/repair", headers=admin).json()["excluded"]}
    assert reason["app"] == f"skipped by the latest run ({latest}): held by m-1 (keyspace_migration)"


def test_repair_config_problems_are_shown_not_swallowed(
    client: tuple[Any, FakeSource, dict[str, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    # A run recorded by an older ringward whose configuration this one cannot read: the page says so.
    world.store.runs[0] = replace(world.store.runs[0], config={"segment_timeout": "PT3H"})
    page = test_client.get("/ringward/repair", headers=admin)
    assert page.status_code == 200
    note = page.text[page.text.index("id='config-note'") :][:600]
    assert "segment_timeout" in note and "run scheduled__2026-11-22" in note and "base configuration" in note
    assert "segment_timeout" in test_client.get("/ringward/api/repair", headers=admin).json()["config_note"]
    # The configuration file itself cannot be read: a clear error naming the file and the fix, not a 500 trace.
    missing = tmp_path / "nope.yaml"
    monkeypatch.setenv("RINGWARD_REPAIR_CONFIG", str(missing))
    page = test_client.get("/ringward/repair", headers=admin)
    assert page.status_code == 500 and "id='error'" in page.text
    assert str(missing) in page.text and "Fix:" in page.text
    body = test_client.get("/ringward/api/repair", headers=admin).json()
    assert body["error"] == "configuration" and str(missing) in body["detail"]


def test_pause_switch_needs_confirmation_and_records_who_pressed(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    unconfirmed = test_client.post("/ringward/api/repair/switch", data={"action": "pause"}, headers=admin)
    assert unconfirmed.status_code == 422 and world.store.events == []
    pressed = test_client.post("/ringward/api/repair/switch", headers=admin,
                               data={"action": "pause", "confirm": "yes", "reason": "node 3 disk"})  # fmt: skip
    assert pressed.status_code == 200 and pressed.json()["paused"] and pressed.json()["changed_by"] == "admin"
    page = test_client.get("/ringward/repair", headers=admin).text
    assert "PAUSED by admin" in page and "node 3 disk" in page and "Resume the nightly repair" in page
    # The browser form posts with Accept: text/html and lands back on the page.
    back = test_client.post("/ringward/api/repair/switch", headers={**admin, "Accept": "text/html"},
                            data={"action": "resume", "confirm": "yes"}, follow_redirects=False)  # fmt: skip
    assert back.status_code == 303 and back.headers["location"] == "../../repair"
    assert [e.paused for e in world.store.events] == [False, True]


def test_cluster_page_nodes_ring_and_connection_without_secrets(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    data = test_client.get("/ringward/api/cluster", headers=admin).json()
    assert data["connection"]["login_set"] and "password" not in data["connection"]
    assert [n["address"] for n in data["nodes"]] == sorted(world.ring_.addresses())
    assert all(n["tokens"] == 4 and n["release_version"] == "5.0.9" for n in data["nodes"])
    page = test_client.get("/ringward/cluster", headers=admin).text
    assert page.count("<tr>") == len(world.ring_.nodes) + 1
    for address in world.ring_.addresses():
        assert f"primary range of {address}" in page
    assert SECRET_PASSWORD not in page and SECRET_PASSWORD not in str(data)


def test_unreachable_cluster_is_reported_fast(
    airflow_api: tuple[Any, Any, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real source, with the connection pointing at a closed port (nodes down): a clear 503 in under a
    second."""
    test_client, _, tokens = airflow_api
    monkeypatch.setenv("AIRFLOW_CONN_CASSANDRA_DEFAULT", CLOSED_PORT_CONNECTION)
    admin = bearer(tokens["admin"])
    for url in ("/ringward/cluster", "/ringward/repair", MIGRATION):
        started = time.monotonic()
        response = test_client.get(url, headers=admin)
        assert time.monotonic() - started < 1.0, url
        assert response.status_code == 503 and "The Cassandra cluster cannot be reached" in response.text, url
        assert "127.0.0.1:1" in response.text and SECRET_PASSWORD not in response.text
    response = test_client.get("/ringward/api/cluster", headers=admin)
    assert response.status_code == 503 and response.json()["error"] == "cluster_unreachable"


def test_a_cluster_that_never_answers_is_reported_after_the_connect_timeout(
    airflow_api: tuple[Any, Any, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung node (accepts the TCP connection, never answers the protocol): the page does not hang with it,
    it says the cluster cannot be reached once the driver's connect timeout has passed."""
    from ringward_airflow.ui.source import CONNECT_TIMEOUT, drop_sessions

    test_client, _, tokens = airflow_api
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # the kernel accepts connections; nothing ever reads or answers them
        port = silent.getsockname()[1]
        monkeypatch.setenv("AIRFLOW_CONN_CASSANDRA_DEFAULT",
                           f'{{"conn_type": "cassandra", "host": "127.0.0.1", "port": {port}}}')  # fmt: skip
        started = time.monotonic()
        response = test_client.get("/ringward/cluster", headers=bearer(tokens["admin"]))
        seconds = time.monotonic() - started
    drop_sessions()
    assert response.status_code == 503 and "The Cassandra cluster cannot be reached" in response.text
    assert f"127.0.0.1:{port}" in response.text
    assert seconds < 2 * CONNECT_TIMEOUT + 1.0, seconds  # the control connection's timeout, not the request's


def test_nightly_task_reads_the_pause_switch_between_segments() -> None:
    """The repair task's check: the latest press decides; an unreadable switch does not stop a repair."""
    import logging

    from ringward.repair import paused

    log = logging.getLogger("test_ui_plugin")
    store = FakeStore()
    assert not paused(store, log)
    store.set_switch(True, "alice", "disk full on .3")
    assert paused(store, log)
    store.set_switch(False, "bob")
    assert not paused(store, log)

    class Unreadable(FakeStore):
        def switch_events(self, name: str = "nightly_subrange_repair", limit: int = 20) -> list[SwitchEvent]:
            raise RuntimeError("ringward_ops unavailable")

    assert not paused(Unreadable(), log)


@dataclass
class ApiRuns(FakeSource):
    """The in-memory cluster, with the runs read as the real source reads them: Airflow's REST API, in process,
    with the viewer's token."""

    reader: Any = None

    def dag_run(self, dag_id: str, run_id: str | None) -> RunInfo | None:
        return self.reader.dag_run(dag_id, run_id)


def test_runs_are_read_through_airflows_api_in_process_as_the_viewer(airflow_api: Any) -> None:
    """From inside a page's handler: Airflow's app found in the request's scope (the plugin's root middleware), the
    viewer's token forwarded, the answers mapped: no such run is None (the page still shows ringward's record)."""
    from ringward_airflow.ui.airflow_reads import ApiRunReader

    test_client, subapp, tokens = airflow_api
    world = _world()
    readers: list[ApiRunReader] = []

    def factory(request: Any) -> ApiRuns:
        readers.append(ApiRunReader.for_request(request))
        return ApiRuns(world.ring_, world.store, {}, world.gc_grace, world.replication, readers[-1])

    real = subapp.state.source_factory
    subapp.state.source_factory = factory
    try:
        for role in ("admin", "viewer"):
            response = test_client.get(f"/ringward/api/migration/keyspace_migration/{RUN_ID}",
                                       headers=bearer(tokens[role]))  # fmt: skip
            assert response.status_code == 200, response.text[:300]
            assert response.json()["found"] is True and response.json()["run"] is None  # no such run in Airflow
            assert readers[-1].token == tokens[role]
        # By cookie, as a browser: the cookie's token is the one forwarded.
        test_client.cookies.set("_token", tokens["viewer"])
        try:
            response = test_client.get("/ringward/api/repair")
        finally:
            test_client.cookies.clear()
        assert response.status_code == 200, response.text[:300]
        assert readers[-1].token == tokens["viewer"]
        # The current run is the nightly DAG's latest in Airflow's database, which this test home shares with
        # the DAG tests (a fresh run of the suite has their runs, a lone run of this test has none).
        latest = test_client.get("/api/v2/dags/nightly_subrange_repair/dagRuns", headers=bearer(tokens["admin"]),
                                 params={"order_by": "-id", "limit": 1})  # fmt: skip
        assert latest.status_code in (200, 404), latest.text[:300]
        runs = latest.json().get("dag_runs", []) if latest.status_code == 200 else []
        current = response.json()["current_run"]
        assert (current or {}).get("run_id") == (runs[0]["dag_run_id"] if runs else None), (current, runs)
    finally:
        subapp.state.source_factory = real


def test_airflow_refusing_the_viewer_the_run_is_the_pages_access_error(
    client: tuple[Any, FakeSource, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow's API refusing the run (its own authorization, the token expired meanwhile) answers the page with
    that refusal, not a page without the run; any other failure of the API is said in the run's place."""
    from ringward_airflow.ui.airflow_reads import AirflowAccessRefused, AirflowApiError

    test_client, world, tokens = client

    def refused(dag_id: str, run_id: str | None) -> RunInfo | None:
        raise AirflowAccessRefused(f"Airflow refused you the run of {dag_id} (Forbidden).", "Ask an administrator.")

    monkeypatch.setattr(world, "dag_run", refused)
    for url in (MIGRATION, f"/ringward/api/migration/keyspace_migration/{RUN_ID}", "/ringward/repair",
                "/ringward/api/repair"):  # fmt: skip
        response = test_client.get(url, headers=bearer(tokens["admin"]))
        assert response.status_code == 403, (url, response.status_code)
        assert "Airflow refused you the run of" in html.unescape(response.text), url

    def failing(dag_id: str, run_id: str | None) -> RunInfo | None:
        raise AirflowApiError("Airflow's API answered 500 reading the run of x: boom", "Check the api-server's log.")

    monkeypatch.setattr(world, "dag_run", failing)
    response = test_client.get(f"/ringward/api/migration/keyspace_migration/{RUN_ID}", headers=bearer(tokens["admin"]))
    assert response.status_code == 200 and response.json()["found"] is True
    assert response.json()["run"]["error"].startswith("Airflow's record of the run could not be read: Airflow's API")


def test_airflow_lists_the_plugin_and_its_views_to_the_ui(airflow_api: Any) -> None:
    """Admin → Plugins and the UI's nav read the plugin list from Airflow's REST API."""
    test_client, _, tokens = airflow_api
    response = test_client.get("/api/v2/plugins", headers=bearer(tokens["admin"]))
    assert response.status_code == 200, response.text[:300]
    ringward = [p for p in response.json()["plugins"] if p["name"] == "ringward"]
    assert ringward, response.json()
    views = {v["name"]: (v["href"], v["destination"]) for v in ringward[0]["external_views"]}
    assert views == {
        "Repair": ("ringward/repair", "nav"),
        "Cluster": ("ringward/cluster", "nav"),
        "Migration": ("ringward/migration/{DAG_ID}/{RUN_ID}", "dag_run"),
    }
    assert [a["url_prefix"] for a in ringward[0]["fastapi_apps"]] == ["/ringward"]


def test_missing_connection_is_named_with_the_fix(
    airflow_api: tuple[Any, Any, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    test_client, _, tokens = airflow_api
    monkeypatch.delenv("AIRFLOW_CONN_CASSANDRA_DEFAULT", raising=False)
    response = test_client.get("/ringward/api/cluster", headers=bearer(tokens["admin"]))
    assert response.status_code == 503 and "cassandra_default" in response.json()["detail"]
    assert "Admin → Connections" in response.json()["detail"]


# -- the kept driver session: one connect per connection, nobody else waits for it ---------------------------


@dataclass
class SlowDriver:
    """Stands in for the driver's `Cluster`: a connect blocks until its host's gate opens (at most 5 s), then
    fails for the hosts in `failing` (a node that timed out) or answers with a session of an empty cluster."""

    gates: dict[str, threading.Event]
    failing: set[str]
    calls: list[str] = field(default_factory=list)  # the host of each connect, in order
    entered: threading.Event = field(default_factory=threading.Event)
    waiting: list[str] = field(default_factory=list)  # the host of each request that asked for a session

    def cluster_class(self) -> type:
        driver = self

        class SlowCluster:
            def __init__(self, **options: Any) -> None:
                self.host = options["contact_points"][0]

            def connect(self) -> Any:
                driver.calls.append(self.host)
                driver.entered.set()
                driver.gates[self.host].wait(5.0)
                if self.host in driver.failing:
                    raise OSError(f"{self.host}: connection timed out")
                # A cluster without ringward_ops, whether asked through the schema metadata or a query.
                empty = SimpleNamespace(metadata=SimpleNamespace(keyspaces={}))
                return SimpleNamespace(cluster=empty, execute=lambda *args, **kwargs: [])

            def shutdown(self) -> None:
                pass

        return SlowCluster


@pytest.fixture
def slow_driver(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowDriver]:
    from ringward_airflow.ui import source

    driver = SlowDriver({"10.9.9.1": threading.Event(), "10.9.9.2": threading.Event()}, {"10.9.9.1"})
    monkeypatch.setattr("ringward_cassandra.cql.RingwardCluster", driver.cluster_class())
    asked = source._session_for

    def counted(conn: Any) -> Any:
        driver.waiting.append(conn.host)
        return asked(conn)

    monkeypatch.setattr(source, "_session_for", counted)
    source.drop_sessions()
    try:
        yield driver
    finally:
        for gate in driver.gates.values():
            gate.set()
        source.drop_sessions()


def _in_threads(count: int, call: Callable[[], Any]) -> tuple[list[threading.Thread], list[Any]]:
    """`count` threads each running `call` once; each result (or exception) lands in the list when done."""
    results: list[Any] = []

    def run() -> None:
        try:
            results.append(call())
        except Exception as error:  # the assertion below shows it
            results.append(error)

    threads = [threading.Thread(target=run, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads, results


def _wait_for(condition: Callable[[], bool], what: str, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_concurrent_requests_share_one_connect_attempt_and_its_failure(
    airflow_api: tuple[Any, Any, dict[str, str]], monkeypatch: pytest.MonkeyPatch, slow_driver: SlowDriver
) -> None:
    """Four requests arrive while the first connect to a slow node is under way: they wait for that attempt
    and all get its answer (a 503), instead of each connecting in turn behind a global lock (N x the wait)."""
    test_client, _, tokens = airflow_api
    monkeypatch.setenv("AIRFLOW_CONN_CASSANDRA_DEFAULT", '{"conn_type": "cassandra", "host": "10.9.9.1"}')
    admin = bearer(tokens["admin"])
    threads, results = _in_threads(4, lambda: test_client.get("/ringward/api/cluster", headers=admin))
    _wait_for(lambda: slow_driver.entered.is_set() and len(slow_driver.waiting) == 4, "4 requests to ask")
    time.sleep(0.2)  # the last arrivals reach their wait
    slow_driver.gates["10.9.9.1"].set()  # the node times out
    for thread in threads:
        thread.join(10.0)
    assert [r.status_code for r in results] == [503] * 4, results
    assert all("10.9.9.1: connection timed out" in r.json()["detail"] for r in results)
    assert slow_driver.calls == ["10.9.9.1"]  # one connect for the four, not one after another


def test_a_slow_connect_holds_only_the_requests_for_its_own_connection(
    airflow_api: tuple[Any, Any, dict[str, str]], monkeypatch: pytest.MonkeyPatch, slow_driver: SlowDriver
) -> None:
    """While a connect to one cluster hangs, a request for another connection is answered; concurrent
    requests that succeed share the one session."""
    test_client, _, tokens = airflow_api
    admin = bearer(tokens["admin"])
    migration = "/ringward/api/migration/keyspace_migration/no-such-run"  # reads ringward_ops: needs a session
    monkeypatch.setenv("AIRFLOW_CONN_CASSANDRA_DEFAULT", '{"conn_type": "cassandra", "host": "10.9.9.1"}')
    hung, hung_results = _in_threads(1, lambda: test_client.get(migration, headers=admin))
    _wait_for(slow_driver.entered.is_set, "the connect to 10.9.9.1 to start")

    monkeypatch.setenv("AIRFLOW_CONN_CASSANDRA_DEFAULT", '{"conn_type": "cassandra", "host": "10.9.9.2"}')
    slow_driver.gates["10.9.9.2"].set()
    others, other_results = _in_threads(3, lambda: test_client.get(migration, headers=admin))
    deadline = time.monotonic() + 2.0  # the hung connect lasts until its gate opens (5 s at most)
    for thread in others:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not slow_driver.gates["10.9.9.1"].is_set() and hung[0].is_alive()  # still connecting to 10.9.9.1
    assert [r.status_code for r in other_results] == [200] * 3, other_results
    assert all(not r.json()["found"] for r in other_results)
    assert slow_driver.calls.count("10.9.9.2") == 1

    slow_driver.gates["10.9.9.1"].set()
    hung[0].join(10.0)
    assert hung_results[0].status_code == 503 and slow_driver.calls.count("10.9.9.1") == 1


# -- per-DAG permissions: what a user who may read only some DAGs (or only some of a run) sees --------------


@pytest.fixture
def limited_user(
    airflow_api: tuple[Any, Any, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> Callable[[str, set[tuple[str, str | None]]], dict[str, str]]:
    """Headers of a user allowed to read only the given (dag_id, access entity) pairs, as an auth manager with
    per-DAG permissions (FAB, Keycloak) grants them; the simple auth manager's roles are all-or-nothing."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    manager = get_auth_manager()
    everyone_else = manager.is_authorized_dag
    grants: dict[str, set[tuple[str, str | None]]] = {}

    def is_authorized_dag(*, method: str, user: Any, access_entity: Any = None, details: Any = None) -> bool:
        if user.get_name() not in grants:
            return bool(everyone_else(method=method, user=user, access_entity=access_entity, details=details))
        entity = access_entity.value if access_entity is not None else None
        return method == "GET" and (details.id if details else None, entity) in grants[user.get_name()]

    monkeypatch.setattr(manager, "is_authorized_dag", is_authorized_dag)

    def user(name: str, allowed: set[tuple[str, str | None]]) -> dict[str, str]:
        grants[name] = allowed
        return bearer(manager.generate_jwt(SimpleAuthManagerUser(username=name, role="viewer")))

    return user


def _reads_of(dag_id: str) -> set[tuple[str, str | None]]:
    return {(dag_id, None), (dag_id, "RUN"), (dag_id, "XCOM"), (dag_id, "TASK_INSTANCE")}


def test_a_migration_is_served_only_under_its_own_dag_and_run(
    client: tuple[Any, FakeSource, dict[str, str]],
    limited_user: Callable[[str, set[tuple[str, str | None]]], dict[str, str]],
) -> None:
    """A user who may read only DAG X cannot read the migration of keyspace_migration by any URL: X with the
    migration's run id (the record's id ends with it), X with the run of a record that names no DAG, the other
    migration DAG, '~' for the DAG. The exact (DAG, run) of the record serves it to whoever may read that DAG."""
    test_client, world, tokens = client
    ring = world.ring_
    legacy = dict(world.store.migration_rows[0].record, migration_id="shop@old-run", run_id="old-run")
    del legacy["dag_id"]  # a record of an older ringward: no DAG named
    world.store.migration_rows.append(MigrationRow("shop@old-run", "shop", "done", None, legacy))
    # The ring, the plan, the journal, the run's XComs: none may show (the run id in the URL may name "shop").
    secrets = [*ring.addresses(), "id='keyspace'", '"keyspace"', "stream failed", "mismatches", "<svg"]

    def leaked(response: Any) -> list[str]:
        return [s for s in secrets if s in response.text] if response.status_code == 200 else []

    for dag_id, who in (("team_reports", _reads_of("team_reports")),
                        ("keyspace_migration_rollback", _reads_of("keyspace_migration_rollback"))):  # fmt: skip
        headers = limited_user(f"reader_of_{dag_id}", who)
        for run_id in (RUN_ID, quote(RUN_ID, safe=""), "old-run", f"shop@{RUN_ID}"):
            for url in (f"/ringward/migration/{dag_id}/{run_id}", f"/ringward/api/migration/{dag_id}/{run_id}",
                        f"/ringward/api/migration/{dag_id}/{run_id}/placement.svg"):  # fmt: skip
                response = test_client.get(url, headers=headers)
                assert not leaked(response), (url, leaked(response))
            assert not test_client.get(f"/ringward/api/migration/{dag_id}/{run_id}", headers=headers).json()["found"]
        for url in (MIGRATION, f"/ringward/api/migration/keyspace_migration/{RUN_ID}",
                    f"/ringward/api/migration/~/{RUN_ID}", "/ringward/api/migration/keyspace_migration/old-run",
                    f"/ringward/api/migration/team_reports%2F..%2Fkeyspace_migration/{RUN_ID}"):  # fmt: skip
            response = test_client.get(url, headers=headers)
            assert response.status_code in (403, 404) or not leaked(response), (url, response.status_code)
        page = test_client.get(f"/ringward/migration/{dag_id}/{RUN_ID}", headers=headers).text
        if dag_id == "team_reports":
            assert "team_reports is not a ringward migration DAG" in page
        else:
            assert "No ringward migration is recorded for this run" in page

    # Whoever may read keyspace_migration reads it at its exact URL; the record without a DAG is served nowhere.
    owner = limited_user("reader_of_keyspace_migration", _reads_of("keyspace_migration"))
    assert test_client.get(f"/ringward/api/migration/keyspace_migration/{RUN_ID}", headers=owner).json()["found"]
    old = test_client.get("/ringward/api/migration/keyspace_migration/old-run", headers=bearer(tokens["admin"]))
    assert old.status_code == 200 and not old.json()["found"]


def test_a_resumed_migration_points_from_its_first_run_to_the_run_that_resumed_it(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    test_client, world, tokens = client
    row = world.store.migration_rows[0]
    resumer = "manual__2026-11-24T08:00:00+00:00"
    world.store.migration_rows[0] = replace(row, record=dict(row.record, run_id=resumer))  # as take_over stores it
    admin = bearer(tokens["admin"])
    first = test_client.get(MIGRATION, headers=admin)
    assert first.status_code == 200 and f"resumed by run {resumer}" in first.text and "<svg" not in first.text
    assert f"href='../../migration/keyspace_migration/{quote(resumer, safe='')}'" in first.text
    data = test_client.get(f"/ringward/api/migration/keyspace_migration/{resumer}", headers=admin).json()
    assert data["found"] and data["migration_id"] == f"shop@{RUN_ID}"


def test_a_migration_page_decodes_only_its_runs_rows_however_many_migrations_are_stored(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    """The page finds its run's migration by (DAG, run) (ringward_ops.migration_runs): the in-memory store counts
    the migrations rows it reads (each decoded, a ring in it), the same with 5 or 200 other migrations stored:
    one for the run's migration, none for a run without one, two for a run whose migration another run took
    over (the page says which)."""
    from ringward_cassandra.memory_ops_store import MemoryOpsStore

    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    row = world.store.migration_rows[0]
    resumer = "manual__2026-11-24T08:00:00+00:00"
    reads = {}
    for others in (5, 200):
        store = MemoryOpsStore()
        store.ensure_schema()
        for i in range(others):  # other keyspaces' migrations, of other runs of the same DAG
            record = dict(row.record, migration_id=f"ks{i}@manual__{i}", keyspace=f"ks{i}", run_id=f"manual__{i}")
            store.record_migration(f"ks{i}@manual__{i}", f"ks{i}", "{}", "{}", "done", record)
        store.record_migration(row.migration_id, "shop", "{}", "{}", row.state, row.record)
        world.store = store  # type: ignore[assignment]
        counted = []
        for run_id, says in ((RUN_ID, f'"migration_id":"shop@{RUN_ID}"'), ("manual__none", '"found":false')):
            store.reset_stats()
            response = test_client.get(f"/ringward/api/migration/keyspace_migration/{run_id}", headers=admin)
            assert response.status_code == 200 and says in response.text.replace(" ", ""), response.text[:300]
            counted.append(store.stats()["rows_read"].get("migrations", 0))
        store.record_migration(row.migration_id, "shop", "{}", "{}", row.state, dict(row.record, run_id=resumer))
        store.reset_stats()
        page = test_client.get(MIGRATION, headers=admin)
        assert page.status_code == 200 and f"resumed by run {resumer}" in page.text
        counted.append(store.stats()["rows_read"].get("migrations", 0))
        reads[others] = counted
    assert reads[5] == reads[200] == [1, 0, 2], reads


def test_run_readers_without_xcom_permission_get_no_xcoms(
    client: tuple[Any, FakeSource, dict[str, str]],
    limited_user: Callable[[str, set[tuple[str, str | None]]], dict[str, str]],
) -> None:
    """Airflow's API serves a run's XComs only with the XCom read permission (task instances with theirs): the
    migration JSON and page return none of them to a user who may read the runs only."""
    test_client, world, _ = client
    run = world.runs[("keyspace_migration", RUN_ID)]
    world.runs[("keyspace_migration", RUN_ID)] = replace(run, xcoms={**run.xcoms, "precheck:secret": "xcom-only"})
    api = f"/ringward/api/migration/keyspace_migration/{RUN_ID}"
    runs_only = limited_user("run_reader", {("keyspace_migration", "RUN")})
    data = test_client.get(api, headers=runs_only).json()
    assert data["found"] and data["keyspace"] == "shop"  # the migration itself: ringward's record, run-read
    assert "xcoms" not in data["run"] and data["run"]["tasks"] == []
    assert data["steps"][0]["verification"] == {} and data["cleanup"]["report"] is None
    assert "xcom-only" not in str(data) and "mismatches" not in str(data)
    page = test_client.get(MIGRATION, headers=runs_only).text
    assert "xcom-only" not in page and "mismatches" not in page and "precheck" not in page.split("Timings")[1]
    assert "needs the XCom read permission on keyspace_migration" in page
    assert "needs the task instance read permission on keyspace_migration" in page

    # With XCom and task instance read: the verification evidence and the timings, still never the raw XComs.
    full = limited_user("full_reader", _reads_of("keyspace_migration"))
    data = test_client.get(api, headers=full).json()
    assert data["steps"][0]["verification"] == {"verify_preview": {"mismatches": 0}}
    assert [t["task_id"] for t in data["run"]["tasks"]] == ["precheck"] and "xcoms" not in data["run"]
    assert "xcom-only" not in str(data)


# -- CSRF: a change by cookie only from the app's own page ---------------------------------------------------


def test_pause_switch_by_cookie_is_refused_from_another_origin_and_accepted_from_its_page(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    """The browser sends the `_token` cookie with a form another page (same site, other port) posts: such a press
    is refused (403, nothing recorded, the refusal says why and what to do); the Repair page's own form is
    accepted, and so is a script's call with a bearer token whatever its Origin."""
    test_client, world, tokens = client
    press = {"action": "pause", "confirm": "yes", "reason": "forged"}
    switch = "/ringward/api/repair/switch"
    test_client.cookies.set("_token", tokens["admin"])
    try:
        for headers in (
            {"Origin": "https://evil.example"},
            {"Origin": "http://testserver:8081"},  # same site, another port
            {"Origin": "null"},  # a sandboxed page
            {"Referer": "https://evil.example/ringward/repair"},  # no Origin: the Referer decides
            {"Sec-Fetch-Site": "same-site", "Origin": "http://testserver"},  # the browser's own word wins
            {"Sec-Fetch-Site": "cross-site"},
            {},  # neither Origin nor Referer
        ):
            refused = test_client.post(switch, data=press, headers={**headers, "Accept": "text/html"},
                                       follow_redirects=False)  # fmt: skip
            assert refused.status_code == 403, (headers, refused.text)
            assert "not from ringward's own page (http://testserver)" in refused.json()["detail"], headers
            assert "Authorization: Bearer" in refused.json()["detail"]
        assert world.store.events == []

        # The page's own form: its action, relative to the page, posted by the browser from that page.
        page = test_client.get("/ringward/repair")
        form = re.search(r"<form method='post' action='([^']+)' id='switch-form'", page.text)
        assert form is not None and form.group(1) == "api/repair/switch"
        action = str(page.url).rsplit("/", 1)[0] + "/" + form.group(1)
        own = {"Origin": "http://testserver", "Referer": str(page.url), "Accept": "text/html"}
        accepted = test_client.post(action, data=press, headers=own, follow_redirects=False)
        assert accepted.status_code == 303 and [e.reason for e in world.store.events] == ["forged"]
        browser = {"Sec-Fetch-Site": "same-origin", "Origin": "http://testserver"}
        assert test_client.post(switch, data={"action": "resume", "confirm": "yes"}, headers=browser).status_code == 200
        referer_only = {"Referer": "http://testserver/ringward/repair"}
        assert test_client.post(switch, data=press, headers=referer_only).status_code == 200
    finally:
        test_client.cookies.clear()
    api = test_client.post(switch, data={"action": "resume", "confirm": "yes"},
                           headers={**bearer(tokens["admin"]), "Origin": "https://evil.example"})  # fmt: skip
    assert api.status_code == 200 and len(world.store.events) == 4


# -- page cost: a large plan's page stays small ------------------------------------------------------------


def _big_migration(world: FakeSource, nodes: int = 48, tokens: int = 256) -> int:
    """Make the world's migration one on a ring of `nodes` x `tokens` (the size the review measured); its ranges."""
    import random

    from ringward.ring import Node

    picked = random.Random(25).sample(range(-(2**63) + 1, 2**63 - 1, 2**40), nodes * tokens)
    ring = Ring.of(
        Node(f"10.1.{i // 200}.{i % 200 + 1}", "dc1", f"rack{i % 3}", tuple(picked[i * tokens : (i + 1) * tokens]))
        for i in range(nodes)
    )
    plan = build_plan(ring, OLD, NEW, keyspace="shop")
    row = world.store.migration_rows[0]
    record = dict(row.record, ring=ring_to_json(ring), old=plan.old.as_json(), new=plan.new.as_json(),
                  steps=[s.after.as_json() for s in migration_steps(plan)], summary=plan.summary())  # fmt: skip
    world.store.migration_rows[0] = replace(row, record=record)
    world.store.journal = []
    return plan.total_ranges


def test_a_large_migration_page_is_paginated_and_links_its_picture(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    """48 nodes x 256 tokens: the page was 18 MB (37,876 table rows, an 11.5 MB inline SVG) reloaded every 10 s.
    Now each list of ranges shows one page of rows and says which of how many, the picture is linked, and a
    finished run's page does not reload itself."""
    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    total = _big_migration(world)
    assert total == 48 * 256
    page = test_client.get(MIGRATION, headers=admin)
    assert page.status_code == 200 and len(page.content) < 1_000_000, len(page.content)
    assert page.text.count("<tr") < 1_000 and "<svg" not in page.text
    pages = -(-total // 200)
    assert f"ranges 1&ndash;200 of {total}, affected first" in page.text
    assert f"page 1 of {pages}" in page.text and "href='?page=2' rel='next'" in page.text
    assert f"href='?page={pages}'" in page.text and "http-equiv='refresh' content='10'" in page.text  # running
    picture = re.search(r"<img src='([^']+)'", page.text)
    assert picture is not None and picture.group(1).endswith("/placement.svg")
    svg = test_client.get(urljoin(str(page.url), picture.group(1)), headers=admin)
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    # 12,288 ranges drawn as runs of neighbours: a bounded number of arcs per ring (was one arc per range, 11 MB).
    assert svg.text.count('class="arc"') == 2 * PLACEMENT_ARCS and len(svg.text) < 1_000_000

    world.runs[("keyspace_migration", RUN_ID)] = replace(world.runs[("keyspace_migration", RUN_ID)], state="success")
    last = test_client.get(f"{MIGRATION}?page={pages + 5}", headers=admin)  # past the end: the last page
    assert last.status_code == 200 and len(last.content) < 1_000_000 and f"page {pages} of {pages}" in last.text
    assert f"ranges {(pages - 1) * 200 + 1}&ndash;{total} of {total}" in last.text and "rel='next'" not in last.text
    assert "http-equiv='refresh'" not in last.text  # a finished run: nothing to watch
    assert test_client.get(f"{MIGRATION}?page=0", headers=admin).status_code == 422


def test_the_migration_json_pages_through_every_range_and_journal_entry(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    """?offset=&limit= windows each list of ranges (ring order); the counts are of every row, whatever the window."""
    test_client, _, tokens = client
    admin = bearer(tokens["admin"])
    url = f"/ringward/api/migration/keyspace_migration/{RUN_ID}"
    whole = test_client.get(url, headers=admin).json()
    assert whole["ranges_total"] == len(whole["ranges"]) == whole["total_ranges"] > 5
    post_total = whole["steps"][0]["stages"][1]["total"]
    assert post_total == len(whole["steps"][0]["stages"][1]["ranges"]) > 5
    pieces = [test_client.get(f"{url}?offset={offset}&limit=5", headers=admin).json()
              for offset in range(0, whole["ranges_total"], 5)]  # fmt: skip
    assert [r for piece in pieces for r in piece["ranges"]] == whole["ranges"]
    assert [r for piece in pieces for r in piece["steps"][0]["stages"][1]["ranges"]] == (
        whole["steps"][0]["stages"][1]["ranges"])  # fmt: skip
    assert {(p["ranges_total"], p["steps"][0]["stages"][1]["failed"], p["window"]["limit"]) for p in pieces} == {
        (whole["ranges_total"], 1, 5)}  # fmt: skip
    assert max(len(piece["ranges"]) for piece in pieces) == 5
    past = test_client.get(f"{url}?offset={whole['ranges_total']}", headers=admin).json()
    assert past["ranges"] == [] and past["ranges_total"] == whole["ranges_total"]


@pytest.mark.parametrize(
    ("query", "named"),
    [("limit=0", f"limit=0 is out of range: it must be from 1 to {JSON_ROWS}"),
     (f"limit={JSON_ROWS + 1}", f"limit={JSON_ROWS + 1} is out of range: it must be from 1 to {JSON_ROWS}"),
     ("offset=-1", "offset=-1 is out of range: it must be from 0 to 10000000"),
     ("offset=10000001", "offset=10000001 is out of range: it must be from 0 to 10000000")],
)  # fmt: skip
def test_json_windows_out_of_range_are_refused_naming_the_range(
    client: tuple[Any, FakeSource, dict[str, str]], query: str, named: str
) -> None:
    test_client, _, tokens = client
    for url in (
        f"/ringward/api/migration/keyspace_migration/{RUN_ID}",
        "/ringward/api/repair",
        "/ringward/api/cluster",
    ):
        response = test_client.get(f"{url}?{query}", headers=bearer(tokens["admin"]))
        assert response.status_code == 422 and named in response.json()["detail"], (url, response.text)


def test_page_numbers_out_of_range_are_refused_naming_the_range(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    test_client, _, tokens = client
    for url in (MIGRATION, "/ringward/repair", "/ringward/api/repair/coverage.svg", "/ringward/cluster"):
        for page in (0, 10_001):
            response = test_client.get(f"{url}?page={page}", headers=bearer(tokens["admin"]))
            assert response.status_code == 422, (url, page)
            assert f"page={page} is out of range: it must be from 1 to 10000" in response.text, (url, page)
        assert test_client.get(f"{url}?page=10000", headers=bearer(tokens["admin"])).status_code == 200  # the last


def test_cluster_nodes_are_paged_and_the_ring_picture_is_bounded(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    from ringward.ring import Node

    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    world.ring_ = Ring.of(Node(f"10.2.{i // 200}.{i % 200 + 1}", "dc1", "r1", (i * 2**50 - 2**62, i * 2**50 + 7))
                          for i in range(450))  # fmt: skip
    page = test_client.get("/ringward/cluster", headers=admin).text
    assert page.count("<tr>") == 1 + 200 and "nodes 1&ndash;200 of 450" in page and "page 1 of 3" in page
    last = test_client.get("/ringward/cluster?page=9", headers=admin).text  # past the end: the last page
    assert last.count("<tr>") == 1 + 50 and "nodes 401&ndash;450 of 450" in last and "rel='next'" not in last
    data = test_client.get("/ringward/api/cluster?offset=440&limit=100", headers=admin).json()
    assert data["nodes_total"] == 450 and len(data["nodes"]) == 10 and data["tokens"] == 900
    every = [n["address"] for o in (0, 200, 400) for n in test_client.get(f"/ringward/api/cluster?offset={o}&limit=200",
                                                                         headers=admin).json()["nodes"]]  # fmt: skip
    assert sorted(every) == sorted(n.address for n in world.ring_.nodes)
    svg = test_client.get("/ringward/api/cluster/ring.svg", headers=admin).text
    from ringward_airflow.ui.views import RING_ARCS, RING_LEGEND

    assert svg.count('class="arc"') == RING_ARCS < 900 and f"and {450 - RING_LEGEND} more nodes" in svg


def test_repair_tables_are_paged_with_their_picture(client: tuple[Any, FakeSource, dict[str, str]]) -> None:
    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    world.gc_grace = {"app": {f"t{i:03d}": 864000 for i in range(450)}}
    world.store.runs[0] = replace(world.store.runs[0], summary={"tables": {f"app.t{i:03d}": "40.0%"
                                                                            for i in range(450)}})  # fmt: skip
    page = test_client.get("/ringward/repair", headers=admin).text
    assert "tables 1&ndash;200 of 450" in page and "page 1 of 3" in page
    assert page.count("<tr><td>app.t") == 200 and page.count("<rect class='bar'") == 200
    second = test_client.get("/ringward/repair?page=2", headers=admin).text
    assert "tables 201&ndash;400 of 450" in second and "<td>app.t200</td>" in second and "app.t199<" not in second
    svg = test_client.get("/ringward/api/repair/coverage.svg?page=3", headers=admin).text
    assert svg.count("class='bar'") == 50 and "app.t400" in svg and "app.t399" not in svg
    data = test_client.get("/ringward/api/repair?offset=100&limit=3", headers=admin).json()
    assert [t["table"] for t in data["tables"]] == ["app.t100", "app.t101", "app.t102"]
    assert data["tables_total"] == 450 and [t["table"] for t in data["by_type"]["tables"]] == [
        "app.t100", "app.t101", "app.t102"]  # fmt: skip


def test_a_stored_migrations_plan_is_built_once_and_again_when_its_record_changes(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    """The plan (2.3 s of CPU and 6 x 2.8 s of repair segments at 1000 x 256) is built once per stored record,
    for every route and viewer; concurrent first requests share one build; a changed record is built anew."""
    from ringward_airflow.ui import views

    test_client, world, tokens = client
    migration_id = world.store.migration_rows[0].migration_id
    before = views.COLD_BUILDS[migration_id]
    urls = [MIGRATION, f"/ringward/api/migration/keyspace_migration/{RUN_ID}",
            f"/ringward/api/migration/keyspace_migration/{RUN_ID}/placement.svg"]  # fmt: skip
    row = world.store.migration_rows[0]
    world.store.migration_rows[0] = replace(row, record=dict(row.record, summary="first"))
    statuses: list[int] = []

    def fetch(url: str, role: str) -> None:
        statuses.append(test_client.get(url, headers=bearer(tokens[role])).status_code)

    threads = [threading.Thread(target=fetch, args=(url, role)) for url in urls for role in ("admin", "viewer")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [200] * 6 and views.COLD_BUILDS[migration_id] == before + 1
    world.store.journal = []  # progress is read every time, not built with the plan
    assert "<b>0/" in test_client.get(MIGRATION, headers=bearer(tokens["admin"])).text
    assert views.COLD_BUILDS[migration_id] == before + 1
    world.store.migration_rows[0] = replace(row, record=dict(row.record, summary="second"))
    assert test_client.get(MIGRATION, headers=bearer(tokens["admin"])).status_code == 200
    assert views.COLD_BUILDS[migration_id] == before + 2


def test_the_view_its_precheck_stored_is_read_instead_of_built_and_serves_the_same_page(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    """The precheck stores the page's view of the plan beside the record (`store_page_view`): the page reads it
    and plans nothing, and serves what it serves when it builds the view itself. A view stored for another version
    of the record (edited since), one that cannot be read (another format, cut short), or one whose picture is
    markup ringward does not draw (someone wrote it into ringward_ops) is not used: the page builds the view from
    the record."""
    from ringward.migration_page_codec import pages_from_bytes, pages_to_bytes, view_version
    from ringward_airflow.migration_stages import store_page_view
    from ringward_airflow.ui import views

    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    urls = [MIGRATION, f"{MIGRATION}?page=2", f"/ringward/api/migration/keyspace_migration/{RUN_ID}",
            f"/ringward/api/migration/keyspace_migration/{RUN_ID}/placement.svg"]  # fmt: skip
    row = world.store.migration_rows[0]
    migration_id = row.migration_id

    def record(n: int) -> dict[str, Any]:
        return dict(row.record, summary=f"SUMMARY-{n}-")

    def served(n: int) -> tuple[list[str], tuple[int, int]]:
        """The pages of record `n`, as record 0's would read, and (plans built, stored views read) for them."""
        world.store.migration_rows[0] = replace(row, record=record(n))
        built, read = views.COLD_BUILDS[migration_id], views.STORED_VIEWS[migration_id]
        pages = [test_client.get(url, headers=admin).text.replace(f"SUMMARY-{n}-", "SUMMARY-0-") for url in urls]
        return pages, (views.COLD_BUILDS[migration_id] - built, views.STORED_VIEWS[migration_id] - read)

    expected, counts = served(0)
    assert counts == (1, 0) and all(expected)
    assert store_page_view(world.store, record(1)) is None
    assert served(1) == (expected, (0, 1))  # read, not built: the same pages
    assert store_page_view(world.store, record(2)) is None  # the view of record 2, not of record 3
    assert served(3) == (expected, (1, 0))

    def injected(data: bytes) -> bytes:  # the format intact, the picture markup ringward does not draw
        pages = pages_from_bytes(data)
        markup = "<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'><text>INJECTED</text></svg>"
        return pages_to_bytes(replace(pages, svg=markup))

    for n, damage in ((4, lambda data: data[:-1]), (5, lambda data: b"XXXX" + data[4:]), (6, injected)):
        assert store_page_view(world.store, record(n)) is None
        key = (migration_id, view_version(record(n)))
        world.store.pages[key] = damage(world.store.pages[key])
        assert served(n) == (expected, (1, 0))  # not INJECTED: the picture drawn from the record


# -- what ringward stores, or the connection, cannot be read: a clear answer, not a 500 ---------------------


MIGRATION_URLS = [MIGRATION, f"/ringward/api/migration/keyspace_migration/{RUN_ID}",
                  f"/ringward/api/migration/keyspace_migration/{RUN_ID}/placement.svg"]  # fmt: skip


@pytest.mark.parametrize(
    ("state", "record_change", "expected"),
    [
        ("altered:abc", {}, ["state 'altered:abc' is not one ringward writes", "altered:<step>"]),
        ("altered:1", {"ring": None}, ["record is unreadable", "clear the precheck task"]),
        ("altered:1", {"old": {"class": "NoSuchStrategy"}}, ["NoSuchStrategy", "Fix:"]),
    ],
    ids=["malformed-state", "record-without-ring", "record-with-unknown-replication"],
)
def test_a_malformed_stored_migration_is_named_with_the_fix(
    client: tuple[Any, FakeSource, dict[str, str]], state: str, record_change: dict[str, Any], expected: list[str]
) -> None:
    test_client, world, tokens = client
    row = world.store.migration_rows[0]
    world.store.migration_rows[0] = replace(row, state=state, record={**row.record, **record_change})
    for url in MIGRATION_URLS:
        response = test_client.get(url, headers=bearer(tokens["admin"]))
        assert response.status_code == 409, (url, response.status_code, response.text[:300])
        text = html.unescape(response.text) if url == MIGRATION else response.json()["detail"]
        assert f"Migration shop@{RUN_ID} (ringward_ops.migrations)" in text, url
        for part in expected:
            assert part in text, (url, part, text[:500])
    assert "id='error'" in test_client.get(MIGRATION, headers=bearer(tokens["admin"])).text  # the page's error box


def test_an_unreadable_ringward_ops_row_is_named_with_the_fix(
    client: tuple[Any, FakeSource, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's own parsing fails (a plan that is not JSON, a segment state ringward does not know)."""
    test_client, world, tokens = client
    admin = bearer(tokens["admin"])

    def bad_json() -> list[MigrationRow]:
        import json

        return [json.loads("{not json")]

    def bad_runs() -> list[RepairRunRow]:
        import json

        return [json.loads("{not json")]

    monkeypatch.setattr(world.store, "run_migrations", lambda dag_id, run_id: bad_json())
    monkeypatch.setattr(world.store, "repair_runs", bad_runs)
    for url, table in ((MIGRATION, "migrations"), (f"/ringward/api/migration/keyspace_migration/{RUN_ID}",
                       "migrations"), ("/ringward/repair", "repair_runs"), ("/ringward/api/repair",
                       "repair_runs")):  # fmt: skip
        response = test_client.get(url, headers=admin)
        assert response.status_code == 409, (url, response.status_code)
        text = html.unescape(response.text)
        assert f"A row of ringward_ops.{table} cannot be read" in text, url
        assert f"SELECT * FROM ringward_ops.{table}" in text and "correct or delete it" in text


def test_a_connection_extra_that_is_not_a_number_is_named_with_the_fix(
    airflow_api: tuple[Any, Any, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """protocol_version=abc: every page that needs the connection says which setting and how to fix it (503)."""
    test_client, _, tokens = airflow_api
    monkeypatch.setenv("AIRFLOW_CONN_CASSANDRA_DEFAULT",
                       '{"conn_type": "cassandra", "host": "127.0.0.1", "port": 1, '
                       '"extra": {"protocol_version": "abc"}}')  # fmt: skip
    for url in ("/ringward/api/cluster", "/ringward/cluster", "/ringward/api/repair", MIGRATION):
        response = test_client.get(url, headers=bearer(tokens["admin"]))
        assert response.status_code == 503, (url, response.status_code)
        detail = response.json()["detail"]
        assert "The Cassandra connection 'cassandra_default' cannot be used" in detail, url
        assert "protocol_version='abc'" in detail and "Admin → Connections" in detail, url

    # The same refusal met while a page is built (a source that reads its settings late): the same 503.
    from ringward_airflow.ui.source import ConnectionSettingError

    _, subapp, _ = airflow_api
    world = _world()

    def late() -> ConnectionInfo:
        raise ConnectionSettingError("The connection 'cassandra_default' has extra protocol_version='abc'.", "Edit it.")

    monkeypatch.setattr(world, "connection", late)
    # Not monkeypatch: its undo on a starlette State deletes the attribute from the shared plugin app.
    real = subapp.state.source_factory
    subapp.state.source_factory = lambda request: world
    try:
        response = test_client.get("/ringward/api/cluster", headers=bearer(tokens["admin"]))
    finally:
        subapp.state.source_factory = real
    assert response.status_code == 503 and response.json()["error"] == "connection"
    detail = response.json()["detail"]
    assert "cannot be used: The connection 'cassandra_default' has extra protocol_version='abc'." in detail


def test_repair_page_shows_the_latest_preview_findings(
    client: tuple[Any, FakeSource, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ringward.ring import TokenRange
    from ringward_cassandra.ops_store import PreviewFinding

    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    assert test_client.get("/ringward/api/repair", headers=admin).json()["previews"] == []  # a store without them
    found = PreviewFinding("app", "events", (TokenRange(0, 10), TokenRange(10, 20)), 2,
                           datetime(2026, 11, 25, 2, 0, tzinfo=UTC), "night-1", "127.0.0.2")  # fmt: skip
    monkeypatch.setattr(world.store, "preview_findings", lambda: [found], raising=False)
    (shown,) = test_client.get("/ringward/api/repair", headers=admin).json()["previews"]
    assert (
        shown["table"] == "app.events" and shown["out_of_sync_ranges"] == 2 and shown["ranges"] == "(0, 10], (10, 20]"
    )
    page = test_client.get("/ringward/repair", headers=admin).text
    assert "Preview findings" in page and "id='previews'" in page


# -- the pages' look and formats (issue 28): Airflow's style, light and dark, values as people read them ------------

HTML_PAGES = [MIGRATION, "/ringward/repair", "/ringward/cluster"]


def test_the_stylesheet_has_a_dark_mode_and_every_page_carries_it(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    from ringward_airflow.ui.style import STYLESHEET, THEME_SCRIPT, state_class

    assert "@media (prefers-color-scheme: dark)" in STYLESHEET and ":root[data-theme=dark]" in STYLESHEET
    dark = STYLESHEET[STYLESHEET.index("@media (prefers-color-scheme: dark)") :]
    assert "--bg:" in dark and "color-scheme:dark" in dark
    # Airflow's state colours (its theme's tokens): success green, failed red, running cyan; ringward's words
    # take their kin's colour.
    assert ".badge.state-success{background:#16a34a}" in STYLESHEET
    assert ".badge.state-failed{background:#dc2626}" in STYLESHEET
    assert ".badge.state-running{background:#0891b2}" in STYLESHEET
    assert (state_class("done"), state_class("FAILED"), state_class("pending")) == (
        "state-success", "state-failed", "state-none")  # fmt: skip
    assert state_class("<b>") == "state-none"
    test_client, _, tokens = client
    for url in HTML_PAGES:
        page = test_client.get(url, headers=bearer(tokens["admin"])).text
        assert page.startswith("<!doctype html><html lang='en'>"), url
        assert f"<style>{STYLESHEET}</style>" in page and f"<script>{THEME_SCRIPT}</script>" in page, url
        assert "<meta name='color-scheme' content='light dark'>" in page, url
        assert "<link" not in page and not re.search(r"(src|href)=['\"](https?:)?//", page), url  # nothing fetched
        assert "<nav aria-label='ringward'>" in page and "<main>" in page and "<h1>" in page, url


def test_formats_of_times_durations_and_replication() -> None:
    from ringward_airflow.ui.formats import (
        format_duration,
        format_replication,
        format_timestamp,
        humanize_replications,
    )

    assert format_timestamp("2026-11-25T10:19:03.123456+00:00") == "2026-11-25 10:19:03 UTC"
    assert format_timestamp("2026-11-25T11:19:03+01:00") == "2026-11-25 10:19:03 UTC"  # in UTC
    assert format_timestamp(datetime(2026, 11, 25, 10, 19, 3)) == "2026-11-25 10:19:03 UTC"  # naive: UTC
    assert format_timestamp(None) == "-" and format_timestamp("not a time") == "not a time"
    assert [format_duration(s) for s in (3.4, 0, 59.9, 60, 307, 3720, 3599.6, 2 * 86400 + 4 * 3600)] == [
        "3.4 s", "0.0 s", "59.9 s", "1 min 00 s", "5 min 07 s", "1 h 02 min", "1 h 00 min", "2 d 04 h"]  # fmt: skip
    assert format_duration(None) == "-" and format_duration("abc") == "-"
    assert format_replication({"class": "SimpleStrategy", "replication_factor": 3}) == "SimpleStrategy RF 3"
    assert format_replication(Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 3})) == (
        "NetworkTopologyStrategy {dc1: 3, dc2: 3}"
    )
    cql = Replication.parse(NEW).to_cql()  # {'class': 'NetworkTopologyStrategy', 'dc1': '3'}
    # Text is never read as a replication by format_replication: only the typed value or its stored JSON map.
    assert format_replication(cql) == cql
    assert format_replication({"class": "NetworkTopologyStrategy", "dc1": 2, "replication_factor": 3}) == (
        "NetworkTopologyStrategy {dc1: 2, other DCs: 3}"
    )
    assert format_replication({"class": "NoSuchStrategy"}) == "class: NoSuchStrategy"  # no setting: its pairs
    # A check's own text: the CQL and JSON maps ringward writes into it, read as written (never as Python).
    assert humanize_replications(f"from {Replication.parse(OLD).to_cql()} -> {cql}.") == (
        "from SimpleStrategy RF 1 -> NetworkTopologyStrategy {dc1: 3}."
    )
    assert humanize_replications('first change to {"class": "NetworkTopologyStrategy", "dc1": 2}') == (
        "first change to NetworkTopologyStrategy {dc1: 2}"
    )
    quoted = Replication.network_topology({"it's": 2})
    assert humanize_replications(quoted.to_cql()) == "NetworkTopologyStrategy {it's: 2}"
    assert humanize_replications("{'class': 'NoSuchStrategy'}") == "{'class': 'NoSuchStrategy'}"  # left as it is
    # Python escapes are no CQL: a backslash sequence stays the text it is (literal_eval would decode it to '<').
    escaped = Replication.network_topology({"\\x3cimg src=x onerror=alert(1)\\x3e": 3})
    assert (
        humanize_replications(escaped.to_cql()) == "NetworkTopologyStrategy {\\x3cimg src=x onerror=alert(1)\\x3e: 3}"
    )


def test_pages_show_replication_times_and_verification_as_people_read_them(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    key = ("keyspace_migration", RUN_ID)
    not_in_sync = "(0, 10] on 127.0.0.3: 2 rows behind CL ALL"
    world.runs[key] = replace(world.runs[key], xcoms={
        "step_1.verify_preview": {"preview_ranges_in_sync": 12},
        "step_1.verify_counts": {
            "orders": {"replica_checks": 24, "rows_verified": 120000, "not_in_sync": [], "whole_table_rows": 40000},
            "carts": {"replica_checks": 6, "rows_verified": 900, "not_in_sync": [not_in_sync], "whole_table_rows": 3},
        },
    })  # fmt: skip
    page = test_client.get(MIGRATION, headers=admin).text
    assert "SimpleStrategy RF 1 &rarr; NetworkTopologyStrategy {dc1: 3}" in page
    steps = page[page.index("<ol id='steps'>") : page.index("</ol>")]
    assert "<li>NetworkTopologyStrategy {dc1: 2}</li><li>NetworkTopologyStrategy {dc1: 3}</li>" in steps
    assert "Step 1/2: NetworkTopologyStrategy {dc1: 2}" in page and "ALTER applied" in page
    assert "started 2026-11-23 10:00:01 UTC" in page and "2026-11-23T10:00:01" not in page
    # The verification: the preview's verdict and, per table, the replica checks with theirs; no JSON dump.
    assert "<pre class='verification'>" not in page and '"preview_ranges_in_sync"' not in page
    preview = page[page.index("id='verification-1-preview'") :]
    preview = preview[: preview.index("</table>")]
    assert "<td>12</td>" in preview and "in sync</span>" in preview
    counts = page[page.index("id='verification-1-counts'") :]
    counts = counts[: counts.index("</table>")]
    assert "<td>orders</td><td>24</td><td>120000</td><td>40000</td>" in counts and "passed</span>" in counts
    assert "1 not in sync</span>" in counts and f"<li>{html.escape(not_in_sync)}</li>" in counts
    # The journal's and the tasks' durations, and their moments, in words and to the second.
    journal = page[page.index("id='journal-post_repair-1'") :]
    assert "<td>9.0 s</td>" in journal[: journal.index("</table>")]
    timings = page[page.index("id='timings'") :]
    timings = timings[: timings.index("</table>")]
    start = world.runs[key].tasks[0].start
    assert f"<td>{start:%Y-%m-%d %H:%M:%S} UTC</td>" in timings and "<td>3.0 s</td>" in timings
    assert "state-success'>success</span>" in timings  # the task's state as Airflow's badge

    repair = test_client.get("/ringward/repair", headers=admin).text
    assert "ETA <span id='eta'>10 min 00 s</span>" in repair
    recorded = world.store.runs[0].updated_at
    assert f"<td>{recorded.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC</td>" in repair
    assert recorded.isoformat() not in repair
    assert "<td>app.events: 40.0%</td>" in repair  # the run's tables, not a dict


def test_no_page_of_the_fake_world_shows_a_python_dict(client: tuple[Any, FakeSource, dict[str, str]]) -> None:
    """Neither the pages nor their pictures write a replication, or anything else, as a Python dict repr."""
    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    world.store.events.insert(0, SwitchEvent(True, datetime(2026, 11, 25, 1, 0, tzinfo=UTC), "alice", "disk"))
    urls = [url for url in GETS if "/api/" not in url or url.endswith(".svg")]
    for url in [*urls, "/ringward/migration/keyspace_migration/other-run"]:
        response = test_client.get(url, headers=admin)
        assert response.status_code == 200, url
        text = html.unescape(response.text)
        assert "{'class':" not in text and '{"class":' not in text, url
        assert not re.search(r"\{'[^']*': ", text), (url, re.search(r".{80}\{'[^']*': .{80}", text))


# -- the Repair page per repair type (issue 24) ----------------------------------------------------------------------


def _finding(table: str, run_id: str, ranges: int, at: datetime) -> Any:
    from ringward.ring import TokenRange
    from ringward_cassandra.ops_store import PreviewFinding

    keyspace, _, name = table.partition(".")
    return PreviewFinding(keyspace, name, (TokenRange(0, 10),), ranges, at, run_id, "127.0.0.2")


def test_by_type_view_takes_each_types_latest_report_the_incremental_split_and_the_last_preview() -> None:
    from ringward_airflow.ui.views import by_type_view

    night1, night2 = datetime(2026, 11, 24, 3, tzinfo=UTC), datetime(2026, 11, 25, 3, tzinfo=UTC)
    runs = [  # latest first
        RepairRunRow(
            "night-2",
            "DONE",
            {
                "types": {
                    "full": {"repaired": {"ks.a": "100.0%", "ks.b": "100.0%"}},
                    "preview": {"previewed": {"ks.a": "100.0%", "ks.b": "100.0%"}},
                }
            },
            {},
            night2,
        ),
        RepairRunRow(
            "night-1",
            "PARTIAL",
            {
                "types": {
                    "full": {"repaired": {"ks.a": "50.0%", "ks.b": "50.0%", "ks.c": "10.0%"}},
                    "incremental": {
                        "repaired": {"ks.a": "80.0%"},
                        "repaired_share": {"ks.a": {"repaired": 87.5, "lowest": 75.0, "nodes": 3}},
                    },
                    "preview": {"previewed": {"ks.a": "50.0%", "ks.b": "50.0%"}},
                }
            },
            {},
            night1,
        ),
        RepairRunRow("before-types", "DONE", {"repair_type": "full", "tables": {"ks.d": "5.0%"}}, {}, night1),
    ]
    findings = [  # latest first
        _finding("ks.c", "night-3", 4, night2 + timedelta(hours=1)),  # a run under way: not reported yet
        _finding("ks.a", "night-2", 2, night2 - timedelta(minutes=5)),
        _finding("ks.a", "night-2", 1, night2 - timedelta(minutes=6)),
        _finding("ks.b", "night-1", 7, night1 - timedelta(minutes=5)),  # b was in sync on night 2
    ]
    view = by_type_view(runs, ["ks.a", "ks.b", "ks.c", "ks.d"], findings)
    assert view["types"] == ["full", "incremental", "preview"]  # in REPAIR_TYPES order; paxos never reported
    a, b, c, d = view["tables"]
    assert a["coverage"] == {"full": {"share": "100.0%", "run_id": "night-2"},
                             "incremental": {"share": "80.0%", "run_id": "night-1"},
                             "preview": {"share": "100.0%", "run_id": "night-2"}}  # fmt: skip
    assert a["repaired_share"] == {"repaired": 87.5, "lowest": 75.0, "nodes": 3, "run_id": "night-1"}
    assert a["last_preview"] == {"run_id": "night-2", "out_of_sync_ranges": 3,
                                 "found_at": (night2 - timedelta(minutes=5)).isoformat()}  # fmt: skip
    assert b["last_preview"] == {"run_id": "night-2", "out_of_sync_ranges": 0, "found_at": None}  # in sync now
    assert b["repaired_share"] is None and b["coverage"]["incremental"] is None
    assert c["coverage"]["full"] == {"share": "10.0%", "run_id": "night-1"} and c["coverage"]["preview"] is None
    assert c["last_preview"]["run_id"] == "night-3" and c["last_preview"]["out_of_sync_ranges"] == 4
    assert d["coverage"]["full"] == {"share": "5.0%", "run_id": "before-types"}  # a report from before types
    assert d["last_preview"] is None
    assert by_type_view([], ["ks.a"], []) == {"types": [], "tables": [
        {"table": "ks.a", "coverage": {}, "repaired_share": None, "last_preview": None}]}  # fmt: skip


def test_the_repaired_share_reads_as_repaired_and_unrepaired() -> None:
    from ringward_airflow.ui.formats import format_repaired_share

    assert format_repaired_share(87.5, 75.0) == "87.5% repaired, 12.5% unrepaired (lowest node 75.0%)"
    assert format_repaired_share(100.0, 100.0) == "100.0% repaired, 0.0% unrepaired"
    assert format_repaired_share(0, None) == "0.0% repaired, 100.0% unrepaired"
    assert format_repaired_share(None) == "-" and format_repaired_share("87") == "-"


def test_repair_page_shows_coverage_per_type_the_incremental_split_and_the_last_preview(
    client: tuple[Any, FakeSource, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    page = test_client.get("/ringward/repair", headers=admin).text
    assert "Per repair type" not in page  # the fake world's report is from before types: full only, as Tables
    assert test_client.get("/ringward/api/repair", headers=admin).json()["by_type"]["types"] == ["full"]
    night = datetime(2026, 11, 25, 3, tzinfo=UTC)
    world.store.runs.insert(0, RepairRunRow("night-9", "DONE", {"tables": {"app.events": "100.0%"}, "types": {
        "full": {"repaired": {"app.events": "100.0%"}},
        "incremental": {"repaired": {"app.events": "90.0%"},
                        "repaired_share": {"app.events": {"repaired": 87.5, "lowest": 75.0, "nodes": 3}}},
        "preview": {"previewed": {"app.events": "100.0%"}},
    }}, {}, night))  # fmt: skip
    found = _finding("app.events", "night-9", 2, night - timedelta(minutes=30))
    monkeypatch.setattr(world.store, "preview_findings", lambda: [found], raising=False)
    data = test_client.get("/ringward/api/repair", headers=admin).json()["by_type"]
    assert data["types"] == ["full", "incremental", "preview"]
    assert data["tables"][0]["last_preview"]["out_of_sync_ranges"] == 2
    page = test_client.get("/ringward/repair", headers=admin).text
    table = page[page.index("<table id='by-type'>") : page.index("</table>", page.index("<table id='by-type'>"))]
    for header in ("full: repaired within gc_grace", "incremental: repaired within gc_grace",
                   "preview: compared within gc_grace", "incremental: repaired / unrepaired data",
                   "last preview: ranges out of sync"):  # fmt: skip
        assert f"<th>{header}</th>" in table
    assert "<span title='reported by night-9'>90.0%</span>" in table
    assert "87.5% repaired, 12.5% unrepaired (lowest node 75.0%)" in table
    assert "<span class='bad'>2 ranges out of sync</span>, found 2026-11-25 02:30:00 UTC" in table
    assert "paxos" not in table  # never reported: no column


def test_repair_page_per_type_escapes_what_it_reads_and_says_what_is_missing(
    client: tuple[Any, FakeSource, dict[str, str]],
) -> None:
    test_client, world, tokens = client
    admin = bearer(tokens["admin"])
    evil = "<script>alert(1)</script>"
    world.store.runs.insert(0, RepairRunRow(evil, "DONE", {"types": {
        "full": {"repaired": {"app.events": evil}}, "incremental": {"repaired": {}}, "preview": {"previewed": {}},
    }}, {}, datetime(2026, 11, 25, 3, tzinfo=UTC)))  # fmt: skip
    page = test_client.get("/ringward/repair", headers=admin).text
    assert evil not in page and "&lt;script&gt;" in page
    table = page[page.index("<table id='by-type'>") :]
    assert "not read yet" in table and "never previewed" in table and "not reported yet" in table
