"""`start_repair`'s deadline holds whether or not nodetool prints anything; on_kill reaches its nodetool.

The "nodetool" here is a tiny Python script (no Cassandra): it writes its pid, prints what it is told, then
sleeps or exits.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest
from ringward.errors import RepairError, RingwardError
from ringward.ring import TokenRange
from ringward_cassandra.nodetool import NodetoolClient

PARENT_ID = "0b5e8c3e-8f1a-11f0-9a43-5f1d2a3b4c5d"
STARTED = f"[2026-11-25 11:00:00,000] Starting repair command #7 ({PARENT_ID}), repairing keyspace ks"
RANGE = TokenRange(0, 100)


def _fake_nodetool(folder: Path, *, prints: str = "", sleeps: float = 0.0, exit_code: int = 0) -> Path:
    script = folder / "nodetool"
    script.write_text(
        f"#!{sys.executable}\n"
        "import os, sys, time\n"
        f"open({str(folder / 'pid')!r}, 'w').write(str(os.getpid()))\n"
        f"sys.stdout.write({prints!r}); sys.stdout.flush()\n"
        f"time.sleep({sleeps!r})\n"
        f"sys.exit({exit_code})\n"
    )
    script.chmod(0o755)
    return script


def _client(script: Path) -> NodetoolClient:
    return NodetoolClient(nodetool_path=str(script), jmx_ports={"127.0.0.2": 7299})


def _pid_of(folder: Path) -> int:
    deadline = time.monotonic() + 10
    while not (folder / "pid").exists() or not (folder / "pid").read_text():
        assert time.monotonic() < deadline, "the fake nodetool never started"
        time.sleep(0.02)
    return int((folder / "pid").read_text())


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_silent_nodetool_is_killed_at_the_deadline(tmp_path: Path) -> None:
    client = _client(_fake_nodetool(tmp_path, sleeps=60))
    started = time.monotonic()
    with pytest.raises(RepairError) as refused:
        client.start_repair("127.0.0.2", "ks", RANGE, timeout=0.5)
    assert time.monotonic() - started < 10, "the deadline must not wait for nodetool's output"
    assert isinstance(refused.value, RingwardError)
    assert "printed no 'Starting repair command' line within 0.5s" in str(refused.value)
    assert "(none)" in str(refused.value)
    assert "repair_admin list" in refused.value.fix  # the session may have started: check before retrying
    assert _gone(_pid_of(tmp_path)), "nodetool must be killed and reaped"
    assert not client._running


def test_a_nodetool_that_printed_something_else_then_went_quiet_is_killed_too(tmp_path: Path) -> None:
    client = _client(_fake_nodetool(tmp_path, prints="Picked up JAVA_TOOL_OPTIONS: -Xmx128m\n", sleeps=60))
    started = time.monotonic()
    with pytest.raises(RepairError, match="JAVA_TOOL_OPTIONS"):
        client.start_repair("127.0.0.2", "ks", RANGE, timeout=0.5)
    assert time.monotonic() - started < 10
    assert _gone(_pid_of(tmp_path))


def test_the_parent_id_is_returned_as_soon_as_the_start_line_comes(tmp_path: Path) -> None:
    client = _client(_fake_nodetool(tmp_path, prints=f"{STARTED}\n", sleeps=60))
    started = time.monotonic()
    assert client.start_repair("127.0.0.2", "ks", RANGE, timeout=30) == PARENT_ID
    assert time.monotonic() - started < 10, "the client must not wait for the repair to end"
    assert _gone(_pid_of(tmp_path)) and not client._running


def test_a_start_line_without_a_final_newline_is_read_at_the_end(tmp_path: Path) -> None:
    client = _client(_fake_nodetool(tmp_path, prints=STARTED))
    assert client.start_repair("127.0.0.2", "ks", RANGE, timeout=30) == PARENT_ID


def test_a_repair_that_completed_before_its_start_line_returns_none(tmp_path: Path) -> None:
    client = _client(_fake_nodetool(tmp_path, prints="Repair completed successfully\n"))
    assert client.start_repair("127.0.0.2", "ks", RANGE, timeout=30) is None


def test_a_failed_nodetool_is_refused_with_its_output(tmp_path: Path) -> None:
    client = _client(_fake_nodetool(tmp_path, prints="nodetool: Failed to connect to '127.0.0.2:7299'\n", exit_code=1))
    with pytest.raises(RepairError, match=r"did not start on 127\.0\.0\.2: nodetool: Failed to connect") as refused:
        client.start_repair("127.0.0.2", "ks", RANGE, timeout=30)
    assert "reachable over JMX" in refused.value.fix


def test_on_kill_stops_the_nodetool_start_repair_is_waiting_on(tmp_path: Path) -> None:
    client = _client(_fake_nodetool(tmp_path, sleeps=60))
    outcome: list[BaseException | str | None] = []

    def start() -> None:
        try:
            outcome.append(client.start_repair("127.0.0.2", "ks", RANGE, timeout=60))
        except RepairError as error:
            outcome.append(error)

    thread = threading.Thread(target=start)
    thread.start()
    pid = _pid_of(tmp_path)
    assert [process.pid for process in client._running] == [pid]
    client.terminate_all()  # what the operators' on_kill calls
    thread.join(timeout=10)
    assert not thread.is_alive(), "start_repair must return once its nodetool is stopped"
    assert len(outcome) == 1 and isinstance(outcome[0], RepairError)
    assert _gone(pid) and not client._running
