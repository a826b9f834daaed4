"""The analyzer's estimates (densekv/tools/analyze/estimate.py) and the per-pattern sample's draw."""

from __future__ import annotations

import random
import statistics

import pytest

from densekv.tools.analyze.estimate import allocate, counted_bytes_estimate, t98, unseen_variance
from densekv.tools.analyze.replay import Copy, ballast_ttl
from densekv.tools.analyze.scan import plan_sample
from densekv.tools.analyze.table import PatternTable


@pytest.mark.parametrize(("sizes", "budget"), [([5000, 1000, 1000, 100, 1, 1], 2000), ([1000] * 8 + [1, 1], 10_000),
                                               ([7, 3], 100), ([400, 400, 3], 500), ([10] * 30, 7)])
def test_allocate_spends_the_budget_evenly_within_each_stratum(sizes: list[int], budget: int) -> None:
    got = allocate(sizes, budget)
    assert sum(got) == min(budget, sum(sizes))
    assert all(0 <= g <= s for g, s in zip(got, sizes))
    short = [g for g, s in zip(got, sizes) if g < s]  # strata not taken whole differ by one at most
    assert not short or max(got) - min(short) <= 1


def test_t98_is_close_to_students_table() -> None:
    for n, table in ((5, 3.747), (11, 2.764), (12, 2.718), (21, 2.528), (31, 2.457), (1001, 2.330)):
        assert t98(n) == pytest.approx(table, rel=0.005)


def test_counted_bytes_hold_the_true_total_at_least_95_percent_of_the_time() -> None:
    rng = random.Random(5)
    population = [72] * 950 + [80] * 50 + [rng.randrange(60, 400) for _ in range(1000)]
    truth = sum(population)
    inside = 0
    for _ in range(2000):
        draw = rng.sample(population, 60)
        est = counted_bytes_estimate(len(population), sum(draw), sum(x * x for x in draw), len(draw))
        inside += est.low <= truth <= est.high
    assert 0.95 <= inside / 2000 <= 0.999


def test_a_sample_that_priced_every_key_alike_still_has_an_interval() -> None:
    est = counted_bytes_estimate(2000, 72 * 40, 72 * 72 * 40, 40)
    assert est.value == 144_000 and est.low < 144_000 * 0.995 and est.high > 144_880
    assert unseen_variance(72, 40) > 0 and unseen_variance(72, 4000) < unseen_variance(72, 40)
    whole = counted_bytes_estimate(40, 72 * 40, 72 * 72 * 40, 40)  # every key looked at: exact
    assert whole.low == whole.value == whole.high


def test_the_per_pattern_sample_is_a_fixed_draw_of_each_reservoir() -> None:
    table = PatternTable()
    for i in range(3000):
        table.count_name(0, f"user:{i}".encode())
    for i in range(50):
        table.count_name(0, f"job:{i}:children".encode())
    plan = plan_sample(table, 500, seed=1)
    assert plan == plan_sample(table, 500, seed=1) and plan != plan_sample(table, 500, seed=2)
    by = {}
    for stats, _, key in plan:
        by.setdefault(stats.name, set()).add(key)
    assert len(by["job:{n}:children"]) == 50 and len(by["user:{n}"]) == 450
    # the names reservoir is a uniform sample of the pattern's keys
    ids = [int(k.split(b":")[1]) for k in by["user:{n}"]]
    assert 1200 < statistics.mean(ids) < 1800


def test_ballast_ttl_models_the_live_expires_table() -> None:
    copies = [Copy(f"k{i}".encode(), "string", b"v", 5000 if i < 100 else -1, 50) for i in range(200)]
    # live: 1M keys, 300k with a TTL; model: 10k ballast + 200 copies -> ~3,060 with a TTL
    got = ballast_ttl(10_000, copies, 1_000_000, 300_000)
    assert got + 100 == pytest.approx(0.3 * 10_200, abs=1)
    assert ballast_ttl(10_000, copies, 1_000_000, 0) == 0
    assert ballast_ttl(50, copies, 1_000, 1_000) == 50
