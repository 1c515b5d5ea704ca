"""`ringward airflow ARGS…`: the airflow CLI with the project's local configuration."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "airflow",
        help="run the airflow CLI with the project-local AIRFLOW_HOME and connections",
        add_help=False,
    )
    parser.add_argument("args", nargs=argparse.REMAINDER)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from ringward_cassandra.localcluster.spark_jars import ensure_connector_jars

    from ringward_cli.airflow_env import (
        airflow_environment,
        ensure_airflow_connections,
        ensure_airflow_db,
        fail_stale_test_runs,
        hold_dags_test_lock,
    )

    env = airflow_environment()
    ensure_connector_jars()  # once (Maven): the folder the local spark_default's ringward-jars-dir names
    ensure_airflow_db(env)
    ensure_airflow_connections(env)  # Admin -> Connections lists the cluster the DAGs target
    for dag_id, run_id in fail_stale_test_runs(env):  # a killed `dags test` must not hold the scheduler's slot
        print(f"ringward: marked failed the run {run_id} of {dag_id}, left running by a killed `airflow dags test`",
              file=sys.stderr)  # fmt: skip
    if args.args[:2] == ["dags", "test"]:
        hold_dags_test_lock(env)  # held by the exec'd airflow until it exits: its run is not stale meanwhile
    airflow = str(Path(sys.executable).parent / "airflow")
    sys.stdout.flush()
    os.execve(airflow, [airflow, *args.args], env)
    return 0  # not reached
