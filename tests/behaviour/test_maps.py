"""The compact map contract: on every server present and on a cluster, CompactMap behaves
like a small reference model (a dict with expiry times) under a random mix of operations,
one by one and in batches, in both TTL modes (packed; field where the server has hash
field TTL); plus the safety rules (buckets stay listpacks, decode errors name the key,
geometry and aliases fixed in the server, refusal before writing).

The model's clock is the maps' clock. In ttl_mode "packed" the test moves it, so items
expire; in "field" the server expires items on its own clock, which a test cannot move:
there the clock is set 1000 s ahead of the server's and never moved, so nothing expires
during a run and every TTL reads exactly as the model says; test_map_fieldttl.py checks
that the server really expires items."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
import redis.asyncio

from densekv.capabilities import probe
from densekv.errors import DecodeError, KeyTooLong, MapConfigError, NotAnInteger, ValueTooLarge
from densekv.maps import AsyncCompactMap, CompactMap
from densekv.tools.server.process import ServerProcess
from tests.behaviour.seeds import shows_seed, stable_seed

TTL_MODES = ["packed", "field"]


class Clock:
    def __init__(self, ttl_mode: str = "packed") -> None:
        self.now = float(int(time.time()) + (1000 if ttl_mode == "field" else 0))
        self.moves = ttl_mode != "field"  # see the module docstring

    def __call__(self) -> float:
        return self.now


def need_ttl_mode(client: Any, ttl_mode: str) -> None:
    """Skip a field-TTL case on a server without hash field TTL (Redis 7.0, Valkey 8.0)."""
    if ttl_mode == "field" and probe(client).field_ttl == "none":
        pytest.skip("this server has no hash field TTL (HEXPIRE): ttl_mode='field' is refused here")


@dataclass
class Model:
    """The reference: key -> (value, expiry or None)."""

    clock: Clock
    items: dict[str, tuple[Any, int | None]] = field(default_factory=dict)

    def now(self) -> int:
        return int(self.clock())

    def live(self, key: str) -> tuple[Any, int | None] | None:
        it = self.items.get(key)
        if it is None or (it[1] is not None and it[1] <= self.now()):
            self.items.pop(key, None)
            return None
        return it

    def get(self, key: str) -> Any:
        it = self.live(key)
        return None if it is None else it[0]

    def set(self, key: str, value: Any, ttl: int | None) -> None:
        self.items[key] = (value, None if ttl is None else self.now() + ttl)

    def ttl(self, key: str) -> int:
        it = self.live(key)
        return -2 if it is None else -1 if it[1] is None else it[1] - self.now()


KEYS = ["user:1", "user:7", "user:007", "user:0", "user:123456789", "post:abc", "x", "", "日本:5",
        "u:7", "#h", "a:b:c:d", "k" * 40, "img99", "user:18446744073709551616"]
VALUES = [0, 1, -7, 2**31 - 1, -(2**63), 2**63 - 1, "", "short", "ünï", b"\x00\xffbin", {"a": [1, 2]},
          [1, "x"], None, 1.5, True, "x" * 100, b"y" * 300, "z" * 55, 2**64 - 1]


def one_op(m: CompactMap | Any, model: Model, rng: random.Random, where: str, batch: Any = None) -> Any:
    """Run (or queue, with `batch`) one random op; returns a check to call with its result."""
    target = batch if batch is not None else m
    key = rng.choice(KEYS)
    op = rng.choices(["set", "get", "setnx", "getset", "incr", "delete", "exists", "mget", "mset",
                      "ttl", "expire", "persist"],
                     weights=[20, 20, 5, 5, 8, 6, 5, 4, 3, 5, 5, 2])[0]
    where = f"{where} {op} {key!r}"
    if op == "set":
        value, ttl = rng.choice(VALUES), rng.choice([None, None, 10, 100])
        model.set(key, value, ttl)
        return target.set(key, value, ttl=ttl), lambda r: r is True
    if op == "get":
        want = model.get(key)
        return target.get(key), lambda r: r == want and type(r) is type(want)
    if op == "setnx":
        value, ttl = rng.choice(VALUES), rng.choice([None, 10])
        absent = model.live(key) is None
        if absent:
            model.set(key, value, ttl)
        return target.setnx(key, value, ttl=ttl), lambda r: r == absent
    if op == "getset":
        value = rng.choice(VALUES)
        old = model.get(key)
        model.set(key, value, None)
        return target.getset(key, value), lambda r: r == old
    if op == "incr":
        it = model.live(key)
        delta = rng.choice([1, -3, 1000])
        if it is not None and (type(it[0]) is not int or not -(2**63) <= it[0] + delta < 2**63):
            return None  # NotAnInteger is tested on its own
        model.items[key] = ((0 if it is None else it[0]) + delta, None if it is None else it[1])
        want = model.items[key][0]
        return target.incrby(key, delta), lambda r: r == want
    if op == "delete":
        keys = rng.sample(KEYS, 2)
        n = sum(1 for k in keys if model.live(k) is not None)
        for k in keys:
            model.items.pop(k, None)
        return target.delete(*keys), lambda r: r == n
    if op == "exists":
        want = model.live(key) is not None
        return target.exists(key), lambda r: r == want
    if op == "mget":
        keys = rng.sample(KEYS, 4)
        want = [model.get(k) for k in keys]
        return target.mget(keys), lambda r: r == want
    if op == "mset":
        items = {k: rng.choice(VALUES) for k in rng.sample(KEYS, 3)}
        for k, v in items.items():
            model.set(k, v, None)
        return target.mset(items), lambda r: r is True
    if op == "ttl":
        want = model.ttl(key)
        return target.ttl(key), lambda r: r == want
    if op in ("expire", "persist"):
        it = model.live(key)
        seconds = rng.choice([5, 50]) if op == "expire" else None
        if it is not None:
            model.items[key] = (it[0], None if seconds is None else model.now() + seconds)
        return target.expire(key, seconds), lambda r: r == (it is not None)
    raise AssertionError(op)


def check_all(m: CompactMap, model: Model, where: str) -> None:
    want = {k: v for k in list(model.items) if (it := model.live(k)) is not None for v in [it[0]]}
    assert dict(m.items()) == want, where
    for key in KEYS:
        assert m.ttl(key) == model.ttl(key), (where, key)


def run_against_model(m: CompactMap, clock: Clock, seed: int, steps: int = 200, batched: bool = False) -> None:
    with shows_seed(seed):
        _run_against_model(m, clock, seed, steps, batched)


def _run_against_model(m: CompactMap, clock: Clock, seed: int, steps: int = 200, batched: bool = False) -> None:
    rng = random.Random(seed)
    model = Model(clock)
    i = 0
    while i < steps:
        where = f"step {i}"
        if rng.random() < 0.08:
            jump = rng.choice([1, 9, 30, 60])
            if clock.moves:
                clock.now += jump
            i += 1
            continue
        if rng.random() < 0.03:
            m.sweep()
            check_all(m, model, where + " after sweep")
            i += 1
            continue
        if batched:
            b = m.batch()
            checks = []
            for _ in range(rng.randrange(1, 8)):
                got = one_op(m, model, rng, where, batch=b)
                if got is not None:
                    checks.append(got)
                i += 1
            results = b.execute()
            assert len(results) == len(checks)
            for (fut, check), r in zip(checks, results):
                assert fut.result() == r and check(r), (where, r)
        else:
            got = one_op(m, model, rng, where)
            if got is not None:
                r, check = got
                assert check(r), (where, r)
            i += 1
    check_all(m, model, "end")


@pytest.mark.parametrize("ttl_mode", TTL_MODES)
@pytest.mark.parametrize("batched", [False, True])
def test_map_matches_the_model(client: redis.Redis, server_name: str, batched: bool, ttl_mode: str) -> None:
    need_ttl_mode(client, ttl_mode)
    clock = Clock(ttl_mode)
    m = CompactMap(client, f"m{int(batched)}", expected=50, aliases={"user": "u", "post": "p"}, clock=clock,
                   ttl_mode=ttl_mode).open()
    assert m.explain()["item_ttl"] == ttl_mode
    run_against_model(m, clock, seed=stable_seed(server_name, batched), batched=batched)


@pytest.mark.parametrize("codec", ["zlib", "msgpack"])
def test_map_matches_the_model_with_other_codecs(client: redis.Redis, codec: str) -> None:
    clock = Clock()
    m = CompactMap(client, "c", codec=codec, expected=50, clock=clock).open()
    run_against_model(m, clock, seed=3, steps=120)


@pytest.mark.parametrize("ttl_mode", TTL_MODES)
def test_map_matches_the_model_on_a_cluster(cluster_client: redis.RedisCluster, ttl_mode: str) -> None:
    clock = Clock(ttl_mode)
    m = CompactMap(cluster_client, "cm", expected=50, aliases={"user": "u"}, clock=clock, ttl_mode=ttl_mode).open()
    run_against_model(m, clock, seed=11, steps=150)
    m = CompactMap(cluster_client, "cb", expected=50, clock=clock, ttl_mode=ttl_mode).open()
    run_against_model(m, clock, seed=12, steps=100, batched=True)


@pytest.mark.parametrize("ttl_mode", TTL_MODES)
def test_async_twin_matches_the_sync_map(server: ServerProcess, ttl_mode: str) -> None:
    with server.client() as c:
        need_ttl_mode(c, ttl_mode)

    async def main() -> None:
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        await client.flushall()
        m = AsyncCompactMap(client, "am", expected=100, ttl_mode=ttl_mode)
        assert await m.set("user:1", 5) and await m.get("user:1") == 5
        assert await m.incrby("user:1", 3) == 8 and await m.incr("user:2") == 1
        assert await m.setnx("user:1", 0) is False and await m.setnx("k", "v", ttl=50)
        assert 0 < await m.ttl("k") <= 50 and await m.ttl("user:1") == -1 and await m.ttl("nope") == -2
        assert await m.getset("k", b"w") == "v" and await m.mget(["k", "user:1", "no"]) == [b"w", 8, None]
        assert await m.mset({"a": "x" * 200, "b": [1]}) and await m.get("a") == "x" * 200
        assert await m.expire("a", 30) and await m.exists("a") and await m.delete("a", "b", "zz") == 2
        async with m.batch() as b:
            f1, f2 = b.get("user:1"), b.incr("user:1")
        assert (f1.result(), f2.result()) == (8, 9)
        assert dict([kv async for kv in m.items()]) == {"user:1": 9, "user:2": 1, "k": b"w"}
        sync = CompactMap(server.client(), "am").open()  # the same data, read by the sync twin
        assert dict(sync.items()) == {"user:1": 9, "user:2": 1, "k": b"w"}
        assert (await m.explain())["item_ttl"] == sync.explain()["item_ttl"] == ttl_mode
        await client.aclose()

    asyncio.run(main())


def test_dict_style_access(client: redis.Redis) -> None:
    m = CompactMap(client, "d", expected=10).open()
    m["user:1"] = {"n": 1}
    assert m["user:1"] == {"n": 1} and "user:1" in m and "user:2" not in m and 5 not in m
    with pytest.raises(KeyError):
        m["user:2"]
    with pytest.raises(KeyError):
        del m["user:2"]
    del m["user:1"]
    assert list(m) == [] and len(m) == 0


def _encodings(client: redis.Redis, ns: str) -> set[bytes]:
    return {client.object("encoding", k) for k in client.scan_iter(match=f"{ns}:[mh]:*")}


def test_large_values_go_out_of_line_and_buckets_stay_listpacks(client: redis.Redis, server_name: str) -> None:
    m = CompactMap(client, "big", expected=1000).open()
    for i in range(300):
        m.set(f"user:{i}", "v" * (i % 130), ttl=None if i % 3 else 100)
    m.expire("user:1", 1000)  # the 5-byte wrapper pushes a 59+ byte value out of line
    m.set("user:59", "w" * 59)
    assert m.expire("user:59", 100) and m.get("user:59") == "w" * 59
    assert _encodings(client, "big") == {b"listpack"}
    assert all(m.get(f"user:{i}") == "v" * (i % 130) for i in range(300) if i != 59)
    ool = sum(1 for _ in client.scan_iter(match="big:om:*"))
    assert ool > 0
    # small values over large ones leave out-of-line keys behind until sweep reclaims them
    for i in range(300):
        m.set(f"user:{i}", i)
    m.sweep()
    assert sum(1 for _ in client.scan_iter(match="big:om:*")) == 0
    assert dict(m.items()) == {f"user:{i}": i for i in range(300)}


def test_sweep_keeps_live_out_of_line_values_whatever_the_key(client: redis.Redis) -> None:
    """Out-of-line keys are named after their bucket's tag and field; keys whose prefix or
    name holds '}' or ':' must not make the sweep read the wrong bucket (and delete a value
    still in use)."""
    m = CompactMap(client, "odd", expected=100).open()
    keys = ["a}b:5", "x}:}y:77", "}:9", "plain}key", "k:}:{z}"]
    for k in keys:
        m.set(k, k * 40)  # over hash-max-listpack-value: out of line
    assert sum(1 for _ in client.scan_iter(match="odd:o*")) == len(keys)
    m.sweep()
    assert {k: m.get(k) for k in keys} == {k: k * 40 for k in keys}
    for k in keys:
        m.set(k, 1)  # now inline: every out-of-line key is garbage
    m.sweep()
    assert sum(1 for _ in client.scan_iter(match="odd:o*")) == 0
    assert {k: m.get(k) for k in keys} == dict.fromkeys(keys, 1)


def test_refusals_happen_before_anything_is_written(client: redis.Redis) -> None:
    m = CompactMap(client, "r", expected=10, out_of_line=False).open()
    m.set("user:1", 1)
    before = client.dbsize()
    with pytest.raises(ValueTooLarge, match="hash-max-listpack-value"):
        m.mset({"user:2": 2, "user:3": "x" * 100})
    with pytest.raises(KeyTooLong):
        m.set("k" * 200, 1)
    with pytest.raises(TypeError):
        m.set(5, 1)  # type: ignore[arg-type]
    assert client.dbsize() == before and m.get("user:2") is None


def test_incr_on_a_non_integer_raises_and_changes_nothing(client: redis.Redis) -> None:
    m = CompactMap(client, "i", expected=10).open()
    m.set("a", "text", ttl=100)
    with pytest.raises(NotAnInteger, match="'a'"):
        m.incr("a")
    m.set("b", 2**63 - 1)
    with pytest.raises(NotAnInteger):
        m.incr("b")
    assert m.get("a") == "text" and 0 < m.ttl("a") <= 100 and m.get("b") == 2**63 - 1


def test_integers_are_listpack_integers_and_hincrby_compatible(client: redis.Redis) -> None:
    m = CompactMap(client, "n", expected=10).open()
    m.set("user:5", 41)
    loc = m._core.locate("user:5")
    assert client.hincrby(loc.bucket, loc.field, 1) == 42 and m.get("user:5") == 42


def test_a_corrupt_value_names_its_key_and_spares_the_others(client: redis.Redis) -> None:
    m = CompactMap(client, "bad", expected=10).open()
    m.set("user:1", "fine")
    m.set("user:2", "fine")
    loc = m._core.locate("user:2")
    client.hset(loc.bucket, loc.field, b"\x13not zlib")
    with pytest.raises(DecodeError, match="user:2") as info:
        m.get("user:2")
    assert info.value.key == "user:2" and m.get("user:1") == "fine"
    report = m.verify()
    assert report["decode_errors"] == ["user:2"] and not report["ok"]


def test_geometry_and_aliases_are_fixed_in_the_server(client: redis.Redis) -> None:
    a = CompactMap(client, "g", expected=100_000, aliases={"user": "u"}).open()
    a.set("user:99999", 1)
    b = CompactMap(client, "g", expected=10).open()  # another process, other guess: same buckets
    assert b.explain()["buckets"] == a.explain()["buckets"] and b.get("user:99999") == 1
    assert b.explain()["aliases"] == {"user": "u"}
    with pytest.raises(MapConfigError, match="aliases"):
        CompactMap(client, "g", aliases={"user": "usr"}).open()
    raw = client.hgetall(b"g:za:{g}")
    assert raw == {b"user": b"u"}  # any tool can decode the keys


def test_trained_dictionary_is_stored_and_read_by_another_process(client: redis.Redis) -> None:
    rng = random.Random(2)
    docs = [{"id": i, "name": f"name {rng.randrange(10**6)}", "city": rng.choice(["Oslo", "Lima"]),
             "tags": ["alpha", "beta"], "bio": "lorem ipsum dolor sit amet " * 3} for i in range(300)]
    m = CompactMap(client, "docs", codec="zstd", expected=1000).open()
    d = m.train(docs, size=4096)
    for i, doc in enumerate(docs):
        m.set(f"doc:{i}", doc)
    other = CompactMap(client, "docs", codec="zstd").open()
    assert other.explain()["codec"]["dictionary"] == d.id
    fresh = CompactMap(client, "docs").open()  # reads need no codec setting: the value names it
    assert fresh.mget([f"doc:{i}" for i in range(300)]) == docs
    assert _encodings(client, "docs") == {b"listpack"}


def test_buckets_stay_listpacks_at_the_expected_size(client: redis.Redis, server_name: str) -> None:
    m = CompactMap(client, "s", expected=20_000).open()
    rng = random.Random(1)
    ids = rng.sample(range(10**8), 10_000)
    with m.batch() as b:
        for i in ids:
            b.set(f"user:{i}", i)
        for i in range(10_000):
            b.set(f"seq:{i}", -i)
    assert _encodings(client, "s") == {b"listpack"}
    assert m.count() == 20_000 and m.stats()["warnings"] == []


def test_sweep_removes_only_expired_items(client: redis.Redis) -> None:
    clock = Clock()
    m = CompactMap(client, "sw", expected=100, clock=clock).open()
    for i in range(50):
        m.set(f"user:{i}", "v" * (i * 2), ttl=10 if i % 2 else None)
    clock.now += 11
    assert m.count() == 50 and m.sweep() == 25 and m.count() == 25
    assert sorted(m.keys()) == sorted(f"user:{i}" for i in range(0, 50, 2))
