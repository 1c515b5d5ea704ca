"""`ringward spark`: job arguments built from the command line; the result printed as JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
import ringward_cassandra.ring_reader
import ringward_spark.submit
from ringward.ring import Node, Ring
from ringward_cli.main import main


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    submitted: list[list[str]] = []
    monkeypatch.setenv("RINGWARD_SPARK_JARS_DIR", "/opt/ringward/spark-jars")  # as in the image: no Maven

    def fake_run_job(job_args: Sequence[str], master: str = "local[2]") -> dict[str, Any]:
        submitted.append([*job_args, "@" + master])
        return {"mode": job_args[0], "rows": 7}

    monkeypatch.setattr(ringward_spark.submit, "run_job", fake_run_job)
    return submitted


def test_count_prints_the_job_result(jobs: list[list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spark", "count", "--hosts", "10.0.0.1,10.0.0.2", "--keyspace", "ks", "--table", "t"]) == 0
    assert json.loads(capsys.readouterr().out) == {"mode": "count", "rows": 7}
    [job] = jobs
    assert job[job.index("--hosts") + 1] == "10.0.0.1,10.0.0.2"
    assert job[job.index("--consistency") + 1] == "ALL"
    assert job[-1] == "@local[2]"


def test_range_counts_use_the_live_ring_and_read_one_when_pinned(
    jobs: list[list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ring = Ring.of([Node("10.0.0.1", "dc1", "r1", (-10, 50)), Node("10.0.0.2", "dc1", "r1", (20,))])
    monkeypatch.setattr(ringward_cassandra.ring_reader, "ring_from_contact_point", lambda host, port: ring)
    argv = ["spark", "range-counts", "--hosts", "10.0.0.1", "--keyspace", "ks", "--table", "t",
            "--pin-host", "10.0.0.2", "--cutoff-us", "99"]  # fmt: skip
    assert main(argv) == 0
    [job] = jobs
    assert [a for a in job if a.startswith("--range=")] == [f"--range={r.start}:{r.end}" for r in ring.ranges()]
    assert job[job.index("--consistency") + 1] == "ONE"
    assert job[job.index("--pin-host") + 1] == "10.0.0.2"
    assert job[job.index("--cutoff-us") + 1] == "99"
    assert json.loads(capsys.readouterr().out)["rows"] == 7
