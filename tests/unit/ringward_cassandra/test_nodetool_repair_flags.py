"""The nodetool repair commands of each repair type (issue 24), and what a preview's output says."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

import pytest
from ringward.repair import RepairTypeSettings, repair_flags
from ringward.ring import TokenRange
from ringward_cassandra.nodetool import NodetoolClient, parse_preview_out_of_sync, repair_arguments

# The shape of Cassandra 5.0's preview message (RepairRunnable + SyncStatSummary.toString).
PREVIEW_OUT_OF_SYNC = """\
[2026-11-25 02:00:00,000] Starting repair command #1 (0b5c8a30-c9a2-11f0-8000-000000000001), repairing keyspace ks
[2026-11-25 02:00:01,000] Preview complete
Total estimated streaming: 4 ranges, 3 sstables, 1.2 KiB bytes
ks.events - 3 ranges, 2 sstables, 1 KiB bytes
    /127.0.0.1:7000 -> /127.0.0.2:7000: 3 ranges, 2 sstables, 1 KiB bytes
ks.users - 1 ranges, 1 sstables, 210 bytes bytes
    /127.0.0.2:7000 -> /127.0.0.1:7000: 1 ranges, 1 sstables, 210 bytes bytes
ks.empty - 0 ranges, 0 sstables, 0 bytes bytes

[2026-11-25 02:00:01,100] Repair command #1 finished in 1 second
"""


def test_arguments_put_type_flags_first_then_ranges_hosts_keyspace_tables() -> None:
    args = repair_arguments("ks", [TokenRange(0, 10)], tables=["t"], flags=["--paxos-only"], hosts=["a", "b"])
    assert args == ["repair", "--paxos-only", "-st", "0", "-et", "10", "-hosts", "a", "-hosts", "b", "ks", "t"]


@pytest.mark.parametrize(
    ("kind", "settings", "expected"),
    [
        ("full", RepairTypeSettings(), ["repair", "-full"]),
        ("incremental", RepairTypeSettings(), ["repair"]),
        ("preview", RepairTypeSettings(), ["repair", "-full", "--preview"]),
        ("paxos", RepairTypeSettings(), ["repair", "--paxos-only"]),
        (
            "full",
            RepairTypeSettings(parallelism="dc_parallel", job_threads=2),
            ["repair", "-full", "-dcpar", "-j", "2"],
        ),
        ("incremental", RepairTypeSettings(parallelism="sequential", local_dc_only=True), ["repair", "-seq", "-local"]),
    ],
)
def test_command_per_type(kind: str, settings: RepairTypeSettings, expected: list[str]) -> None:
    args = repair_arguments("ks", [TokenRange(-5, 5)], flags=repair_flags(kind, settings))  # type: ignore[arg-type]
    assert args == [*expected, "-st", "-5", "-et", "5", "ks"]


def test_preview_summary_gives_ranges_out_of_sync_per_table() -> None:
    assert parse_preview_out_of_sync(PREVIEW_OUT_OF_SYNC) == {"ks.events": 3, "ks.users": 1}
    assert parse_preview_out_of_sync("[x] Previewed data was in sync\n") == {}


class _Recording(NodetoolClient):
    def __init__(self, output: str) -> None:
        super().__init__()
        self.output = output
        self.seen: list[list[str]] = []

    def run(self, address: str, args: Sequence[str], timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
        self.seen.append(list(args))
        return subprocess.CompletedProcess(args, 0, self.output, "")


def test_a_preview_keeps_its_finding() -> None:
    client = _Recording(PREVIEW_OUT_OF_SYNC)
    outcome = client.repair("127.0.0.1", "ks", TokenRange(0, 10), flags=["-full", "--preview"])
    assert client.seen == [["repair", "-full", "--preview", "-st", "0", "-et", "10", "ks"]]
    assert outcome.succeeded and outcome.in_sync is False
    assert outcome.out_of_sync == {"ks.events": 3, "ks.users": 1}


def test_the_default_and_preview_keyword_keep_their_commands() -> None:
    client = _Recording("[x] Previewed data was in sync\n")
    assert client.repair("n", "ks", TokenRange(0, 10), preview=True).in_sync is True
    client.repair("n", "ks", TokenRange(0, 10))
    assert [args[:3] for args in client.seen] == [["repair", "-full", "--preview"], ["repair", "-full", "-st"]]
    incremental = client.repair("n", "ks", TokenRange(0, 10), flags=[])
    assert client.seen[-1][:2] == ["repair", "-st"] and incremental.in_sync is None
