"""Running ringward's Spark jobs: spark-submit through the Spark provider's SparkSubmitHook, the JSON result.

Where a job runs comes from a `spark` connection (`spark_default`): master, `deploy-mode`, `spark-binary`,
`queue`, `namespace`, `principal`/`keytab`, all as the provider reads them, plus ringward's own extras
`ringward-jars-dir` (the connector's jars) and `ringward-conf` (Spark properties). The CLI and the tests
may name a master instead (`local[2]`). Every submission ships what executors on other machines need:
the connector jars (`--jars`), ringward's job code (`--py-files`, a zip of the packages the tasks import)
and the Cassandra settings (contact points, port, local DC, user, TLS; the password through the
driver's environment, never on the command line). Spark properties that hold credentials (a trust-store
password in `ringward-conf`, say) go in a `--properties-file` only this user can read, for the time of
the submission, not in `--conf` where every local user sees them (`ps`, /proc).
"""

from __future__ import annotations

import collections
import importlib.util
import json
import logging
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ringward.errors import ConfigurationError, RingwardError
from ringward.private_files import write_private
from ringward.ring import TokenRange

from ringward_spark.jars import connector_jars

__all__ = [
    "CONF_EXTRA",
    "JOB_FILE",
    "PASSWORD_VARIABLE",
    "PROPERTIES_FILE",
    "SPARK_CONF",
    "CassandraOptions",
    "Scan",
    "SparkJobError",
    "SparkSubmission",
    "StagePhase",
    "count_job_args",
    "job_code_zip",
    "master_endpoints",
    "range_counts_job_args",
    "run_job",
    "spark_home",
    "stage_job_args",
    "stage_plan",
]

JOB_FILE = Path(__file__).with_name("ringward_job.py")
CONF_EXTRA = "ringward-conf"
PASSWORD_VARIABLE = "RINGWARD_CASSANDRA_PASSWORD"

# Small and quiet: these jobs read counts, never shuffle much, and share a 2-core machine. A connection's
# `ringward-conf` extra overrides any of them.
SPARK_CONF: Mapping[str, str] = {
    "spark.driver.memory": "512m",
    "spark.executor.memory": "512m",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.python.worker.reuse": "true",
}

# Spark's RPC carries the Cassandra role's password to the executors (inside the serialized tasks): on a local
# master ringward turns on Spark's authentication and AES-based RPC encryption (Spark makes the secret itself for
# `local`); on a cluster the secret is the cluster's, so the connection's `ringward-conf` sets these (a warning in
# the task log says so when it does not).
RPC_SECURITY: Mapping[str, str] = {"spark.authenticate": "true", "spark.network.crypto.enabled": "true"}
_LOG = logging.getLogger(__name__)

# spark-submit already adds Spark's Java 17 --add-opens (launcher JavaModuleOptions) to the driver and
# executors; the connector's shaded netty still wants reflective access to direct buffers.
_JAVA_OPTIONS = "-Dio.netty.tryReflectionSetAccessible=true -Djava.net.preferIPv4Stack=true -XX:+UseSerialGC"

# Spark properties whose values are credentials, by name (JVM options by what they set): kept off the command line.
_SECRET_PROPERTY = re.compile(
    r"password|passwd|passphrase|secret|token|credential|(access|private|api)[._-]?key\b", re.IGNORECASE
)
# The submission's own properties file, in its private scratch folder; deleted when spark-submit ends.
PROPERTIES_FILE = "spark-submit.properties"
# The file spark-submit reads when given no --properties-file (and ignores when given one).
_DEFAULTS_FILE = "spark-defaults.conf"

# The packages a job's tasks import on the executors (ringward_cassandra only for its driver sessions).
_SHIPPED_PACKAGES = ("ringward", "ringward_spark")
_SHIPPED_MODULES = ("ringward_cassandra/__init__.py", "ringward_cassandra/cql.py")
# ssl_options entries that name files: shipped with --files, found by name on the executors.
SSL_FILE_OPTIONS = ("ca_certs", "certfile", "keyfile")


@dataclass(frozen=True)
class Scan:
    """One range-counts scan of a stage: rows per range of `table`, at `consistency`, through `pinned_host` alone
    (a pinned read at CL ONE is what that replica holds) or any coordinator, rows after `cutoff_us` apart."""

    table: str
    ranges: tuple[TokenRange, ...]
    consistency: str = "ALL"
    pinned_host: str | None = None
    cutoff_us: int | None = None
    splits_per_range: int = 1

    def as_json(self) -> dict[str, Any]:
        return {"table": self.table, "ranges": [[r.start, r.end] for r in self.ranges],
                "consistency": self.consistency, "pinned_host": self.pinned_host, "cutoff_us": self.cutoff_us,
                "splits_per_range": self.splits_per_range}  # fmt: skip


@dataclass(frozen=True)
class StagePhase:
    """Scans counted together in one Spark job; a stage's phases run one after the other."""

    name: str
    scans: tuple[Scan, ...]


def stage_plan(phases: Sequence[StagePhase]) -> dict[str, Any]:
    """The --plan document of a stage job; refuses a scan without ranges or a phase without scans."""
    for phase in phases:
        if not phase.scans:
            raise ConfigurationError(f"Phase {phase.name!r} of the Spark stage has no scans.", "Give it a scan.")
        empty = [scan.table for scan in phase.scans if not scan.ranges]
        if empty:
            raise ConfigurationError(
                f"Phase {phase.name!r} scans {empty[0]} over no token range.", "Give every scan a range."
            )
    if not phases:
        raise ConfigurationError("The Spark stage has no phases.", "Give at least one phase of scans.")
    return {"phases": [{"name": p.name, "scans": [scan.as_json() for scan in p.scans]} for p in phases]}


class SparkJobError(RingwardError):
    """A Spark job could not be started, failed, or left no result."""


@dataclass(frozen=True)
class CassandraOptions:
    """How the job's driver and tasks log in to Cassandra, beyond contact points and port."""

    local_dc: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl_options: Mapping[str, Any] | None = None

    def job_args(self) -> list[str]:
        args: list[str] = []
        if self.local_dc:
            args += ["--local-dc", self.local_dc]
        if self.username:
            args += ["--username", self.username]
        if self.ssl_options:
            shipped = {k: (Path(v).name if k in SSL_FILE_OPTIONS else v) for k, v in self.ssl_options.items()}
            args += ["--ssl-options", json.dumps(shipped, sort_keys=True)]
        return args

    def environment(self) -> dict[str, str]:
        return {PASSWORD_VARIABLE: self.password} if self.password else {}

    def files(self) -> list[str]:
        """The TLS files executors need (CA, client certificate and key), shipped with --files."""
        options = self.ssl_options or {}
        named = [str(options[k]) for k in SSL_FILE_OPTIONS if options.get(k)]
        missing = [path for path in named if not Path(path).is_file()]
        if missing:
            raise ConfigurationError(
                f"ssl_options names files that do not exist here: {', '.join(missing)}.",
                "Mount the CA (and client certificate) where the Airflow worker runs; they are shipped to the "
                "Spark executors from there.",
            )
        return named


def spark_home() -> str:
    """SPARK_HOME as set, else pyspark's package (spark-submit's own lookup needs `python3` to be ours)."""
    if os.environ.get("SPARK_HOME"):
        return os.environ["SPARK_HOME"]
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkJobError("pyspark is not installed.", "Run `uv sync`.")
    return str(spec.submodule_search_locations[0])


def _binary_path(name: str) -> str:
    """The connection's spark binary: beside the running Python (pyspark's, in a virtualenv), else on PATH."""
    beside_python = Path(sys.executable).with_name(name)
    found = str(beside_python) if beside_python.exists() else shutil.which(name)
    if not found:
        raise SparkJobError(f"{name} was not found.", "Install pyspark (it ships spark-submit) or put it on PATH.")
    return found


def job_code_zip(target: Path) -> Path:
    """ringward's code that the Spark tasks import, as a zip for --py-files (executors may run elsewhere)."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in _SHIPPED_PACKAGES:
            spec = importlib.util.find_spec(package)
            if spec is None or not spec.submodule_search_locations:
                raise SparkJobError(f"Package {package} is not importable.", "Install ringward (uv sync).")
            root = Path(next(iter(spec.submodule_search_locations)))
            for source in sorted(root.rglob("*")):
                if source.is_file() and "__pycache__" not in source.parts and source.suffix != ".pyc":
                    archive.write(source, f"{package}/{source.relative_to(root).as_posix()}")
        cassandra_spec = importlib.util.find_spec("ringward_cassandra")
        if cassandra_spec is None or cassandra_spec.origin is None:
            raise SparkJobError("Package ringward_cassandra is not importable.", "Install ringward (uv sync).")
        plugins = Path(cassandra_spec.origin).parent.parent
        for module in _SHIPPED_MODULES:
            archive.write(plugins / module, module)
    return target


def master_endpoints(master: str) -> list[tuple[str, int]]:
    """host:port of every master of a standalone URL (`spark://h1:7077,h2:7077`); empty for other managers."""
    if not master.startswith("spark://"):
        return []
    endpoints = []
    for part in master.removeprefix("spark://").split(","):
        host, _, port = part.strip().rpartition(":")
        endpoints.append((host, int(port))) if host and port.isdigit() else endpoints.append((part.strip(), 7077))
    return endpoints


def _check_masters_reachable(master: str, timeout: float = 5.0) -> None:
    """A standalone master that does not accept connections fails the job now, not after Spark's retries."""
    endpoints = master_endpoints(master)
    errors = []
    for host, port in endpoints:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as error:
            errors.append(f"{host}:{port}: {error.strerror or error}")
    if endpoints:
        raise SparkJobError(
            f"The Spark master {master} does not accept connections ({'; '.join(errors)}).",
            "Start the Spark master (and a worker), or correct the host and port of the spark connection.",
        )


def _submit_hook_class() -> type[Any]:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    class RingwardSubmitHook(SparkSubmitHook):
        """The provider's hook; a given master replaces the connection's (CLI, tests), the binary is looked
        up beside the running Python first, and spark-submit's output is kept for the error message."""

        def __init__(self, *, master: str | None = None, **kwargs: Any) -> None:
            self._fixed_master = master
            self.output: collections.deque[str] = collections.deque(maxlen=3000)
            super().__init__(**kwargs)

        def _resolve_connection(self) -> dict[str, Any]:
            if self._fixed_master is None:
                resolved: dict[str, Any] = super()._resolve_connection()
                return resolved
            return {"master": self._fixed_master, "queue": None, "deploy_mode": None, "namespace": None,
                    "spark_binary": self.spark_binary or "spark-submit", "principal": None, "keytab": None,
                    "rest_scheme": "http", "rest_port": 6066, "rest_endpoint": None}  # fmt: skip

        def _get_spark_binary_path(self) -> list[str]:
            return [_binary_path(self._connection["spark_binary"])]

        def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
            def kept() -> Iterator[Any]:
                for line in itr:
                    self.output.append(str(line).rstrip("\n"))
                    yield line

            super()._process_spark_submit_log(kept())

    return RingwardSubmitHook


class SparkSubmission:
    """One spark-submit run of ringward_job.py; `kill()` stops it from another thread (a task's on_kill)."""

    def __init__(
        self,
        job_args: Sequence[str],
        *,
        conn_id: str | None = None,
        master: str | None = None,
        cassandra: CassandraOptions | None = None,
        conf: Mapping[str, str] | None = None,
        timeout: float = 900,
        plan: Mapping[str, Any] | None = None,
    ) -> None:
        if (conn_id is None) == (master is None):
            raise ConfigurationError("A Spark job needs a connection or a master URL.", "Give exactly one of them.")
        self.job_args = list(job_args)
        self.conn_id = conn_id
        self.master = master
        self.cassandra = cassandra or CassandraOptions()
        self.conf = dict(conf or {})
        self.timeout = timeout
        self.plan = plan
        self._hook: Any = None
        self._killed = threading.Event()
        self._timed_out = threading.Event()

    def _connection(self) -> Any:
        """The `spark` connection (read once per submission), None when a master URL was given instead."""
        if self.conn_id is None:
            return None
        from airflow.sdk import BaseHook

        return BaseHook.get_connection(self.conn_id)

    def hook(self, scratch: Path) -> Any:
        """The provider's hook for this job, its result to be written under `scratch`."""
        connection = self._connection()
        extra: dict[str, Any] = connection.extra_dejson if connection is not None else {}
        from ringward_cassandra.connection_extras import checked_spark_conf  # not in the job's zip: here only

        own = checked_spark_conf(extra.get(CONF_EXTRA) or {}, self.conn_id or "spark_default")  # nothing loading code
        settings = {**SPARK_CONF, **{str(k): str(v) for k, v in own.items()}, **self.conf}
        driver_memory = settings.pop("spark.driver.memory")
        java_options = " ".join(filter(None, [_JAVA_OPTIONS, settings.pop("spark.driver.extraJavaOptions", "")]))
        settings["spark.driver.extraJavaOptions"] = java_options
        settings.setdefault("spark.executor.extraJavaOptions", _JAVA_OPTIONS)
        secrets = {key: settings.pop(key) for key in sorted(settings) if _is_secret(key, settings[key])}
        properties_file = _properties_file(scratch, secrets) if secrets else None
        files = self.cassandra.files()
        plan_args: list[str] = []
        if self.plan is not None:  # read by the job's driver, which runs here (client mode)
            (scratch / "plan.json").write_text(json.dumps(self.plan))
            plan_args = ["--plan", str(scratch / "plan.json")]
        conf = dict(sorted(settings.items()))  # the hook keeps this dict: RPC security is added below
        hook = _submit_hook_class()(
            master=self.master, conn_id=self.conn_id or "spark_default", conf=conf,
            jars=",".join(connector_jars(extra)), py_files=str(job_code_zip(scratch / "ringward-job.zip")),
            files=",".join(files) or None, driver_memory=driver_memory, name=f"ringward-{self.job_args[0]}",
            properties_file=properties_file,
            application_args=[*self.job_args, *self.cassandra.job_args(), *plan_args,
                              "--output", str(scratch / "result.json")],
        )  # fmt: skip
        master = str(hook._connection.get("master") or "")  # as the provider resolved it (yarn by default)
        if master.startswith("local"):
            conf.update(RPC_SECURITY)
        elif conf.get("spark.authenticate") != "true" or conf.get("spark.network.crypto.enabled") != "true":
            _LOG.warning(
                "Spark RPC to %s is neither authenticated nor encrypted, and it carries the Cassandra role's "
                "password to the executors. Fix: set spark.authenticate=true, spark.authenticate.secret (the "
                "cluster's) and spark.network.crypto.enabled=true in the connection's %s extra, as the cluster "
                "sets them.", master or "the Spark master", CONF_EXTRA,
            )  # fmt: skip
        if hook._connection.get("deploy_mode") == "cluster":
            raise ConfigurationError(
                f"Spark connection {self.conn_id!r} asks for deploy-mode cluster: ringward's jobs return their "
                "counts to the task, so their driver must run in the Airflow worker.",
                "Set the connection's deploy-mode to client (executors still run on the cluster).",
            )
        return hook

    def run(self) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="ringward-spark-") as folder:
            scratch = Path(folder)
            hook = self._hook = self.hook(scratch)
            if self._killed.is_set():
                raise SparkJobError("The Spark job was stopped before it started.", "Clear the task to run it.")
            _check_masters_reachable(hook._connection["master"])
            environment = {**os.environ, "SPARK_HOME": spark_home(),
                           "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
                           "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable),
                           **self.cassandra.environment()}  # fmt: skip
            timer = threading.Timer(self.timeout, self._time_out)
            timer.daemon = True
            timer.start()
            try:
                hook.submit(str(JOB_FILE), env=environment)
            except Exception as error:
                raise self._failure(hook) from error
            finally:
                timer.cancel()
                (scratch / PROPERTIES_FILE).unlink(missing_ok=True)  # its secrets live no longer than the job
                if hook._submit_sp is not None and hook._submit_sp.stdout is not None:
                    hook._submit_sp.stdout.close()  # the provider leaves the pipe open
            output = scratch / "result.json"
            if self._timed_out.is_set() or self._killed.is_set() or not output.exists():
                raise self._failure(hook)
            document: dict[str, Any] = json.loads(output.read_text())
            return document

    def _time_out(self) -> None:
        self._timed_out.set()
        if self._hook is not None:
            self._hook.on_kill()

    def kill(self) -> None:
        self._killed.set()
        if self._hook is not None:
            self._hook.on_kill()

    def _failure(self, hook: Any) -> SparkJobError:
        name = self.job_args[0]
        if self._timed_out.is_set():
            return SparkJobError(
                f"Spark job {name} ran longer than {self.timeout:.0f}s and was stopped.",
                "Check that the Spark cluster has a live worker with free cores, or raise the timeout.",
            )
        if self._killed.is_set():
            return SparkJobError(f"Spark job {name} was stopped (the task was killed).", "Clear the task to resume.")
        code = hook._submit_sp.returncode if hook._submit_sp is not None else None
        return SparkJobError(
            f"Spark job {name} on {hook._connection['master']} failed (exit {code}):\n"
            + _error_excerpt("\n".join(hook.output)),
            "Read the error above; check that the Spark and Cassandra clusters are up and the table exists.",
        )


def _is_secret(key: str, value: str) -> bool:
    """A property holding a credential: its name says so, or JVM options that set one (`-D...password=`)."""
    return bool(_SECRET_PROPERTY.search(key) or (key.endswith("JavaOptions") and _SECRET_PROPERTY.search(value)))


def _properties_file(scratch: Path, secrets: Mapping[str, str]) -> str:
    """A 0600 properties file in `scratch` holding `secrets` after the properties of spark-defaults.conf.

    spark-submit reads a --properties-file instead of spark-defaults.conf, so that file's properties are
    carried over as they are (a key given again below wins, as java.util.Properties reads it). The blank
    line ends a continuation its last line might leave open."""
    conf_dir = os.environ.get("SPARK_CONF_DIR") or os.path.join(spark_home(), "conf")
    defaults = Path(conf_dir) / _DEFAULTS_FILE
    try:
        text = defaults.read_text(encoding="utf-8") if defaults.is_file() else ""
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigurationError(
            f"Cannot read {defaults}: {error}.",
            "Make spark-defaults.conf readable to the worker (it is carried into the job's properties file).",
        ) from error
    lines = [f"{_escape_property(key, key=True)}={_escape_property(value)}" for key, value in secrets.items()]
    body = "\n\n# ringward: secret properties, kept off spark-submit's command line\n" + "\n".join(lines) + "\n"
    return str(write_private(scratch, PROPERTIES_FILE, text + body))


_PROPERTY_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f",
                     "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!"}  # fmt: skip


def _escape_property(text: str, *, key: bool = False) -> str:
    """`text` as java.util.Properties.load reads it back (a key's spaces, a value's leading space escaped)."""
    escaped = [_PROPERTY_ESCAPES.get(ch, ch) for ch in text]
    for i, ch in enumerate(text):
        if ch == " " and (key or i == 0):
            escaped[i] = "\\ "
    return "".join(escaped)


def _common(mode: str, hosts: Sequence[str], keyspace: str, table: str, consistency: str, port: int) -> list[str]:
    if not hosts:
        raise ConfigurationError("No Cassandra contact points given.", "Give at least one node address.")
    return [mode, "--hosts", ",".join(hosts), "--port", str(port), "--keyspace", keyspace, "--table", table,
            "--consistency", consistency]  # fmt: skip


def count_job_args(
    hosts: Sequence[str], keyspace: str, table: str | Sequence[str], *, consistency: str = "ALL", port: int = 9042
) -> list[str]:
    """A connector count of one table, or of several in the one application."""
    tables = [table] if isinstance(table, str) else list(table)
    if not tables:
        raise ConfigurationError("No table to count.", "Give at least one table.")
    args = _common("count", hosts, keyspace, tables[0], consistency, port)
    return args + [arg for more in tables[1:] for arg in ("--table", more)]


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


def stage_job_args(hosts: Sequence[str], keyspace: str, *, port: int = 9042) -> list[str]:
    """Arguments of a stage job (its scans come with the submission's plan)."""
    if not hosts:
        raise ConfigurationError("No Cassandra contact points given.", "Give at least one node address.")
    return ["stage", "--hosts", ",".join(hosts), "--port", str(port), "--keyspace", keyspace]


def run_job(
    job_args: Sequence[str],
    master: str | None = None,
    *,
    conn_id: str | None = None,
    cassandra: CassandraOptions | None = None,
    conf: Mapping[str, str] | None = None,
    timeout: float = 900,
    plan: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run one job and return the JSON result it wrote: on `conn_id`'s Spark, else on `master` (local[2])."""
    if conn_id is None and master is None:
        master = "local[2]"
    submission = SparkSubmission(job_args, conn_id=conn_id, master=master, cassandra=cassandra, conf=conf,
                                 timeout=timeout, plan=plan)  # fmt: skip
    return submission.run()


def _error_excerpt(output: str, lines: int = 25) -> str:
    """The last Python traceback in Spark's log, else its last lines without JVM frames and INFO noise."""
    start = output.rfind("Traceback (most recent call last)")
    text = output[start:] if start >= 0 else output
    kept = [line for line in text.splitlines() if not line.lstrip().startswith("at ") and " INFO " not in line]
    return "\n".join(kept[:lines] if start >= 0 else kept[-lines:])
