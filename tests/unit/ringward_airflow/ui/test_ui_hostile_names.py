"""Issue 36: the pages cannot run injected script. Every page, picture and JSON of the plugin rendered from a world
whose every name is hostile (datacenter, rack, node address, keyspace, table, migration id, journal detail, run
ids, task ids, XCom values, pause reason and user name, preview findings, connection hosts): the output is
parsed (html.parser, xml.etree) and every element and attribute in it must be one the code writes itself; the
hostile text must be there, as text. Then the headers every response carries, and what reaches the log.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import pytest
from ringward.migration import migration_steps, repair_segments
from ringward.plan import build_plan
from ringward.replication import Replication
from ringward.ring import Node, Ring, TokenRange
from ringward.ring_sources import ring_to_json
from ringward_airflow.ui.source import ConnectionInfo, NodeInfo, RunInfo, TaskTiming
from ringward_cassandra.ops_store import JournalEntry, MigrationRow, PreviewFinding, RepairRunRow, SwitchEvent

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests"))
import ui_fixtures  # noqa: E402
from ui_fixtures import bearer  # noqa: E402

airflow_api = ui_fixtures.airflow_api  # the fixture, registered in this module

DAG = "keyspace_migration"
RUN_ID = "manual__2026-11-27T10:00:00+00:00"
NIGHTLY = "scheduled__2026-11-27T02:00:00+00:00"

# What a name can hold when someone means harm (or a snitch file is odd). The last two are the way the old page
# turned escaped text back into markup: ast.literal_eval decoded Python escapes in the picture's replication map,
# and rewrote a map-shaped rack name.
HOSTILE = [
    "<img src=x onerror=alert(1)>",
    '"><script>alert(2)</script>',
    "'><svg onload=alert(3)>",
    "</style><script>alert(4)</script>",
    "javascript:alert(5)",
    "<foreignObject><div xmlns='http://www.w3.org/1999/xhtml'><img src=x onerror=alert(6)></div></foreignObject>",
    'quote\'s "double"\nnew line\r\n<b>7</b>',
    "\\x3cimg src=x onerror=alert(8)\\x3e",
    "{'class': 'NetworkTopologyStrategy', '\\x3cimg src=x onerror=alert(9)\\x3e': '3'}",
    "\x1b[31m\x00\x07 <i>control characters</i>",
]

# Elements and attributes the pages and pictures write themselves: nothing else may appear.
PAGE_TAGS = {
    "html", "head", "meta", "title", "script", "style", "body", "nav", "b", "a", "main", "h1", "h2", "h3", "h4",
    "p", "span", "code", "div", "ol", "li", "ul", "table", "thead", "tbody", "tr", "th", "td", "details",
    "summary", "pre", "form", "input", "label", "button", "dl", "dt", "dd",
}  # fmt: skip
SVG_TAGS = {"svg", "rect", "text", "path", "title", "line", "g"}
PAGE_ATTRIBUTES = {
    "lang", "charset", "name", "content", "http-equiv", "aria-label", "href", "id", "class", "role", "aria-valuenow",
    "aria-valuemin", "aria-valuemax", "style", "data-stage", "title", "method", "action", "type", "value", "size",
    "required", "rel",
}  # fmt: skip
SVG_ATTRIBUTES = {
    "xmlns", "width", "height", "viewbox", "x", "y", "x1", "y1", "x2", "y2", "rx", "fill", "stroke", "stroke-width",
    "d", "font-family", "font-size", "font-weight", "text-anchor", "dominant-baseline", "class",
}  # fmt: skip


def _ids() -> list[str]:
    return [f"hostile-{i}" for i in range(len(HOSTILE))]


# -- a world whose every name is hostile -----------------------------------------------------------------------------


def _nodes(bad: str) -> list[Node]:
    """Four nodes in two datacenters, each name (datacenter, rack) carrying `bad`; addresses are plain IPs."""
    step = 2**64 // 8
    tokens = [-(2**63) + step * i + 1 for i in range(8)]
    layout = [("dcA", "rA"), ("dcA", "rB"), ("dcB", "rA"), ("dcB", "rB")]
    return [
        Node(f"10.0.0.{i + 1}", f"{dc}{bad}", f"{rack}{bad}", (tokens[i], tokens[i + 4]))
        for i, (dc, rack) in enumerate(layout)
    ]


def hostile_world(bad: str) -> Any:
    from test_ui_plugin import FakeSource, FakeStore

    ring = Ring.of(_nodes(bad))
    dc_a, dc_b = f"dcA{bad}", f"dcB{bad}"
    keyspace = f"ks{bad}"
    old = {"class": "NetworkTopologyStrategy", dc_a: 1, dc_b: 1}
    new = {"class": "NetworkTopologyStrategy", dc_a: 2, dc_b: 1}
    plan = build_plan(ring, old, new, keyspace=keyspace)
    steps = migration_steps(plan)
    record = {
        "migration_id": f"{keyspace}@{RUN_ID}", "keyspace": keyspace, "ring": ring_to_json(ring),
        "old": plan.old.as_json(), "new": plan.new.as_json(), "steps": [s.after.as_json() for s in steps],
        "summary": plan.summary() + f"\nnote: {bad}", "affected_ranges": len(plan.affected),
        "total_ranges": plan.total_ranges, "dag_id": DAG, "run_id": RUN_ID, "started_at": bad,
        "rollback_of": bad,
    }  # fmt: skip
    store = FakeStore(migration_rows=[MigrationRow(f"{keyspace}@{RUN_ID}", keyspace, "altered:1", None, record)])
    pre = repair_segments(ring, steps[0], keyspace, "pre")
    post = repair_segments(ring, steps[0], keyspace, "post")
    store.journal = [JournalEntry("pre_repair:1", s.range, "done", s.replicas[0], 1, 2.5, bad) for s in pre]
    store.journal.append(JournalEntry("post_repair:1", post[0].range, bad, f"{post[0].replicas[0]}{bad}", 3, 9.0, bad))
    now = datetime.now(UTC)
    table = f"tbl{bad}"
    source = FakeSource(ring, store, {}, {keyspace: {table: 864000}}, {keyspace: Replication.parse(new)})
    summary = {
        "tables": {f"{keyspace}.{table}": bad}, "metrics": {bad: bad}, "skipped_keyspaces": {f"other{bad}": bad},
        "types": {
            "full": {"repaired": {f"{keyspace}.{table}": bad}},
            "incremental": {"repaired": {f"{keyspace}.{table}": bad},
                            "repaired_share": {f"{keyspace}.{table}": {"repaired": 50.0, "lowest": 25.0}}},
            "preview": {"previewed": {f"{keyspace}.{table}": bad}},
        },
    }  # fmt: skip
    store.runs = [RepairRunRow(f"night{bad}", bad, summary, {}, now - timedelta(hours=1))]
    store.events = [SwitchEvent(True, now, f"user{bad}", f"reason{bad}")]
    store.progress[NIGHTLY] = {
        "done": 1, "failed": 1, "postponed": 0, "total": 4, "running": {f"10.0.0.1{bad}": 1},
        "per_node": {f"10.0.0.2{bad}": {"done": 1, "failed": 1}}, "eta_seconds": 60.0, "updated_at": bad,
    }  # fmt: skip
    finding = PreviewFinding(keyspace, table, (TokenRange(0, 10),), 1, now, f"night{bad}", f"10.0.0.3{bad}")
    store.preview_findings = lambda: [finding]  # type: ignore[attr-defined]
    tasks = (TaskTiming(f"task{bad}", -1, bad, now, now + timedelta(seconds=3), 1),)
    xcoms = {
        "step_1.verify_preview": {bad: bad},
        "step_1.verify_counts": {table: {"replica_checks": bad, "rows_verified": bad, "whole_table_rows": bad,
                                         "not_in_sync": [bad]}},
        "cleanup": [bad], "report": bad,
    }  # fmt: skip
    source.runs = {
        (DAG, RUN_ID): RunInfo(DAG, RUN_ID, bad, now, None, xcoms, tasks),
        ("nightly_subrange_repair", None): RunInfo("nightly_subrange_repair", NIGHTLY, "running", now, None),
    }
    hosts = tuple(f"10.0.0.{i}{bad}" for i in (1, 2))
    source.connection = lambda: ConnectionInfo(  # type: ignore[method-assign]
        f"cassandra_default{bad}", bad, hosts, 9042, True, False, bad, 5
    )
    source.nodes = lambda: [  # type: ignore[method-assign]
        NodeInfo(n.address + bad, n.datacenter, n.rack, bad, 1.0, len(n.tokens), bad, bad, bad) for n in ring.nodes
    ]
    return source


@contextmanager
def serving(subapp: Any, world: Any) -> Iterator[None]:
    """The plugin app serving `world` (its real source factory put back after)."""
    real = subapp.state.source_factory
    subapp.state.source_factory = lambda _: world
    try:
        yield
    finally:
        subapp.state.source_factory = real


@pytest.fixture(params=HOSTILE, ids=_ids())
def hostile(airflow_api: tuple[Any, Any, dict[str, str]], request: pytest.FixtureRequest) -> Iterator[tuple[Any, str]]:
    """(a client of Airflow's API app whose ringward source is the hostile world, the hostile text)."""
    test_client, subapp, tokens = airflow_api
    bad: str = request.param
    with serving(subapp, hostile_world(bad)):
        yield SimpleNamespace(get=lambda url: test_client.get(url, headers=bearer(tokens["admin"]))), bad


# -- what the output holds -------------------------------------------------------------------------------------------


class _Page(HTMLParser):
    """Every element, attribute, script and style of a page, and its text as a browser shows it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self.text: list[str] = []
        self._open: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, attrs))
        self._open = tag if tag in ("script", "style") else None
        if tag == "script":
            self.scripts.append("")
        if tag == "style":
            self.styles.append("")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, attrs))

    def handle_endtag(self, tag: str) -> None:
        self._open = None

    def handle_data(self, data: str) -> None:
        if self._open == "script":
            self.scripts[-1] += data
        elif self._open == "style":
            self.styles[-1] += data
        else:
            self.text.append(data)


def _visible(bad: str) -> list[str]:
    """Pieces of the hostile text that must appear as text (split where output may change a character)."""
    pieces = bad.replace("\r\n", "\n").replace("\r", "\n")
    for ch in "\x1b\x00\x07":
        pieces = pieces.replace(ch, "\n")
    return [p for p in pieces.split("\n") if p.strip()]


def assert_page_is_safe(html: str, bad: str, where: str) -> None:
    from ringward_airflow.ui.style import STYLESHEET, THEME_SCRIPT

    page = _Page()
    page.feed(html)
    page.close()
    for tag, attrs in page.elements:
        assert tag in PAGE_TAGS | SVG_TAGS, (where, tag, attrs)
        for name, value in attrs:
            assert name in PAGE_ATTRIBUTES | SVG_ATTRIBUTES, (where, tag, name, value)
            if name in ("href", "action", "src"):
                assert value is not None and not value.strip().lower().startswith(("javascript:", "data:")), value
                assert bad not in value, (where, tag, name, value)
    assert page.scripts == [THEME_SCRIPT], where  # the one hashed script, nothing added to it
    assert page.styles == [STYLESHEET], where  # no name closes the stylesheet early
    text = "".join(page.text).replace("\r\n", "\n")
    for piece in _visible(bad):
        assert piece in text, (where, piece)  # shown, as text


def assert_svg_is_safe(svg: str, bad: str, where: str) -> None:
    root = ET.fromstring(svg)  # well-formed whatever the names hold
    for element in root.iter():
        namespace, _, tag = element.tag.rpartition("}")
        assert namespace == "{http://www.w3.org/2000/svg" and tag in SVG_TAGS, (where, element.tag)
        for name in element.attrib:
            assert name.lower() in SVG_ATTRIBUTES, (where, element.tag, name)
    text = "".join(root.itertext())
    for piece in _visible(bad):
        assert piece in text, (where, piece)


MIGRATION = f"/ringward/migration/{DAG}/{RUN_ID}"
PAGES = [MIGRATION, "/ringward/repair", "/ringward/cluster"]
PICTURES = [f"/ringward/api/migration/{DAG}/{RUN_ID}/placement.svg", "/ringward/api/repair/coverage.svg",
            "/ringward/api/cluster/ring.svg"]  # fmt: skip
DATA = [f"/ringward/api/migration/{DAG}/{RUN_ID}", "/ringward/api/repair", "/ringward/api/cluster"]


def test_every_page_shows_hostile_names_as_text_only(hostile: tuple[Any, str]) -> None:
    client, bad = hostile
    for url in PAGES:
        response = client.get(url)
        assert response.status_code == 200, (url, response.text[:500])
        assert_page_is_safe(response.text, bad, url)


def test_every_picture_shows_hostile_names_as_text_only(hostile: tuple[Any, str]) -> None:
    client, bad = hostile
    for url in PICTURES:
        response = client.get(url)
        assert response.status_code == 200 and response.headers["content-type"].startswith("image/svg+xml"), url
        assert_svg_is_safe(response.text, bad, url)


def test_the_pictures_inlined_in_the_pages_are_the_safe_pictures(hostile: tuple[Any, str]) -> None:
    """The SVG a page inlines is parsed as XML too: what the page's HTML parser might read loosely is no element."""
    client, bad = hostile
    for page, picture in ((MIGRATION, "placement"), ("/ringward/repair", "coverage"), ("/ringward/cluster", "ring")):
        html = client.get(page).text
        start = html.index("<svg", html.index(f"id='{picture}'"))
        end = html.index("</svg>", start) + len("</svg>")
        assert_svg_is_safe(html[start:end], bad, f"{page} ({picture})")


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON document, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_the_json_returns_hostile_names_as_data(hostile: tuple[Any, str]) -> None:
    client, bad = hostile
    for url in DATA:
        response = client.get(url)
        assert response.status_code == 200 and response.headers["content-type"] == "application/json", url
        assert any(bad in text for text in _strings(response.json())), url  # the value, as it is


def test_a_hostile_name_in_a_stored_row_that_cannot_be_read_is_shown_as_text(
    airflow_api: tuple[Any, Any, dict[str, str]],
) -> None:
    """The Migration page's error for a stored record it cannot read quotes the record: as text."""
    test_client, subapp, tokens = airflow_api
    bad = HOSTILE[0]
    world = hostile_world(bad)
    row = world.store.migration_rows[0]
    world.store.migration_rows[0] = MigrationRow(row.migration_id, row.keyspace, f"state{bad}", None, row.record)
    with serving(subapp, world):
        response = test_client.get(MIGRATION, headers=bearer(tokens["admin"]))
    assert response.status_code == 409
    assert_page_is_safe(response.text, bad, "stored state error")


# -- the headers of every response -----------------------------------------------------------------------------------


def _csp(response: Any) -> dict[str, str]:
    return {d.split(" ", 1)[0]: d.partition(" ")[2] for d in response.headers["content-security-policy"].split("; ")}


def test_every_response_carries_the_security_headers(airflow_api: tuple[Any, Any, dict[str, str]]) -> None:
    test_client, subapp, tokens = airflow_api
    with serving(subapp, hostile_world(HOSTILE[0])):
        responses = {url: test_client.get(url, headers=bearer(tokens["admin"])) for url in PAGES + PICTURES + DATA}
    for url, response in responses.items():
        assert response.status_code == 200, url
        policy = _csp(response)
        assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'self'", url
        assert policy["script-src"].startswith("'sha256-") and " " not in policy["script-src"], url
        assert "unsafe-inline" not in policy["script-src"] and "unsafe-eval" not in response.headers[
            "content-security-policy"], url  # fmt: skip
        assert policy["form-action"] == "'self'" and policy["base-uri"] == "'none'", url
        assert response.headers["x-content-type-options"] == "nosniff", url
        assert response.headers["cache-control"] == "no-store", url


def test_the_policy_allows_exactly_the_pages_one_inline_script(hostile: tuple[Any, str]) -> None:
    """The hash in the policy is the hash of the script the page carries (computed here from the page)."""
    client, _ = hostile
    for url in PAGES:
        response = client.get(url)
        page = _Page()
        page.feed(response.text)
        (script,) = page.scripts
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert _csp(response)["script-src"] == f"'sha256-{digest}'", url
        assert not any(name.startswith("on") for _, attrs in page.elements for name, _ in attrs), url


def test_errors_and_refusals_carry_the_security_headers(airflow_api: tuple[Any, Any, dict[str, str]]) -> None:
    test_client, subapp, tokens = airflow_api
    with serving(subapp, hostile_world(HOSTILE[0])):
        answers = [
            test_client.get("/ringward/repair"),  # no token: 401
            test_client.get("/ringward/cluster", headers=bearer(tokens["viewer"])),  # 403
            test_client.get("/ringward/no-such-page", headers=bearer(tokens["admin"])),  # 404
            test_client.post("/ringward/api/repair/switch", data={"action": "x"}, headers=bearer(tokens["admin"])),
        ]
    assert [r.status_code for r in answers] == [401, 403, 404, 422]
    for response in answers:
        assert "frame-ancestors 'self'" in response.headers["content-security-policy"], response.status_code
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["cache-control"] == "no-store"


# -- the log and the 503 page ----------------------------------------------------------------------------------------


def test_a_pause_reason_cannot_forge_a_log_line(
    airflow_api: tuple[Any, Any, dict[str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    test_client, subapp, tokens = airflow_api
    forged = "disk\n2026-11-27 10:00:00 WARNING Nightly repair resumed by admin\r\x1b[2K"
    with serving(subapp, hostile_world(HOSTILE[0])), caplog.at_level(logging.WARNING, logger="ringward_airflow.ui.app"):
        response = test_client.post("/ringward/api/repair/switch", headers=bearer(tokens["admin"]),
                                    data={"action": "pause", "confirm": "yes", "reason": forged})  # fmt: skip
    assert response.status_code == 200 and response.json()["reason"] == forged  # stored as given
    (line,) = [r.getMessage() for r in caplog.records if "Nightly repair PAUSED" in r.getMessage()]
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert "disk\\n2026-11-27 10:00:00 WARNING Nightly repair resumed by admin\\r\\x1b[2K" in line


def test_the_nightly_task_logs_a_hostile_pause_reason_on_one_line() -> None:
    from ringward.repair import paused

    logged: list[str] = []  # the task logger (structlog) as the lines it writes
    log = SimpleNamespace(warning=lambda msg, *args: logged.append(msg % args))

    event = SwitchEvent(True, datetime(2026, 11, 27, tzinfo=UTC), "eve\nINFO forged", "rack r1\nINFO forged too")
    store = SimpleNamespace(switch_events=lambda limit=1: [event])
    assert paused(store, log)  # type: ignore[arg-type]
    (line,) = [text for text in logged if "Repair paused from the UI" in text]
    assert "\n" not in line and "eve\\nINFO forged" in line and "rack r1\\nINFO forged too" in line


def test_log_safe_keeps_the_text_on_one_line() -> None:
    from ringward.text import log_safe

    assert log_safe("dc1/rack 1 é") == "dc1/rack 1 é"
    assert log_safe("a\nb\r\x1b[31m\u2028\x85") == "a\\nb\\r\\x1b[31m\\u2028\\x85"
    assert log_safe(ValueError("x\ny")) == "x\\ny"


def test_an_unreachable_cluster_names_its_hosts_only_to_who_may_read_the_connection(
    airflow_api: tuple[Any, Any, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The viewer may read the repair and migration pages but not the connection: the 503 says the cluster cannot
    be reached without naming where it points; an admin (who may read it) is told the hosts."""
    test_client, _, tokens = airflow_api
    monkeypatch.setenv("AIRFLOW_CONN_CASSANDRA_DEFAULT", '{"conn_type": "cassandra", "host": "127.0.0.1", "port": 1}')
    for url in ("/ringward/repair", "/ringward/api/repair", MIGRATION):
        hidden = test_client.get(url, headers=bearer(tokens["viewer"]))
        assert hidden.status_code == 503 and "The Cassandra cluster cannot be reached" in hidden.text, url
        assert "127.0.0.1" not in hidden.text and "may read that connection" in hidden.text, url
        assert hidden.headers["x-content-type-options"] == "nosniff" and hidden.headers["cache-control"] == "no-store"
        shown = test_client.get(url, headers=bearer(tokens["admin"]))
        assert shown.status_code == 503 and "127.0.0.1:1" in shown.text, url


def test_the_precheck_logs_a_plan_with_hostile_names_one_line_per_line() -> None:
    """The precheck logs the placement table and the plan as lines; a datacenter, rack or keyspace name holding a
    line break stays inside its line (escaped), so it cannot start a line that reads as another log record."""
    from ringward_airflow.migration_operators import _log_lines

    bad = "\n[2026-11-27T10:00:00] INFO - approved by admin\r"
    ring = Ring.of(_nodes(bad))
    plan = build_plan(ring, {"class": "NetworkTopologyStrategy", f"dcA{bad}": 1},
                      {"class": "NetworkTopologyStrategy", f"dcA{bad}": 2}, keyspace=f"ks{bad}")  # fmt: skip
    for lines in (plan.summary_lines(), plan.table_lines()):
        logged = _log_lines(lines)
        assert logged.split("\n") == [line.replace("\n", "\\n").replace("\r", "\\r") for line in lines]
    assert "\\n[2026-11-27T10:00:00] INFO - approved by admin\\r" in _log_lines(plan.summary_lines())
    assert plan.summary() == "\n".join(plan.summary_lines()) and plan.table() == "\n".join(plan.table_lines())


# -- a cluster name in the URL ---------------------------------------------------------------------------------------


def test_a_hostile_cluster_name_in_the_url_is_shown_as_text(hostile: tuple[Any, str]) -> None:
    """Issue 39: `?cluster=` is user input. A name no declaration has is refused (404), saying so: the page shows
    it as text only, the JSON returns it as data, the picture routes answer JSON, never an SVG quoting it."""
    client, bad = hostile
    named = quote(bad, safe="")
    for url in ("/ringward/repair", "/ringward/cluster"):
        response = client.get(f"{url}?cluster={named}")
        assert response.status_code == 404 and response.headers["content-type"].startswith("text/html"), url
        assert_page_is_safe(response.text, bad, url)
    for url in DATA[1:] + PICTURES[1:]:
        response = client.get(f"{url}?cluster={named}")
        assert response.status_code == 404 and response.headers["content-type"] == "application/json", url
        assert bad in response.json()["detail"], url
