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

    from ringward_cli.airflow_env import airflow_environment, ensure_airflow_connections, ensure_airflow_db

    env = airflow_environment()
    ensure_connector_jars()  # once (Maven): the folder the local spark_default's ringward-jars-dir names
    ensure_airflow_db(env)
    ensure_airflow_connections(env)  # Admin -> Connections lists the cluster the DAGs target
    airflow = str(Path(sys.executable).parent / "airflow")
    sys.stdout.flush()
    os.execve(airflow, [airflow, *args.args], env)
    return 0  # not reached
