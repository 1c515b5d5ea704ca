"""The duration model's per-table, per-range and streaming terms, and AutoRepair's in-process cost, fitted on real
repair sessions (issue 40; the refit of benchmarks/calibrate_cost.py, whose three-term record stays as it was).

On the local seed cluster (3 nodes of Cassandra 5.0, dc1 over two racks, NTS dc1: 2: every range on 127.0.0.4
and one of .2/.3, two replica sets), started with AutoRepair's full repair configured but off:

1. In sync, at `--sizes` (MiB per table, rows of 1 KiB random bytes written at CL ALL, grown step by step):
   `repair -full` commands through ringward's resident nodetool client, coordinated by 127.0.0.4, over 1, 5 or
   20 tables of the keyspace `calib` (20 tables) and 1, 4 or 16 subranges (equal pieces of one span inside one
   vnode range, as ringward's segments of one replica set), as one session (one replica set) or two (half of the
   span and of the subranges in each set), spans of `--fractions` of the ring; every combination `--repeats`
   times, shuffled. Each command's in-server time (`parent_repair_history` started_at -> finished_at) is read
   beside the client's wall time: their difference is the JMX round trip.
2. Streaming, at the largest size: hints off, 127.0.0.3 stopped, `--drifts` (shares of a table's rows, new keys)
   written at CL ONE into 5 tables, .3 started and every node flushed; then commands over disjoint spans of
   .3's replica set ({.3, .4}), 1 or 5 of those tables, 1 or 4 subranges: each repairs `drift x bytes` of missed
   writes in its span.
3. AutoRepair in-process, after each size's commands: `nodetool setautorepairconfig -t full enabled true` on
   every node until every node's turn is recorded finished (`system_distributed.auto_repair_history`), then off;
   at 5.0.9's shipped `repair_by_keyspace` true and again with it false. Settings that differ from the shipped
   ones, so turns come promptly: `min_repair_interval` 1 s, `force_repair_new_node` true, checks every 5 s,
   `repair_task_min_duration` 0 s (the floor sleeps after a task; it is not in a session's time). Its sessions
   are read from `parent_repair_history` (the benchmark keyspaces `calib`, `calib1` (1 table), `calib5`
   (5 tables); the system keyspaces it also repairs are left out).

Fitted by least squares (tools/fleetsim/ringward_fleetsim/calibration.py, `fit_linear`), error relative per
command (RMS, median, max) of the fit and of leave-one-group-out (a data size, or a drift round, predicted by the
terms fitted without it). Writes tools/fleetsim/ringward_fleetsim/calibration_refit.json (points included),
which `DurationModel.calibrated()` reads.

Run: RINGWARD_CLUSTER_HOME=$PWD/.local/arfit-cluster nice -n 19 .venv/bin/python benchmarks/calibrate_terms.py
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [
    str(ROOT / "include"),
    str(ROOT / "plugins"),
    str(ROOT / "tools" / "fleetsim"),
    str(ROOT / "benchmarks"),
]

from calibrate_cost import commit, machine, shipped_terms  # noqa: E402
from cassandra import ConsistencyLevel  # noqa: E402
from cassandra.concurrent import execute_concurrent_with_args  # noqa: E402
from cassandra.query import SimpleStatement  # noqa: E402
from cluster_workload import autorepair  # noqa: E402
from ringward.ring import TokenRange  # noqa: E402
from ringward_cassandra.cql import connect  # noqa: E402
from ringward_cassandra.localcluster import LocalCluster  # noqa: E402
from ringward_cassandra.nodetool import NodetoolClient  # noqa: E402
from ringward_fleetsim.calibration import REFIT_FILE, Measured, Point, errors, fit_report, load_terms  # noqa: E402

NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
COORDINATOR = "127.0.0.4"  # rack2's only node: a replica of every range
DOWN = "127.0.0.3"
KEYSPACES = {"calib": 20, "calib5": 5, "calib1": 1}
ROW_BYTES = 1024
RING = 2**64
MIN_TOKEN = -(2**63)
SEED_TOPOLOGY = ROOT / "plugins" / "ringward_cassandra" / "localcluster" / "topologies" / "seed.json"


def tables(keyspace: str) -> list[str]:
    return [f"t{i:02d}" for i in range(KEYSPACES[keyspace])]


def write_topology(path: Path) -> None:
    seed = json.loads(SEED_TOPOLOGY.read_text())
    seed.update(
        name="arfit",
        description="The seed cluster with AutoRepair's full repair configured, off until switched on "
        "(benchmarks/calibrate_terms.py).",
        auto_repair=["full"],
        auto_repair_settings={
            "repair_check_interval": "5s",
            "repair_task_min_duration": "0s",
            "repair_type_overrides": {
                "full": {
                    "enabled": False,
                    "min_repair_interval": "1s",
                    "force_repair_new_node": True,
                    "initial_scheduler_delay": "5s",
                }
            },
        },
    )
    path.write_text(json.dumps(seed))


def width(token_range: TokenRange) -> int:
    return (token_range.end - token_range.start) % RING or RING


def token(start: int, offset: int) -> int:
    return (start - MIN_TOKEN + offset) % RING + MIN_TOKEN


def pieces(start: int, span: int, count: int) -> list[TokenRange]:
    """`span` tokens from `start` in `count` equal subranges."""
    edges = [token(start, span * i // count) for i in range(count + 1)]
    return [TokenRange(a, b) for a, b in itertools.pairwise(edges)]


class Spans:
    """Free token spans of one replica set (its vnode ranges), handed out without overlap (streaming step)."""

    def __init__(self, ranges: Sequence[TokenRange]) -> None:
        self.free = [(r.start, width(r)) for r in sorted(ranges, key=width, reverse=True)]

    def take(self, span: int) -> int:
        for i, (start, room) in enumerate(self.free):
            if room >= span:
                self.free[i] = (token(start, span), room - span)
                return start
        raise ValueError(f"no free span of {span / RING:.3f} of the ring left: lower --drift-fractions")


def replica_sets() -> dict[str, list[TokenRange]]:
    """The seed ring's ranges by the rack1 node that replicates them (the other replica is 127.0.0.4)."""
    seed = json.loads(SEED_TOPOLOGY.read_text())
    owners = sorted((t, n["address"]) for n in seed["nodes"] for t in n["tokens"])
    found: dict[str, list[TokenRange]] = {"127.0.0.2": [], "127.0.0.3": []}
    for i, (end, owner) in enumerate(owners):
        start = owners[i - 1][0]
        # NTS rack-aware, RF 2 over rack1 (.2, .3) and rack2 (.4): the primary owner, then the next node of the
        # other rack; a range owned by .4 goes to the next rack1 node clockwise.
        rack1 = owner
        if owner == "127.0.0.4":
            rack1 = next(owners[(i + j) % len(owners)][1] for j in range(1, len(owners))
                         if owners[(i + j) % len(owners)][1] != "127.0.0.4")  # fmt: skip
        found[rack1].append(TokenRange(start, end))
    return found


def write(session: Any, keyspace: str, table: str, rows: range, consistency: int) -> None:
    insert = session.prepare(f"INSERT INTO {keyspace}.{table} (k, v) VALUES (?, ?)")
    insert.consistency_level = consistency
    for first in range(rows.start, rows.stop, 10_000):
        batch = [(i, os.urandom(ROW_BYTES)) for i in range(first, min(rows.stop, first + 10_000))]
        for ok, result in execute_concurrent_with_args(session, insert, batch, concurrency=48):
            if not ok:
                raise RuntimeError(result)


def live_bytes(nodetool: NodetoolClient, keyspace: str) -> dict[str, int]:
    """Space used (live) of every table of `keyspace` on the coordinator (which holds every range)."""
    out = nodetool.checked(COORDINATOR, ["tablestats", keyspace])
    found: dict[str, int] = {}
    table = ""
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Table:"):
            table = line.split(":", 1)[1].strip()
        elif line.startswith("Space used (live):") and table:
            found[table] = int(line.split(":", 1)[1].strip())
    return found


def history(session: Any, since: datetime) -> list[Any]:
    query = SimpleStatement(
        "SELECT parent_id, keyspace_name, columnfamily_names, requested_ranges, started_at, finished_at, "
        "exception_message FROM system_distributed.parent_repair_history",
        consistency_level=ConsistencyLevel.ONE,
    )
    return [r for r in session.execute(query, timeout=60) if r.started_at and r.started_at.replace(tzinfo=UTC) >= since]


def parse_range(text: str) -> TokenRange:
    a, b = text.strip("()[] ").split(",")
    return TokenRange(int(a), int(b))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="0.25,1,4", help="MiB of rows per table, loaded in turn")
    parser.add_argument("--fractions", default="0.03,0.12", help="shares of the ring one command repairs")
    parser.add_argument("--tables", default="1,5,20")
    parser.add_argument("--ranges", default="1,4,16")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--drifts", default="0.5,1.5,3", help="rows missed by .3 per round, in shares of a table's rows"
    )
    parser.add_argument("--drift-fractions", default="0.015,0.03,0.05")
    parser.add_argument("--skip", default="", help="steps to leave out: streaming,autorepair")
    parser.add_argument("--out", default=str(REFIT_FILE))
    parser.add_argument("--markdown", help="no measuring: print the fits of this OUT file as markdown tables")
    parser.add_argument("--from-raw", help="no measuring: refit the measurements of earlier runs' OUT files (a,b)")
    args = parser.parse_args()
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    if args.from_raw:
        return refit([Path(x) for x in args.from_raw.split(",")], Path(args.out))
    skip = set(filter(None, args.skip.split(",")))
    sizes = [float(x) for x in args.sizes.split(",")]
    fractions = [float(x) for x in args.fractions.split(",")]
    table_counts = [int(x) for x in args.tables.split(",")]
    range_counts = [int(x) for x in args.ranges.split(",")]
    rng = random.Random(40)
    sets = replica_sets()
    widest = {rack1: max(ranges, key=width) for rack1, ranges in sets.items()}
    for rack1, r in widest.items():
        if width(r) < max(fractions) * RING:
            raise SystemExit(
                f"the widest range of {rack1}'s set is {width(r) / RING:.3f} of the ring: lower --fractions"
            )
    started_at = datetime.now(UTC)
    measured_with = commit()  # the code that measures: HEAD when the run starts
    points: list[Point] = []
    autorepair_points: list[Point] = []
    raw: dict[str, Any] = {"nodetool": [], "autorepair": [], "sizes": {}}
    scratch = Path(tempfile.mkdtemp(prefix="arfit-"))
    topology = scratch / "arfit.json"
    write_topology(topology)
    cluster = LocalCluster()
    cluster.down(purge=True)
    loads = {"min": 99.0, "max": 0.0}

    def note_load() -> None:
        one = os.getloadavg()[0]
        loads["min"], loads["max"] = min(loads["min"], one), max(loads["max"], one)

    try:
        cluster.up(str(topology), timeout=600)
        nodetool = cluster.nodetool_client()
        with connect(NODES) as session:
            for keyspace in KEYSPACES:
                session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                                "{'class': 'NetworkTopologyStrategy', 'dc1': 2}")  # fmt: skip
                for table in tables(keyspace):
                    session.execute(f"CREATE TABLE {keyspace}.{table} (k int PRIMARY KEY, v blob)")
            session.cluster.control_connection.wait_for_schema_agreement(wait_time=120)
            loaded = 0
            copy: dict[str, dict[str, int]] = {}
            for size in sizes:
                rows = int(size * 2**20 / ROW_BYTES)
                began = time.monotonic()
                for keyspace in KEYSPACES:
                    for table in tables(keyspace):
                        write(session, keyspace, table, range(loaded, rows), ConsistencyLevel.ALL)
                loaded = rows
                for node in NODES:
                    for keyspace in KEYSPACES:
                        nodetool.flush(node, keyspace)
                copy = {keyspace: live_bytes(nodetool, keyspace) for keyspace in KEYSPACES}
                group = f"{size:g}MiB"
                raw["sizes"][group] = {"rows": rows, "live_bytes_on_coordinator": copy}
                print(f"size {group}: loaded to {rows} rows per table in {time.monotonic() - began:.0f}s; "
                      f"calib.t00 {copy['calib']['t00'] / 2**20:.2f} MiB", flush=True)  # fmt: skip
                plans = [(t, r, s, f) for t in table_counts for r in range_counts for s in (1, 2) for f in fractions
                         for _ in range(args.repeats)]  # fmt: skip
                rng.shuffle(plans)
                for count, ranges_wanted, sessions, fraction in plans:
                    span = int(RING * fraction)
                    if sessions == 1:
                        ranges = pieces(widest["127.0.0.2"].start, span, ranges_wanted)
                    else:
                        half = max(1, ranges_wanted // 2)
                        ranges = pieces(widest["127.0.0.2"].start, span // 2, half)
                        ranges += pieces(widest["127.0.0.3"].start, span - span // 2, half)
                    chosen = tables("calib")[:count]
                    note_load()
                    outcome = nodetool.repair(COORDINATOR, "calib", ranges, tables=chosen)
                    if not outcome.succeeded:
                        raise RuntimeError(f"repair failed: {outcome.output}")
                    data = sum(copy["calib"][t] for t in chosen) * sum(width(r) for r in ranges) / RING
                    point = Point(group, outcome.seconds, {"sessions": sessions, "tables": count, "ranges": len(ranges),
                                                           "bytes": data, "mismatched": 0.0})  # fmt: skip
                    points.append(point)
                    raw["nodetool"].append({**point.as_dict(), "parent_id": outcome.parent_id})
                    print(f"  {count:2d} tables, {len(ranges):2d} ranges, {sessions} session(s), {fraction:.2f} of "
                          f"the ring: {outcome.seconds:6.2f}s", flush=True)  # fmt: skip
                if "autorepair" not in skip:
                    for by_keyspace in (True, False):
                        for node in NODES:
                            nodetool.checked(node, ["setautorepairconfig", "-t", "full", "repair_by_keyspace",
                                                    str(by_keyspace).lower()])  # fmt: skip
                        since = datetime.now(UTC).replace(microsecond=0)
                        note_load()
                        try:
                            seconds = autorepair(nodetool, NODES, timeout=1200)
                        except RuntimeError as error:  # the sessions it did run are still read
                            print(f"  AutoRepair: {error}", flush=True)
                            seconds = float("nan")
                            for node in NODES:
                                nodetool.checked(node, ["setautorepairconfig", "-t", "full", "enabled", "false"])
                        time.sleep(2)
                        found = 0
                        for row in history(session, since):
                            ours = {str(e["parent_id"]) for e in raw["nodetool"]}
                            if (
                                row.keyspace_name not in KEYSPACES
                                or row.finished_at is None
                                or str(row.parent_id) in ours
                            ):
                                continue
                            ranges = [parse_range(r) for r in row.requested_ranges]
                            names = sorted(row.columnfamily_names)
                            data = sum(copy[row.keyspace_name][t] for t in names) * sum(map(width, ranges)) / RING
                            took = (row.finished_at - row.started_at).total_seconds()
                            point = Point(group, took, {"sessions": 1, "tables": len(names), "ranges": len(ranges),
                                                        "bytes": data, "mismatched": 0.0})  # fmt: skip
                            autorepair_points.append(point)
                            raw["autorepair"].append({**point.as_dict(), "keyspace": row.keyspace_name,
                                                      "repair_by_keyspace": by_keyspace,
                                                      "exception": row.exception_message})  # fmt: skip
                            found += 1
                        print(f"  AutoRepair, repair_by_keyspace {by_keyspace}: every turn in {seconds:.0f}s, "
                              f"{found} sessions of the benchmark keyspaces", flush=True)  # fmt: skip
            if "streaming" not in skip:
                group_copy = copy
                drift_fractions = [float(x) for x in args.drift_fractions.split(",")]
                drift_tables = tables("calib")[:5]
                written = loaded  # rows of each drift table on 127.0.0.4, which took every write
                for round_no, drift in enumerate(float(x) for x in args.drifts.split(",")):
                    missed = int(loaded * drift)
                    first = loaded * (round_no + 1) * 10  # fresh keys every round
                    for node in NODES:
                        nodetool.checked(node, ["disablehandoff"])
                    cluster.stop(DOWN)
                    with connect([n for n in NODES if n != DOWN]) as down_session:
                        for table in drift_tables:
                            write(down_session, "calib", table, range(first, first + missed), ConsistencyLevel.ONE)
                    cluster.start(DOWN)
                    written += missed
                    for node in NODES:
                        nodetool.checked(node, ["disablehandoff"])
                        nodetool.flush(node, "calib")
                    group_copy = {"calib": live_bytes(nodetool, "calib")}
                    per_row = group_copy["calib"]["t00"] / written
                    free = Spans(sets[DOWN])
                    group = f"drift{drift:g}"
                    plans2 = [(t, r, f) for t in (1, 5) for r in (1, 4) for f in drift_fractions]
                    rng.shuffle(plans2)
                    for count, ranges_wanted, fraction in plans2:
                        span = int(RING * fraction)
                        ranges = pieces(free.take(span), span, ranges_wanted)
                        chosen = drift_tables[:count]
                        note_load()
                        outcome = nodetool.repair(COORDINATOR, "calib", ranges, tables=chosen)
                        if not outcome.succeeded:
                            raise RuntimeError(f"repair failed: {outcome.output}")
                        share = span / RING
                        data = sum(group_copy["calib"][t] for t in chosen) * share
                        mismatched = count * missed * per_row * share
                        point = Point(group, outcome.seconds, {"sessions": 1, "tables": count, "ranges": ranges_wanted,
                                                               "bytes": data, "mismatched": mismatched})  # fmt: skip
                        points.append(point)
                        raw["nodetool"].append({**point.as_dict(), "parent_id": outcome.parent_id})
                        print(f"  drift {drift:g}: {count} tables, {ranges_wanted} ranges, {fraction:.2f} of the ring, "
                              f"{mismatched / 2**20:.2f} MiB missed: {outcome.seconds:6.2f}s", flush=True)  # fmt: skip
            # every nodetool command's in-server time, beside its wall time
            with connect(NODES) as reader:
                by_id = {str(r.parent_id): r for r in history(reader, started_at)}
            for entry in raw["nodetool"]:
                row = by_id.get(str(entry["parent_id"]))
                if row is not None and row.finished_at is not None:
                    entry["in_server_seconds"] = (row.finished_at - row.started_at).total_seconds()
        nodetool.close()
    finally:
        cluster.down(purge=True)
        kept = ROOT / ".local" / f"calibrate_terms-{started_at:%Y%m%dT%H%M%S}.raw.json"  # a run that fails keeps them
        kept.parent.mkdir(exist_ok=True)
        kept.write_text(json.dumps(raw, indent=1, default=str) + "\n")
    finished_at = datetime.now(UTC)
    in_server = [
        Point(e["group"], e["in_server_seconds"], e["features"]) for e in raw["nodetool"] if "in_server_seconds" in e
    ]
    report = {
        "date": started_at.strftime("%Y-%m-%d"),
        "started": started_at.isoformat(timespec="seconds"),
        "finished": finished_at.isoformat(timespec="seconds"),
        "commit": measured_with,
        "machine": machine(),
        "load_average_1m": loads,
        "cluster": "local seed cluster, Cassandra 5.0, 3 nodes, NTS dc1: 2, coordinator 127.0.0.4",
        "command": " ".join(sys.argv),
        **fit_report(points, autorepair_points, in_server),
    }
    report.pop("points"), report.pop("autorepair_points")
    write_record(Path(args.out), report, [compact(raw)])
    print(json.dumps(report, indent=1, default=str))
    print(f"written: {args.out}")
    return 0


COLUMNS = ("group", "seconds", "sessions", "tables", "ranges", "bytes", "mismatched", "in_server_seconds")


def compact(raw: dict[str, Any]) -> dict[str, Any]:
    """A run's measurements as rows of `COLUMNS` (AutoRepair's: also keyspace and repair_by_keyspace), for the
    committed record; `expand` reads them back."""

    def row(e: dict[str, Any], *more: Any) -> list[Any]:
        f = e["features"]
        return [e["group"], round(e["seconds"], 6), f["sessions"], f["tables"], f["ranges"], round(f["bytes"]),
                round(f["mismatched"]), e.get("in_server_seconds"), *more]  # fmt: skip

    return {
        "columns": [*COLUMNS, "keyspace / parent_id", "repair_by_keyspace"],
        "nodetool": [row(e, e.get("parent_id")) for e in raw["nodetool"]],
        "autorepair": [row(e, e["keyspace"], e["repair_by_keyspace"]) for e in raw["autorepair"]],
        "sizes": raw["sizes"],
    }


def expand(run: dict[str, Any]) -> dict[str, Any]:
    if "columns" not in run:
        return run

    def entry(r: list[Any]) -> dict[str, Any]:
        e: dict[str, Any] = {"group": r[0], "seconds": r[1], "features": dict(zip(COLUMNS[2:7], r[2:7], strict=True))}
        if r[7] is not None:
            e["in_server_seconds"] = r[7]
        return e

    return {"nodetool": [entry(r) for r in run["nodetool"]], "autorepair": [entry(r) for r in run["autorepair"]]}


def write_record(out: Path, report: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    """The report (indented) and every measurement, one row a line."""
    text = json.dumps(report, indent=1, default=str)
    rows = ",\n".join(
        "  {" + ", ".join(f'"{key}": ' + ("[\n   " + ",\n   ".join(json.dumps(r) for r in value) + "]"
                                          if key in ("nodetool", "autorepair") else json.dumps(value))
                          for key, value in run.items()) + "}"
        for run in runs
    )  # fmt: skip
    out.write_text(text[:-2] + ',\n "measurements": {"runs": [\n' + rows + "\n ]}\n}\n")


def refit(sources: Sequence[Path], out: Path) -> int:
    """The fits of earlier runs recomputed from their measurements, pooled (several runs: each run's groups named
    `rN:` after its place in the list; their dates, commits, machines and loads kept in `runs`)."""
    records = [json.loads(source.read_text()) for source in sources]
    skipped = ("raw", "measurements", "fits", "model", "points", "autorepair_points", "repeat_spread", "runs")
    runs = [run for r in records for run in r.get("runs", [{k: v for k, v in r.items() if k not in skipped}])]
    raws = []
    for record in records:
        raw = record.get("measurements", record.get("raw", record))
        raws.extend(expand(run) for run in raw["runs"]) if "runs" in raw else raws.append(expand(raw))

    def points(key: str, field: str = "seconds") -> list[Point]:
        return [
            Point(f"r{i + 1}:{e['group']}" if len(raws) > 1 else e["group"], e[field], e["features"])
            for i, raw in enumerate(raws)
            for e in raw[key]
            if field in e
        ]

    found = fit_report(points("nodetool"), points("autorepair"), points("nodetool", "in_server_seconds"))
    found.pop("points"), found.pop("autorepair_points")  # in `raw` already
    # the first fit's three terms (calibration.json) and the assumed ones, on these commands
    nodetool = points("nodetool")
    for name, terms in (("first_fit_terms", load_terms()[0]), ("assumed_terms", shipped_terms())):
        predicted = [terms.predict(int(p.features["sessions"]), p.features["bytes"]) for p in nodetool]
        found[f"error_of_{name}"] = errors([Measured(p.group, 1, 0.0, p.seconds) for p in nodetool], predicted)
    report = {**runs[0], "runs": runs, "refitted_with": commit(), **found}
    write_record(out, report, [compact(raw) for raw in raws if "sizes" in raw])
    print(json.dumps(report, indent=1))
    print(f"written: {out}")
    return 0


def markdown(report: dict[str, Any]) -> str:
    """Every fit's terms (+- standard error) and relative errors, as the tables in docs/benchmarks.md."""

    def term(name: str, value: float, standard: float | None) -> str:
        spread = "" if standard is None else f" +- {standard * 1000:.1f}"
        if name in ("validation", "streaming"):
            rate = f"{1 / value / 2**20:.1f} MiB/s" if value > 0 else "not positive"
            spread = "" if standard is None else f" +- {standard / value:.0%}" if value > 0 else f" +- {standard:.1e}"
            return f"{value * 1e9:.2f} ns/B{spread} (= {rate})"
        return f"{value * 1000:.1f}{spread} ms"

    def errors_(found: dict[str, Any]) -> str:
        if not isinstance(found, dict) or not found:
            return f"{found}"
        return " / ".join(f"{found[k]:.0%}" for k in ("rms_relative", "median_relative", "max_relative"))

    lines = ["| fit | points | terms (+- standard error) | error of the fit (RMS / median / max) | "
             "leave one group out |", "|---|---|---|---|---|"]  # fmt: skip
    for name, fit in report["fits"].items():
        if "terms" not in fit:
            lines.append(f"| {name} | | not fitted: {fit.get('not_fitted')} | | |")
            continue
        shown = ", ".join(f"{k} {term(k, v, fit['standard_error'][k])}" for k, v in fit["terms"].items())
        lines.append(f"| {name} | {fit['points']} | {shown} | {errors_(fit['error']['fit'])} | "
                     f"{errors_(fit['error']['leave_one_group_out'])} |")  # fmt: skip
    model = report.get("model", {})
    if "terms" in model:
        shown = ", ".join(f"{k} {term(k, v, model['standard_error'].get(k))}" for k, v in model["terms"].items())
        error = model["error"]
        lines.append(f"| **the simulator's** ({model['from']}, dropped as negative: "
                     f"{', '.join(model['dropped_negative']) or 'none'}) | | {shown} | "
                     f"{errors_(error['fit'])} | {errors_(error['leave_one_group_out'])} |")  # fmt: skip
        if "in_process" in model:
            found = model["in_process"]
            error, tasks = found["error"], report["fits"].get("autorepair_in_process", {}).get("points", "")
            lines.append(f"| **in-process overhead** (AutoRepair tasks, the simulator's other terms held) | "
                         f"{tasks} | {found['in_process_overhead'] * 1000:.1f} ms | "
                         f"{errors_(error['fit'])} | {errors_(error['leave_one_group_out'])} |")  # fmt: skip
    for name in ("first_fit_terms", "assumed_terms"):
        if f"error_of_{name}" in report:
            lines.append(f"| {name.replace('_', ' ')} (command, session, per byte) on the same commands | | | "
                         f"{errors_(report[f'error_of_{name}'])} | |")  # fmt: skip
    spread = ", ".join(f"{k} {v:.2f}x" for k, v in report.get("repeat_spread", {}).items() if v == v)
    lines.append(f"\nRepeats (median over distinct commands of slowest / fastest): {spread}.")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
