"""Adapters over the other repair controllers: AutoRepair through nodetool, Reaper through its REST API.

The decisions (what to turn off, what to set back) are `ringward.repair_controllers`; these only read and write.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ringward.errors import ClusterError, ConfigurationError
from ringward.repair_controllers import AutoRepairChange, AutoRepairSettings, ReaperSchedule, parse_autorepair_config

from ringward_cassandra.nodetool import NodetoolClient

__all__ = ["ReaperClient", "apply_autorepair_changes", "read_autorepair"]

_AT_ONCE = 4  # nodes asked at once (a nodetool process each when there is no resident JVM)
_NOT_STARTED = "Server is not initialized yet"

# What nodetool says where AutoRepair cannot run: a Cassandra without CEP-37 (before 5.0.9) does not know the
# command; a node without its MBean answers InstanceNotFoundException.
_NO_AUTOREPAIR = (
    "Found unexpected parameters: [getautorepairconfig]",
    "unknown command",
    "No such command",
    "InstanceNotFoundException",
)


def read_autorepair(client: NodetoolClient, nodes: Iterable[str]) -> list[AutoRepairSettings]:
    """Every node's AutoRepair settings (`nodetool getautorepairconfig`, a few nodes at once); a node that
    cannot be asked is refused by name (its settings could then be neither paused nor restored).

    Below Cassandra 5.0 (asked of the first node: a mixed-version cluster is refused by the precheck) no node
    is asked: every node is returned as unavailable, saying why."""
    nodes = list(nodes)
    release = _release_version(client, nodes[0]) if nodes else ""
    major = release.split(".", 1)[0]
    if major.isdigit() and int(major) < 5:
        reason = f"Cassandra {release} has no AutoRepair (CEP-37 arrived in 5.0)"
        return [AutoRepairSettings(node, available=False, skipped_because=reason) for node in nodes]
    with ThreadPoolExecutor(max_workers=_AT_ONCE) as pool:
        return list(pool.map(lambda node: _read_one(client, node), nodes))


def _release_version(client: NodetoolClient, node: str) -> str:
    """`nodetool version` of `node` ("4.1.10"), or "" when it cannot say (then AutoRepair is asked as usual)."""
    try:
        result = client.run(node, ["version"], timeout=60.0)
    except ClusterError:
        return ""
    for line in (result.stdout or "").splitlines():
        if line.startswith("ReleaseVersion:"):
            return line.split(":", 1)[1].strip()
    return ""


def _read_one(client: NodetoolClient, node: str) -> AutoRepairSettings:
    result = client.run(node, ["getautorepairconfig"], timeout=120.0)
    output = (result.stdout or "") + (result.stderr or "")
    if result.returncode != 0:
        if any(marker.lower() in output.lower() for marker in _NO_AUTOREPAIR):
            return AutoRepairSettings(node, available=False)
        # 5.0.9 started without -Dcassandra.autorepair.enable answers "Server is not initialized yet" (its
        # AutoRepair service never starts); a node that is starting says the same, but also fails other commands.
        if _NOT_STARTED in output and client.run(node, ["statusbinary"], timeout=60.0).returncode == 0:
            return AutoRepairSettings(node, available=False)
        raise ClusterError(
            f"nodetool getautorepairconfig failed on {node}: {output.strip()[-500:]}",
            f"Check that {node} is up and its JMX port is reachable from this worker, then retry.",
        )
    return parse_autorepair_config(node, output)


def apply_autorepair_changes(client: NodetoolClient, changes: Sequence[AutoRepairChange]) -> list[str]:
    """Run each change; every change is tried, and the failed ones are returned as lines naming the node."""
    failures = []
    for change in changes:
        try:
            result = client.run(change.node, list(change.nodetool_args), timeout=120.0)
            if result.returncode != 0:
                failures.append(f"{change}: {(result.stdout or '').strip()[-300:]}")
        except Exception as error:  # every failure is reported by node, none swallowed
            failures.append(f"{change}: {error}")
    return failures


class ReaperClient:
    """The few Reaper REST calls a migration needs: list schedules, set a schedule's state.

    `base_url` is Reaper's (e.g. http://reaper:8080); with `username`, it logs in first (POST /login) and
    sends the JWT it returns as `Authorization: Bearer`.
    """

    def __init__(self, base_url: str, username: str | None = None, password: str | None = None,
                 timeout: float = 30.0) -> None:  # fmt: skip
        self.base_url = base_url.rstrip("/")
        self.username = username
        self.password = password
        self.timeout = timeout
        self._token: str | None = None

    def schedules(self, keyspace: str, cluster: str | None = None) -> list[ReaperSchedule]:
        query = {"keyspace": keyspace, **({"clusterName": cluster} if cluster else {})}
        answer = self._call("GET", "/repair_schedule", query)
        if not isinstance(answer, list):
            raise ClusterError(
                f"Reaper at {self.base_url} answered GET /repair_schedule with {str(answer)[:200]!r}, not a list.",
                "Check that the reaper_default connection points at Reaper's REST API (host and port).",
            )
        return [ReaperSchedule.from_json(row) for row in answer]

    def set_state(self, schedule_id: str, state: str) -> None:
        self._call("PUT", f"/repair_schedule/{urllib.parse.quote(schedule_id)}", {"state": state})

    def _login(self) -> None:
        if not self.username or self._token is not None:
            return
        form = urllib.parse.urlencode({"username": self.username, "password": self.password or ""}).encode()
        request = urllib.request.Request(f"{self.base_url}/login", data=form, method="POST")
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
        body = self._open(request, "POST /login")
        try:
            parsed = json.loads(body)
            token = parsed.get("token") if isinstance(parsed, dict) else parsed
        except json.JSONDecodeError:
            token = body.strip()
        if not token:
            raise ConfigurationError(
                f"Reaper at {self.base_url} accepted the login but returned no token.",
                "Check the reaper_default connection's login and Reaper's authentication settings.",
            )
        self._token = str(token)

    def _call(self, method: str, path: str, query: dict[str, str]) -> Any:
        self._login()
        url = f"{self.base_url}{path}?{urllib.parse.urlencode(query)}"
        request = urllib.request.Request(url, method=method, data=b"" if method == "PUT" else None)
        if self._token:
            request.add_header("Authorization", f"Bearer {self._token}")
        body = self._open(request, f"{method} {path}")
        return json.loads(body) if body.strip() else None

    def _open(self, request: urllib.request.Request, what: str) -> str:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return str(response.read().decode())
        except urllib.error.HTTPError as error:
            raise ClusterError(
                f"Reaper at {self.base_url} refused {what}: HTTP {error.code} {error.read().decode()[:200]}",
                "Check the reaper_default connection (URL, login) and that Reaper manages this cluster.",
            ) from error
        except (urllib.error.URLError, TimeoutError, OSError) as error:
            raise ClusterError(
                f"Reaper at {self.base_url} did not answer {what}: {error}",
                "Check that Reaper runs and the reaper_default connection's host and port reach it.",
            ) from error
