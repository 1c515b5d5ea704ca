"""keyspace_migration's wiring: the order of the stages, and cleanup only behind a passed verification."""

from __future__ import annotations

import itertools
from pathlib import Path

from airflow.dag_processing.dagbag import DagBag
from ringward.migration import MAX_STAGED_STEPS

DAGS_FOLDER = Path(__file__).resolve().parents[2] / "dags"


def _dag():  # type: ignore[no-untyped-def]
    return DagBag(dag_folder=str(DAGS_FOLDER / "keyspace_migration.py")).dags["keyspace_migration"]


def test_each_step_runs_pre_repair_baseline_alter_repair_verify_in_order() -> None:
    dag = _dag()
    for index in range(1, MAX_STAGED_STEPS + 1):
        order = [f"step_{index}.{name}" for name in
                 ("pre_repair", "baseline", "alter", "repair", "verify_preview", "verify_counts")]  # fmt: skip
        for before, after in itertools.pairwise(order):
            assert after in dag.get_task(before).get_direct_relative_ids(upstream=False), (before, after)


def test_cleanup_waits_for_every_verification_and_fails_closed() -> None:
    dag = _dag()
    cleanup_ancestors = dag.get_task("cleanup").get_flat_relative_ids(upstream=True)
    for index in range(1, MAX_STAGED_STEPS + 1):
        assert f"step_{index}.verify_counts" in cleanup_ancestors
    # A failed verification makes cleanup_wanted upstream_failed (not skipped-and-continue).
    assert dag.get_task("cleanup_wanted").trigger_rule == "none_failed_min_one_success"
    assert dag.get_task("cleanup").trigger_rule == "all_success"


def test_the_form_offers_the_documented_params() -> None:
    params = _dag().params
    assert {"keyspace", "replication", "require_approval", "pre_repair", "client_read_consistency", "dry_run",
            "snapshot_before_cleanup"} <= set(params)  # fmt: skip
    assert params["require_approval"] is True and params["snapshot_before_cleanup"] is True
    assert params["allow_quorum_gap"] is False  # a refusal's fix may suggest it; the operator opts in
