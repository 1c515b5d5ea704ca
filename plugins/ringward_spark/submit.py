"""Running ringward's Spark jobs through spark-submit: the command line, the run, the JSON result."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ringward.errors import ConfigurationError, RingwardError
from ringward.ring import TokenRange

from ringward_spark.jars import connector_jars

__all__ = [
    "JOB_FILE",
    "SPARK_CONF",
    "SparkJobError",
    "count_job_args",
    "range_counts_job_args",
    "run_job",
    "spark_home",
    "spark_submit_args",
    "spark_submit_binary",
]

JOB_FILE = Path(__file__).with_name("ringward_job.py")

# Small and quiet: these jobs read counts, never shuffle much, and share a 2-core machine.
SPARK_CONF: Mapping[str, str] = {
    "spark.driver.memory": "512m",
    "spark.executor.memory": "512m",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.python.worker.reuse": "true",
}

# spark-submit already adds Spark's Java 17 --add-opens (launcher JavaModuleOptions) to the driver and
# executors; the connector's shaded netty still wants reflective access to direct buffers.
_JAVA_OPTIONS = "-Dio.netty.tryReflectionSetAccessible=true -Djava.net.preferIPv4Stack=true -XX:+UseSerialGC"


class SparkJobError(RingwardError):
    """A Spark job could not be started, failed, or left no result."""


def spark_home() -> str:
    """SPARK_HOME as set, else pyspark's package (spark-submit's own lookup needs `python3` to be ours)."""
    if os.environ.get("SPARK_HOME"):
        return os.environ["SPARK_HOME"]
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkJobError("pyspark is not installed.", "Run `uv sync`.")
    return str(spec.submodule_search_locations[0])


def spark_submit_binary() -> str:
    """spark-submit from the environment running ringward (pyspark's), else from PATH."""
    beside_python = Path(sys.executable).with_name("spark-submit")
    found = str(beside_python) if beside_python.exists() else shutil.which("spark-submit")
    if not found:
        raise SparkJobError("spark-submit was not found.", "Run `uv sync` (pyspark ships spark-submit).")
    return found


def spark_submit_args(
    job_args: Sequence[str],
    *,
    master: str = "local[2]",
    jars: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
    job_file: Path = JOB_FILE,
    spark_submit: str = "spark-submit",
) -> list[str]:
    """The full spark-submit command line for the job file with `job_args`."""
    settings = {**SPARK_CONF, **(conf or {})}
    java_options = " ".join(filter(None, [_JAVA_OPTIONS, settings.pop("spark.driver.extraJavaOptions", "")]))
    command = [spark_submit, "--master", master, "--name", "ringward", "--driver-memory",
               settings.pop("spark.driver.memory"), "--driver-java-options", java_options]  # fmt: skip
    settings.setdefault("spark.executor.extraJavaOptions", _JAVA_OPTIONS)
    if jars:
        command += ["--jars", ",".join(jars)]
    for key, value in sorted(settings.items()):
        command += ["--conf", f"{key}={value}"]
    return [*command, str(job_file), *job_args]


def _common(mode: str, hosts: Sequence[str], keyspace: str, table: str, consistency: str, port: int) -> list[str]:
    if not hosts:
        raise ConfigurationError("No Cassandra contact points given.", "Give at least one node address.")
    return [mode, "--hosts", ",".join(hosts), "--port", str(port), "--keyspace", keyspace, "--table", table,
            "--consistency", consistency]  # fmt: skip


def count_job_args(
    hosts: Sequence[str], keyspace: str, table: str, *, consistency: str = "ALL", port: int = 9042
) -> list[str]:
    return _common("count", hosts, keyspace, table, consistency, port)


def range_counts_job_args(
    hosts: Sequence[str],
    keyspace: str,
    table: str,
    ranges: Sequence[TokenRange],
    *,
    consistency: str = "ALL",
    pinned_host: str | None = None,
    cutoff_us: int | None = None,
    splits_per_range: int = 1,
    port: int = 9042,
) -> list[str]:
    """Arguments of a range-counts job; a pinned host reads at CL ONE unless told otherwise."""
    if not ranges:
        raise ConfigurationError("No token ranges to count.", "Give at least one range.")
    args = _common("range-counts", hosts, keyspace, table, consistency, port)
    if pinned_host:
        args += ["--pin-host", pinned_host]
    if cutoff_us is not None:
        args += ["--cutoff-us", str(cutoff_us)]
    args += ["--splits-per-range", str(splits_per_range)]
    # `=` keeps argparse from reading a negative token as an option.
    return args + [f"--range={r.start}:{r.end}" for r in ranges]


def run_job(
    job_args: Sequence[str],
    master: str = "local[2]",
    *,
    conf: Mapping[str, str] | None = None,
    timeout: float = 900,
) -> dict[str, Any]:
    """Run one job through spark-submit (jars resolved once) and return the JSON result it wrote."""
    with tempfile.TemporaryDirectory(prefix="ringward-spark-") as scratch:
        output = Path(scratch) / "result.json"
        command = spark_submit_args(
            [*job_args, "--output", str(output)], master=master, jars=connector_jars(), conf=conf,
            spark_submit=spark_submit_binary(),
        )  # fmt: skip
        environment = {**os.environ, "SPARK_HOME": spark_home(), "PYSPARK_PYTHON": sys.executable,
                       "PYSPARK_DRIVER_PYTHON": sys.executable}  # fmt: skip
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment)
        except subprocess.TimeoutExpired as error:
            raise SparkJobError(
                f"Spark job {job_args[:1]} ran longer than {timeout:.0f}s.", "Raise timeout."
            ) from error
        if result.returncode != 0 or not output.exists():
            excerpt = _error_excerpt(result.stderr)
            raise SparkJobError(
                f"Spark job {' '.join(job_args[:1])} failed (exit {result.returncode}):\n{excerpt}",
                "Read the error above; check the cluster is up and the table exists.",
            )
        document: dict[str, Any] = json.loads(output.read_text())
        return document


def _error_excerpt(stderr: str, lines: int = 25) -> str:
    """The last Python traceback in Spark's log, else its last lines without JVM frames and INFO noise."""
    start = stderr.rfind("Traceback (most recent call last)")
    text = stderr[start:] if start >= 0 else stderr
    kept = [line for line in text.splitlines() if not line.lstrip().startswith("at ") and " INFO " not in line]
    return "\n".join(kept[:lines] if start >= 0 else kept[-lines:])
