"""Driver sessions for ringward: whole-cluster sessions and sessions pinned to one coordinator."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypedDict, Unpack

from cassandra import ProtocolVersion
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, Session
from cassandra.policies import (
    DCAwareRoundRobinPolicy,
    RetryPolicy,
    TokenAwarePolicy,
    WhiteListRoundRobinPolicy,
)
from ringward.errors import ConfigurationError

__all__ = [
    "ClusterSettings",
    "RingwardCluster",
    "accepts_connections",
    "agreement_wait",
    "any_below_5",
    "build_cluster",
    "cluster_arguments",
    "connect",
    "pinned_session",
    "quote_identifier",
    "ssl_context",
]


def agreement_wait(request_timeout: float, wanted: float | None = None) -> float:
    """How long a DDL statement waits for every live node to have the change (the driver's default is 10 s).

    The driver runs that wait inside the request's timeout, after the statement itself and before its
    metadata refresh: a wait close to the timeout turned changes the cluster applied into OperationTimedOut
    (CI, a DDL taking seconds on a loaded cluster). So it takes at most half the timeout.
    """
    longest = max(1.0, request_timeout / 2)
    if wanted is None:
        return longest
    if wanted > longest:
        raise ConfigurationError(
            f"schema_agreement_wait {wanted:g} s does not fit in request_timeout {request_timeout:g} s.",
            f"Set schema_agreement_wait to at most {longest:g} s, or raise request_timeout.",
        )
    return wanted


class ClusterSettings(TypedDict, total=False):
    """How a driver `Cluster` connects besides its contact points and port: the one list of settings that
    `connect`, `build_cluster` and `cluster_arguments` take (as keywords, each optional).

    - coordinator: send every request to this node only (default: token- and DC-aware routing).
    - timeout: the request timeout in seconds (default 30).
    - local_dc: the data center whose nodes coordinate (default: the driver's choice, the contact points').
    - username, password: PlainText authentication (default: none).
    - ssl_options: TLS, in the driver's `ssl_options` words (default: no TLS), made an `ssl_context`.
    - protocol_version: the native protocol version (default: negotiated, v4 when a node runs Cassandra below
      5.0, see `RingwardCluster`).
    - schema_agreement_wait: how long a DDL statement waits for agreement (default and upper bound:
      `agreement_wait(timeout)`).
    """

    coordinator: str | None
    timeout: float
    local_dc: str | None
    username: str | None
    password: str | None
    ssl_options: Mapping[str, Any] | None
    protocol_version: int | None
    schema_agreement_wait: float | None


@contextmanager
def connect(contact_points: Sequence[str], port: int = 9042, **settings: Unpack[ClusterSettings]) -> Iterator[Session]:
    """A session over the cluster, or one whose every request goes to `settings["coordinator"]` only.

    A pinned session is how a read at CL ONE is made to hit one replica: a coordinator that is itself a
    replica serves ONE from its own data (the seed article's hazard). A DDL statement returns once every live
    node has the change, or after `agreement_wait(timeout)` (the driver then only logs a warning): the next
    statement may be coordinated by any node, and one that missed the change answers "does not exist".
    `local_dc`, `username`/`password` and `ssl_options` are those of the `cassandra` connection (a Spark
    task gets them from the job's arguments).
    """
    cluster = build_cluster(contact_points, port, **settings)
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


def build_cluster(contact_points: Sequence[str], port: int = 9042, **settings: Unpack[ClusterSettings]) -> Cluster:
    """The one place a driver `Cluster` is built (hooks, `connect`, the ring and schema readers use it)."""
    return RingwardCluster(**cluster_arguments(contact_points, port, **settings))


class RingwardCluster(Cluster):  # type: ignore[misc]
    """The driver's `Cluster`, whose negotiated protocol is v4 when any node runs Cassandra below 5.0.

    Left alone the driver negotiates the newest protocol a node accepts: v5 on 4.0 and 4.1 as well, where
    v5 is new (4.0 introduced it) and ringward is tested with v4. A protocol set explicitly is kept as is."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self._protocol_version_explicit:
            # Negotiation starts at v5, not at the DataStax Enterprise versions (two warnings on every connect).
            self.protocol_version = ProtocolVersion.V5

    def connect(self, keyspace: str | None = None, wait_for_all_pools: bool = False) -> Session:
        if self._is_setup or self._protocol_version_explicit:
            return super().connect(keyspace, wait_for_all_pools)
        session = super().connect(keyspace, wait_for_all_pools)  # the control connection negotiates
        negotiated: int = self.protocol_version
        if negotiated > 4 and any_below_5(self.metadata.all_hosts()):
            session.shutdown()
            # Connections opened from now on (the new session's pools, the control connection's next) speak v4.
            self.protocol_version = 4
            session = super().connect(keyspace, wait_for_all_pools)
        return session


def any_below_5(hosts: Sequence[Any]) -> bool:
    """Whether any of the driver's hosts runs a Cassandra release below 5.0 (by its `release_version`)."""
    for host in hosts:
        release = str(getattr(host, "release_version", None) or "")
        major = release.split(".", 1)[0]
        if major.isdigit() and int(major) < 5:
            return True
    return False


def cluster_arguments(
    contact_points: Sequence[str], port: int = 9042, **settings: Unpack[ClusterSettings]
) -> dict[str, Any]:
    """`Cluster`'s arguments: token- and DC-aware routing (or every request to `coordinator` only), execution
    profiles, and a schema agreement wait that fits in the request timeout (`agreement_wait`)."""
    unknown = sorted(set(settings) - ClusterSettings.__optional_keys__)
    if unknown:
        raise TypeError(f"cluster_arguments() got unexpected keyword arguments: {', '.join(unknown)}")
    coordinator = settings.get("coordinator")
    timeout = settings.get("timeout", 30.0)
    if coordinator:
        policy: Any = WhiteListRoundRobinPolicy([coordinator])
        points = [coordinator]
    else:
        policy = TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=settings.get("local_dc")))
        points = list(contact_points)
    profile = ExecutionProfile(load_balancing_policy=policy, request_timeout=timeout, retry_policy=RetryPolicy())
    arguments: dict[str, Any] = {
        "contact_points": points,
        "port": port,
        "execution_profiles": {EXEC_PROFILE_DEFAULT: profile},
        "connect_timeout": 10,
        "control_connection_timeout": 10,
        # A DDL statement's changes must have reached every node before the next statement is prepared.
        "max_schema_agreement_wait": agreement_wait(timeout, settings.get("schema_agreement_wait")),
    }
    if settings.get("protocol_version") is not None:
        arguments["protocol_version"] = settings["protocol_version"]
    username = settings.get("username")
    if username:
        arguments["auth_provider"] = PlainTextAuthProvider(username=username, password=settings.get("password"))
    ssl_options = settings.get("ssl_options")
    if ssl_options:
        arguments["ssl_context"] = ssl_context(ssl_options)
        if ssl_options.get("server_hostname"):
            arguments["ssl_options"] = {"server_hostname": ssl_options["server_hostname"]}
    return arguments


_SSL_KEYS = {"ca_certs", "certfile", "keyfile", "check_hostname", "cert_reqs", "ssl_version", "ciphers",
             "server_hostname"}  # fmt: skip


def ssl_context(options: Mapping[str, Any]) -> ssl.SSLContext:
    """The driver's `ssl_context` for a connection's `ssl_options` (the driver deprecates passing the options
    themselves): the server's certificate is checked against `ca_certs` (or the system's CAs), and its name or
    address too unless `check_hostname` is false; `certfile`/`keyfile` give a client certificate."""
    unknown = sorted(set(options) - _SSL_KEYS)
    if unknown:
        raise ConfigurationError(
            f"ssl_options has settings ringward does not know: {', '.join(unknown)}.",
            f"Use only {', '.join(sorted(_SSL_KEYS))} in the cassandra connection's extra.ssl_options.",
        )
    context = ssl.SSLContext(int(options.get("ssl_version") or ssl.PROTOCOL_TLS_CLIENT))
    # The certificate must name the address connected to unless the connection says `check_hostname: false`
    # (as the CLI's RINGWARD_CQL_CHECK_HOSTNAME does): a certificate signed by the CA for any node is not enough.
    check_hostname = bool(options.get("check_hostname", True))
    verify_mode = ssl.VerifyMode(int(options.get("cert_reqs", ssl.CERT_REQUIRED)))
    if check_hostname and verify_mode == ssl.CERT_NONE:
        raise ConfigurationError(
            "ssl_options has cert_reqs 0 (CERT_NONE), which cannot check the host name, while check_hostname is "
            "true (the default).",
            'Verify the certificate (leave cert_reqs out), or, knowingly, also set "check_hostname": false.',
        )
    context.check_hostname = check_hostname
    context.verify_mode = verify_mode
    try:
        if options.get("ca_certs"):
            context.load_verify_locations(str(options["ca_certs"]))
        else:
            context.load_default_certs()
        if options.get("certfile"):
            context.load_cert_chain(str(options["certfile"]), options.get("keyfile"))
        if options.get("ciphers"):
            context.set_ciphers(str(options["ciphers"]))
    except (OSError, ssl.SSLError) as error:
        raise ConfigurationError(
            f"The TLS settings of the cassandra connection cannot be loaded: {error}.",
            "Check that ssl_options' ca_certs/certfile/keyfile name readable PEM files on this machine.",
        ) from error
    return context


pinned_session = connect


def quote_identifier(name: str) -> str:
    """A CQL identifier, double-quoted so case and reserved words survive (and injection cannot)."""
    return '"' + name.replace('"', '""') + '"'


def accepts_connections(address: str, port: int = 9042, timeout: float = 2.0) -> bool:
    """Whether `address` accepts TCP connections on `port` now (a killed node refuses them at once)."""
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False
