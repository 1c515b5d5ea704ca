"""`ringward repair status` without a cluster: the stored reports by default (nothing planned), the live
computation with --live, --svg or when no report exists; which table to draw."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ringward.errors import ConfigurationError
from ringward.repair import Segment, SegmentRecord, SegmentState, repair_status, run_under_way
from ringward.ring import TokenRange
from ringward_cassandra.cluster_repairs import ClusterRepairPlan
from ringward_cassandra.memory_ops_store import MemoryOpsStore
from ringward_cassandra.ops_store import RepairHistoryRow, RepairRunRow
from ringward_cli.commands.repair import _chosen
from ringward_cli.main import build_parser


def test_the_svg_shows_the_named_or_the_least_covered_table() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    good = repair_status("ks", "good", [], {}, 864000, now)
    statuses = [good, repair_status("ks", "bad", [], {}, 864000, now)]
    assert _chosen(statuses, "ks.good") is good
    with pytest.raises(ConfigurationError, match=r"ks\.nope"):
        _chosen(statuses, "ks.nope")


def test_the_status_command_parses() -> None:
    args = build_parser().parse_args(["repair", "status", "--contact", "10.0.0.1", "--svg", "ring.svg"])
    assert (args.contact, args.svg, args.table) == ("10.0.0.1", "ring.svg", None)


# -- the status command against an in-memory cluster: a driver session with schema metadata, the ops store ---


class _Session:
    """What the status command reads of a driver session: the schema metadata (no query)."""

    def __init__(self, schema: dict[str, list[str]]) -> None:
        keyspaces = {name: SimpleNamespace(tables=dict.fromkeys(tables)) for name, tables in schema.items()}
        self.cluster = SimpleNamespace(metadata=SimpleNamespace(keyspaces=keyspaces))

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"the status command ran a query the test did not expect: {args}")


class _Store(MemoryOpsStore):
    """The ops store in memory; `scanned` counts full reads of the repair history."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        super().__init__(clock=clock)
        self.scanned = 0

    def repair_history(self, keyspace: str | None = None, repair_type: str = "full") -> list[RepairHistoryRow]:
        self.scanned += 1
        return super().repair_history(keyspace, repair_type)


NOW = datetime.now(UTC).replace(microsecond=0)
SCHEMA = {"app": ["events", "users"], "shop": ["orders"], "system": ["local"]}
SEGMENT = Segment("app", (), TokenRange(-(2**63), 0), ("10.0.0.1", "10.0.0.2"))


@dataclass
class _World:
    store: _Store
    session: _Session
    planned: list[Any] = field(default_factory=list)  # the configurations plan_cluster was called with


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> _World:
    clock = {"now": NOW - timedelta(days=1)}
    store = _Store(lambda: clock["now"])
    world = _World(store, _Session(SCHEMA))

    @contextmanager
    def connect(hosts: list[str], port: int, **login: Any) -> Iterator[_Session]:
        assert (hosts, port) == (["10.0.0.1"], 9042)
        yield world.session

    def ring_from_cluster(session: Any) -> Any:
        return SimpleNamespace(nodes=())

    def plan_cluster(session: Any, ring: Any, config: Any, leased: Any = None) -> ClusterRepairPlan:
        world.planned.append(config)
        return ClusterRepairPlan((SEGMENT,), (), {"app": {"events": 864000, "users": 864000}})

    monkeypatch.setattr("ringward_cassandra.cql.connect", connect)
    monkeypatch.setattr("ringward_cassandra.ops_store.OpsStore", lambda session: store)
    monkeypatch.setattr("ringward_cassandra.ring_reader.ring_from_cluster", ring_from_cluster)
    monkeypatch.setattr("ringward_cassandra.cluster_repairs.plan_cluster", plan_cluster)
    monkeypatch.delenv("RINGWARD_REPAIR_CONFIG", raising=False)
    for name in ("RINGWARD_CQL_USERNAME", "RINGWARD_CQL_PASSWORD", "RINGWARD_CQL_CA_CERTS"):
        monkeypatch.delenv(name, raising=False)
    # Two nights reported: the older one covered both keyspaces, the latest only `app`.
    store.ensure_schema()
    store.record_repair_run("night-1", "DONE", {"tables": {"app.events": "90.0%", "shop.orders": "75.5%"}}, {})
    clock["now"] = NOW - timedelta(hours=2)
    latest = {"tables": {"app.events": "100.0%"}, "skipped_keyspaces": {"shop": "leased by a migration"}}
    store.record_repair_run("night-2", "PARTIAL", latest, {})
    clock["now"] = NOW
    # The repair the live path reads: SEGMENT (every table of `app`) repaired an hour ago.
    record = SegmentRecord(SEGMENT.segment_id, SegmentState.DONE, NOW - timedelta(hours=1), NOW - timedelta(hours=1))
    store.record_repair("app", (), SEGMENT.range, record)
    return world


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    args = build_parser().parse_args(["repair", "status", "--contact", "10.0.0.1", *argv])
    assert args.handler(args) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def _line(out: str, table: str) -> list[str]:
    return next(line for line in out.splitlines() if line.startswith(f"{table} ")).split()


def test_status_shows_the_stored_reports_without_planning_or_reading_the_history(
    world: _World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_ring(session: Any) -> Any:
        raise AssertionError("the default status must not read the ring")

    monkeypatch.setattr("ringward_cassandra.ring_reader.ring_from_cluster", no_ring)
    out, err = _run([], capsys)
    assert world.planned == [] and world.store.scanned == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["TABLE", "REPAIRED", "REPORTED", "RUN"]
    # Each table's figure from the latest report that lists it, with that run and when it reported.
    latest = (NOW - timedelta(hours=2)).strftime("%Y-%m-%d %H:%M")
    assert _line(out, "app.events") == ["app.events", "100.0%", *latest.split(), "night-2"]
    older = (NOW - timedelta(days=1)).strftime("%Y-%m-%d %H:%M")
    assert _line(out, "shop.orders") == ["shop.orders", "75.5%", *older.split(), "night-1"]
    assert f"last run: night-2 PARTIAL (reported {latest} UTC)" in lines
    assert "skipped by the last run: shop: leased by a migration" in lines
    # A table in scope no report covers is named, with the fix; node-local keyspaces are not in scope.
    missing = next(line for line in lines if line.startswith("not reported yet"))
    assert "app.users" in missing and "nightly DAG" in missing and "--live" in missing
    assert "system.local" not in out and "run under way" not in out


def test_status_shows_the_progress_of_the_run_under_way(world: _World, capsys: pytest.CaptureFixture[str]) -> None:
    world.store.record_run_progress("night-3", {
        "done": 2, "failed": 1, "postponed": 0, "total": 6, "running": {"10.0.0.2": 1}, "eta_seconds": 600.0,
        "updated_at": NOW.isoformat(), "final": False,
    })  # fmt: skip
    out, _ = _run([], capsys)
    line = next(line for line in out.splitlines() if line.startswith("run under way"))
    assert line.startswith("run under way: night-3: 3/6 segments (50.0%), 2 done, 1 failed, 0 postponed, 1 running")
    assert "ETA -" not in line and NOW.strftime("%Y-%m-%d %H:%M UTC") in line
    assert world.planned == [] and world.store.scanned == 0
    # Once that run has reported, it is no longer under way.
    world.store.clock = lambda: NOW + timedelta(minutes=5)
    world.store.record_repair_run("night-3", "DONE", {"tables": {"app.events": "100.0%"}}, {})
    out, _ = _run([], capsys)
    assert "run under way" not in out and _line(out, "app.events")[-1] == "night-3"


def test_status_without_any_report_falls_back_to_the_live_computation_and_says_so(
    world: _World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = _Store(lambda: NOW)
    empty.ensure_schema()
    monkeypatch.setattr("ringward_cassandra.ops_store.OpsStore", lambda session: empty)
    out, err = _run([], capsys)
    assert len(world.planned) == 1 and empty.scanned == 1
    assert err.count("\n") == 1 and "no nightly run report" in err and "live" in err
    assert out.splitlines()[0].split() == ["TABLE", "REPAIRED", "OLDEST", "DEADLINE", "FAILING", "HEALTH"]
    assert _line(out, "app.events")[1] == "0.0%"  # this store's history is empty

    absent = _Store(lambda: NOW)  # ringward_ops never created: exists() is False
    monkeypatch.setattr("ringward_cassandra.ops_store.OpsStore", lambda session: absent)
    out, err = _run([], capsys)
    assert len(world.planned) == 2 and absent.scanned == 0
    assert err.count("\n") == 1 and "does not exist" in err
    assert _line(out, "app.users")[1] == "0.0%"


def test_status_live_plans_and_reads_the_whole_history(
    world: _World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, err = _run(["--live"], capsys)
    assert len(world.planned) == 1 and world.store.scanned == 1 and err == ""
    assert out.splitlines()[0].split() == ["TABLE", "REPAIRED", "OLDEST", "DEADLINE", "FAILING", "HEALTH"]
    assert _line(out, "app.events")[1] == "100.0%"
    assert _line(out, "app.users")[-1] == "OK" and "last run: night-2 PARTIAL" in out
    # --svg needs each range's record: it computes live too.
    picture = tmp_path / "ring.svg"
    out, _ = _run(["--svg", str(picture)], capsys)
    assert len(world.planned) == 2 and world.store.scanned == 2
    assert picture.read_text(encoding="utf-8").startswith("<svg") and f"wrote {picture}" in out


def test_the_status_help_says_what_the_default_shows_and_what_svg_implies(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["repair", "status", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--live" in text and "implies --live" in text and "run report" in text


def test_the_run_under_way_is_the_latest_progress_without_a_report() -> None:
    def run(run_id: str, hours_ago: float) -> RepairRunRow:
        return RepairRunRow(run_id, "DONE", {}, {}, NOW - timedelta(hours=hours_ago))

    runs = [run("b", 10), run("a", 34)]
    progress = {"a": NOW - timedelta(hours=35), "b": NOW - timedelta(hours=11), "c": NOW - timedelta(minutes=1)}
    assert run_under_way(progress, runs) == "c"
    # A run that stopped before its report, older than the latest report: not under way.
    assert run_under_way({**progress, "c": NOW - timedelta(hours=12)}, runs) is None
    assert run_under_way({}, runs) is None and run_under_way({"x": NOW}, []) == "x"
