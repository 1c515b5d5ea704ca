"""benchmarks/side_by_side.py: the ring it builds and what it reads from AutoRepair's logs decide its figures."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
from ringward.ring import Node, Ring

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def side_by_side() -> Iterator[ModuleType]:
    with pytest.MonkeyPatch.context() as patch:  # the script's own imports; sys.path restored after the module
        for folder in ("benchmarks", "tests/integration", "tools/fleetsim"):
            patch.syspath_prepend(str(ROOT / folder))
        yield _load()


def test_the_topology_and_the_simulator_get_the_same_nodes(side_by_side: ModuleType) -> None:
    nodes = side_by_side.ring_nodes()
    assert [(a, dc, rack) for a, dc, rack, _ in nodes] == [
        (a, dc, f"rack{i + 1}") for dc, addresses in side_by_side.DCS.items() for i, a in enumerate(addresses)
    ]
    assert {a: mine for a, _, _, mine in nodes} == side_by_side.tokens()


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("side_by_side", ROOT / "benchmarks" / "side_by_side.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_node_has_16_distinct_tokens_and_a_sixth_of_the_ring(side_by_side: ModuleType) -> None:
    tokens = side_by_side.tokens()
    assert sorted(tokens) == sorted(side_by_side.NODES)
    assert all(len(set(mine)) == 16 for mine in tokens.values())
    assert len({t for mine in tokens.values() for t in mine}) == 16 * 6
    assert tokens == side_by_side.tokens()  # seeded: the simulator sees the ring the nodes ran
    ring = Ring.of(Node(a, "dc1", "r", t) for a, t in tokens.items())
    widths = dict(ring.primary_widths)
    assert max(widths.values()) - min(widths.values()) < 96  # equal slots; the wrapping one also has 2**64 % 96


def test_the_replicated_shares_add_up_to_the_replication_factor(side_by_side: ModuleType) -> None:
    shares = side_by_side.replicated_shares()
    assert sum(shares.values()) == pytest.approx(4.0)  # NTS {dc1: 2, dc2: 2}: every token on 4 nodes
    assert min(shares.values()) == pytest.approx(0.5833, abs=1e-3)  # what --gib-per-node is sized by


U1, U2, U3 = (f"00000000-0000-0000-0000-00000000000{i}" for i in (1, 2, 3))
RUNNABLE, JOB, REPAIR = (
    "INFO  [AutoRepair-RepairRunnable-full:1]",
    "INFO  [RepairJobTask:1]",
    "INFO  [AutoRepair-Repair-full:1]",
)
COORDINATOR, AUTO = "RepairCoordinator.java:368 -", "AutoRepair.java:533 -"
LOG = "\n".join(  # lines as a 5.0.9 node writes them (system.log), shortened where the parser reads nothing
    [
        f"{RUNNABLE} 2026-11-29 00:30:00,000 {COORDINATOR} Starting repair command #1 ({U1}), repairing keyspace sbs_a",
        f"{JOB} 2026-11-29 00:30:01,000 {COORDINATOR} [repair #{U1}]Repair command #1 finished in 1 seconds",
        f"{RUNNABLE} 2026-11-29 00:35:00,000 {COORDINATOR} Starting repair command #2 ({U2}), repairing keyspace sbs_a",
        f"{JOB} 2026-11-29 00:35:00,700 {COORDINATOR} [repair #{U2}]Repair command #2 finished in 0 seconds",
        f"{REPAIR} 2026-11-29 00:35:00,701 {AUTO} Soaking for 4300 ms after repair",
        f"WARN  [AutoRepair-Repair-full:1] 2026-11-29 00:35:05,001 {AUTO} an unrelated line",
        f"{RUNNABLE} 2026-11-29 00:35:05,002 {COORDINATOR} Starting repair command #3 ({U3}), repairing keyspace "
        "system_auth",
        f"{RUNNABLE} 2026-11-29 00:35:05,004 {COORDINATOR} Repair {U3} skipped: Nothing to repair for [(1,2]] in "
        "system_auth - unreplicated keyspace is ignored",
        f"{RUNNABLE} 2026-11-29 00:35:05,005 {COORDINATOR} [repair #{U3}]Repair command #3 finished in 0 seconds",
        f"{REPAIR} 2026-11-29 00:35:05,006 {AUTO} Soaking for 4996 ms after repair",
    ]
)


def test_autorepair_tasks_counts_commands_repair_time_and_floor_within_the_window(
    side_by_side: ModuleType, tmp_path: Path
) -> None:
    node = tmp_path / "node2"
    node.mkdir()
    (node / "system.log").write_text(LOG)
    since, until = datetime(2026, 11, 29, 0, 34, tzinfo=UTC), datetime(2026, 11, 29, 1, 0, tzinfo=UTC)
    found = side_by_side.autorepair_tasks([node], since, until)
    assert set(found) == {"sbs_a", "system_auth"}  # command #1 is before the window
    assert found["sbs_a"] == {"tasks": 1, "nothing": 0, "repair_s": pytest.approx(0.7), "soak_s": pytest.approx(4.3)}
    assert found["system_auth"]["tasks"] == 1
    assert found["system_auth"]["nothing"] == 1
    assert found["system_auth"]["soak_s"] == pytest.approx(4.996)
    assert side_by_side.autorepair_tasks([node], until, until) == {}
