"""Operator logic that needs no cluster: configuration per run, run summary, metrics, error lines."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException
from ringward.errors import ConfigurationError
from ringward.repair import (
    RunState,
    Segment,
    SegmentRecord,
    SegmentState,
    TypePlan,
    last_host_ids,
    longest_unrepaired_seconds,
    night_types,
    repair_error_line,
    run_summary,
)
from ringward.ring import TokenRange
from ringward_airflow.repair_operators import (
    PlanRepairOperator,
    _config_or_fail,
    effective_config,
    one_type_run,
)


def test_params_override_the_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "repair.yaml"
    path.write_text("parallel_repair_count: 5\nwindow: {max_duration: 4h}\n")
    params = {
        "config_overrides": {"splitter": {"subranges_per_range": 2}, "window.max_duration": "2h"},
        "keyspaces": ["shop*"],
        "max_duration": "30m",
        "enabled": None,
    }
    config = effective_config(str(path), params)
    assert config.parallel_repair_count == 5
    assert config.splitter.subranges_per_range == 2  # type: ignore[union-attr]
    assert config.keyspaces.include == ("shop*",)
    assert config.window is not None and config.window.max_duration == timedelta(minutes=30)
    assert config.enabled is True


def test_the_environment_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "repair.yaml"
    path.write_text("enabled: false\n")
    monkeypatch.setenv("RINGWARD_REPAIR_CONFIG", str(path))
    assert effective_config(None, {}).enabled is False


def test_a_bad_override_names_the_field() -> None:
    with pytest.raises(ConfigurationError, match="`intensity`"):
        effective_config(None, {"config_overrides": {"intensity": 2}})
    with pytest.raises(ConfigurationError, match="config_overrides"):
        effective_config(None, {"config_overrides": [1]})


def test_the_plan_task_fails_without_retry_on_a_bad_configuration() -> None:
    operator = PlanRepairOperator(task_id="plan")
    with pytest.raises(AirflowFailException, match="`parallel_repair_count`"):
        operator.execute({"params": {"parallel_repair_count": -1}, "run_id": "r"})


def planned(due: int = 0, not_due: int = 0, exhausted: int = 0) -> TypePlan:
    return TypePlan("r#full", 1, due, not_due, exhausted, 0, due + not_due + exhausted)


def record(state: SegmentState) -> SegmentRecord:
    return SegmentRecord("id", state, run_id="r")


def test_run_summary_counts_history_and_segments_no_task_reached() -> None:
    summary = run_summary(planned(due=4, not_due=2), [record(SegmentState.DONE), record(SegmentState.DONE)])
    assert summary.counts[SegmentState.POSTPONED] == 2  # due but never reached (a task died first)
    assert summary.counts[SegmentState.SKIPPED] == 2
    assert summary.state is RunState.PARTIAL
    done = run_summary(planned(due=1, not_due=3), [record(SegmentState.DONE)])
    assert done.state is RunState.DONE
    assert done.metrics()["SucceededTokenRangesCount"] == 1
    assert done.metrics()["SkippedTokenRangesCount"] == 3


def test_a_session_left_running_counts_as_failed() -> None:
    summary = run_summary(planned(due=1), [record(SegmentState.RUNNING)])
    assert summary.counts[SegmentState.FAILED] == 1


def test_longest_unrepaired_is_the_oldest_full_repair_or_never() -> None:
    now = datetime(2026, 1, 2, tzinfo=UTC)
    one = Segment("ks", (), TokenRange(0, 10), ("a", "b"))
    two = Segment("ks", (), TokenRange(10, 20), ("a", "b"))
    records = {
        one.segment_id: SegmentRecord(one.segment_id, last_full_success=now - timedelta(hours=5)),
        two.segment_id: SegmentRecord(two.segment_id, last_full_success=now - timedelta(hours=1)),
    }
    assert longest_unrepaired_seconds([one, two], records, now) == 5 * 3600
    assert longest_unrepaired_seconds([one, two], {}, now) == -1


def test_the_repair_error_is_the_reason_line_not_the_stack_trace() -> None:
    output = (
        "[2026-11-22 00:24:32,953] Starting repair command #7 (16f6...)\n"
        "[2026-11-22 00:24:32,979] Repair command #7 failed with error Requested range intersects\n"
        "error: Repair job has failed\n-- StackTrace --\njava.lang.RuntimeException: x\n\tat a.b(C.java:1)\n"
    )
    assert (
        repair_error_line(output)
        == "[2026-11-22 00:24:32,979] Repair command #7 failed with error Requested range intersects"
    )
    assert repair_error_line("") == "nodetool repair failed"


def test_the_failure_notifier_logs_the_failed_task(capsys: pytest.CaptureFixture[str]) -> None:
    from ringward_airflow.repair_operators import RepairFailureNotifier

    RepairFailureNotifier().notify(
        {"ti": SimpleNamespace(task_id="report"), "run_id": "run-7", "exception": RuntimeError("2 failed")}
    )
    assert "task report of run run-7 failed: 2 failed" in capsys.readouterr().out  # Airflow logs to stdout


def test_on_kill_only_flags_and_the_batch_loop_aborts_the_running_sessions() -> None:
    from ringward.repair import Sessions
    from ringward_airflow.repair_operators import RepairRunOperator

    operator = RepairRunOperator(task_id="repair")
    operator.on_kill()  # before execute: nothing to stop
    assert operator._killed is None
    calls: list[tuple[str, str | None]] = []
    client = SimpleNamespace(
        terminate_all=lambda: calls.append(("terminate_all", None)),
        abort_repairs=lambda address: calls.append(("abort_repairs", address)),
    )
    killed = threading.Event()
    operator._killed = killed  # as execute sets it
    sessions = Sessions(client, store=None, run_id="r", log=SimpleNamespace(warning=lambda *a: None), now=None)  # type: ignore[arg-type]
    sessions.coordinators = frozenset({"10.0.0.1"})
    assert sessions.stop_if_killed(killed.is_set) is False
    operator.on_kill()
    assert killed.is_set() and calls == []  # nothing but the flag inside the signal handler
    assert sessions.stop_if_killed(killed.is_set) is True
    assert sessions.stop_if_killed(killed.is_set) is True  # aborts once
    assert calls == [("terminate_all", None), ("abort_repairs", "10.0.0.1")]


def test_the_form_words_map_to_config_values(tmp_path: Path) -> None:
    path = tmp_path / "repair.yaml"
    path.write_text("enabled: true\nrepair_type: preview\n")
    kept = effective_config(str(path), {"enabled": "config", "repair_type": "config", "scope": "due"})
    assert kept.enabled is True and kept.repair_type == "preview" and kept.min_repair_interval == timedelta(hours=24)
    assert effective_config(str(path), {"enabled": "off"}).enabled is False
    assert effective_config(str(path), {"repair_type": "full"}).repair_type == "full"
    assert effective_config(str(path), {"scope": "all"}).min_repair_interval == timedelta(0)  # everything is due
    with pytest.raises(ConfigurationError, match="`enabled`"):
        effective_config(str(path), {"enabled": "maybe"})
    with pytest.raises(ConfigurationError, match="`scope`"):
        effective_config(str(path), {"scope": "some"})


def test_each_type_has_its_own_cadence_and_scope_all_overrides_it(tmp_path: Path) -> None:
    path = tmp_path / "repair.yaml"
    path.write_text("repair_types:\n  full: {enabled: false}\n  paxos: {enabled: true, min_repair_interval: 1h}\n")
    paxos = one_type_run(effective_config(str(path), {}))
    assert paxos.repair_type == "paxos" and paxos.min_repair_interval == timedelta(hours=1)
    assert one_type_run(effective_config(str(path), {"scope": "all"})).min_repair_interval == timedelta(0)
    path.write_text("repair_types:\n  incremental: {enabled: true}\n  preview: {enabled: true}\n")
    with pytest.raises(ConfigurationError, match="full, incremental, preview"):
        one_type_run(effective_config(str(path), {}))  # one type's config only: the DAG runs them one by one
    both = _config_or_fail(str(path), {})
    assert night_types(both) == ("full", "incremental", "preview") and both.enabled
    only = _config_or_fail(str(path), {"repair_type": "incremental"})  # the run param: only that type runs
    assert night_types(only) == ("incremental",) and one_type_run(only).session_type == "incremental"
    path.write_text("repair_types:\n  full: {enabled: false}\n")
    assert one_type_run(effective_config(str(path), {})).enabled is False  # no type on: nothing runs
    assert _config_or_fail(str(path), {}).enabled is False


def test_a_session_runs_its_types_flags_and_keeps_a_previews_finding() -> None:
    from ringward.repair import RepairCommand, Sessions, parse_config
    from ringward_cassandra.memory_ops_store import MemoryOpsStore

    seen: list[dict[str, object]] = []

    def repair(address: str, keyspace: str, ranges: object, **options: object) -> SimpleNamespace:
        seen.append(options)
        return SimpleNamespace(succeeded=True, seconds=1.0, output="", out_of_sync={"ks.t": 2})

    store = MemoryOpsStore()
    log = SimpleNamespace(warning=lambda *a: None)
    now = datetime(2026, 11, 28, 2, tzinfo=UTC)
    sessions = Sessions(SimpleNamespace(repair=repair), store, "night-1", log, lambda: now)  # type: ignore[arg-type]
    command = RepairCommand((Segment("ks", ("t",), TokenRange(0, 10), ("n1", "n2")),))
    config = one_type_run(parse_config({"repair_type": "preview", "repair_types": {"preview": {"job_threads": 2}}}))
    assert sessions.session(command, config).succeeded
    assert seen[0]["flags"] == ["-full", "--preview", "-j", "2"]
    (finding,) = store.preview_findings("ks")
    assert (finding.table, finding.out_of_sync_ranges, finding.run_id) == ("t", 2, "night-1")
    assert (finding.found_at, finding.coordinator, finding.ranges) == (now, "n1", (TokenRange(0, 10),))


def test_progress_is_stored_and_sent_as_live_gauges() -> None:
    from ringward.repair import record_progress
    from ringward_cassandra.memory_ops_store import MemoryOpsStore

    gauges: dict[str, float] = {}
    store = MemoryOpsStore()
    progress = {"done": 4, "failed": 0, "postponed": 1, "total": 9, "sessions": 2, "final": False}
    record_progress(store, "night-1", progress, 3 + 1, gauges.__setitem__)
    assert store.run_progress("night-1") == progress
    assert gauges["RepairsInProgress"] == 2 and gauges["SkippedTokenRangesCount"] == 4


def test_the_last_runs_host_ids_tell_who_joined() -> None:
    from ringward_cassandra.memory_ops_store import MemoryOpsStore

    store = MemoryOpsStore()
    assert last_host_ids(store) == []  # no run recorded: nobody counts as joined
    store.record_repair_run("night-1", "DONE", {"host_ids": {"10.0.0.1": "h1", "10.0.0.2": "h2"}}, {})
    assert sorted(last_host_ids(store)) == ["h1", "h2"]
    broken = SimpleNamespace(latest_repair_run=lambda: (_ for _ in ()).throw(RuntimeError("read timeout")))
    assert last_host_ids(broken) == []


def test_a_preview_with_repair_out_of_sync_repairs_what_it_found_in_full() -> None:
    from ringward.repair import RepairCommand, Sessions, parse_config
    from ringward_cassandra.memory_ops_store import MemoryOpsStore

    seen: list[object] = []

    def repair(address: str, keyspace: str, ranges: object, **options: object) -> SimpleNamespace:
        seen.append(options["flags"])
        found = {"ks.t": 1} if len(seen) == 1 else {}
        return SimpleNamespace(succeeded=True, seconds=2.0, output="", out_of_sync=found)

    logged: list[str] = []
    log = SimpleNamespace(warning=lambda msg, *args: logged.append(msg % args))
    store = MemoryOpsStore()
    sessions = Sessions(SimpleNamespace(repair=repair), store, "r", log, lambda: datetime.now(UTC))  # type: ignore[arg-type]
    command = RepairCommand((Segment("ks", ("t",), TokenRange(0, 10), ("n1", "n2")),))
    config = one_type_run(parse_config({"repair_type": "preview", "repair_types": {
        "preview": {"repair_out_of_sync": True}, "full": {"parallelism": "sequential"}}}))  # fmt: skip
    result = sessions.session(command, config)
    assert seen == [["-full", "--preview"], ["-full", "-seq"]] and result.succeeded and result.seconds == 4.0
    assert logged == [
        "Preview: 1 range(s) of ks.t out of sync among n1, n2",
        f"Repairing {command.describe()} (full): the preview found it out of sync.",
    ]
    seen.clear()
    seen.append("in sync")  # a second preview of the same command finds nothing: no repair
    plain = one_type_run(parse_config({"repair_type": "preview"}))
    sessions.session(command, plain)
    assert len(seen) == 2


def test_the_kill_switch_parses_the_configuration_once_until_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor asks between sessions, millions of times a night at fleet size: a stat each time, the YAML
    parsed again only when the file changed, the shipped default (no file configured) included."""
    import ringward_airflow.repair_operators as operators
    from ringward_airflow.repair_operators import _ConfigSwitch

    parsed: list[str | None] = []
    real = operators.load_config
    monkeypatch.setattr(operators, "load_config", lambda path=None: parsed.append(path) or real(path))
    monkeypatch.delenv("RINGWARD_REPAIR_CONFIG", raising=False)
    config = operators.effective_config(None, {})
    default = _ConfigSwitch(None, {}, config, log=None)
    parsed.clear()
    assert all(default() for _ in range(100))
    assert parsed == [None]  # the shipped default, parsed once

    file = tmp_path / "repair.yaml"
    file.write_text("enabled: true\n")
    configured = _ConfigSwitch(str(file), {}, config, log=None)
    parsed.clear()
    assert all(configured() for _ in range(100))
    assert parsed == [str(file)]
    file.write_text("enabled: false\n")
    stat = file.stat()
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a new mtime even on a coarse clock
    assert configured() is False  # the operator switched it off
    assert parsed == [str(file), str(file)]


def test_plan_chunks_hold_each_segment_as_encode_segment_json_and_decode_back() -> None:
    import json

    from ringward.repair import Segment, plan_chunks
    from ringward.repair._payload import decode_segment, encode_segment
    from ringward.ring import TokenRange
    from ringward_cassandra.ops_store import PLAN_CHUNK_ROWS

    replicas = ("10.0.0.1", "10.0.0.2")
    segments = [
        Segment("shop", ("orders", "carts"), TokenRange(-(2**63) + 1, -5), replicas),
        Segment('Quoted"Ks', (), TokenRange(2**63 - 7, -(2**63) + 3), replicas),  # a name JSON must escape
        Segment("shop", ("orders", "carts"), TokenRange(7, 2**63 - 1), ("10.0.0.3",)),
        # Replica names JSON must escape (written by json.dumps), and none at all.
        Segment("shop", (), TokenRange(8, 9), ('node"1', "node\\2", "nœud-3", "tab\tbed")),
        Segment("shop", (), TokenRange(9, 10), ()),
    ] * 3
    # One range object in units of several keyspaces (keyspaces sharing a replication share the ring's ranges),
    # with the same replicas and with others: each row its own unit's and replicas'.
    shared = TokenRange(100, 200)
    segments += [Segment("shop", ("orders",), shared, replicas), Segment("logs", (), shared, ("10.0.0.9", "10.0.0.8")),
                 Segment("auth", (), shared, replicas), Segment("shop", ("orders",), shared, replicas)]  # fmt: skip
    chunks = plan_chunks(segments, PLAN_CHUNK_ROWS)
    rows = [row for chunk in chunks for row in chunk]
    assert rows == [json.dumps(encode_segment(s), separators=(",", ":")) for s in segments]
    assert [decode_segment(json.loads(row)) for row in rows] == segments
