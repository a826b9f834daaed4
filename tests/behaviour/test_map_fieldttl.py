"""CompactMap with ttl_mode="field": per-item TTL as the server's hash field TTL.

The reference-model suites (test_maps.py, test_map_batch.py, test_map_migrate.py) run in
this mode too, with a clock the server cannot follow, so nothing expires there. Here: the
server really expires items (no sweep), expired fields never show through any read, the
server facts the mode relies on (HSET drops a field's TTL, HINCRBY keeps it), values and
their TTLs are written atomically by batches, migration keeps TTLs to the millisecond, the
mode is fixed in the server when the map is made, and a server without field TTL is
refused before anything is written."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio

from densekv.capabilities import probe
from densekv.errors import FieldTtlUnavailable, MapConfigError
from densekv.maps import AsyncCompactMap, CompactMap
from densekv.maps.compact import MapFacts, meta_key
from densekv.tools.server.process import ServerProcess


def field_ttl_of(client: Any) -> str:
    return probe(client).field_ttl


def need_field_ttl(client: Any) -> None:
    if field_ttl_of(client) == "none":
        pytest.skip("this server has no hash field TTL (HEXPIRE): ttl_mode='field' is refused here")


def wait_until(t: float) -> None:
    """Sleep until the (shared) wall clock passes t; a server on this machine expires by it."""
    while time.time() < t:
        time.sleep(max(0.01, t - time.time()))


def test_items_expire_on_the_server_without_a_sweep(client: redis.Redis) -> None:
    need_field_ttl(client)
    m = CompactMap(client, "fx", expected=100, ttl_mode="field").open()
    wait_until(int(time.time()) + 1)  # a second starts: ttl=1 items live until the next one
    m.set("user:1", 1, ttl=1)
    with m.batch() as b:
        b.set("user:2", "two", ttl=1)
        b.mset({"user:3": 3, "user:4": "x" * 200}, ttl=1)  # user:4 out of line
    assert m.setnx("user:5", 5, ttl=1)
    m.set("user:6", 6)
    assert m.expire("user:6", 1)
    m.set("keep", "k")
    m.set("user:7", "x" * 300, ttl=1000)
    gone = [f"user:{i}" for i in range(1, 7)]
    assert all(m.exists(k) for k in gone) and all(0 <= m.ttl(k) <= 1 for k in gone)
    ool = m._core.locate("user:4").ool
    assert client.exists(ool)
    wait_until(int(time.time()) + 1.05)  # every expiry above is at most now + 1 s (whole seconds)
    assert [m.get(k) for k in gone] == [None] * 6 and [m.ttl(k) for k in gone] == [-2] * 6
    assert dict(m.items()) == {"keep": "k", "user:7": "x" * 300} and m.mget(gone) == [None] * 6
    with m.batch() as b:
        got = [b.get(k) for k in gone]
    assert [f.result() for f in got] == [None] * 6
    # the out-of-line key carries its own EXAT, a second (OOL_SLACK) after its field's
    wait_until(int(time.time()) + 1.05)
    assert not client.exists(ool) and client.exists(m._core.locate("user:7").ool)
    assert m.sweep() == 0 and m.count() >= 2  # HLEN may still count fields not yet reclaimed


def test_expired_fields_never_show_through_reads(server_name: str, fresh_server: Callable[..., ServerProcess]) -> None:
    """Active expiry off (DEBUG SET-ACTIVE-EXPIRE 0): expired fields stay in the bucket until
    touched, and still no read of the map (HGET, HMGET, HGETALL) nor HSCAN shows them."""
    proc = fresh_server(server_name, options={"enable-debug-command": "local"})
    client = proc.client()
    need_field_ttl(client)
    client.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", 0)
    m = CompactMap(client, "hx", expected=100, ttl_mode="field").open()
    m.mset({f"user:{i}": i for i in range(0, 40, 2)}, ttl=1)
    m.mset({f"user:{i}": i for i in range(1, 40, 2)})
    bucket = m._core.locate("user:1").bucket
    assert client.hlen(bucket) == 40  # expected=100: one bucket for the prefix
    wait_until(int(time.time()) + 1.05)
    live = {f"user:{i}": i for i in range(1, 40, 2)}
    assert client.hlen(bucket) == 40  # not reclaimed yet
    fields = {f for f, _ in client.hscan_iter(bucket)}
    assert len(fields) == 20 and set(client.hgetall(bucket)) == fields
    assert dict(m.items()) == live and m.mget(list(live) + ["user:0"]) == list(live.values()) + [None]
    assert m.get("user:0") is None and not m.exists("user:2") and m.ttl("user:4") == -2
    assert m.setnx("user:6", "new") and m.get("user:6") == "new" and m.ttl("user:6") == -1
    client.close()


def test_hset_drops_a_field_ttl_and_hincrby_keeps_it(client: redis.Redis) -> None:
    need_field_ttl(client)
    m = CompactMap(client, "inc", expected=100, ttl_mode="field").open()
    m.set("user:1", 5, ttl=100)
    loc = m._core.locate("user:1")
    at = client.execute_command("HEXPIRETIME", loc.bucket, "FIELDS", 1, loc.field)
    assert client.hincrby(loc.bucket, loc.field, 1) == 6  # the server fact incr relies on
    assert client.execute_command("HEXPIRETIME", loc.bucket, "FIELDS", 1, loc.field) == at
    assert m.incr("user:1") == 7 and m.incrby("user:1", -10) == -3 and m.ttl("user:1") in (99, 100)
    m.set("user:1", 1)  # a set without ttl persists the item, as SET does
    assert m.ttl("user:1") == -1
    m.set("user:1", 1, ttl=50)
    assert m.getset("user:1", 2) == 1 and m.ttl("user:1") == -1
    d = CompactMap(client, "incd", expected=100, ttl=30, ttl_mode="field").open()  # a default TTL
    assert d.incr("user:1") == 1 and d.ttl("user:1") in (29, 30)
    d.persist("user:1")
    assert d.incr("user:1") == 2 and d.ttl("user:1") == -1  # an existing item keeps its (no) TTL


def test_batch_sets_write_value_and_field_ttl_atomically(server: ServerProcess) -> None:
    """A writer sets items in batches (no transaction), alternating a positive value with a
    TTL and a negative one without; a reader reading value and field TTL together (MULTI)
    never sees a value without the TTL it was written with."""
    writer_client, reader_client = server.client(), server.client()
    writer_client.flushall()
    need_field_ttl(writer_client)
    w = CompactMap(writer_client, "atom", expected=5000, ttl_mode="field").open()
    keys = [f"user:{i}" for i in range(0, 400, 7)]
    places: dict[bytes, list[bytes]] = {}
    for k in keys:
        loc = w._core.locate(k)
        places.setdefault(loc.bucket, []).append(loc.field)
    w.mset({k: -1 for k in keys})
    done = threading.Event()
    bad: list[Any] = []
    reads = [0]

    def read() -> None:
        while not done.is_set():
            p = reader_client.pipeline(transaction=True)
            for b, fs in places.items():
                p.hmget(b, fs)
                p.execute_command("HEXPIRETIME", b, "FIELDS", len(fs), *fs)
            replies = p.execute()
            for values, times in zip(replies[::2], replies[1::2]):
                for v, t in zip(values, times):
                    if (int(v) > 0) != (t > 0):
                        bad.append((v, t))
            reads[0] += 1

    t = threading.Thread(target=read)
    t.start()
    try:
        for n in range(1, 60):
            with w.batch() as b:
                for k in keys:
                    b.set(k, n if n % 2 else -n, ttl=100 if n % 2 else None)
    finally:
        done.set()
        t.join()
    assert reads[0] and not bad


def test_migration_keeps_ttls_to_the_millisecond(client: redis.Redis) -> None:
    need_field_ttl(client)
    for i in range(50):
        client.set(f"user:{i}", b"v" * (i * 3), px=500_000 + i * 1237 if i % 3 else None)
    want = {f"user:{i}": client.pexpiretime(f"user:{i}") for i in range(50)}
    m = CompactMap(client, "mg", expected=100, ttl_mode="field").open()
    assert m.migrate_from("user:*")["remaining"] == 0
    for i in range(50):
        loc = m._core.locate(f"user:{i}")
        got = client.execute_command("HPEXPIRETIME", loc.bucket, "FIELDS", 1, loc.field)[0]
        assert got == want[f"user:{i}"], i
        assert m.get(f"user:{i}") == b"v" * (i * 3)
    report = m.verify("user:*")
    assert report["ok"] and report["items"] == 50
    assert m.migrate_to_plain()["moved"] == 50
    assert {k: client.pexpiretime(k) for k in want} == want


def test_buckets_get_the_encoding_the_probe_finds(client: redis.Redis) -> None:
    """listpackex on Redis 7.4; a hashtable on Valkey 9.1 (why auto never picks field
    there); verify() tells these apart from buckets converted by size."""
    need_field_ttl(client)
    m = CompactMap(client, "enc", expected=2000, ttl_mode="field").open()
    m.mset({f"user:{i}": i for i in range(1000)}, ttl=100)
    encodings = {client.object("encoding", b) for b in m.buckets()}
    assert encodings == {probe(client).field_ttl_encoding.encode()}  # type: ignore[union-attr]
    report = m.verify()
    assert report["ok"] and report["items"] == 1000 and report["buckets_not_listpack"] == 0
    converted = len(list(m.buckets())) if encodings == {b"hashtable"} else 0
    assert report["buckets_hashtable_by_field_ttl"] == converted


def test_a_conflicting_ttl_mode_on_open_raises(client: redis.Redis) -> None:
    CompactMap(client, "p", expected=100, ttl_mode="packed").open().set("user:1", 1, ttl=100)
    assert CompactMap(client, "p").open().explain()["item_ttl"] == "packed"  # auto opens what is stored
    with pytest.raises(MapConfigError, match="ttl_mode='packed'"):
        CompactMap(client, "p", ttl_mode="field").open()
    # a map made before ttl_mode existed has no such meta field: it is packed
    CompactMap(client, "old", expected=100, ttl_mode="packed").open().set("user:1", 1, ttl=100)
    client.hdel(meta_key("old"), "ttl_mode")
    old = CompactMap(client, "old", ttl_mode="packed").open()
    assert old.explain()["item_ttl"] == "packed" and 0 < old.ttl("user:1") <= 100
    with pytest.raises(MapConfigError):
        CompactMap(client, "old", ttl_mode="field").open()
    with pytest.raises(ValueError, match="ttl_mode"):
        CompactMap(client, "bad", ttl_mode="server").open()
    if field_ttl_of(client) == "none":
        return
    CompactMap(client, "f", expected=100, ttl_mode="field").open().set("user:1", 1, ttl=100)
    assert CompactMap(client, "f").open().explain()["item_ttl"] == "field"
    assert client.hget(meta_key("f"), "ttl_mode") == b"field"
    with pytest.raises(MapConfigError, match="ttl_mode='field'"):
        CompactMap(client, "f", ttl_mode="packed").open()


def test_field_mode_without_field_ttl_is_refused_before_writing(client: redis.Redis) -> None:
    """On Redis 7.0 / Valkey 8.0 for real; elsewhere with the facts of such a server."""
    real = field_ttl_of(client) == "none"
    facts = None if real else MapFacts(512, 64, "none")
    with pytest.raises(FieldTtlUnavailable, match="field TTL"):
        CompactMap(client, "nf", ttl_mode="field", facts=facts).open()
    assert client.dbsize() == 0
    assert isinstance(FieldTtlUnavailable("x"), MapConfigError)

    async def main() -> None:
        aclient = redis.asyncio.Redis(host=client.connection_pool.connection_kwargs["host"],
                                      port=client.connection_pool.connection_kwargs["port"])
        m = AsyncCompactMap(aclient, "anf", ttl_mode="field", facts=facts)
        with pytest.raises(FieldTtlUnavailable):
            await m.set("user:1", 1)
        await aclient.aclose()

    asyncio.run(main())
    assert client.dbsize() == 0
    if not real:  # a map stored in field mode, opened where field TTL is missing
        CompactMap(client, "sf", expected=10, ttl_mode="field").open()
        with pytest.raises(FieldTtlUnavailable):
            CompactMap(client, "sf", facts=MapFacts(512, 64, "none")).open()


def test_auto_keeps_expiry_packed(client: redis.Redis) -> None:
    """The measured rule (compact.py, "Per-item TTL"): field TTL is never smaller enough."""
    m = CompactMap(client, "au", expected=100, ttl=60).open()
    m.set("user:1", 1)
    e = m.explain()
    assert e["item_ttl"] == "packed" and "field TTL" in e["item_ttl_reason"]
    assert client.hget(meta_key("au"), "ttl_mode") == b"packed"


@pytest.mark.parametrize("transaction", [False, True])
def test_field_mode_on_a_cluster(cluster_client: redis.RedisCluster, transaction: bool) -> None:
    m = CompactMap(cluster_client, f"cf{int(transaction)}", expected=50, ttl_mode="field").open()
    wait_until(int(time.time()) + 1)  # a second starts: ttl=1 items live until the next one
    keys = [f"user:{i}" for i in range(1, 6)]  # one bucket: a cluster transaction is one slot
    with m.batch(transaction=transaction) as b:
        for i, k in enumerate(keys):
            b.set(k, "v" * (i * 40), ttl=1 if i % 2 else 100)
        b.incr("user:7")
        t = b.ttl("user:2")
    assert t.result() in (0, 1)
    wait_until(int(time.time()) + 1.05)
    assert dict(m.items()) == {"user:1": "", "user:3": "v" * 80, "user:5": "v" * 160, "user:7": 1}
    assert m.ttl("user:3") in (98, 99, 100) and m.ttl("user:7") == -1 and m.verify()["ok"]
