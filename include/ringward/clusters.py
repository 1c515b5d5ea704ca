"""Clusters as configuration: one declaration per Cassandra cluster that one Airflow deployment serves.

A YAML file lists the clusters; each gets its own migration, rollback and nightly repair DAGs (ids suffixed
`__<name>`), its own connections and its own repair pool, so migrations and repairs of different clusters
never share a connection or a pool slot. This module only validates the declarations (pure: no Airflow);
`ringward_airflow.dag_factory` finds the file and builds the DAGs.

    clusters:
      - name: eu_west
        cassandra_conn_id: cassandra_eu_west
        nodetool_conn_id: nodetool_eu_west
        spark_cassandra_conn_id: cassandra_spark_eu_west
        repair_config: /opt/airflow/ringward/eu_west_repair.yaml
        nightly_deadline:                  # optional: a Deadline Alert on the nightly DAG
          after: 6h
          notifier: airflow.providers.smtp.notifications.smtp.SmtpNotifier
          kwargs: {to: cassandra-oncall@example.com}
      - name: us_east
        ...

Every invalid declaration is a ConfigurationError naming the cluster, the field and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ringward.errors import ConfigurationError
from ringward.repair import parse_duration

__all__ = [
    "CLUSTER_NAME_PATTERN",
    "DEFAULT_CASSANDRA_CONN_ID",
    "MIGRATION_DAG_ID",
    "REPAIR_DAG_ID",
    "RESERVED_CLUSTER_NAMES",
    "ROLLBACK_DAG_ID",
    "ClusterDeclaration",
    "ClusterTarget",
    "NightlyDeadline",
    "check_cluster_name",
    "cluster_suffix",
    "cluster_targets",
    "default_reaper_conn_id",
    "default_repair_pool",
    "load_clusters",
    "metrics_cluster",
    "parse_clusters",
]

# Lower-case letter first, then lower-case letters, digits and `_`; at most 40 characters. The name goes into
# DAG ids, pool names, connection ids, tags and URLs: nothing in it needs escaping anywhere, and `__` (the
# separator of the DAG id suffix) cannot start or end it.
CLUSTER_NAME_PATTERN = r"^[a-z](?:[a-z0-9_]{0,38}[a-z0-9])?$"
# Airflow's own limit on connection and pool ids (250 characters, letters, digits, `_`, `.`, `-`).
_ID_PATTERN = r"^[A-Za-z0-9_.-]{1,250}$"
_CRON_PRESETS = {"@once", "@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually", "@midnight"}
_EXAMPLE = "docs/operators-guide.md, 0.3a (Many clusters)"
_DEADLINE_FIELDS = (
    "; `nightly_deadline` holds `after` (a duration such as 6h, at most 7d), `notifier` (a notifier class's "
    "dotted import path) and optionally `kwargs` (the notifier's arguments)"
)
# The DAG ids of the single-cluster deployment; a declared cluster's are these with `__<name>` appended.
MIGRATION_DAG_ID = "keyspace_migration"
ROLLBACK_DAG_ID = "keyspace_migration_rollback"
REPAIR_DAG_ID = "nightly_subrange_repair"
DEFAULT_CASSANDRA_CONN_ID = "cassandra_default"  # the single cluster's CQL connection
# `ringward` is the authority of the migration DAGs' own Assets (`cassandra://ringward/keyspace_migration...`,
# ringward.assets): a cluster of that name would give its keyspaces' Assets the same URIs.
RESERVED_CLUSTER_NAMES = frozenset({"ringward"})
_RESERVED_FIX = "Name the cluster otherwise, e.g. ringward_prod: `ringward` names ringward's own Assets."
# A notifier class's dotted import path, as Airflow's Deadline Alert callbacks take it.
_DOTTED_PATH = r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$"
# A nightly run longer than a week is not a night: a deadline past it never alerts in time.
_MAX_DEADLINE = timedelta(days=7)


def check_cluster_name(name: str) -> str:
    """The name, or a ConfigurationError saying what a cluster name may hold."""
    if not isinstance(name, str) or not re.fullmatch(CLUSTER_NAME_PATTERN, name) or "__" in name:
        raise ConfigurationError(
            f"Cluster name {name!r} is not allowed: it becomes part of DAG ids, pools and connection ids.",
            "Use 1 to 40 lower-case letters, digits and single underscores, starting with a letter and not "
            "ending with an underscore, e.g. eu_west_1.",
        )
    if name in RESERVED_CLUSTER_NAMES:
        raise ConfigurationError(f"Cluster name {name!r} is reserved.", _RESERVED_FIX)
    return name


def cluster_suffix(cluster: str | None) -> str:
    """`__<cluster>` appended to DAG ids; empty for the single-cluster deployment (today's DAG ids)."""
    return "" if cluster is None else f"__{check_cluster_name(cluster)}"


def metrics_cluster(cluster: str | None, cassandra_conn_id: str) -> str:
    """The `cluster` tag of ringward's metrics (and the cluster its alerts name): the declared cluster's name.

    The single-cluster deployment (no clusters file, `cluster=None`) has no declared name: the tag is then its CQL
    connection id (`cassandra_default` unless the DAG was given another), the value the tag had before clusters
    were declared, so a single cluster's dashboards and alert rules keep matching."""
    return cassandra_conn_id if cluster is None else check_cluster_name(cluster)


def default_repair_pool(cluster: str | None) -> str:
    """The pool a cluster's nightly repair task runs in unless its declaration names one."""
    return f"ringward_repair{cluster_suffix(cluster)}"


def default_reaper_conn_id(cluster: str | None) -> str:
    """The Reaper connection of a cluster unless its declaration names one (absent: no Reaper is consulted).
    Per cluster: a Reaper connection names the cluster Reaper knows (extra `cluster_name`)."""
    return f"reaper_default{cluster_suffix(cluster)}"


class NightlyDeadline(BaseModel):
    """A Deadline Alert on a cluster's nightly DAG: `notifier(**kwargs)` is called (by Airflow's triggerer) when a
    night is still running `after` it was queued. `notifier`: a BaseNotifier class's dotted import path (one that
    implements `async_notify`, as the SMTP and Slack providers' do); `ringward_airflow.alerts` builds the alert."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    after: timedelta
    notifier: str = Field(pattern=_DOTTED_PATH)
    kwargs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("after", mode="before")
    @classmethod
    def _duration(cls, value: object) -> timedelta:
        after = parse_duration(value)
        if not timedelta(0) < after <= _MAX_DEADLINE:
            raise ValueError(f"expected a duration above 0 and at most 7d, e.g. 6h, got {value!r}")
        return after

    @field_validator("kwargs")
    @classmethod
    def _no_context(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "context" in value:
            raise ValueError("`context` is Airflow's own argument of the notifier; remove it from `kwargs`")
        return value


class ClusterDeclaration(BaseModel):
    """One cluster: its name and the connections, repair configuration, schedule and pool of its DAGs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=CLUSTER_NAME_PATTERN)
    # Required: a default would let two declarations reach the same cluster through `cassandra_default`.
    cassandra_conn_id: str = Field(pattern=_ID_PATTERN)
    nodetool_conn_id: str = Field(pattern=_ID_PATTERN)
    # The Spark cluster may be shared; the read-only CQL login of the Spark verification is per cluster.
    spark_conn_id: str = Field(default="spark_default", pattern=_ID_PATTERN)
    spark_cassandra_conn_id: str = Field(default="cassandra_spark", pattern=_ID_PATTERN)
    reaper_conn_id: str | None = Field(default=None, pattern=_ID_PATTERN)
    # The nightly repair's YAML configuration; None: $RINGWARD_REPAIR_CONFIG, else the shipped default.
    repair_config: str | None = Field(default=None, min_length=1)
    # The nightly repair's schedule; None: the repair configuration's `schedule`.
    schedule: str | None = None
    pool: str | None = Field(default=None, pattern=_ID_PATTERN)
    # A Deadline Alert on the nightly DAG; None: none.
    nightly_deadline: NightlyDeadline | None = None

    @field_validator("name")
    @classmethod
    def _single_underscores(cls, value: str) -> str:
        if "__" in value:
            raise ValueError("must not contain `__` (it separates the DAG id from the cluster name)")
        if value in RESERVED_CLUSTER_NAMES:
            raise ValueError(f"{value!r} is reserved (ringward's own Assets use it); name the cluster otherwise")
        return value

    @field_validator("nightly_deadline", mode="before")
    @classmethod
    def _deadline_mapping(cls, value: object) -> object:
        if value is not None and not isinstance(value, Mapping | NightlyDeadline):
            raise ValueError(
                f"expected a mapping with `after` (e.g. 6h) and `notifier` (a notifier class's import path), "
                f"got {value!r}"
            )
        return value

    @field_validator("schedule")
    @classmethod
    def _cron_expression(cls, value: str | None) -> str | None:
        if value is None:
            return None
        text = value.strip()
        if text in _CRON_PRESETS or len(text.split()) == 5:
            return text
        raise ValueError(f"expected a 5-field cron expression or a preset like @daily, got {value!r}")

    @property
    def repair_pool(self) -> str:
        """`pool`, else `ringward_repair__<name>`."""
        return self.pool or default_repair_pool(self.name)

    @property
    def reaper(self) -> str:
        """`reaper_conn_id`, else `reaper_default__<name>`."""
        return self.reaper_conn_id or default_reaper_conn_id(self.name)


@dataclass(frozen=True)
class ClusterTarget:
    """One cluster as the pages (Migration, Repair, Cluster) read it: its name (None: the single-cluster deployment),
    its CQL connection, its nightly repair's configuration file (None: $RINGWARD_REPAIR_CONFIG, else the shipped
    default) and the ids of its DAGs, made as the DAG factory makes them (`cluster_suffix`)."""

    name: str | None = None
    cassandra_conn_id: str = DEFAULT_CASSANDRA_CONN_ID
    repair_config: str | None = None

    @property
    def migration_dags(self) -> tuple[str, str]:
        """(its migration DAG, its rollback DAG)."""
        suffix = cluster_suffix(self.name)
        return MIGRATION_DAG_ID + suffix, ROLLBACK_DAG_ID + suffix

    @property
    def repair_dag(self) -> str:
        return REPAIR_DAG_ID + cluster_suffix(self.name)

    @property
    def dags(self) -> tuple[str, str, str]:
        """Every DAG of the cluster: migration, rollback, nightly repair."""
        return (*self.migration_dags, self.repair_dag)


def cluster_targets(declared: Sequence[ClusterDeclaration]) -> tuple[ClusterTarget, ...]:
    """The clusters the pages serve: one per declaration, in the file's order; without declarations, the single
    cluster (today's DAG ids and `cassandra_default`)."""
    return tuple(ClusterTarget(c.name, c.cassandra_conn_id, c.repair_config) for c in declared) or (ClusterTarget(),)


# What two clusters must not share: each cluster's ops state, leases and pauses stay in that cluster, and a
# pool slot held by one cluster's repair never holds back another's (the Spark cluster may be shared).
_NOT_SHARED: Mapping[str, Callable[[ClusterDeclaration], str]] = {
    "cassandra_conn_id": lambda c: c.cassandra_conn_id,
    "nodetool_conn_id": lambda c: c.nodetool_conn_id,
    "spark_cassandra_conn_id": lambda c: c.spark_cassandra_conn_id,
    "reaper_conn_id": lambda c: c.reaper,
    "pool": lambda c: c.repair_pool,
}


def _location(loc: tuple[int | str, ...], data: Sequence[Any]) -> str:
    if len(loc) >= 2 and loc[0] == "clusters" and isinstance(loc[1], int):
        entry = data[loc[1]] if loc[1] < len(data) else None
        name = entry.get("name") if isinstance(entry, Mapping) else None
        who = f"cluster {name!r}" if isinstance(name, str) else f"cluster #{loc[1] + 1}"
        field = ".".join(str(p) for p in loc[2:])
        return f"{who}, `{field}`" if field else who
    return ".".join(str(p) for p in loc) or "(top level)"


def parse_clusters(data: object, source: str = "the clusters file") -> tuple[ClusterDeclaration, ...]:
    """Validate `{"clusters": [...]}` into declarations, or raise ConfigurationError naming each problem."""
    if not isinstance(data, Mapping) or set(data) != {"clusters"}:
        raise ConfigurationError(
            f"{source} must be a mapping with one key, `clusters`, holding a list of cluster declarations.",
            f"Write `clusters:` followed by one `- name: ...` entry per cluster ({_EXAMPLE}).",
        )
    entries = data["clusters"]
    if not isinstance(entries, list) or not entries:
        raise ConfigurationError(
            f"{source} declares no cluster (`clusters` is {'empty' if entries in ([], None) else 'not a list'}).",
            "Declare at least one cluster, or drop the clusters file setting to get the single-cluster DAGs.",
        )
    clusters: list[ClusterDeclaration] = []
    problems: list[str] = []
    deadline_wrong = False
    for index, entry in enumerate(entries):
        try:
            clusters.append(ClusterDeclaration.model_validate(entry))
        except ValidationError as error:
            for e in error.errors():
                message = e["msg"].removeprefix("Value error, ")
                if e["type"] == "string_pattern_mismatch" and e["loc"] == ("name",):
                    message = "use lower-case letters, digits and single underscores, starting with a letter"
                if e["type"] == "string_pattern_mismatch" and e["loc"] == ("nightly_deadline", "notifier"):
                    message = ("give the notifier class's dotted import path, e.g. "
                               "airflow.providers.smtp.notifications.smtp.SmtpNotifier")  # fmt: skip
                problems.append(f"{_location(('clusters', index, *e['loc']), entries)}: {message}")
                deadline_wrong = deadline_wrong or e["loc"][:1] == ("nightly_deadline",)
    if problems:
        deadline = _DEADLINE_FIELDS if deadline_wrong else ""
        raise ConfigurationError(
            f"Invalid cluster declaration(s) in {source}: " + "; ".join(problems) + ".",
            "Correct the named field(s): each cluster needs `name`, `cassandra_conn_id` and `nodetool_conn_id`; "
            f"the other fields are optional{deadline} ({_EXAMPLE}).",
        )
    _refuse_shared(clusters, source)
    return tuple(clusters)


def _refuse_shared(clusters: Sequence[ClusterDeclaration], source: str) -> None:
    problems: list[str] = []
    names = [cluster.name for cluster in clusters]
    problems += [
        f"cluster {name!r} is declared more than once" for name in sorted({n for n in names if names.count(n) > 1})
    ]
    for field, value_of in _NOT_SHARED.items():
        users: dict[str, list[str]] = {}
        for cluster in clusters:
            users.setdefault(value_of(cluster), []).append(cluster.name)
        problems += [
            f"clusters {', '.join(map(repr, sharing))} share {field} {value!r}"
            for value, sharing in users.items()
            if len(sharing) > 1
        ]
    if problems:
        raise ConfigurationError(
            f"{source} gives two clusters the same setting: " + "; ".join(problems) + ".",
            "Give each cluster its own name, connections and pool: a shared one would let one cluster's "
            "migration or repair act on (or wait for) another.",
        )


def load_clusters(path: str | Path) -> tuple[ClusterDeclaration, ...]:
    """Read and validate a clusters YAML file."""
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigurationError(
            f"Cannot read the clusters file {file}: {error.strerror}.",
            "Give the path of a readable YAML file in $RINGWARD_CLUSTERS or `[ringward] clusters_file`, or unset "
            "both to get the single-cluster DAGs.",
        ) from None
    except (yaml.YAMLError, ValueError, RecursionError) as error:
        raise ConfigurationError(
            f"The clusters file {file} is not valid YAML: {str(error)[:300]}.", "Fix the YAML syntax."
        ) from None
    return parse_clusters(data, f"the clusters file {file}")
