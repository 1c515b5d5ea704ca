"""Issue 24: incremental repair's disk-headroom guard (CEP-37), the pure decision: which capacity a node is
measured against, its free share, and the refusal or the once-per-run note that it cannot be checked."""

from __future__ import annotations

import pytest
from ringward.errors import ConfigurationError
from ringward.repair import (
    DISK_SIZE_SETTING,
    DiskCapacity,
    DiskHeadroomGuard,
    RepairCommand,
    Segment,
    configured_disk_capacity,
    disk_capacity,
    disk_headroom_reason,
    free_ratio,
    load_config,
    parse_config,
)
from ringward.ring import TokenRange

GIB = 2**30


def command(*replicas: str) -> RepairCommand:
    return RepairCommand((Segment("ks", (), TokenRange(0, 1), replicas),))


def test_the_shipped_default_checks_at_twenty_percent_with_no_capacity_configured() -> None:
    config = load_config()
    assert config.repair_types.incremental.min_free_disk_ratio == 0.2
    assert config.data_disk_capacity is None


def test_data_disk_capacity_is_a_size_or_sizes_by_datacenter_or_node() -> None:
    assert parse_config({"data_disk_capacity": "2TiB"}).data_disk_capacity == 2 * 1024 * GIB
    sizes = parse_config({"data_disk_capacity": {"dc1": "1GiB", "10.0.0.7": 512}}).data_disk_capacity
    assert sizes == {"dc1": GIB, "10.0.0.7": 512}


@pytest.mark.parametrize("value", [0, "lots", {"dc1": "-1"}, [GIB], True])
def test_a_bad_data_disk_capacity_names_the_field(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"`data_disk_capacity`: .*positive size"):
        parse_config({"data_disk_capacity": value})


def test_a_nodes_own_entry_wins_over_its_datacenters() -> None:
    sizes = {"dc1": 100, "10.0.0.7": 50}
    assert configured_disk_capacity("10.0.0.7", "dc1", sizes) == 50
    assert configured_disk_capacity("10.0.0.8", "dc1", sizes) == 100
    assert configured_disk_capacity("10.0.0.9", "dc2", sizes) is None
    assert configured_disk_capacity("10.0.0.9", "dc2", 70) == 70
    assert configured_disk_capacity("10.0.0.9", "dc2", None) is None


def test_the_nodes_cassandra_setting_wins_over_the_configuration() -> None:
    assert disk_capacity("n1", "dc1", 300, 100) == DiskCapacity(300, f"its {DISK_SIZE_SETTING}")
    assert disk_capacity("n1", "dc1", None, 100) == DiskCapacity(100, "data_disk_capacity")
    assert disk_capacity("n1", "dc1", 0, {"dc1": 100}) == DiskCapacity(100, "data_disk_capacity")
    assert disk_capacity("n1", "dc1", None, None) is None


def test_the_free_share_of_a_disk() -> None:
    assert free_ratio(25, 100) == 0.75
    assert free_ratio(150, 100) == 0.0  # more data than the stated capacity: nothing free


def test_a_free_share_under_the_ratio_refuses_naming_node_figures_and_fixes() -> None:
    assert disk_headroom_reason("n1", 0.5, 0.2) is None
    assert disk_headroom_reason("n1", 0.2, 0.2) is None
    low = disk_headroom_reason("n1", 0.1, 0.2, DiskCapacity(100, "data_disk_capacity"))
    assert low is not None and low.startswith("n1: 10% of its data disk of 100 bytes (data_disk_capacity)")
    assert "min_free_disk_ratio 20%" in low and "free space or add disk" in low
    assert disk_headroom_reason("n1", None, 0.2) is None  # unmeasured: said once per run, not refused
    assert disk_headroom_reason("n1", 0.01, 0) is None and disk_headroom_reason("n1", 0.01, None) is None


def test_the_guard_refuses_a_command_with_a_full_replica() -> None:
    capacities = {"n1": DiskCapacity(100, "data_disk_capacity"), "n2": DiskCapacity(100, "its setting")}
    loads = {"n1": 50, "n2": 85}
    lines: list[str] = []
    guard = DiskHeadroomGuard(0.2, capacities, loads.get, lines.append)
    reason = guard(command("n1", "n2"))
    assert reason is not None and reason.startswith("n2: 15% of its data disk of 100 bytes (its setting)")
    assert guard(command("n1")) is None
    assert lines == []  # every node measured: nothing to say
    assert DiskHeadroomGuard(0.1, capacities, loads.get, lines.append)(command("n1", "n2")) is None


def test_the_guard_says_once_per_run_which_nodes_it_cannot_measure_and_lets_them_run() -> None:
    capacities = {"n1": None, "n2": DiskCapacity(100, "data_disk_capacity"), "n3": DiskCapacity(100, "x")}
    loads = {"n2": 10}  # n3's Load unreadable
    lines: list[str] = []
    guard = DiskHeadroomGuard(0.2, capacities, loads.get, lines.append)
    assert guard(command("n1", "n2")) is None
    assert guard(command("n1", "n3")) is None
    (line,) = lines
    assert line.startswith("Disk headroom not checked on n1, n3:") and "data_disk_capacity" in line
    assert DISK_SIZE_SETTING in line and "run unchecked" in line


def test_a_ratio_of_zero_switches_the_guard_off() -> None:
    lines: list[str] = []
    guard = DiskHeadroomGuard(0, {"n1": None}, lambda node: None, lines.append)
    assert guard(command("n1")) is None and lines == []
