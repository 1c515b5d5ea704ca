"""The refit of the duration model (issue 40): the least-squares fit of any linear terms, the per-table, per-range,
streaming and in-process pricing, and `DurationModel.calibrated()` reading the refit."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest
from ringward.repair import RepairCommand, Segment
from ringward.ring import MIN_TOKEN, TokenRange
from ringward_fleetsim import DurationModel, FleetSpec, SimCluster, SimNodetool, run_cep37
from ringward_fleetsim.calibration import (
    NODETOOL_TERMS,
    Point,
    choose_model,
    fit_linear,
    fit_report,
    held_out,
    in_process_overhead,
    load_model,
    nonnegative_fit,
)

MiB = 2**20
TRUE = {"command": 0.2, "session": 0.15, "table": 0.04, "range": 0.003, "validation": 1 / (50 * MiB),
        "streaming": 1 / (10 * MiB)}  # fmt: skip


def commands(noise: float = 0.0, seed: int = 1, additive: float = 0.0) -> list[Point]:
    rng = random.Random(seed)
    found = []
    for group, scale in (("small", 1), ("medium", 4), ("large", 16)):
        for sessions in (1, 2):
            for tables in (1, 5, 20):
                for ranges in (1, 4, 16):
                    features = {"sessions": sessions, "tables": tables, "ranges": max(ranges, sessions),
                                "bytes": scale * tables * MiB * rng.uniform(0.5, 1.5),
                                "mismatched": scale * MiB * rng.random()}  # fmt: skip
                    seconds = (TRUE["command"] + sessions * (TRUE["session"] + tables * TRUE["table"])
                               + features["ranges"] * tables * TRUE["range"] + features["bytes"] * TRUE["validation"]
                               + features["mismatched"] * TRUE["streaming"])  # fmt: skip
                    seconds = seconds * (1 + noise * rng.gauss(0, 1)) + additive * rng.gauss(0, 1)
                    found.append(Point(group, seconds, features))
    return found


def test_the_linear_fit_recovers_the_terms_that_made_the_measurements() -> None:
    values, standard = fit_linear(commands(), NODETOOL_TERMS)
    for term, value in TRUE.items():
        assert values[term] == pytest.approx(value, rel=1e-6)
        assert standard[term] == pytest.approx(0, abs=1e-9 * value + 1e-12)  # exact data: no spread
    loo = held_out(commands(), NODETOOL_TERMS)
    assert loo["max_relative"] < 1e-6


def test_noisy_measurements_give_terms_within_their_standard_errors_and_a_held_out_error() -> None:
    # equal noise on every command (what the standard errors of least squares assume)
    values, standard = fit_linear(commands(additive=0.05), NODETOOL_TERMS)
    for term in ("table", "range", "validation"):
        assert abs(values[term] - TRUE[term]) < 4 * standard[term]
        assert standard[term] > 0
    loo = held_out(commands(noise=0.05), NODETOOL_TERMS)
    assert 0.01 < loo["rms_relative"] < 0.3


def test_measurements_that_cannot_separate_the_terms_are_refused() -> None:
    one_table = [p for p in commands() if p.features["tables"] == 1 and p.features["sessions"] == 1]
    one_range = [Point(p.group, p.seconds, {**p.features, "ranges": 1}) for p in one_table]
    with pytest.raises(ValueError, match="separate"):
        fit_linear(one_range, ("command", "range"), range_per_table=False)  # ranges == 1 == the command column


def test_a_negative_term_is_dropped_and_the_rest_refitted() -> None:
    # durations with no per-range cost and a dip at many ranges: the free fit's range term is negative
    points = [Point(p.group, p.seconds - 0.01 * p.features["ranges"] * p.features["tables"], p.features)
              for p in commands()]  # fmt: skip
    free, _ = fit_linear(points, NODETOOL_TERMS)
    assert free["range"] < 0
    values, dropped = nonnegative_fit(points, NODETOOL_TERMS)
    assert dropped[0] == "range" and all(values[t] == 0.0 for t in dropped)
    assert all(v >= 0 for v in values.values()) and values["validation"] > 0


def test_the_in_process_overhead_is_what_autorepair_tasks_cost_beyond_the_shared_terms() -> None:
    shared = {t: v for t, v in TRUE.items() if t != "streaming"}
    tasks = [Point(g, 0.07 + 0.15 + tables * (0.04 + 0.003) + b * TRUE["validation"],
                   {"sessions": 1, "tables": tables, "ranges": 1, "bytes": b, "mismatched": 0.0})
             for g in ("a", "b", "c") for tables in (1, 5, 20) for b in (MiB, 9 * MiB)]  # fmt: skip
    found = in_process_overhead(tasks, shared, range_per_table=True)
    assert found["in_process_overhead"] == pytest.approx(0.07)
    assert found["error"]["fit"]["max_relative"] < 1e-9
    # cheaper than the shared terms alone: floored at 0, not negative
    assert in_process_overhead(tasks, {**shared, "session": 5.0}, True)["in_process_overhead"] == 0.0


def test_the_report_chooses_the_range_term_with_the_lower_held_out_error() -> None:
    report = fit_report(commands(noise=0.02), [])
    assert set(report["fits"]) >= {"nodetool", "nodetool_range_per_command", "nodetool_medians"}
    assert report["model"]["from"] == "nodetool" and report["model"]["range_per_table"] is True
    per_command = [Point(p.group, p.seconds - p.features["ranges"] * p.features["tables"] * TRUE["range"]
                         + p.features["ranges"] * 0.05, p.features) for p in commands(noise=0.02)]  # fmt: skip
    assert choose_model(fit_report(per_command, []), [], per_command)["range_per_table"] is False


# -- the model's pricing ------------------------------------------------------------------------------------------
PRICED = DurationModel(
    command_overhead=0.2, session_overhead=0.1, validation_rate=50 * MiB, stream_rate=10 * MiB, mismatch_share=0.02,
    table_overhead=0.04, range_overhead=0.003, in_process_overhead=0.05,
)  # fmt: skip


def test_a_command_is_priced_per_session_table_range_and_byte() -> None:
    seconds = PRICED.seconds(100 * MiB, sessions=2, tables=5, ranges=4)
    assert seconds == pytest.approx(0.2 + 2 * (0.1 + 5 * 0.04) + 4 * 5 * 0.003 + 100 / 50 + 0.02 * 100 / 10)
    per_range = DurationModel(**{**PRICED.__dict__, "range_per_table": False})
    assert per_range.seconds(100 * MiB, sessions=2, tables=5, ranges=4) == pytest.approx(seconds - 4 * 4 * 0.003)
    assert PRICED.seconds(0, command_overhead=PRICED.in_process_overhead, tables=3) == pytest.approx(
        0.05 + 0.1 + 3 * 0.04 + 3 * 0.003
    )
    # the assumed model has no per-table or per-range cost: its figures are unchanged
    assert DurationModel().seconds(64 * MiB, tables=20, ranges=16) == DurationModel().seconds(64 * MiB)


def test_scaled_scales_every_term() -> None:
    triple = PRICED.scaled(3.0)
    assert triple.seconds(10 * MiB, sessions=2, tables=5, ranges=4) == pytest.approx(
        3 * PRICED.seconds(10 * MiB, sessions=2, tables=5, ranges=4)
    )
    assert triple.in_process_overhead == pytest.approx(0.15)


def test_the_simulated_pool_charges_a_command_for_its_tables_and_ranges() -> None:
    spec = FleetSpec.small()  # three keyspaces of two tables on the seed ring
    cluster = SimCluster(spec, PRICED)
    ring = cluster.initial_ring
    token_range = ring.ranges()[1]
    replicas = ("127.0.0.2", "127.0.0.4")
    edges = [(token_range.start - MIN_TOKEN + token_range.width() * i // 3) % 2**64 + MIN_TOKEN for i in range(4)]
    segments = tuple(Segment("ar_a", (), TokenRange(a, b), replicas) for a, b in itertools.pairwise(edges))
    command = RepairCommand(segments)
    pool = SimNodetool(cluster).session_pool()
    pool.submit(command)
    [(_, result)] = pool.wait(10_000)
    data = token_range.width() * cluster.bytes_per_token("ar_a")
    expected = PRICED.seconds(data, tables=2, ranges=len(segments))  # no tables named: the keyspace's two
    assert result.seconds == pytest.approx(expected)
    assert result.seconds > DurationModel(**{**PRICED.__dict__, "table_overhead": 0.0}).seconds(
        data, ranges=len(segments)
    )


def test_the_cep37_model_charges_the_in_process_overhead_per_task() -> None:
    spec = FleetSpec.small()
    base = dict(parallel_repair_count=1, parallel_repair_percentage=0, repair_check_interval=0,
                repair_task_min_duration=0)  # fmt: skip
    free = DurationModel(**{**PRICED.__dict__, "in_process_overhead": 0.0})
    cheap = run_cep37(spec, free, **base)  # type: ignore[arg-type]
    dear = run_cep37(spec, PRICED, **base)  # type: ignore[arg-type]
    assert dear.sessions == cheap.sessions
    assert dear.coverage_seconds == pytest.approx(cheap.coverage_seconds + 0.05 * cheap.sessions, rel=1e-6)


# -- calibrated() ---------------------------------------------------------------------------------------------------
def test_calibrated_reads_the_refit_and_refuses_what_no_duration_can_have(tmp_path: Any) -> None:
    path = tmp_path / "refit.json"
    model = {"range_per_table": False, "in_process": {"in_process_overhead": 0.03},
             "terms": {"command": 0.1, "session": 0.05, "table": 0.02, "range": 0.001, "validation": 1 / (40 * MiB),
                       "streaming": 1 / (8 * MiB)}}  # fmt: skip
    path.write_text(json.dumps({"model": model}))
    fitted = DurationModel.calibrated(path)
    assert (fitted.command_overhead, fitted.session_overhead, fitted.table_overhead, fitted.range_overhead) == (
        0.1, 0.05, 0.02, 0.001,
    )  # fmt: skip
    assert fitted.range_per_table is False and fitted.in_process_overhead == 0.03
    assert fitted.validation_rate == pytest.approx(40 * MiB) and fitted.stream_rate == pytest.approx(8 * MiB)
    assert fitted.mismatch_share == DurationModel().mismatch_share  # the fleet's drift is not measured: assumed
    model["terms"]["table"] = -0.01
    path.write_text(json.dumps({"model": model}))
    with pytest.raises(ValueError, match="no duration can have"):
        load_model(path)
    path.write_text("{}")
    with pytest.raises(ValueError, match=r"calibrate_terms\.py"):
        DurationModel.calibrated(path)


def test_the_lower_bound_charges_each_session_the_least_any_session_costs() -> None:
    from ringward_fleetsim import lower_bound

    spec = FleetSpec.fleet(nodes=30, vnodes=4, keyspaces=2, tables=1, table_bytes_median=MiB)
    fixed = DurationModel(command_overhead=5.0, session_overhead=0.0, validation_rate=2**50, mismatch_share=0,
                          table_overhead=40.0, range_overhead=10.0, in_process_overhead=50.0)  # fmt: skip
    bound = lower_bound(spec, fixed, max_sessions=3)
    # in-process start dearer than a command: the command's 5 s, plus one table (40) and one range (10)
    assert bound.session_seconds == pytest.approx(bound.fewest_sessions * (5 + 40 + 10) / 3)
    cheap_start = DurationModel(**{**fixed.__dict__, "in_process_overhead": 1.0})
    assert lower_bound(spec, cheap_start, max_sessions=3).session_seconds == pytest.approx(
        bound.fewest_sessions * (1 + 40 + 10) / 3
    )


def test_the_shipped_refit_loads() -> None:
    model = DurationModel.calibrated()
    assert model.command_overhead >= 0 and model.table_overhead >= 0 and model.validation_rate > 0


def test_scaled_fixed_scales_the_overheads_and_keeps_the_rates() -> None:
    triple = PRICED.scaled_fixed(3.0)
    assert (triple.validation_rate, triple.stream_rate) == (PRICED.validation_rate, PRICED.stream_rate)
    data = 100 * MiB * (1 / PRICED.validation_rate + PRICED.mismatch_share / PRICED.stream_rate)
    fixed = PRICED.seconds(0, sessions=2, tables=5, ranges=4)
    assert triple.seconds(100 * MiB, sessions=2, tables=5, ranges=4) == pytest.approx(3 * fixed + data)
    assert triple.in_process_overhead == pytest.approx(3 * PRICED.in_process_overhead)
