"""BloomCore's flows (densekv/sets/bloom_core.py) against scripted replies, no server: one
row per case (operation, scripted round trips with what each step must carry, result or
error), h11's table style. Keys: `b:bm:{0}` (metadata), `b:bs:{j}` (shard j's state),
`b:bf<t>:{j}` (stage t's bitmap), `b:bn:{j}` (native). Stage geometry (bytes, k, capacity)
is bloom_math's, pinned by tests/unit/test_bloom_math.py; the walks (the bit positions of
each item) are checked by their size here, their values by the behaviour suite.

A script told fewer stages than its shard has answers "stale" with no flags, and the core
sends that shard's items again with the right keys: the Bloom filter's retry row.
Behaviour against real servers: tests/behaviour/test_bloom.py, test_bloom_reads.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from densekv.errors import BloomFull, BloomMismatch, BloomModuleMissing, BloomNotFound, WrongType
from densekv.sets.bloom_batch import SCRIPT_BITS
from densekv.sets.bloom_core import BloomCore
from densekv.sets.bloom_math import BloomSpec
from densekv.sets.bloom_spec import BloomFacts, Request, spec_fields
from tests.unit.scripted import Raises, Scripted, check, run

FACTS = BloomFacts("jemalloc")
META = b"b:bm:{0}"


def fields(spec: BloomSpec, native: bool = False) -> list[bytes]:
    return [x.encode() for kv in spec_fields(spec, native).items() for x in kv]


def opened(shards: int = 1, native: bool = False, capacity: int = 1000, growth: int | None = None) -> BloomCore:
    """A filter made by this process: nothing there, its keys free, its metadata written."""
    core = BloomCore("b", Request(capacity, 0.01, native, shards=shards, growth=growth))
    keys = [b"b:bn:{%d}" % j for j in range(shards)] if native else \
        [k for j in range(shards) for k in (b"b:bs:{%d}" % j, b"b:bf0:{%d}" % j)]
    script: list[list[tuple[Any, Any]]] = [
        [(("bloom_meta", (META,), ""), [])],
        [(("TYPE", k), b"none") for k in keys],
        [(("bloom_meta", (META,), "kind", "densekv.bloom"), lambda s: list(s.args))],  # HGETALL of what it wrote
    ]
    if native:
        script.append([(("bloom_native_reserve", (k,), "0.01"), b"OK") for k in keys])
    facts = BloomFacts("jemalloc", ("bf",)) if native else FACTS
    check(core.open(facts, True), script, None)
    return core


CORE = opened()
S0, S1 = CORE.opened.stage(0), CORE.opened.stage(1)
ONE = (b"b:bs:{0}", b"b:bf0:{0}")
TWO = (*ONE, b"b:bf1:{0}")


def add(keys: tuple[bytes, ...], items: int, reply: Any, stages: tuple[Any, ...] = (S0,)) -> tuple[Any, Any]:
    """bloom_add: KEYS state + the stages' bitmaps; ARGV stages, items, budget, BITFIELD?
    (never under 8 items), (bytes, k, capacity) per stage, the walks."""
    geometry = [x for s in stages for x in (s.bytes, s.k, s.capacity)]
    return ("bloom_add", keys, len(stages), items, SCRIPT_BITS, int(items >= 8), *geometry), reply


def has(keys: tuple[bytes, ...], reply: Any, stages: tuple[Any, ...] = (S0,)) -> tuple[Any, Any]:
    geometry = [x for s in stages for x in (s.bytes, s.k)]
    return ("bloom_has", keys, len(stages), 1, SCRIPT_BITS, "", *geometry), reply


ROWS: list[tuple[str, str, list[Any], list[list[tuple[Any, Any]]], Any]] = [
    # (id, operation, items, script, result); a fresh filter each row
    ("add-new", "add_many", [b"x"], [[add(ONE, 1, [1, 1, 1, b"1"])]], [True]),
    ("add-present", "add_many", [b"x"], [[add(ONE, 1, [1, 5, 5, b"0"])]], [False]),
    ("add-stale-stage-count", "add_many", [b"x"],  # the shard grew meanwhile: sent again with both stages
     [[add(ONE, 1, [2, 900, 310, b""])], [add(TWO, 1, [2, 901, 311, b"1"], (S0, S1))]], [True]),
    ("add-wrong-type", "add_many", [b"x"],
     [[add(ONE, 1, redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"))]],
     Raises(WrongType, "b:bs:{0}")),
    ("add-empty", "add_many", [], [], []),
    ("contains-found", "contains_many", [b"x"], [[has(ONE, [1, b"1"])]], [True]),
    ("contains-absent", "contains_many", [b"x"], [[has(ONE, [1, b"0"])]], [False]),
    ("contains-stale", "contains_many", [b"x"], [[has(ONE, [2, b""])], [has(TWO, [2, b"1"], (S0, S1))]], [True]),
    ("contains-empty", "contains_many", [], [], []),
    ("add-many-one-call", "add_many", [b"x", b"y", b"z"], [[add(ONE, 3, [1, 3, 3, b"101"])]], [True, False, True]),
    ("add-many-budget-ran-out", "add_many", [b"x", b"y", b"z"],  # the rest goes in the next round trip
     [[add(ONE, 3, [1, 1, 1, b"1"])], [add(ONE, 2, [1, 3, 3, b"01"])]], [True, False, True]),
    ("add-many-bitfield-from-8-items", "add_many", [bytes([i]) for i in range(8)],
     [[add(ONE, 8, [1, 8, 8, b"1" * 8])]], [True] * 8),
]


@pytest.mark.parametrize(("op", "items", "script", "expect"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bloom_flows(op: str, items: list[Any], script: list[list[tuple[Any, Any]]], expect: Any) -> None:
    run_ = check(getattr(opened(), op)(items), script, expect)
    for trip in run_.ex.trips:  # the walks: one (a, b) pair of u32 per item per stage sent
        for s in trip:
            stages, n = int(s.args[0]), int(s.args[1])
            assert len(s.args[-1]) == 8 * stages * n


def test_one_item_uses_the_same_script_call_as_a_batch() -> None:
    one = check(opened().add_many([b"x"]), [[add(ONE, 1, [1, 1, 1, b"1"])]], [True]).ex.trips[0][0]
    batch = check(opened().add_many([b"x", b"x"]), [[add(ONE, 2, [1, 1, 1, b"10"])]], [True, False]).ex.trips[0][0]
    assert batch.args[-1] == one.args[-1] * 2  # the same item, the same walks


def test_an_add_that_fills_the_last_stage_is_sent_the_next_one() -> None:
    core = opened()
    check(core.add_many([b"x"]), [[add(ONE, 1, [1, S0.capacity - 1, S0.capacity - 1, b"1"])]], [True])
    # the cached count says these items may fill stage 0: stage 1 goes with them
    check(core.add_many([b"y"]), [[add(TWO, 1, [2, S0.capacity, 0, b"1"], (S0, S1))]], [True])


def test_a_shard_that_cannot_grow_is_full() -> None:
    core = opened(capacity=300_000_000, growth=4)  # stage 1 would pass the 512 MB string limit
    assert len(core._stage_list(2)) == 1
    first = core.opened.stage(0)
    full = [1, first.capacity, first.capacity, b""]
    check(core.add_many([b"x"]), [[(("bloom_add", ONE), full)]], Raises(BloomFull, "shard 0"))


def test_items_are_split_by_shard_and_come_back_in_order() -> None:
    core = opened(shards=2)
    ex = Scripted(answer=lambda s: [1, 0, 0, b"1" * int(s.args[1])])
    items = [b"item %d" % i for i in range(20)]
    assert run(core.add_many(items), ex) == [True] * 20
    (trip,) = ex.trips
    assert sorted(s.keys[0] for s in trip) == [b"b:bs:{0}", b"b:bs:{1}"]
    assert sum(int(s.args[1]) for s in trip) == 20
    flags = {s.keys[0]: s for s in trip}
    script = [[(("bloom_add", s.keys), [1, 0, 0, b"0" * int(s.args[1])]) for s in flags.values()]]
    assert check(opened(shards=2).add_many(items), script).result == [False] * 20


def test_native_filters_use_redisbloom_commands() -> None:
    core = opened(native=True)
    check(core.add_many([b"x", b"y"]), [[(("BF.MADD", b"b:bn:{0}", b"x", b"y"), [1, 0])]], [True, False])
    check(core.contains_many([b"x"]), [[(("BF.MEXISTS", b"b:bn:{0}", b"x"), [1])]], [True])


# -- opening --------------------------------------------------------------------------------

def test_open_adopts_a_stored_filter_and_refuses_other_parameters() -> None:
    stored = fields(CORE.opened)
    core = BloomCore("b", Request(None, None, None))
    check(core.open(FACTS, False), [[(("bloom_meta", (META,), ""), stored)]], None)
    assert core.opened == CORE.opened and core.stages == [0]
    other = BloomCore("b", Request(2000, 0.01, False))
    check(other.open(FACTS, True), [[("bloom_meta", stored)]], Raises(BloomMismatch, "capacity=2000"))


@pytest.mark.parametrize(("request_", "facts", "script", "error"), [
    (Request(None, None, None), FACTS, [[("bloom_meta", [])]], Raises(BloomNotFound)),
    (Request(1000, 0.01, True, shards=1), FACTS, [[("bloom_meta", [])]], Raises(BloomModuleMissing)),
    (Request(1000, 0.01, False, shards=1), FACTS, [[("bloom_meta", [])], [("TYPE", b"string"), ("TYPE", b"none")]],
     Raises(WrongType, "b:bs:{0} already exists")),
    (Request(1000, 0.01, False, shards=1), FACTS,
     [[("bloom_meta", redis.ResponseError("WRONGTYPE b:bm:{0} holds a string"))]], Raises(WrongType)),
    (Request(1000, 0.01, False, shards=1), FACTS, [[("bloom_meta", [b"kind", b"something else"])]], Raises(WrongType)),
], ids=["open-missing", "native-without-module", "foreign-key", "meta-of-another-type", "foreign-meta"])
def test_open_refuses(request_: Request, facts: BloomFacts, script: list[list[tuple[Any, Any]]], error: Raises) -> None:
    create = request_.capacity is not None
    check(BloomCore("b", request_).open(facts, create), script, error)


def test_count_and_delete_read_every_shard_state_in_one_round_trip() -> None:
    core = opened(shards=2)
    states = [[(("HMGET", b"b:bs:{%d}" % j, "t", "n", "c"), [b"2", b"%d" % (10 + j), b"3"]) for j in (0, 1)]]
    check(core.count(), states, 21)
    deletes = [(("DEL", b"b:bs:{%d}" % j, b"b:bf0:{%d}" % j, b"b:bf1:{%d}" % j), 3) for j in (0, 1)]
    check(core.delete(), [*states, [*deletes, (("DEL", META), 1)]], 7)
    assert core.stages == [0, 0]


def test_a_new_filter_writes_its_parameters_once() -> None:
    ex = Scripted([[("bloom_meta", [])], [("TYPE", b"none")] * 2, [("bloom_meta", lambda s: list(s.args))]])
    run(BloomCore("b", Request(1000, 0.01, False, shards=1)).open(FACTS, True), ex)
    written = dict(zip(ex.trips[2][0].args[::2], ex.trips[2][0].args[1::2]))
    assert written == spec_fields(CORE.opened, False)
