"""Airflow as an operator runs it: api-server, scheduler, dag-processor and triggerer as separate processes
against a throwaway AIRFLOW_HOME, driven only through the public REST API (/api/v2) the UI calls.

Every REST call goes through Airflow's official Python client (apache-airflow-client, of the same release
as the stack), whose models validate each response: a change in the API's shape fails the tests. One
request is not the client's: the token (POST /auth/token, which the client has no call for). A task try's
log is fetched with the client but read line by line with its model of a log line, not its model of the
whole response, which drops what a failed try's exception says (see `log_text`). The AirflowStack methods
return the responses as the API's JSON has them (`as_json`): dicts, enums as strings, times as ISO strings.

Two executors, as deployed:
- `local` (the default): ringward's LocalExecutor subclass (ringward_airflow.executor) on SQLite, as
  `ringward airflow` and the compose file's default configure. Airflow 3.3 has no SequentialExecutor any more and
  allows LocalExecutor on SQLite (`airflow standalone` runs exactly that): a one-machine deployment.
- `celery`: CeleryExecutor, as the compose file's `celery` profile: Debian's redis-server on loopback (a free
  port, no persistence) as broker, and `airflow celery worker` as a separate process, not the scheduler's child;
  the result backend is the metadata database, as Airflow recommends (it warns against redis there). Airflow 3.3
  accepts SQLite with Celery, so the metadata database stays SQLite (PostgreSQL in compose).

`airflow` names the Airflow installation the components run from: by default this interpreter's (the locked
3.3), or another virtualenv's `bin/airflow` (the 3.4 side environment, `make venv-af34`), with ringward
installed in it. The tests still drive it with this environment's client: an API change would show.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import airflow_client.client as client
import httpx
import urllib3
from pydantic import BaseModel
from pydantic_core import to_jsonable_python
from ringward_cli.airflow_env import ensure_repair_pool, migrate_airflow_db

ROOT = Path(__file__).resolve().parents[2]
USER, PASSWORD = "admin", "ringward-test"
# A second person, who may approve what `USER` triggers when the deployment refuses self-approval.
APPROVER = "approver"
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
EXECUTORS = ("local", "celery")
LOCAL_EXECUTOR = "ringward_airflow.executor.LocalExecutor"
CELERY_WORKER_CONCURRENCY = 2
TERMINAL = {"success", "failed"}
# Seconds for each REST call: longer than the 60 s an API server's SQLite write waits for the lock (`ringward airflow`'s
# sql_alchemy_connect_args), so a call that waited for the writer is answered, not cut by the client (a trigger
# timed out at 60 s while the other cluster's night ran: test_two_clusters.py, 2026-11-30).
TIMEOUT = 150


_PORTS = random.Random()


def free_port() -> int:
    """A port no one listens on, from below the kernel's ephemeral range: a port that binding to 0 hands out is one
    an outgoing connection (a driver, a redis client, the other lane) may take as its local port before the
    server binds it, which failed a Celery stack's api-server with "address already in use" (2026-11-29)."""
    try:
        first_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 32768
    for _ in range(500):
        port = _PORTS.randrange(10_000, max(10_001, first_ephemeral))
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"No free port in 10000-{first_ephemeral - 1} on 127.0.0.1 after 500 tries.")


def topology_under_test(name: str) -> str:
    """A topology preset, or the file a developer names in RINGWARD_TEST_TOPOLOGY_<NAME> to run the tests on other
    loopback addresses beside another cluster (the cluster and the Airflow connections both follow it)."""
    return os.environ.get(f"RINGWARD_TEST_TOPOLOGY_{name.upper().replace('-', '_')}", name)


def celery_settings(redis_host: str, redis_port: int, sql_alchemy_conn: str) -> dict[str, str]:
    """CeleryExecutor's settings, as the test stack runs them and docker-compose.yaml's `celery` profile sets them
    (tests/unit/deploy/test_deployment.py checks that the two agree): redis the broker, the metadata database (through
    Celery's SQLAlchemy backend) the result backend."""
    return {
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CELERY__BROKER_URL": f"redis://{redis_host}:{redis_port}/0",
        "AIRFLOW__CELERY__RESULT_BACKEND": f"db+{sql_alchemy_conn}",
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(CELERY_WORKER_CONCURRENCY),
        # Airflow's own default, said out loud: a message a worker took and did not acknowledge is redelivered
        # after this long (the provider warns on every start when it is left unset).
        "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT": "86400",
    }


def stack_environment(home: Path, port: int, topology: str = "seed") -> dict[str, str]:
    """`ringward airflow`'s environment (DAGs, plugins, the local cluster's connections), with its own home,
    database, port and users."""
    from ringward_cli.airflow_env import airflow_environment, local_connections

    topology = topology_under_test(topology)
    # The tests trigger unapproved runs, and approve their own as the one admin user: automation's settings.
    env = airflow_environment(ROOT, topology=topology, automation=True)
    env.update(local_connections(ROOT, topology))  # this topology's, not whatever the test process had set
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__CORE__EXECUTOR": LOCAL_EXECUTOR,
            "AIRFLOW__CORE__PARALLELISM": "4",  # LocalExecutor forks this many workers; the machine has 2 cores
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin,{APPROVER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API_AUTH__JWT_SECRET": "ringward-test-secret-" + os.urandom(8).hex(),
            "AIRFLOW__CORE__FERNET_KEY": "",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
            # a DAG file change is seen quickly; nothing else is parsed
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            # An unchanged DAG file is not parsed again every 30 s (Airflow's default): a stack's DAG files and what
            # they read (a clusters file) are written before it starts, and a modified file is still parsed at the
            # next refresh. The re-parsing cost about a tenth of a core per stack on two cores (2026-11-29).
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        }
    )
    for key in ("PYTEST_CURRENT_TEST", "PYTEST_VERSION"):
        env.pop(key, None)
    return env


DAGS = ("keyspace_migration", "nightly_subrange_repair")


@dataclass
class AirflowStack:
    home: Path
    port: int
    env: dict[str, str]
    executor: str = "local"
    airflow: str = field(default_factory=lambda: _airflow())
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _token: str | None = None
    _api: client.ApiClient | None = None
    _workers_started: int = 0
    user: str = USER  # who the REST calls log in as
    dags: tuple[str, ...] = DAGS  # parsed before the stack counts as started

    def as_user(self, user: str) -> AirflowStack:
        """The same stack, its REST calls made as `user` (a token of that user's own)."""
        return dataclasses.replace(self, user=user, _token=None, _api=None)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self, timeout: float = 240.0) -> None:
        if self.executor not in EXECUTORS:
            raise ValueError(f"Unknown executor {self.executor!r}: use one of {', '.join(EXECUTORS)}.")
        (self.home / "passwords.json").write_text(json.dumps({USER: PASSWORD, APPROVER: PASSWORD}))
        if self.executor == "celery":
            self._start_redis()
        migrate_airflow_db(self.env, self.airflow)  # a copy of the first stack's new database, when it can be
        ensure_repair_pool(self.env, self.airflow)
        for name in COMPONENTS:
            self._spawn(name, [self.airflow, name], self.env)
        if self.executor == "celery":
            self.start_worker()
        self.wait_until(self._healthy, timeout, "the Airflow components to report healthy")

    def start_worker(self, timeout: float = 180.0) -> str:
        """A new `airflow celery worker` (its own process group, name and pid file; its concurrency from
        AIRFLOW__CELERY__WORKER_CONCURRENCY, as in the compose file); returns once it takes tasks."""
        self._workers_started += 1
        name = f"celery-worker-{self._workers_started}"
        command = [self.airflow, "celery", "worker", "--celery-hostname", f"{name}@%h",
                   "--pid", str(self.home / f"{name}.pid")]  # fmt: skip
        self._spawn(name, command, self.env)
        log = self.home / f"{name}.log"
        ready_line = re.compile(rf"{re.escape(name)}@\S+ ready\.")

        def ready() -> bool:
            if self.processes[name].poll() is not None:
                raise RuntimeError(f"{name} exited with {self.processes[name].returncode}:\n{self.log_tail()}")
            return bool(ready_line.search(log.read_text(errors="replace")))

        self.wait_until(ready, timeout, f"{name} to connect to the broker and report ready", self.log_tail)
        return name

    def kill_worker(self, name: str) -> None:
        """SIGKILL a Celery worker's process group (the worker, its pool and the tasks they run): no warm shutdown."""
        process = self.processes.pop(name)
        _signal_group(process, signal.SIGKILL)
        process.wait(30)
        self.wait_until(lambda: not _group_members(process.pid), 10, f"{name}'s process group to end")

    @property
    def workers(self) -> list[str]:
        return [name for name in self.processes if name.startswith("celery-worker-")]

    def _start_redis(self) -> None:
        import redis

        port = free_port()
        folder = self.home / "redis"
        folder.mkdir()
        # Loopback only, no RDB snapshots and no append-only file: a broker that lives and dies with the stack.
        command = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir", str(folder),
                   "--save", "", "--appendonly", "no", "--daemonize", "no"]  # fmt: skip
        self._spawn("redis-server", command, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)

        def answers() -> bool:
            if self.processes["redis-server"].poll() is not None:
                raise RuntimeError(f"redis-server exited:\n{self.log_tail()}")
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        self.wait_until(answers, 30, f"redis-server on 127.0.0.1:{port} to answer PING", self.log_tail)
        client.close()
        self.env.update(celery_settings("127.0.0.1", port, self.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]))
        # The worker's log server: a port of its own, never another stack's (8793 by default).
        self.env["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"] = str(free_port())

    def _spawn(self, name: str, command: list[str], env: dict[str, str]) -> None:
        with (self.home / f"{name}.log").open("wb") as log:  # the child keeps its own descriptor
            self.processes[name] = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def stop(self) -> None:
        """SIGTERM every process group, then SIGKILL what is left after a grace period; then check that nothing
        of the stack runs any more (raises naming what survived)."""
        if self._api is not None:
            self._api.rest_client.pool_manager.clear()  # its kept-alive connections to the api-server
            self._api = None
        for process in self.processes.values():
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + 10  # a throwaway home: no need to wait long for a clean exit
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.1, deadline - time.monotonic()))
        for process in self.processes.values():
            _signal_group(process, signal.SIGKILL)  # the group: task and trigger children too
            process.wait(10)
        # Anything of this home that left the groups (a task's own session) goes too: nothing stays running.
        for pid in _processes_with_env(f"AIRFLOW_HOME={self.home}"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.wait_until(lambda: not self.leftovers(), 10, "every process of the stack to end", self.describe_leftovers)

    def leftovers(self) -> list[int]:
        """Pids of the stack still alive: a component's process group, or any process with this AIRFLOW_HOME."""
        alive = set(_processes_with_env(f"AIRFLOW_HOME={self.home}"))
        alive.update(pid for process in self.processes.values() for pid in _group_members(process.pid))
        return sorted(alive)

    def describe_leftovers(self) -> str:
        return "still running: " + ", ".join(f"{pid} {_command_line(pid)}" for pid in self.leftovers())

    def log_tail(self, lines: int = 40) -> str:
        parts = []
        for name in [*COMPONENTS, *(n for n in self.processes if n not in COMPONENTS)]:
            path = self.home / f"{name}.log"
            text = path.read_text(errors="replace").splitlines()[-lines:] if path.exists() else []
            parts.append(f"-- {name} ({path})\n" + "\n".join(text))
        return "\n".join(parts)

    def _healthy(self) -> bool:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"airflow {name} exited with {process.returncode}:\n{self.log_tail()}")
        # /monitor/health needs no token: the api-server answers it before it can hand out one.
        anonymous = client.ApiClient(client.Configuration(host=self.url, retries=False))
        try:
            health = client.MonitorApi(anonymous).get_health(_request_timeout=5)
        except (client.ApiException, urllib3.exceptions.HTTPError):
            return False
        finally:
            anonymous.rest_client.pool_manager.clear()
        parts = (health.metadatabase, health.scheduler, health.triggerer, health.dag_processor)
        if not all(part is not None and part.status == "healthy" for part in parts):
            return False
        for dag in self.dags:
            try:
                client.DAGApi(self.api()).get_dag(dag, _request_timeout=TIMEOUT)
            except client.ApiException:  # not parsed yet (404), or not ready to answer
                return False
        return True

    # -- REST API, through the official client (apache-airflow-client, the release the stack runs) ------------
    def version(self) -> str:
        """The Airflow version the api-server reports."""
        return str(client.VersionApi(self.api()).get_version().version)

    def token(self) -> str:
        """A JWT from the simple auth manager's POST /auth/token: the client has no call for it (its LoginApi
        only redirects a browser to the login page), so it stays a plain HTTP request."""
        if self._token is None:
            login = {"username": self.user, "password": PASSWORD}
            response = httpx.post(f"{self.url}/auth/token", json=login, timeout=30)
            response.raise_for_status()
            self._token = str(response.json()["access_token"])
        return self._token

    def api(self) -> client.ApiClient:
        """The client every REST call goes through, authenticated with `token()`."""
        if self._api is None:
            self._api = client.ApiClient(client.Configuration(host=self.url, access_token=self.token()))
        return self._api

    def set_paused(self, dag_id: str, paused: bool) -> None:
        client.DAGApi(self.api()).patch_dag(dag_id, client.DAGPatchBody(is_paused=paused), _request_timeout=TIMEOUT)

    def trigger(self, dag_id: str, conf: dict[str, Any], run_id: str | None = None) -> str:
        body = client.TriggerDAGRunPostBody(conf=conf, dag_run_id=run_id)  # sends "logical_date": null
        return client.DagRunApi(self.api()).trigger_dag_run(dag_id, body, _request_timeout=TIMEOUT).dag_run_id

    def run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return as_json(client.DagRunApi(self.api()).get_dag_run(dag_id, run_id, _request_timeout=TIMEOUT))

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        """The DAG's runs (the first page, of the API's default size)."""
        found = client.DagRunApi(self.api()).get_dag_runs(dag_id, _request_timeout=TIMEOUT)
        return [as_json(run) for run in found.dag_runs]

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        found = client.TaskInstanceApi(self.api()).get_task_instances(dag_id, run_id, limit=500,
                                                                      _request_timeout=TIMEOUT)  # fmt: skip
        return [as_json(ti) for ti in found.task_instances]

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return as_json(client.TaskInstanceApi(self.api()).get_task_instance(dag_id, run_id, task_id,
                                                                            _request_timeout=TIMEOUT))  # fmt: skip

    def set_state(self, dag_id: str, run_id: str, task_id: str, state: str) -> None:
        """Mark a task instance `state`, as an operator does from the UI (only that task, nothing around it)."""
        body = client.PatchTaskInstanceBody(new_state=client.TaskInstanceState(state))
        client.TaskInstanceApi(self.api()).patch_task_instance(dag_id, run_id, task_id, body, _request_timeout=TIMEOUT)

    def tries(self, dag_id: str, run_id: str, task_id: str) -> list[dict[str, Any]]:
        found = client.TaskInstanceApi(self.api()).get_task_instance_tries(dag_id, run_id, task_id,
                                                                           _request_timeout=TIMEOUT)  # fmt: skip
        return [as_json(attempt) for attempt in found.task_instances]

    def log(self, dag_id: str, run_id: str, task_id: str, try_number: int, timestamps: bool = False) -> str:
        # The response body, not the client's TaskInstancesLogResponse: see log_text.
        response = client.TaskInstanceApi(self.api()).get_log_without_preload_content(
            dag_id, run_id, task_id, try_number, full_content=True, accept="application/json",
            _request_timeout=TIMEOUT,
        )  # fmt: skip
        try:
            body = response.data
        finally:
            response.release_conn()
        if response.status != 200:
            raise client.ApiException(http_resp=response)
        return log_text(body, timestamps)

    def pending_approvals(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        found = client.TaskInstanceApi(self.api()).get_hitl_details(dag_id, run_id, response_received=False,
                                                                    _request_timeout=TIMEOUT)  # fmt: skip
        return [as_json(d) for d in found.hitl_details if not d.response_received]

    def answer(self, dag_id: str, run_id: str, task_id: str, option: str) -> None:
        client.TaskInstanceApi(self.api()).update_hitl_detail(
            dag_id, run_id, task_id, -1, client.UpdateHITLDetailPayload(chosen_options=[option]),
            _request_timeout=TIMEOUT,
        )  # fmt: skip

    def clear(self, dag_id: str, run_id: str, task_ids: list[str]) -> None:
        body = client.ClearTaskInstancesBody(
            dry_run=False, dag_run_id=run_id, task_ids=[client.ClearTaskInstancesBodyTaskIdsInner(t) for t in task_ids],
            only_failed=False, reset_dag_runs=True,
        )  # fmt: skip
        client.TaskInstanceApi(self.api()).post_clear_task_instances(dag_id, body, _request_timeout=TIMEOUT)

    def wait_for_state(self, dag_id: str, run_id: str, states: set[str], timeout: float = 600) -> dict[str, Any]:
        found: dict[str, Any] = {}

        def reached() -> bool:
            found.update(self.run(dag_id, run_id))
            return found["state"] in states

        self.wait_until(reached, timeout, f"{dag_id} {run_id} to reach {sorted(states)}",
                        lambda: self.describe(dag_id, run_id))  # fmt: skip
        return found

    def describe(self, dag_id: str, run_id: str) -> str:
        """Task states of a run, for a failed assertion's message."""
        try:
            tis = self.task_instances(dag_id, run_id)
        except client.ApiException as error:
            return f"task instances of {dag_id} {run_id}: {error}"
        return "\n".join(f"{t['task_id']}: {t['state']} (try {t['try_number']})" for t in tis)

    def wait_for_deferral(self, dag_id: str, run_id: str, task_id: str, timeout: float = 600) -> None:
        """Until `task_id` is deferred (handed to the triggerer); fails at once if it ends first, since the
        callers want to interrupt it there."""

        def deferred() -> bool:
            state = self.task_instance(dag_id, run_id, task_id)["state"]
            assert state not in {"success", "failed"}, f"{task_id} ended ({state}) before it could be interrupted"
            return bool(state == "deferred")

        self.wait_until(
            deferred, timeout, f"{task_id} to defer to the triggerer", partial(self.describe, dag_id, run_id)
        )

    @staticmethod
    def wait_until(
        condition: Callable[[], bool], timeout: float, what: str, detail: Callable[[], str] = lambda: ""
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(1)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{detail()}")


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def _airflow() -> str:
    return str(Path(sys.executable).parent / "airflow")


def _group_members(pgid: int) -> list[int]:
    """Live processes in process group `pgid` (zombies excluded: they have ended, only their parent has not
    read their status)."""
    members = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(proc.name))
    return members


def _command_line(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "(gone)"


def _processes_with_env(entry: str) -> list[int]:
    found = []
    marker = entry.encode() + b"\0"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if marker in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def as_json(model: BaseModel) -> dict[str, Any]:
    """A response of the client as the REST API's JSON has it: every field (null ones too), enums as their
    values, times as ISO strings. The tests index these dicts and `at_time` parses their times."""
    return dict(to_jsonable_python(model.model_dump(by_alias=True)))


def log_text(body: bytes, timestamps: bool = False) -> str:
    """A task try's log as text, from the JSON of GET .../logs/{try_number}: each structured line's event, and
    its error detail if it has one (a failed try's exception); with `timestamps`, each line's time first.

    Each line is read with the client's StructuredLogMessage.from_dict, which keeps a line's other fields in
    `additional_properties`. The client's TaskInstancesLogResponse cannot be used: its `content` (anyOf a list
    of StructuredLogMessage or of str) validates the lines without from_dict, and keeps nothing of a line but
    `event` and `timestamp`, so the error detail would be lost (apache-airflow-client 3.3.2)."""
    content = json.loads(body)["content"]
    parts = []
    for line in content:
        if isinstance(line, str):
            parts.append(line)
        else:
            message = client.StructuredLogMessage.from_dict(line)
            assert message is not None
            detail = message.additional_properties.get("error_detail") or ""
            when = f"{message.timestamp:%H:%M:%S.%f} " if timestamps and message.timestamp else ""
            parts.append(f"{when}{message.event} {detail}")
    return "\n".join(parts)


def at_time(value: str | None) -> datetime | None:
    """A time as the REST API gives it."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def critical_path(task_instances: list[dict]) -> tuple[float, float, list[tuple[str, float, float]]]:  # type: ignore[type-arg]
    """(run seconds on the critical path, gap seconds on it, [(task, gap before it, run)]) for the tasks
    that ran, walking back from the last to finish through the latest-ending task that ended before it
    started (Airflow runs a task once all it waits for ended, so that task is what it waited for)."""
    ran = [t for t in task_instances if t.get("start_date") and t.get("end_date") and t["state"] != "skipped"]
    spans = sorted(((at_time(t["start_date"]), at_time(t["end_date"]), t["task_id"]) for t in ran), key=lambda s: s[1])
    path: list[tuple[str, float, float]] = []
    current = spans[-1]
    while True:
        start, end, task = current
        earlier = [s for s in spans if s[1] <= start]
        previous = earlier[-1] if earlier else None
        gap = (start - previous[1]).total_seconds() if previous else 0.0
        path.append((task, gap, (end - start).total_seconds()))
        if previous is None:
            break
        current = previous
    path.reverse()
    return sum(p[2] for p in path), sum(p[1] for p in path), path


def nightly_config(home: Path, keyspaces: list[str]) -> Path:
    """The shipped nightly configuration with only `keyspaces` selected, as a file for $RINGWARD_REPAIR_CONFIG."""
    import yaml
    from ringward.repair import DEFAULT_CONFIG_PATH

    settings = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    settings["keyspaces"] = {"include": keyspaces, "exclude": []}
    path = home / "nightly_repair.yaml"
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return path


def start_stack(
    nightly_keyspaces: list[str] | None = None,
    topology: str = "seed",
    executor: str = "local",
    airflow: str | None = None,
    settings: dict[str, str] | None = None,
    dags: tuple[str, ...] = DAGS,
) -> Iterator[AirflowStack]:
    """The stack on `executor` ("local" or "celery"), run by the `airflow` binary given (default: this
    interpreter's); with `nightly_keyspaces`, the nightly DAG's configuration selects only those (the scheduled
    run a first unpause starts then leaves alone every other keyspace on the cluster). `dags`: the DAG ids the
    stack waits for (a clusters file's settings give suffixed ones)."""
    with tempfile.TemporaryDirectory(prefix="ringward-airflow-") as tmp:
        home = Path(tmp)
        port = free_port()
        env = stack_environment(home, port, topology)
        if airflow is not None:  # its installation's tools first (spark-submit, python) for the tasks it runs
            env["PATH"] = f"{Path(airflow).parent}{os.pathsep}{env['PATH']}"
        if nightly_keyspaces is not None:
            env["RINGWARD_REPAIR_CONFIG"] = str(nightly_config(home, nightly_keyspaces))
        env.update(settings or {})  # e.g. a deployment setting other than automation's
        stack = AirflowStack(home, port, env, executor, airflow or _airflow(), dags=dags)
        try:
            stack.start()
            yield stack
        finally:
            stack.stop()
