"""The compact-set contract: every layout, on every server present and on a cluster, behaves
like a Python set under a random mix of operations; plus atomic CAS under threads and
processes, bad input (nothing written), name collisions (the other key untouched),
reopening, and stats naming partitions that left the listpack."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import random
import threading
import uuid
import zlib
from typing import Any

import pytest
import redis
import redis.asyncio

from densekv.errors import BadItem, SetMismatch, WrongType
from densekv.sets import AsyncCompactSet, CompactSet
from densekv.sets.compact import limits_from_probe
from densekv.sets.layouts import DenseSplitHash
from densekv.tools.server.process import ServerProcess

# (layout, partitions): the seed's layouts at a couple of partition counts, and dense
SPECS = [("flat", 8), ("set", 1), ("set", 7), ("hash", 16), ("zset", 4), ("dense", None),
         ("dense-hash", None), ("dense-set", None)]


def specs_for(client: Any) -> list[tuple[str, int | None]]:
    listpack_sets = limits_from_probe(client).listpack_sets
    return [s for s in SPECS if s[0] != "dense-set" or listpack_sets]


def pool(rng: random.Random, n: int = 60) -> list[Any]:
    """Items in every accepted form (some equal to others in another form)."""
    out: list[Any] = []
    for i in range(n):
        raw = rng.getrandbits(128).to_bytes(16, "big")
        out.append(rng.choice([raw, raw.hex(), uuid.UUID(bytes=raw), int.from_bytes(raw, "big"), i]))
    out.append(uuid.UUID(bytes=out[0] if isinstance(out[0], bytes) else bytes(16)))
    return out


def canon(item: Any) -> bytes:
    from densekv.sets.items import ItemCodec

    return ItemCodec(16, spread=False).canonical(item)


def run_against_model(s: CompactSet, seed: int, steps: int = 150, items: list[Any] | None = None) -> None:
    rng = random.Random(seed)
    items = items if items is not None else pool(rng)
    model: set[bytes] = set()
    for i in range(steps):
        op = rng.choices(["add", "add_many", "in", "contains_many", "remove", "len", "iter", "clear", "bad"],
                         weights=[25, 10, 15, 8, 12, 5, 4, 1, 3])[0]
        where = f"seed {seed} step {i} {op} ({s.layout}, {s.partitions} partitions)"
        if op == "add":
            item = rng.choice(items)
            assert s.add(item) == (canon(item) not in model), where
            model.add(canon(item))
        elif op == "add_many":
            batch = rng.sample(items, rng.randint(0, 12)) * rng.choice([1, 1, 2])
            want = []
            for item in batch:
                want.append(canon(item) not in model)
                model.add(canon(item))
            assert s.add_many(batch) == want, where
        elif op == "in":
            item = rng.choice(items)
            assert (item in s) == (canon(item) in model), where
        elif op == "contains_many":
            batch = rng.sample(items, rng.randint(0, 15))
            assert s.contains_many(batch) == [canon(x) in model for x in batch], where
        elif op == "remove":
            item = rng.choice(items)
            assert s.remove(item) == (canon(item) in model), where
            model.discard(canon(item))
        elif op == "len":
            assert len(s) == len(model), where
        elif op == "iter":
            got = list(s)
            assert len(got) == len(set(got)) and set(got) == model, where
        elif op == "clear":
            s.clear()
            model.clear()
        elif op == "bad":
            with pytest.raises(BadItem):
                s.add(rng.choice([b"short", "not hex", -5, 3.0]))
            with pytest.raises(BadItem):
                assert "not hex" not in s
    assert set(s) == model and len(s) == len(model)


def test_every_layout_matches_the_model(client: redis.Redis, server_name: str) -> None:
    for layout, partitions in specs_for(client):
        s = CompactSet(client, f"m-{layout}-{partitions}", layout=layout, expected=300, partitions=partitions).open()
        run_against_model(s, seed=zlib.crc32(f"{server_name} {layout} {partitions}".encode()) & 0xFFFF)


def test_every_layout_matches_the_model_on_a_cluster(cluster_client: redis.RedisCluster) -> None:
    for layout, partitions in specs_for(cluster_client):
        s = CompactSet(cluster_client, f"c-{layout}-{partitions}", layout=layout, expected=300, partitions=partitions).open()
        run_against_model(s, seed=11, steps=100)


def test_async_twin_matches(server: ServerProcess) -> None:
    async def main() -> None:
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        await client.flushall()
        for layout in ("dense", "flat"):
            s = AsyncCompactSet(client, f"a{layout}", layout=layout, expected=100)
            a, b = bytes(16), b"\x01" * 16
            assert await s.add(a) and not await s.add(a)
            assert await s.add_many([a, b, b]) == [False, True, False]
            assert await s.contains(b) and not await s.contains(b"\x02" * 16)
            assert await s.contains_many([a, b"\x03" * 16]) == [True, False]
            assert await s.count() == 2
            assert {x async for x in s} == {a, b}
            assert await s.remove(a) and not await s.remove(a)
            stats = await s.stats()
            assert stats["items"] == 1
            await s.clear()
            assert await s.count() == 0
        # the sync twin sees the same set
        sync = CompactSet(redis.Redis(host="127.0.0.1", port=server.port), "adense").open()
        assert sync.partitions == (await AsyncCompactSet(client, "adense").ready()).layout.partitions
        await client.aclose()

    asyncio.run(main())


def colliding_items(s: CompactSet, rng: random.Random) -> list[bytes]:
    """Items of a split-field dense hash (spread=False) that share partitions and field
    prefixes and differ only in the low bits: the long form and its mark get exercised."""
    lay = s._core.layout
    assert isinstance(lay, DenseSplitHash) and lay.low_bits >= 3, lay.describe()
    out = []
    for p in range(min(2, lay.partitions)):
        for prefix in (0, rng.getrandbits(8 * lay.field_bytes - 1)):
            for low in rng.sample(range(1 << lay.low_bits), 7):
                out.append(lay.radix.join(p, (prefix << lay.low_bits) | low))
    return out


def test_dense_hash_items_sharing_a_field_match_the_model(client: redis.Redis, server_name: str) -> None:
    for partitions in (3, 700):
        s = CompactSet(client, f"col{partitions}", layout="dense-hash", partitions=partitions, spread=False).open()
        items = colliding_items(s, random.Random(partitions))
        assert all(s.add_many(items)) and len(s) == len(items) == len(set(items))
        lay = s._core.layout
        assert isinstance(lay, DenseSplitHash)
        fields = [f for k in client.scan_iter(match=f"col{partitions}:dq*") for f in client.hkeys(k)]
        # one short field per (partition, prefix), every other item in the long form
        width = lay.field_bytes
        assert sorted(map(len, fields)) == [width] * 4 + [width + 1] * (len(items) - 4)
        assert sorted(s) == sorted(items) and all(s.contains_many(items))
        for item in items[::-1]:  # removing marked short items promotes their long forms
            assert s.remove(item) and item not in s
            assert s.add_many([item, item]) == [True, False] and item in s
            assert s.remove(item)
        assert len(s) == 0 and list(client.scan_iter(match=f"col{partitions}:dq*")) == []
        run_against_model(s, seed=partitions, steps=300, items=items)


def test_dense_hash_collisions_on_a_cluster(cluster_client: redis.RedisCluster) -> None:
    s = CompactSet(cluster_client, "colc", layout="dense-hash", partitions=5, spread=False).open()
    run_against_model(s, seed=3, steps=200, items=colliding_items(s, random.Random(3)))


# --- atomic CAS: exactly one True per item among concurrent adders ------------------------


def _adder(port: int, layout: str, items: list[bytes], out: Any) -> None:
    s = CompactSet(redis.Redis(host="127.0.0.1", port=port), f"cas-{layout}", layout=layout, expected=1000).open()
    out.put([s.add(x) for x in items])


@pytest.mark.parametrize("layout", ["dense", "dense-hash", "flat", "zset"])
def test_concurrent_adders_see_exactly_one_true(server: ServerProcess, layout: str) -> None:
    if layout == "dense-hash" and not limits_from_probe(server.client()).listpack_sets:
        pytest.skip("dense is the split-field hash on this server: tested as 'dense'")
    server.client().flushall()
    rng = random.Random(5)
    items = [rng.getrandbits(128).to_bytes(16, "big") for _ in range(150)]
    CompactSet(server.client(), f"cas-{layout}", layout=layout, expected=1000).open()  # record the layout first
    results: list[list[bool]] = []
    lock = threading.Lock()

    def thread_adder(order: list[bytes]) -> None:
        s = CompactSet(server.client(), f"cas-{layout}", layout=layout, expected=1000).open()
        got = dict(zip(order, [s.add(x) for x in order]))
        with lock:
            results.append([got[x] for x in items])

    threads = [threading.Thread(target=thread_adder, args=(random.Random(i).sample(items, len(items)),))
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(sum(col) == 1 for col in zip(*results))

    # processes: a second name, same items
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    layout2 = layout
    CompactSet(server.client(), f"cas-{layout2}", layout=layout2).open().clear()
    procs = [ctx.Process(target=_adder, args=(server.port, layout2, items, queue)) for _ in range(3)]
    for p in procs:
        p.start()
    got = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert len(got) == 3 and all(sum(col) == 1 for col in zip(*got))


def test_concurrent_adders_of_items_sharing_fields_see_exactly_one_true(server: ServerProcess) -> None:
    """The split hash's add: HSETNX + HGET, and the script when another item holds the
    field; threads adding items that share fields (the script path) still get one True."""
    client = server.client()
    client.flushall()
    s = CompactSet(client, "cas-col", layout="dense-hash", partitions=3, spread=False).open()
    items = colliding_items(s, random.Random(11))
    results: list[list[bool]] = []
    lock = threading.Lock()

    def thread_adder(order: list[bytes]) -> None:
        mine = CompactSet(server.client(), "cas-col", layout="dense-hash", partitions=3, spread=False).open()
        got = dict(zip(order, [mine.add(x) for x in order]))
        with lock:
            results.append([got[x] for x in items])

    threads = [threading.Thread(target=thread_adder, args=(random.Random(i).sample(items, len(items)),))
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(sum(col) == 1 for col in zip(*results))
    assert len(s) == len(items) and all(s.contains_many(items))


# --- bad input and collisions ------------------------------------------------------------


def test_bad_items_write_nothing(client: redis.Redis) -> None:
    s = CompactSet(client, "bad", expected=100).open()
    before = client.dbsize()
    with pytest.raises(BadItem):
        s.add(b"x" * 15)
    with pytest.raises(BadItem):
        s.add_many([bytes(16), b"\x01" * 16, "nope"])
    with pytest.raises(BadItem):
        s.remove(object())
    with pytest.raises(BadItem):
        CompactSet(client, "bad8", item_size=8).open().add(uuid.uuid4())
    assert client.dbsize() == before + 1  # only bad8's layout record
    assert len(s) == 0
    with pytest.raises(ValueError):
        CompactSet(client, "x{y}").open()
    with pytest.raises(ValueError):
        CompactSet(client, "x", layout="nope").open()


@pytest.mark.parametrize("layout", ["dense", "hash", "flat"])
def test_a_key_of_another_type_is_an_error_and_left_untouched(client: redis.Redis, layout: str) -> None:
    s = CompactSet(client, f"wt-{layout}", layout=layout, expected=100, spread=False).open()
    item = bytes(16)
    key, _ = s._core.layout.locate(s._core.codec.encode(item))
    client.rpush(key, "theirs")
    with pytest.raises(WrongType):
        s.add(item)
    with pytest.raises(WrongType):
        s.add_many([item])
    with pytest.raises(WrongType):
        s.remove(item)
    assert client.lrange(key, 0, -1) == [b"theirs"]


def test_a_name_taken_by_another_key_is_an_error(client: redis.Redis) -> None:
    client.hset("taken:meta:{0}", "a", "b")
    with pytest.raises(WrongType):
        CompactSet(client, "taken").open()
    client.set("junk:meta:{0}", "not ours")
    with pytest.raises(WrongType):
        CompactSet(client, "junk").open()
    assert client.hgetall("taken:meta:{0}") == {b"a": b"b"} and client.get("junk:meta:{0}") == b"not ours"


def test_reopening_uses_the_recorded_layout(client: redis.Redis) -> None:
    s = CompactSet(client, "re", layout="hash", expected=100, partitions=32).open()
    s.add(bytes(16))
    again = CompactSet(client, "re", expected=10_000_000).open()  # auto: adopts what is recorded
    assert again.layout == "hash" and again.partitions == 32 and bytes(16) in again
    with pytest.raises(SetMismatch):
        CompactSet(client, "re", layout="dense").open()
    with pytest.raises(SetMismatch):
        CompactSet(client, "re", layout="hash", partitions=64).open()
    with pytest.raises(SetMismatch):
        CompactSet(client, "re", item_size=8).open()


def test_a_set_recorded_with_the_first_dense_hash_still_opens(client: redis.Redis) -> None:
    # sets made before the split-field hash: code "dh", field = all of q, value 1
    client.set("old:meta:{0}", json.dumps({"v": 1, "layout": "dense", "code": "dh", "partitions": 300,
                                           "item_size": 16, "spread": True}))
    s = CompactSet(client, "old", layout="dense-hash").open()
    assert type(s._core.layout).__name__ == "DenseHash" and s.partitions == 300
    run_against_model(s, seed=4, steps=80)
    assert CompactSet(client, "old", layout="dense").open().partitions == 300
    with pytest.raises(SetMismatch):
        CompactSet(client, "old", layout="dense-set").open()


def test_stats_name_partitions_that_left_the_listpack(client: redis.Redis) -> None:
    limits = limits_from_probe(client)
    s = CompactSet(client, "st", layout="hash", partitions=2).open()
    n = limits.hash_max_listpack_entries * 2 + 50  # on average over the limit in each
    rng = random.Random(9)
    items = [rng.getrandbits(128).to_bytes(16, "big") for _ in range(n)]
    assert all(s.add_many(items))
    stats = s.stats()
    assert stats["items"] == n == len(s)
    assert stats["converted_count"] >= 1 and stats["encodings"].get("hashtable", 0) >= 1
    assert stats["warnings"]
    assert stats["fullest_partition"]["items"] > limits.hash_max_listpack_entries
    assert sorted(s) == sorted(items)  # iteration over hashtable partitions: each once
    d = CompactSet(client, "st2", expected=1000).open()
    d.add_many(items[:1000])
    assert d.stats()["converted_count"] == 0 and set(d.stats()["encodings"]) == {"listpack"}
    assert "reason" in d.explain() and d.explain()["layout"] == "dense"
