"""How the default lab sizes its work to the time it has: the pure fitting, each
experiment's sizings (the story never shrinks, only N and repetitions), and the plain
table a piped run prints."""

from __future__ import annotations

import io

import pytest

from densekv.sets.compact import SetLimits
from densekv.tools.lab.experiments import maps, sessions, sets, small_sets
from densekv.tools.lab.results import RunRecord, ServerStamp
from densekv.tools.lab.runner import LiveDisplay, plain_table, table_row
from densekv.tools.lab.sizing import Sizing, fit, n_steps, round_n

LIMITS = SetLimits(512, 64, 128, 64, 128, 64, "libc", False)  # valkey 9.1's defaults
EVERY_SET_LAYOUT = (*sets.EXACT, "dense", "bloom")


def test_fit_takes_the_largest_sizing_that_fits_else_the_smallest() -> None:
    ladder = [Sizing(100, trimmed=""), Sizing(60, trimmed="N = 60"), Sizing(20, trimmed="N = 20")]
    cost = {100: 10.0, 60: 6.0, 20: 2.0}
    assert fit(ladder, lambda s: cost[s.n], 12.0, 1.0)[0].n == 100
    assert fit(ladder, lambda s: cost[s.n], 12.0, 1.5)[0].n == 60  # 15 s > 12, 9 s fits
    chosen, predicted = fit(ladder, lambda s: cost[s.n], 12.0, 10.0)
    assert chosen.n == 20 and predicted == 20.0  # nothing fits: the smallest, never nothing
    assert fit(ladder, lambda s: cost[s.n], None, 10.0)[0].n == 100  # no budget (--n): the full one


@pytest.mark.parametrize("x,expected", [(60_317, 60_000), (25_000, 25_000), (1234, 1200), (42, 42)])
def test_round_n(x: float, expected: int) -> None:
    assert round_n(x) == expected


def test_n_steps_stay_between_floor_and_n() -> None:
    assert n_steps(100_000, 20_000) == [100_000, 60_000, 40_000, 25_000, 20_000]
    assert n_steps(5_000, 20_000) == [5_000]


def _sessions_cost(z: Sizing) -> float:
    variants, _ = sessions.plan_variants(z.n, True, 512, 128)
    return len(variants) * sessions.variant_cost(z)


def _sets_plan(n: int) -> list[sets.Job]:
    return sets.plan_jobs(n, LIMITS, native=False, layouts=EVERY_SET_LAYOUT)


@pytest.mark.parametrize("pace", [0.8, 1.0, 1.6, 2.5, 6.0])
def test_a_slower_machine_measures_the_same_session_story_at_a_smaller_n(pace: float) -> None:
    chosen, _ = fit(sessions.sizings(100_000), _sessions_cost, sessions.Sessions.budget_s, pace)
    assert sessions.FLOOR_N <= chosen.n <= 100_000
    labels = {v.label for v in sessions.plan_variants(chosen.n, True, 512, 128)[0]}
    assert {"dense", "json", "zset seed 256", "zset seed 65k", "zset seed 1M", "packed", "hash", "fieldttl"} <= labels
    if pace <= 1.0:
        assert chosen.n == 100_000 and chosen.trimmed == ""  # idle: the full size
    else:
        assert chosen.trimmed  # said in the report's header line


def test_the_seed_1m_story_holds_at_the_smallest_session_n() -> None:
    """~40 sessions per partition, as the seed's 1M partitions held at 40M: inside a listpack."""
    variants, _ = sessions.plan_variants(sessions.FLOOR_N, True, 512, 128)
    seed_1m = next(v for v in variants if v.label == "zset seed 1M")
    assert seed_1m.partitions is not None and 20 <= sessions.FLOOR_N / seed_1m.partitions <= 128


@pytest.mark.parametrize("pace", [1.0, 2.0, 6.0])
def test_every_sweep_point_up_to_32768_and_both_bloom_rates_are_always_planned(pace: float) -> None:
    chosen, _ = fit(sets.sizings(100_000), lambda z: sum(sets.job_cost(j, z.n, z["cas"], z["absent"])
                                                          for j in _sets_plan(z.n)), sets.Sets.budget_s, pace)
    jobs = _sets_plan(chosen.n)
    for layout in ("set", "hash", "zset"):
        points = {j.partitions for j in jobs if j.layout == layout}
        assert {1, 8, 64, 512, 4096, 32768} <= points, (layout, chosen.n)
    assert {j.error_rate for j in jobs if j.layout == "bloom"} == {0.01, 1e-6}
    assert any(j.layout == "dense" for j in jobs) and {j.partitions for j in jobs if j.layout == "flat"} == {
        1, chosen.n}


@pytest.mark.parametrize("pace", [1.0, 3.0, 10.0])
def test_maps_and_small_sets_keep_every_configuration(pace: float) -> None:
    chosen, _ = fit(maps.sizings(100_000), lambda z: sum(
        maps.config_cost(c, maps.items_for(c.case, 100_000, None, z["scale_pct"] / 100), z["ops"])
        for c in maps.PLAN), maps.Maps.budget_s, pace)
    assert chosen.n >= 25_000 and chosen["ops"] >= 500  # fewer items and operations; PLAN is not filtered
    small, _ = fit(small_sets.sizings(), lambda z: small_sets.run_cost(z["keys"], 4096, 3, 1),
                   small_sets.SmallSets.budget_s, pace)
    assert small["keys"] >= 8


STAMP = ServerStamp("valkey-9.1", "valkey", "9.1.2", "libc", {})


def test_a_piped_run_prints_every_column_whole() -> None:
    display = LiveDisplay()
    out = io.StringIO()
    from rich.console import Console

    display.console, display.live = Console(file=out, width=40), False  # a pipe: not a terminal
    with display.running(1):
        display.record(RunRecord.stamped(STAMP, kind="sets", layout="hash", partitions=32768,
                                         variant="bloom p=1e-06 (module-free)", n=100_000, bytes_per_item=3.6512,
                                         ops_per_s=123456.0, server_usec_per_call=0.25))
    text = out.getvalue()
    assert "valkey-9.1" in text and "bloom p=1e-06 (module-free)" in text and "123,456" in text
    assert "…" not in text  # nothing cut to the width of a terminal
    lines = text.strip().splitlines()
    assert len(lines) == 2 and lines[0].split()[:3] == ["server", "kind", "configuration"]


def test_plain_table_aligns_columns() -> None:
    record = RunRecord.stamped(STAMP, kind="maps", layout="plain", partitions=None, variant="json · plain SET",
                               n=4000, bytes_per_item=212.7)
    text = plain_table([table_row(record), table_row(record)])
    widths = {len(line) for line in text.splitlines()}
    assert len(widths) == 1  # every row as wide as the header
