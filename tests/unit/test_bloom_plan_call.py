"""How a Bloom script call reads each stage (bloom_batch.plan_call), no server: a copy of the
stage where many bits are read from a small one, GETBIT elsewhere; what the plan sends
(bloom_core's copies argument); calls sized by the bits their items are expected to read.
The scripts give the same answers either way (tests/behaviour/test_bloom_reads.py). Adds
read and set every bit by redis.call."""

from __future__ import annotations

import pytest

from densekv.sets.bloom_batch import (
    COPY_CALL_BITS,
    COPY_MAX_SHARE,
    LOCAL_READ_UNITS,
    READS_MARGIN,
    SCRIPT_BITS,
    CallPlan,
    copy_units,
    plan_call,
)
from densekv.sets.bloom_core import BloomCore
from densekv.sets.bloom_math import EXACT, BloomSpec, Stage
from densekv.sets.bloom_spec import Request


def stage(nbytes: int, k: int = 7, index: int = 0) -> Stage:
    return Stage(index, 1000, 0.01, nbytes, k, nbytes)


SMALL, MID, HUGE = stage(16_384), stage(240_000), stage(4 << 20)


@pytest.mark.parametrize(("stages", "reads", "items", "copyable", "copied"), [
    ([SMALL], [7.0], 10_000, 1, (True,)),  # present items, small stage: copy
    ([MID], [7.0], 10_000, 1, (True,)),  # 240 KB still pays at 7 bits an item
    ([MID], [2.0], 10_000, 1, (False,)),  # absent items read ~2 bits: 240 KB does not pay
    ([SMALL], [2.0], 10_000, 1, (True,)),  # ... a small stage does, in long calls
    ([SMALL], [2.0], 10, 1, (False,)),  # ... but not in a short batch
    ([HUGE], [7.0], 10_000, 1, (False,)),  # over COPY_MAX_SHARE of a call: never
    ([SMALL], [7.0], 1, 1, (False,)),  # one item: GETBIT
    ([SMALL], [7.0], 8, 1, (False,)),  # too few items to pay for the copy (64 units)
    ([SMALL], [7.0], 10_000, 0, (False,)),  # not copyable (an add's last stage)
    ([SMALL, SMALL], [2.0, 7.0], 10_000, 1, (True, False)),  # an add: full stage copied, last set
    ([HUGE, SMALL], [2.0, 7.0], 10_000, 2, (False, True)),  # each stage on its own
])
def test_the_rule_picks_the_copy_where_it_is_cheaper(stages: list[Stage], reads: list[float], items: int,
                                                     copyable: int, copied: tuple[bool, ...]) -> None:
    got = plan_call(stages, reads, items, copyable)
    assert tuple(bool(c) for c in got.copies) == copied
    assert got.copies == tuple(copy_units(st.bytes) if c else 0 for st, c in zip(stages, copied))
    assert got.budget == (COPY_CALL_BITS if any(copied) else SCRIPT_BITS)


@pytest.mark.parametrize(("stages", "reads", "items", "copyable"), [
    ([SMALL], [7.0], 10_000, 1), ([MID], [7.0], 10_000, 1), ([MID], [2.0], 10_000, 1),
    ([stage(9000, 20), stage(18000, 21, 1), stage(36000, 22, 2)], [2.0, 2.0, 22.0], 10_000, 2),
    ([SMALL], [7.0], 37, 1), ([HUGE], [7.0], 10_000, 1), ([HUGE], [1.5], 10_000, 1),
])
def test_a_call_fits_its_budget_at_the_reads_expected(stages: list[Stage], reads: list[float], items: int,
                                                      copyable: int) -> None:
    """A call carries what its budget pays for at READS_MARGIN times the expected reads, or
    at k bits in every stage if that is more (never fewer items than before); never more
    items than the shard has."""
    got = plan_call(stages, reads, items, copyable)
    unit = [LOCAL_READ_UNITS if c else 1 for c in got.copies]
    worst = sum(st.k * u for st, u in zip(stages, unit))
    expected = sum(r * u for r, u in zip(reads, unit))
    assert 1 <= got.items <= items
    left = got.budget - sum(got.copies)
    assert got.items * min(worst, READS_MARGIN * expected) <= left
    assert got.items == items or (got.items + 1) * min(worst, READS_MARGIN * expected) > left
    assert all(c <= COPY_MAX_SHARE * COPY_CALL_BITS for c in got.copies)


def core_with(stages: int, present: float, capacity: int = 25_000) -> BloomCore:
    core = BloomCore("f", Request(capacity, 0.01, False))
    core.spec = BloomSpec(capacity, 0.01, 1, rule=EXACT)
    core.stages, core.counts, core.lasts = [stages], [0], [0]
    core.present_share = present
    return core


def test_contains_sizes_its_calls_by_the_share_last_found() -> None:
    """contains_many expects k bits read per found item and ~2 per absent one, weighed by
    the share the last batch found: absent items read too few bits to pay for copying a
    240 KB stage, and go in longer calls."""
    core = core_with(1, 1.0, 200_000)
    stages = core._stage_list(1)
    copy = copy_units(stages[0].bytes)
    found = core._has_call_plan(0, stages, 10_000)
    assert found == CallPlan(int((COPY_CALL_BITS - copy) // (stages[0].k * LOCAL_READ_UNITS)), COPY_CALL_BITS, (copy,))
    core.present_share = 0.0  # absent: GETBIT, in calls sized for ~2 bits an item
    assert core._has_call_plan(0, stages, 10_000) == CallPlan(int(SCRIPT_BITS // (READS_MARGIN * 2)), SCRIPT_BITS, (0,))
    small = core_with(1, 0.0, 20_000)  # 24 KB: copied even for absent items, in longer calls still
    absent = small._has_call_plan(0, small._stage_list(1), 10_000)
    small.present_share = 1.0
    found = small._has_call_plan(0, small._stage_list(1), 10_000)
    assert all(absent.copies) and absent.copies == found.copies and absent.items > 1.5 * found.items


def test_an_add_reads_every_bit_by_redis_call() -> None:
    """An add's calls are sized for k bits in every stage sent (as before) and never copy:
    bloom_add.lua has no copy path."""
    core = core_with(3, 0.5)
    sent = core._add_stages(0, 200_000)
    assert len(sent) == 4  # the 3 made and the next one: these items may fill the last
    how = core._add_call_plan(0, sent, 200_000)
    assert how == CallPlan(SCRIPT_BITS // sum(st.k for st in sent), SCRIPT_BITS, (0, 0, 0, 0))
    # and plan_call, asked about such calls (2 to 4 stages), would not copy either
    for made in (1, 2, 3):
        shaped = core_with(made, 0.5)._add_stages(0, 200_000)
        reads = [2.0] * (len(shaped) - 1) + [float(shaped[-1].k)]
        assert not any(plan_call(shaped, reads, 200_000, made - 1).copies)


def test_the_plan_sends_copies_as_one_argument() -> None:
    """bloom_has.lua's ARGV[4]: "" for GETBIT calls (the single-item path pays one empty
    argument), else the local-read units and each stage's copy units."""
    core = core_with(3, 1.0)
    stages = core._stage_list(3)
    how = CallPlan(100, COPY_CALL_BITS, (11, 0, 13))
    has = core._plan_has(0, stages, b"\0" * 8 * 3 * 100, 100, how).steps[0].args
    assert has[2:4] == (COPY_CALL_BITS, f"{LOCAL_READ_UNITS} 11 0 13")
    assert has[4:10] == tuple(x for st in stages for x in (st.bytes, st.k))
    assert core._plan_has(0, stages, b"\0" * 8 * 3, 1).steps[0].args[2:4] == (SCRIPT_BITS, "")
