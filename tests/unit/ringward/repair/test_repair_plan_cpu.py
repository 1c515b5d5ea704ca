"""The plan task's CPU work removed at fleet size (issue 40) leaves the plan as it was: the same segments, with the
same estimated bytes, due and held back in the same order.

The references below are the code before the change (main at 223791f), kept here verbatim as the oracle:
`select_due` read each record three times (`due_segments`, `retries_exhausted`, `backlog_first`) and
`select_due_by_type` re-keyed the full history; `plan_segments` estimated every piece's bytes a second time
after the size splitter had estimated it. At fleet size `benchmarks/fleet/plan_task.py --baseline REV` compares
the stored plans' digests of both trees."""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone

import pytest
from ringward.placement import replica_map
from ringward.repair import (
    DueRecord,
    DueSelection,
    RepairUnit,
    Segment,
    SegmentRecord,
    parse_config,
    plan_segments,
    select_due,
    select_due_by_type,
)
from ringward.repair._arcs import split_evenly, unrolled
from ringward.repair._config import RepairConfig, SizeSplitter
from ringward.repair._estimates import NodeSizeEstimate, SizeEstimate, SizeIndex, _node_pieces
from ringward.repair._planning import _Budget, _pieces_needed, _split_by_size
from ringward.repair._run import GcGrace, _grace_seconds
from ringward.repair._state import due_segments, retries_exhausted
from ringward.repair._types import history_key
from ringward.replication import Replication
from ringward.ring import MIN_TOKEN, Node, Ring, TokenRange

NOW = datetime(2026, 11, 28, 2, 0, tzinfo=UTC)
RUN = "tonight"
NODES = [f"n{i}" for i in range(10)]
GC_GRACE: GcGrace = {"ks0": {"a": 864_000, "b": 259_200}, "ks1": {"c": 864_000}, "ks2": {"d": 432_000}}
UNITS = [("ks0", ("a", "b")), ("ks0", ("a",)), ("ks1", ()), ("ks2", ("d",)), ("ks3", ())]


# -- the references: the code before the change --------------------------------------------------------------


def reference_backlog_first(
    due: Sequence[Segment],
    records: Mapping[str, SegmentRecord],
    now: datetime,
    *,
    gc_grace: GcGrace | None = None,
    alarm_share: float = 0.8,
) -> tuple[list[Segment], list[Segment]]:
    grace_of = gc_grace or {}
    never = datetime.min.replace(tzinfo=now.tzinfo)
    per_unit: dict[tuple[str, tuple[str, ...]], tuple[timedelta, datetime]] = {}
    urgent: list[tuple[datetime, Segment]] = []
    routine: list[tuple[datetime, Segment]] = []
    get = records.get
    for segment in due:
        record = get(segment.segment_id)
        last = None if record is None else record.last_success
        if last is None:
            urgent.append((never, segment))
            continue
        unit = (segment.keyspace, segment.tables)
        known = per_unit.get(unit)
        if known is None:
            grace = timedelta(seconds=_grace_seconds(segment, grace_of))
            known = per_unit[unit] = (grace, now - grace * alarm_share)
        (urgent if last <= known[1] else routine).append((last + known[0], segment))
    urgent.sort(key=lambda entry: entry[0])
    routine.sort(key=lambda entry: entry[0])
    run = [segment for _, segment in urgent]
    if not urgent:
        return [segment for _, segment in routine], []
    backlog_nodes = {node for segment in run for node in segment.replicas}
    held: list[Segment] = []
    for _, segment in routine:
        (held if not backlog_nodes.isdisjoint(segment.replicas) else run).append(segment)
    return run, held


def reference_select_due(
    segments: Sequence[Segment],
    records: Mapping[str, SegmentRecord],
    *,
    run_id: str,
    now: datetime,
    config: RepairConfig,
    gc_grace: GcGrace | None = None,
) -> DueSelection:
    if not config.enabled:
        return DueSelection((), tuple(segments), ())
    due = due_segments(segments, records, now, config.min_repair_interval)
    exhausted = tuple(s for s in due if retries_exhausted(records.get(s.segment_id), run_id, config.max_retries))
    if exhausted:
        gone = {s.segment_id for s in exhausted}
        due = [s for s in due if s.segment_id not in gone]
    due, held = reference_backlog_first(due, records, now, gc_grace=gc_grace, alarm_share=config.gc_grace_alarm)
    chosen = {s.segment_id for s in due} | {s.segment_id for s in exhausted}
    not_due = tuple(s for s in segments if s.segment_id not in chosen)
    return DueSelection(tuple(due), not_due, exhausted, tuple(held))


# -- a night's history, drawn ---------------------------------------------------------------------------------


def night(seed: int, backlog: bool) -> tuple[list[Segment], dict[str, SegmentRecord]]:
    """Segments of several units (gc_grace of 3, 5 and 10 days) and a history with every case: never repaired
    (only when `backlog`), past the alarm point (only when `backlog`), merely due, not due, retries used up in this
    run, attempts of an earlier run, a failed first attempt. Many share a last success (ties keep plan order)."""
    rng = random.Random(seed)
    segments: list[Segment] = []
    records: dict[str, SegmentRecord] = {}
    for index in range(400):
        keyspace, tables = rng.choice(UNITS)
        segment = Segment(keyspace, tables, TokenRange(index * 10, index * 10 + 7), tuple(rng.sample(NODES, 3)))
        segments.append(segment)
        sid = segment.segment_id
        kind = rng.choice(["never", "late", "due", "due", "due", "recent", "recent", "exhausted", "earlier", "failed"])
        if not backlog and kind in ("never", "late", "failed"):
            kind = "due"
        # Repeated ages (ties); 60 h is past the alarm point of the 3-day gc_grace: backlog.
        hours = rng.choice([26, 30, 30, 48, 60] if backlog else [26, 30, 30, 48])
        if kind == "never":
            continue
        if kind == "late":  # 9.5 days of 10 (or all of 3 or 5) gone: past gc_grace_alarm
            records[sid] = SegmentRecord(sid, last_success=NOW - timedelta(hours=228))
        elif kind == "recent":
            records[sid] = SegmentRecord(sid, last_success=NOW - timedelta(hours=rng.choice([1, 5, 23])))
        elif kind == "exhausted":
            records[sid] = SegmentRecord(sid, last_success=NOW - timedelta(hours=hours), attempts=4, run_id=RUN)
        elif kind == "earlier":
            records[sid] = SegmentRecord(sid, last_success=NOW - timedelta(hours=hours), attempts=9, run_id="past")
        elif kind == "failed":  # never succeeded: backlog, with its retries of tonight used up or not
            records[sid] = SegmentRecord(sid, attempts=rng.choice([1, 4]), run_id=RUN)
        else:
            records[sid] = SegmentRecord(sid, last_success=NOW - timedelta(hours=hours))
    return segments, records


CONFIG = parse_config({"max_retries": 3})


@pytest.mark.parametrize("backlog", [True, False], ids=["with-backlog", "no-backlog"])
@pytest.mark.parametrize("seed", range(12))
def test_select_due_chooses_and_orders_as_before(seed: int, backlog: bool) -> None:
    segments, records = night(seed, backlog)
    expected = reference_select_due(segments, records, run_id=RUN, now=NOW, config=CONFIG, gc_grace=GC_GRACE)
    # The drawn night exercises what the comparison is about: due, not due, exhausted, and held back.
    assert expected.due and expected.not_due and expected.exhausted
    assert bool(expected.held_back) is backlog
    assert select_due(segments, records, run_id=RUN, now=NOW, config=CONFIG, gc_grace=GC_GRACE) == expected


def test_select_due_as_before_without_gc_grace_and_when_disabled() -> None:
    segments, records = night(99, backlog=True)
    expected = reference_select_due(segments, records, run_id=RUN, now=NOW, config=CONFIG)
    assert expected.held_back
    assert select_due(segments, records, run_id=RUN, now=NOW, config=CONFIG) == expected
    off = parse_config({"enabled": False})
    assert select_due(segments, records, run_id=RUN, now=NOW, config=off) == DueSelection((), tuple(segments), ())


@pytest.mark.parametrize("seed", range(4))
def test_select_due_by_type_reads_the_full_history_as_before(seed: int) -> None:
    segments, full = night(seed, backlog=True)
    # The store hands back records keyed by `history_key`: the full history by segment id, beside other types'
    # keys (which the full type must not read) and records of segments not planned tonight.
    keyed: dict[str, SegmentRecord] = dict(full)
    for segment in segments[::3]:
        keyed[history_key(segment.segment_id, "incremental")] = SegmentRecord(segment.segment_id, last_success=NOW)
    stray = Segment("ks9", (), TokenRange(1, 2), ("n0",))
    keyed[stray.segment_id] = SegmentRecord(stray.segment_id, attempts=9, run_id=RUN)
    own = {s.segment_id: r for s in segments if (r := keyed.get(history_key(s.segment_id, "full"))) is not None}
    expected = reference_select_due(segments, own, run_id=RUN, now=NOW, config=CONFIG, gc_grace=GC_GRACE)
    (found,) = select_due_by_type(segments, keyed, run_id=RUN, now=NOW, config=CONFIG, types=["full"],
                                  gc_grace=GC_GRACE)  # fmt: skip
    assert found.repair_type == "full"
    assert found.selection == expected


def test_select_due_by_type_rekeys_other_types_history_as_before() -> None:
    segments, full = night(5, backlog=True)
    config = parse_config({"max_retries": 3, "repair_types": {"incremental": {"enabled": True}}})
    keyed = {history_key(sid, "incremental"): record for sid, record in full.items()}
    (found,) = select_due_by_type(segments, keyed, run_id=RUN, now=NOW, config=config, types=["incremental"],
                                  gc_grace=GC_GRACE)  # fmt: skip
    expected = reference_select_due(segments, full, run_id=RUN, now=NOW, config=config.for_type("incremental"),
                                    gc_grace=GC_GRACE)  # fmt: skip
    assert found.repair_type == "incremental" and expected.held_back
    assert found.selection == expected


# -- the size splitter's bytes --------------------------------------------------------------------------------


def skewed_ring(seed: int) -> Ring:
    rng = random.Random(seed)
    return Ring.of(
        Node(f"10.0.0.{n + 1}", f"dc{n % 2 + 1}", f"r{n % 3}",
             tuple(rng.randrange(MIN_TOKEN + 1, 2**63) for _ in range(8)))
        for n in range(12)
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(3))
def test_size_splitter_segments_carry_the_estimate_of_their_own_range(seed: int) -> None:
    ring = skewed_ring(seed)
    rng = random.Random(seed)
    # Node totals from 1 GB to 400 GB: most ranges fit one segment of 20 GB, the big nodes' are cut in pieces.
    rows = [
        NodeSizeEstimate("ks", table, node.address, 10**6, rng.choice([10**9, 10**9, 4 * 10**11]))
        for node in ring.nodes
        for table in ("t1", "t2")
    ]
    config = parse_config(
        {"merge_ranges_with_same_replicas": False, "splitter": {"type": "size", "max_bytes_per_segment": 20 * 10**9}}
    )
    nts = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2, "dc2": 2})
    entries = replica_map(ring, nts).entries()
    plan = plan_segments(ring, entries, RepairUnit("ks"), config, rows)
    sizes = SizeIndex(rows, "ks", (), ring)
    assert len(plan.segments) > len(ring.ranges()) + 1  # some ranges were cut (and the wrapping one unwrapped)
    assert any(s.range.end == MIN_TOKEN or s.range.start == MIN_TOKEN for s in plan.segments)
    # Before the change each piece's bytes were estimated again: round(estimate(piece)[0]).
    assert [s.estimated_bytes for s in plan.segments] == [round(sizes.estimate(s.range)[0]) for s in plan.segments]
    assert all(s.estimated_bytes is not None and s.estimated_bytes <= 20 * 10**9 for s in plan.segments)


# -- the density index, built from node totals ---------------------------------------------------------------
# The reference: `SizeIndex` on node rows before the index took the ring's shares once per ring (`Ring.primary_shares`)
# and summed contiguous pieces at once (669b5d6), kept verbatim for the node rows.


class ReferenceNodeIndex:
    def __init__(self, rows: Sequence[NodeSizeEstimate], keyspace: str, ring: Ring) -> None:
        data: dict[str, float] = {}
        partitions: dict[str, float] = {}
        for row in rows:
            if row.keyspace == keyspace:
                data[row.node] = data.get(row.node, 0.0) + row.data_bytes
                partitions[row.node] = partitions.get(row.node, 0.0) + row.partitions_count
        owned: dict[str, int] = {}
        ranges = ring.ranges()
        owner = ring.token_owner
        for token_range in ranges:
            address = owner[token_range.end].address
            if address in data:
                owned[address] = owned.get(address, 0) + token_range.width()
        pieces: list[tuple[int, int, float, float]] = []
        for token_range in ranges:
            address = owner[token_range.end].address
            if address not in owned:
                continue
            width = token_range.width()
            share = width / owned[address]
            range_data, range_partitions = data[address] * share, partitions[address] * share
            if token_range.wraps:
                (low, high), rest = unrolled(token_range)
                first_data, first_partitions = (
                    range_data * (high - low) / width,
                    range_partitions * (high - low) / width,
                )
                pieces.append((low, high, first_data, first_partitions))
                pieces.append((rest[0], rest[1], range_data - first_data, range_partitions - first_partitions))
            else:
                pieces.append((token_range.start, token_range.end, range_data, range_partitions))
        bounds: list[int] = []
        total_bytes: list[float] = []
        total_partitions: list[float] = []
        bytes_rate: list[float] = []
        partitions_rate: list[float] = []
        summed: float = 0
        counted: float = 0
        for low, high, piece_bytes, piece_partitions in sorted(pieces):
            if not bounds or bounds[-1] != low:
                if bounds:
                    bytes_rate.append(0.0)
                    partitions_rate.append(0.0)
                bounds.append(low)
                total_bytes.append(summed)
                total_partitions.append(counted)
            width = high - low
            bytes_rate.append(piece_bytes / width)
            partitions_rate.append(piece_partitions / width)
            summed += piece_bytes
            counted += piece_partitions
            bounds.append(high)
            total_bytes.append(summed)
            total_partitions.append(counted)
        bytes_rate.append(0.0)
        partitions_rate.append(0.0)
        self.bounds, self.totals, self.rates = bounds, (total_bytes, total_partitions), (bytes_rate, partitions_rate)

    def _integral(self, position: int) -> tuple[float, float]:
        index = bisect.bisect_right(self.bounds, position) - 1
        if index < 0:
            return 0.0, 0.0
        offset = position - self.bounds[index]
        if offset == 0:
            return self.totals[0][index], self.totals[1][index]
        return (self.totals[0][index] + offset * self.rates[0][index],
                self.totals[1][index] + offset * self.rates[1][index])  # fmt: skip

    def estimate(self, token_range: TokenRange) -> tuple[float, float]:
        total_bytes = total_partitions = 0.0
        if not self.bounds:
            return total_bytes, total_partitions
        for low, high in unrolled(token_range):
            high_bytes, high_partitions = self._integral(high)
            low_bytes, low_partitions = self._integral(low)
            total_bytes += high_bytes - low_bytes
            total_partitions += high_partitions - low_partitions
        return total_bytes, total_partitions


@pytest.mark.parametrize("every_node", [True, False], ids=["every-node-reports", "some-nodes-silent"])
@pytest.mark.parametrize("seed", range(3))
def test_the_density_index_estimates_every_range_as_before(seed: int, every_node: bool) -> None:
    ring = skewed_ring(seed)
    rng = random.Random(seed)
    reporting = ring.nodes if every_node else ring.nodes[::2]
    # Totals that are not whole multiples of anything: floating-point sums must come out bit for bit the same.
    rows = [
        NodeSizeEstimate("ks", table, node.address, rng.randrange(1, 10**7), rng.randrange(10**8, 4 * 10**11))
        for node in reporting
        for table in ("t1", "t2")
    ] + [NodeSizeEstimate("other", "t", ring.nodes[0].address, 5, 5)]
    sizes, reference = SizeIndex(rows, "ks", (), ring), ReferenceNodeIndex(rows, "ks", ring)
    ranges = ring.ranges()
    assert ranges[0].wraps  # the wrap-around range is split in two pieces of the index
    drawn = [TokenRange(rng.randrange(MIN_TOKEN, 2**63), rng.randrange(MIN_TOKEN, 2**63)) for _ in range(300)]
    assert any(r.wraps for r in drawn) and any(not r.wraps for r in drawn)
    pieces = [piece for r in ranges for piece in split_evenly(r, 3)]
    checked = [*ranges, *drawn, *pieces, TokenRange(MIN_TOKEN, ranges[1].end), TokenRange(ranges[-1].start, MIN_TOKEN)]
    assert [sizes.estimate(r) for r in checked] == [reference.estimate(r) for r in checked]
    assert sum(sizes.estimate(r)[0] for r in ranges) > 0
    # Many at once (what `plan_segments` asks): the same numbers, bit for bit, in order.
    assert [tuple(map(float.hex, e)) for e in sizes.estimates(checked)] == [
        tuple(map(float.hex, reference.estimate(r))) for r in checked
    ]
    assert SizeIndex([], "ks", (), ring).estimates(checked[:5]) == [(0.0, 0.0)] * 5


@pytest.mark.parametrize("every_node", [True, False], ids=["every-node", "one-silent"])
@pytest.mark.parametrize("seed", range(3))
def test_the_ring_estimates_are_the_estimates_of_the_ring_ranges(seed: int, every_node: bool) -> None:
    """`SizeIndex.ring_estimates`: each ring range's (bytes, partitions) as `estimates` gives them, bit for bit,
    when the index is built on the ring's bounds; None otherwise (a node silent, or another ring)."""
    ring = skewed_ring(seed)
    rng = random.Random(seed)
    nodes = ring.nodes if every_node else ring.nodes[1:]
    rows = [NodeSizeEstimate("ks", table, node.address, rng.randrange(1, 10**7), rng.randrange(1, 10**12))
            for node in nodes for table in ("t1", "t2")]  # fmt: skip
    sizes = SizeIndex(rows, "ks", (), ring)
    columns = sizes.ring_estimates(ring)
    if not every_node:
        assert columns is None
        return
    assert columns is not None
    expected = sizes.estimates(ring.ranges())
    assert [(float.hex(b), float.hex(p)) for b, p in zip(*columns, strict=True)] == [
        (float.hex(b), float.hex(p)) for b, p in expected
    ]
    assert sizes.ring_estimates(skewed_ring(seed + 10)) is None


def reference_size_segments(
    ring: Ring, entries: Sequence[tuple[TokenRange, tuple[str, ...]]], unit: RepairUnit, config: RepairConfig,
    rows: Sequence[NodeSizeEstimate],
) -> list[Segment]:  # fmt: skip
    """`plan_segments`' size splitter loop before the estimates were taken at once (a800608), verbatim."""
    sizes = SizeIndex(rows, unit.keyspace, unit.tables, ring)
    splitter = config.splitter
    assert isinstance(splitter, SizeSplitter)
    budget = _Budget(10**9, config)
    segments = []
    for token_range, replicas in entries:
        data = sizes.estimate(token_range)
        if _pieces_needed(data, splitter) == 1 or token_range.width() == 1:
            fitted: Sequence[tuple[TokenRange, float]] = ((token_range, data[0]),)
        else:
            fitted = _split_by_size(token_range, splitter, sizes, budget)
        for split, data_bytes in fitted:
            if split.start < split.end:
                segments.append(Segment(unit.keyspace, unit.tables, split, replicas, round(data_bytes)))
            else:
                for piece in split.unwrap():
                    estimated = None if sizes.empty else round(sizes.estimate(piece)[0])
                    segments.append(Segment(unit.keyspace, unit.tables, piece, replicas, estimated))
    return segments


@pytest.mark.parametrize("limit", ["bytes", "partitions", "both", "at-a-range", "none-cut", "at-the-largest"])
@pytest.mark.parametrize("seed", range(3))
def test_the_size_splitter_cuts_and_estimates_as_before(seed: int, limit: str) -> None:
    """The ranges' estimates taken at once and the fit decided by the quotients: the same segments with the same
    bytes as range by range before, on ranges that fit, that are cut, that wrap, and one at the limit. With every
    range but the wrap-around one fitting (`none-cut`, and `at-the-largest`: the limit is the largest of those
    ranges' estimates), they are made at once from the ring's estimates (`SizeIndex.ring_estimates`)."""
    ring = skewed_ring(seed)
    rng = random.Random(seed)
    rows = [
        NodeSizeEstimate("ks", table, node.address, rng.choice([10**5, 3 * 10**6]), rng.choice([10**9, 4 * 10**11]))
        for node in ring.nodes
        for table in ("t1", "t2")
    ]
    entries = replica_map(ring, Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2, "dc2": 2})).entries()
    most_bytes, most_partitions = 20 * 10**9, 2**20
    if limit == "at-a-range":  # one range's own estimate, rounded up, is the limit: it fits, uncut
        most_bytes = math.ceil(SizeIndex(rows, "ks", (), ring).estimate(entries[5][0])[0])
        most_partitions = 2**40
    splitter: dict[str, object] = {"type": "size", "max_bytes_per_segment": most_bytes,
                                   "max_partitions_per_segment": most_partitions}  # fmt: skip
    if limit == "bytes":
        splitter["max_partitions_per_segment"] = 2**40
    elif limit == "partitions":
        splitter["max_bytes_per_segment"] = 2**60
    elif limit == "none-cut":
        splitter.update(max_bytes_per_segment=2**60, max_partitions_per_segment=2**40)
    elif limit == "at-the-largest":  # the largest range but the wrap-around one is exactly at the limit: it fits
        estimates = SizeIndex(rows, "ks", (), ring).estimates([token_range for token_range, _ in entries[1:]])
        splitter.update(max_bytes_per_segment=math.ceil(max(e[0] for e in estimates)),
                        max_partitions_per_segment=math.ceil(max(e[1] for e in estimates)))  # fmt: skip
    config = parse_config({"merge_ranges_with_same_replicas": False, "splitter": splitter})
    plan = plan_segments(ring, entries, RepairUnit("ks"), config, rows)
    expected = reference_size_segments(ring, entries, RepairUnit("ks"), config, rows)
    if limit in ("none-cut", "at-the-largest"):  # one segment a range, the wrapping one unwrapped (or cut)
        assert len(expected) >= len(entries) + 1
        assert [s.range for s in expected[-(len(entries) - 1) :]] == [r for r, _ in entries[1:]]
    else:
        assert len(expected) > len(entries) + 1  # some ranges were cut (and the wrapping one unwrapped)
    assert list(plan.segments) == expected
    assert [s.estimated_bytes for s in plan.segments] == [s.estimated_bytes for s in expected]
    if limit == "at-a-range":
        assert sum(1 for s in plan.segments if s.range == entries[5][0]) == 1


# -- the plan task's lean read of the history ----------------------------------------------------------------


@pytest.mark.parametrize("backlog", [True, False], ids=["with-backlog", "no-backlog"])
@pytest.mark.parametrize("seed", range(6))
def test_the_due_cells_of_the_records_choose_and_order_as_the_whole_records_did(seed: int, backlog: bool) -> None:
    """The plan task reads `DueRecord`s (last success, attempts, run id), not whole records: the selection is the
    one the whole records made before the change, on every drawn case (retries of this run and of earlier ones,
    never succeeded, ties)."""
    segments, records = night(seed, backlog)
    lean = {sid: DueRecord(r.last_success, r.attempts, r.run_id) for sid, r in records.items()}
    expected = reference_select_due(segments, records, run_id=RUN, now=NOW, config=CONFIG, gc_grace=GC_GRACE)
    assert expected.due and expected.not_due and expected.exhausted and bool(expected.held_back) is backlog
    assert select_due(segments, lean, run_id=RUN, now=NOW, config=CONFIG, gc_grace=GC_GRACE) == expected
    (found,) = select_due_by_type(segments, lean, run_id=RUN, now=NOW, config=CONFIG, types=["full"],
                                  gc_grace=GC_GRACE)  # fmt: skip
    assert found.selection == expected


# -- the records by position: no segment id computed ----------------------------------------------------------


def by_position(segments: Sequence[Segment], records: Mapping[str, SegmentRecord]) -> list[DueRecord | None]:
    """`records` as `SegmentHistory.due_records_in_order` hands them to the plan task: the i-th is segment i's."""
    lean = [records.get(s.segment_id) for s in segments]
    return [None if r is None else DueRecord(r.last_success, r.attempts, r.run_id) for r in lean]


@pytest.mark.parametrize("backlog", [True, False], ids=["with-backlog", "no-backlog"])
@pytest.mark.parametrize("seed", range(8))
def test_records_by_position_choose_and_order_as_records_by_id(
    seed: int, backlog: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan task reads the records by position (`due_records_in_order`): the same selection, in the same
    order, as the records keyed by segment id before the change, on every drawn case; and no segment id is
    computed on the way (a sha256 each, millions a fleet night)."""
    segments, records = night(seed, backlog)
    expected = reference_select_due(segments, records, run_id=RUN, now=NOW, config=CONFIG, gc_grace=GC_GRACE)
    assert expected.due and expected.not_due and expected.exhausted and bool(expected.held_back) is backlog
    lean = by_position(segments, records)
    fresh = [Segment(s.keyspace, s.tables, s.range, s.replicas) for s in segments]  # no id computed yet

    def no_ids(*_: object) -> str:
        raise AssertionError("a segment id was computed")

    monkeypatch.setattr("ringward.repair._segments._segment_id", no_ids)
    found = select_due(fresh, lean, run_id=RUN, now=NOW, config=CONFIG, gc_grace=GC_GRACE)
    (typed,) = select_due_by_type(fresh, lean, run_id=RUN, now=NOW, config=CONFIG, types=["full"],
                                  gc_grace=GC_GRACE)  # fmt: skip
    monkeypatch.undo()
    assert found == expected
    assert typed.selection == expected


def test_records_by_position_are_the_named_types_own() -> None:
    """A type other than full reads its own history by position as it is (no re-keying), and chooses as the
    records keyed by `history_key` did; records by position name one type, and one record per segment."""
    segments, full = night(5, backlog=True)
    config = parse_config({"max_retries": 3, "repair_types": {"incremental": {"enabled": True}}})
    keyed = {history_key(sid, "incremental"): record for sid, record in full.items()}
    (before,) = select_due_by_type(segments, keyed, run_id=RUN, now=NOW, config=config, types=["incremental"],
                                   gc_grace=GC_GRACE)  # fmt: skip
    (found,) = select_due_by_type(segments, by_position(segments, full), run_id=RUN, now=NOW, config=config,
                                  types=["incremental"], gc_grace=GC_GRACE)  # fmt: skip
    assert found == before and found.selection.held_back
    with pytest.raises(ValueError, match="one type"):
        select_due_by_type(segments, by_position(segments, full), run_id=RUN, now=NOW, config=config)
    with pytest.raises(ValueError, match="by position"):
        select_due(segments, by_position(segments, full)[1:], run_id=RUN, now=NOW, config=CONFIG)


def test_a_steady_night_by_position_runs_every_segment_and_leaves_none_not_due() -> None:
    """Every segment due (the steady night at fleet size): all run, in plan order (equal last successes), none is
    left not due; one segment repaired within the interval is the only one not due."""
    segments = [Segment(keyspace, tables, TokenRange(i * 10, i * 10 + 5), (NODES[i % 10], NODES[(i + 1) % 10]))
                for i, (keyspace, tables) in enumerate(UNITS * 20)]  # fmt: skip
    old = DueRecord(NOW - timedelta(hours=25), 1, "seeded")
    steady = select_due(segments, [old] * len(segments), run_id=RUN, now=NOW, config=CONFIG, gc_grace=GC_GRACE)
    records = {s.segment_id: SegmentRecord(s.segment_id, last_success=old.last_success) for s in segments}
    assert steady == reference_select_due(segments, records, run_id=RUN, now=NOW, config=CONFIG, gc_grace=GC_GRACE)
    assert steady.not_due == () and len(steady.due) == len(segments)
    lean: list[DueRecord | None] = [old] * len(segments)
    lean[7] = DueRecord(NOW - timedelta(hours=1), 1, "seeded")
    one_recent = select_due(segments, lean, run_id=RUN, now=NOW, config=CONFIG, gc_grace=GC_GRACE)
    assert one_recent.not_due == (segments[7],) and segments[7] not in one_recent.due


@pytest.mark.parametrize("tokens", [8, 1])
@pytest.mark.parametrize("seed", range(3))
def test_the_density_index_of_a_whole_ring_is_built_on_the_rings_bounds_as_from_sorted_pieces(
    seed: int, tokens: int
) -> None:
    """Every node reporting (the nightly plan): the index is built on the ring's own bounds and widths
    (`Ring.unrolled_bounds`, once per ring), with the same bounds, sums and rates, bit for bit, as sorting the
    node pieces and building from them; a silent node, or range rows beside the node rows, take the general way."""
    rng = random.Random(seed)
    drawn = [tuple(rng.randrange(MIN_TOKEN + 1, 2**63) for _ in range(tokens)) for _ in range(6)]
    ring = Ring.of(Node(f"10.0.0.{n + 1}", f"dc{n % 2 + 1}", "r1", own) for n, own in enumerate(drawn))
    rows = [
        NodeSizeEstimate("ks", table, node.address, rng.randrange(1, 10**7), rng.randrange(10**8, 4 * 10**11))
        for node in ring.nodes
        for table in ("t1", "t2")
    ]

    def hexed(index: SizeIndex) -> tuple[object, ...]:
        (data, data_rate), (partitions, partitions_rate) = index._bytes, index._partitions
        return (list(index._bounds), *([float(x).hex() for x in column] for column in (data, data_rate, partitions,
                                                                                       partitions_rate)))  # fmt: skip

    general = SizeIndex([], "ks", ())
    general._build(sorted(_node_pieces(rows, ring)))
    fast = SizeIndex(rows, "ks", (), ring)
    assert hexed(fast) == hexed(general)
    assert fast._bounds == list(ring.unrolled_bounds[0])
    silent = [row for row in rows if row.node != ring.nodes[0].address]
    assert not SizeIndex.__new__(SizeIndex)._build_from_ring(silent, ring)
    ranged = SizeIndex([*rows, SizeEstimate("ks", "t1", 0, 10, 5, 5)], "ks", (), ring)
    assert ranged._bounds != fast._bounds


# -- due selection at C speed --------------------------------------------------------------------------------


@pytest.mark.parametrize("clock", ["utc", "fixed-offset", "naive", "daylight-saving"])
@pytest.mark.parametrize("seed", range(6))
def test_select_due_at_once_chooses_and_orders_as_record_by_record(seed: int, clock: str) -> None:
    """`select_due` sorts by position at C speed (`_select_due_at_once`): the same selection as the code before the
    change, on every drawn case, with the clock in UTC, at a fixed offset or naive; a clock with daylight saving
    time (where `now - interval` is not the cutoff of `now - last < interval`) goes record by record."""
    import dataclasses
    from zoneinfo import ZoneInfo

    from ringward.repair._run import _select_due_at_once

    segments, records = night(seed, backlog=seed % 2 == 0)
    now = {
        "utc": NOW,
        "fixed-offset": NOW.astimezone(timezone(timedelta(hours=5, minutes=30))),
        "naive": NOW.replace(tzinfo=None),
        "daylight-saving": NOW.astimezone(ZoneInfo("Europe/Berlin")),
    }[clock]
    if clock == "naive":
        records = {sid: dataclasses.replace(r, last_success=r.last_success and r.last_success.replace(tzinfo=None))
                   for sid, r in records.items()}  # fmt: skip
    expected = reference_select_due(segments, records, run_id=RUN, now=now, config=CONFIG, gc_grace=GC_GRACE)
    assert select_due(segments, records, run_id=RUN, now=now, config=CONFIG, gc_grace=GC_GRACE) == expected
    lean = by_position(segments, records)
    assert select_due(segments, lean, run_id=RUN, now=now, config=CONFIG, gc_grace=GC_GRACE) == expected
    at_once = _select_due_at_once(segments, lean, RUN, now, CONFIG, GC_GRACE)
    assert (at_once is None) is (clock == "daylight-saving")


@pytest.mark.parametrize("grace", [0, -60], ids=["zero", "negative"])
def test_select_due_with_a_gc_grace_of_zero_or_below_as_before(grace: int) -> None:
    """gc_grace 0 makes a deadline the last success itself; below 0 a deadline could come before a never-repaired
    segment's (then record by record): the same selection as before either way."""
    from ringward.repair._run import _select_due_at_once

    segments, records = night(7, backlog=True)
    gc_grace = {**GC_GRACE, "ks2": {"d": grace}}
    expected = reference_select_due(segments, records, run_id=RUN, now=NOW, config=CONFIG, gc_grace=gc_grace)
    lean = by_position(segments, records)
    assert select_due(segments, lean, run_id=RUN, now=NOW, config=CONFIG, gc_grace=gc_grace) == expected
    assert (_select_due_at_once(segments, lean, RUN, NOW, CONFIG, gc_grace) is None) is (grace < 0)
