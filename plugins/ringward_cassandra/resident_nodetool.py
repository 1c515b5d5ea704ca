"""A resident nodetool: one JVM that runs many NodeTool commands (java/RingwardNodetoolServer.java).

A `nodetool` process spends about a second of CPU starting Java before it talks to the node; a nightly
repair sends hundreds of commands, and on a busy worker those starts cost more than the repairs of
in-sync ranges themselves. Reaper avoids them by speaking JMX from its own JVM; ringward keeps nodetool's
exact behaviour and output but runs its commands inside one long-lived JVM, started on first use.

Needs Cassandra's jars (the classpath nodetool runs with) and a JDK's `javac` to compile the server once,
into a folder private to the worker's user (~/.cache/ringward/nodetool-<hash>).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ringward.errors import ClusterError, ConfigurationError
from ringward.private_files import folder_problem, private_folder, user_cache_folder

__all__ = ["ResidentNodetool"]

_SOURCE = Path(__file__).with_name("java") / "RingwardNodetoolServer.java"
_MAIN_CLASS = "RingwardNodetoolServer"
_START_TIMEOUT = 60.0


@dataclass
class _Pending:
    lines: list[str] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    returncode: int | None = None


class ResidentNodetool:
    """Runs `nodetool ARGS` in one JVM. Thread-safe: commands run concurrently, each in its own JVM thread."""

    def __init__(self, classpath: str, java_options: Sequence[str] = (), java: str = "java") -> None:
        self._classpath = classpath
        self._java_options = list(java_options)
        self._java = java
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        self._pending: dict[str, _Pending] = {}
        self._ids = itertools.count(1)
        self._stderr: deque[str] = deque(maxlen=40)
        self._readers: list[threading.Thread] = []
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The JVM's process id while it runs (None before the first command and after `close`)."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def start(self) -> None:
        """Start the JVM now (a task can let it boot while it does other work); commands start it anyway.
        After `close` it does nothing: a boot thread that comes late must not leave a JVM behind."""
        with self._lock:
            if not self._closed:
                self._started()

    # -- commands ---------------------------------------------------------------------------------------
    def run(self, args: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """Run one command; its output and exit code as nodetool's own process would give them."""
        bad = [a for a in args if "\t" in a or "\n" in a]
        if bad:
            raise ClusterError(f"nodetool argument {bad[0]!r} holds a tab or newline.", "Pass plain arguments.")
        command_id = str(next(self._ids))
        pending = _Pending()
        with self._lock:
            if self._closed:
                raise ClusterError("This resident nodetool was closed.", "Build a new one (NodetoolClient does).")
            process = self._started()
            self._pending[command_id] = pending
            try:
                self._send(process, ["RUN", command_id, *args])
            except OSError as error:  # the JVM died just now: its reader fails the waiting commands
                raise ClusterError(
                    f"The resident nodetool JVM is gone: {' | '.join(self._stderr)[-500:] or error}",
                    "Retry: the next command starts a new JVM.",
                ) from error
        if not pending.done.wait(timeout):
            self.cancel(command_id)
            pending.done.wait(30)
            raise ClusterError(
                f"nodetool {' '.join(args[:1])} did not finish within {timeout:g}s (resident JVM).",
                "Check the node's health and load, or raise the timeout.",
            )
        output = "".join(line + "\n" for line in pending.lines)
        return subprocess.CompletedProcess(["nodetool", *args], pending.returncode or 0, output, "")

    def cancel(self, command_id: str) -> None:
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                self._send(self._process, ["CANCEL", command_id])

    def cancel_all(self) -> None:
        """Close the JMX connections of every running command (their sessions on the nodes go on)."""
        with self._lock:
            running = [k for k, p in self._pending.items() if not p.done.is_set()]
        for command_id in running:
            self.cancel(command_id)

    def close(self) -> None:
        """Stop the JVM for good (closing its input ends it; commands still running are cancelled)."""
        with self._lock:
            self._closed = True
            process, self._process = self._process, None
            readers, self._readers = self._readers, []
        if process is None:
            return
        try:
            if process.stdin:
                process.stdin.close()
            process.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
        for reader in readers:  # they close stdout and stderr at end of file
            reader.join(timeout=15)

    # -- the JVM ----------------------------------------------------------------------------------------
    def _started(self) -> subprocess.Popen[str]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        if self._process is not None and self._process.stdin:  # it died: its readers closed the other pipes
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        classes = _compiled(self._java, self._classpath)
        command = [self._java, *self._java_options, *_security_manager_option(self._java),
                   "-cp", os.pathsep.join([str(classes), self._classpath]), _MAIN_CLASS]  # fmt: skip
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, encoding="utf-8", errors="replace", bufsize=1,
        )  # fmt: skip
        ready = threading.Event()
        self._pending = {}  # the commands of this JVM: if it dies, they fail, and a later JVM starts afresh
        self._readers = [
            threading.Thread(target=self._read_answers, args=(process, self._pending, ready), daemon=True),
            threading.Thread(target=self._read_stderr, args=(process,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not ready.wait(0.2) and process.poll() is None and time.monotonic() < deadline:
            pass
        if not ready.is_set():
            process.kill()
            process.wait()
            if process.stdin:
                process.stdin.close()
            for reader in self._readers:
                reader.join(timeout=15)
            raise ClusterError(
                f"The resident nodetool JVM did not start: {' | '.join(self._stderr)[-800:]}",
                "Check the connection's java_classpath (Cassandra's jars) and java_options.",
            )
        self._process = process
        return process

    @staticmethod
    def _send(process: subprocess.Popen[str], fields: Sequence[str]) -> None:
        assert process.stdin is not None
        process.stdin.write("\t".join(fields) + "\n")
        process.stdin.flush()

    def _read_answers(
        self, process: subprocess.Popen[str], pending_map: dict[str, _Pending], ready: threading.Event
    ) -> None:
        assert process.stdout is not None
        with process.stdout:
            for line in process.stdout:
                self._answer(line, pending_map, ready)
        # The JVM is gone: every command still waiting fails, naming why.
        with self._lock:
            waiting = list(pending_map.values())
            pending_map.clear()
        for pending in waiting:
            pending.lines.append(f"error: the resident nodetool JVM exited: {' | '.join(self._stderr)[-500:]}")
            pending.returncode = 1
            pending.done.set()

    def _answer(self, line: str, pending_map: dict[str, _Pending], ready: threading.Event) -> None:
        kind, command_id, text = [*line.rstrip("\n").split("\t", 2), "", ""][:3]
        if kind == "READY":
            ready.set()
            return
        with self._lock:
            pending = pending_map.pop(command_id, None) if kind == "END" else pending_map.get(command_id)
        if pending is None:
            return
        if kind == "OUT":
            pending.lines.append(text)
        elif kind == "END":
            pending.returncode = int(text)
            pending.done.set()

    def _read_stderr(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        with process.stderr:
            for line in process.stderr:
                self._stderr.append(line.rstrip())


_RELEASE = "11"


@functools.cache
def java_major(java: str) -> int:
    """The feature release of `java` (11, 17, ...); 0 when `java -version` does not say."""
    try:
        output = subprocess.run([java, "-version"], capture_output=True, text=True, check=False, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired):
        return 0
    match = re.search(r'version "(\d+)(?:\.(\d+))?', output)
    if not match:
        return 0
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def _security_manager_option(java: str) -> list[str]:
    """The server traps NodeTool's System.exit with a SecurityManager. Java 17 and later allow installing one
    only with `-Djava.security.manager=allow`; Java 11 allows it by default and would take "allow" for the
    class name of a security manager to install (and fail), so it gets no option."""
    major = java_major(java)
    return [] if 0 < major < 12 else ["-Djava.security.manager=allow"]


def _compiled(java: str, classpath: str) -> Path:
    """The server's classes, compiled once per source and classpath into the user's private cache folder.

    The JVM runs them with the JMX credentials, so they are loaded only from a folder of this user that
    nobody else can write, never through a link (`ringward.private_files`): an entry that is not such a
    folder is replaced by a fresh compile, and without a private cache folder (another user's, writable
    by others, no home) the classes go to a new private temporary folder for this process.
    """
    key = hashlib.sha256(_SOURCE.read_bytes() + classpath.encode() + _RELEASE.encode()).hexdigest()[:16]
    cache = _cache_folder()
    target = cache / f"nodetool-{key}" if cache is not None else None
    if target is not None and _holds_classes(target):
        return target
    javac = Path(java).with_name("javac") if os.sep in java else None
    javac_path = str(javac) if javac and javac.exists() else shutil.which("javac")
    if not javac_path:
        raise ConfigurationError(
            "The resident nodetool needs a JDK's javac to compile its server once; none was found.",
            "Install a JDK 17 (apt-get install openjdk-17-jdk-headless), or drop java_classpath from the "
            "nodetool connection to run one nodetool process per command.",
        )
    staging = Path(tempfile.mkdtemp(prefix="nodetool-build-" if cache else "ringward-nodetool-", dir=cache))  # 0700
    result = subprocess.run(
        # For Java 11 (class version 55): a worker running nodetool on Java 11 (Cassandra 4.x) loads them too.
        [javac_path, "-nowarn", "--release", _RELEASE, "-cp", classpath, "-d", str(staging), str(_SOURCE)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise ConfigurationError(
            f"Compiling the resident nodetool failed: {(result.stdout + result.stderr)[-800:]}",
            "Check that java_classpath lists Cassandra's jars (cassandra-all and its dependencies).",
        )
    if target is None:
        return staging
    _discard_unsafe(target)
    try:
        staging.rename(target)  # atomic: a concurrent compile of the same source wins or loses whole
    except OSError:
        if not _holds_classes(target):
            return staging
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _cache_folder() -> Path | None:
    """ringward's folder in this user's cache, created 0700 or checked private; None when it cannot be."""
    try:
        return private_folder(user_cache_folder())
    except ConfigurationError:
        return None


def _holds_classes(folder: Path) -> bool:
    """A private folder of ours (not a link) holding the compiled server as a regular file."""
    if folder_problem(folder) is not None:
        return False
    try:
        return stat.S_ISREG(os.lstat(folder / f"{_MAIN_CLASS}.class").st_mode)
    except OSError:
        return False


def _discard_unsafe(path: Path) -> None:
    """Remove what sits at `path` unless it is a private folder of ours (it is never used as it is)."""
    if not os.path.lexists(path) or folder_problem(path) is None:
        return
    with contextlib.suppress(OSError):
        if path.is_symlink() or not path.is_dir():
            path.unlink()
        else:
            shutil.rmtree(path)
