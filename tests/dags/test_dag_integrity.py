"""Every DAG in dags/ imports cleanly, is tagged, and retries its tasks at least twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.dag_processing.dagbag import DagBag

DAGS_FOLDER = Path(__file__).resolve().parents[2] / "dags"


@pytest.fixture(scope="module")
def dagbag() -> DagBag:
    return DagBag(dag_folder=str(DAGS_FOLDER))


def test_dags_import_without_errors(dagbag: DagBag) -> None:
    assert dagbag.import_errors == {}
    files = {p.stem for p in DAGS_FOLDER.glob("*.py") if not p.name.startswith("_")}
    assert len(dagbag.dags) >= len(files) > 0


def test_every_dag_is_tagged(dagbag: DagBag) -> None:
    untagged = [dag_id for dag_id, dag in dagbag.dags.items() if not dag.tags]
    assert untagged == []


def test_every_task_retries_at_least_twice(dagbag: DagBag) -> None:
    few = [f"{dag_id}.{task.task_id}" for dag_id, dag in dagbag.dags.items() for task in dag.tasks if task.retries < 2]
    assert few == []


def test_nightly_repair_wiring() -> None:
    dag = DagBag(dag_folder=str(DAGS_FOLDER / "nightly_subrange_repair.py")).dags["nightly_subrange_repair"]
    assert dag.max_active_runs == 1 and dag.catchup is False
    assert [t.task_id for t in dag.topological_sort()] == ["plan", "repair", "report"]
    repair = dag.get_task("repair")
    # One unmapped worker per night, whatever the ring (node locks hold within one task), in the guide's pool.
    assert type(repair).__name__ == "RepairRunOperator" and not repair.is_mapped
    assert repair.pool == "ringward_repair"
    assert dag.get_task("report").trigger_rule == "all_done"
    assert {"config_overrides", "enabled", "keyspaces", "max_duration"} <= set(dag.params)


def _nightly():  # type: ignore[no-untyped-def]
    return DagBag(dag_folder=str(DAGS_FOLDER / "nightly_subrange_repair.py")).dags["nightly_subrange_repair"]


def test_nightly_repair_form_offers_no_null_choices_and_explains_every_field() -> None:
    dag = _nightly()
    for name, param in dag.params.items():
        schema = param.schema
        assert schema.get("title") and schema["title"] != name and param.description, name
        assert None not in schema.get("enum", []), name  # no literal "null" in a select
    enabled = dag.params.get_param("enabled").schema
    assert enabled["type"] == "string" and set(enabled["enum"]) == {"config", "on", "off"}  # not a null toggle
    assert dag.params["enabled"] == "config" and dag.params["repair_type"] == "config"
    assert set(dag.params.get_param("scope").schema["enum"]) == {"due", "all"}


def test_nightly_repair_docs_say_what_a_manual_trigger_does() -> None:
    doc = _nightly().doc_md
    assert doc and doc.startswith("### Nightly subrange repair")
    assert "Triggering it by hand" in doc and "all" in doc and "scheduled run" in doc


def test_every_param_schema_is_checked_against_draft_7_and_serializes_with_it(dagbag: DagBag) -> None:
    """Each param names JSON Schema draft 7, whose meta-schema Airflow's `jsonschema.validate` checks it against
    (draft 2020-12's without `$schema`: four times the CPU, for every param of every task on every serialization);
    each schema is a valid draft-7 schema that accepts its default, and the serialized DAG keeps the `$schema`."""
    from airflow.serialization.serialized_objects import DagSerialization
    from jsonschema import Draft7Validator
    from jsonschema.validators import validator_for

    for dag_id, dag in dagbag.dags.items():
        serialized = DagSerialization.to_dict(dag)["dag"]["params"]
        assert len(serialized) == len(dag.params) > 0, dag_id
        for name, param in dag.params.items():
            assert validator_for(param.schema) is Draft7Validator, (dag_id, name)
            Draft7Validator.check_schema(param.schema)
            if param.has_value:
                Draft7Validator(param.schema).validate(param.value)
        for name, entry in serialized:
            schema = entry["schema"].get("__var", entry["schema"])
            assert schema["$schema"] == "http://json-schema.org/draft-07/schema#", (dag_id, name)
