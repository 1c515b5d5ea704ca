"""The DAG factory (ringward_airflow.dag_factory): DAG ids with and without a cluster, the connection ids and
the pool reaching every task that connects, one set of DAGs per declared cluster, and a DAG folder that holds
only the documented two-line files."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
from airflow.dag_processing.dagbag import DagBag
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.python import BranchPythonOperator, ShortCircuitOperator
from airflow.sdk import Asset, AssetAlias
from ringward.errors import ConfigurationError
from ringward_airflow.dag_factory import (
    MIGRATION_DOC,
    ROLLBACK_DOC,
    cluster_dags,
    clusters_file,
    keyspace_migration_dag,
    keyspace_migration_rollback_dag,
    nightly_repair_dag,
)
from ringward_airflow.governance import MigrationApprovalOperator
from ringward_airflow.migration_base import MigrationOperator
from ringward_airflow.migration_operators import MigrationRefusedOperator
from ringward_airflow.repair_operators import PlanRepairOperator, RepairReportOperator, RepairRunOperator
from ringward_airflow.spark_operators import SparkBaselineOperator, SparkVerifyOperator
from ringward_airflow.step_gate import StepGateOperator

ROOT = Path(__file__).resolve().parents[2]
DAGS_FOLDER = ROOT / "dags"
# Tasks of the migration DAGs that open no connection: they branch, gate, join, ask a person, or read XCom.
NOT_CONNECTING = (EmptyOperator, BranchPythonOperator, ShortCircuitOperator, StepGateOperator,
                  MigrationApprovalOperator, MigrationRefusedOperator)  # fmt: skip
MIGRATION_CONNECTIONS = {
    "cassandra_conn_id": "cql_b",
    "nodetool_conn_id": "nodetool_b",
    "spark_conn_id": "spark_b",
    "spark_cassandra_conn_id": "spark_login_b",
    "reaper_conn_id": "reaper_b",
}


def _clusters_file(tmp_path: Path, *names: str) -> Path:
    path = tmp_path / "clusters.yaml"
    lines = ["clusters:"]
    for name in names:
        lines += [
            f"  - name: {name}",
            f"    cassandra_conn_id: cassandra_{name}",
            f"    nodetool_conn_id: nodetool_{name}",
            f"    spark_cassandra_conn_id: spark_login_{name}",
            '    schedule: "30 3 * * *"',
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _no_clusters_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RINGWARD_CLUSTERS", raising=False)
    monkeypatch.delenv("AIRFLOW__RINGWARD__CLUSTERS_FILE", raising=False)


def test_without_a_cluster_the_dag_ids_are_todays() -> None:
    assert keyspace_migration_dag().dag_id == "keyspace_migration"
    assert keyspace_migration_rollback_dag().dag_id == "keyspace_migration_rollback"
    repair = nightly_repair_dag()
    assert repair.dag_id == "nightly_subrange_repair" and repair.get_task("repair").pool == "ringward_repair"
    assert not any(tag.startswith("cluster:") for tag in repair.tags)


def test_with_a_cluster_the_dag_ids_pool_and_tag_carry_its_name() -> None:
    assert keyspace_migration_dag(cluster="eu_west").dag_id == "keyspace_migration__eu_west"
    rollback = keyspace_migration_rollback_dag(cluster="eu_west")
    assert rollback.dag_id == "keyspace_migration_rollback__eu_west" and "cluster:eu_west" in rollback.tags
    repair = nightly_repair_dag(cluster="eu_west")
    assert repair.dag_id == "nightly_subrange_repair__eu_west"
    assert repair.get_task("repair").pool == "ringward_repair__eu_west"
    with pytest.raises(ConfigurationError, match="Cluster name 'EU-west' is not allowed"):
        nightly_repair_dag(cluster="EU-west")


def test_a_clusters_dag_is_todays_dag_under_another_id() -> None:
    """Same tasks, dependencies, params and settings as the single-cluster DAG: only ids and connections differ."""
    for build in (keyspace_migration_dag, keyspace_migration_rollback_dag, nightly_repair_dag):
        today, cluster = build(), build(cluster="b")
        assert sorted(cluster.task_dict) == sorted(today.task_dict) != []
        for task_id, task in today.task_dict.items():
            assert cluster.get_task(task_id).downstream_task_ids == task.downstream_task_ids, task_id
            assert cluster.get_task(task_id).trigger_rule == task.trigger_rule, task_id
        params = {name: today.params.get_param(name).dump() for name in today.params}
        assert {name: cluster.params.get_param(name).dump() for name in cluster.params} == params != {}
        assert cluster.schedule == today.schedule
        assert cluster.max_active_runs == today.max_active_runs
        assert cluster.doc_md and today.doc_md and cluster.doc_md.split("\n")[0] == today.doc_md.split("\n")[0]


@pytest.mark.parametrize("build", [keyspace_migration_dag, keyspace_migration_rollback_dag])
def test_every_connecting_migration_task_gets_the_clusters_connections(build) -> None:  # type: ignore[no-untyped-def]
    dag = build(cluster="b", **MIGRATION_CONNECTIONS)
    connecting = [task for task in dag.tasks if not isinstance(task, NOT_CONNECTING)]
    # Every other task connects through MigrationOperator's connections: a new kind of task must be listed above.
    assert [t.task_id for t in connecting if not isinstance(t, MigrationOperator)] == []
    assert {"precheck", "pause_repair_controllers", "step_1.pre_repair", "step_1.alter", "step_1.repair",
            "step_1.verify_preview", "cleanup", "report", "restore_repair_controllers",
            } <= {t.task_id for t in connecting}  # fmt: skip
    wrong = {
        task.task_id: (task.cassandra_conn_id, task.nodetool_conn_id, task.reaper_conn_id)
        for task in connecting
        if (task.cassandra_conn_id, task.nodetool_conn_id, task.reaper_conn_id) != ("cql_b", "nodetool_b", "reaper_b")
    }
    assert wrong == {}
    spark = [task for task in connecting if isinstance(task, SparkBaselineOperator | SparkVerifyOperator)]
    assert {t.task_id for t in spark} >= {"step_1.baseline", "step_1.verify_counts"}
    assert {(t.spark_conn_id, t.spark_cassandra_conn_id) for t in spark} == {("spark_b", "spark_login_b")}


def test_the_defaults_are_todays_connections() -> None:
    dag = keyspace_migration_dag()
    precheck, verify = dag.get_task("precheck"), dag.get_task("step_1.verify_counts")
    assert (precheck.cassandra_conn_id, precheck.nodetool_conn_id, precheck.reaper_conn_id) == (
        "cassandra_default", "ringward_nodetool", "reaper_default")  # fmt: skip
    assert (verify.spark_conn_id, verify.spark_cassandra_conn_id) == ("spark_default", "cassandra_spark")
    assert dag.doc_md == MIGRATION_DOC and keyspace_migration_rollback_dag().doc_md == ROLLBACK_DOC  # as today
    plan = nightly_repair_dag().get_task("plan")
    assert (plan.cassandra_conn_id, plan.nodetool_conn_id) == ("cassandra_default", "ringward_nodetool")


def test_every_nightly_task_gets_the_clusters_connections_pool_schedule_and_config(tmp_path: Path) -> None:
    config = tmp_path / "repair.yaml"
    config.write_text("schedule: '15 4 * * *'\n", encoding="utf-8")
    dag = nightly_repair_dag(cluster="b", cassandra_conn_id="cql_b", nodetool_conn_id="nodetool_b",
                             pool="pool_b", repair_config=config)  # fmt: skip
    tasks = {task.task_id: task for task in dag.tasks}
    assert sorted(tasks) == ["plan", "repair", "report"]
    assert isinstance(tasks["plan"], PlanRepairOperator) and isinstance(tasks["repair"], RepairRunOperator)
    assert isinstance(tasks["report"], RepairReportOperator)
    assert {task.cassandra_conn_id for task in tasks.values()} == {"cql_b"}
    assert tasks["plan"].nodetool_conn_id == tasks["repair"].nodetool_conn_id == "nodetool_b"
    assert {task.config_path for task in tasks.values()} == {str(config)}
    assert tasks["repair"].pool == "pool_b"
    # The schedule comes from the given configuration file unless given; the doc names what the DAG uses.
    assert dag.schedule == "15 4 * * *" and "`15 4 * * *`" in (dag.doc_md or "")
    assert "`pool_b` pool" in (dag.doc_md or "") and str(config) in (dag.doc_md or "")
    assert nightly_repair_dag(cluster="b", schedule="@daily", repair_config=config).schedule == "@daily"


def test_two_clusters_give_six_dags_with_disjoint_ids_connections_and_pools(tmp_path: Path) -> None:
    dags = cluster_dags(path=_clusters_file(tmp_path, "eu", "us"))
    kinds = ("keyspace_migration", "keyspace_migration_rollback", "nightly_subrange_repair")
    assert sorted(dags) == sorted(f"{kind}__{name}" for name in ("eu", "us") for kind in kinds)
    for dag_id, dag in dags.items():
        name = dag_id.rsplit("__", 1)[1]
        assert f"cluster:{name}" in dag.tags
        connecting = [t for t in dag.tasks if hasattr(t, "cassandra_conn_id")]
        assert connecting and {t.cassandra_conn_id for t in connecting} == {f"cassandra_{name}"}, dag_id
        assert {t.nodetool_conn_id for t in connecting if hasattr(t, "nodetool_conn_id")} == {f"nodetool_{name}"}
    pools = {name: dags[f"nightly_subrange_repair__{name}"].get_task("repair").pool for name in ("eu", "us")}
    assert pools == {"eu": "ringward_repair__eu", "us": "ringward_repair__us"}
    assert dags["nightly_subrange_repair__us"].schedule == "30 3 * * *"
    assert dags["keyspace_migration__eu"].get_task("precheck").reaper_conn_id == "reaper_default__eu"
    # The doc names the cluster's own Reaper connection and rollback DAG, not the single-cluster ones.
    doc = dags["keyspace_migration__eu"].doc_md or ""
    assert "`reaper_default__eu`" in doc and "`reaper_default`" not in doc
    assert "`keyspace_migration_rollback__eu`" in doc
    assert "Cluster: **eu** (connection `cassandra_eu`)" in doc


def test_every_task_that_sends_metrics_tags_the_declared_clusters_name(tmp_path: Path) -> None:
    """Issue 39: the `cluster` tag is the declared name, handed to each operator; the single cluster's is the CQL
    connection id (the tag's value before clusters were declared)."""
    from ringward_airflow.dag_factory import MIGRATION_DAG_ID

    dags = cluster_dags(path=_clusters_file(tmp_path, "eu", "us"))
    for dag_id, dag in dags.items():
        name = dag_id.rsplit("__", 1)[1]
        tagged = [t for t in dag.tasks if hasattr(t, "cluster")]
        assert {"report"} <= {t.task_id for t in tagged}, dag_id
        assert {t.cluster for t in tagged} == {name}, dag_id
    migration = dags["keyspace_migration__eu"]
    assert {migration.get_task(t).metrics_cluster for t in ("report", "approval")} == {"eu"}
    repair = dags["nightly_subrange_repair__us"]
    assert {repair.get_task(t).metrics_cluster for t in ("plan", "repair", "report")} == {"us"}
    single = keyspace_migration_dag()
    assert single.dag_id == MIGRATION_DAG_ID
    assert {single.get_task(t).metrics_cluster for t in ("report", "approval")} == {"cassandra_default"}
    assert nightly_repair_dag().get_task("report").metrics_cluster == "cassandra_default"


def test_only_the_asked_kinds_and_no_unknown_kind(tmp_path: Path) -> None:
    path = _clusters_file(tmp_path, "eu")
    assert list(cluster_dags("nightly_subrange_repair", path=path)) == ["nightly_subrange_repair__eu"]
    with pytest.raises(ConfigurationError, match="knows no DAG 'nightly'"):
        cluster_dags("nightly", path=path)


def test_without_a_clusters_file_todays_three_dags() -> None:
    assert clusters_file() is None
    assert sorted(cluster_dags()) == ["keyspace_migration", "keyspace_migration_rollback", "nightly_subrange_repair"]


def test_the_clusters_file_is_named_by_the_environment_or_airflows_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    eu = _clusters_file(tmp_path / "a", "eu")
    monkeypatch.setenv("AIRFLOW__RINGWARD__CLUSTERS_FILE", str(eu))
    assert clusters_file() == str(eu)
    assert sorted(cluster_dags()) == ["keyspace_migration__eu", "keyspace_migration_rollback__eu",
                                      "nightly_subrange_repair__eu"]  # fmt: skip
    (tmp_path / "b").mkdir()
    us = _clusters_file(tmp_path / "b", "us")
    monkeypatch.setenv("RINGWARD_CLUSTERS", str(us))  # the environment variable wins
    assert clusters_file() == str(us) and "nightly_subrange_repair__us" in cluster_dags()


def test_cluster_dags_deep_copy_and_cut_to_a_subset(tmp_path: Path) -> None:
    dags = cluster_dags(path=_clusters_file(tmp_path, "eu"))
    for dag_id in ("keyspace_migration__eu", "nightly_subrange_repair__eu"):
        dag = dags[dag_id]
        copied = copy.deepcopy(dag)
        assert sorted(copied.task_dict) == sorted(dag.task_dict) != []
        first = dag.tasks[0].task_id if dag_id.startswith("nightly") else "precheck"
        subset = dag.partial_subset(task_ids=[first], include_downstream=True, include_upstream=False)
        assert set(subset.task_dict) == {first, *dag.get_task(first).get_flat_relative_ids(upstream=False)}
        assert {t.cassandra_conn_id for t in subset.tasks if hasattr(t, "cassandra_conn_id")} == {"cassandra_eu"}


def _two_line_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "dags"
    folder.mkdir()
    for path in DAGS_FOLDER.glob("*.py"):
        shutil.copy(path, folder / path.name)
    return folder


def test_the_repos_dag_files_are_two_line_factory_calls() -> None:
    files = sorted(DAGS_FOLDER.glob("*.py"))
    assert [f.name for f in files] == ["keyspace_migration.py", "nightly_subrange_repair.py"]
    for file in files:
        text = file.read_text(encoding="utf-8")
        code = [line for line in text.split('"""')[-1].splitlines() if line.strip()]
        assert len(code) == 2 and code[0].startswith("from ringward_airflow.dag_factory import"), file.name


def test_a_dag_folder_of_the_two_line_files_imports_without_errors(tmp_path: Path) -> None:
    bag = DagBag(dag_folder=str(_two_line_folder(tmp_path)))
    assert bag.import_errors == {}
    assert sorted(bag.dags) == ["keyspace_migration", "keyspace_migration_rollback", "nightly_subrange_repair"]
    # Attributed to the team's files (where Airflow reparses them), not to the factory's module.
    assert {Path(dag.fileloc).parent for dag in bag.dags.values()} == {tmp_path / "dags"}


def test_with_a_clusters_file_the_same_folder_serves_every_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RINGWARD_CLUSTERS", str(_clusters_file(tmp_path, "eu", "us")))
    bag = DagBag(dag_folder=str(_two_line_folder(tmp_path)))
    assert bag.import_errors == {}
    assert len(bag.dags) == 6 and all(dag_id.endswith(("__eu", "__us")) for dag_id in bag.dags)


def test_a_bad_clusters_file_is_an_import_error_naming_the_problem_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "clusters.yaml"
    bad.write_text("clusters:\n  - name: Prod-EU\n    cassandra_conn_id: c\n", encoding="utf-8")
    monkeypatch.setenv("RINGWARD_CLUSTERS", str(bad))
    bag = DagBag(dag_folder=str(_two_line_folder(tmp_path)))
    assert bag.dags == {}
    assert sorted(Path(f).name for f in bag.import_errors) == ["keyspace_migration.py", "nightly_subrange_repair.py"]
    message = next(iter(bag.import_errors.values()))
    assert "cluster 'Prod-EU', `name`" in message and "`nodetool_conn_id`: Field required" in message
    assert "Fix:" in message and str(bad) in message


def _guide_block(heading: str) -> str:
    """The first code block under `heading` in the operator's guide."""
    guide = (ROOT / "docs" / "operators-guide.md").read_text(encoding="utf-8")
    section = guide[guide.index(heading) :]
    return section.split("```", 2)[1].split("\n", 1)[1]


def test_the_guides_dag_file_and_clusters_file_give_the_documented_dags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    dag_file = _guide_block("### 0.1a The DAG file")
    assert len(dag_file.strip().splitlines()) == 2
    (folder / "ringward_dags.py").write_text(dag_file, encoding="utf-8")
    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    assert sorted(bag.dags) == ["keyspace_migration", "keyspace_migration_rollback", "nightly_subrange_repair"]
    monkeypatch.setenv("RINGWARD_CLUSTERS", str(_guides_clusters_file(tmp_path)))
    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    kinds = ("keyspace_migration", "keyspace_migration_rollback", "nightly_subrange_repair")
    assert sorted(bag.dags) == sorted(f"{kind}__{name}" for name in ("eu_west", "us_east") for kind in kinds)
    repair_dags = {name: bag.dags[f"nightly_subrange_repair__{name}"] for name in ("eu_west", "us_east")}
    pools = {name: dag.get_task("repair").pool for name, dag in repair_dags.items()}
    assert pools == {"eu_west": "ringward_repair__eu_west", "us_east": "ringward_repair__us_east"}
    # eu_west's nightly_deadline: a Deadline Alert 6 h after queuing; us_east declares none.
    assert repair_dags["us_east"].deadline is None
    (alert,) = repair_dags["eu_west"].deadline if isinstance(repair_dags["eu_west"].deadline, list) else [
        repair_dags["eu_west"].deadline]  # fmt: skip
    assert alert.name == "ringward nightly repair overran (eu_west)" and alert.interval.total_seconds() == 6 * 3600


def test_a_deadline_alert_given_to_the_factory_is_the_nightly_dags_and_none_by_default() -> None:
    from datetime import timedelta

    from airflow.providers.smtp.notifications.smtp import SmtpNotifier
    from airflow.serialization.serialized_objects import DagSerialization
    from ringward_airflow.alerts import nightly_deadline_alert

    alert = nightly_deadline_alert(SmtpNotifier, {"to": "oncall@example.com"}, after=timedelta(hours=6))
    with_deadline = nightly_repair_dag(deadline=alert)
    assert nightly_repair_dag().deadline is None
    (kept,) = with_deadline.deadline if isinstance(with_deadline.deadline, list) else [with_deadline.deadline]
    assert kept.interval == timedelta(hours=6) and kept.name == "ringward nightly repair overran"
    # What the scheduler stores: the deadline survives serialization (the triggerer reads it from there).
    assert "deadline" in str(DagSerialization.to_dict(with_deadline)), "the deadline was not serialized"


def test_two_declared_clusters_migration_outlets_differ_and_name_the_cluster(tmp_path: Path) -> None:
    """Issue 39: each cluster's migration report emits its own Assets; the single cluster keeps today's."""
    dags = cluster_dags(path=_clusters_file(tmp_path, "eu", "us"))
    outlets = {name: dags[f"keyspace_migration__{name}"].get_task("report").outlets for name in ("eu", "us")}
    assert outlets["eu"] == [Asset("cassandra://ringward/keyspace_migration__eu"),
                             AssetAlias("ringward_keyspace_migrated__eu")]  # fmt: skip
    assert outlets["us"] == [Asset("cassandra://ringward/keyspace_migration__us"),
                             AssetAlias("ringward_keyspace_migrated__us")]  # fmt: skip
    rollback = dags["keyspace_migration_rollback__us"].get_task("report").outlets
    assert AssetAlias("ringward_keyspace_migrated__us") in rollback
    nightly = {name: dags[f"nightly_subrange_repair__{name}"].get_task("report").outlets for name in ("eu", "us")}
    assert nightly == {"eu": [AssetAlias("ringward_keyspace_repaired__eu")],
                       "us": [AssetAlias("ringward_keyspace_repaired__us")]}  # fmt: skip
    # The report's keyspace events name the declared cluster, not its connection (cassandra_eu).
    assert {dags[f"{kind}__eu"].get_task("report").cluster for kind in ("keyspace_migration", "nightly_subrange_repair")
            } == {"eu"}  # fmt: skip
    single = keyspace_migration_dag().get_task("report").outlets
    assert single == [Asset("cassandra://ringward/keyspace_migration"), AssetAlias("ringward_keyspace_migrated")]
    assert nightly_repair_dag().get_task("report").outlets == [AssetAlias("ringward_keyspace_repaired")]


def test_the_guides_downstream_dag_parses_scheduled_on_a_declared_clusters_keyspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guide's example (§7.5) next to the DAGs of the guide's clusters file (§0.3a): it imports, is scheduled on
    `cassandra://eu_west/shop`, the URI the eu_west report tasks emit for keyspace shop."""
    from airflow.serialization.serialized_objects import DagSerialization
    from ringward.assets import asset_cluster, keyspace_asset_uri

    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "ringward_dags.py").write_text(_guide_block("### 0.1a The DAG file"), encoding="utf-8")
    consumer = _guide_block("### 7.5 Assets per cluster and keyspace")
    (folder / "shop_after_migration.py").write_text(consumer, encoding="utf-8")
    monkeypatch.setenv("RINGWARD_CLUSTERS", str(_guides_clusters_file(tmp_path)))
    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    dag = bag.dags["shop_after_migration_eu_west"]
    emitted = keyspace_asset_uri(asset_cluster("eu_west", "cassandra_eu_west"), "shop")
    assert emitted == "cassandra://eu_west/shop"
    assert list(dag.timetable.asset_condition.objects) == [Asset(emitted)]  # type: ignore[attr-defined]
    assert bag.dags["keyspace_migration__eu_west"].get_task("report").cluster == "eu_west"
    # What the scheduler stores: the DAG depends on that Asset.
    serialized = DagSerialization.to_dict(dag)
    assert emitted in str(serialized["dag"]["timetable"])


def _guides_clusters_file(tmp_path: Path) -> Path:
    """The guide's clusters file (§0.3a), its repair configuration under tmp_path."""
    clusters = tmp_path / "clusters.yaml"
    (tmp_path / "eu_west_repair.yaml").write_text("schedule: '0 1 * * *'\n", encoding="utf-8")
    text = _guide_block("### 0.3a Many clusters").replace("/opt/airflow/ringward/", f"{tmp_path}/")
    clusters.write_text(text, encoding="utf-8")
    return clusters


SMTP = "airflow.providers.smtp.notifications.smtp.SmtpNotifier"


def _deadline_clusters_file(tmp_path: Path, notifier: str) -> Path:
    path = _clusters_file(tmp_path, "eu", "us")
    text = path.read_text(encoding="utf-8").replace(
        "  - name: us\n",
        f"    nightly_deadline:\n      after: 5h30m\n      notifier: {notifier}\n"
        "      kwargs: {to: oncall@example.com}\n  - name: us\n",
    )
    path.write_text(text, encoding="utf-8")
    return path


def test_a_declared_nightly_deadline_is_the_clusters_deadline_alert_and_others_have_none(tmp_path: Path) -> None:
    from datetime import timedelta

    from airflow.sdk.definitions.callback import AsyncCallback
    from airflow.serialization.serialized_objects import DagSerialization

    dags = cluster_dags(path=_deadline_clusters_file(tmp_path, SMTP))
    eu, us = dags["nightly_subrange_repair__eu"], dags["nightly_subrange_repair__us"]
    assert us.deadline is None
    (alert,) = eu.deadline if isinstance(eu.deadline, list) else [eu.deadline]
    assert alert.interval == timedelta(hours=5, minutes=30)
    assert alert.name == "ringward nightly repair overran (eu)"
    assert alert.callback == AsyncCallback(SMTP, kwargs={"to": "oncall@example.com"})
    # The migration DAGs take no deadline; the scheduler stores the nightly one (the triggerer reads it there).
    assert dags["keyspace_migration__eu"].deadline is None
    stored = str(DagSerialization.to_dict(eu))
    assert SMTP in stored and "oncall@example.com" in stored


def test_a_nightly_deadline_whose_notifier_cannot_be_awaited_is_an_import_error_naming_the_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RINGWARD_CLUSTERS", str(_deadline_clusters_file(tmp_path, "os.path.join")))
    bag = DagBag(dag_folder=str(_two_line_folder(tmp_path)))
    assert "nightly_subrange_repair.py" in {Path(f).name for f in bag.import_errors}
    message = next(m for f, m in bag.import_errors.items() if f.endswith("nightly_subrange_repair.py"))
    assert "Cluster 'eu', `nightly_deadline.notifier` 'os.path.join'" in message and "async_notify" in message


def test_a_bad_nightly_deadline_in_the_clusters_file_is_an_import_error_naming_field_and_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _deadline_clusters_file(tmp_path, SMTP)
    path.write_text(path.read_text(encoding="utf-8").replace("after: 5h30m", "after: soon"), encoding="utf-8")
    monkeypatch.setenv("RINGWARD_CLUSTERS", str(path))
    bag = DagBag(dag_folder=str(_two_line_folder(tmp_path)))
    assert bag.dags == {}
    message = next(iter(bag.import_errors.values()))
    assert "cluster 'eu', `nightly_deadline.after`: expected a duration such as" in message
    assert "`nightly_deadline` holds `after`" in message
