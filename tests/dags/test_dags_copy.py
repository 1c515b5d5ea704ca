"""Every DAG in dags/ can be deep-copied and cut to a subset, as Airflow does (clearing a task with its
downstream goes through `dag.partial_subset`, which deep-copies the tasks): no operator may hold uncopyable
run state (events, locks, sessions) from its constructor."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from airflow.dag_processing.dagbag import DagBag

DAGS_FOLDER = Path(__file__).resolve().parents[2] / "dags"


@pytest.fixture(scope="module")
def dagbag() -> DagBag:
    bag = DagBag(dag_folder=str(DAGS_FOLDER))
    assert bag.import_errors == {}
    # Every DAG file's DAGs are here (the migration file builds two).
    assert {"nightly_subrange_repair", "keyspace_migration", "keyspace_migration_rollback"} <= set(bag.dags)
    return bag


def test_every_dag_deep_copies(dagbag: DagBag) -> None:
    failures: dict[str, str] = {}
    for dag_id, dag in dagbag.dags.items():
        try:
            copied = copy.deepcopy(dag)
        except Exception as error:
            failures[dag_id] = f"{type(error).__name__}: {error}"
            continue
        assert sorted(copied.task_dict) == sorted(dag.task_dict) != [], dag_id
        for task_id, task in copied.task_dict.items():
            assert task is not dag.task_dict[task_id] and task.dag is copied, f"{dag_id}.{task_id}"
    assert failures == {}


def test_every_task_of_every_dag_can_be_cut_out_with_its_downstream(dagbag: DagBag) -> None:
    failures: dict[str, str] = {}
    for dag_id, dag in dagbag.dags.items():
        for task in dag.tasks:
            try:
                subset = dag.partial_subset(task_ids=[task.task_id], include_downstream=True, include_upstream=False)
            except Exception as error:
                failures[f"{dag_id}.{task.task_id}"] = f"{type(error).__name__}: {error}"
                continue
            expected = {task.task_id, *task.get_flat_relative_ids(upstream=False)}
            assert set(subset.task_dict) == expected, f"{dag_id}.{task.task_id}"
    assert failures == {}
