"""The deployment files (Dockerfile, docker-compose.yaml, .env.example) checked without a Docker engine.

Expected versions are read from the project's pins (pyproject.toml, uv.lock, tools/maven/*.pom.xml),
never restated here.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import secrets
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import textwrap
import tomllib
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml
from ringward.permissions import (
    JMX_ROLE,
    SPARK_ROLE,
    grant_statements,
    jmx_grant_statements,
    keyspace_grants,
    spark_keyspace_grants,
)
from ringward_cassandra.connection_extras import checked_nodetool_extra
from ringward_cassandra.nodetool import NodetoolClient

ROOT = Path(__file__).resolve().parents[3]
COMPOSE_FILE = ROOT / "docker-compose.yaml"
DOCKERFILE = ROOT / "Dockerfile"
SPARK_WORKER_DOCKERFILE = ROOT / "deploy" / "spark" / "Dockerfile"
ENV_EXAMPLE = ROOT / ".env.example"
COMPOSE_SCHEMA = ROOT / "tests" / "fixtures" / "compose-spec.json"
MAVEN_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
REPOSITORY_ROOTS = ("dags", "plugins", "include")
SECRET_NAME = re.compile(r"PASSWORD|SECRET|FERNET|TOKEN|_KEY$")


# --- the project's pins ---------------------------------------------------------------------------


def locked_version(package: str) -> str:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    versions = {entry["name"]: entry["version"] for entry in lock["package"] if "version" in entry}
    return str(versions[package])


def python_minor() -> str:
    """The Python minor of the repository's own stack (.python-version, which uv reads), within `requires-python`."""
    minor = (ROOT / ".python-version").read_text().strip()
    assert re.fullmatch(r"\d+\.\d+", minor), f".python-version {minor!r} is not one minor version"
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    lower = re.search(r">=\s*(\d+)\.(\d+)", spec)
    upper = re.search(r"<\s*(\d+)\.(\d+)", spec)
    assert lower and upper, f"requires-python {spec!r} has no range"
    version = tuple(int(part) for part in minor.split("."))
    assert (int(lower[1]), int(lower[2])) <= version < (int(upper[1]), int(upper[2])), (minor, spec)
    return minor


def maven_dependency(pom: str) -> tuple[str, str]:
    """(artifactId, version) of the main dependency a tools/maven pom resolves (the first one listed)."""
    tree = ElementTree.parse(ROOT / "tools" / "maven" / pom)
    dependency = tree.getroot().findall("m:dependencies/m:dependency", MAVEN_NS)[0]
    return dependency.findtext("m:artifactId", namespaces=MAVEN_NS) or "", dependency.findtext(
        "m:version", namespaces=MAVEN_NS
    ) or ""


def cassandra_version() -> str:
    return maven_dependency("cassandra.pom.xml")[1]


def connector_scala_binary_version() -> str:
    artifact, _ = maven_dependency("spark-connector.pom.xml")
    match = re.fullmatch(r"spark-cassandra-connector_(\d+\.\d+)", artifact)
    assert match, f"unexpected connector artifact {artifact!r}"
    return match[1]


# --- Compose: variable interpolation as the Compose Specification defines it ----------------------

_INTERPOLATION = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*))"
)


class MissingVariable(KeyError):
    pass


def interpolate(text: str, env: Mapping[str, str]) -> str:
    def substitute(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        name = match["braced"] or match["named"]
        operator, argument = match["op"], match["arg"] or ""
        value = env.get(name)
        is_set = value is not None and (value != "" or not (operator or "").startswith(":"))
        if operator in (":-", "-"):
            return value if is_set and value is not None else argument
        if operator in (":?", "?"):
            if not is_set or value is None:
                raise MissingVariable(f"{name}: {argument}")
            return value
        if operator in (":+", "+"):
            return argument if is_set else ""
        return value or ""

    return _INTERPOLATION.sub(substitute, text)


def interpolate_tree(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [interpolate_tree(item, env) for item in node]
    if isinstance(node, dict):
        return {key: interpolate_tree(value, env) for key, value in node.items()}
    return node


def env_example() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def raw_compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def compose(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The compose model as `docker compose config` would see it with `env` as the .env file."""
    resolved = interpolate_tree(raw_compose(), env_example() if env is None else env)
    assert isinstance(resolved, dict)
    return resolved


def services(model: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(model["services"])


def airflow_services(model: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Services running the image built from the repository's Dockerfile."""
    return {
        name: service
        for name, service in services(model).items()
        if isinstance(service.get("build"), dict)
        and service["build"].get("context") == "."
        and service["build"].get("dockerfile", "Dockerfile") == DOCKERFILE.name
    }


def cassandra_services(model: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The Cassandra nodes: services running the Cassandra image's server."""
    return {
        name: service
        for name, service in services(model).items()
        if str(service.get("image", "")).startswith("cassandra:") and service.get("command") == ["cassandra", "-f"]
    }


def cassandra_init_service(model: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The one-shot service on the Cassandra image (cqlsh, nodetool) that is not a node."""
    nodes = cassandra_services(model)
    found = [
        (name, service)
        for name, service in services(model).items()
        if str(service.get("image", "")).startswith("cassandra:") and name not in nodes
    ]
    assert len(found) == 1, f"expected one Cassandra init service, found {[name for name, _ in found]}"
    return found[0]


def last_cassandra_node(model: Mapping[str, Any]) -> str:
    """The node that starts last (no other node waits for it)."""
    nodes = cassandra_services(model)
    waited_on = {dependency for node in nodes.values() for dependency in node.get("depends_on", {})}
    (last,) = set(nodes) - waited_on
    return last


def bind_mounts(service: Mapping[str, Any]) -> dict[str, str]:
    """container path -> host path, for short-syntax bind mounts."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *_ = str(volume).split(":")
        if source.startswith(("./", "/")):
            mounts[target] = source
    return mounts


def host_path(service: Mapping[str, Any], container_path: str) -> Path:
    """Where a file the container sees under a bind mount lives in the repository."""
    for target, source in bind_mounts(service).items():
        if container_path == target or container_path.startswith(target.rstrip("/") + "/"):
            return ROOT / source / Path(container_path).relative_to(target)
    raise AssertionError(f"{container_path} is not under any bind mount of the service")


def strings_in(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, list | dict):
        for item in node.values() if isinstance(node, dict) else node:
            yield from strings_in(item)


def compose_variable_uses() -> Iterator[tuple[str, str]]:
    """(name, operator) for every ${NAME...} reference in the compose model (comments excluded)."""
    for text in strings_in(raw_compose()):
        for match in _INTERPOLATION.finditer(text):
            if match["braced"]:
                yield match["braced"], match["op"] or ""


# --- Dockerfiles ---------------------------------------------------------------------------------


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", path.read_text())
    instructions = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, arguments = line.partition(" ")
            instructions.append((keyword.upper(), arguments.strip()))
    return instructions


def global_arg_defaults(path: Path) -> dict[str, str]:
    """ARG defaults declared before the first FROM (the ones FROM lines can use)."""
    defaults = {}
    for keyword, arguments in dockerfile_instructions(path):
        if keyword == "FROM":
            break
        if keyword == "ARG" and "=" in arguments:
            name, _, value = arguments.partition("=")
            defaults[name] = value.strip('"')
    return defaults


def from_images(path: Path) -> list[tuple[str, str | None]]:
    """(resolved image, stage name) for each FROM, in order."""
    defaults = global_arg_defaults(path)
    stages = []
    for keyword, arguments in dockerfile_instructions(path):
        if keyword == "FROM":
            words = [word for word in arguments.split() if not word.startswith("--")]
            stage = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append((interpolate(words[0], defaults), stage))
    return stages


def env_instructions(path: Path) -> dict[str, str]:
    values = {}
    for keyword, arguments in dockerfile_instructions(path):
        if keyword == "ENV":
            for name, value in re.findall(r'([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S+)', arguments):
                values[name] = value.strip('"')
    return values


def openjdk_major(path: Path) -> str:
    majors = set(re.findall(r"openjdk-(\d+)-jre-headless", path.read_text()))
    assert len(majors) == 1, f"{path.name} must install exactly one OpenJDK runtime, found {majors}"
    return majors.pop()


def expected_spark_image() -> str:
    """The official Spark image tag for the locked pyspark, the connector's Scala line, our Java."""
    return (
        f"apache/spark:{locked_version('pyspark')}-scala{connector_scala_binary_version()}"
        f"-java{openjdk_major(DOCKERFILE)}-python3-ubuntu"
    )


# --- Airflow, imported only once its environment points at a throwaway home -----------------------


@pytest.fixture(scope="module")
def airflow_secrets(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    if "airflow" not in sys.modules:
        home = tmp_path_factory.mktemp("airflow-home")
        os.environ["AIRFLOW_HOME"] = str(home)
        os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
        os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{home}/airflow.db"
    import airflow.secrets.environment_variables as environment_variables

    return environment_variables


def parse_connection(module: ModuleType, conn_id: str, value: str) -> Any:
    """Parse as Airflow does for AIRFLOW_CONN_* (JSON when it starts with '{', else a URI)."""
    return module.EnvironmentVariablesBackend().deserialize_connection(conn_id, value)


def connection_values(model: Mapping[str, Any]) -> dict[str, str]:
    """conn_id -> value for every AIRFLOW_CONN_* set on every Airflow service (all must agree)."""
    found: dict[str, str] = {}
    for name, service in airflow_services(model).items():
        for key, value in service["environment"].items():
            if key.startswith("AIRFLOW_CONN_"):
                conn_id = key.removeprefix("AIRFLOW_CONN_").lower()
                assert found.setdefault(conn_id, value) == value, f"{name} disagrees on {key}"
    return found


# === tests ========================================================================================


def test_compose_file_satisfies_the_compose_specification_schema() -> None:
    validator = jsonschema.Draft7Validator(json.loads(COMPOSE_SCHEMA.read_text()))
    for model in (raw_compose(), compose()):
        errors = [f"{list(error.absolute_path)}: {error.message}" for error in validator.iter_errors(model)]
        assert errors == []


def test_the_schema_rejects_what_the_specification_forbids() -> None:
    """Guards the vendored schema itself: an unknown service key must fail validation."""
    validator = jsonschema.Draft7Validator(json.loads(COMPOSE_SCHEMA.read_text()))
    broken = compose()
    broken["services"]["postgres"]["no_such_key"] = True
    assert not validator.is_valid(broken)


def test_airflow_runs_in_every_official_component() -> None:
    commands = {str(service.get("command")) for service in airflow_services(compose()).values()}
    for component in ("api-server", "scheduler", "dag-processor", "triggerer", "celery worker"):
        assert component in commands


@pytest.mark.parametrize("root", REPOSITORY_ROOTS)
def test_every_airflow_service_mounts_the_repository_root_and_imports_from_it(root: str) -> None:
    model = compose()
    assert airflow_services(model), "no service builds the repository's Dockerfile"
    for name, service in airflow_services(model).items():
        mounts = bind_mounts(service)
        target = f"/opt/airflow/{root}"
        assert mounts.get(target) == f"./{root}", f"{name} does not mount ./{root} at {target}"
        assert target in service["environment"]["PYTHONPATH"].split(":"), f"{name}: {target} not importable"


def test_the_image_puts_the_same_roots_on_pythonpath() -> None:
    image_path = env_instructions(DOCKERFILE)["PYTHONPATH"].split(":")
    assert sorted(image_path) == sorted(f"/opt/airflow/{root}" for root in REPOSITORY_ROOTS)


def test_local_executor_by_default_and_celery_in_its_profile() -> None:
    defaults = env_example()
    defaults.pop("AIRFLOW_EXECUTOR", None)
    for service in airflow_services(compose(defaults)).values():
        # Airflow's LocalExecutor with the deferral race fixed (plugins/ringward_airflow/executor.py)
        assert service["environment"]["AIRFLOW__CORE__EXECUTOR"] == "ringward_airflow.executor.LocalExecutor"
    celery = compose({**defaults, "AIRFLOW_EXECUTOR": "CeleryExecutor"})
    for service in airflow_services(celery).values():
        assert service["environment"]["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    worker = next(s for s in airflow_services(celery).values() if s.get("command") == "celery worker")
    assert worker["profiles"] == ["celery"]
    assert services(celery)["redis"]["profiles"] == ["celery"]


def integration_airflow_stack() -> ModuleType:
    """tests/integration/airflow_stack.py: the harness that starts Airflow for the integration tests."""
    import importlib.util

    if "airflow_stack" in sys.modules:  # already imported by the integration tests of this session
        return sys.modules["airflow_stack"]
    spec = importlib.util.spec_from_file_location("airflow_stack", ROOT / "tests" / "integration" / "airflow_stack.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["airflow_stack"] = module
    spec.loader.exec_module(module)
    return module


def test_the_celery_profile_sets_what_the_celery_tests_ran() -> None:
    """tests/integration/test_airflow_celery.py runs airflow_stack's Celery settings; every Airflow service of the
    profile has the same, its broker the redis service and its result backend its own metadata database."""
    stack = integration_airflow_stack()
    celery = compose({**env_example(), "AIRFLOW_EXECUTOR": "CeleryExecutor"})
    (redis_port,) = (int(port) for port in services(celery)["redis"]["expose"])
    for name, service in airflow_services(celery).items():
        environment = dict(service["environment"])
        expected = stack.celery_settings("redis", redis_port, environment["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
        # The test stack's redis runs on loopback without a password; compose's requires one (issue 36).
        broker = urlsplit(environment["AIRFLOW__CELERY__BROKER_URL"])
        assert broker.password == env_example()["REDIS_PASSWORD"], name
        environment["AIRFLOW__CELERY__BROKER_URL"] = broker._replace(netloc=broker.netloc.rpartition("@")[2]).geturl()
        assert {key: environment.get(key) for key in expected} == expected, name
    worker = next(s for s in airflow_services(celery).values() if s.get("command") == "celery worker")
    assert worker["environment"]["AIRFLOW__CELERY__WORKER_CONCURRENCY"] == str(stack.CELERY_WORKER_CONCURRENCY)


def test_dockerfile_builds_on_the_official_airflow_image_of_the_pinned_versions() -> None:
    final_image, _ = from_images(DOCKERFILE)[-1]
    assert final_image == f"apache/airflow:{locked_version('apache-airflow')}-python{python_minor()}"


def test_nodetool_comes_from_the_official_cassandra_image_of_the_pinned_release() -> None:
    stages = dict((stage, image) for image, stage in from_images(DOCKERFILE) if stage)
    assert stages["cassandra"] == f"cassandra:{cassandra_version()}"
    copies = [arguments for keyword, arguments in dockerfile_instructions(DOCKERFILE) if keyword == "COPY"]
    assert "--from=cassandra /opt/cassandra /opt/cassandra" in copies
    assert env_instructions(DOCKERFILE)["CASSANDRA_HOME"] == "/opt/cassandra"


def test_compose_runs_the_pinned_cassandra_release() -> None:
    for name, service in cassandra_services(compose()).items():
        assert service["image"] == f"cassandra:{cassandra_version()}", name


def test_spark_images_match_pyspark_the_connector_and_the_java_runtime() -> None:
    expected = expected_spark_image()
    model = compose()
    assert services(model)["spark-master"]["image"] == expected
    assert services(model)["spark-worker"]["build"]["args"]["SPARK_IMAGE"] == expected
    assert from_images(SPARK_WORKER_DOCKERFILE)[0][0] == expected


def test_locked_pyspark_carries_the_connector_scala_line() -> None:
    """spark-submit in the image is pyspark's: its Spark core jar must be the connector's Scala line."""
    import pyspark

    jars = {jar.name for jar in (Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar")}
    scala, spark = connector_scala_binary_version(), locked_version("pyspark")
    assert jars == {f"spark-core_{scala}-{spark}.jar"}


def test_connector_jars_are_resolved_from_the_repository_pom_into_the_advertised_dir() -> None:
    instructions = dockerfile_instructions(DOCKERFILE)
    copies = [arguments.split() for keyword, arguments in instructions if keyword == "COPY"]
    assert ["tools/maven/spark-connector.pom.xml", "pom.xml"] in copies
    runs = " ".join(arguments for keyword, arguments in instructions if keyword == "RUN")
    jars_dir = env_instructions(DOCKERFILE)["RINGWARD_SPARK_JARS_DIR"]
    assert "dependency:copy-dependencies" in runs
    assert f"-DoutputDirectory={jars_dir}" in runs
    assert ["--from=connector-jars", jars_dir, jars_dir] in copies


def test_dockerfile_installs_the_project_from_the_lock() -> None:
    runs = " ".join(arguments for keyword, arguments in dockerfile_instructions(DOCKERFILE) if keyword == "RUN")
    assert "uv export --frozen" in runs
    # The stack's tooling beside the runtime dependencies: the Celery executor (extra `local`) and the
    # pyspark whose spark-submit the workers run (dependency group `spark`).
    (export,) = [arguments for keyword, arguments in dockerfile_instructions(DOCKERFILE)
                 if keyword == "RUN" and "uv export" in arguments]  # fmt: skip
    assert "--no-dev" in export and "--extra local" in export and "--group spark" in export
    assert "--extra statsd" in export  # the metrics (issue 39): Airflow's StatsD backend needs the package
    assert '"apache-airflow==${AIRFLOW_VERSION}"' in runs
    # The same Spark Connect exclusion as [tool.uv] override-dependencies in pyproject.toml.
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]["override-dependencies"]
    for override in overrides:
        assert override.replace("'", '"') in runs


def test_every_healthy_condition_points_at_a_service_with_a_healthcheck() -> None:
    model = compose()
    for name, service in services(model).items():
        for dependency, rule in dict(service.get("depends_on", {})).items():
            if rule["condition"] == "service_healthy":
                assert "healthcheck" in services(model)[dependency], f"{name} waits on {dependency}"


def test_cassandra_nodes_form_one_dc_over_two_racks_with_seeds_among_them() -> None:
    nodes = cassandra_services(compose())
    assert len(nodes) == 3
    environments = [node["environment"] for node in nodes.values()]
    assert {env["CASSANDRA_DC"] for env in environments} == {"dc1"}
    assert len({env["CASSANDRA_RACK"] for env in environments}) == 2
    assert {env["CASSANDRA_ENDPOINT_SNITCH"] for env in environments} == {"GossipingPropertyFileSnitch"}
    for env in environments:
        assert set(env["CASSANDRA_SEEDS"].split(",")) <= set(nodes)


def test_cassandra_nodes_start_one_after_another() -> None:
    nodes = cassandra_services(compose())
    waits_on = {
        name: [dep for dep, rule in node.get("depends_on", {}).items() if rule["condition"] == "service_healthy"]
        for name, node in nodes.items()
    }
    first = [name for name, deps in waits_on.items() if not deps]
    assert len(first) == 1
    order, current = [first[0]], first[0]
    while followers := [name for name, deps in waits_on.items() if deps == [current]]:
        assert len(followers) == 1, f"{followers} would start together after {current}"
        current = followers[0]
        order.append(current)
    assert sorted(order) == sorted(nodes)


def test_cassandra_exposes_authenticated_remote_jmx_under_its_own_name() -> None:
    for name, node in cassandra_services(compose()).items():
        env = node["environment"]
        assert env["LOCAL_JMX"] == "no"
        assert f"-Djava.rmi.server.hostname={node['hostname']}" in env["JVM_EXTRA_OPTS"].split()
        assert node["hostname"] == name
        config_dir = next(host for target, host in bind_mounts(node).items() if target == "/ringward")
        for script in (node["entrypoint"][-1], node["healthcheck"]["test"][-1]):
            assert (ROOT / config_dir / Path(script).relative_to("/ringward")).is_file(), script


def test_secrets_are_required_and_never_defaulted() -> None:
    uses = list(compose_variable_uses())
    secrets = {name for name, _ in uses if SECRET_NAME.search(name)}
    assert secrets, "compose reads no secret at all"
    for name, operator in uses:
        if name in secrets:
            assert operator == ":?", f"${{{name}}} must be read as ${{{name}:?...}}"
    example = env_example()
    required = {name for name, operator in uses if operator in (":?", "?")}
    assert required <= set(example), f".env.example lacks {sorted(required - set(example))}"
    for name in secrets:
        assert example[name].startswith("CHANGE-ME"), f".env.example holds a value for {name}"


def test_missing_secret_stops_compose() -> None:
    without_password = {k: v for k, v in env_example().items() if k != "POSTGRES_PASSWORD"}
    with pytest.raises(MissingVariable, match="POSTGRES_PASSWORD"):
        compose(without_password)


def test_env_file_is_ignored_by_git() -> None:
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert ".env" in ignored


def test_cassandra_connection_reaches_every_node(airflow_secrets: ModuleType) -> None:
    model = compose()
    connection = parse_connection(airflow_secrets, "cassandra_default", connection_values(model)["cassandra_default"])
    assert connection.conn_type == "cassandra"
    assert set(connection.host.split(",")) == set(cassandra_services(model))
    assert connection.port == 9042


def test_spark_connection_names_the_standalone_master(
    airflow_secrets: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    model = compose()
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", connection_values(model)["spark_default"])
    resolved = SparkSubmitHook(conn_id="spark_default")._resolve_connection()
    master = services(model)["spark-master"]["command"]
    assert resolved["master"] == f"spark://{master[master.index('--host') + 1]}:7077"
    assert resolved["deploy_mode"] == "client"
    assert resolved["spark_binary"] == "spark-submit"


def test_nodetool_connection_carries_jmx_port_and_credentials(airflow_secrets: ModuleType) -> None:
    model = compose()
    example = env_example()
    connection = parse_connection(airflow_secrets, "ringward_nodetool", connection_values(model)["ringward_nodetool"])
    assert connection.conn_type == "ringward_nodetool"
    assert connection.port == 7199
    assert connection.login == example["RINGWARD_JMX_USER"]
    assert connection.password == example["RINGWARD_JMX_PASSWORD"]
    # NodetoolHook's contract: nodetool runs against each node's own address on the JMX port.
    assert connection.host == "{address}"
    assert connection.extra_dejson["nodetool_path"] == "/opt/cassandra/bin/nodetool"
    # JMX logs in with a Cassandra role: cassandra-init creates it with this login and password.
    _, init = cassandra_init_service(model)
    assert (init["environment"]["RINGWARD_JMX_USER"], init["environment"]["RINGWARD_JMX_PASSWORD"]) == (
        connection.login,
        connection.password,
    )
    assert connection.login == JMX_ROLE


def test_every_compose_connection_parses_and_none_is_overridden_by_env_example(airflow_secrets: ModuleType) -> None:
    """Every connection compose sets is built from .env's secrets (issue 36: spark_default carries the Spark
    cluster's RPC secret), so .env.example offers no AIRFLOW_CONN_* that would replace one without it."""
    example = env_example()
    assert [k for k in example if k.startswith("AIRFLOW_CONN_")] == []
    found = connection_values(compose(generated_env()))
    assert set(found) == {"cassandra_default", "cassandra_spark", "spark_default", "ringward_nodetool"}
    for conn_id, value in found.items():
        assert parse_connection(airflow_secrets, conn_id, value).conn_type, conn_id
    assert not [name for name, operator in compose_variable_uses() if name.startswith("AIRFLOW_CONN_")]


def dockerignore_keeps(path: str) -> bool:
    """Docker's rule: the last .dockerignore pattern matching the path (or a parent) decides."""
    kept = True
    for pattern in (ROOT / ".dockerignore").read_text().splitlines():
        pattern = pattern.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negated = pattern.startswith("!")
        pattern = pattern.removeprefix("!").rstrip("/")
        anywhere = pattern.startswith("**/")
        pattern = pattern.removeprefix("**/")
        parts = Path(path).parts
        # A pattern matches the path or one of its parents; `**/x` matches x at any depth.
        candidates = parts if anywhere else ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(candidate, pattern) for candidate in candidates):
            kept = negated
    return kept


def test_build_context_keeps_every_path_the_dockerfile_copies() -> None:
    copied = [
        source
        for keyword, arguments in dockerfile_instructions(DOCKERFILE)
        if keyword == "COPY" and not arguments.startswith("--from")
        for source in [word for word in arguments.split() if not word.startswith("--")][:-1]
    ]
    assert copied
    for source in copied:
        assert (ROOT / source).exists(), source
        assert dockerignore_keeps(source), f".dockerignore drops {source}"
    assert not dockerignore_keeps(".env")


@pytest.mark.parametrize("script", sorted((ROOT / "deploy").rglob("*.sh")), ids=lambda p: p.name)
def test_deployment_scripts_are_valid_bash(script: Path) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True)


def test_spark_worker_image_has_the_locked_python_driver_for_the_range_count_tasks() -> None:
    """The tasks read Cassandra through cassandra-driver on the executors; ringward's own code comes with each job."""
    text = SPARK_WORKER_DOCKERFILE.read_text()
    assert f"ARG CASSANDRA_DRIVER_VERSION={locked_version('cassandra-driver')}" in text
    assert '"cassandra-driver==${CASSANDRA_DRIVER_VERSION}"' in text
    minor = python_minor()
    assert f"python{minor} -m venv /opt/ringward/python" in text
    assert env_instructions(SPARK_WORKER_DOCKERFILE)["PATH"].startswith("/opt/ringward/python/bin:")


# --- issue 25: what the stack exposes --------------------------------------------------------------


def published_ports(service: Mapping[str, Any]) -> Iterator[tuple[str | None, str]]:
    """(host address or None for every interface, the mapping as written) for each published port."""
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            yield entry.get("host_ip"), str(entry)
            continue
        mapping = str(entry).rsplit("/", 1)[0]
        parts = mapping.rsplit(":", 2)
        yield (parts[0] if len(parts) == 3 else None), str(entry)


def test_every_published_port_is_bound_to_loopback_by_default() -> None:
    """Issue 25, finding 1 (and 12's Spark master UI): no port of the stack is published on every interface."""
    example = {k: v for k, v in env_example().items() if k != "RINGWARD_BIND_ADDRESS"}
    published = [
        (name, address, entry)
        for name, service in services(compose(example)).items()
        for address, entry in published_ports(service)
    ]
    assert published, "the stack publishes nothing: the test would prove nothing"
    for name, address, entry in published:
        assert address == "127.0.0.1", f"{name} publishes {entry} beyond the loopback interface"
    # The documented override reaches every published port (one variable, not one per service), except the
    # Spark master's UI, which has no login and stays on loopback (issue 36).
    everywhere = compose(example | {"RINGWARD_BIND_ADDRESS": "0.0.0.0"})
    widened = [
        (name, address, entry)
        for name, service in services(everywhere).items()
        for address, entry in published_ports(service)
    ]
    assert any(name != "spark-master" for name, _, _ in widened)
    for name, address, entry in widened:
        expected = "127.0.0.1" if name == "spark-master" else "0.0.0.0"
        assert address == expected, (
            f"{name}: {entry} ({'follows' if name == 'spark-master' else 'ignores'} RINGWARD_BIND_ADDRESS)"
        )


# --- issue 25, finding 1: Cassandra requires a login, and ringward's role is least privilege --------------


def generated_env() -> dict[str, str]:
    """.env.example with every secret replaced by a value generated as its comments say."""
    from cryptography.fernet import Fernet

    values = env_example()
    for name in [name for name in values if SECRET_NAME.search(name)]:
        values[name] = Fernet.generate_key().decode() if "FERNET" in name else secrets.token_hex(24)
    return values


def fake_commands(tmp_path: Path, programs: Mapping[str, str]) -> dict[str, str]:
    """An environment whose PATH finds the given Python programs first, under the given names."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    for name, source in programs.items():
        program = bin_dir / name
        program.write_text(f"#!{sys.executable}\n{textwrap.dedent(source)}")
        program.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path)}


def run_script(script: Path, env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(script), *args], env=dict(env), capture_output=True, text=True, timeout=60, check=False
    )


RECORD_ARGV = """
    import json, os, sys
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
"""


def recorded(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "commands.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


# A cqlsh that authenticates from --credentials files against a role table and keeps what it executes.
FAKE_CQLSH = """
    import configparser, json, os, re, sys
    state_path = os.environ["FAKE_CQL_STATE"]
    with open(state_path) as handle:
        state = json.load(handle)
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(json.dumps(["cqlsh", *sys.argv[1:]]) + "\\n")
    args, credentials, text = sys.argv[1:], None, None
    while args:
        arg = args.pop(0)
        if arg.startswith("--credentials="):
            credentials = arg.split("=", 1)[1]
        elif arg == "-e":
            text = args.pop(0)
        elif arg == "-f":
            with open(args.pop(0)) as handle:
                text = handle.read()
        elif arg.startswith("-"):
            sys.exit(f"fake cqlsh: unexpected option {arg}")
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(credentials or [])
    user = parser.get("PlainTextAuthProvider", "username", fallback=None)
    password = parser.get("PlainTextAuthProvider", "password", fallback=None)
    role = state["roles"].get(user)
    if not role or not role["login"] or role["password"] != password:
        sys.exit("Connection error: AuthenticationFailed('Provided username and/or password are incorrect')")
    roles, keyspaces = state["roles"], state["keyspaces"]
    for statement in [s.strip() for s in re.sub(r"--[^\\n]*", "", text).split(";") if s.strip()]:
        statement = " ".join(statement.split())
        state["executed"].append([user, statement])
        if statement.startswith("SELECT release_version"):
            print(" release_version\\n-----------------\\n 5.0.9\\n\\n(1 rows)")
        elif match := re.fullmatch(r"SELECT \\w+ FROM (\\w+)\\.\\w+ WHERE (\\w+) = '(\\w+)'", statement):
            found = match[3] in (keyspaces if match[2] == "keyspace_name" else roles)
            print(f"\\n({int(found)} rows)")
        elif match := re.fullmatch(r'(CREATE|ALTER) ROLE (IF NOT EXISTS )?"?(\\w+)"? WITH (.*)', statement):
            if match[1] == "CREATE" and match[3] in roles:
                continue
            if match[3] in os.environ.get("FAKE_CQL_UNCHANGED_ROLES", "").split(","):  # a change that never lands
                continue
            entry = roles.setdefault(match[3], {"password": None, "login": False, "superuser": False})
            for key, value in re.findall(r"(PASSWORD|LOGIN|SUPERUSER) = ('[^']*'|\\w+)", match[4]):
                entry[key.lower()] = value.strip("'") if key == "PASSWORD" else value == "true"
        elif match := re.fullmatch(r"CREATE KEYSPACE IF NOT EXISTS (\\w+) .*", statement):
            keyspaces.append(match[1]) if match[1] not in keyspaces else None
    with open(state_path, "w") as handle:
        json.dump(state, handle)
"""

DEFAULT_SUPERUSER = {"password": "cassandra", "login": True, "superuser": True}


def run_cassandra_init(
    tmp_path: Path, model: Mapping[str, Any], state: dict[str, Any]
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    _, init = cassandra_init_service(model)
    state_path = tmp_path / "cql-state.json"
    state_path.write_text(json.dumps({"executed": [], **state}))
    env = {
        **init["environment"],
        **fake_commands(tmp_path, {"cqlsh": FAKE_CQLSH, "nodetool": RECORD_ARGV}),
        "FAKE_LOG": str(tmp_path / "commands.jsonl"),
        "FAKE_CQL_STATE": str(state_path),
        "RINGWARD_INIT_ATTEMPTS": "2",
        "RINGWARD_INIT_RETRY_SECONDS": "0",
    }
    result = run_script(host_path(init, init["entrypoint"][-1]), env)
    return result, json.loads(state_path.read_text())


# ringward.permissions' list (docs/operators-guide.md §2.6), as the script sends it; `shop` stands for a managed
# keyspace, which the script always quotes.
GRANTS = (
    [statement.rstrip(";") for statement in grant_statements("ringward", [])]
    # The JMX role's per-MBean grants (Cassandra's JMX authorizer; issue 36, finding 6).
    + [statement.rstrip(";") for statement in jmx_grant_statements(JMX_ROLE)]
    + [
        grant.statement("ringward").rstrip(";").replace("KEYSPACE shop", 'KEYSPACE "shop"')
        for grant in keyspace_grants("shop")
    ]
    + [
        grant.statement(SPARK_ROLE).rstrip(";").replace("KEYSPACE shop", 'KEYSPACE "shop"')
        for grant in spark_keyspace_grants("shop")
    ]
)


def test_cassandra_init_replaces_the_default_superuser_and_creates_ringwards_role(tmp_path: Path) -> None:
    values = generated_env() | {"RINGWARD_MANAGED_KEYSPACES": "shop, not_created_yet"}
    model = compose(values)
    name, init = cassandra_init_service(model)
    nodes = cassandra_services(model)
    assert init["image"] == next(iter(nodes.values()))["image"]
    assert init["depends_on"] == {last_cassandra_node(model): {"condition": "service_healthy"}}
    assert init.get("restart", "no") == "no"
    assert init["environment"]["RINGWARD_CASSANDRA_NODES"].split(",") == sorted(nodes)
    admin = values["CASSANDRA_ADMIN_USER"]

    result, state = run_cassandra_init(
        tmp_path, model, {"roles": {"cassandra": DEFAULT_SUPERUSER}, "keyspaces": ["system", "system_auth", "shop"]}
    )
    assert result.returncode == 0, result.stderr
    executed = state["executed"]
    as_default = [statement for user, statement in executed if user == "cassandra"]
    assert any(s.startswith(f"CREATE ROLE IF NOT EXISTS {admin} WITH SUPERUSER = true") for s in as_default)
    replication = "{'class': 'NetworkTopologyStrategy', 'dc1': 3}"
    assert f"ALTER KEYSPACE system_auth WITH replication = {replication}" in as_default
    # Then every replica of system_auth gets the roles, node by node, before the admin logs in.
    repairs = [argv for argv in recorded(tmp_path) if argv[0] == "nodetool"]
    assert {argv[argv.index("-h") + 1] for argv in repairs} == set(nodes)
    assert all(argv[-3:] == ["repair", "--full", "system_auth"] and "--password-file" in argv for argv in repairs)
    # The default superuser can no longer log in, nor act as a superuser.
    assert state["roles"]["cassandra"]["login"] is False
    assert state["roles"]["cassandra"]["superuser"] is False
    assert state["roles"]["cassandra"]["password"] not in ("cassandra", "")
    assert state["roles"][admin] == {"password": values["CASSANDRA_ADMIN_PASSWORD"], "login": True, "superuser": True}
    as_admin = [statement for user, statement in executed if user == admin]
    assert f"CREATE KEYSPACE IF NOT EXISTS ringward_ops WITH replication = {replication}" in as_admin
    assert "ringward_ops" in state["keyspaces"]
    # The role the Airflow connection logs in as, with exactly the documented grants.
    ringward = state["roles"]["ringward"]
    assert ringward == {"password": values["RINGWARD_CQL_PASSWORD"], "login": True, "superuser": False}
    reader = state["roles"][SPARK_ROLE]  # the Spark verification's own role (cassandra_spark)
    assert reader == {"password": values["RINGWARD_SPARK_CQL_PASSWORD"], "login": True, "superuser": False}
    assert [statement for user, statement in executed if statement.startswith("GRANT")] == GRANTS
    assert all(user == admin for user, statement in executed if statement.startswith(("GRANT", "CREATE KEYSPACE")))
    assert "skipped keyspace not_created_yet" in result.stderr
    # No password reaches a command line.
    every_argument = " ".join(" ".join(argv) for argv in recorded(tmp_path))
    for secret_name in ("CASSANDRA_ADMIN_PASSWORD", "RINGWARD_CQL_PASSWORD", "RINGWARD_SPARK_CQL_PASSWORD",
                        "RINGWARD_JMX_PASSWORD"):  # fmt: skip
        assert values[secret_name] not in every_argument, f"{secret_name} appears on a command line"
    assert name == "cassandra-init"


def test_cassandra_init_runs_again_as_the_admin(tmp_path: Path) -> None:
    values = generated_env() | {"RINGWARD_MANAGED_KEYSPACES": "shop"}
    model = compose(values)
    first, state = run_cassandra_init(
        tmp_path, model, {"roles": {"cassandra": DEFAULT_SUPERUSER}, "keyspaces": ["system", "shop"]}
    )
    assert first.returncode == 0, first.stderr
    again, state = run_cassandra_init(tmp_path, model, {"roles": state["roles"], "keyspaces": state["keyspaces"]})
    assert again.returncode == 0, again.stderr
    assert {user for user, _ in state["executed"]} == {values["CASSANDRA_ADMIN_USER"]}
    assert [statement for _, statement in state["executed"] if statement.startswith("GRANT")] == GRANTS


def test_cassandra_init_stops_when_no_superuser_can_log_in(tmp_path: Path) -> None:
    values = generated_env()
    admin = {"password": "an-older-password", "login": True, "superuser": True}
    result, state = run_cassandra_init(
        tmp_path, compose(values), {"roles": {values["CASSANDRA_ADMIN_USER"]: admin}, "keyspaces": []}
    )
    assert result.returncode != 0
    assert "CASSANDRA_ADMIN_PASSWORD" in result.stderr
    assert state["executed"] == []


def test_airflow_task_runners_wait_for_cassandra_init() -> None:
    model = compose()
    init, _ = cassandra_init_service(model)
    for name in ("airflow-scheduler", "airflow-triggerer", "airflow-worker"):
        assert services(model)[name]["depends_on"][init] == {"condition": "service_completed_successfully"}, name


def test_every_airflow_component_waits_until_the_default_superuser_is_disabled() -> None:
    """Issue 36 (low): cassandra/cassandra logs in until cassandra-init succeeds; nothing of Airflow serves before."""
    model = compose()
    init, _ = cassandra_init_service(model)
    components = {
        name for name, service in airflow_services(model).items() if name != "airflow-init" and "debug" not in
        service.get("profiles", [])
    }  # fmt: skip
    assert {"airflow-apiserver", "airflow-dag-processor", "airflow-scheduler", "airflow-triggerer"} <= components
    for name in components:
        assert services(model)[name]["depends_on"].get(init) == {"condition": "service_completed_successfully"}, name


def test_cassandra_init_checks_that_no_node_lets_the_default_superuser_in(tmp_path: Path) -> None:
    values = generated_env()
    model = compose(values)
    result, _ = run_cassandra_init(tmp_path, model, {"roles": {"cassandra": DEFAULT_SUPERUSER}, "keyspaces": []})
    assert result.returncode == 0, result.stderr
    # Every node was asked with the default credentials after the roles were set.
    default_logins = [
        argv for argv in recorded(tmp_path)
        if argv[0] == "cqlsh" and argv[1] == f"--credentials={Path(argv[1].split('=', 1)[1]).parent}/default"
    ]  # fmt: skip
    assert {argv[-2] for argv in default_logins} >= set(cassandra_services(model))


def test_cassandra_init_fails_loudly_while_the_default_superuser_still_logs_in(tmp_path: Path) -> None:
    values = generated_env()
    model = compose(values)
    _, init = cassandra_init_service(model)
    init["environment"]["FAKE_CQL_UNCHANGED_ROLES"] = "cassandra"  # this model only: compose() builds a new one
    result, state = run_cassandra_init(tmp_path, model, {"roles": {"cassandra": DEFAULT_SUPERUSER}, "keyspaces": []})
    assert state["roles"]["cassandra"]["login"] is True  # the fake cluster kept it, as a failed ALTER would
    assert result.returncode != 0
    assert "default superuser cassandra/cassandra still logs in on cassandra-1" in result.stderr
    assert "docker compose run --rm cassandra-init" in result.stderr


def test_cassandra_connection_logs_in_as_the_ringward_role(airflow_secrets: ModuleType) -> None:
    values = generated_env()
    model = compose(values)
    connection = parse_connection(airflow_secrets, "cassandra_default", connection_values(model)["cassandra_default"])
    assert connection.login == "ringward"
    assert connection.password == values["RINGWARD_CQL_PASSWORD"]
    _, init = cassandra_init_service(model)
    assert init["environment"]["RINGWARD_CQL_PASSWORD"] == connection.password
    # The Spark verification logs in with its own read-only role, which cassandra-init creates.
    reader = parse_connection(airflow_secrets, "cassandra_spark", connection_values(model)["cassandra_spark"])
    assert (reader.login, reader.host) == (SPARK_ROLE, connection.host)
    assert (
        reader.password == values["RINGWARD_SPARK_CQL_PASSWORD"] == init["environment"]["RINGWARD_SPARK_CQL_PASSWORD"]
    )


# cassandra.yaml as the releases write it: a one-line value (4.x, 5.0's authorizer) or a class_name block.
CASSANDRA_YAML_FORMS = {
    "one-line": """\
        cluster_name: 'Test Cluster'
        # - PasswordAuthenticator relies on username/password pairs to authenticate
        authenticator: AllowAllAuthenticator
        # - CassandraAuthorizer stores permissions in system_auth.role_permissions table.
        authorizer: AllowAllAuthorizer
        role_manager: CassandraRoleManager
        network_authorizer: AllowAllNetworkAuthorizer
        """,
    "class_name blocks": """\
        cluster_name: 'Test Cluster'
        authenticator:
          class_name : org.apache.cassandra.auth.AllowAllAuthenticator
        # MutualTlsAuthenticator can be configured using the following configuration.
        #  class_name: org.apache.cassandra.auth.MutualTlsAuthenticator
        #  parameters:
        #    validator_class_name: org.apache.cassandra.auth.SpiffeCertificateValidator

        authorizer:
          class_name: AllowAllAuthorizer
        role_manager:
          class_name: CassandraRoleManager
          parameters:
            # invalid_role_disconnect_task_period: 4h
        cidr_authorizer:
          class_name: AllowAllCIDRAuthorizer
        """,
}


@pytest.mark.parametrize("form", sorted(CASSANDRA_YAML_FORMS))
def test_cassandra_nodes_require_a_login_and_authorize_by_role(tmp_path: Path, form: str) -> None:
    values = generated_env()
    for name, node in cassandra_services(compose(values)).items():
        conf = tmp_path / name
        conf.mkdir()
        original = yaml.safe_load(textwrap.dedent(CASSANDRA_YAML_FORMS[form]))
        (conf / "cassandra.yaml").write_text(textwrap.dedent(CASSANDRA_YAML_FORMS[form]))
        env = {
            **node["environment"],
            **fake_commands(tmp_path, {"docker-entrypoint.sh": RECORD_ARGV, "chown": RECORD_ARGV}),
            "FAKE_LOG": str(tmp_path / "commands.jsonl"),
            "CASSANDRA_CONF": str(conf),
        }
        entrypoint = host_path(node, node["entrypoint"][-1])
        for _ in range(2):  # a container restart runs it again on the edited file
            result = run_script(entrypoint, env, *node["command"])
            assert result.returncode == 0, result.stderr
            config = yaml.safe_load((conf / "cassandra.yaml").read_text())
            assert config["authenticator"] == "PasswordAuthenticator", name
            assert config["authorizer"] == "CassandraAuthorizer", name
            assert {k: v for k, v in config.items() if k not in ("authenticator", "authorizer")} == {
                k: v for k, v in original.items() if k not in ("authenticator", "authorizer")
            }
        # JMX logs in through the JAAS entry JVM_EXTRA_OPTS names; no password or access file on the node.
        jaas = conf / "cassandra-jaas.config"
        assert "org.apache.cassandra.auth.CassandraLoginModule REQUIRED;" in jaas.read_text()
        assert f"-Djava.security.auth.login.config=/etc/cassandra/{jaas.name}" in node["environment"]["JVM_EXTRA_OPTS"]
        assert not (conf / "jmxremote.password").exists() and not (conf / "jmxremote.access").exists()
        assert recorded(tmp_path)[-1] == ["docker-entrypoint.sh", *node["command"]]


def test_cassandra_healthcheck_needs_no_login(tmp_path: Path) -> None:
    """Healthy once the node's native port accepts connections (Cassandra opens it after joining the ring): no CQL
    login (the roles come later, from cassandra-init) and no JMX login (JMX logins are Cassandra roles too)."""
    node = next(iter(cassandra_services(compose(generated_env())).values()))
    assert not [name for name in node["environment"] if SECRET_NAME.search(name)], "a node holds a secret"
    programs = {
        "hostname": "import sys; print('127.0.0.1' if '-i' in sys.argv else 'cassandra-1')",
        "cqlsh": "import sys; sys.exit('AuthenticationFailed: Remote end requires authentication')",
        "nodetool": "import sys; sys.exit('nodetool: Failed to connect: SecurityException: Authentication failed')",
    }
    env = {**node["environment"], **fake_commands(tmp_path, programs)}
    script = host_path(node, node["healthcheck"]["test"][-1])
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = str(listening.getsockname()[1])
        result = run_script(script, {**env, "CASSANDRA_NATIVE_PORT": port})
        assert result.returncode == 0, result.stdout + result.stderr
    # Nothing listens there any more: unhealthy.
    assert run_script(script, {**env, "CASSANDRA_NATIVE_PORT": port}).returncode != 0


# --- issue 25, finding 7: the stack refuses the placeholders of .env.example --------------------------

SECRET_CHECK = ROOT / "deploy" / "check-secrets.sh"


def env_example_secrets() -> list[str]:
    return [name for name in env_example() if SECRET_NAME.search(name)]


def secret_check_invocations(service: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """(script path in the container, variable names) for each check-secrets.sh call in a service's command."""
    command = service.get("command")
    script = command[-1] if isinstance(command, list) else str(command or "")
    calls = []
    for line in script.splitlines():
        words = line.split()
        for index, word in enumerate(words):
            if word.endswith("/check-secrets.sh"):
                calls.append((word, [w for w in words[index + 1 :] if re.fullmatch(r"[A-Z_][A-Z0-9_]*", w)]))
    return calls


def test_secret_check_refuses_the_placeholders_of_env_example() -> None:
    names = env_example_secrets()
    assert names
    result = run_script(SECRET_CHECK, {"PATH": os.environ["PATH"], **env_example()}, *names)
    assert result.returncode != 0
    for name in names:
        assert f"{name} still holds the placeholder" in result.stderr, name
    assert "python3 -c" in result.stderr  # and how to generate a value


def test_secret_check_accepts_generated_values() -> None:
    result = run_script(SECRET_CHECK, {"PATH": os.environ["PATH"], **generated_env()}, *env_example_secrets())
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("AIRFLOW_JWT_SECRET", "", "is not set"),
        ("AIRFLOW_JWT_SECRET", "change-me-later-" + "x" * 32, "placeholder"),
        ("AIRFLOW_JWT_SECRET", "a" * 31, "shorter than 32 characters"),
        ("AIRFLOW_API_SECRET_KEY", "a" * 31, "shorter than 32 characters"),
        ("RINGWARD_CQL_PASSWORD", "a" * 15, "shorter than 16 characters"),
        ("RINGWARD_CQL_PASSWORD", "p@ssword/with:uri-chars", "characters other than"),
        ("AIRFLOW_FERNET_KEY", "a" * 44, "is not a Fernet key"),
    ],
)
def test_secret_check_refuses_weak_values(name: str, value: str, problem: str) -> None:
    env = {"PATH": os.environ["PATH"], **generated_env(), name: value}
    result = run_script(SECRET_CHECK, env, *env_example_secrets())
    assert result.returncode != 0
    refusals = [line for line in result.stderr.splitlines() if line.startswith("refusing to start")]
    assert len(refusals) == 1, refusals
    assert refusals[0].startswith(f"refusing to start: {name} ") and problem in refusals[0]


def test_airflow_init_checks_every_secret_of_env_example_before_anything_else() -> None:
    model = compose()
    init = services(model)["airflow-init"]
    calls = secret_check_invocations(init)
    assert len(calls) == 1, calls
    path, names = calls[0]
    assert sorted(names) == sorted(env_example_secrets()), "airflow-init must check every secret of .env.example"
    assert host_path(init, path) == SECRET_CHECK
    first_command = next(line for line in init["command"][-1].splitlines() if line.strip())
    assert "check-secrets.sh" in first_command and first_command.rstrip().endswith("|| exit 1")
    # It sees the values compose was given: with .env.example's, it refuses; with real ones, it passes.
    result = run_script(SECRET_CHECK, {"PATH": os.environ["PATH"], **init["environment"]}, *names)
    assert result.returncode != 0 and all(name in result.stderr for name in names)
    generated = services(compose(generated_env()))["airflow-init"]["environment"]
    assert run_script(SECRET_CHECK, {"PATH": os.environ["PATH"], **generated}, *names).returncode == 0


def test_every_other_service_waits_for_airflow_init() -> None:
    """A placeholder stops the whole stack: everything but airflow-init's own dependencies waits for it."""
    model = services(compose())
    settled = {"service_healthy", "service_completed_successfully"}

    def waits_for(name: str, target: str, seen: frozenset[str] = frozenset()) -> bool:
        dependencies = model[name].get("depends_on", {})
        return any(
            rule["condition"] in settled and (dependency == target or waits_for(dependency, target, seen | {name}))
            for dependency, rule in dependencies.items()
            if dependency not in seen
        )

    needed_by_init = {name for name in model if waits_for("airflow-init", name)}
    assert needed_by_init == {"postgres"}
    for name in set(model) - needed_by_init - {"airflow-init"}:
        assert waits_for(name, "airflow-init"), f"{name} starts without waiting for airflow-init"


def test_cassandra_scripts_refuse_the_placeholders_of_env_example(tmp_path: Path) -> None:
    model = compose()
    fakes = fake_commands(
        tmp_path, {name: RECORD_ARGV for name in ("docker-entrypoint.sh", "chown", "cqlsh", "nodetool")}
    )
    log = {"FAKE_LOG": str(tmp_path / "commands.jsonl")}
    # The nodes hold no secret (JMX logs in with Cassandra's roles, issue 36): cassandra-init checks the ones it sets.
    for name, node in cassandra_services(model).items():
        assert not [key for key in node["environment"] if SECRET_NAME.search(key)], name
    _, init = cassandra_init_service(model)
    result = run_script(host_path(init, init["entrypoint"][-1]), {**init["environment"], **fakes, **log})
    assert result.returncode != 0
    for name in ("CASSANDRA_ADMIN_PASSWORD", "RINGWARD_CQL_PASSWORD", "RINGWARD_JMX_PASSWORD"):
        assert f"{name} still holds the placeholder" in result.stderr
    assert recorded(tmp_path) == [], "nothing may run before the check"


# --- issue 36: the compose stack's low findings ----------------------------------------------------------


def run_healthcheck(service: Mapping[str, Any], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """A CMD-SHELL healthcheck run by sh, as Docker runs it, with `env` as the container's environment."""
    kind, command = service["healthcheck"]["test"]
    assert kind == "CMD-SHELL"
    return subprocess.run(["sh", "-c", command], env=dict(env), capture_output=True, text=True, timeout=60, check=False)


# A redis-cli that answers PING as a redis started with --requirepass FAKE_REDIS_PASSWORD does.
FAKE_REDIS_CLI = """
    import os, sys
    if sys.argv[1:] != ["ping"]:
        sys.exit(f"fake redis-cli: unexpected arguments {sys.argv[1:]}")
    authenticated = os.environ.get("REDISCLI_AUTH") == os.environ["FAKE_REDIS_PASSWORD"]
    print("PONG" if authenticated else "NOAUTH Authentication required.")  # exit status 0 either way
"""


def test_redis_requires_the_password_the_broker_url_and_healthcheck_use(tmp_path: Path) -> None:
    """Issue 36 (low): redis was open to every container of the compose network."""
    assert "REDIS_PASSWORD" in env_example_secrets()
    values = generated_env()
    model = compose({**values, "AIRFLOW_EXECUTOR": "CeleryExecutor"})
    redis = services(model)["redis"]
    password = values["REDIS_PASSWORD"]
    assert redis["environment"]["REDIS_PASSWORD"] == password
    # The server requires it; the value reaches redis-server through the environment, not this file's text.
    kind, flag, script = redis["command"]
    assert (kind, flag) == ("sh", "-c")
    # Through the image's entrypoint, which drops root for the user `redis` before it starts redis-server.
    assert shlex.split(script) == ["exec", "docker-entrypoint.sh", "redis-server", "--requirepass", "${REDIS_PASSWORD}"]
    assert password not in script
    for name, service in airflow_services(model).items():
        broker = urlsplit(service["environment"]["AIRFLOW__CELERY__BROKER_URL"])
        assert (broker.hostname, broker.password) == ("redis", password), name
    # The healthcheck passes only on an authenticated PONG.
    fakes = fake_commands(tmp_path, {"redis-cli": FAKE_REDIS_CLI})
    assert run_healthcheck(redis, {**redis["environment"], **fakes, "FAKE_REDIS_PASSWORD": password}).returncode == 0
    wrong = {**redis["environment"], **fakes, "FAKE_REDIS_PASSWORD": "another-password-entirely"}
    assert run_healthcheck(redis, wrong).returncode != 0
    # No default: without the secret compose refuses to start.
    with pytest.raises(MissingVariable, match="REDIS_PASSWORD"):
        compose({k: v for k, v in values.items() if k != "REDIS_PASSWORD"})


SPARK_DAEMON = ROOT / "deploy" / "spark" / "daemon.sh"
# A spark-class that records its arguments and the properties file it was given.
FAKE_SPARK_CLASS = """
    import json, os, sys
    args = sys.argv[1:]
    path = args[args.index("--properties-file") + 1]
    with open(os.environ["FAKE_LOG"], "a") as log:
        mode, properties = oct(os.stat(path).st_mode & 0o777), open(path).read()
        log.write(json.dumps({"argv": args, "mode": mode, "properties": properties}) + "\\n")
"""


def spark_daemon_runs(service: Mapping[str, Any], tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Any]:
    """Run a Spark service's command as its container would (a fake spark-class), and what spark-class got."""
    home = tmp_path / "spark-home"
    (home / "bin").mkdir(parents=True, exist_ok=True)
    fake = home / "bin" / "spark-class"
    fake.write_text(f"#!{sys.executable}\n{textwrap.dedent(FAKE_SPARK_CLASS)}")
    fake.chmod(0o755)
    log = tmp_path / "spark-class.jsonl"
    log.unlink(missing_ok=True)
    command = service["command"]
    assert command[:2] == ["bash", "/ringward/spark/daemon.sh"]
    env = {**service["environment"], "PATH": os.environ["PATH"], "SPARK_HOME": str(home), "FAKE_LOG": str(log),
           "TMPDIR": str(tmp_path)}  # fmt: skip
    result = run_script(host_path(service, command[1]), env, *command[2:])
    return result, json.loads(log.read_text()) if log.exists() else None


def java_properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_spark_master_worker_and_submissions_authenticate_and_encrypt_rpc(
    airflow_secrets: ModuleType, tmp_path: Path
) -> None:
    """Issue 36 (low): the Spark master and Spark RPC were open to the compose network."""
    assert "RINGWARD_SPARK_AUTH_SECRET" in env_example_secrets()
    values = generated_env()
    model = compose(values)
    secret = values["RINGWARD_SPARK_AUTH_SECRET"]
    for name in ("spark-master", "spark-worker"):
        result, started = spark_daemon_runs(services(model)[name], tmp_path)
        assert result.returncode == 0, result.stderr
        properties = java_properties(started["properties"])
        assert properties["spark.authenticate"] == "true", name
        assert properties["spark.authenticate.secret"] == secret, name
        assert properties["spark.network.crypto.enabled"] == "true", name
        assert properties["spark.master.rest.enabled"] == "false", name
        assert started["mode"] == "0o600", name
        assert secret not in " ".join(started["argv"]), f"{name}: the secret is on a command line"
        assert started["argv"][0] == services(model)[name]["command"][2]
    # The Airflow side submits with the same secret, through the provider's hook and ringward's checked extra.
    from ringward_cassandra.connection_extras import checked_spark_conf
    from ringward_spark.submit import CONF_EXTRA, RPC_SECURITY

    spark = parse_connection(airflow_secrets, "spark_default", connection_values(model)["spark_default"])
    conf = dict(checked_spark_conf(spark.extra_dejson[CONF_EXTRA]))
    assert {key: conf.get(key) for key in RPC_SECURITY} == dict(RPC_SECURITY)
    assert conf["spark.authenticate.secret"] == secret
    assert spark.extra_dejson["deploy-mode"] == "client"


def test_spark_daemons_refuse_the_placeholder_secret(tmp_path: Path) -> None:
    result, started = spark_daemon_runs(services(compose())["spark-master"], tmp_path)
    assert result.returncode != 0
    assert "RINGWARD_SPARK_AUTH_SECRET still holds the placeholder" in result.stderr
    assert started is None, "spark-class ran without a usable secret"


def test_spark_master_ui_stays_on_loopback_whatever_the_bind_address() -> None:
    widened = compose(generated_env() | {"RINGWARD_BIND_ADDRESS": "0.0.0.0"})
    ports = list(published_ports(services(widened)["spark-master"]))
    assert ports
    assert {address for address, _ in ports} == {"127.0.0.1"}


# The secrets that act on the clusters' machines: JMX (repair, cleanup, snapshot; issue 36, finding 6) and the
# Spark cluster's shared secret (whoever holds it may run code on the Spark workers).
TASK_RUNNER_SECRETS = ("RINGWARD_JMX_PASSWORD", "RINGWARD_SPARK_AUTH_SECRET")


def test_jmx_and_spark_secrets_reach_only_the_components_that_run_tasks() -> None:
    """Issue 36, finding 6: the JMX credentials reached every Airflow component, the API server and the DAG
    processor included. Tasks run in the scheduler (LocalExecutor) and the Celery workers; ringward's trigger
    (RepairSessionTrigger) reads repair history over CQL only, so the triggerer needs neither."""
    values = generated_env()
    for executor in ("ringward_airflow.executor.LocalExecutor", "CeleryExecutor"):
        model = compose(values | {"AIRFLOW_EXECUTOR": executor})
        components = airflow_services(model)
        holders = {
            name for name, service in components.items()
            if any(values[secret] in text for secret in TASK_RUNNER_SECRETS for text in strings_in(service))
        }  # fmt: skip
        # airflow-init receives every secret only to check it (deploy/check-secrets.sh), then exits.
        assert holders == {"airflow-init", "airflow-scheduler", "airflow-worker"}, executor
        for name in ("airflow-apiserver", "airflow-dag-processor", "airflow-triggerer"):
            environment = components[name]["environment"]
            assert "AIRFLOW_CONN_RINGWARD_NODETOOL" not in environment, name
            assert "AIRFLOW_CONN_SPARK_DEFAULT" not in environment, name
        init_env = components["airflow-init"]["environment"]
        assert not [key for key in init_env if key.startswith(("AIRFLOW_CONN_RINGWARD", "AIRFLOW_CONN_SPARK"))]
        for name in ("airflow-scheduler", "airflow-worker"):
            environment = components[name]["environment"]
            assert values["RINGWARD_JMX_PASSWORD"] in environment["AIRFLOW_CONN_RINGWARD_NODETOOL"], name
            assert values["RINGWARD_SPARK_AUTH_SECRET"] in environment["AIRFLOW_CONN_SPARK_DEFAULT"], name


JMX_AUTHORIZER_OPTIONS = (
    "-Dcassandra.jmx.remote.login.config=CassandraLogin",
    "-Djava.security.auth.login.config=/etc/cassandra/cassandra-jaas.config",
    "-Dcassandra.jmx.authorizer=org.apache.cassandra.auth.jmx.AuthorizationProxy",
)


def test_cassandra_nodes_authorize_jmx_per_mbean_through_cassandras_roles() -> None:
    """Issue 36, finding 6: the JMX user was `readwrite` on every MBean (an access file knows nothing finer)."""
    nodes = cassandra_services(compose(generated_env()))
    assert nodes
    for name, node in nodes.items():
        options = node["environment"]["JVM_EXTRA_OPTS"].split()
        assert set(JMX_AUTHORIZER_OPTIONS) <= set(options), name
        assert not [o for o in options if o.startswith("-Dcom.sun.management.jmxremote.access.file")], name
        assert node["environment"]["LOCAL_JMX"] == "no", name


def test_cassandra_init_creates_the_jmx_role_with_exactly_its_mbean_grants(tmp_path: Path) -> None:
    values = generated_env()
    model = compose(values)
    result, state = run_cassandra_init(tmp_path, model, {"roles": {"cassandra": DEFAULT_SUPERUSER}, "keyspaces": []})
    assert result.returncode == 0, result.stderr
    jmx_user = values["RINGWARD_JMX_USER"]
    assert jmx_user == JMX_ROLE
    assert state["roles"][jmx_user] == {"password": values["RINGWARD_JMX_PASSWORD"], "login": True, "superuser": False}
    granted = [statement for user, statement in state["executed"] if statement.startswith("GRANT")]
    to_jmx = [statement for statement in granted if statement.endswith(f" TO {jmx_user}")]
    assert to_jmx == [statement.rstrip(";") for statement in jmx_grant_statements(jmx_user)]
    # The JMX login for the system_auth repair is the admin's (JMX logins are Cassandra roles; the JMX role's
    # grants come last), and its password travels in a file.
    repairs = [argv for argv in recorded(tmp_path) if argv[0] == "nodetool"]
    assert repairs
    assert {argv[argv.index("-u") + 1] for argv in repairs} == {values["CASSANDRA_ADMIN_USER"]}
    # system_auth is replicated before the admin's role is written (every node can then read it).
    changes = [s for user, s in state["executed"] if user == "cassandra" and not s.startswith("SELECT")]
    assert changes[0].startswith("ALTER KEYSPACE system_auth")
    assert any(change.startswith(f"CREATE ROLE IF NOT EXISTS {values['CASSANDRA_ADMIN_USER']}") for change in changes)


@pytest.mark.parametrize("role", ["ringward", "ringward_spark", "cassandra", "ringward_admin"])
def test_cassandra_init_refuses_a_jmx_user_that_is_another_role(tmp_path: Path, role: str) -> None:
    values = generated_env() | {"RINGWARD_JMX_USER": role}
    result, state = run_cassandra_init(
        tmp_path, compose(values), {"roles": {"cassandra": DEFAULT_SUPERUSER}, "keyspaces": []}
    )
    assert result.returncode != 0
    assert "RINGWARD_JMX_USER must be a role of its own" in result.stderr
    assert state["executed"] == []


def test_cassandra_init_stops_loudly_when_a_node_never_repairs_system_auth(tmp_path: Path) -> None:
    values = generated_env()
    model = compose(values)
    _, init = cassandra_init_service(model)
    state_path = tmp_path / "cql-state.json"
    state_path.write_text(json.dumps({"executed": [], "roles": {"cassandra": DEFAULT_SUPERUSER}, "keyspaces": []}))
    refusing = RECORD_ARGV + "\n    sys.exit('nodetool: Failed to connect: SecurityException: Authentication failed')\n"
    env = {
        **init["environment"],
        **fake_commands(tmp_path, {"cqlsh": FAKE_CQLSH, "nodetool": refusing}),
        "FAKE_LOG": str(tmp_path / "commands.jsonl"),
        "FAKE_CQL_STATE": str(state_path),
        "RINGWARD_INIT_ATTEMPTS": "2",
        "RINGWARD_INIT_RETRY_SECONDS": "0",
    }
    result = run_script(host_path(init, init["entrypoint"][-1]), env)
    assert result.returncode != 0
    assert "could not repair system_auth on cassandra-1" in result.stderr
    assert len([argv for argv in recorded(tmp_path) if argv[0] == "nodetool"]) == 2  # asked again, then stopped
    state = json.loads(state_path.read_text())
    assert not [statement for _, statement in state["executed"] if statement.startswith("GRANT")]


# JMX over TLS (issue 36): the nodes serve JMX over TLS only, with a key store that only they (and airflow-init,
# which makes it) mount; nodetool speaks TLS and trusts the nodes' certificate, mounted only where it runs.
JMX_TLS_OPTIONS = (
    "-Dcom.sun.management.jmxremote.ssl=true",
    "-Dcom.sun.management.jmxremote.registry.ssl=true",
    "-Dcom.sun.management.jmxremote.ssl.need.client.auth=false",
    "@/ringward-jmx/jmx-tls.jvmargs",
)
JMX_TRUSTSTORE = "/opt/ringward/jmx-trust/truststore.jks"


def named_volumes(service: Mapping[str, Any]) -> dict[str, str]:
    """volume name -> container path (with its mode, `path:ro`), for short-syntax named volumes."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *mode = str(volume).split(":")
        if not source.startswith(("./", "/")):
            mounts[source] = ":".join([target, *mode])
    return mounts


def test_cassandra_nodes_serve_jmx_over_tls_only() -> None:
    model = compose(generated_env())
    nodes = cassandra_services(model)
    assert nodes
    for name, node in nodes.items():
        options = node["environment"]["JVM_EXTRA_OPTS"].split()
        assert set(JMX_TLS_OPTIONS) <= set(options), name
        # cassandra-env.sh: with SSL the RMI port cannot be the JMX port it sets by default (7199).
        rmi_ports = [o.split("=", 1)[1] for o in options if o.startswith("-Dcom.sun.management.jmxremote.rmi.port=")]
        assert rmi_ports and rmi_ports[-1] != "7199", name
        # The key store and its password reach the node through the @argfile, never its environment.
        assert not [o for o in options if o.startswith("-Djavax.net.ssl.keyStorePassword")], name
        assert named_volumes(node)["cassandra-jmx-keystore"] == "/ringward-jmx:ro", name
        assert "7299" not in " ".join(str(port) for port in node.get("ports", [])), name
    assert {"cassandra-jmx-keystore", "jmx-truststore"} <= set(model["volumes"])


def test_the_jmx_key_store_is_the_nodes_and_the_trust_store_the_task_runners() -> None:
    for executor in ("ringward_airflow.executor.LocalExecutor", "CeleryExecutor"):
        model = compose(generated_env() | {"AIRFLOW_EXECUTOR": executor})
        with_keystore = {name for name, s in services(model).items() if "cassandra-jmx-keystore" in named_volumes(s)}
        assert with_keystore == {*cassandra_services(model), "airflow-init"}, executor
        with_truststore = {name for name, s in services(model).items() if "jmx-truststore" in named_volumes(s)}
        init_name, _ = cassandra_init_service(model)
        assert with_truststore == {"airflow-init", "airflow-scheduler", "airflow-worker", init_name}, executor
        for name in ("airflow-scheduler", "airflow-worker", init_name):
            assert named_volumes(services(model)[name])["jmx-truststore"] == "/opt/ringward/jmx-trust:ro", name
        # The scheduler and the workers keep the repository mounts the other components have.
        for name in ("airflow-scheduler", "airflow-worker"):
            assert {"/opt/airflow/dags", "/opt/airflow/plugins", "/opt/airflow/include"} <= set(
                bind_mounts(services(model)[name])
            ), name


def test_airflow_init_makes_the_jmx_stores_in_the_volumes_it_hands_on() -> None:
    init = services(compose(generated_env()))["airflow-init"]
    volumes = named_volumes(init)
    command = init["command"][-1]
    assert f"bash /ringward/jmx-tls.sh {volumes['cassandra-jmx-keystore']} {volumes['jmx-truststore']}" in command
    assert command.index("check-secrets.sh") < command.index("jmx-tls.sh")
    assert host_path(init, "/ringward/jmx-tls.sh").exists()


def test_nodetool_connection_speaks_tls_and_trusts_the_nodes_certificate(airflow_secrets: ModuleType) -> None:
    model = compose()
    connection = parse_connection(airflow_secrets, "ringward_nodetool", connection_values(model)["ringward_nodetool"])
    extra = connection.extra_dejson
    assert extra["ssl"] is True
    assert f"-Djavax.net.ssl.trustStore={JMX_TRUSTSTORE}" in extra["java_options"]
    assert not [o for o in extra["java_options"] if "Password" in o]
    checked_nodetool_extra({"java_options": extra["java_options"]})
    # Cassandra's bin/nodetool (a script) gets --ssl and the trust store as -D arguments it hands to its JVM.
    client = NodetoolClient(nodetool_path=extra["nodetool_path"], ssl=extra["ssl"],
                            java_options=tuple(extra["java_options"]))  # fmt: skip
    command = client.command("cassandra-1", ["status"])
    assert command[:2] == ["/opt/cassandra/bin/nodetool", "--ssl"]
    assert f"-Djavax.net.ssl.trustStore={JMX_TRUSTSTORE}" in command[: command.index("-h")]


def test_cassandra_init_repairs_over_jmx_tls(tmp_path: Path) -> None:
    values = generated_env()
    result, _ = run_cassandra_init(
        tmp_path, compose(values), {"roles": {"cassandra": DEFAULT_SUPERUSER}, "keyspaces": []}
    )
    assert result.returncode == 0, result.stderr
    repairs = [argv for argv in recorded(tmp_path) if argv[0] == "nodetool"]
    assert repairs
    for argv in repairs:
        assert "--ssl" in argv and f"-Djavax.net.ssl.trustStore={JMX_TRUSTSTORE}" in argv, argv


@pytest.mark.skipif(shutil.which("keytool") is None, reason="keytool makes the stores (the image's Java has it)")
def test_the_jmx_tls_script_makes_private_node_files_and_a_public_trust_store_once(tmp_path: Path) -> None:
    node, trust = tmp_path / "node", tmp_path / "trust"
    node.mkdir()
    trust.mkdir()
    env = {"PATH": os.environ["PATH"], "CASSANDRA_UID": str(os.getuid())}
    script = ROOT / "deploy" / "jmx-tls.sh"
    for _ in range(2):  # airflow-init runs at every `docker compose up`
        result = subprocess.run(["bash", str(script), str(node), str(trust)], env=env, capture_output=True, text=True,
                                check=False)  # fmt: skip
        assert result.returncode == 0, result.stderr
        if _ == 0:
            first = (node / "keystore.p12").read_bytes()
    assert (node / "keystore.p12").read_bytes() == first  # kept: the clients' trust store stays valid
    assert stat.S_IMODE((node / "keystore.p12").stat().st_mode) == 0o400
    assert stat.S_IMODE((node / "jmx-tls.jvmargs").stat().st_mode) == 0o400
    assert stat.S_IMODE((trust / "truststore.jks").stat().st_mode) == 0o444
    arguments = (node / "jmx-tls.jvmargs").read_text().splitlines()
    assert arguments[0] == '"-Djavax.net.ssl.keyStore=/ringward-jmx/keystore.p12"'
    assert re.fullmatch(r'"-Djavax\.net\.ssl\.keyStorePassword=[0-9a-f]{48}"', arguments[-1])
    listed = subprocess.run(["keytool", "-list", "-v", "-keystore", str(trust / "truststore.jks")], input="\n",
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert listed.returncode == 0 and "trustedCertEntry" in listed.stdout, listed.stderr
    assert all(f"DNSName: {name}" in listed.stdout for name in cassandra_services(compose(generated_env())))
