"""Airflow command lines of the tests, each in a process forked from one that has already imported Airflow.

The integration tests run `ringward airflow dags test …` 34 times and the DAG tests run 7 fleet-simulator nights
(benchmarks/fleet/airflow_night.py); each such process spent about 9 s of CPU before its DAG ran: importing
Airflow (3.5 s) and building the in-process execution API's versioned routers (Cadwyn, 5 s; the same in every
process). On two cores, where the suite is CPU-bound, that was about 6 of its 95 core-minutes (2026-11-29).

A `WarmAirflow` server is started once per environment: it sets up the environment as the command would (for
`ringward airflow`: its AIRFLOW_HOME, database and connections), imports Airflow, builds those routers, and then
forks a child per command. The child is the command's own process: the caller gets its pid, its merged
stdout/stderr through a pipe, and its exit code; it runs the same entry point (`ringward_cli.main`, then
`airflow.__main__` where `ringward airflow` would exec it, or a script as `__main__`) with the caller's argv,
environment and working directory. What the server read at import must be what the child would read: the
child compares the environment Airflow reads at import (AIRFLOW_HOME, every AIRFLOW__ setting, PYTHONPATH) and
the home's airflow.cfg with the server's, and where they differ it execs the command afresh, as before.

Set RINGWARD_TEST_WARM_AIRFLOW=0 to run every command as a fresh process.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
ENABLED = os.environ.get("RINGWARD_TEST_WARM_AIRFLOW", "1") != "0"
_READY = "warm-airflow ready"
AFRESH = "afresh.log"  # beside the server's socket: the commands a child exec'd afresh


def import_signature(env: Mapping[str, str]) -> str:
    """What Airflow reads once, at import, from the environment and its home: two processes with the same
    signature import the same configuration."""
    read = {k: v for k, v in env.items() if k in ("AIRFLOW_HOME", "PYTHONPATH") or k.startswith("AIRFLOW__")}
    config = Path(env.get("AIRFLOW_HOME", "~/airflow")).expanduser() / "airflow.cfg"
    written = hashlib.sha256(config.read_bytes()).hexdigest() if config.is_file() else "absent"
    return hashlib.sha256(json.dumps([sorted(read.items()), written]).encode()).hexdigest()


class _Lines:
    """The lines a server sends on a connection (the child's pid, then its exit code), each read with a timeout."""

    def __init__(self, connection: socket.socket) -> None:
        self._connection, self._buffer = connection, b""

    def line(self, timeout: float | None) -> str:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError
            self._connection.settimeout(left)
            chunk = self._connection.recv(4096)
            if not chunk:
                return ""
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        self._connection.close()


class WarmProcess:
    """A forked command as the caller sees it: `pid`, `stdout` (text, stderr merged), `wait`, `kill`."""

    def __init__(self, stdout: IO[str], control: _Lines, args: Sequence[str]) -> None:
        self.stdout, self.args, self._control = stdout, list(args), control
        self.pid = int(control.line(None))
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                reply = self._control.line(timeout)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0) from None
            self._control.close()
            if not reply:
                raise RuntimeError(f"warm-airflow server gone before pid {self.pid} ended (see its stderr)")
            self.returncode = int(reply)
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, 9)

    def __enter__(self) -> WarmProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stdout.close()
        if self.returncode is None:
            self.kill()
            self.wait()


class WarmAirflow:
    """One server: started with `env` (and, for `ringward airflow` commands, `ringward=True`)."""

    def __init__(self, env: Mapping[str, str], *, ringward: bool, cwd: Path) -> None:
        self._folder = tempfile.mkdtemp(prefix="warm-airflow-")
        self.socket_path = os.path.join(self._folder, "socket")
        ready, told = os.pipe()  # the server says it is ready there
        command = [sys.executable, __file__, self.socket_path, "ringward" if ringward else "script", str(told)]
        self.started = 0
        self.log_path = Path(self._folder) / "server.log"  # what the server itself writes (its children: the caller's)
        with self.log_path.open("w") as log:
            try:
                self._server = subprocess.Popen(command, env=dict(env), cwd=cwd, stdin=subprocess.PIPE, stdout=log,
                                                stderr=subprocess.STDOUT, pass_fds=(told,))  # fmt: skip
            finally:
                os.close(told)
        with open(ready, encoding="utf-8") as said:
            line = said.read()
        if line.strip() != _READY:
            self.close()
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"warm-airflow server did not start (exit {self._server.poll()}):\n{tail}")

    def start(self, args: Sequence[str], *, env: Mapping[str, str], cwd: Path) -> WarmProcess:
        self.started += 1
        read, write = os.pipe()
        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            control.connect(self.socket_path)
            request = json.dumps({"args": list(args), "env": dict(env), "cwd": str(cwd)}).encode()
            socket.send_fds(control, [len(request).to_bytes(8, "big") + request], [write])
        finally:
            os.close(write)
        return WarmProcess(open(read, encoding="utf-8", errors="replace"), _Lines(control), args)

    def close(self) -> None:
        afresh = Path(self._folder) / AFRESH
        if afresh.is_file():  # said where the suite's output shows it: a fallback is correct, only slower
            lines = afresh.read_text().splitlines()
            print(f"warm-airflow: {len(lines)} of {self.started} commands exec'd afresh (another configuration):",
                  *lines[:5], sep="\n  ", file=sys.stderr)  # fmt: skip
        if self._server.poll() is None:
            assert self._server.stdin is not None
            self._server.stdin.close()  # the server ends when its stdin does
            try:
                self._server.wait(30)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
        shutil.rmtree(self._folder, ignore_errors=True)


_servers: dict[tuple[str, bool], WarmAirflow] = {}
_lock = threading.Lock()


def start(args: Sequence[str], *, env: Mapping[str, str], cwd: Path = ROOT) -> WarmProcess | subprocess.Popen[str]:
    """`args` (`ringward …` or a Python script and its arguments) as a process with stdout and stderr merged in
    a text pipe: forked from a warm server of this environment, or (RINGWARD_TEST_WARM_AIRFLOW=0) a fresh one."""
    ringward = Path(args[0]).name == "ringward"
    if not ENABLED:
        command = list(args) if ringward else [sys.executable, *args]
        return subprocess.Popen(command, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)  # fmt: skip
    key = (import_signature(env), ringward)
    with _lock:
        server = _servers.get(key)
        if server is None:
            server = _servers[key] = WarmAirflow(env, ringward=ringward, cwd=cwd)
    return server.start(args, env=env, cwd=cwd)


def run(
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout: float,
    cwd: Path = ROOT,
    on_line: Callable[[str], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`start`, to the end: like `subprocess.run(capture_output=True, text=True)`, stderr merged into stdout;
    `on_line` sees each line as it comes (a log written while the command runs)."""
    output: list[str] = []
    with start(args, env=env, cwd=cwd) as process:
        stdout = process.stdout
        assert stdout is not None

        def read() -> None:
            for line in stdout:
                output.append(line)
                if on_line is not None:
                    on_line(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            returncode = process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            reader.join(5)
            raise
        reader.join()
    return subprocess.CompletedProcess(list(args), returncode, "".join(output), "")


@atexit.register
def close_all() -> None:
    with _lock:
        for server in _servers.values():
            server.close()
        _servers.clear()


# -- the server ------------------------------------------------------------------------------------------------


def _serve(socket_path: str, ringward: bool, ready: int) -> None:
    global _SOCKET
    _SOCKET = socket_path
    if ringward:  # the environment, database and connections `ringward airflow` sets up before it execs airflow
        from ringward_cli.airflow_env import airflow_environment, ensure_airflow_connections, ensure_airflow_db

        env = airflow_environment()
        ensure_airflow_db(env)
        ensure_airflow_connections(env)
        os.environ.clear()
        os.environ.update(env)
    signature = import_signature(os.environ)
    _warm()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(16)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin, selectors.EVENT_READ, "stdin")
    os.write(ready, _READY.encode())
    os.close(ready)
    while True:
        for key, _ in selector.select():
            if key.data == "stdin":
                if not sys.stdin.readline():  # the caller closed it, or is gone (a pytest-xdist worker ends
                    # without running atexit): the server's folder goes with it, socket, log and all
                    shutil.rmtree(Path(socket_path).parent, ignore_errors=True)
                    return
            elif key.data == "accept":
                connection, _ = listener.accept()
                header, fds, _, _ = socket.recv_fds(connection, 8, 1)
                body = b""
                while len(body) < int.from_bytes(header, "big"):
                    body += connection.recv(1 << 20)
                request = json.loads(body)
                sys.stdout.flush(), sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(request, fds[0], signature, ringward, close=(listener, connection))
                os.close(fds[0])
                connection.sendall(f"{pid}\n".encode())
                selector.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, connection))
            else:
                pid, connection = key.data
                selector.unregister(key.fileobj)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):
                    connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                connection.close()


def _warm() -> None:
    """Import what every command imports, and build the execution API's versioned routers (the same in every
    process: its routes and models), without opening a connection or starting a thread."""
    import airflow.cli.cli_parser
    import airflow.cli.commands.dag_command
    import airflow.dag_processing.dagbag
    import airflow.serialization.serialized_objects  # noqa: F401
    from airflow import settings
    from airflow.sdk.execution_time.supervisor import in_process_api_server

    in_process_api_server().app._cadwyn_initialize()
    if settings.engine is not None:
        settings.engine.dispose()  # nothing pooled for the children to share


def _child(request: dict[str, Any], output: int, signature: str, ringward: bool, close: tuple[Any, ...]) -> None:
    code: Any = 1
    try:
        for held in close:
            held.close()  # this process's copies; the server's stay open
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        code = _run(request["args"], signature, ringward)
    except SystemExit as exit:
        code = exit.code
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()  # what the process would run at its exit (the shared nodetool JVM's stop)
        with contextlib.suppress(BaseException):
            sys.stdout.flush(), sys.stderr.flush()
        os._exit(code or 0)


def _afresh(args: Sequence[str]) -> None:
    with open(Path(_SOCKET).parent / AFRESH, "a", encoding="utf-8") as log:
        log.write(" ".join(args)[:300] + "\n")


_SOCKET = ""


def _run(args: list[str], signature: str, ringward: bool) -> Any:
    if not ringward:  # a script, run as `python SCRIPT ARGS…` would run it
        if import_signature(os.environ) != signature:
            _afresh(args)
            os.execv(sys.executable, [sys.executable, *args])
        import runpy

        sys.argv = list(args)
        sys.path[0] = str(Path(args[0]).resolve().parent)
        runpy.run_path(args[0], run_name="__main__")
        return 0
    exec_afresh = os.execve

    def execve(path: str, argv: list[str], env: Mapping[str, str]) -> None:
        """Where `ringward airflow` execs airflow: airflow's own main, here, when it would import the same."""
        if Path(path).name != "airflow" or import_signature(env) != signature:
            _afresh(argv)
            exec_afresh(path, argv, env)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = list(argv)
        from airflow.__main__ import main

        main()  # type: ignore[no-untyped-call]
        raise SystemExit(0)

    os.execve = execve  # type: ignore[assignment]
    from ringward_cli.main import main as ringward_main

    sys.argv = list(args)
    return ringward_main(args[1:])


if __name__ == "__main__":
    # As the command's own process would start: `ringward` from the virtualenv's bin/ (its packages installed),
    # a script from its own folder (which puts what it needs on sys.path itself).
    sys.path[0] = str(Path(sys.executable).parent)
    _serve(sys.argv[1], sys.argv[2] == "ringward", int(sys.argv[3]))
