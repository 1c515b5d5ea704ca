from __future__ import annotations

from datetime import time, timedelta
from pathlib import Path

import pytest
from ringward.errors import ConfigurationError
from ringward.repair import (
    DEFAULT_CONFIG_PATH,
    FixedSplitter,
    RepairConfig,
    SizeSplitter,
    apply_overrides,
    load_config,
    parse_bytes,
    parse_config,
    parse_duration,
)


def test_shipped_default_loads_and_matches_model_defaults_where_documented() -> None:
    config = load_config()
    assert DEFAULT_CONFIG_PATH.is_file()
    assert config.enabled is True
    assert config.splitter == SizeSplitter(
        type="size", max_bytes_per_segment=50 * 2**30, max_partitions_per_segment=2**20
    )
    assert RepairConfig().splitter == config.splitter  # the model and the shipped file agree
    assert config.min_repair_interval == timedelta(hours=24)
    assert config.segment_timeout == timedelta(hours=3)
    assert config.window is None
    assert "system_traces" in config.keyspaces.exclude
    assert config.ranges_per_command == 16  # the shipped file groups; the model's default (1) does not
    assert parse_config({}).ranges_per_command == 1


def test_yaml_file_with_durations_sizes_and_window(tmp_path: Path) -> None:
    path = tmp_path / "repair.yaml"
    path.write_text(
        "enabled: false\n"
        "splitter: {type: size, max_bytes_per_segment: 200MiB}\n"
        "min_repair_interval: 1h30m\n"
        "retry_backoff: 90\n"
        "window: {start: '22:30', end: '04:00', max_duration: 5h}\n"
        "ignore_dcs: [dc2]\n"
    )
    config = load_config(path)
    assert config.enabled is False
    assert config.splitter == SizeSplitter(type="size", max_bytes_per_segment=200 * 2**20)
    assert config.min_repair_interval == timedelta(minutes=90)
    assert config.retry_backoff == timedelta(seconds=90)
    assert config.window is not None
    assert (config.window.start, config.window.end) == (time(22, 30), time(4, 0))
    assert config.window.max_duration == timedelta(hours=5)
    assert config.ignore_dcs == ("dc2",)


def test_empty_yaml_file_gives_model_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert load_config(path) == RepairConfig()


@pytest.mark.parametrize(
    ("data", "field", "reason"),
    [
        (
            {"splitter": {"type": "fixed", "subranges_per_range": 0}},
            "splitter.subranges_per_range",
            "greater than or equal to 1",
        ),
        ({"splitter": {"type": "size"}}, "splitter", "max_bytes_per_segment"),
        ({"splitter": {"type": "random"}}, "splitter", "'random'"),
        (
            {"splitter": {"type": "size", "max_bytes_per_segment": 0}},
            "splitter.max_bytes_per_segment",
            "below the floor of 4194304 bytes",
        ),
        (
            {"splitter": {"type": "size", "max_bytes_per_segment": "lots"}},
            "splitter.max_bytes_per_segment",
            "size",
        ),
        ({"intensity": 0}, "intensity", "greater than 0"),
        ({"intensity": 1.5}, "intensity", "less than or equal to 1"),
        ({"parallel_repair_percentage": 101}, "parallel_repair_percentage", "100"),
        ({"repair_type": "nightly"}, "repair_type", "'full', 'incremental', 'preview' or 'paxos'"),
        ({"repair_types": {"full": {"job_threads": 5}}}, "repair_types.full.job_threads", "less than or equal to 4"),
        ({"repair_types": {"full": {"min_free_disk_ratio": 0.3}}}, "repair_types", "only incremental"),
        ({"min_repair_interval": "soon"}, "min_repair_interval", "'soon'"),
        ({"segment_timeout": 0}, "segment_timeout", "positive"),
        ({"window": {"start": "25:00", "end": "03:00"}}, "window.start", "HH:MM"),
        ({"window": {"start": "01:00"}}, "window", "both start and end"),
        ({"gc_grace_alarm": 0}, "gc_grace_alarm", "greater than 0"),
        ({"schedule": "every night"}, "schedule", "cron"),
        ({"keyspaces": {"include": ["*"], "exlude": ["x"]}}, "keyspaces.exlude", "Extra inputs"),
        ({"paralel_repair_count": 2}, "paralel_repair_count", "Extra inputs"),
        ({"parallel_repair_count": 0, "parallel_repair_percentage": 0}, "(top level)", "nothing runs"),
    ],
)
def test_invalid_values_raise_configuration_error_naming_field_and_reason(
    data: dict[str, object], field: str, reason: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_config(data, "test.yaml")
    assert f"`{field}`" in caught.value.problem
    assert reason in caught.value.problem
    assert "test.yaml" in caught.value.problem
    assert caught.value.fix


def test_missing_file_and_bad_yaml_are_configuration_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="Cannot read"):
        load_config(tmp_path / "absent.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("enabled: [true\n")
    with pytest.raises(ConfigurationError, match="not valid YAML"):
        load_config(broken)
    listing = tmp_path / "list.yaml"
    listing.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigurationError, match="must be a mapping"):
        load_config(listing)


def test_splitter_without_type_is_fixed() -> None:
    assert parse_config({"splitter": {"subranges_per_range": 4}}).splitter == FixedSplitter(subranges_per_range=4)


def test_overrides_merge_nested_fields_and_accept_dotted_keys() -> None:
    base = RepairConfig(tables={"include": ["app.*"], "exclude": ["app.big"]})
    changed = apply_overrides(base, {"tables": {"exclude": []}, "window.start": "01:00", "window.end": "05:00"})
    assert changed.tables.include == ("app.*",)
    assert changed.tables.exclude == ()
    assert changed.window is not None and changed.window.start == time(1, 0)
    assert base.tables.exclude == ("app.big",)  # the original is untouched


def test_override_changing_splitter_type_replaces_the_splitter() -> None:
    fixed = RepairConfig(splitter=FixedSplitter())
    changed = apply_overrides(fixed, {"splitter": {"type": "size", "max_partitions_per_segment": 10_000}})
    assert changed.splitter == SizeSplitter(type="size", max_partitions_per_segment=10_000)
    same_type = apply_overrides(fixed, {"splitter": {"subranges_per_range": 2}})
    assert same_type.splitter == FixedSplitter(subranges_per_range=2)
    # Without `type`, the fields say which splitter is meant: the default size splitter is replaced, not merged.
    assert apply_overrides(RepairConfig(), {"splitter": {"subranges_per_range": 2}}).splitter == same_type.splitter
    assert apply_overrides(RepairConfig(), {"splitter.max_partitions_per_segment": 10_000}).splitter == SizeSplitter(
        type="size", max_bytes_per_segment=50 * 2**30, max_partitions_per_segment=10_000
    )


def test_no_overrides_returns_the_same_config_and_bad_override_names_field() -> None:
    config = RepairConfig()
    assert apply_overrides(config, None) is config
    assert apply_overrides(config, {}) is config
    with pytest.raises(ConfigurationError, match="`max_retries`"):
        apply_overrides(config, {"max_retries": -1})
    with pytest.raises(ConfigurationError, match="conflicts"):
        apply_overrides(config, {"window": 5, "window.start": "01:00"})


def test_overrides_round_trip_durations_and_times() -> None:
    config = parse_config({"window": {"start": "23:00", "end": "02:00"}, "segment_timeout": "2h"})
    again = apply_overrides(config, {"max_retries": 1})
    assert again.window == config.window
    assert again.segment_timeout == timedelta(hours=2)
    assert again.max_retries == 1


@pytest.mark.parametrize(
    ("text", "seconds"),
    [(3600, 3600), (1.5, 1.5), ("90", 90), ("24h", 86400), ("1h30m", 5400), ("2d", 172800), ("45s", 45)],
)
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "h", "1x", "1h 30", True, None])
def test_parse_duration_rejects(text: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "size"), [(4096, 4096), ("4096", 4096), ("100MiB", 100 * 2**20), ("1.5GB", 1_500_000_000)]
)
def test_parse_bytes(text: object, size: int) -> None:
    assert parse_bytes(text) == size


def test_parse_bytes_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="size"):
        parse_bytes("lots")


def test_dump_config_reads_back_to_an_equal_configuration() -> None:
    from ringward.repair import dump_config

    config = parse_config(
        {"window": {"start": "22:30", "end": "05:00", "max_duration": "5h"}, "retry_backoff": "90s", "intensity": 0.5}
    )
    plain = dump_config(config)
    assert plain["retry_backoff"] == 90.0
    assert plain["window"]["start"] == "22:30"
    assert parse_config(plain) == config
