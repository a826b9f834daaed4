"""The two ways bloom_has.lua reads a stage, on every server present: one GETBIT per bit, or
one GET of the whole stage tested in Lua (bloom_batch.plan_call picks). Both give the same
answers on a filter with shards and stages, neither writes, the planner's pick is what
the server runs, and a call that copies keeps its budget."""

from __future__ import annotations

import random
from typing import Any

import redis

from densekv.sets.bloom import BloomFilter
from densekv.sets.bloom_batch import (
    COPY_CALL_BITS,
    LOCAL_READ_UNITS,
    SCRIPT_BITS,
    Batch,
    CallPlan,
    copy_units,
)
from densekv.sets.bloom_math import Stage


def items(seed: int, n: int) -> list[bytes]:
    rnd = random.Random(seed)
    return [rnd.randbytes(12) for _ in range(n)]


def calls(client: redis.Redis, name: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{name}", {}).get("calls", 0))


def force(bf: BloomFilter, copy: bool, per_call: int = 60) -> None:
    """Every contains_many call of `bf` reads every stage as told."""
    def plan(shard: int, stages: list[Stage], count: int) -> CallPlan:
        if copy:
            return CallPlan(min(count, per_call), COPY_CALL_BITS, tuple(copy_units(st.bytes) for st in stages))
        return CallPlan(min(count, per_call), SCRIPT_BITS, (0,) * len(stages))
    bf._core._has_call_plan = plan  # type: ignore[method-assign, assignment]


def dump_all(client: redis.Redis, name: str) -> dict[bytes, Any]:
    return {k: client.dump(k) for k in sorted(client.scan_iter(match=f"{name}:*"))}


def test_a_copy_and_getbit_give_the_same_answers(client: redis.Redis) -> None:
    """Three stages or more per shard, present and absent items and false positives (p =
    2%): the same answers both ways, all present items found, no key changed."""
    added, absent = items(1, 700), items(2, 3000)
    bf = BloomFilter(client, "reads", capacity=80, error_rate=0.02, shards=2)
    bf.add_many(added)
    assert bf.stats()["stage_count"] >= 3
    asked = added + absent
    random.Random(3).shuffle(asked)
    before = dump_all(client, "reads")
    answers = {}
    for copy in (True, False):
        force(bf, copy)
        gets, getbits = calls(client, "get"), calls(client, "getbit")
        answers[copy] = bf.contains_many(asked)
        assert (calls(client, "get") > gets) == copy and (calls(client, "getbit") > getbits) != copy
    assert answers[True] == answers[False]
    assert all(f for x, f in zip(asked, answers[True]) if x in set(added))
    assert 0 < sum(answers[True]) - len(added) < 400  # false positives: the same ones both ways
    assert dump_all(client, "reads") == before


def test_a_copy_of_a_stage_the_shard_lacks_is_skipped(client: redis.Redis) -> None:
    """A client that sends more stages than the shard has (and asks to copy them all) gets
    the shard's answers: the missing stage is neither copied nor read."""
    bf = BloomFilter(client, "lacks", capacity=1000, error_rate=0.01)
    bf.add_many(items(4, 500))
    core = bf._core
    stages = core._stage_list(2)
    asked = items(4, 500) + items(5, 500)
    batch = Batch(asked, 1)
    how = CallPlan(1000, COPY_CALL_BITS, tuple(copy_units(st.bytes) for st in stages))
    gets = calls(client, "get")
    stages_now, flags = bf._ex.run(core._plan_has(0, stages, batch.walks(stages, 0, 1000), 1000, how))
    assert stages_now == 1 and calls(client, "get") == gets + 1
    assert flags[:500] == b"1" * 500 and list(map(int, flags.decode())) == [int(x) for x in bf.contains_many(asked)]


def test_the_planner_copies_for_found_batches_and_not_for_single_items(client: redis.Redis) -> None:
    """plan_call's pick runs on the server: a batch of found items against a small stage
    is read from one copy per call, single items by GETBIT; a batch like the last, which
    found nothing, goes in longer calls."""
    bf = BloomFilter(client, "pick", capacity=20_000, error_rate=0.01)
    present = items(6, 5000)
    bf.add_many(present)
    bf._core.present_share = 1.0
    gets, getbits = calls(client, "get"), calls(client, "getbit")
    assert all(bf.contains_many(present))
    assert calls(client, "get") > gets and calls(client, "getbit") == getbits
    gets = calls(client, "get")
    assert bf.contains(present[0])
    assert calls(client, "get") == gets and calls(client, "getbit") == getbits + bf.spec.stage(0).k
    big = BloomFilter(client, "pick-big", capacity=50_000, error_rate=0.01)  # 60 KB: copied for absent items too
    big.add_many(present)
    shas = calls(client, "evalsha")
    big.contains_many(present)
    found_calls, shas = calls(client, "evalsha") - shas, calls(client, "evalsha")
    big.contains_many(items(7, 5000))  # learns that none was found ...
    assert big._core.present_share < 0.05
    shas = calls(client, "evalsha")
    big.contains_many(items(8, 5000))  # ... and sends the next absent batch in longer calls
    assert 0 < calls(client, "evalsha") - shas < found_calls


def test_a_call_that_copies_keeps_its_budget(client: redis.Redis) -> None:
    """The copy's units count once, each bit tested in it LOCAL_READ_UNITS: a call of found
    items stops before the item that would start past its budget, whatever the client sent."""
    bf = BloomFilter(client, "budget", capacity=5000, error_rate=0.01)
    present = items(9, 3000)
    bf.add_many(present)
    core = bf._core
    stages = core._stage_list(1)
    k, copy = stages[0].k, copy_units(stages[0].bytes)
    budget = copy + 200
    batch = Batch(present, 1)
    how = CallPlan(3000, budget, (copy,))
    gets, getbits = calls(client, "get"), calls(client, "getbit")
    _, flags = bf._ex.run(core._plan_has(0, stages, batch.walks(stages, 0, 3000), 3000, how))
    assert len(flags) == -(-200 // (k * LOCAL_READ_UNITS)) and set(flags) == {ord("1")}
    assert calls(client, "get") == gets + 1 and calls(client, "getbit") == getbits
