"""The nightly repair configuration: a pydantic model with CEP-37-like field names, loaded from YAML.

Every invalid value becomes a ConfigurationError naming the field and the reason, so an operator can
fix the YAML file or the Airflow run parameter without reading a pydantic traceback.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import time, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ringward.errors import ConfigurationError
from ringward.repair._units import MAX_DURATION, format_duration, parse_bytes, parse_duration

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "MAX_SUBRANGES_PER_RANGE",
    "MIN_BYTES_PER_SEGMENT",
    "MIN_PARTITIONS_PER_SEGMENT",
    "REPAIR_TYPES",
    "RUN_ORDER",
    "RUN_OVERRIDABLE",
    "BackPressure",
    "FixedSplitter",
    "NameFilter",
    "Parallelism",
    "RepairConfig",
    "RepairType",
    "RepairTypeSettings",
    "RepairTypes",
    "RepairWindow",
    "SizeSplitter",
    "apply_overrides",
    "apply_run_overrides",
    "dump_config",
    "load_config",
    "parse_config",
]

DEFAULT_CONFIG_PATH = Path(__file__).with_name("default_config.yaml")

Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
ByteCount = Annotated[int, BeforeValidator(parse_bytes), Field(gt=0)]
ByteCountOrZero = Annotated[int, BeforeValidator(parse_bytes), Field(ge=0)]

# Floors and caps of the segment settings (docs/operators-guide.md, "Segment limits"). A segment is one repair
# session's worth of validation; below these sizes the per-session cost (Merkle trees on every replica,
# streaming handshakes, one history row) dwarfs the data, and the segment count grows with the data itself.
MIN_BYTES_PER_SEGMENT = 4 * 2**20  # 4 MiB
MIN_PARTITIONS_PER_SEGMENT = 4096  # a Merkle tree of depth 12: below it a tree resolves single partitions
MAX_SUBRANGES_PER_RANGE = 1024  # x 256 vnodes = 262,144 segments per node and unit
MAX_PARTITIONS_PER_SEGMENT = 2**40
# The default and the bounds of `max_segments_per_plan`: a fleet night (1,000 nodes x 256 vnodes, ten
# keyspaces) plans about 3 million segments; every planned segment costs the plan task memory and time.
DEFAULT_MAX_SEGMENTS_PER_PLAN = 10_000_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NameFilter(_Strict):
    """fnmatch patterns; a name is selected when it matches an include and no exclude pattern."""

    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()


class FixedSplitter(_Strict):
    """Split every (merged) ring range into the same number of subranges (CEP-37 number_of_subranges)."""

    type: Literal["fixed"] = "fixed"
    subranges_per_range: int = Field(default=16, ge=1, le=MAX_SUBRANGES_PER_RANGE)


class SizeSplitter(_Strict):
    """Split ranges so no segment holds more than the given data, from system.size_estimates."""

    type: Literal["size"]
    max_bytes_per_segment: Annotated[int, BeforeValidator(parse_bytes)] | None = None
    max_partitions_per_segment: int | None = None

    @field_validator("max_bytes_per_segment")
    @classmethod
    def _bytes_floor(cls, value: int | None) -> int | None:
        if value is not None and value < MIN_BYTES_PER_SEGMENT:
            raise ValueError(
                f"{value} bytes is below the floor of {MIN_BYTES_PER_SEGMENT} bytes (4MiB): smaller segments cost "
                "more in repair sessions than they save, and their count grows with the data"
            )
        return value

    @field_validator("max_partitions_per_segment")
    @classmethod
    def _partitions_bounds(cls, value: int | None) -> int | None:
        if value is not None and value < MIN_PARTITIONS_PER_SEGMENT:
            raise ValueError(
                f"{value} is below the floor of {MIN_PARTITIONS_PER_SEGMENT} partitions: smaller segments cost "
                "more in repair sessions than they save, and their count grows with the data"
            )
        if value is not None and value > MAX_PARTITIONS_PER_SEGMENT:
            raise ValueError(f"{value} is above the cap of {MAX_PARTITIONS_PER_SEGMENT} partitions (2^40)")
        return value

    @model_validator(mode="after")
    def _needs_a_limit(self) -> SizeSplitter:
        if self.max_bytes_per_segment is None and self.max_partitions_per_segment is None:
            raise ValueError("give max_bytes_per_segment and/or max_partitions_per_segment")
        return self


def _parse_hhmm(value: object) -> object:
    if isinstance(value, str):
        if not re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d", value.strip()):
            raise ValueError(f"expected a UTC time as HH:MM (00:00-23:59), got {value!r}")
        hours, minutes = value.strip().split(":")
        return time(int(hours), int(minutes))
    return value


class RepairWindow(_Strict):
    """When segments may start: a daily UTC window `start`-`end` (may cross midnight) and/or a
    maximum run duration. Running segments finish; no new one starts once the window closes."""

    start: Annotated[time | None, BeforeValidator(_parse_hhmm)] = None
    end: Annotated[time | None, BeforeValidator(_parse_hhmm)] = None
    max_duration: Duration | None = None

    @model_validator(mode="after")
    def _start_and_end_together(self) -> RepairWindow:
        if (self.start is None) != (self.end is None):
            raise ValueError("give both start and end (HH:MM UTC), or neither")
        if self.start is not None and self.start == self.end:
            raise ValueError("start and end are equal; omit both for an always-open window")
        if self.max_duration is not None and self.max_duration <= timedelta(0):
            raise ValueError("max_duration must be positive")
        return self


def _disk_sizes(value: object) -> object:
    """`data_disk_capacity`: one size, or {datacenter or address: size}; every size positive."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return {str(name): _positive_size(size, f"{name}: ") for name, size in value.items()}
    return _positive_size(value, "")


def _positive_size(value: object, prefix: str) -> int:
    try:
        size = parse_bytes(value)
    except ValueError:
        size = 0
    if size <= 0:
        raise ValueError(f"{prefix}expected a positive size such as 2199023255552 or '2TiB', got {value!r}")
    return size


DiskCapacities = Annotated[int | dict[str, int] | None, BeforeValidator(_disk_sizes)]


class BackPressure(_Strict):
    """Node load above which no repair session starts on the node (CEP-37 holds repair off the same way)."""

    max_pending_compactions: int = Field(default=100, gt=0, le=2**31 - 1)
    # CEP-37's name: the most SSTables one table may have on a node before repair waits for compaction.
    sstable_upper_threshold: int = Field(default=10000, gt=0, le=2**31 - 1)


def _default_splitter_type(value: object) -> object:
    """A splitter mapping without `type` is the fixed splitter (the CEP-37 default)."""
    if isinstance(value, Mapping) and "type" not in value:
        return {"type": "fixed", **value}
    return value


Splitter = Annotated[FixedSplitter | SizeSplitter, Field(discriminator="type"), BeforeValidator(_default_splitter_type)]

RepairType = Literal["full", "incremental", "preview", "paxos"]
REPAIR_TYPES: tuple[RepairType, ...] = ("full", "incremental", "preview", "paxos")
# The order a night runs its enabled types in: the repairs that keep ranges within gc_grace first (full, then
# incremental), then paxos (cheap: Paxos state only), the preview last: it is a check, not a repair, so it is
# the one the window cuts short, and it compares the replicas after the night's repairs.
RUN_ORDER: tuple[RepairType, ...] = ("full", "incremental", "paxos", "preview")
# nodetool repair's parallelism: -seq, the default, -dcpar (Repair.java createOptions).
Parallelism = Literal["sequential", "parallel", "dc_parallel"]


class RepairTypeSettings(_Strict):
    """One repair type as a unit of scheduling (CEP-37 `repair_type_overrides`): its own switch, cadence and
    session settings. Settings that make no sense for a type are refused when set on it."""

    enabled: bool = False
    # None = the top-level min_repair_interval. Each type keeps its own history, so cadences are separate.
    min_repair_interval: Duration | None = None
    parallelism: Parallelism = "parallel"
    local_dc_only: bool = False  # -local: only the replicas in the coordinator's datacenter take part
    job_threads: int = Field(default=1, ge=1, le=4)  # -j: tables repaired at once per session (nodetool's max 4)
    # incremental only: no session starts on a replica whose data disk has less free space than this share
    # (anticompaction rewrites SSTables: CEP-37 checks disk headroom the same way).
    min_free_disk_ratio: float | None = Field(default=None, ge=0, lt=1)
    # preview only: ranges found out of sync are repaired (full) in the same run.
    repair_out_of_sync: bool = False

    @field_validator("min_repair_interval")
    @classmethod
    def _interval_not_negative(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value < timedelta(0):
            raise ValueError("must not be negative")
        return value


class RepairTypes(_Strict):
    """The four repair types; full is on by default, the others off."""

    full: RepairTypeSettings = RepairTypeSettings(enabled=True)
    incremental: RepairTypeSettings = RepairTypeSettings(min_free_disk_ratio=0.2)
    preview: RepairTypeSettings = RepairTypeSettings()
    paxos: RepairTypeSettings = RepairTypeSettings()

    @model_validator(mode="before")
    @classmethod
    def _type_defaults(cls, data: object) -> object:
        """A type given in part keeps its own defaults (`full: {job_threads: 2}` leaves full on)."""
        if not isinstance(data, Mapping):
            return data
        filled = dict(data)
        for kind, defaults in _TYPE_DEFAULTS.items():
            given = filled.get(kind)
            if isinstance(given, Mapping):
                filled[kind] = {**defaults, **given}
        return filled

    @model_validator(mode="after")
    def _settings_fit_the_type(self) -> RepairTypes:
        for kind in REPAIR_TYPES:
            settings: RepairTypeSettings = getattr(self, kind)
            if kind != "incremental" and settings.min_free_disk_ratio is not None:
                raise ValueError(f"{kind}.min_free_disk_ratio: only incremental repair checks disk headroom")
            if kind != "preview" and settings.repair_out_of_sync:
                raise ValueError(f"{kind}.repair_out_of_sync: only a preview finds ranges out of sync")
            if settings.local_dc_only and settings.parallelism == "dc_parallel":
                raise ValueError(f"{kind}: local_dc_only and parallelism dc_parallel contradict each other")
        return self

    def settings(self, kind: RepairType) -> RepairTypeSettings:
        return getattr(self, kind)  # type: ignore[no-any-return]


_TYPE_DEFAULTS: dict[str, dict[str, Any]] = {"full": {"enabled": True}, "incremental": {"min_free_disk_ratio": 0.2}}


def _legacy_repair_type(data: object) -> object:
    """`repair_type: X` (the form before `repair_types`, and the run param) means "only X runs": X is switched on
    and the other types off, their settings kept. Applied again on a dumped config it changes nothing."""
    if not isinstance(data, Mapping) or data.get("repair_type") is None:
        return data
    kind = data["repair_type"]
    if kind not in REPAIR_TYPES:
        return data  # the field's own validation names the allowed values
    types = data.get("repair_types") or {}
    if not isinstance(types, Mapping):
        return data
    merged: dict[str, Any] = {}
    for name in REPAIR_TYPES:
        current = types.get(name, {})
        if isinstance(current, RepairTypeSettings):
            current = current.model_dump()
        if not isinstance(current, Mapping):
            return data
        merged[name] = {**current, "enabled": name == kind}
    return {**data, "repair_types": merged}


_CRON_PRESETS = {"@once", "@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually", "@midnight"}


class RepairConfig(_Strict):
    """Nightly subrange repair settings; names follow CEP-37 auto_repair where one exists."""

    @model_validator(mode="before")
    @classmethod
    def _only_type(cls, data: object) -> object:
        return _legacy_repair_type(data)

    enabled: bool = True
    keyspaces: NameFilter = NameFilter()
    tables: NameFilter = NameFilter()
    ignore_dcs: tuple[str, ...] = ()
    # Each type is scheduled on its own cadence (CEP-37 repair_type_overrides).
    repair_types: RepairTypes = RepairTypes()
    # Shorthand (and the form before `repair_types`): only this type runs. A config `for_type` also carries it.
    repair_type: RepairType | None = None
    # Their ranges run first (CEP-37 priority hosts).
    priority_hosts: tuple[str, ...] = ()
    # Their ranges are repaired whatever their cadence says (CEP-37 force-repair hosts).
    force_repair_hosts: tuple[str, ...] = ()
    # A node whose host id was not in the last run's ring is repaired at once (it may miss writes it never got).
    repair_new_nodes: bool = True
    primary_range_only: bool = True
    # Cassandra 5.0.9's AutoRepair splits by size by default too (RepairTokenRangeSplitter: 50 GiB and 2^20
    # partitions per assignment): a small table is one segment per range, not 16 (16 fixed subranges cost
    # 16x the per-session overhead on data that needs none; a Merkle tree already resolves 2^20 partitions).
    splitter: Splitter = Field(
        default_factory=lambda: SizeSplitter(
            type="size", max_bytes_per_segment=50 * 2**30, max_partitions_per_segment=2**20
        )
    )
    # Off by default: `nodetool repair -st -et` refuses a range spanning two vnode ranges ("intersects a
    # local range but is not fully contained in one"); only a session per merged range would benefit.
    merge_ranges_with_same_replicas: bool = False
    # Segments with the same replicas sent in one repair command; Cassandra repairs them in one session,
    # so the per-session costs are paid once. 1 = one `nodetool repair -st -et` per segment.
    ranges_per_command: int = Field(default=1, ge=1, le=1024)
    parallel_repair_count: int = Field(default=3, ge=0, le=100_000)
    parallel_repair_percentage: float = Field(default=3.0, ge=0, le=100)
    intensity: float = Field(default=1.0, gt=0, le=1)
    segment_timeout: Duration = timedelta(hours=3)
    max_retries: int = Field(default=3, ge=0, le=20)  # the backoff doubles per retry: 2^20 x retry_backoff
    retry_backoff: Duration = timedelta(seconds=60)
    min_repair_interval: Duration = timedelta(hours=24)
    window: RepairWindow | None = None
    gc_grace_alarm: float = Field(default=0.8, gt=0, le=1)
    schedule: str = "0 1 * * *"
    # A table bigger than this factor x the median of its keyspace's selected tables is repaired as its
    # own unit, so it cannot hold the others back (CEP-37 repairs table by table). 0 = never split.
    split_outlier_tables: float = Field(default=10.0, le=1e6)
    # ... and holds more than this on an average replica node. A smaller table validates in minutes (256 GiB is
    # about 70 min at compaction's default 64 MiB/s), far inside table_max_repair_time, while a unit of its own
    # costs a second repair session on every range: on a 1000-node ring that doubles the sessions. 0 = any size.
    split_outlier_min_size: ByteCountOrZero = 256 * 2**30
    # CEP-37's name: repair time one unit may take in a run before the rest of it waits for the next run.
    table_max_repair_time: Duration | None = timedelta(hours=6)
    # Once only commands waiting for a node that is down remain, the run waits this long for it (polling who is
    # up) before leaving them for the next run: a node back from a restart is repaired the same night, as
    # Reaper's run (which stays open) and CEP-37 (which repairs a node once it is back) would. 0 = do not wait.
    wait_for_down_nodes: Duration = timedelta(hours=8)
    back_pressure: BackPressure = BackPressure()
    # The size of each node's data disk, for incremental repair's disk-headroom guard: one size for every node,
    # or {datacenter or address: size} (a node's entry over its datacenter's). A node's own Cassandra 4.1+
    # data_disk_usage_max_disk_size wins; with neither, the guard cannot measure the node and says so.
    data_disk_capacity: DiskCapacities = None
    # TTL of the repair history rows; rows of ranges no longer planned (nodes that left) expire after it.
    history_ttl: Duration = timedelta(days=30)
    # The most segments one plan (a night's run of one repair type, all units) may hold; more is refused before
    # the plan task builds them. Raise it only for a ring that needs it, knowing the plan task's memory.
    max_segments_per_plan: int = Field(default=DEFAULT_MAX_SEGMENTS_PER_PLAN, ge=1000, le=100_000_000)

    @field_validator("segment_timeout")
    @classmethod
    def _positive_timeout(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be positive")
        return value

    @field_validator("retry_backoff", "min_repair_interval", "wait_for_down_nodes")
    @classmethod
    def _not_negative(cls, value: timedelta) -> timedelta:
        if value < timedelta(0):
            raise ValueError("must not be negative")
        return value

    @field_validator("table_max_repair_time")
    @classmethod
    def _positive_or_no_limit(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError("must be positive, or null for no limit")
        return value

    @field_validator("history_ttl")
    @classmethod
    def _positive_ttl(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError(
                "must be positive and longer than the largest gc_grace_seconds (default 10 days), e.g. 30d"
            )
        return value

    @field_validator("split_outlier_tables")
    @classmethod
    def _off_or_at_least_one(cls, value: float) -> float:
        if value != 0 and not value >= 1:  # below 1 the median table itself would count as an outlier
            raise ValueError(f"must be 0 (never split) or a factor of at least 1, got {value}")
        return value

    @field_validator("schedule")
    @classmethod
    def _cron_expression(cls, value: str) -> str:
        text = value.strip()
        if text in _CRON_PRESETS or len(text.split()) == 5:
            return text
        raise ValueError(f"expected a 5-field cron expression or a preset like @daily, got {value!r}")

    @model_validator(mode="after")
    def _last_retry_within_reach(self) -> RepairConfig:
        # The delay before the last retry is retry_backoff x 2^(max_retries - 1) (`backoff_delay`); past the
        # largest duration a setting may hold it is no retry at all, and past year 9999 it overflows the clock.
        last = self.retry_backoff.total_seconds() * 2.0 ** max(self.max_retries - 1, 0)
        if self.max_retries and last > MAX_DURATION.total_seconds():
            raise ValueError(
                f"retry_backoff {format_duration(self.retry_backoff.total_seconds())} doubled for each of "
                f"max_retries {self.max_retries} retries waits {last / 86400:.0f} days before the last one, above "
                f"the cap of {MAX_DURATION.days}d (retry_backoff x 2^(max_retries - 1)); lower retry_backoff or "
                "max_retries"
            )
        return self

    @model_validator(mode="after")
    def _some_parallelism(self) -> RepairConfig:
        if self.parallel_repair_count == 0 and self.parallel_repair_percentage == 0:
            raise ValueError("parallel_repair_count and parallel_repair_percentage are both 0: nothing runs")
        return self

    @model_validator(mode="after")
    def _hosts_do_not_conflict(self) -> RepairConfig:
        if self.ignore_dcs and any(self.repair_types.settings(k).local_dc_only for k in self.enabled_types):
            # nodetool sends -local as the datacenters option and ignore_dcs as -hosts: Cassandra refuses both.
            raise ValueError("local_dc_only cannot be combined with ignore_dcs (nodetool refuses -local with -hosts)")
        return self

    @property
    def enabled_types(self) -> tuple[RepairType, ...]:
        """The repair types switched on, in the order a night runs them (`RUN_ORDER`: full, incremental, paxos,
        preview)."""
        return tuple(kind for kind in RUN_ORDER if self.repair_types.settings(kind).enabled)

    @property
    def session_type(self) -> RepairType:
        """The type a session run with this config repairs: `repair_type`, else full."""
        return self.repair_type or "full"

    def interval_of(self, kind: RepairType) -> timedelta:
        """The minimum time between two repairs of a segment by `kind`."""
        own = self.repair_types.settings(kind).min_repair_interval
        return self.min_repair_interval if own is None else own

    def for_type(self, kind: RepairType) -> RepairConfig:
        """This config as one type's run sees it: `repair_type` and `min_repair_interval` are the type's.
        The executor and the session runner read these two fields."""
        return self.model_copy(update={"repair_type": kind, "min_repair_interval": self.interval_of(kind)})


def _field_path(location: tuple[int | str, ...]) -> str:
    """`splitter.fixed.subranges_per_range` -> `splitter.subranges_per_range` (drop union tags)."""
    parts = [str(p) for i, p in enumerate(location) if not (i > 0 and location[i - 1] == "splitter")]
    return ".".join(parts) or "(top level)"


def _configuration_error(error: ValidationError, source: str) -> ConfigurationError:
    reasons = [f"`{_field_path(e['loc'])}`: {e['msg'].removeprefix('Value error, ')}" for e in error.errors()]
    return ConfigurationError(
        f"Invalid repair configuration in {source}: " + "; ".join(reasons) + ".",
        f"Correct the named field(s); {DEFAULT_CONFIG_PATH.name} shows every field with a valid value.",
    )


# Deeper than any field of the model (repair_types.incremental.min_free_disk_ratio is 3 levels): a deeper
# document is refused before validation, so no recursion runs out of stack on it.
MAX_NESTING = 8


def _nesting(value: object, limit: int = MAX_NESTING) -> int:
    """The nesting depth of mappings and lists in `value`, counted up to `limit + 1` at most (iteratively)."""
    deepest, pending = 0, [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, Mapping | list | tuple):
            deepest = max(deepest, depth + 1)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, Mapping) else item
            pending.extend((child, depth + 1) for child in children)
    return deepest


def _refuse_deep(data: object, source: str) -> None:
    if _nesting(data) > MAX_NESTING:
        raise ConfigurationError(
            f"Invalid repair configuration in {source}: nested deeper than {MAX_NESTING} levels.",
            f"No field nests that deep; write the fields as in {DEFAULT_CONFIG_PATH.name}.",
        )


def parse_config(data: Mapping[str, Any], source: str = "the given settings") -> RepairConfig:
    """Validate a mapping into a RepairConfig, or raise ConfigurationError naming each bad field."""
    _refuse_deep(data, source)
    try:
        return RepairConfig.model_validate(dict(data))
    except ValidationError as error:
        raise _configuration_error(error, source) from None
    except (OverflowError, RecursionError) as error:  # the model bounds its numbers; this is the last guard
        raise ConfigurationError(
            f"Invalid repair configuration in {source}: a value is out of range ({type(error).__name__}).",
            f"Use values within the bounds {DEFAULT_CONFIG_PATH.name} and docs/operators-guide.md give.",
        ) from None


def load_config(path: str | Path | None = None) -> RepairConfig:
    """Read a YAML repair configuration; without a path, the shipped default."""
    file = Path(path) if path is not None else DEFAULT_CONFIG_PATH
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except RecursionError:
        raise ConfigurationError(
            f"Repair configuration {file} nests too deeply to read.",
            f"No field nests more than {MAX_NESTING} levels; write the fields as in {DEFAULT_CONFIG_PATH.name}.",
        ) from None
    except ValueError as error:  # e.g. an integer longer than Python's 4300-digit limit
        raise ConfigurationError(
            f"Repair configuration {file} holds a value that cannot be read: {str(error)[:200]}.",
            "Use values within the bounds docs/operators-guide.md gives.",
        ) from None
    except OSError as error:
        raise ConfigurationError(
            f"Cannot read repair configuration {file}: {error.strerror}.",
            "Give the path of a readable YAML file, or omit it to use the shipped default.",
        ) from None
    except yaml.YAMLError as error:
        raise ConfigurationError(
            f"Repair configuration {file} is not valid YAML: {error}.", "Fix the YAML syntax."
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigurationError(
            f"Repair configuration {file} must be a mapping of fields, not {type(data).__name__}.",
            "Write `field: value` lines at the top level, as in default_config.yaml.",
        )
    return parse_config(data, str(file))


def _plain(value: Any) -> Any:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, time):
        return value.strftime("%H:%M")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def dump_config(config: RepairConfig) -> dict[str, Any]:
    """The configuration as plain JSON values (durations in seconds, times as HH:MM) that
    `parse_config` reads back to an equal configuration: for XCom and the run record."""
    return {k: _plain(v) for k, v in config.model_dump().items()}


def _nest(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted keys (`window.start`) as nested mappings, so flat Airflow Params can override one field."""
    nested: dict[str, Any] = {}
    for key, value in overrides.items():
        *parents, leaf = str(key).split(".")
        target = nested
        for parent in parents:
            target = target.setdefault(parent, {})
            if not isinstance(target, dict):
                raise ConfigurationError(
                    f"Override `{key}` conflicts with a plain value given for `{parent}`.",
                    "Give either the whole field or its dotted sub-fields, not both.",
                )
        target[leaf] = value
    return nested


_SPLITTER_FIELDS = {
    "fixed": set(FixedSplitter.model_fields) - {"type"},
    "size": set(SizeSplitter.model_fields) - {"type"},
}


def _implied_type(value: Mapping[str, Any]) -> object:
    """A mapping's `type`, or the one splitter type its fields belong to (`{subranges_per_range: 4}` is fixed)."""
    if "type" in value:
        return value["type"]
    kinds = [kind for kind, fields in _SPLITTER_FIELDS.items() if value and set(value) <= fields]
    return kinds[0] if len(kinds) == 1 else None


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        implied = None
        if isinstance(value, Mapping):  # a splitter without `type` is the one its fields belong to
            implied = _implied_type(value) if key == "splitter" else value.get("type")
        same_kind = implied is None or implied == _type_of(current)
        if not same_kind and "type" not in value:
            value = {"type": implied, **value}
        if isinstance(current, dict) and isinstance(value, Mapping) and same_kind:
            merged[key] = _merge(current, value)
        else:
            merged[key] = value
    return merged


def _type_of(value: object) -> object:
    return value.get("type") if isinstance(value, dict) else None


def apply_overrides(config: RepairConfig, overrides: Mapping[str, Any] | None) -> RepairConfig:
    """A copy of `config` with per-run overrides (e.g. Airflow Params) applied and re-validated.

    Nested mappings merge field by field; dotted keys address one sub-field; a splitter override with a
    different `type` replaces the splitter instead of merging into it. None or {} leaves config as is.
    """
    if not overrides:
        return config
    _refuse_deep(overrides, "the run overrides")
    base = config.model_dump(exclude_unset=False)
    return parse_config(_merge(base, _nest(overrides)), "the run overrides")


# The fields a run (Airflow params, `config_overrides`) may set, as dotted paths; a path covers its sub-fields.
# Everything else is file-only: the safety settings (back_pressure, data_disk_capacity, the incremental
# min_free_disk_ratio, history_ttl, max_segments_per_plan, ...) and the ones that shape what a night covers.
RUN_OVERRIDABLE: tuple[str, ...] = (
    "enabled",  # only to switch a run off: the file's `enabled: false` wins
    "keyspaces",
    "tables",
    "repair_type",
    *(
        f"repair_types.{kind}.{name}"
        for kind in REPAIR_TYPES
        for name in (
            "enabled",
            "min_repair_interval",
            "parallelism",
            "local_dc_only",
            "job_threads",
            "repair_out_of_sync",
        )
    ),
    "priority_hosts",
    "force_repair_hosts",
    "min_repair_interval",
    "window",
    "splitter",  # within the floors and caps the model sets
    "ranges_per_command",
    "parallel_repair_count",  # no higher than the file's value
    "parallel_repair_percentage",  # no higher than the file's value
    "intensity",  # no higher than the file's value
    "segment_timeout",
    "max_retries",
    "retry_backoff",
    "table_max_repair_time",
    "wait_for_down_nodes",
)
_OVERRIDABLE_TEXT = ", ".join(
    [p for p in RUN_OVERRIDABLE if not p.startswith("repair_types.")]
    + ["repair_types.<type>.(enabled, min_repair_interval, parallelism, local_dc_only, job_threads, "
       "repair_out_of_sync)"]
)  # fmt: skip
# Run-overridable fields a run may only lower: more parallelism or intensity than the file allows is refused.
_NO_HIGHER_THAN_FILE = ("parallel_repair_count", "parallel_repair_percentage", "intensity")


def _paths(nested: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of `nested`, descending into mappings only while no allowed path covers the prefix."""
    found: list[str] = []
    for key, value in nested.items():
        path = f"{prefix}{key}"
        covered = any(path == allowed or path.startswith(allowed + ".") for allowed in RUN_OVERRIDABLE)
        below = any(allowed.startswith(path + ".") for allowed in RUN_OVERRIDABLE)
        if not covered and below and isinstance(value, Mapping):
            found.extend(_paths(value, path + "."))
        else:
            found.append(path)
    return found


def _file_only(path: str) -> bool:
    """A known field the run may not set (an unknown one is left to the model, which names it as unknown)."""
    if any(path == allowed or path.startswith(allowed + ".") for allowed in RUN_OVERRIDABLE):
        return False
    head, *rest = path.split(".")
    if head != "repair_types" or not rest:
        return head in RepairConfig.model_fields
    return len(rest) < 2 or rest[1] in RepairTypeSettings.model_fields


def apply_run_overrides(
    config: RepairConfig, overrides: Mapping[str, Any] | None, file_config: RepairConfig | None = None
) -> RepairConfig:
    """`apply_overrides` for one run's settings (Airflow params), which cannot defeat the file's safety:

    - only the fields of RUN_OVERRIDABLE may be set; a file-only field is refused, naming it;
    - `enabled: true` cannot switch on a repair the file switched off (the run stays disabled);
    - parallel_repair_count, parallel_repair_percentage and intensity may be lowered, not raised.

    `file_config` is the configuration file's (default: `config`), the one these rules compare with.
    """
    if not overrides:
        return config
    file_config = file_config or config
    _refuse_deep(overrides, "the run overrides")
    refused = [path for path in _paths(_nest(overrides)) if _file_only(path)]
    if refused:
        names = ", ".join(f"`{path}`" for path in refused)
        raise ConfigurationError(
            f"The run overrides set {names}, which only the configuration file may set (a safety setting, or "
            "one that shapes what a night covers).",
            "Edit the configuration file named by $RINGWARD_REPAIR_CONFIG (read again at every run), or leave "
            f"the field out of the run's params. A run may set: {_OVERRIDABLE_TEXT}.",
        )
    changed = apply_overrides(config, overrides)
    raised = [
        f"`{name}` {getattr(changed, name)} > {getattr(file_config, name)}"
        for name in _NO_HIGHER_THAN_FILE
        if getattr(changed, name) > getattr(file_config, name)
    ]
    if raised:
        raise ConfigurationError(
            f"The run overrides raise {', '.join(raised)} (the configuration file's value): a run may lower "
            "these, never raise them.",
            "Give a value no higher than the file's, or raise it in the configuration file named by "
            "$RINGWARD_REPAIR_CONFIG.",
        )
    if not file_config.enabled and changed.enabled:  # the file's kill switch wins over any run param
        changed = changed.model_copy(update={"enabled": False})
    return changed
