"""Server-rendered HTML of the three pages (no JavaScript needed; a page refreshes itself while work runs).

Every value from the cluster, the store or Airflow (datacenter, rack, keyspace, table, run id, pause reason, user
name, host) is plain text until it is written into the page, and is escaped there, once, last; markup is built
only from the code's own constants. The one inline script is `THEME_SCRIPT`, allowed by its hash in the
Content-Security-Policy the app sends with every response (`app.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any
from urllib.parse import quote

from ringward_airflow.ui.formats import (
    format_duration,
    format_repaired_share,
    format_timestamp,
    humanize_replications,
)
from ringward_airflow.ui.style import STYLESHEET, THEME_SCRIPT, state_class
from ringward_airflow.ui.views import JSON_ROWS

__all__ = ["cluster_page", "cluster_query", "error_page", "migration_page", "repair_page"]


def cluster_query(cluster: str | None, **more: int) -> str:
    """The query string naming a page's cluster (and `more` parameters), quoted; "" for the single cluster with
    nothing more. Plain text: escaped where it is written into the page."""
    params = ([f"cluster={quote(cluster, safe='')}"] if cluster is not None else []) + [
        f"{quote(name, safe='')}={value}" for name, value in more.items()
    ]
    return "?" + "&".join(params) if params else ""


def _picker(cluster: str | None, picker: list[str] | None) -> str:
    """The cluster picker: the clusters whose page of this kind the user may open (the current one in bold), each
    a link to the same page of that cluster. Nothing for the single cluster."""
    if cluster is None and not picker:
        return ""
    links = [f"<b>{escape(name)}</b>" if name == cluster else f"<a href='{escape(cluster_query(name))}'>"
             f"{escape(name)}</a>" for name in picker or []]  # fmt: skip
    if cluster is not None and cluster not in (picker or []):
        links.insert(0, f"<b>{escape(cluster)}</b>")
    return "<p id='clusters' class='muted'>cluster: " + " &middot; ".join(links) + "</p>"


def _page(title: str, body: str, *, refresh: int | None = None, root: str = "", cluster: str | None = None,
          picker: list[str] | None = None) -> str:  # fmt: skip
    """`root`: the relative path from the page to the app's root ("../../" under migration/<dag>/<run>);
    `cluster`: the page's cluster (the nav's links keep it), `picker`: the clusters to offer (`_picker`)."""
    meta = f"<meta http-equiv='refresh' content='{refresh}'>" if refresh else ""
    query = escape(cluster_query(cluster))
    nav = (f"<nav aria-label='ringward'><b>ringward</b><a href='{root}repair{query}'>Repair</a>"
           f"<a href='{root}cluster{query}'>Cluster</a></nav>")  # fmt: skip
    body = _picker(cluster, picker) + body
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<meta name='color-scheme' content='light dark'>{meta}<title>{escape(title)}</title>"
        f"<script>{THEME_SCRIPT}</script><style>{STYLESHEET}</style></head><body>{nav}<main>{body}</main></body></html>"
    )


def _table(headers: list[str], rows: list[list[str]], *, row_classes: list[str] | None = None, tid: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        cls = f" class='{escape(row_classes[i])}'" if row_classes and row_classes[i] else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>")
    ident = f" id='{escape(tid)}'" if tid else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _e(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, list | tuple):
        return escape(", ".join(str(v) for v in value)) or "-"
    if isinstance(value, Mapping):
        return escape(", ".join(f"{k}: {v}" for k, v in value.items())) or "-"
    return escape(str(value))


def _when(value: Any) -> str:
    """A moment as `2026-11-25 10:19:03 UTC` (text that is no timestamp: as it is, escaped)."""
    return escape(format_timestamp(value if value is None or isinstance(value, str) else str(value)))


def _took(seconds: Any) -> str:
    """A duration as `3.4 s`, `5 min 07 s`, `1 h 02 min`."""
    return escape(format_duration(seconds if isinstance(seconds, int | float) else None))


def _repl(shown: Any) -> str:
    """A replication setting as the view described it from the typed value (`NetworkTopologyStrategy {dc1: 3}`),
    escaped."""
    return escape(str(shown))


def _badge(state: Any, text: str | None = None) -> str:
    """A state as Airflow shows one: a pill in the state's colour."""
    label = str(state) if text is None else text
    return f"<span class='badge {state_class(str(state))}'>{escape(label)}</span>"


def _range(pair: list[int]) -> str:
    return f"({pair[0]}, {pair[1]}]"


def _bar(percent: float) -> str:
    fill = f"<div class='fill' style='width:{percent}%'></div>"
    return (f"<div class='bar' role='progressbar' aria-valuenow='{percent}' aria-valuemin='0' aria-valuemax='100' "
            f"aria-label='{percent}% done'>{fill}</div>")  # fmt: skip


PAGE_ROWS = 200  # rows of each list of ranges per page (?page=N): a 48-node x 256-token plan has 12,288
INLINE_SVG_CHARS = 256_000  # a larger picture is linked (<img>), not inlined: 12,288 ranges draw 11 MB of SVG


def _list_pager(offset: int, total: int, what: str, cluster: str | None = None) -> str:
    """Which rows of a list of `total` a page shows, with links to the other pages (nothing for one page)."""
    pages = max(1, -(-total // PAGE_ROWS))
    if pages <= 1:
        return ""
    start, end = _window(total, offset // PAGE_ROWS + 1)
    return f"<p class='muted'>{_shown(start, end, total, what)}</p>" + _pager(offset // PAGE_ROWS + 1, pages, cluster)


def _pager(page: int, pages: int, cluster: str | None = None) -> str:
    """Links to the first, previous, next and last page of the range lists (relative: the page keeps its path and
    its cluster)."""
    if pages <= 1:
        return ""

    def href(number: int) -> str:
        return escape(cluster_query(cluster, page=number))

    links = [f"<a href='{href(1)}'>first</a>", f"<a href='{href(page - 1)}' rel='prev'>previous</a>"
             ] if page > 1 else []  # fmt: skip
    links.append(f"page {page} of {pages}")
    if page < pages:
        links += [f"<a href='{href(page + 1)}' rel='next'>next</a>", f"<a href='{href(pages)}'>last</a>"]
    return "<p class='pager'>" + " &middot; ".join(links) + "</p>"


def _window(count: int, page: int) -> tuple[int, int]:
    """The [start, end) of `page` in a list of `count` rows."""
    start = min((page - 1) * PAGE_ROWS, count)
    return start, min(start + PAGE_ROWS, count)


def _shown(start: int, end: int, count: int, what: str) -> str:
    if start == end:
        return f"no {what} on this page (of {count})" if count else f"no {what}"
    return f"{what} {start + 1}&ndash;{end} of {count}"


def error_page(title: str, problem: str, *, root: str = "") -> str:
    body = f"<h1>{escape(title)}</h1><div class='msg' id='error' role='alert'>{escape(problem)}</div>"
    return _page(title, body, root=root)


def migration_page(data: dict[str, Any], svg: str | None) -> str:
    """The page; its lists of ranges show the rows of the view's window (one page of `PAGE_ROWS`, failed and
    pending first), the counts are of every row (the JSON pages through every row)."""
    title = f"ringward migration/{data['dag_id']}/{data['run_id']}"
    if not data["found"]:
        message = escape(data["message"])
        if data.get("taken_over_by"):  # the same DAG's run: the user may read it
            href = f"../../migration/{quote(data['dag_id'], safe='')}/{quote(data['taken_over_by'], safe='')}"
            message += f" <a href='{escape(href)}' id='taken-over'>{escape(data['taken_over_by'])}</a>"
        body = f"<h1>Migration of run {escape(data['run_id'])}</h1><div class='msg' id='error'>{message}</div>"
        return _page(title, body, root="../../", cluster=data.get("cluster"))
    lists = [data["ranges_total"]] + [stage["total"] for step in data["steps"] for stage in step["stages"]]
    pages = max(1, -(-max(lists) // PAGE_ROWS))
    page = data["window"]["offset"] // PAGE_ROWS + 1
    verdict = "<span class='ok'>safe</span>" if data["safe"] else "<span class='bad'>refused as a single step</span>"
    parts = [
        f"<h1>Migration of <span id='keyspace'>{escape(data['keyspace'])}</span>: "
        f"<span id='state' class='badge {state_class(_migration_state(data['state']))}'>"
        f"{escape(data['state'])}</span></h1>",
        f"<p id='change'>{_repl(data['old_shown'])} &rarr; {_repl(data['new_shown'])} &middot; {verdict} &middot; "
        f"affected <b id='affected'>{data['affected_ranges']}</b> of {data['total_ranges']} ranges &middot; id "
        f"<code>{escape(data['migration_id'])}</code> &middot; started {_when(data['started_at'])}</p>",
        f"<div class='svg' id='placement'>{_placement(data, svg)}</div>",
        "<h2>Staged steps</h2>",
        "<ol id='steps'>" + "".join(f"<li>{_repl(s)}</li>" for s in data["stored_steps_shown"]) + "</ol>",
        "<h2>Findings</h2>",
    ]
    if data["findings"]:
        parts.append(_table(["severity", "code", "problem", "fix"],
                            [[_badge(_SEVERITY.get(str(f["severity"]), "none"), str(f["severity"])), _e(f["code"]),
                              _prose(f["message"]), _prose(f["fix"])]
                             for f in data["findings"]], tid="findings"))  # fmt: skip
    else:
        parts.append("<p id='findings'>No findings.</p>")
    parts.append(f"<details><summary>Precheck summary</summary><pre>{_prose(data['summary'])}</pre></details>")
    parts.append("<h2>Progress</h2>")
    for step in data["steps"]:
        alter = _badge("success", "ALTER applied") if step["altered"] else _badge("none", "ALTER not applied yet")
        parts.append(f"<h3>Step {step['index']}/{step['count']}: {_repl(step['after_shown'])} &middot; {alter}</h3>")
        for stage in step["stages"]:
            pct = round(100.0 * stage["done"] / stage["total"], 1) if stage["total"] else 100.0
            parts.append(f"<p class='stage' data-stage='{escape(stage['stage'])}'>{escape(stage['name'])}: "
                         f"<b>{stage['done']}/{stage['total']}</b> ranges done, {stage['failed']} failed</p>"
                         + _bar(pct))  # fmt: skip
            # The view's window: what needs a look first, failed, then not done yet, then done (ring order within).
            start, end = _window(stage["total"], page)
            rows = [[_range(r["range"]), _e(r["replicas"]), _state(r["status"]), _e(r["coordinator"]),
                     _e(r["attempts"]), _took(r["seconds"]), _e(r["detail"])] for r in stage["ranges"]]  # fmt: skip
            summary = _shown(start, end, stage["total"], "ranges") + (", failed and pending first" if pages > 1 else "")
            parts.append(f"<details><summary>{summary}</summary>" + _table(
                ["range", "replicas", "status", "coordinator", "attempts", "took", "detail"], rows,
                tid=f"journal-{stage['stage'].replace(':', '-')}") + "</details>")  # fmt: skip
        parts.append(_verification(step["verification"], step["index"], readable=data.get("xcoms_readable", True)))
    cleanup = data["cleanup"]
    if cleanup["done"]:
        nodes = _e(cleanup["nodes"]) if cleanup["nodes"] is not None else "(node list in the cleanup task's XCom)"
        parts.append(f"<h2>Cleanup</h2><p id='cleanup'>done on: {nodes}</p>")
    else:
        parts.append("<h2>Cleanup</h2><p id='cleanup'>not run yet</p>")
    parts.append("<h2>Ranges</h2>")
    shown = data["ranges"]  # the window, affected first
    start, end = _window(data["ranges_total"], page)
    parts.append(f"<p id='ranges-shown'>{_shown(start, end, data['ranges_total'], 'ranges')}, affected first</p>"
                 + _pager(page, pages))  # fmt: skip
    rows = [[_range(r["range"]), _e(r["old"]), _e(r["new"]), _e(r["gained"]), _e(r["lost"])] for r in shown]
    classes = ["affected" if r["gained"] or r["lost"] else "" for r in shown]
    parts.append(_table(["range", "old replicas", "new replicas", "gained", "lost"], rows, row_classes=classes,
                        tid="ranges"))  # fmt: skip
    if pages > 1:
        parts.append(_pager(page, pages) + "<p class='muted'>Every range, journal entry included, is in the "
                     f"<a href='{_api_path(data)}'>JSON</a> (<code>?offset=&amp;limit=</code>, up to "
                     f"{JSON_ROWS} rows per request).</p>")  # fmt: skip
    parts.append(_timings(data.get("run")))
    running = data["state"] not in ("done", "cleaned") and (data.get("run") or {}).get("state") == "running"
    return _page(title, "".join(parts), refresh=10 if running else None, root="../../", cluster=data.get("cluster"))


def _migration_state(state: str) -> str:
    """The Airflow state whose colour a migration's state takes: finished green, under way running."""
    return "success" if state in ("done", "cleaned") else "running"


def _api_path(data: dict[str, Any]) -> str:
    """The migration's JSON, relative to its page (migration/<dag>/<run>)."""
    return f"../../api/migration/{quote(data['dag_id'], safe='')}/{quote(data['run_id'], safe='')}"


def _placement(data: dict[str, Any], svg: str | None) -> str:
    """The picture inline; a large one linked instead, so the page (reloaded while the run runs) stays small."""
    if svg is None or len(svg) <= INLINE_SVG_CHARS:
        return svg or ""
    src = escape(_api_path(data) + "/placement.svg")
    return (f"<a href='{src}'><img src='{src}' alt='Placement of the {data['total_ranges']} ranges' "
            f"style='max-width:100%'></a><p class='muted'>The picture ({len(svg) / 1e6:.1f} MB) is linked, not "
            "part of the page: open it to see each range's replicas on hover.</p>")  # fmt: skip


def _state(status: Any) -> str:
    return _badge("none" if status is None else status, "-" if status is None else None)


_SEVERITY = {"error": "failed", "warn": "upstream_failed", "warning": "upstream_failed", "info": "none"}


def _prose(text: Any) -> str:
    """Text a check wrote (never markup), its replication maps as people read them, escaped last."""
    return escape(humanize_replications(str(text)))


def _verification(verification: dict[str, Any], index: int, *, readable: bool) -> str:
    """What the step's verification tasks returned, as tables: the preview repair's verdict, and per table the
    replica checks of the row counts (rows verified, ranges not in sync) with its verdict."""
    head = f"<h4 id='verification-{index}'>Verification</h4>"
    if not readable:
        return head + ("<p class='muted verification'>hidden: the verification evidence is in this run's XComs (XCom "
                       "read permission needed)</p>")  # fmt: skip
    if not verification:
        return head + "<p class='muted verification'>not run yet</p>"
    parts = [head]
    preview = verification.get("verify_preview")
    if preview is not None:
        parts.append(_verification_preview(preview, index))
    counts = verification.get("verify_counts")
    if counts is not None:
        parts.append(_verification_counts(counts, index))
    for name, value in verification.items():  # anything else a later version returns: shown, never dumped
        if name not in ("verify_preview", "verify_counts"):
            parts.append(f"<p>{escape(name)}:</p>" + _facts(value, f"verification-{index}-{name}"))
    return "".join(parts)


def _verification_preview(preview: Any, index: int) -> str:
    tid = f"verification-{index}-preview"
    if isinstance(preview, Mapping) and set(preview) == {"preview_ranges_in_sync"}:
        ranges = preview["preview_ranges_in_sync"]
        return _table(["check", "ranges", "verdict"], [["preview repair (<code>nodetool repair --preview "
                      "--full</code>) of the ranges repaired", _e(ranges), _badge("in sync")]], tid=tid)  # fmt: skip
    return "<p>preview repair:</p>" + _facts(preview, tid)


def _verification_counts(counts: Any, index: int) -> str:
    tid = f"verification-{index}-counts"
    if not isinstance(counts, Mapping) or not all(isinstance(v, Mapping) for v in counts.values()):
        return "<p>row counts:</p>" + _facts(counts, tid)
    if not counts:
        return ("<p class='verification'>row counts: nothing to count (no replica gained a range in this step, or "
                "the keyspace has no tables)</p>")  # fmt: skip
    rows = []
    for table, evidence in counts.items():
        lagging = list(evidence.get("not_in_sync") or [])
        verdict = _badge("not in sync", f"{len(lagging)} not in sync") if lagging else _badge("passed")
        detail = "".join(f"<li>{escape(str(line))}</li>" for line in lagging)
        rows.append([escape(str(table)), _e(evidence.get("replica_checks")), _e(evidence.get("rows_verified")),
                     _e(evidence.get("whole_table_rows")), verdict,
                     f"<ul>{detail}</ul>" if detail else "-"])  # fmt: skip
    return _table(["table", "replica checks", "rows verified", "whole-table rows (ALL)", "verdict",
                   "replicas not in sync"], rows, tid=tid)  # fmt: skip


def _facts(value: Any, tid: str) -> str:
    """Any returned value as a key/value table (a list as its items), never as a JSON dump."""
    if isinstance(value, Mapping):
        if not value:
            return "<p class='muted'>-</p>"
        return _table(["name", "value"], [[escape(str(k)), _e(v)] for k, v in value.items()], tid=tid)
    if isinstance(value, list | tuple):
        return _table(["#", "value"], [[str(i), _e(v)] for i, v in enumerate(value, 1)], tid=tid)
    return f"<p id='{escape(tid)}'>{_e(value)}</p>"


def _timings(run: dict[str, Any] | None) -> str:
    if run is None:
        return "<h2>Timings</h2><p class='muted'>This run is not in Airflow's database.</p>"
    if "error" in run:
        return f"<h2>Timings</h2><p class='warn'>{escape(run['error'])}</p>"
    hidden = "".join(f"<p class='muted hidden'>{escape(note)}</p>" for note in run.get("hidden", ()))
    rows = [[_e(t["task_id"]) + ("" if t["map_index"] < 0 else f"[{t['map_index']}]"), _state(t["state"]),
             _when(t["start"]), _when(t["end"]), _took(t["seconds"]), _e(t["tries"])]
            for t in run["tasks"]]  # fmt: skip
    took = f", took {_took(run['seconds'])}" if run.get("seconds") is not None else ""
    return (f"<h2>Timings</h2><p id='run-timing'>run {escape(run['run_id'])}: {_state(run['state'])}{took}; started "
            f"{_when(run.get('start'))}</p>" + _table(["task", "state", "start", "end", "duration", "tries"], rows,
                                                       tid="timings") + hidden)  # fmt: skip


def repair_page(data: dict[str, Any], svg: str, *, picker: list[str] | None = None) -> str:
    """`picker`: the clusters whose Repair page the user may open."""
    cluster = data.get("cluster")
    of = "" if cluster is None else f" of <span id='cluster'>{escape(cluster)}</span>"
    parts = [f"<h1>Nightly subrange repair{of}</h1>"]
    switch = data["switch"]
    if switch["paused"]:
        last = switch["events"][0]
        parts.append(f"<p id='switch-state' class='bad'>PAUSED by {escape(last['changed_by'])} at "
                     f"{_when(last['changed_at'])}: the repair stops before its next segment.</p>")  # fmt: skip
        action, label = "resume", "Resume the nightly repair"
    else:
        parts.append("<p id='switch-state' class='ok'>running (not paused)</p>")
        action, label = "pause", "Pause the nightly repair"
    if not data["config_enabled"]:
        parts.append("<p class='warn'>The configuration file disables repair (enabled: false).</p>")
    if data.get("config_note"):
        parts.append(f"<p class='warn' id='config-note'>{escape(data['config_note'])}</p>")
    # No script: the required checkbox is the confirmation (the pages' Content-Security-Policy runs no inline
    # handler), and the server refuses a press without it.
    parts.append(
        f"<form method='post' action='api/repair/switch{escape(cluster_query(cluster))}' id='switch-form'>"
        f"<input type='hidden' name='action' value='{action}'>"
        "<label>reason <input name='reason' size='40'></label> "
        "<label><input type='checkbox' name='confirm' value='yes' required> I confirm: running sessions finish; "
        "no new segment starts while paused</label> "
        f"<button type='submit'>{label}</button></form>"
    )
    current = data["current_run"]
    parts.append("<h2>Current run</h2>")
    if current is None:
        parts.append("<p class='muted'>No nightly run yet.</p>")
    elif "error" in current:
        parts.append(f"<p class='warn'>{escape(current['error'])}</p>")
    else:
        parts.append(_progress(current))
    latest = data["latest_run"]
    parts.append("<h2>Latest report</h2>")
    if latest is None:
        parts.append("<p class='muted' id='latest-run'>No run has reported yet.</p>")
    else:
        parts.append(f"<p id='latest-run'>{escape(latest['run_id'])}: {_state(latest['state'])}, recorded "
                     f"{_when(latest['updated_at'])}</p>")  # fmt: skip
        if latest["metrics"]:
            parts.append(_table(["metric", "value"], [[escape(str(k)), _e(v)] for k, v in latest["metrics"].items()],
                                tid="metrics"))  # fmt: skip
    parts.append("<h2>Tables</h2>")
    table_pager = _list_pager(data["window"]["offset"], data["tables_total"], "tables", cluster)
    parts.append(table_pager)
    rows = [[escape(t["table"]), _e(t["repaired"]) if t["repaired"] is not None else
             "<span class='muted'>not reported yet</span>", _e(t["run_id"]), _when(t["recorded_at"])]
            for t in data["tables"]]  # fmt: skip
    parts.append(_table(["table", "repaired within gc_grace", "reported by run", "recorded"], rows, tid="tables"))
    excluded = data.get("excluded") or []
    if excluded:
        total = data.get("excluded_total", len(excluded))
        listed = f" (the first {len(excluded)} listed)" if total > len(excluded) else ""
        parts.append(f"<details id='excluded'><summary>Not repaired by the nightly repair: {total} "
                     f"keyspace(s) or table(s), and why{listed}</summary>"
                     + _table(["keyspace or table", "why"], [[escape(e["name"]), escape(e["reason"])]
                                                              for e in excluded], tid="excluded-table")
                     + "</details>")  # fmt: skip
    parts.append(f"<div class='svg' id='coverage'>{svg}</div>")
    parts.append(_by_type(data.get("by_type") or {}))
    parts.append(table_pager)
    previews = data.get("previews") or []
    if previews:
        parts.append(
            "<h2>Preview findings (latest first)</h2><p class='muted'>A preview repairs nothing: these ranges "
            "stay out of sync until a full repair of them.</p>"
        )
        parts.append(_table(["found", "table", "ranges out of sync", "of the command's ranges", "run", "coordinator"],
                            [[_when(p["found_at"]), escape(p["table"]), _e(p["out_of_sync_ranges"]), _e(p["ranges"]),
                              _e(p["run_id"]), _e(p["coordinator"])] for p in previews], tid="previews"))  # fmt: skip
    parts.append("<h2>Recent runs</h2>")
    parts.append(_table(["run", "state", "recorded", "tables"], [[_e(r["run_id"]), _state(r["state"]),
                        _when(r["updated_at"]), _e(r["tables"])] for r in data["runs"]], tid="runs"))  # fmt: skip
    parts.append("<h2>Pause switch history</h2>")
    presses = [[_when(e["changed_at"]), _e(e["changed_by"]),
                _badge("paused", "pause") if e["paused"] else _badge("running", "resume"), _e(e["reason"])]
               for e in switch["events"]]  # fmt: skip
    parts.append(_table(["when", "who", "action", "reason"], presses, tid="switch-events"))
    running = current is not None and current.get("state") in ("running", "queued")
    return _page("ringward repair", "".join(parts), refresh=15 if running else None, cluster=cluster, picker=picker)


_TYPE_COVERAGE = {
    "full": "full: repaired within gc_grace",
    "incremental": "incremental: repaired within gc_grace",
    "preview": "preview: compared within gc_grace",
    "paxos": "paxos: repaired within gc_grace",
}


def _by_type(view: dict[str, Any]) -> str:
    """Per repair type: each table's coverage by that type, an incremental table's repaired/unrepaired split and
    what the last preview of it found. Nothing while the reports list full repair only (the Tables above)."""
    kinds = view.get("types") or []
    if set(kinds) <= {"full"}:
        return ""
    headers = ["table", *(_TYPE_COVERAGE[kind] for kind in kinds)]
    incremental, preview = "incremental" in kinds, "preview" in kinds
    if incremental:
        headers.append("incremental: repaired / unrepaired data")
    if preview:
        headers.append("last preview: ranges out of sync")
    rows = []
    for entry in view["tables"]:
        row = [escape(entry["table"])]
        for kind in kinds:
            found = entry["coverage"].get(kind)
            row.append(f"<span title='reported by {escape(str(found['run_id']))}'>{_e(found['share'])}</span>"
                       if found else "<span class='muted'>not reported yet</span>")  # fmt: skip
        if incremental:
            share = entry.get("repaired_share")
            row.append(escape(format_repaired_share(share.get("repaired"), share.get("lowest"))) if share
                       else "<span class='muted'>not read yet</span>")  # fmt: skip
        if preview:
            row.append(_last_preview(entry.get("last_preview")))
        rows.append(row)
    return ("<h2>Per repair type</h2><p class='muted'>Each type's latest report; a preview compares and repairs "
            "nothing. The repaired share is read from every node's tablestats at the end of the run.</p>"
            + _table(headers, rows, tid="by-type"))  # fmt: skip


def _last_preview(preview: dict[str, Any] | None) -> str:
    if preview is None:
        return "<span class='muted'>never previewed</span>"
    run = f" <span class='muted'>({_e(preview['run_id'])})</span>"
    count = int(preview.get("out_of_sync_ranges") or 0)
    if not count:
        return "<span class='ok'>in sync</span>" + run
    ranges = "range" if count == 1 else "ranges"
    return f"<span class='bad'>{count} {ranges} out of sync</span>, found {_when(preview['found_at'])}" + run


NODE_ROWS = 200  # nodes listed under the current run (failing and busy first); the JSON has all


def _progress(current: dict[str, Any]) -> str:
    head = f"<p id='run'>{escape(current['run_id'])} ({_state(current['state'])})"
    progress = current.get("progress")
    if progress is None:
        return head + ": <span class='muted'>no progress recorded for this run</span></p>"
    parts = [
        head + f": <b id='progress'>{progress['finished']}/{progress['total']}</b> segments ({progress['percent']}%)"
        f": {progress['done']} done, {progress['failed']} failed, {progress['postponed']} postponed, "
        f"{progress['running']} running; ETA <span id='eta'>{_eta(progress)}</span>; updated "
        f"{_when(progress['updated_at'])}</p>",
        _bar(progress["percent"]),
    ]
    nodes = progress["nodes"]
    if nodes:
        rows = [[escape(n["node"]), str(n["running"]), str(n["done"]),
                 f"<span class='bad'>{n['failed']}</span>" if n["failed"] else "0"]
                for n in nodes[:NODE_ROWS]]  # fmt: skip
        shown = "" if len(nodes) <= NODE_ROWS else f" (the first {NODE_ROWS} of {len(nodes)}, failing and busy first)"
        parts.append(f"<details id='nodes'><summary>Segments per node{shown}</summary>"
                     + _table(["node", "running", "done", "failed"], rows, tid="per-node") + "</details>")  # fmt: skip
    return "".join(parts)


def _eta(progress: dict[str, Any]) -> str:
    """The worker's estimate as a duration; "-" when the run no longer runs (the view says so)."""
    if progress.get("eta") in (None, "-") or not isinstance(progress.get("eta_seconds"), int | float):
        return escape(str(progress.get("eta") or "-"))
    return _took(progress["eta_seconds"])


def _health(health: str) -> str:
    cls = {"OK": "ok", "ALARM": "warn", "OVERDUE": "bad"}.get(health, "")
    return f"<span class='{cls}'>{escape(health)}</span>"


def cluster_page(data: dict[str, Any], svg: str, *, picker: list[str] | None = None) -> str:
    """`picker`: the clusters whose Cluster page the user may open."""
    c = data["connection"]
    cluster = data.get("cluster")
    parts = [
        "<h1>Cluster</h1>" if cluster is None else f"<h1>Cluster <span id='cluster'>{escape(cluster)}</span></h1>",
        f"<p id='connection'>connection <b>{escape(c['conn_id'])}</b> ({escape(c['conn_type'])}): "
        f"{escape(c['target'])}; local DC {_e(c['local_dc'])}; protocol {_e(c['protocol_version'])}; "
        f"credentials {'set' if c['login_set'] else 'none'}; TLS {'on' if c['ssl'] else 'off'}</p>",
        "<p id='schema'>schema " + (_badge("success", "in agreement") if data["schema_agreement"] else
                                    _badge("failed", "DISAGREEMENT")) + "</p>",
    ]  # fmt: skip
    rows = [[escape(n["address"]), escape(n["datacenter"]), escape(n["rack"]),
             _state(n["status"]),
             escape(n["load"]), str(n["tokens"]), escape(n["schema_version"]), escape(n["release_version"])]
            for n in data["nodes"]]  # fmt: skip
    pager = _list_pager(data["window"]["offset"], data["nodes_total"], "nodes", cluster)
    parts.append(pager + _table(["address", "datacenter", "rack", "status", "load", "tokens", "schema version",
                         "Cassandra"], rows, tid="nodes") + pager)  # fmt: skip
    parts.append(f"<div class='svg' id='ring'>{svg}</div>")
    return _page("ringward cluster", "".join(parts), cluster=cluster, picker=picker)
