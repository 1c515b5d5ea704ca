"""tests/integration/airflow_stack.py reads Airflow's REST API through the official client: what the integration
tests index must still be what the API sent."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import airflow_client.client as client
import pytest

ROOT = Path(__file__).resolve().parents[3]


def airflow_stack() -> ModuleType:
    if "airflow_stack" in sys.modules:  # already imported by the integration tests of this session
        return sys.modules["airflow_stack"]
    spec = importlib.util.spec_from_file_location("airflow_stack", ROOT / "tests" / "integration" / "airflow_stack.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["airflow_stack"] = module
    spec.loader.exec_module(module)
    return module


TASK_INSTANCE = {
    "id": "0199a0c4-5ef1-7c62-9a1c-6a8f0c3f5b7e",
    "task_id": "step_1.repair",
    "task_display_name": "step_1.repair",
    "dag_id": "keyspace_migration",
    "dag_display_name": "keyspace_migration",
    "dag_run_id": "manual__2026-11-25T18:14:06.123456+00:00",
    "map_index": -1,
    "run_after": "2026-11-25T18:14:06.123456Z",
    "start_date": "2026-11-25T18:14:09.500000Z",
    "end_date": "2026-11-25T18:14:41.000001Z",
    "duration": 31.500001,
    "state": "up_for_retry",
    "try_number": 1,
    "max_tries": 2,
    "pool": "cassandra_repair",
    "pool_slots": 1,
    "executor_config": "{}",
    "rendered_fields": {"summary": "## Migration `seed_safe@1`"},
    "trigger": None,
    "note": None,
}

DAG_RUN = {
    "dag_run_id": "manual__2026-11-25T18:14:06.123456+00:00",
    "dag_id": "keyspace_migration",
    "dag_display_name": "keyspace_migration",
    "dag_versions": [],
    "run_after": "2026-11-25T18:14:06.123456Z",
    "queued_at": "2026-11-25T18:14:06.200000Z",
    "start_date": "2026-11-25T18:14:07Z",
    "end_date": None,
    "logical_date": None,
    "run_type": "manual",
    "state": "running",
    "triggered_by": "rest_api",
    "conf": {"keyspace": "seed_safe", "replication": {"class": "NetworkTopologyStrategy", "dc1": 2}},
}


def test_responses_read_through_the_client_are_the_apis_json() -> None:
    """The tests compare states with strings, index null fields and parse times with at_time: each response
    the client parsed comes back as the JSON the API sent, every field it left out null."""
    stack = airflow_stack()
    for model, payload in ((client.TaskInstanceResponse, TASK_INSTANCE), (client.DAGRunResponse, DAG_RUN)):
        read = stack.as_json(model.from_json(json.dumps(payload)))
        assert {key: read[key] for key in payload} == payload
        assert all(read[key] is None for key in read.keys() - payload.keys()), model
        assert read["state"] in {"up_for_retry", "running"} and type(read["state"]) is str
    started = stack.at_time(
        stack.as_json(client.TaskInstanceResponse.from_json(json.dumps(TASK_INSTANCE)))["start_date"]
    )
    assert started is not None and started.isoformat() == "2026-11-25T18:14:09.500000+00:00"


def test_a_failed_trys_log_keeps_its_exception() -> None:
    """The log as the API sends it with Accept: application/json; the exception is only in `error_detail`."""
    body = {
        "content": [
            {"event": "::group::Log message source details", "timestamp": "2026-11-25T18:14:09.600000Z"},
            {
                "event": "Task failed with exception",
                "timestamp": "2026-11-25T18:14:41Z",
                "level": "error",
                "error_detail": [
                    {
                        "exc_type": "RepairError",
                        "exc_value": "1 repair commands failed: the repair session cannot finish",
                    }
                ],
            },
            "a line without structure",
        ],
        "continuation_token": None,
    }
    text = airflow_stack().log_text(json.dumps(body).encode())
    lines = text.splitlines()
    assert lines[0].startswith("::group::Log message source details")
    assert lines[1].startswith("Task failed with exception") and "the repair session cannot finish" in lines[1]
    assert lines[2] == "a line without structure"


def test_free_port_is_below_the_ephemeral_range_and_bindable() -> None:
    import socket

    first_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {airflow_stack().free_port() for _ in range(20)}
    assert all(10_000 <= port < first_ephemeral for port in ports), ports
    assert len(ports) > 1  # drawn at random, not the first free one: two lanes do not race for the same port
    for port in ports:
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))  # raises if the port was not free


def test_free_port_skips_a_port_someone_listens_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import random
    import socket

    module = airflow_stack()
    with socket.socket() as spare_probe:
        spare_probe.bind(("127.0.0.1", 0))
        spare = spare_probe.getsockname()[1]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        draws = iter([busy, busy, spare])

        class Draws(random.Random):
            def randrange(self, *args: object, **kwargs: object) -> int:
                return next(draws)

        monkeypatch.setattr(module, "_PORTS", Draws())
        assert module.free_port() == spare  # the busy port drawn twice, skipped twice
