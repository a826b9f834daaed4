"""AsyncCompactMap is a full twin of CompactMap: the same public operations with the same
parameters, and the whole-map ones (buckets, count, keys, values, stats, sweep, train,
verify, migrate_from, migrate_to_plain) give the sync map's results on every server of
the matrix. Each test builds the same data in a sync map and an async map (or the same
plain keys under two prefixes) and compares what the two report."""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
import redis.asyncio

from densekv.capabilities import probe
from densekv.maps import AsyncCompactMap, CompactMap
from densekv.tools.server.process import ServerProcess

TTL_MODES = ["packed", "field"]
SEED = 14  # the data's fixed seed


class Clock:
    """The maps' clock; in ttl_mode "field" the server expires items, so it is not moved."""

    def __init__(self) -> None:
        import time

        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now


def public(cls: type) -> dict[str, Any]:
    """Public names -> their parameters (None for a property or an attribute)."""
    out: dict[str, Any] = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        member = getattr(cls, name)
        out[name] = list(inspect.signature(member).parameters.values()) if callable(member) else None
    return out


def test_the_sync_and_async_maps_expose_the_same_operations() -> None:
    sync, aio = public(CompactMap), public(AsyncCompactMap)
    aio.pop("ready")
    assert sync == aio
    for name in ("buckets", "count", "keys", "values", "stats", "sweep", "train", "migrate_from",
                 "migrate_to_plain", "verify"):  # the ten the async map lacked (issue 14)
        assert name in aio


def need_ttl_mode(server: ServerProcess, ttl_mode: str) -> None:
    with server.client() as c:
        if ttl_mode == "field" and probe(c).field_ttl == "none":
            pytest.skip("this server has no hash field TTL (HEXPIRE): ttl_mode='field' is refused here")


def run(server: ServerProcess, main: Callable[[redis.asyncio.Redis], Awaitable[None]]) -> None:
    async def wrapper() -> None:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            await main(aclient)
        finally:
            await aclient.aclose()

    asyncio.run(wrapper())


def data(n: int) -> dict[str, Any]:
    """Integers, short strings and strings too long for a listpack value (out of line)."""
    rng = random.Random(SEED)
    return {f"user:{i}": rng.choice([i, -i * 7, "s" * (i % 20), "L" * (70 + i % 50), [i, "x"]])
            for i in range(n)}


def without_namespace(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in stats.items() if k != "namespace"}


@pytest.mark.parametrize("ttl_mode", TTL_MODES)
def test_whole_map_operations_match_the_sync_map(server: ServerProcess, ttl_mode: str) -> None:
    need_ttl_mode(server, ttl_mode)
    client = server.client()
    client.execute_command("FLUSHALL", "SYNC")
    clock = Clock()
    items = data(400)
    short = {f"tmp:{i}": i for i in range(30)}

    async def main(aclient: redis.asyncio.Redis) -> None:
        sync = CompactMap(client, "rf", expected=2000, clock=clock, ttl_mode=ttl_mode)
        am = AsyncCompactMap(aclient, "am", expected=2000, clock=clock, ttl_mode=ttl_mode)
        for m in (sync, am):
            for chunk in (dict(list(items.items())[:200]), dict(list(items.items())[200:])):
                r = m.mset(chunk)
                assert (await r) if inspect.isawaitable(r) else r
            r = m.mset(short, ttl=5)
            if inspect.isawaitable(r):
                await r
        assert await am.count() == sync.count() == len(items) + len(short)
        assert sorted([k async for k in am.keys()]) == sorted(sync.keys()) == sorted([*items, *short])  # noqa: SIM118
        assert dict([kv async for kv in am.items(batch=7)]) == dict(sync.items()) == {**items, **short}
        assert sorted(map(repr, [v async for v in am.values()])) == sorted(map(repr, sync.values()))
        assert {b[2:] async for b in am.buckets()} == {b[2:] for b in sync.buckets()}
        assert without_namespace(await am.stats()) == without_namespace(sync.stats())
        # long values overwritten by short ones leave out-of-line keys for sweep to reclaim
        longs = {k: 1 for k, v in items.items() if isinstance(v, str) and v.startswith("L")}
        assert longs and sync.mset(longs) and await am.mset(longs)
        assert len(client.keys("am:o*")) == len(client.keys("rf:o*")) > 0
        if ttl_mode == "packed":
            clock.now += 10  # the short items expire; sweep removes them
            assert await am.sweep(batch=5) == sync.sweep(batch=5) == len(short)
            assert await am.count() == sync.count() == len(items)
        else:  # the server expires field TTLs itself: sweep only reclaims out-of-line keys
            assert await am.sweep(batch=5) == sync.sweep(batch=5) == 0
        assert client.keys("am:o*") == client.keys("rf:o*") == []
        report = await am.verify()
        assert report == sync.verify() and report["ok"] and report["decode_errors"] == []

    run(server, main)


def plain(client: redis.Redis, prefix: str, n: int) -> dict[bytes, bytes]:
    rng = random.Random(SEED)
    out = {}
    for i in range(n):
        key = f"{prefix}:{i}".encode()
        value = str(i).encode() if i % 2 else b"p" * rng.randrange(1, 120)
        client.set(key, value, ex=1000 + i if i % 3 == 0 else None)
        out[key] = value
    return out


@pytest.mark.parametrize("ttl_mode", TTL_MODES)
def test_migration_both_ways_matches_the_sync_map(server: ServerProcess, ttl_mode: str) -> None:
    need_ttl_mode(server, ttl_mode)
    client = server.client()
    client.execute_command("FLUSHALL", "SYNC")
    a_keys, s_keys = plain(client, "acct", 250), plain(client, "sacct", 250)
    too_long = b"acct:" + b"x" * 300  # no map field holds it: skipped, stays plain
    client.set(too_long, b"stays")
    client.set(b"s" + too_long, b"stays")
    seen: list[dict[str, int]] = []

    async def main(aclient: redis.asyncio.Redis) -> None:
        sync = CompactMap(client, "smig", expected=1000, ttl_mode=ttl_mode)
        am = AsyncCompactMap(aclient, "amig", expected=1000, ttl_mode=ttl_mode)
        moved = await am.migrate_from("acct:*", batch=40, pause=0.001, progress=seen.append)
        assert moved == sync.migrate_from("sacct:*", batch=40)
        assert moved == {"moved": 250, "in_map": 0, "gone": 0, "skipped": 1, "remaining": 1}
        assert seen and seen[-1]["moved"] == 250
        assert all(not client.exists(k) for k in a_keys) and client.exists(too_long)
        # the migration is unfinished (one key skipped): items() reads the plain key too
        got = dict([kv async for kv in am.items()])
        assert got[too_long.decode()] == b"stays" and len(got) == 251
        assert {k[1:]: v for k, v in sync.items()} == got
        assert await am.ttl("acct:3") > 900 and await am.get("acct:1") == 1
        report = await am.verify("acct:*")
        assert report == sync.verify("sacct:*")
        assert report["plain_keys_left"] == 1 and report["items"] == 250
        back = await am.migrate_to_plain(batch=30, pause=0.001)
        assert back == sync.migrate_to_plain(batch=30) == {"moved": 250, "expired": 0, "changed": 0}
        assert {k: client.get(k) for k in a_keys} == a_keys and {k: client.get(k) for k in s_keys} == s_keys
        assert 900 < client.ttl(b"acct:3") <= 1003 and client.ttl(b"acct:1") == -1
        assert await am.count() == 0

    run(server, main)


def test_train_stores_a_dictionary_both_maps_use(server: ServerProcess) -> None:
    client = server.client()
    client.execute_command("FLUSHALL", "SYNC")
    rng = random.Random(SEED)
    docs = [{"name": f"user {i}", "email": f"u{i}@example.com", "plan": rng.choice(["free", "pro"]),
             "tags": ["a", "b"][: i % 3]} for i in range(600)]

    async def main(aclient: redis.asyncio.Redis) -> None:
        am = AsyncCompactMap(aclient, "zt", expected=1000, codec="zstd")
        d = await am.train(docs[:500])
        assert (await am.explain())["codec"]["dictionary"] == d.id
        assert await am.mset({f"doc:{i}": doc for i, doc in enumerate(docs)})
        sync = CompactMap(client, "zt", codec="zstd")  # another process: adopts the dictionary
        assert sync.explain()["codec"]["dictionary"] == d.id
        assert sync.mget([f"doc:{i}" for i in range(600)]) == docs
        assert (await am.stats())["items"] == 600

    run(server, main)
