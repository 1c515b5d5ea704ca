"""What a repair status covers: the configuration its segments are planned with, and which keyspaces and
tables the nightly repair leaves out (and why), so a status never lists a table the repair does not touch
and never hides one silently.

Shared by `ringward repair status` and the Repair page of the Airflow UI.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ringward.errors import ConfigurationError
from ringward.repair._config import NameFilter, RepairConfig, parse_config
from ringward.repair._segments import LOCAL_KEYSPACES, select_units
from ringward.repair._segments import _selected as _matches

__all__ = ["RECENT_RUNS", "Exclusion", "StatusConfig", "repair_scope", "status_config"]


@dataclass(frozen=True)
class StatusConfig:
    """The configuration a status is computed with; `problem` when the last run's could not be used."""

    config: RepairConfig
    problem: ConfigurationError | None = None

    @property
    def note(self) -> str | None:
        """One line for a person: what went wrong and what was done instead."""
        if self.problem is None:
            return None
        return f"{self.problem} Using the base configuration's settings instead (segment ids may differ)."


def status_config(base: RepairConfig, recorded: Mapping[str, Any] | None, run_id: str | None) -> StatusConfig:
    """The last run's settings (splitter, ignored DCs ...) so segment ids match its history, with the base
    configuration's keyspace and table selection (a run restricted by its parameters must not hide tables).

    `recorded`: the configuration stored with the last run (None or empty: no run, the base is used). A
    recorded configuration this version cannot read gives the base and says so in `problem`.
    """
    if not recorded:
        return StatusConfig(base)
    settings = dict(recorded)
    settings.update(keyspaces=base.keyspaces.model_dump(), tables=base.tables.model_dump())
    try:
        return StatusConfig(parse_config(settings, f"the configuration recorded with run {run_id}"))
    except ConfigurationError as error:
        return StatusConfig(base, error)


@dataclass(frozen=True)
class Exclusion:
    """A keyspace (`table` None) or one table the repair leaves out, and why."""

    keyspace: str
    table: str | None
    reason: str

    @property
    def name(self) -> str:
        return self.keyspace if self.table is None else f"{self.keyspace}.{self.table}"


def _filter(kind: str, names: NameFilter) -> str:
    return f"{kind} include {list(names.include)} exclude {list(names.exclude)}"


def _selected(config: RepairConfig, keyspace: str, table: str) -> bool:
    return bool(select_units({keyspace: [table]}, config))


RECENT_RUNS = 10  # the runs whose scope counts: about ten nights of a daily schedule


def repair_scope(
    schema: Mapping[str, Sequence[str]],
    config: RepairConfig,
    runs: Sequence[tuple[str, Mapping[str, Any] | None]] = (),
) -> tuple[list[tuple[str, str]], list[Exclusion]]:
    """(the keyspace.table pairs the repair covers, sorted; what it leaves out, with the reason).

    `schema`: {keyspace: [table, ...]} of the cluster. `config`: the configuration (file) whose selection
    the repair applies. `runs`: (run id, recorded configuration) of the recorded runs, latest first; the
    last `RECENT_RUNS` of them with a readable configuration narrow the selection to what at least one of
    them selected (runs limited by their parameters repair only part of it); without any, nothing narrows.
    """
    scopes: list[tuple[str, RepairConfig]] = []
    for run_id, recorded in list(runs)[:RECENT_RUNS]:
        if not recorded:
            continue
        try:
            scopes.append((run_id, parse_config(dict(recorded), f"the configuration recorded with run {run_id}")))
        except ConfigurationError:
            continue  # `status_config` reports an unreadable configuration; it narrows nothing
    covered: list[tuple[str, str]] = []
    excluded: list[Exclusion] = []
    for keyspace in sorted(schema):
        tables = sorted(set(schema[keyspace]))
        if keyspace in LOCAL_KEYSPACES:
            excluded.append(Exclusion(keyspace, None, "node-local system keyspace: each node keeps its own copy, "
                                      "there is nothing to repair"))  # fmt: skip
            continue
        if not _matches(keyspace, config.keyspaces.include, config.keyspaces.exclude):
            reason = f"left out by the configuration: {_filter('keyspaces', config.keyspaces)}"
            excluded.append(Exclusion(keyspace, None, reason))
            continue
        if not tables:
            excluded.append(Exclusion(keyspace, None, "no tables"))
            continue
        for table in tables:
            if not _selected(config, keyspace, table):
                excluded.append(
                    Exclusion(keyspace, table, f"left out by the configuration: {_filter('tables', config.tables)}")
                )
            elif scopes and not any(_selected(scope, keyspace, table) for _, scope in scopes):
                excluded.append(Exclusion(keyspace, table, _outside(scopes)))
            else:
                covered.append((keyspace, table))
    return covered, _collapse(excluded, schema)


def _outside(scopes: list[tuple[str, RepairConfig]]) -> str:
    run_id, latest = scopes[0]
    runs = "the latest run" if len(scopes) == 1 else f"any of the {len(scopes)} latest runs"
    return (f"outside the scope of {runs} (latest: {run_id}, {_filter('keyspaces', latest.keyspaces)}, "
            f"{_filter('tables', latest.tables)})")  # fmt: skip


def _collapse(excluded: list[Exclusion], schema: Mapping[str, Sequence[str]]) -> list[Exclusion]:
    """A keyspace whose every table is left out for the same reason is one line."""
    out: list[Exclusion] = []
    by_keyspace: dict[str, list[Exclusion]] = {}
    for item in excluded:
        by_keyspace.setdefault(item.keyspace, []).append(item)
    for keyspace, items in by_keyspace.items():
        reasons = {i.reason for i in items}
        whole = {i.table for i in items} == set(schema[keyspace]) and len(reasons) == 1
        if whole and items[0].table is not None and len(items) > 1:
            out.append(Exclusion(keyspace, None, f"all {len(items)} tables: {items[0].reason}"))
        else:
            out.extend(items)
    return out
