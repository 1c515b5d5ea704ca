"""Triggers survive the round trip through the triggerer's serialization."""

from __future__ import annotations

import importlib

from ringward_airflow.triggers import RepairSessionTrigger


def test_repair_session_trigger_round_trip() -> None:
    trigger = RepairSessionTrigger(
        contact_points=["127.0.0.2"], parent_ids=["f3d78270-e608-11f1-97bc-b74011bb59d4"], poll_interval=1.5,
        timeout_seconds=60, started_at=123.0, labels={"f3d78270-e608-11f1-97bc-b74011bb59d4": [1, 2, "127.0.0.4"]},
    )  # fmt: skip
    path, kwargs = trigger.serialize()
    module, _, name = path.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == (path, kwargs)
    assert module == "ringward_airflow.triggers"  # importable by the triggerer from plugins/, not dags/
