"""The back-pressure read of one node: nodetool compactionstats / netstats / status, parsed."""

from __future__ import annotations

from collections.abc import Sequence

from ringward.errors import ClusterError
from ringward.repair import NodeBacklog
from ringward_cassandra.nodetool import NodetoolClient

COMPACTIONS_5_0 = """\
concurrent compactors            2
pending tasks                    230
compactions completed            17
id                                   compaction type keyspace table completed total    unit  progress
5d0c4c40-0f0e-11ef-9c0f-5b6b0f0e0e0e Cleanup         shop     items 1024      2048     bytes 50.00%
Active compaction remaining time :   0h00m01s
"""
COMPACTIONS_4_1 = "pending tasks: 3\n"
NETSTATS_IDLE = "Mode: NORMAL\nNot sending any streams.\n"
NETSTATS_STREAMING = "Mode: NORMAL\nRepair 5d0c4c40\n    /127.0.0.3\n        Receiving 4 files, 1024 bytes total\n"
STATUS = "UN  127.0.0.2  1 MiB  16  ?  id1  rack1\nUJ  127.0.0.5  1.5 GiB  16  ?  id5  rack1\n"
TABLESTATS_5_0 = """\
Total number of tables: 3
----------------
Keyspace : system
\tRead Count: 10
\tPending Flushes: 0
\t\tTable: local
\t\tSSTable count: 900
\t\tOld SSTable count: 0
----------------
Keyspace : shop
\tRead Count: 0
\tPending Flushes: 0
\t\tTable: items
\t\tSSTable count: 12
\t\tOld SSTable count: 40
\t\tMax SSTable size: 5.000KiB
\t\tTable: orders
\t\tSSTable count: 31
----------------
"""


class Scripted(NodetoolClient):
    def __init__(self, outputs: dict[str, str]) -> None:
        super().__init__()
        self.outputs = outputs
        self.asked: list[list[str]] = []

    def checked(self, address: str, args: Sequence[str], timeout: float = 600.0) -> str:
        self.asked.append(list(args))
        return self.outputs[args[0]]


def test_pending_compactions_cleanup_and_streaming_are_read() -> None:
    client = Scripted({"compactionstats": COMPACTIONS_5_0, "netstats": NETSTATS_STREAMING, "status": STATUS,
                       "tablestats": TABLESTATS_5_0})  # fmt: skip
    assert client.backlog("127.0.0.2") == NodeBacklog(
        pending_compactions=230, max_sstables_per_table=31, streaming=True, cleanup_running=True, load_bytes=2**20
    )


def test_an_idle_node_of_an_older_release_and_a_joining_node() -> None:
    client = Scripted({"compactionstats": COMPACTIONS_4_1, "netstats": NETSTATS_IDLE, "status": STATUS,
                       "tablestats": "Total number of tables: 0\n"})  # fmt: skip
    assert client.backlog("127.0.0.2") == NodeBacklog(pending_compactions=3, load_bytes=2**20)
    joining = client.backlog("127.0.0.5")
    assert joining.pending_ranges and joining.load_bytes == 3 * 2**29  # its Load, for the disk-headroom guard


def test_sstables_are_counted_in_the_keyspaces_named_or_in_every_keyspace() -> None:
    client = Scripted({"compactionstats": COMPACTIONS_5_0, "netstats": NETSTATS_IDLE, "status": STATUS,
                       "tablestats": TABLESTATS_5_0})  # fmt: skip
    client.backlog("127.0.0.2", ["shop", "audit"])
    client.backlog("127.0.0.2")
    tablestats = [args for args in client.asked if args[0] == "tablestats"]
    assert tablestats == [["tablestats", "shop", "audit"], ["tablestats"]]


class DroppedKeyspace(Scripted):
    def checked(self, address: str, args: Sequence[str], timeout: float = 600.0) -> str:
        if args[0] == "tablestats" and "gone" in args:
            self.asked.append(list(args))
            raise ClusterError("nodetool tablestats gone failed on 127.0.0.2: Unknown keyspace gone", "Check.")
        return super().checked(address, args, timeout)


def test_a_keyspace_dropped_since_the_plan_falls_back_to_every_table_not_to_no_backlog() -> None:
    client = DroppedKeyspace({"compactionstats": COMPACTIONS_5_0, "netstats": NETSTATS_IDLE, "status": STATUS,
                              "tablestats": TABLESTATS_5_0})  # fmt: skip
    assert client.backlog("127.0.0.2", ["shop", "gone"]).max_sstables_per_table == 31
    assert [args for args in client.asked if args[0] == "tablestats"] == [
        ["tablestats", "shop", "gone"],
        ["tablestats"],
    ]


def test_the_sstable_count_of_cassandras_own_tables_and_old_sstables_do_not_count() -> None:
    from ringward_cassandra.nodetool import most_sstables_in_one_table

    assert most_sstables_in_one_table(TABLESTATS_5_0) == 31  # not system.local's 900, not items' 40 old ones
    assert most_sstables_in_one_table("") == 0


TABLESTATS_PERCENT_REPAIRED = """\
Total number of tables: 2
----------------
Keyspace : shop
\tRead Count: 0
\t\tTable: items
\t\tSSTable count: 2
\t\tSpace used (live): 10240
\t\tPercent repaired: 87.5
\t\tBytes repaired: 8.750KiB
\t\tBytes unrepaired: 1.250KiB
\t\tBytes pending repair: 0.000KiB
\t\tTable: orders
\t\tSSTable count: 0
\t\tPercent repaired: 0.0
----------------
Keyspace : audit
\t\tTable: log
\t\tPercent repaired: 100.0
----------------
"""


def test_the_repaired_share_of_each_table_is_read_from_tablestats() -> None:
    client = Scripted({"tablestats": TABLESTATS_PERCENT_REPAIRED})
    assert client.percent_repaired("127.0.0.2", ["shop", "audit"]) == {
        "shop.items": 87.5, "shop.orders": 0.0, "audit.log": 100.0,
    }  # fmt: skip
