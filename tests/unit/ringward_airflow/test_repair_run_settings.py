"""Run settings (Airflow params, `config_overrides`) cannot defeat the configuration file's safety settings;
segment settings have floors and caps; out-of-range numbers and deep documents are configuration errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from ringward.errors import ConfigurationError
from ringward.placement import replica_map
from ringward.repair import (
    RUN_OVERRIDABLE,
    RepairConfig,
    RepairUnit,
    SizeEstimate,
    apply_run_overrides,
    load_config,
    parse_config,
    plan_segments,
)
from ringward.replication import Replication
from ringward.ring import Node, Ring
from ringward_airflow.repair_operators import effective_config


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "repair.yaml"
    path.write_text(text)
    return str(path)


def test_the_files_kill_switch_wins_over_a_run_param_switching_repair_on(tmp_path: Path) -> None:
    path = _file(tmp_path, "enabled: false\n")
    assert effective_config(path, {"enabled": "on"}).enabled is False
    assert effective_config(path, {"config_overrides": {"enabled": True}}).enabled is False
    # A run may still switch an enabled file off, and leave it as it is.
    on = _file(tmp_path, "enabled: true\n")
    assert effective_config(on, {"enabled": "off"}).enabled is False
    assert effective_config(on, {"enabled": "on"}).enabled is True
    assert effective_config(on, {"enabled": "config"}).enabled is True


def test_the_file_switched_off_stops_a_running_repair_triggered_with_enabled_on(tmp_path: Path) -> None:
    from ringward_airflow.repair_operators import _ConfigSwitch

    path = tmp_path / "repair.yaml"
    path.write_text("enabled: true\n")
    params = {"enabled": "on"}
    config = effective_config(str(path), params)
    still_enabled = _ConfigSwitch(str(path), params, config, log=None)
    assert still_enabled() is True
    path.write_text("enabled: false\n")
    import os

    os.utime(path, ns=(1, 1))  # a new mtime, however fast the two writes
    assert still_enabled() is False


def test_the_files_kill_switch_stops_a_run_whose_params_the_edited_file_now_refuses(tmp_path: Path) -> None:
    """The file edited to `enabled: false` and a lower parallel_repair_count than the run asked for: the run's
    params no longer fit the file, but the kill switch still stops it."""
    import os

    from ringward_airflow.repair_operators import _ConfigSwitch

    path = tmp_path / "repair.yaml"
    path.write_text("parallel_repair_count: 5\n")
    params = {"parallel_repair_count": 5}
    config = effective_config(str(path), params)
    still_enabled = _ConfigSwitch(str(path), params, config, log=None)
    assert still_enabled() is True
    path.write_text("enabled: false\nparallel_repair_count: 2\n")
    os.utime(path, ns=(1, 1))
    assert still_enabled() is False


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"back_pressure": {"max_pending_compactions": 10**6}}, "back_pressure"),
        ({"back_pressure.sstable_upper_threshold": 10**6}, "back_pressure"),
        ({"history_ttl": "1s"}, "history_ttl"),
        ({"data_disk_capacity": "100PiB"}, "data_disk_capacity"),
        ({"repair_types": {"incremental": {"min_free_disk_ratio": 0}}}, "repair_types.incremental.min_free_disk_ratio"),
        ({"repair_types.incremental.min_free_disk_ratio": 0}, "repair_types.incremental.min_free_disk_ratio"),
        ({"max_segments_per_plan": 100_000_000}, "max_segments_per_plan"),
        ({"ignore_dcs": ["dc2"]}, "ignore_dcs"),
        ({"gc_grace_alarm": 1}, "gc_grace_alarm"),
    ],
)
def test_a_run_override_of_a_file_only_field_is_refused_naming_it_and_the_fix(
    overrides: dict[str, object], field: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        effective_config(None, {"config_overrides": overrides})
    assert f"`{field}`" in caught.value.problem
    assert "only the configuration file may set" in caught.value.problem
    assert "Edit the configuration file named by $RINGWARD_REPAIR_CONFIG" in caught.value.fix


def test_run_overridable_fields_are_accepted() -> None:
    config = effective_config(
        None,
        {
            "config_overrides": {
                "splitter": {"subranges_per_range": 4},
                "repair_types": {"full": {"job_threads": 2}, "preview": {"enabled": True}},
                "retry_backoff": 1,
                "max_retries": 1,
                "segment_timeout": 60,
                "ranges_per_command": 1,
                "parallel_repair_count": 1,
                "intensity": 0.5,
                "window.max_duration": "1h",
            },
            "keyspaces": ["shop"],
        },
    )
    assert config.repair_types.full.job_threads == 2 and config.repair_types.preview.enabled
    assert config.parallel_repair_count == 1 and config.intensity == 0.5
    assert "history_ttl" not in RUN_OVERRIDABLE and "back_pressure" not in RUN_OVERRIDABLE


@pytest.mark.parametrize(
    "overrides, named",
    [
        ({"parallel_repair_count": 50}, "`parallel_repair_count` 50 > 3"),
        ({"parallel_repair_percentage": 100}, "`parallel_repair_percentage` 100.0 > 34.0"),
    ],
)
def test_a_run_may_lower_parallelism_but_not_raise_it(overrides: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        effective_config(None, {"config_overrides": overrides})
    assert named in caught.value.problem and "never raise" in caught.value.problem
    with pytest.raises(ConfigurationError, match="parallel_repair_count"):
        effective_config(None, {"parallel_repair_count": 50})  # the form's field follows the same rule


def test_intensity_may_not_be_raised_above_the_files(tmp_path: Path) -> None:
    path = _file(tmp_path, "intensity: 0.25\n")
    with pytest.raises(ConfigurationError, match=r"`intensity` 1\.0 > 0\.25"):
        effective_config(path, {"config_overrides": {"intensity": 1}})
    assert effective_config(path, {"config_overrides": {"intensity": 0.1}}).intensity == 0.1


def test_an_unknown_override_is_still_named_as_unknown() -> None:
    with pytest.raises(ConfigurationError, match="`paralel_repair_count`: Extra inputs"):
        apply_run_overrides(RepairConfig(), {"paralel_repair_count": 2})


@pytest.mark.parametrize(
    "splitter, field, limit",
    [
        ({"max_bytes_per_segment": 1}, "splitter.max_bytes_per_segment", "floor of 4194304 bytes"),
        ({"max_bytes_per_segment": "1MiB"}, "splitter.max_bytes_per_segment", "floor of 4194304 bytes"),
        ({"max_partitions_per_segment": 1}, "splitter.max_partitions_per_segment", "floor of 4096 partitions"),
        ({"max_partitions_per_segment": 2**41}, "splitter.max_partitions_per_segment", "cap of 1099511627776"),
        ({"type": "fixed", "subranges_per_range": 5000}, "splitter.subranges_per_range", "less than or equal to 1024"),
    ],
)
def test_segment_sizes_have_floors_and_caps_named_in_the_refusal(
    splitter: dict[str, object], field: str, limit: str
) -> None:
    for attempt in (
        lambda: parse_config({"splitter": {"type": "size", **splitter}}),
        lambda: effective_config(None, {"config_overrides": {"splitter": splitter}}),
    ):
        with pytest.raises(ConfigurationError) as caught:
            attempt()
        assert f"`{field}`" in caught.value.problem and limit in caught.value.problem


@pytest.mark.parametrize(
    "settings",
    [{"retry_backoff": "10d", "max_retries": 20}, {"retry_backoff": "3650d", "max_retries": 2},
     {"retry_backoff": "1h", "max_retries": 18}],
    ids=["10d x 2^19", "3650d x 2", "1h x 2^17"],
)  # fmt: skip
def test_the_longest_retry_delay_has_a_cap_named_in_the_refusal(tmp_path: Path, settings: dict[str, object]) -> None:
    """retry_backoff and max_retries are each within their bounds and a run may set both, but the backoff doubles
    per retry: 10d x 2^19 is 14,000 years, past what the executor's clock can add (OverflowError mid-run)."""
    text = "".join(f"{name}: {value}\n" for name, value in settings.items())
    for attempt in (
        lambda: load_config(_file(tmp_path, text)),
        lambda: effective_config(None, {"config_overrides": settings}),
    ):
        with pytest.raises(ConfigurationError) as caught:
            attempt()
        assert "above the cap of 3650d (retry_backoff x 2^(max_retries - 1))" in caught.value.problem
        assert "lower retry_backoff or max_retries" in caught.value.problem


def test_every_retry_delay_a_valid_config_allows_fits_the_clock() -> None:
    """At the cap's edge the last retry's time is still a datetime: the executor adds it to the finish time."""
    from datetime import UTC, datetime, timedelta

    from ringward.repair._state import backoff_delay

    for settings in ({"retry_backoff": 60, "max_retries": 20}, {"retry_backoff": "3650d", "max_retries": 1},
                     {"retry_backoff": "3650d", "max_retries": 0}):  # fmt: skip
        config = parse_config(settings)
        last = backoff_delay(config.max_retries + 1, config.retry_backoff.total_seconds())
        assert last <= 3650 * 86400
        assert datetime(2026, 11, 28, tzinfo=UTC) + timedelta(seconds=last) < datetime(9999, 1, 1, tzinfo=UTC)


def _ring(nodes: int) -> Ring:
    step = 2**64 // nodes
    return Ring.of(Node(f"10.0.0.{i + 1}", "dc1", "r1", (-(2**63) + 1 + i * step,)) for i in range(nodes))


def test_a_plan_beyond_max_segments_per_plan_is_refused_naming_the_cap_and_the_setting() -> None:
    ring = _ring(4)
    entries = replica_map(ring, Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2})).entries()
    config = parse_config({"splitter": {"type": "fixed", "subranges_per_range": 1024}, "max_segments_per_plan": 1000})
    with pytest.raises(ConfigurationError) as caught:
        plan_segments(ring, entries, RepairUnit("ks"), config)
    assert "max_segments_per_plan = 1000" in caught.value.problem
    assert "splitter.subranges_per_range is 1024" in caught.value.problem
    assert "raise max_segments_per_plan in the configuration file" in caught.value.fix
    fits = parse_config({"splitter": {"type": "fixed", "subranges_per_range": 250}, "max_segments_per_plan": 1000})
    assert len(plan_segments(ring, entries, RepairUnit("ks"), fits).segments) <= 1001  # the wrap adds one piece


def test_the_size_splitter_is_refused_before_building_billions_of_segments() -> None:
    ring = _ring(2)
    entries = replica_map(ring, Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2})).entries()
    token = ring.nodes[1].tokens[0]
    # 1 PB estimated in one range, 4 MiB segments: 2.4e8 pieces, refused before any is built.
    rows = [SizeEstimate("ks", "t", ring.nodes[0].tokens[0], token, 10**6, 10**9)]
    config = parse_config({"splitter": {"type": "size", "max_bytes_per_segment": "4MiB"}})
    with pytest.raises(ConfigurationError, match="max_segments_per_plan = 10000000"):
        plan_segments(ring, entries, RepairUnit("ks"), config, rows)


@pytest.mark.parametrize(
    "yaml_text",
    [
        "segment_timeout: 1e400\n",
        "segment_timeout: .inf\n",
        "retry_backoff: 99999999999999999999999999\n",
        "history_ttl: 999999999999999999d\n",
        "split_outlier_min_size: 9999999999999999999999999999999TiB\n",
        "parallel_repair_count: 99999999999999999999999999999999999\n",
        "data_disk_capacity: 1e999TiB\n",
        "max_retries: 100000\n",
    ],
)
def test_huge_numbers_are_configuration_errors_not_tracebacks(tmp_path: Path, yaml_text: str) -> None:
    field = yaml_text.split(":")[0]
    with pytest.raises(ConfigurationError) as caught:
        load_config(_file(tmp_path, yaml_text))
    assert f"`{field}`" in caught.value.problem


def test_a_huge_integer_beyond_pythons_digit_limit_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot be read"):
        load_config(_file(tmp_path, "max_retries: " + "9" * 5000 + "\n"))


def test_deep_yaml_and_deep_overrides_are_configuration_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"too deeply|deeper than"):
        load_config(_file(tmp_path, "keyspaces: " + "[" * 20000 + "]" * 20000 + "\n"))
    with pytest.raises(ConfigurationError, match="deeper than 8 levels"):
        load_config(_file(tmp_path, "keyspaces: " + "[" * 50 + "]" * 50 + "\n"))
    deep: dict[str, object] = {}
    for _ in range(5000):
        deep = {"a": deep}
    with pytest.raises(ConfigurationError, match="deeper than 8 levels"):
        effective_config(None, {"config_overrides": {"window": deep}})
