"""Submitting ringward's Spark jobs without a cluster: the jars folder, the provider hook's command line for every
documented spark_default field, the shipped job code and Cassandra settings, and quick clear failures."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ringward.errors import ConfigurationError
from ringward_spark import jars, submit
from ringward_spark.range_counts import task_ssl_options
from ringward_spark.ringward_job import connector_conf, parse_args
from ringward_spark.submit import (
    JOB_FILE,
    CassandraOptions,
    SparkJobError,
    SparkSubmission,
    count_job_args,
    master_endpoints,
    run_job,
)

CONNECTOR = "spark-cassandra-connector_2.12-3.5.1.jar"


@pytest.fixture
def jars_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "spark-jars"
    folder.mkdir()
    for name in (CONNECTOR, "java-driver-core-4.13.0.jar"):
        (folder / name).touch()
    monkeypatch.setenv("RINGWARD_SPARK_JARS_DIR", str(folder))
    return folder


def _spark_default(monkeypatch: pytest.MonkeyPatch, host: str, port: int | None = None, **extra: Any) -> None:
    connection: dict[str, Any] = {"conn_type": "spark", "host": host, "extra": extra}
    if port:
        connection["port"] = port
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(connection))


def _command(submission: SparkSubmission, scratch: Path) -> list[str]:
    command: list[str] = submission.hook(scratch)._build_spark_submit_command(str(JOB_FILE))
    return command


def _option(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def _confs(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf"]
    return {key: value for key, value in pairs}


def test_jars_come_from_the_configured_folder_never_from_maven(tmp_path: Path, jars_dir: Path) -> None:
    assert jars.connector_jars() == sorted(str(jar) for jar in jars_dir.glob("*.jar"))
    other = tmp_path / "other"
    other.mkdir()
    (other / CONNECTOR).touch()
    # The connection's extra wins over the variable.
    assert jars.connector_jars({"ringward-jars-dir": str(other)}) == [str(other / CONNECTOR)]
    with pytest.raises(ConfigurationError, match="RINGWARD_SPARK_JARS_DIR") as unset:
        jars.connector_jars({}, environ={})
    assert "ringward spark jars" in str(unset.value)
    with pytest.raises(ConfigurationError, match="does not exist"):
        jars.connector_jars({}, environ={"RINGWARD_SPARK_JARS_DIR": str(tmp_path / "missing")})
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigurationError, match="holds no spark-cassandra-connector"):
        jars.connector_jars({"ringward-jars-dir": str(tmp_path / "empty")})


def test_standalone_command_ships_jars_code_and_cassandra_settings(
    tmp_path: Path, jars_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = {"spark.executor.memory": "2g", "spark.cassandra.input.readsPerSec": "100"}
    extra = {"deploy-mode": "client", "spark-binary": "spark-submit", "ringward-conf": conf}
    _spark_default(monkeypatch, "spark://master-1", 7077, **extra)
    ca = tmp_path / "ca.pem"
    ca.write_text("CA")
    cassandra = CassandraOptions(local_dc="dc2", username="ringward", password="s3cret-pw",
                                 ssl_options={"ca_certs": str(ca), "check_hostname": False})  # fmt: skip
    submission = SparkSubmission(count_job_args(["10.0.0.1"], "ks", "t"), conn_id="spark_default", cassandra=cassandra)
    command = _command(submission, tmp_path)

    assert Path(command[0]).name == "spark-submit"
    assert _option(command, "--master") == "spark://master-1:7077"
    assert _option(command, "--deploy-mode") == "client"
    assert _option(command, "--jars").split(",") == sorted(str(jar) for jar in jars_dir.glob("*.jar"))
    assert _option(command, "--files") == str(ca)
    assert _option(command, "--driver-memory") == "512m"
    confs = _confs(command)
    assert confs["spark.executor.memory"] == "2g"  # the connection's ringward-conf over ringward's defaults
    assert confs["spark.cassandra.input.readsPerSec"] == "100"
    assert "netty" in confs["spark.driver.extraJavaOptions"] and "netty" in confs["spark.executor.extraJavaOptions"]
    with zipfile.ZipFile(_option(command, "--py-files")) as code:
        names = set(code.namelist())
    assert {"ringward/ring.py", "ringward_spark/range_counts.py", "ringward_cassandra/cql.py"} <= names
    assert not any(name.startswith("ringward_cassandra/localcluster") for name in names)
    # The application, then its arguments with the Cassandra settings; the password is not among them.
    job = command[command.index(str(JOB_FILE)) + 1 :]
    args = parse_args(job)
    assert (args.hosts, args.local_dc, args.username) == ("10.0.0.1", "dc2", "ringward")
    assert args.ssl_options == {"ca_certs": "ca.pem", "check_hostname": False}  # found by name on executors
    assert args.output == str(tmp_path / "result.json")
    assert not any("s3cret-pw" in part for part in command)
    assert cassandra.environment() == {"RINGWARD_CASSANDRA_PASSWORD": "s3cret-pw"}
    assert "s3cret-pw" not in repr(cassandra)


def test_yarn_queue_and_kubernetes_namespace_reach_spark_submit(
    tmp_path: Path, jars_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    yarn = {"deploy-mode": "client", "queue": "ringward", "spark-binary": "spark-submit"}
    _spark_default(monkeypatch, "yarn", **yarn)
    command = _command(SparkSubmission(["count"], conn_id="spark_default"), tmp_path)
    assert (_option(command, "--master"), _option(command, "--queue")) == ("yarn", "ringward")

    import airflow.providers.apache.spark.hooks.spark_submit as provider

    monkeypatch.setattr(provider, "kube_client", object(), raising=False)  # the cncf provider, in a k8s deployment
    _spark_default(monkeypatch, "k8s://https://k8s-api:6443", **{"deploy-mode": "client", "namespace": "ringward"})
    command = _command(SparkSubmission(["count"], conn_id="spark_default"), tmp_path)
    assert _option(command, "--master") == "k8s://https://k8s-api:6443"
    assert _confs(command)["spark.kubernetes.namespace"] == "ringward"

    _spark_default(monkeypatch, "local[2]", **{"spark-binary": "spark3-submit"})
    with pytest.raises(SparkJobError, match="spark3-submit was not found"):
        _command(SparkSubmission(["count"], conn_id="spark_default"), tmp_path)


def test_cluster_deploy_mode_is_refused_before_anything_runs(
    tmp_path: Path, jars_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _spark_default(monkeypatch, "yarn", **{"deploy-mode": "cluster"})
    with pytest.raises(ConfigurationError, match="deploy-mode cluster") as refused:
        SparkSubmission(["count"], conn_id="spark_default").hook(tmp_path)
    assert "deploy-mode to client" in str(refused.value)


def test_a_standalone_master_that_is_down_fails_fast_and_clearly(
    tmp_path: Path, jars_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _spark_default(monkeypatch, "spark://127.0.0.1", port, **{"deploy-mode": "client"})
    started = time.monotonic()
    with pytest.raises(SparkJobError) as down:
        run_job(count_job_args(["127.0.0.1"], "ks", "t"), conn_id="spark_default")
    assert time.monotonic() - started < 15
    assert f"spark://127.0.0.1:{port} does not accept connections" in str(down.value)
    assert "Start the Spark master" in str(down.value)
    assert master_endpoints("spark://a:7077,b:7078") == [("a", 7077), ("b", 7078)]
    assert master_endpoints("yarn") == []


def test_job_code_imports_where_ringward_is_not_installed(tmp_path: Path) -> None:
    """What an executor on another machine has: Python and the libraries, not this checkout."""
    code = submit.job_code_zip(tmp_path / "job.zip")
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); sys.path.append(sys.argv[2]);"
        "import ringward_spark.range_counts as r, ringward_spark.ringward_job, ringward_cassandra.cql;"
        "import ringward.verification;"
        "print(r.__file__)"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", probe, str(code), sysconfig.get_paths()["purelib"]],
        capture_output=True, text=True, env={"PATH": os.environ.get("PATH", "")}, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith(str(code))
    bare = subprocess.run([sys.executable, "-S", "-c", "import ringward_spark"], capture_output=True, check=False)
    assert bare.returncode != 0, "the probe's Python must not see the checkout"


def _fake_spark_submit(tmp_path: Path, body: str) -> str:
    script = tmp_path / "spark-submit"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def test_run_job_returns_what_the_job_wrote_and_passes_the_password_in_the_environment(
    tmp_path: Path, jars_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fake writes what it got to the path after --output, as the job writes its result.
    fake = _fake_spark_submit(
        tmp_path,
        'while [ "$1" != "--output" ]; do shift; done\n'
        'printf \'{"mode": "count", "python": "%s", "password": "%s"}\' "$PYSPARK_PYTHON" '
        '"$RINGWARD_CASSANDRA_PASSWORD" > "$2"\n',
    )
    monkeypatch.setattr(submit, "_binary_path", lambda name: fake)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    result = run_job(count_job_args(["h"], "ks", "t"), cassandra=CassandraOptions(username="u", password="pw"))
    assert result == {"mode": "count", "python": sys.executable, "password": "pw"}


def test_run_job_failure_shows_the_python_traceback(
    tmp_path: Path, jars_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_spark_submit(
        tmp_path,
        "echo '26/11/22 INFO SparkContext: noise' >&2\n"
        "echo 'Traceback (most recent call last):' >&2\n"
        "echo '  File \"job.py\", line 1' >&2\n"
        "echo '\tat org.apache.spark.Frame(Frame.scala:1)' >&2\n"
        "echo 'ValueError: table gone' >&2\nexit 1\n",
    )
    monkeypatch.setattr(submit, "_binary_path", lambda name: fake)
    with pytest.raises(SparkJobError, match="exit 1") as failure:
        run_job(count_job_args(["h"], "ks", "t"))
    assert "ValueError: table gone" in failure.value.problem
    assert "Frame.scala" not in failure.value.problem and "noise" not in failure.value.problem


def test_a_job_past_its_timeout_is_stopped(tmp_path: Path, jars_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_spark_submit(tmp_path, "exec sleep 60\n")
    monkeypatch.setattr(submit, "_binary_path", lambda name: fake)
    started = time.monotonic()
    with pytest.raises(SparkJobError, match="longer than 1s"):
        run_job(count_job_args(["h"], "ks", "t"), timeout=1)
    assert time.monotonic() - started < 10


def test_the_job_gives_the_connector_the_cassandra_settings() -> None:
    settings = ["--local-dc", "dc1", "--username", "ringward", "--ssl-options", '{"ca_certs": "ca.pem"}']
    job = count_job_args(["10.0.0.1", "10.0.0.2"], "ks", "t", port=9142)
    args = parse_args([*job, "--output", "/tmp/r.json", *settings])
    conf = connector_conf(args, {"RINGWARD_CASSANDRA_PASSWORD": "pw"})
    assert conf == {
        "spark.cassandra.connection.host": "10.0.0.1,10.0.0.2",
        "spark.cassandra.connection.port": "9142",
        "spark.cassandra.connection.localDC": "dc1",
        "spark.cassandra.auth.username": "ringward",
        "spark.cassandra.auth.password": "pw",
        "spark.cassandra.connection.ssl.enabled": "true",
    }
    plain = parse_args([*count_job_args(["h"], "ks", "t"), "--output", "/tmp/r.json"])
    assert connector_conf(plain, {"RINGWARD_CASSANDRA_PASSWORD": "ignored"}) == {
        "spark.cassandra.connection.host": "h",
        "spark.cassandra.connection.port": "9042",
    }


def test_tasks_find_shipped_tls_files_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark import SparkFiles

    (tmp_path / "ca.pem").write_text("CA")
    monkeypatch.setattr(SparkFiles, "_root_directory", str(tmp_path))
    monkeypatch.setattr(SparkFiles, "_is_running_on_worker", True)
    here = tmp_path / "here.pem"
    here.write_text("local")
    resolved = task_ssl_options((("ca_certs", "ca.pem"), ("certfile", str(here)), ("check_hostname", False)))
    assert resolved == {"ca_certs": str(tmp_path / "ca.pem"), "certfile": str(here), "check_hostname": False}
    assert task_ssl_options(()) is None


def test_operator_reads_local_dc_role_and_tls_from_the_cassandra_connection() -> None:
    from ringward_airflow.spark_operators import cassandra_options

    connection = SimpleNamespace(
        login="ringward", password="pw",
        extra_dejson={"load_balancing_policy_args": {"local_dc": "dc2"}, "ssl_options": {"ca_certs": "/ca.pem"}},
    )  # fmt: skip
    assert cassandra_options(connection) == CassandraOptions("dc2", "ringward", "pw", {"ca_certs": "/ca.pem"})
    bare = SimpleNamespace(login=None, password=None, extra_dejson={"local_dc": "dc1"})
    assert cassandra_options(bare) == CassandraOptions(local_dc="dc1")


def test_the_spark_job_logs_in_with_its_own_read_only_role_never_ringwards() -> None:
    """Issue 36 (3): the Spark verification's password travels to executors, so it is the `cassandra_spark`
    connection's read-only role; on a cluster with logins, a missing or same-role Spark connection is refused."""
    import pytest
    from ringward.errors import ConfigurationError
    from ringward_airflow.spark_operators import spark_login

    main = SimpleNamespace(login="ringward", password="pw",
                           extra_dejson={"local_dc": "dc2", "ssl_options": {"ca_certs": "/ca.pem"}})  # fmt: skip
    spark = SimpleNamespace(login="ringward_spark", password="spw", extra_dejson={})
    assert spark_login(main, spark, "cassandra_spark") == CassandraOptions(
        "dc2", "ringward_spark", "spw", {"ca_certs": "/ca.pem"}
    )
    with pytest.raises(ConfigurationError, match="no connection 'cassandra_spark'") as refused:
        spark_login(main, None, "cassandra_spark")
    assert "ringward grants" in refused.value.fix
    same = SimpleNamespace(login="ringward", password="pw", extra_dejson={})
    with pytest.raises(ConfigurationError, match="a role of its own"):
        spark_login(main, same, "cassandra_spark")
    with pytest.raises(ConfigurationError, match="'nobody'"):
        spark_login(main, SimpleNamespace(login=None, password=None, extra_dejson={}), "cassandra_spark")
    open_cluster = SimpleNamespace(login=None, password=None, extra_dejson={"local_dc": "dc1"})
    assert spark_login(open_cluster, None, "cassandra_spark") == CassandraOptions(local_dc="dc1")
    assert spark_login(open_cluster, open_cluster, "cassandra_spark") == CassandraOptions(local_dc="dc1")


def test_a_local_master_gets_authenticated_encrypted_rpc_and_a_cluster_without_it_a_warning(
    tmp_path: Path, jars_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 36 (3): the password travels to executors over Spark RPC. On `local[*]` ringward turns on Spark's
    authentication and RPC encryption; on a cluster the secret is the cluster's, so a connection that leaves them
    off gets a warning naming the fix."""
    _spark_default(monkeypatch, "local[2]")
    confs = _confs(_command(SparkSubmission(["count"], conn_id="spark_default"), tmp_path))
    assert confs["spark.authenticate"] == "true" and confs["spark.network.crypto.enabled"] == "true"
    _spark_default(monkeypatch, "spark://master-1", 7077)
    with caplog.at_level("WARNING", logger="ringward_spark.submit"):
        confs = _confs(_command(SparkSubmission(["count"], conn_id="spark_default"), tmp_path))
    assert "spark.authenticate" not in confs  # the cluster's secret is not ringward's to make up
    [warning] = [r.getMessage() for r in caplog.records]
    assert "spark://master-1:7077" in warning and "spark.network.crypto.enabled=true" in warning
    caplog.clear()
    secured = {"spark.authenticate": "true", "spark.network.crypto.enabled": "true", "spark.authenticate.secret": "s"}
    _spark_default(monkeypatch, "spark://master-1", 7077, **{"ringward-conf": secured})
    with caplog.at_level("WARNING", logger="ringward_spark.submit"):
        _command(SparkSubmission(["count"], conn_id="spark_default"), tmp_path)
    assert not caplog.records


# -- secrets stay off spark-submit's command line (security review, issue 25, finding 12 a) --------------------
TRUST_STORE_PASSWORD = "spark.cassandra.connection.ssl.trustStore.password"
SECRET = "tr ust=st0re#pw:\\x"  # the characters a properties file must escape


def _read_properties(path: Path) -> dict[str, str]:
    """key=value and `key value` lines as java.util.Properties reads them (no continuations here)."""
    properties = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip()[0] in "#!":
            continue
        key, value, escaped, separated = "", "", False, False
        for ch in line:
            if escaped:
                (value := value + ch) if separated else (key := key + ch)
                escaped = False
            elif ch == "\\":
                escaped = True
            elif not separated and ch in "=: ":
                separated = True
            elif separated:
                value += ch
            else:
                key += ch
        properties[key] = value.strip()
    return properties


def test_secret_spark_properties_go_to_a_private_properties_file(
    tmp_path: Path, jars_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(f"spark.eventLog.enabled true\n{TRUST_STORE_PASSWORD}=old\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    conf = {TRUST_STORE_PASSWORD: SECRET, "spark.cassandra.connection.ssl.trustStore.path": "/etc/ts.jks",
            "spark.authenticate.secret": "AUTH-SECRET-VALUE"}  # fmt: skip
    _spark_default(monkeypatch, "spark://master-1", 7077, **{"deploy-mode": "client", "ringward-conf": conf})
    scratch = tmp_path / "scratch"
    scratch.mkdir(mode=0o700)
    command = _command(SparkSubmission(count_job_args(["h"], "ks", "t"), conn_id="spark_default"), scratch)

    assert not any(SECRET in part or "AUTH-SECRET-VALUE" in part for part in command)
    confs = _confs(command)
    assert TRUST_STORE_PASSWORD not in confs and "spark.authenticate.secret" not in confs
    assert confs["spark.cassandra.connection.ssl.trustStore.path"] == "/etc/ts.jks"  # not secret: stays
    properties_file = Path(_option(command, "--properties-file"))
    assert properties_file.parent == scratch and stat.S_IMODE(properties_file.stat().st_mode) == 0o600
    properties = _read_properties(properties_file)
    assert properties[TRUST_STORE_PASSWORD] == SECRET  # the connection's value over spark-defaults.conf's
    assert properties["spark.authenticate.secret"] == "AUTH-SECRET-VALUE"
    # --properties-file replaces spark-defaults.conf for spark-submit: its settings are carried over.
    assert properties["spark.eventLog.enabled"] == "true"


def test_without_secrets_no_properties_file_is_written(
    tmp_path: Path, jars_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _spark_default(monkeypatch, "spark://master-1", 7077, **{"ringward-conf": {"spark.executor.cores": "1"}})
    command = _command(SparkSubmission(["count"], conn_id="spark_default"), tmp_path)
    assert "--properties-file" not in command and _confs(command)["spark.executor.cores"] == "1"


def test_the_properties_file_lives_only_as_long_as_the_submission(
    tmp_path: Path, jars_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fake reports the properties file it was given (its path, mode and whether it holds the secret).
    fake = _fake_spark_submit(
        tmp_path,
        'while [ "$1" != "--properties-file" ]; do shift; done\nprops="$2"\n'
        'while [ "$1" != "--output" ]; do shift; done\n'
        'held=$(grep -c "AUTH-SECRET-VALUE" "$props")\n'
        'printf \'{"file": "%s", "mode": "%s", "held": %s}\' "$props" "$(stat -c %a "$props")" "$held" > "$2"\n',
    )
    monkeypatch.setattr(submit, "_binary_path", lambda name: fake)
    result = run_job(count_job_args(["h"], "ks", "t"), conf={"spark.authenticate.secret": "AUTH-SECRET-VALUE"})
    assert result["mode"] == "600" and result["held"] == 1
    assert not Path(result["file"]).exists()


def test_a_ringward_conf_that_loads_code_is_refused_before_spark_submit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = {"spark.driver.extraJavaOptions": "-javaagent:/tmp/agent.jar"}
    _spark_default(monkeypatch, "spark://master-1", 7077, **{"deploy-mode": "client", "ringward-conf": conf})
    with pytest.raises(ConfigurationError, match=r"spark\.driver\.extraJavaOptions"):
        _command(SparkSubmission(count_job_args(["h"], "ks", "t"), conn_id="spark_default"), tmp_path)
