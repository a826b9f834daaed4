"""SetCore's flows (densekv/sets/compact.py, plans of densekv/sets/layouts.py) against
scripted replies, no server: one row per (layout, operation, item, scripted round trip,
result or error), h11's table style. Items are 4-byte integers, not spread, in 16
partitions, so a row can say where an item goes: partition x mod 16, member x div 16
(hex in the seed layouts, binary in the dense ones) in key `t:<code>16:{p}`, the radix
split the module docstring of layouts.py states.

Behaviour against real servers: tests/behaviour/test_sets*.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from densekv.errors import BadItem, SetMismatch, WrongType
from densekv.sets.compact import PARTITION_BATCH, SetCore
from densekv.sets.layouts import DenseSplitHash, SetLimits
from tests.unit.scripted import ANY, Raises, Scripted, check, run

LIMITS = SetLimits(128, 64, 128, 64)  # listpack sets (Redis 7.2+ / Valkey 8+)
X = 0x12345678
P, Q = X % 16, X // 16


def opened(layout: str, partitions: int | None = 16) -> SetCore:
    """A new set: no meta yet, then this process's SET NX GET wins."""
    ex = Scripted([[(("GET", b"t:meta:{0}"), None)], [(("SET", b"t:meta:{0}", ANY, "NX", "GET"), None)]])
    core = run(SetCore.open("t", layout, 1000, 4, partitions, False, LIMITS, False), ex)
    ex.done()
    assert isinstance(core, SetCore)
    return core


CORES = {name: opened(name) for name in ("set", "hash", "zset", "flat", "dense-hash", "dense-set")}
SPLIT = CORES["dense-hash"].layout
assert isinstance(SPLIT, DenseSplitHash) and (SPLIT.field_bytes, SPLIT.low_bits) == (3, 4)  # 28-bit quotients
HEX = b"%07x" % Q  # 2**32 / 16: 28 bits, 7 hex digits
FIELD, LOW = (Q >> 4).to_bytes(3, "big"), Q & 15
K = {name: b"t:%s16:{%d}" % (code, P) for name, code in
     [("set", b"s"), ("hash", b"h"), ("zset", b"z"), ("dense-hash", b"dq"), ("dense-set", b"ds")]}
FLAT = b"t:f16:{%d}:" % P + HEX
WRONG = redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")

ROWS: list[tuple[str, str, list[list[tuple[Any, Any]]], Any]] = [
    # (layout, operation on X, script, result)
    ("set", "add", [[(("SADD", K["set"], HEX), 1)]], True),
    ("set", "add", [[(("SADD", K["set"], HEX), 0)]], False),
    ("set", "contains", [[(("SISMEMBER", K["set"], HEX), 1)]], True),
    ("set", "remove", [[(("SREM", K["set"], HEX), 0)]], False),
    ("hash", "add", [[(("HSETNX", K["hash"], HEX, 1), 1)]], True),
    ("hash", "add", [[(("HSETNX", K["hash"], HEX, 1), 0)]], False),
    ("hash", "contains", [[(("HEXISTS", K["hash"], HEX), 0)]], False),
    ("hash", "remove", [[(("HDEL", K["hash"], HEX), 1)]], True),
    ("hash", "add", [[("HSETNX", WRONG)]], Raises(WrongType, "t:h16:")),
    ("zset", "add", [[(("ZADD", K["zset"], "NX", 1, HEX), 1)]], True),
    ("zset", "contains", [[(("ZSCORE", K["zset"], HEX), b"1")]], True),
    ("zset", "contains", [[(("ZSCORE", K["zset"], HEX), None)]], False),
    ("zset", "remove", [[(("ZREM", K["zset"], HEX), 1)]], True),
    # flat: SET NX GET, so a key of another value or type is an error, not "present"
    ("flat", "add", [[(("SET", FLAT, 1, "NX", "GET"), None)]], True),
    ("flat", "add", [[(("SET", FLAT, 1, "NX", "GET"), b"1")]], False),
    ("flat", "add", [[("SET", b"someone else's")]], Raises(WrongType, FLAT.decode())),
    ("flat", "add", [[("SET", WRONG)]], Raises(WrongType)),
    ("flat", "contains", [[(("GET", FLAT), b"1")]], True),
    ("flat", "remove", [[(("GETDEL", FLAT), None)]], False),
    # dense-set: binary members (the quotient's 4 bytes)
    ("dense-set", "add", [[(("SADD", K["dense-set"], Q.to_bytes(4, "big")), 1)]], True),
    ("dense-set", "contains", [[(("SISMEMBER", K["dense-set"], Q.to_bytes(4, "big")), 0)]], False),
    # dense split hash: field = high bytes of q, value = its low bits; HSETNX + HGET pipelined
    ("dense-hash", "add", [[(("HSETNX", K["dense-hash"], FIELD, LOW), 1), (("HGET", K["dense-hash"], FIELD), LOW)]],
     True),
    ("dense-hash", "add", [[("HSETNX", 0), ("HGET", b"%d" % LOW)]], False),  # the field holds this very item
    ("dense-hash", "add", [[("HSETNX", 0), ("HGET", b"%d" % (LOW + 128))]], False),  # marked: long forms exist
    ("dense-hash", "add",  # a low-bit collision: the script decides, in a second round trip
     [[("HSETNX", 0), ("HGET", b"%d" % ((LOW + 1) % 16))],
      [(("set_dense_add", (K["dense-hash"],), FIELD, LOW), [1])]], True),
    ("dense-hash", "add", [[("HSETNX", 0), ("HGET", None)], [("set_dense_add", [0])]], False),  # gone meanwhile
    ("dense-hash", "contains",
     [[(("HMGET", K["dense-hash"], FIELD, FIELD + bytes([LOW])), [b"%d" % LOW, None])]], True),
    ("dense-hash", "contains", [[("HMGET", [b"%d" % ((LOW + 1) % 16), None])]], False),
    ("dense-hash", "contains", [[("HMGET", [b"%d" % ((LOW + 1) % 16 + 128), b"1"])]], True),  # the long form
    ("dense-hash", "remove", [[(("set_dense_remove", (K["dense-hash"],), b"15", FIELD, LOW), [1])]], True),
]


@pytest.mark.parametrize(("layout", "op", "script", "expect"), ROWS,
                         ids=[f"{r[0]}-{r[1]}-{i}" for i, r in enumerate(ROWS)])
def test_single_item_flows(layout: str, op: str, script: list[list[tuple[Any, Any]]], expect: Any) -> None:
    check(getattr(CORES[layout], op)(X), script, expect)


@pytest.mark.parametrize("item", [2**32, -1, b"abc", True, "not hex", 1.5], ids=repr)
@pytest.mark.parametrize("op", ["add", "contains", "remove"])
def test_a_bad_item_is_refused_before_anything_is_sent(item: Any, op: str) -> None:
    check(getattr(CORES["hash"], op)(item), [], Raises(BadItem))


# -- batches: one command or script call per partition present, one round trip per batch ---

def test_contains_many_sends_one_command_per_partition_and_scatters_the_replies() -> None:
    items = [1, 17, 2, 33]  # partitions 1, 1, 2, 1: members 0, 1, 0, 2
    script = [[(("HMGET", b"t:h16:{1}", b"0000000", b"0000001", b"0000002"), [b"1", None, b"1"]),
               (("HMGET", b"t:h16:{2}", b"0000000"), [None])]]
    check(CORES["hash"].many(items, "contains"), script, [True, False, False, True])


def test_add_many_is_a_script_call_per_partition() -> None:
    script = [[(("set_add_many", (b"t:s16:{1}",), "set", b"0000000", b"0000001"), [1, 0]),
               (("set_add_many", (b"t:s16:{2}",), "set", b"0000000"), [1])]]
    check(CORES["set"].many([1, 17, 2], "add"), script, [True, False, True])


def test_batches_split_the_round_trips_and_an_empty_batch_sends_nothing() -> None:
    check(CORES["set"].many([], "add"), [], [])
    script = [[("SMISMEMBER", [1, 0])], [("SMISMEMBER", [1])]]  # batch=2: two round trips
    run_ = check(CORES["set"].many([1, 17, 33], "contains", batch=2), script, [True, False, True])
    assert [t[0].args[1:] for t in run_.ex.trips] == [(b"0000000", b"0000001"), (b"0000002",)]


def test_a_partition_reply_of_the_wrong_length_is_an_error_not_a_shifted_answer() -> None:
    check(CORES["set"].many([1, 17], "contains"), [[("SMISMEMBER", [1])]], Raises(RuntimeError, "wrong number"))


def test_a_batch_with_one_bad_item_sends_nothing() -> None:
    check(CORES["set"].many([1, 2, 2**40], "add"), [], Raises(BadItem))


def test_flat_batches_are_one_command_per_item() -> None:
    script = [[(("SET", b"t:f16:{1}:0000000", 1, "NX", "GET"), None), (("SET", b"t:f16:{1}:0000001"), b"1")]]
    check(CORES["flat"].many([1, 17], "add"), script, [True, False])


# -- whole set -----------------------------------------------------------------------------

def test_count_sums_the_partition_sizes_in_one_round_trip() -> None:
    script = [[(("HLEN", b"t:h16:{%d}" % p), p) for p in range(16)]]
    check(CORES["hash"].count(), script, sum(range(16)))


def test_a_flat_count_walks_the_keys_once_each() -> None:
    keys = [b"t:f16:{1}:0000000", b"t:f16:{2}:0000000", b"t:f16:{1}:0000000"]  # SCAN may repeat a key
    check(CORES["flat"].count(), [[(("SCAN", b"t:f16:{*}:*"), keys)]], 2)


def test_clear_unlinks_every_partition() -> None:
    check(CORES["zset"].clear(), [[(("UNLINK", b"t:z16:{%d}" % p), p % 2) for p in range(16)]], 8)


def test_stats_warn_of_a_partition_that_left_the_listpack() -> None:
    sizes = [(("SCARD", b"t:s16:{%d}" % p), 3) for p in range(16)]
    encodings = [(("OBJECT", "ENCODING", b"t:s16:{%d}" % p), b"hashtable" if p == 5 else b"listpack")
                 for p in range(16)]
    run_ = check(CORES["set"].stats(), [sizes + encodings])
    assert run_.result["items"] == 48 and run_.result["converted_partitions"] == [5]
    assert "left the listpack" in run_.result["warnings"][0]


def test_whole_set_work_goes_in_rounds_of_partition_batch() -> None:
    core = opened("hash", PARTITION_BATCH + 1)
    ex = Scripted(answer=lambda s: 1)
    assert run(core.count(), ex) == PARTITION_BATCH + 1
    assert [len(t) for t in ex.trips] == [PARTITION_BATCH, 1]


# -- opening: the layout record every later process adopts ----------------------------------

def record(**kw: Any) -> bytes:
    meta = {"v": 1, "layout": "hash", "code": "h", "partitions": 16, "item_size": 4, "spread": False, **kw}
    return json.dumps(meta, sort_keys=True).encode()


def test_open_writes_the_record_it_chose() -> None:
    ex = Scripted([[("GET", None)], [("SET", None)]])
    run(SetCore.open("t", "hash", 1000, 4, 16, False, LIMITS, False), ex)
    assert json.loads(ex.trips[1][0].args[1]) == json.loads(record())


def test_open_adopts_the_record_another_process_wrote_first() -> None:
    opened_ = check(SetCore.open("t", "auto", 1000, 4, None, False, LIMITS, False),
                    [[("GET", None)], [(("SET", b"t:meta:{0}"), record(partitions=32))]])
    assert opened_.result.layout.name == "hash" and opened_.result.layout.partitions == 32
    reopened = check(SetCore.open("t", "hash", 5, 4, None, False, LIMITS, False), [[("GET", record())]])
    assert reopened.result.layout.partitions == 16 and reopened.result.reason.startswith("reopened")


@pytest.mark.parametrize(("args", "stored", "error"), [
    (("set", 16, 4), record(), Raises(SetMismatch, "exists as layout hash")),
    (("hash", 32, 4), record(), Raises(SetMismatch)),
    (("hash", 16, 8), record(), Raises(SetMismatch, "4-byte")),
    (("hash", 16, 4), b"not json", Raises(WrongType, "t:meta:{0}")),
    (("hash", 16, 4), record(code="?"), Raises(WrongType)),
], ids=["layout", "partitions", "item-size", "foreign", "unknown-code"])
def test_open_refuses_a_record_it_does_not_match(args: tuple[Any, ...], stored: bytes, error: Raises) -> None:
    layout, partitions, size = args
    check(SetCore.open("t", layout, 1000, size, partitions, False, LIMITS, False), [[("GET", stored)]], error)


@pytest.mark.parametrize(("name", "layout"), [("a{b", "hash"), ("", "hash"), ("t", "bitmap")])
def test_open_refuses_bad_arguments_before_anything_is_sent(name: str, layout: str) -> None:
    check(SetCore.open(name, layout, 1000, 4, 16, False, LIMITS, False), [], Raises(ValueError))
