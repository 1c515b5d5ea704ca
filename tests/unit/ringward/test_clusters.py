"""Cluster declarations (ringward.clusters): what a clusters file may say, and the refusals that name the fix."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from ringward.clusters import (
    ClusterDeclaration,
    check_cluster_name,
    cluster_suffix,
    load_clusters,
    parse_clusters,
)
from ringward.errors import ConfigurationError

TWO = """\
clusters:
  - name: eu_west
    cassandra_conn_id: cassandra_eu_west
    nodetool_conn_id: nodetool_eu_west
    spark_cassandra_conn_id: cassandra_spark_eu_west
    repair_config: /etc/ringward/eu_west.yaml
    schedule: "0 2 * * *"
  - name: us_east
    cassandra_conn_id: cassandra_us_east
    nodetool_conn_id: nodetool_us_east
    spark_cassandra_conn_id: cassandra_spark_us_east
    reaper_conn_id: reaper_us
    pool: repair_us
"""


def _entry(name: str, **fields: str) -> dict[str, str]:
    return {"name": name, "cassandra_conn_id": f"cassandra_{name}", "nodetool_conn_id": f"nodetool_{name}",
            "spark_cassandra_conn_id": f"spark_{name}", **fields}  # fmt: skip


def test_a_file_declares_clusters_with_per_cluster_defaults(tmp_path: Path) -> None:
    path = tmp_path / "clusters.yaml"
    path.write_text(TWO, encoding="utf-8")
    eu, us = load_clusters(path)
    assert (eu.name, eu.cassandra_conn_id, eu.nodetool_conn_id) == ("eu_west", "cassandra_eu_west", "nodetool_eu_west")
    assert eu.repair_config == "/etc/ringward/eu_west.yaml" and eu.schedule == "0 2 * * *"
    # Not given: a pool and a Reaper connection of the cluster's own, the shared Spark cluster.
    assert eu.repair_pool == "ringward_repair__eu_west" and eu.reaper == "reaper_default__eu_west"
    assert eu.spark_conn_id == "spark_default"
    assert (us.repair_pool, us.reaper, us.schedule, us.repair_config) == ("repair_us", "reaper_us", None, None)


@pytest.mark.parametrize("name", ["eu_west_1", "a", "prod2"])
def test_safe_names_are_accepted(name: str) -> None:
    assert check_cluster_name(name) == name
    assert cluster_suffix(name) == f"__{name}"
    assert parse_clusters({"clusters": [_entry(name)]})[0].name == name


@pytest.mark.parametrize("name", ["EU", "eu-west", "1st", "eu__west", "eu_", "_eu", "", "eu west", "x" * 41, "é"])
def test_unsafe_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        check_cluster_name(name)
    assert "lower-case letters, digits and single underscores" in refused.value.fix
    with pytest.raises(ConfigurationError) as in_file:
        parse_clusters({"clusters": [_entry(name)]}, "clusters.yaml")
    assert "`name`" in in_file.value.problem and "clusters.yaml" in in_file.value.problem


def test_no_cluster_suffix_keeps_todays_ids() -> None:
    assert cluster_suffix(None) == ""


def test_a_missing_connection_is_named_with_its_cluster() -> None:
    entry = _entry("eu")
    del entry["nodetool_conn_id"]
    with pytest.raises(ConfigurationError) as refused:
        parse_clusters({"clusters": [entry]})
    assert "cluster 'eu', `nodetool_conn_id`: Field required" in refused.value.problem
    assert "cassandra_conn_id" in refused.value.fix and "nodetool_conn_id" in refused.value.fix


def test_an_unknown_field_and_a_bad_schedule_are_refused() -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse_clusters({"clusters": [_entry("eu", cassandra="x", schedule="every night")]})
    assert "`cassandra`" in refused.value.problem and "`schedule`" in refused.value.problem
    assert "cron" in refused.value.problem


def test_a_second_cluster_numbered_when_it_has_no_name() -> None:
    unnamed = _entry("us")
    del unnamed["name"]
    with pytest.raises(ConfigurationError) as refused:
        parse_clusters({"clusters": [_entry("eu"), unnamed]})
    assert "cluster #2, `name`: Field required" in refused.value.problem


@pytest.mark.parametrize(
    ("field", "value"),
    [("cassandra_conn_id", "cassandra_default"), ("nodetool_conn_id", "ringward_nodetool"),
     ("spark_cassandra_conn_id", "cassandra_spark"), ("pool", "ringward_repair"), ("reaper_conn_id", "reaper")],
)  # fmt: skip
def test_two_clusters_never_share_a_connection_or_a_pool(field: str, value: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse_clusters({"clusters": [_entry("eu", **{field: value}), _entry("us", **{field: value})]})
    assert f"clusters 'eu', 'us' share {field} {value!r}" in refused.value.problem
    assert "its own name, connections and pool" in refused.value.fix


def test_the_default_pool_of_one_cluster_cannot_be_another_clusters_pool() -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse_clusters({"clusters": [_entry("eu"), _entry("us", pool="ringward_repair__eu")]})
    assert "share pool 'ringward_repair__eu'" in refused.value.problem


def test_a_cluster_declared_twice_is_refused() -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse_clusters({"clusters": [_entry("eu"), {**_entry("eu"), "cassandra_conn_id": "other"}]})
    assert "cluster 'eu' is declared more than once" in refused.value.problem


def test_the_spark_cluster_may_be_shared() -> None:
    eu, us = parse_clusters({"clusters": [_entry("eu", spark_conn_id="spark"), _entry("us", spark_conn_id="spark")]})
    assert eu.spark_conn_id == us.spark_conn_id == "spark"


@pytest.mark.parametrize(
    ("data", "problem"),
    [(None, "one key, `clusters`"), ([], "one key, `clusters`"), ({"cluster": []}, "one key, `clusters`"),
     ({"clusters": []}, "declares no cluster"), ({"clusters": "eu"}, "declares no cluster")],
)  # fmt: skip
def test_a_file_of_the_wrong_shape_says_what_to_write(data: object, problem: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse_clusters(data, "f.yaml")
    assert problem in refused.value.problem and "f.yaml" in refused.value.problem
    assert refused.value.fix


def test_a_missing_or_broken_file_names_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as missing:
        load_clusters(tmp_path / "absent.yaml")
    assert "absent.yaml" in missing.value.problem and "$RINGWARD_CLUSTERS" in missing.value.fix
    broken = tmp_path / "broken.yaml"
    broken.write_text("clusters: [\n", encoding="utf-8")
    with pytest.raises(ConfigurationError) as invalid:
        load_clusters(broken)
    assert "not valid YAML" in invalid.value.problem and invalid.value.fix == "Fix the YAML syntax."


def test_a_declaration_is_frozen() -> None:
    cluster = ClusterDeclaration.model_validate(_entry("eu"))
    with pytest.raises(ValueError, match="frozen"):
        cluster.name = "us"  # type: ignore[misc]


def test_ringward_is_no_cluster_name_its_own_assets_use_it() -> None:
    """`cassandra://ringward/keyspace_migration` is the migrations' own Asset: a cluster named `ringward` would
    give its keyspace `keyspace_migration` the same URI."""
    with pytest.raises(ConfigurationError) as refused:
        check_cluster_name("ringward")
    assert "reserved" in refused.value.problem and "ringward_prod" in refused.value.fix
    with pytest.raises(ConfigurationError) as in_file:
        parse_clusters({"clusters": [_entry("ringward")]})
    assert "cluster 'ringward', `name`: 'ringward' is reserved" in in_file.value.problem
    assert check_cluster_name("ringward_prod") == "ringward_prod"


SMTP = "airflow.providers.smtp.notifications.smtp.SmtpNotifier"


def test_a_nightly_deadline_is_declared_with_a_duration_a_notifier_and_its_arguments(tmp_path: Path) -> None:
    path = tmp_path / "clusters.yaml"
    path.write_text(
        TWO.replace(
            '    schedule: "0 2 * * *"\n',
            f'    schedule: "0 2 * * *"\n    nightly_deadline:\n      after: 6h30m\n      notifier: {SMTP}\n'
            "      kwargs: {to: oncall@example.com}\n",
        ),
        encoding="utf-8",
    )
    eu, us = load_clusters(path)
    assert eu.nightly_deadline is not None and us.nightly_deadline is None
    deadline = eu.nightly_deadline
    assert (deadline.after, deadline.notifier, deadline.kwargs) == (
        timedelta(hours=6, minutes=30), SMTP, {"to": "oncall@example.com"})  # fmt: skip


@pytest.mark.parametrize(
    ("deadline", "problem"),
    [
        ("6h", "`nightly_deadline`: expected a mapping with `after` (e.g. 6h) and `notifier`"),
        ({"notifier": SMTP}, "`nightly_deadline.after`: Field required"),
        ({"after": "6h"}, "`nightly_deadline.notifier`: Field required"),
        ({"after": "six hours", "notifier": SMTP}, "`nightly_deadline.after`: expected a duration such as"),
        ({"after": 0, "notifier": SMTP}, "`nightly_deadline.after`: expected a duration above 0 and at most 7d"),
        ({"after": "8d", "notifier": SMTP}, "`nightly_deadline.after`: expected a duration above 0 and at most 7d"),
        ({"after": "6h", "notifier": "SmtpNotifier"}, "`nightly_deadline.notifier`: give the notifier class's dotted"),
        ({"after": "6h", "notifier": SMTP, "kwargs": {"context": {}}}, "`nightly_deadline.kwargs`: `context` is"),
        ({"after": "6h", "notifier": SMTP, "to": "x"}, "`nightly_deadline.to`: Extra inputs are not permitted"),
    ],
)
def test_a_bad_nightly_deadline_names_the_cluster_the_field_and_the_fix(deadline: object, problem: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse_clusters({"clusters": [{**_entry("eu"), "nightly_deadline": deadline}]}, "clusters.yaml")
    assert f"cluster 'eu', {problem}" in refused.value.problem
    assert "`nightly_deadline` holds `after`" in refused.value.fix and "import path" in refused.value.fix


def test_the_deadline_fields_are_named_in_the_fix_only_when_the_deadline_is_wrong() -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse_clusters({"clusters": [_entry("eu", schedule="nightly")]})
    assert "nightly_deadline" not in refused.value.fix
