"""`ringward airflow dags test …` as an operator runs it, with its whole output kept for the reader of a slow or
failed run: `.artifacts/dags-test/<test>-<n>.log`, each line stamped with seconds since the command started.
The command's process is forked from a server that has imported Airflow already (tests/warm_airflow.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from itertools import count
from pathlib import Path

import warm_airflow

ROOT = Path(__file__).resolve().parents[2]
RINGWARD = str(Path(sys.executable).parent / "ringward")
LOG_DIR = ROOT / ".artifacts" / "dags-test"
_numbers = count(1)


def run_dag_test(
    dag_id: str, conf_json: str, *, env: dict[str, str], timeout: float, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """Run one DAG with `conf_json` to its end; like `subprocess.run(capture_output=True)`, stdout and stderr
    merged into stdout (the order of lines is what a reader of the log needs)."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "no-test").split(" ")[0]
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = LOG_DIR / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', test)[-120:]}-{next(_numbers)}.log"
    command = [RINGWARD, "airflow", "dags", "test", dag_id, "--conf", conf_json]
    started = time.monotonic()
    with log_path.open("w", encoding="utf-8") as log:
        log.write(f"$ {' '.join(command)}\n")

        def stamped(line: str) -> None:
            log.write(f"{time.monotonic() - started:8.1f} {line}")

        result = warm_airflow.run(command, env=env, cwd=cwd, timeout=timeout, on_line=stamped)
        log.write(f"exit {result.returncode} after {time.monotonic() - started:.1f} s\n")
    return result
