"""Batches and transactions of CompactMap, on every server present and on the cluster:
results equal the same operations done one by one; a transaction is atomic (a reader in
another connection never sees half of one) and refuses what it cannot do atomically
before anything is sent; the batch fast path (grouped HMGET/HSET, cached locate, out-of-
line values read on demand) keeps every guarantee of the single operations. The
comparisons run in both TTL modes (ttl_mode "field" where the server has hash field TTL,
with a clock that does not move: see test_maps.py)."""

from __future__ import annotations

import asyncio
import math
import random
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import redis
import redis.asyncio
from redis.crc import key_slot

from densekv.capabilities import probe
from densekv.errors import DecodeError, KeyTooLong, NotAnInteger, TransactionError, ValueTooLarge
from densekv.flows import drive
from densekv.maps import AsyncCompactMap, CompactMap
from densekv.maps.buckets import locate
from densekv.maps.fast import run_fast
from densekv.maps.queue import QueuedGet
from densekv.tools.server.process import ServerProcess

TTL_MODES = ["packed", "field"]


def need_ttl_mode(client: Any, ttl_mode: str) -> None:
    """Skip a field-TTL case on a server without hash field TTL (Redis 7.0, Valkey 8.0)."""
    if ttl_mode == "field" and probe(client).field_ttl == "none":
        pytest.skip("this server has no hash field TTL (HEXPIRE): ttl_mode='field' is refused here")


class Clock:
    """One clock for the maps compared, moved by the test so that items expire (not in
    ttl_mode "field", where the server's clock decides: 1000 s ahead of it, still)."""

    def __init__(self, ttl_mode: str = "packed") -> None:
        self.now = float(int(time.time()) + (1000 if ttl_mode == "field" else 0))
        self.moves = ttl_mode != "field"

    def __call__(self) -> float:
        return self.now


fixed_clock = Clock()


MIXED_KEYS = ["user:1", "user:2", "user:1613", "user:007", "post:abc", "x", "日本:5", "img99"]
INT_KEYS = ["user:100", "user:101"]
ONE_BUCKET_KEYS = ["user:1", "user:2", "user:3", "user:4"]  # expected=50: one bucket per prefix
VALUES: list[Any] = [0, -7, 2**63 - 1, "", "short", "ünï", b"\x00bin", {"a": [1, 2]}, None, 1.5,
                     "x" * 100, b"y" * 300, "z" * 55]


def random_ops(rng: random.Random, keys: list[str], n: int) -> list[tuple[str, tuple[Any, ...]]]:
    """(method, args) pairs; incr only on INT_KEYS, which only ever hold integers."""
    ops: list[tuple[str, tuple[Any, ...]]] = []
    every = keys + INT_KEYS

    def value(key: str) -> Any:
        return rng.randrange(-1000, 1000) if key in INT_KEYS else rng.choice(VALUES)

    for _ in range(n):
        key = rng.choice(every)
        op = rng.choices(["set", "get", "mget", "mset", "setnx", "getset", "incrby", "delete", "exists",
                          "ttl", "expire", "persist"], weights=[20, 20, 6, 5, 4, 4, 5, 5, 4, 4, 3, 2])[0]
        if op == "set":
            ops.append((op, (key, value(key), rng.choice([None, None, 100]))))
        elif op in ("get", "exists", "ttl", "persist"):
            ops.append((op, (key,)))
        elif op == "mget":
            ops.append((op, (rng.sample(every, 3),)))
        elif op == "mset":
            ops.append((op, ({k: value(k) for k in rng.sample(every, 3)},)))
        elif op in ("setnx", "getset"):
            ops.append((op, (key, value(key))))
        elif op == "incrby":
            ops.append((op, (rng.choice(INT_KEYS), rng.choice([1, -3, 1000]))))
        elif op == "delete":
            ops.append((op, tuple(rng.sample(every, 2))))
        else:
            ops.append((op, (key, rng.choice([5, 50]))))
    return ops


def one_by_one(m: CompactMap, ops: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
    return [getattr(m, name)(*args) for name, args in ops]


def batched(m: CompactMap, ops: list[tuple[str, tuple[Any, ...]]], transaction: bool) -> list[Any]:
    b = m.batch(transaction=transaction)
    futures = [getattr(b, name)(*args) for name, args in ops]
    results = b.execute()
    assert [f.result() for f in futures] == results
    return results


def state(m: CompactMap, keys: list[str]) -> tuple[dict[str, Any], list[int]]:
    return dict(m.items()), [m.ttl(k) for k in keys + INT_KEYS]


def compare(make: Callable[[str], CompactMap], keys: list[str], seed: int, rounds: int, transaction: bool,
            clock: Clock = fixed_clock) -> None:
    rng = random.Random(seed)
    ref, m = make("ref"), make("bat")
    for r in range(rounds):
        jump = rng.choice([0, 0, 0, 30, 60])  # ttls of 5, 50 and 100 s run out
        if clock.moves:
            clock.now += jump
        ops = random_ops(rng, keys, rng.randrange(1, 12))
        want = one_by_one(ref, ops)
        got = batched(m, ops, transaction)
        assert got == want, (r, ops)
        assert state(m, keys) == state(ref, keys), (r, ops)


def _clock(ttl_mode: str) -> Clock:
    return fixed_clock if ttl_mode == "packed" else Clock(ttl_mode)


@pytest.mark.parametrize("ttl_mode", TTL_MODES)
@pytest.mark.parametrize("transaction", [False, True])
def test_batches_equal_the_same_ops_one_by_one(client: redis.Redis, transaction: bool, ttl_mode: str) -> None:
    need_ttl_mode(client, ttl_mode)
    clock = _clock(ttl_mode)

    def make(ns: str) -> CompactMap:
        return CompactMap(client, ns, expected=5000, aliases={"user": "u"}, clock=clock, ttl_mode=ttl_mode).open()

    compare(make, MIXED_KEYS, seed=7, rounds=40, transaction=transaction, clock=clock)


@pytest.mark.parametrize("ttl_mode", TTL_MODES)
@pytest.mark.parametrize("transaction", [False, True])
def test_batches_equal_the_same_ops_one_by_one_on_a_cluster(cluster_client: redis.RedisCluster,
                                                            transaction: bool, ttl_mode: str) -> None:
    clock = _clock(ttl_mode)

    def make(ns: str) -> CompactMap:
        return CompactMap(cluster_client, f"c{int(transaction)}{ns}", expected=50, clock=clock, ttl_mode=ttl_mode).open()

    # a cluster transaction stays in one slot: these keys share one bucket
    compare(make, ONE_BUCKET_KEYS, seed=8, rounds=25, transaction=transaction, clock=clock)


def test_a_read_before_a_write_of_the_same_key_sees_the_old_value(client: redis.Redis) -> None:
    m = CompactMap(client, "rw", expected=5000).open()
    m.set("user:1", "a" * 200)  # out of line
    m.set("user:2", "b" * 200)
    for transaction in (False, True):
        with m.batch(transaction=transaction) as b:
            old1 = b.get("user:1")
            b.set("user:1", "c" * 300)
            old2 = b.mget(["user:2", "user:1"])
            b.delete("user:2")
            new1 = b.get("user:1")
        assert old1.result() == "a" * 200 and old2.result() == ["b" * 200, "c" * 300]
        assert new1.result() == "c" * 300 and m.get("user:2") is None
        m.set("user:1", "a" * 200)
        m.set("user:2", "b" * 200)


def test_an_out_of_line_value_replaced_between_round_trips_is_read_again(client: redis.Redis) -> None:
    """The batch reads an out-of-line value in a second round trip; if another client
    replaced the item and its old key was reclaimed in between, the item is read again
    (never reported missing)."""
    m = CompactMap(client, "race", expected=5000).open()
    m.set("user:1", "v" * 200)
    loc = m._core.locate("user:1")
    flow = run_fast(m._core, [QueuedGet("user:1")])
    replies = m._ex.run_many(next(flow))  # the bucket read: the marker
    other = CompactMap(client, "race").open()
    other.set("user:1", "now inline")
    client.delete(loc.ool)  # what sweep() reclaims once no bucket points there
    try:
        while True:
            replies = m._ex.run_many(flow.send(replies))
    except StopIteration as done:
        assert done.value == ["now inline"]


def test_the_cached_locate_agrees_with_buckets_locate(client: redis.Redis) -> None:
    rng = random.Random(3)
    m = CompactMap(client, "loc", expected=20_000, aliases={"user": "u"}).open()
    core = m._core
    keys = ["user:0", "user:00", "user:007", "user:7", "user:" + "9" * 18, "user:" + "9" * 19, "user:",
            "a1", "1", "", "x:0001", "日本:12", "user:1:2", "1613", "user:1613", "user:3226"]
    keys += [f"{rng.choice(['user:', 'p', 'a:b:', '', 'u0'])}{rng.randrange(10**rng.randrange(1, 19))}"
             for _ in range(3000)]
    keys.append("k" * 300)  # too long for a field: refused by both
    for _ in range(2):  # cold, then cached
        for k in keys:
            try:
                want = locate("loc", k, core.geo, core.aliases)
            except KeyTooLong:
                with pytest.raises(KeyTooLong):
                    core.place(k)
                continue
            assert core.locate(k) == want, k
    before = client.dbsize()
    with pytest.raises(KeyTooLong):
        m.mset({"user:1": 1, "k" * 300: 1})
    assert client.dbsize() == before


def test_a_transaction_is_atomic_for_a_concurrent_reader(server: ServerProcess) -> None:
    """A writer sets 150 items spread over many buckets (out-of-line values, a command
    stream far larger than one server read) to one round number per transaction; a reader
    in another connection reads them all in transactions and never sees two rounds."""
    writer_client, reader_client = server.client(), server.client()
    writer_client.flushall()
    keys = [f"user:{i}" for i in range(150)]
    w = CompactMap(writer_client, "atom", expected=5000).open()
    r = CompactMap(reader_client, "atom").open()
    w.mset({k: "0" * 300 for k in keys})
    done = threading.Event()
    seen: list[set[Any]] = []

    def read() -> None:
        while not done.is_set():
            b = r.batch(transaction=True)
            fut = b.mget(keys)
            b.execute()
            seen.append(set(fut.result()))

    t = threading.Thread(target=read)
    t.start()
    try:
        for n in range(1, 40):
            with w.batch(transaction=True) as b:
                for k in keys:
                    b.set(k, str(n) * 300)
    finally:
        done.set()
        t.join()
    assert seen and all(len(s) == 1 for s in seen)


def test_a_transaction_is_atomic_on_a_cluster(cluster_client: redis.RedisCluster, cluster: Any) -> None:
    w = CompactMap(cluster_client, "catom", expected=50).open()
    reader = redis.RedisCluster(host="127.0.0.1", port=cluster_client.get_default_node().port)
    r = CompactMap(reader, "catom").open()
    keys = [f"user:{i}" for i in range(100)]  # one bucket (expected=50), out-of-line values
    w.mset({k: "0" * 400 for k in keys})
    done = threading.Event()
    seen: list[set[Any]] = []

    def read() -> None:
        while not done.is_set():
            b = r.batch(transaction=True)
            fut = b.mget(keys)
            b.execute()
            seen.append(set(fut.result()))

    t = threading.Thread(target=read)
    t.start()
    try:
        for n in range(1, 30):
            with w.batch(transaction=True) as b:
                for k in keys:
                    b.set(k, str(n) * 400)
    finally:
        done.set()
        t.join()
        reader.close()
    assert seen and all(len(s) == 1 for s in seen)


def test_a_cluster_transaction_over_several_slots_is_refused_before_sending(
        cluster_client: redis.RedisCluster) -> None:
    m = CompactMap(cluster_client, "cslot", expected=50).open()
    a, b = m._core.locate("user:1").bucket, m._core.locate("post:1").bucket
    assert key_slot(a) != key_slot(b)
    batch = m.batch(transaction=True)
    batch.set("user:1", 1)
    batch.set("post:1", 2)
    with pytest.raises(TransactionError, match="cluster slots"):
        batch.execute()
    assert m.get("user:1") is None and m.get("post:1") is None
    with m.batch(transaction=True) as ok:  # one bucket: fine
        ok.set("user:1", 1)
        ok.incr("user:2")
    assert m.mget(["user:1", "user:2"]) == [1, 1]


def test_a_transaction_during_a_migration_is_refused_before_sending(client: redis.Redis) -> None:
    client.set("user:5", "old")
    m = CompactMap(client, "mig", expected=5000).open()

    class Stop(Exception):
        pass

    def stop(counts: dict[str, int]) -> None:
        raise Stop

    client.set("user:6", "also old")
    with pytest.raises(Stop):
        m.migrate_from("user:*", batch=1, progress=stop)
    m = CompactMap(client, "mig").open()
    assert m.explain()["fallback"] == "user:*"
    b = m.batch(transaction=True)
    b.set("user:7", 1)
    with pytest.raises(TransactionError, match="migration"):
        b.execute()
    assert m.get("user:7") is None
    with m.batch() as plain:  # a batch without transaction reads through the fallback
        got = plain.mget(["user:5", "user:6"])
    assert got.result() == [b"old", b"also old"]


def test_refusals_in_a_batch_happen_before_anything_is_written(client: redis.Redis) -> None:
    m = CompactMap(client, "ref", expected=100, out_of_line=False).open()
    for transaction in (False, True):
        before = client.dbsize()
        b = m.batch(transaction=transaction)
        b.set("user:1", 1)
        b.incr("user:2")
        b.set("user:3", "x" * 100)
        with pytest.raises(ValueTooLarge):
            b.execute()
        assert client.dbsize() == before and m.mget(["user:1", "user:2"]) == [None, None]


def test_errors_in_a_batch_name_the_key(client: redis.Redis) -> None:
    m = CompactMap(client, "err", expected=100).open()
    m.mset({"user:1": "fine", "user:2": "fine", "user:3": 5, "user:4": "x" * 100})
    loc = m._core.locate("user:2")
    client.hset(loc.bucket, loc.field, b"\x13not zlib")
    for transaction in (False, True):
        b = m.batch(transaction=transaction)
        b.get("user:1")
        b.mget(["user:4", "user:2"])
        with pytest.raises(DecodeError, match="user:2"):
            b.execute()
    m.set("user:2", "text")
    b = m.batch(transaction=True)
    b.incr("user:3")
    b.incr("user:2")
    with pytest.raises(NotAnInteger, match="user:2"):
        b.execute()
    assert m.get("user:3") == 6  # as in a redis transaction, the other ops ran


def test_dictionaries_are_loaded_after_the_transaction(client: redis.Redis) -> None:
    rng = random.Random(2)
    docs = [{"id": i, "name": f"name {rng.randrange(10**6)}", "bio": "lorem ipsum dolor sit amet " * 3}
            for i in range(200)]
    m = CompactMap(client, "docs", codec="zstd", expected=1000).open()
    m.train(docs, size=2048)
    m.mset({f"doc:{i}": d for i, d in enumerate(docs)})
    for transaction in (False, True):
        fresh = CompactMap(client, "docs").open()  # no dictionary loaded yet
        with fresh.batch(transaction=transaction) as b:
            got = b.mget([f"doc:{i}" for i in range(200)])
            one = b.getset("doc:0", "replaced")
        assert got.result() == docs and one.result() == docs[0]
        m.set("doc:0", docs[0])


@pytest.mark.parametrize("ttl_mode", TTL_MODES)
def test_async_batches_and_transactions(server: ServerProcess, ttl_mode: str) -> None:
    with server.client() as c:
        need_ttl_mode(c, ttl_mode)
    clock = _clock(ttl_mode)

    async def main() -> None:
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        await client.flushall()
        sync = CompactMap(server.client(), "ref", expected=5000, clock=clock, ttl_mode=ttl_mode).open()
        m = AsyncCompactMap(client, "am", expected=5000, clock=clock, ttl_mode=ttl_mode)
        await m.ready()
        rng = random.Random(4)
        for r in range(20):
            ops = random_ops(rng, MIXED_KEYS, rng.randrange(1, 10))
            want = one_by_one(sync, ops)
            b = m.batch(transaction=bool(r % 2))
            futures = [getattr(b, name)(*args) for name, args in ops]
            assert await b.execute() == want == [f.result() for f in futures], (r, ops)
        assert await m.mget(MIXED_KEYS) == sync.mget(MIXED_KEYS)
        await client.aclose()

    asyncio.run(main())


def test_big_batches_group_commands_and_read_back(client: redis.Redis) -> None:
    m = CompactMap(client, "big", expected=20_000, ttl=None).open()
    items = {f"user:{i}": (i if i % 3 else f"s{i}" * (i % 40)) for i in range(5000)}
    started = time.monotonic()
    with m.batch() as b:
        b.mset(items)
        b.set("user:77", "late", ttl=100)
    want = dict(items, **{"user:77": "late"})
    b = m.batch()
    futures = [b.get(k) for k in want]
    b.execute()
    assert [f.result() for f in futures] == list(want.values())
    assert drive(m._core.get_many(list(want)), m._ex) == list(want.values())
    # whole seconds left of 100, less what the reads above took (seconds on a busy machine)
    ttl, took = m.ttl("user:77"), time.monotonic() - started
    assert ttl is not None and 99 - math.ceil(took) <= ttl <= 100
    assert client.object("encoding", m._core.locate("user:1").bucket) == b"listpack"


def test_batch_reads_decode_raw_values_like_single_reads(client: redis.Redis) -> None:
    """The batch decodes integers itself (the common case): odd integer-like bytes planted
    in a bucket read back (or fail with DecodeError) exactly as through m.get."""
    m = CompactMap(client, "raw", expected=100).open()
    raws = [b"0", b"-0", b"007", b"-", b"12-3", b"9223372036854775807", b"9223372036854775808",
            b"-9223372036854775808", b"-9223372036854775809", b"1" * 30, b"-12", b"5 ", b"1_0", b"\x0e\x00",
            b"\x0f", b"\x02text"]
    for i, raw in enumerate(raws):
        loc = m._core.locate(f"user:{i}")
        client.hset(loc.bucket, loc.field, raw)

    def outcome(read: Callable[[], Any]) -> Any:
        try:
            return ("value", read())
        except DecodeError as exc:
            return ("error", exc.key)

    def batched_get(key: str) -> Any:
        b = m.batch()
        b.get(key)
        return b.execute()[0]

    for i, raw in enumerate(raws):
        key = f"user:{i}"
        assert outcome(partial(batched_get, key)) == outcome(partial(m.get, key)), raw
