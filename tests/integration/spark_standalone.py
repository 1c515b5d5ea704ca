"""A real Spark standalone cluster for the tests: one master and one worker from the installed pyspark's jars.

Both run `spark-class` (org.apache.spark.deploy.master.Master / ...worker.Worker) in their own process group
on loopback ports picked free, with small memory and 2 cores; `stop()` ends the groups (executors and their
Python workers included) and checks with ps that nothing of them is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from ringward_spark.submit import spark_home

__all__ = ["SparkStandalone", "free_port"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class SparkStandalone:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen[bytes]] = []

    def _start(self, name: str, arguments: list[str]) -> subprocess.Popen[bytes]:
        home = spark_home()
        env = {**os.environ, "SPARK_HOME": home, "SPARK_DAEMON_MEMORY": "256m", "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_LOG_DIR": str(self.folder), "SPARK_WORKER_DIR": str(self.folder / "work"),
               "SPARK_DAEMON_JAVA_OPTS": "-XX:+UseSerialGC -XX:ActiveProcessorCount=2"}  # fmt: skip
        with (self.folder / f"{name}.log").open("wb") as log:  # the child keeps its own descriptor
            process = subprocess.Popen(
                [str(Path(home) / "bin" / "spark-class"), *arguments], stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )  # fmt: skip
        self.processes.append(process)
        return process

    def start(self, timeout: float = 90) -> SparkStandalone:
        self._start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                               str(self.port), "--webui-port", str(free_port())])  # fmt: skip
        self._wait(lambda: self._accepts(self.port), "the master to listen", timeout)
        self._start("worker", ["org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                               "--cores", "2", "--memory", "1g", "--webui-port", str(free_port()),
                               "--work-dir", str(self.folder / "work")])  # fmt: skip
        self._wait(lambda: "Successfully registered with master" in self.log("worker"), "the worker", timeout)
        return self

    def log(self, name: str) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    @staticmethod
    def _accepts(port: int) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    def _wait(self, condition: object, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if callable(condition) and condition():
                return
            if any(p.poll() is not None for p in self.processes):
                break
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"Spark standalone: waited in vain for {what}.\n{self.log('master')}\n{self.log('worker')}")

    def leftovers(self) -> list[str]:
        """`ps` lines of any process still in the master's or the worker's process group."""
        groups = {str(p.pid) for p in self.processes}
        listing = subprocess.run(["ps", "-eo", "pgid=,pid=,args="], capture_output=True, text=True, check=True)
        return [line for line in listing.stdout.splitlines() if line.split(None, 1)[0] in groups]

    def stop(self, timeout: float = 30) -> None:
        for process in reversed(self.processes):  # the worker first: it stops its executors
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        while self.leftovers() and time.monotonic() < deadline:
            time.sleep(0.2)
        for process in self.processes:  # executors or Python workers that outlived their parent
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
