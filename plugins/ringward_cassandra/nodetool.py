"""nodetool against each node's JMX, from the worker: repair, getendpoints, cleanup, status, snapshots.

Works the same for the embedded cluster (its generated `nodetool` script, JMX on 127.0.0.1 with a port
per node) and for real clusters (`nodetool` of the Cassandra install, JMX on `{address}:7199`, optional
credentials and TLS).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import selectors
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ringward.capacity import parse_status_loads
from ringward.errors import ClusterError, RepairError, RingwardError
from ringward.repair import NodeBacklog
from ringward.ring import TokenRange

from ringward_cassandra.resident_nodetool import ResidentNodetool

__all__ = [
    "NodetoolClient",
    "RepairOutcome",
    "parse_describering",
    "parse_preview_out_of_sync",
    "percent_repaired_by_table",
    "repair_arguments",
]

_REPAIR_STARTED = re.compile(r"Starting repair command #(\d+) \(([0-9a-f-]{36})\)")
_PENDING_COMPACTIONS = re.compile(r"^pending (?:compaction )?tasks\s*:?\s*(\d+)", re.MULTILINE)
_CLEANUP_RUNNING = re.compile(r"^\S+\s+Cleanup\s", re.MULTILINE)  # a row of the active compactions table
# `nodetool tablestats`: a keyspace's header, then per table "SSTable count: N" ("Old SSTable count" is another
# figure, 5.0 and later).
_TABLESTATS_KEYSPACE = re.compile(r"^Keyspace\s*:\s*(\S+)")
_TABLESTATS_SSTABLES = re.compile(r"^SSTable count:\s*(\d+)")
_TABLESTATS_TABLE = re.compile(r"^Table(?: \(index\))?:\s*(\S+)")
# The share of the table's data on the node in repaired SSTables (repairedAt set), by incremental repair.
_TABLESTATS_PERCENT_REPAIRED = re.compile(r"^Percent repaired:\s*([\d.]+)")
# Cassandra's own keyspaces: their SSTable counts are not the repaired tables' and do not hold a repair back.
_SYSTEM_KEYSPACES = frozenset(
    {"system", "system_schema", "system_auth", "system_distributed", "system_traces", "system_views",
     "system_virtual_schema", "system_cluster_metadata"}
)  # fmt: skip
_STREAMING = re.compile(r"^\s*(Receiving|Sending) \d+ files", re.MULTILINE)
_STATUS_LINE = re.compile(r"^([UD][NLJM])\s+(\S+)\s", re.MULTILINE)
# A table's line of a preview's sync summary (Cassandra's SyncStatSummary.Table): ranges that would stream.
_PREVIEW_TABLE = re.compile(r"^\s*([^\s.]+)\.(\S+) - (\d+) ranges, (\d+) sstables, (.+?) bytes\s*$", re.MULTILINE)
_DESCRIBERING = re.compile(r"start_token:(-?\d+), end_token:(-?\d+), endpoints:\[([^\]]*)\]")


@dataclass(frozen=True)
class RepairOutcome:
    address: str
    keyspace: str
    ranges: tuple[TokenRange, ...]
    succeeded: bool
    seconds: float
    parent_id: str | None
    output: str
    in_sync: bool | None = None  # for --preview: whether the ranges were found consistent
    # for --preview: "keyspace.table" -> ranges out of sync (that a repair would stream), from the summary
    out_of_sync: Mapping[str, int] = field(default_factory=dict)


@dataclass
class NodetoolClient:
    """Runs nodetool for one cluster. `jmx_host` may contain `{address}`; `jmx_ports` maps node -> port.

    With `java_classpath` (Cassandra's jars) the commands run in one resident JVM (`ResidentNodetool`)
    instead of a `nodetool` process each; `close()` stops it.

    JMX credentials reach nodetool as a password *file* (`-pwf`), never as `-pw`: a command line is
    readable by every local user (`ps`). `password_file` names an operator's own file (`user password`
    lines, as jmxremote.password); given only `password`, the client writes one, 0600, removed by `close()`.

    `share_jvm`: clients of one process with the same Java settings share one resident JVM, kept until the
    process ends (`close` leaves it running): `airflow dags test` runs every task of a run in one process, each
    task with a client of its own, and each JVM start costs about 1.5 s of CPU. Where each task is a process of
    its own (any executor), it changes nothing.

    `ssl`: JMX over TLS. A `nodetool` process gets `--ssl` and the -D options of `java_options` (the trust
    store: Cassandra's bin/nodetool hands -D arguments to its JVM and turns `--ssl` into -Dssl.enable=true); the
    resident JVM starts with `java_options` and -Dssl.enable=true (NodeTool itself has no `--ssl` option).
    """

    nodetool_path: str = "nodetool"
    jmx_host: str = "{address}"
    jmx_ports: Mapping[str, int] = field(default_factory=dict)
    default_jmx_port: int = 7199
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    password_file: str | None = None
    ssl: bool = False
    java_classpath: str | None = None
    java_options: tuple[str, ...] = ()
    java_binary: str = "java"
    share_jvm: bool = False
    _resident: ResidentNodetool | None = field(default=None, repr=False)
    _running: set[subprocess.Popen[Any]] = field(default_factory=set, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _written_password_file: str | None = field(default=None, repr=False)

    def command(self, address: str, args: Sequence[str]) -> list[str]:
        """The `nodetool` process's command line."""
        tls = ["--ssl", *(o for o in self.java_options if o.startswith("-D"))] if self.ssl else []
        return [self.nodetool_path, *tls, *self.nodetool_arguments(address, args)]

    def resident_java_options(self) -> tuple[str, ...]:
        """The resident JVM's options: `java_options`, and NodeTool's TLS switch when `ssl`."""
        return (*self.java_options, *(["-Dssl.enable=true"] if self.ssl else []))

    def nodetool_arguments(self, address: str, args: Sequence[str]) -> list[str]:
        """NodeTool's own arguments (what the resident JVM runs): the node's JMX address, the login, `args`."""
        command = [
            "-h",
            self.jmx_host.format(address=address),
            "-p",
            str(self.jmx_ports.get(address, self.default_jmx_port)),
        ]
        if self.username:
            command += ["-u", self.username, "-pwf", self._password_file()]
        return [*command, *args]

    def _password_file(self) -> str:
        if self.password_file:
            return self.password_file
        with self._lock:
            if self._written_password_file is None:
                # mkstemp: a new file, 0600, owned by us, in a name nobody can guess or plant beforehand.
                descriptor, path = tempfile.mkstemp(prefix="ringward-jmx-", suffix=".password")
                with os.fdopen(descriptor, "w") as handle:
                    handle.write(f"{self.username} {self.password or ''}\n")
                self._written_password_file = path
            return self._written_password_file

    def run(self, address: str, args: Sequence[str], timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
        """Run one nodetool command; the process is tracked so `terminate_all` can stop it (on_kill)."""
        if self.java_classpath:
            return self._resident_jvm().run(self.nodetool_arguments(address, args), timeout)
        process = subprocess.Popen(
            self.command(address, args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        with self._lock:
            self._running.add(process)
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as error:
            process.kill()
            process.communicate()
            raise ClusterError(
                f"nodetool {' '.join(args[:1])} on {address} did not finish within {timeout:g}s.",
                "Check the node's health and load, or raise the timeout.",
            ) from error
        finally:
            with self._lock:
                self._running.discard(process)
        return subprocess.CompletedProcess(process.args, process.returncode, output, "")

    def checked(self, address: str, args: Sequence[str], timeout: float = 600.0) -> str:
        result = self.run(address, args, timeout)
        if result.returncode != 0:
            raise ClusterError(
                f"nodetool {' '.join(args)} failed on {address}: {result.stdout.strip()[-800:]}",
                f"Check that {address} is up and its JMX port is reachable from this worker.",
            )
        return result.stdout

    def terminate_all(self) -> None:
        """Stop every nodetool this client started (the task was killed)."""
        with self._lock:
            for process in list(self._running):
                process.send_signal(signal.SIGTERM)
            resident = self._resident
        if resident is not None:
            resident.cancel_all()

    def prepare(self) -> None:
        """Boot the resident JVM in the background, so it is ready when the first command comes (a start
        failure is reported by that command)."""
        if self.java_classpath:
            resident = self._resident_jvm()
            threading.Thread(target=_quietly, args=(resident.start,), daemon=True).start()

    def close(self) -> None:
        """Stop the resident JVM, if one was started (a later command starts another), and remove the
        password file this client wrote (a later command writes another)."""
        with self._lock:
            resident, self._resident = self._resident, None
            written, self._written_password_file = self._written_password_file, None
        if resident is not None and not self.share_jvm:
            resident.close()
        if written is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(written)

    def _resident_jvm(self) -> ResidentNodetool:
        with self._lock:
            if self._resident is None:
                assert self.java_classpath is not None
                settings = (self.java_classpath, self.resident_java_options(), self.java_binary)
                self._resident = _shared_jvm(*settings) if self.share_jvm else ResidentNodetool(*settings)
            return self._resident

    # -- commands ---------------------------------------------------------------------------------------
    def status(self, address: str) -> dict[str, str]:
        """address -> two-letter state (UN, DN, UJ, ...) as `address` sees the cluster."""
        return _states(self.checked(address, ["status"]))

    def describe_ring(self, address: str, keyspace: str) -> list[tuple[TokenRange, frozenset[str]]]:
        """Every range of `keyspace` with its replicas, as `address` reports them (`nodetool describering`)."""
        return parse_describering(self.checked(address, ["describering", keyspace]))

    def getendpoints(self, address: str, keyspace: str, table: str, key: str) -> list[str]:
        return self.checked(address, ["getendpoints", keyspace, table, key]).split()

    def is_streaming(self, address: str) -> bool:
        output = self.checked(address, ["netstats"])
        return bool(_STREAMING.search(output))

    def backlog(self, address: str, keyspaces: Sequence[str] = ()) -> NodeBacklog:
        """What `address` is busy with, for the nightly repair's back-pressure check: pending compactions and a
        running cleanup (`compactionstats`), the most SSTables in one table of `keyspaces` (the ones the run
        repairs, as CEP-37's `sstable_upper_threshold` looks at the table it repairs; none: every keyspace but
        Cassandra's own), streaming (`netstats`), and whether it is joining, leaving or moving, with its Load
        (`status`). The worker reads it at most every 5 minutes per node. Naming the keyspaces matters:
        `tablestats` of every table, Cassandra's ~50 included, is 0.7 s of a seed node's time. A keyspace
        dropped since the plan fails the named read: then every table is read, rather than no backlog at all."""
        compactions = self.checked(address, ["compactionstats"])
        pending = _PENDING_COMPACTIONS.search(compactions)
        status = self.checked(address, ["status"])
        state = _states(status).get(address, "UN")
        return NodeBacklog(
            pending_compactions=int(pending.group(1)) if pending else 0,
            max_sstables_per_table=most_sstables_in_one_table(self._tablestats(address, keyspaces)),
            streaming=self.is_streaming(address),
            cleanup_running=bool(_CLEANUP_RUNNING.search(compactions)),
            pending_ranges=state[1:] in {"J", "L", "M"},
            load_bytes=parse_status_loads(status).get(address),
        )

    def _tablestats(self, address: str, keyspaces: Sequence[str]) -> str:
        if keyspaces:
            with contextlib.suppress(ClusterError):
                return self.checked(address, ["tablestats", *keyspaces])
        return self.checked(address, ["tablestats"])

    def percent_repaired(self, address: str, keyspaces: Sequence[str]) -> dict[str, float]:
        """ "keyspace.table" -> the share of `address`'s data of each table of `keyspaces` that incremental repair
        marked repaired (`nodetool tablestats`' "Percent repaired")."""
        return percent_repaired_by_table(self.checked(address, ["tablestats", *keyspaces]))

    def repair(
        self,
        address: str,
        keyspace: str,
        ranges: TokenRange | Sequence[TokenRange],
        *,
        tables: Sequence[str] = (),
        preview: bool = False,
        hosts: Sequence[str] = (),
        timeout: float = 3600.0,
        flags: Sequence[str] | None = None,
    ) -> RepairOutcome:
        """`nodetool repair -full` of the given ranges of `keyspace` [TABLES], coordinated by `address`.

        `flags` replaces `-full` with a repair type's options (`ringward.repair.repair_flags`: `-full`, none
        for incremental, `-full --preview`, `--paxos-only`, then -seq/-dcpar/-local/-j); `preview=True` is
        `-full --preview`. `address` must replicate every range. Cassandra repairs ranges with the same
        replicas in one session.
        """
        ranges = _as_ranges(ranges)
        if flags is None:
            flags = ["-full", "--preview"] if preview else ["-full"]
        preview = "--preview" in flags or "-prv" in flags
        args = repair_arguments(keyspace, ranges, tables=tables, flags=flags, hosts=hosts)
        started = time.monotonic()
        result = self.run(address, args, timeout=timeout)
        output = result.stdout
        match = _REPAIR_STARTED.search(output)
        failed = result.returncode != 0 or ("Repair command #" in output and "finished with error" in output)
        in_sync = None
        out_of_sync: dict[str, int] = {}
        if preview and not failed:
            in_sync = "Previewed data was in sync" in output or "Repaired data is in sync" in output
            out_of_sync = {} if in_sync else parse_preview_out_of_sync(output)
        return RepairOutcome(
            address=address, keyspace=keyspace, ranges=ranges, succeeded=not failed,
            seconds=time.monotonic() - started, parent_id=match.group(2) if match else None,
            output=output[-4000:], in_sync=in_sync, out_of_sync=out_of_sync,
        )  # fmt: skip

    def start_repair(
        self,
        address: str,
        keyspace: str,
        ranges: TokenRange | Sequence[TokenRange],
        *,
        hosts: Sequence[str] = (),
        timeout: float = 120.0,
    ) -> str | None:
        """Start a full repair of the ranges and return its parent session id without waiting for it.

        The session runs on the coordinator whatever happens to this nodetool client, so a deferred task
        can stop the client and let a trigger follow the session in parent_repair_history. Returns None
        when the repair completed before its start notification was seen (JMX notifications can be lost).
        """
        ranges = _as_ranges(ranges)
        args = ["repair", "-full", *_range_options(ranges)]
        for host in hosts:
            args += ["-hosts", host]
        process = subprocess.Popen(
            self.command(address, [*args, keyspace]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        with self._lock:
            self._running.add(process)  # on_kill's terminate_all stops it like any other nodetool
        parent_id: str | None = None
        seen: list[str] = []
        timed_out = True  # until the output is read: an interruption kills nodetool too
        try:
            parent_id, seen, timed_out = _await_repair_start(process, time.monotonic() + timeout)
        finally:
            with self._lock:
                self._running.discard(process)
            _stop(process, kill=timed_out)
        if parent_id is not None:
            return parent_id
        described = ", ".join(map(str, ranges))
        if timed_out:
            raise RepairError(
                f"nodetool repair of {keyspace} {described} on {address} printed no 'Starting repair command' "
                f"line within {timeout:g}s; ringward killed it. Output so far: {''.join(seen)[-800:] or '(none)'}",
                f"The session may still have started on {address}: check `nodetool repair_admin list` there (or "
                "system_distributed.parent_repair_history) before retrying the task; if the node is only slow to "
                "answer over JMX, raise start_repair's timeout.",
            )
        if process.returncode == 0 and "Repair completed successfully" in "".join(seen):
            return None
        raise RepairError(
            f"Repair of {keyspace} {described} did not start on {address}: {''.join(seen)[-800:]}",
            f"Check that {address} is up and reachable over JMX, then retry the task.",
        )

    def snapshot(self, address: str, keyspace: str, tag: str) -> None:
        self.checked(address, ["snapshot", "-t", tag, keyspace])

    def cleanup(self, address: str, keyspace: str, timeout: float = 6 * 3600.0) -> None:
        self.checked(address, ["cleanup", keyspace], timeout=timeout)

    def flush(self, address: str, keyspace: str) -> None:
        self.checked(address, ["flush", keyspace])

    def abort_repairs(self, address: str) -> None:
        """Stop every repair session coordinated by `address` (what a killed repair task started).

        Through `nodetool sjk mx` (Cassandra 4.0 and later); raises ClusterError when it fails (3.11 has no
        `sjk`), so the caller can say the sessions may still run."""
        result = self.run(
            address,
            ["sjk", "mx", "-b", "org.apache.cassandra.db:type=StorageService", "--call",
             "-op", "forceTerminateAllRepairSessions"],
            timeout=60,
        )  # fmt: skip
        if result.returncode != 0:
            raise ClusterError(
                f"Could not abort the repair sessions coordinated by {address} (nodetool sjk mx exited with "
                f"{result.returncode}: {result.stdout.strip()[-300:]}); they may still run.",
                f"Call StorageService.forceTerminateAllRepairSessions on {address} over JMX (Cassandra 3.11 has "
                "no `nodetool sjk`: use jmxterm), or wait for them to finish (`nodetool repair_admin list`).",
            )


_SHARED_JVMS: dict[tuple[str, tuple[str, ...], str], ResidentNodetool] = {}  # Java settings -> the JVM
_SHARED_JVMS_LOCK = threading.Lock()


def _shared_jvm(classpath: str, options: tuple[str, ...], java: str) -> ResidentNodetool:
    """This process's resident JVM for these Java settings (`NodetoolClient.share_jvm`), stopped at exit."""
    with _SHARED_JVMS_LOCK:
        key = (classpath, options, java)
        if key not in _SHARED_JVMS:
            _SHARED_JVMS[key] = ResidentNodetool(classpath, options, java)
        return _SHARED_JVMS[key]


def close_shared_jvms() -> None:
    """Stop the JVMs shared by `share_jvm` clients (at exit; a later command starts another)."""
    with _SHARED_JVMS_LOCK:
        shared = list(_SHARED_JVMS.values())
        _SHARED_JVMS.clear()
    for resident in shared:
        resident.close()


atexit.register(close_shared_jvms)


def _await_repair_start(process: subprocess.Popen[bytes], deadline: float) -> tuple[str | None, list[str], bool]:
    """Read nodetool's output until its "Starting repair command" line, its end, or `deadline` (monotonic).

    Returns (parent id or None, the lines seen, whether the deadline passed). The deadline holds whether or
    not nodetool prints anything: the output is polled with a timeout, never read blocking.
    """
    assert process.stdout is not None
    descriptor = process.stdout.fileno()
    seen: list[str] = []
    pending = b""
    with selectors.DefaultSelector() as selector:
        selector.register(descriptor, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None, seen, True
            if not selector.select(remaining):
                continue
            chunk = os.read(descriptor, 65536)
            if chunk:
                *complete, pending = (pending + chunk).split(b"\n")
            else:  # the end: what is left is the last line
                complete, pending = [pending], b""
            for raw in complete:
                if not raw:
                    continue
                line = raw.decode(errors="replace") + "\n"
                seen.append(line)
                match = _REPAIR_STARTED.search(line)
                if match:
                    return match.group(2), seen, False
            if not chunk:  # end of output: nodetool exited (or closed its output)
                return None, seen, False


def _stop(process: subprocess.Popen[bytes], *, kill: bool = False, grace: float = 5.0) -> None:
    """End a nodetool that is still running (SIGKILL with `kill`, else SIGTERM and SIGKILL after `grace`)
    and reap it. Stopping the client never stops a repair session: that runs on the coordinator."""
    if process.poll() is None:
        if kill:
            process.kill()
        else:
            process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()


def _states(status: str) -> dict[str, str]:
    """`nodetool status` output as address -> two-letter state."""
    return {node: state for state, node in _STATUS_LINE.findall(status)}


def _quietly(action: Callable[[], None]) -> None:
    with contextlib.suppress(RingwardError, OSError):  # the first command starts the JVM again and says why it fails
        action()


def _as_ranges(ranges: TokenRange | Sequence[TokenRange]) -> tuple[TokenRange, ...]:
    ranges = (ranges,) if isinstance(ranges, TokenRange) else tuple(ranges)
    if not ranges:
        raise RepairError("No range to repair was given.", "Pass at least one token range.")
    for token_range in ranges:
        if token_range.unwrap() != [token_range]:  # (x, MIN] "wraps" in Cassandra's terms yet needs no split
            raise RepairError(
                f"Range {token_range} wraps around the ring; nodetool needs non-wrapping ranges.",
                "Unwrap it at the minimum token first (TokenRange.unwrap()).",
            )
    return ranges


def _range_options(ranges: Sequence[TokenRange]) -> list[str]:
    """`-st S -et E` for the ranges. nodetool sends the repair option `ranges` as `S:E` and Cassandra
    splits that option at commas, so several ranges travel as `-st S1:E1,S2:E2,...,Sn -et En`: one
    command, and one session per set of replicas (Cassandra's CommonRange), as Reaper sends them over JMX.
    """
    pairs = [f"{r.start}:{r.end}" for r in ranges[:-1]]
    return ["-st", ",".join([*pairs, str(ranges[-1].start)]), "-et", str(ranges[-1].end)]


def repair_arguments(
    keyspace: str,
    ranges: Sequence[TokenRange],
    *,
    tables: Sequence[str] = (),
    flags: Sequence[str] = ("-full",),
    hosts: Sequence[str] = (),
) -> list[str]:
    """The arguments of one `nodetool repair`: the type's flags, the ranges, `-hosts` each, keyspace, tables.

    nodetool refuses -local together with -hosts (both set who takes part): the configuration refuses
    `local_dc_only` with `ignore_dcs`, so they never meet here."""
    args = ["repair", *flags, *_range_options(_as_ranges(ranges))]
    for host in hosts:
        args += ["-hosts", host]
    return [*args, keyspace, *tables]


def parse_preview_out_of_sync(output: str) -> dict[str, int]:
    """`keyspace.table` -> ranges out of sync, from a preview's summary (one line per table, Cassandra's
    SyncStatSummary: `ks.t - 3 ranges, 2 sstables, 1.2 KiB bytes`); tables with 0 ranges are left out."""
    found: dict[str, int] = {}
    for keyspace, table, ranges, _sstables, _size in _PREVIEW_TABLE.findall(output):
        if int(ranges):
            name = f"{keyspace}.{table}"
            found[name] = found.get(name, 0) + int(ranges)
    return found


def parse_describering(output: str) -> list[tuple[TokenRange, frozenset[str]]]:
    """`nodetool describering` output as (range, replicas) pairs."""
    return [
        (TokenRange(int(start), int(end)), frozenset(e.strip() for e in endpoints.split(",") if e.strip()))
        for start, end, endpoints in _DESCRIBERING.findall(output)
    ]


def most_sstables_in_one_table(tablestats: str) -> int:
    """The largest "SSTable count" of one table in `nodetool tablestats` output, Cassandra's keyspaces left out."""
    keyspace = ""
    most = 0
    for line in tablestats.splitlines():
        text = line.strip()
        header = _TABLESTATS_KEYSPACE.match(text)
        if header:
            keyspace = header.group(1)
            continue
        count = _TABLESTATS_SSTABLES.match(text)
        if count and keyspace not in _SYSTEM_KEYSPACES:
            most = max(most, int(count.group(1)))
    return most


def percent_repaired_by_table(tablestats: str) -> dict[str, float]:
    """ "keyspace.table" -> its "Percent repaired" in `nodetool tablestats` output: the share of the node's data of
    the table in SSTables marked repaired (repairedAt) by incremental repair."""
    keyspace = table = ""
    shares: dict[str, float] = {}
    for line in tablestats.splitlines():
        text = line.strip()
        if header := _TABLESTATS_KEYSPACE.match(text):
            keyspace = header.group(1)
        elif name := _TABLESTATS_TABLE.match(text):
            table = name.group(1)
        elif (share := _TABLESTATS_PERCENT_REPAIRED.match(text)) and keyspace and table:
            shares[f"{keyspace}.{table}"] = float(share.group(1))
    return shares
