"""The asyncio twins on a cluster (redis-py's asyncio RedisCluster, densekv's
AsyncClusterExecutor): the same reference-model runs as the sync classes on the same
cluster fixtures, plain and replicated, through a facade that drives each async
operation to its end on one event loop; and the executor's own redirect handling (a slot
moved under a live store: ASK while it migrates, MOVED after) on the asyncio path.

Before: `executor_for(redis.asyncio.RedisCluster(...))` raised TypeError ("asyncio
cluster clients are not supported yet"), so every async class refused a cluster.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Awaitable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
import redis
import redis.asyncio
from redis.crc import key_slot

from densekv import (
    AsyncBloomFilter,
    AsyncCompactMap,
    AsyncCompactSet,
    AsyncSessionStore,
    SessionStore,
)
from densekv.cluster_executor import RECOVERY_SECONDS, AsyncClusterExecutor
from densekv.sessions.payload_flows import REFIT_FIRST
from densekv.tools.lab.session_profiles import django_login_written, sessions
from densekv.tools.server.cluster import LocalCluster, call
from tests.behaviour import test_sessions, test_sets
from tests.behaviour.cluster_writers import busiest_master

pytestmark = pytest.mark.cluster
T = TypeVar("T")


class Loop:
    """One event loop in a thread, for driving async objects from the sync model runners."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T] | Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)  # type: ignore[arg-type]

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        self.loop.close()


class Blocking:
    """An async twin seen as its sync class: `await x.f()` becomes `x.f()`, and the
    dunders the model runners use (`in`, `len`, iteration) map to contains / count /
    async iteration."""

    def __init__(self, obj: Any, loop: Loop) -> None:
        self._obj, self._loop = obj, loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._obj, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *a, **k: self._loop.run(attr(*a, **k))
        return attr

    def __contains__(self, item: Any) -> bool:
        return bool(self._loop.run(self._obj.contains(item)))

    def __len__(self) -> int:
        return int(self._loop.run(self._obj.count()))

    def __iter__(self) -> Iterator[Any]:
        async def collect() -> list[Any]:
            return [x async for x in self._obj]

        return iter(self._loop.run(collect()))


@pytest.fixture
def aio(cluster_client: redis.RedisCluster, cluster: LocalCluster) -> Iterator[tuple[Loop, redis.asyncio.RedisCluster]]:
    loop = Loop()
    port = cluster.primaries()[0].port
    client = loop.run(_make_client(port))
    yield loop, client
    loop.run(client.aclose())
    loop.close()


async def _make_client(port: int) -> redis.asyncio.RedisCluster:
    return redis.asyncio.RedisCluster(host="127.0.0.1", port=port)


def test_the_async_session_store_matches_the_model_on_a_cluster(
        aio: tuple[Loop, redis.asyncio.RedisCluster], cluster_client: redis.RedisCluster) -> None:
    loop, client = aio
    for layout in test_sessions.layouts_for(cluster_client):
        clock = test_sessions.Clock()
        store = AsyncSessionStore(client, namespace=f"ac{layout}", layout=layout, ttl=120, idle_ttl=60,
                                  expected_sessions=500, clock=clock)
        loop.run(store.ready())
        assert isinstance(store._ex, AsyncClusterExecutor)
        test_sessions.run_against_model(Blocking(store, loop), clock, seed=17, steps=150)  # type: ignore[arg-type]


def test_the_async_store_trains_its_dictionary_again_on_a_cluster(
        aio: tuple[Loop, redis.asyncio.RedisCluster], cluster_client: redis.RedisCluster) -> None:
    """payload_flows.py refit through the asyncio cluster executor: Django logins, then the
    key "n" in each; the look REFIT_FIRST writes after the dictionary's adoption names
    another, a sync store on the same cluster adopts it, and every session reads back."""
    loop, client = aio
    store = AsyncSessionStore(client, namespace="refit", layout="dense", expected_sessions=5000)
    count = REFIT_FIRST // 2

    async def main() -> tuple[int, int, list[str]]:
        first = await store.train_dictionary(d for _, d in sessions("P1", 2000, start=100_000))
        tokens = [await store.create(i, d) for i, d in sessions("P1", count)]
        for n, token in enumerate(tokens):
            await store.apply(token, {"n": django_login_written(n)[1]["n"]})
        return first, (await store.explain())["dictionary"], tokens

    first, now, tokens = loop.run(main())
    assert now not in (first, None)
    reader = SessionStore(cluster_client, namespace="refit", layout="dense", expected_sessions=5000).open()
    assert reader.explain()["dictionary"] == now
    assert all(reader.get(t).data == django_login_written(n)[1] for n, t in enumerate(tokens))  # type: ignore[union-attr]


def test_the_async_set_matches_the_model_on_a_cluster(
        aio: tuple[Loop, redis.asyncio.RedisCluster], cluster_client: redis.RedisCluster) -> None:
    loop, client = aio
    for layout, partitions in test_sets.specs_for(cluster_client):
        s = AsyncCompactSet(client, f"ac-{layout}-{partitions}", layout=layout, expected=300, partitions=partitions)
        loop.run(s.ready())
        test_sets.run_against_model(Blocking(s, loop), seed=13, steps=100)  # type: ignore[arg-type]


def test_the_async_map_and_filter_work_on_a_cluster(
        aio: tuple[Loop, redis.asyncio.RedisCluster], cluster_client: redis.RedisCluster) -> None:
    loop, client = aio

    async def main() -> None:
        m = AsyncCompactMap(client, "acm", expected=1000)
        await m.set("user:1", 41)
        assert await m.incr("user:1") == 42
        batch = m.batch()
        for i in range(2, 200):
            batch.set(f"user:{i}", i)
        assert await batch.execute() == [True] * 198
        assert await m.get("user:150") == 150
        assert await m.count() == 199
        assert m.is_cluster
        bf = AsyncBloomFilter(client, "acb", capacity=2000, error_rate=0.01)
        items = [b"item-%d" % i for i in range(500)]
        assert await bf.add_many(items) == [True] * 500
        assert await bf.contains_many(items) == [True] * 500
        assert await bf.count() == 500

    loop.run(main())
    # the same keys through the sync classes: one store, whichever client wrote it
    from densekv import CompactMap

    assert CompactMap(cluster_client, "acm").get("user:150") == 150


def test_a_slot_moved_under_the_async_store(cluster: LocalCluster, cluster_client: redis.RedisCluster,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions created, then each of their slots half-migrated to another master (the
    async store's reads meet ASK: some keys already on the target) and finished (its
    writes meet MOVED): every session reads back, updates and is destroyed, with no error."""
    asked: list[tuple[str, int]] = []  # the ASK targets the executor followed
    follow = AsyncClusterExecutor.node_at
    monkeypatch.setattr(AsyncClusterExecutor, "node_at",
                        lambda self, host, port: asked.append((host, port)) or follow(self, host, port))
    loop = Loop()
    try:
        client = loop.run(_make_client(cluster.primaries()[0].port))
        store = AsyncSessionStore(client, namespace="amv", partitions=8, ttl=600)
        tokens = [loop.run(store.create(i, {"n": i})) for i in range(60)]
        keys = [k for k in cluster_client.scan_iter(match="amv:*", count=1000)]
        slots = sorted({key_slot(k) for k in keys})
        masters = sorted(cluster.primaries(), key=lambda n: n.port)
        view = cluster.topology()
        moving = []
        for slot in slots:  # IMPORTING/MIGRATING, then MIGRATE the first half of the slot's keys
            source = cluster.node_of_slot(slot)
            target = masters[(masters.index(source) + 1) % len(masters)]
            source_id, target_id = view.by_port(source.port).node_id, view.by_port(target.port).node_id
            call(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
            call(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
            in_slot = call(source, "CLUSTER", "GETKEYSINSLOT", slot, 1000)
            half = in_slot[: max(1, len(in_slot) // 2)]
            call(source, "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *half)
            moving.append((slot, source, target, target_id))
        got = [loop.run(store.get(t)) for t in tokens]  # half of them answered by ASK
        assert [g.data["n"] if g else None for g in got] == list(range(60))
        assert asked, "no read met a migrating slot"
        for slot, source, target, target_id in moving:  # finish: the rest, then SETSLOT NODE
            while rest := call(source, "CLUSTER", "GETKEYSINSLOT", slot, 1000):
                call(source, "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *rest)
            for node in masters:
                call(node, "CLUSTER", "SETSLOT", slot, "NODE", target_id)
        # the old owners answer MOVED (a multi-key write in a half-moved slot would get
        # TRYAGAIN until the move ends: the executor retries it for RECOVERY_SECONDS)
        assert all(loop.run(store.update(t, {"m": 1})) for t in tokens[::2])
        got = [loop.run(store.get(t)) for t in tokens]
        assert [g.data if g else None for g in got] == [{"m": 1} if i % 2 == 0 else {"n": i} for i in range(60)]
        assert all(loop.run(store.destroy(t)) for t in tokens)
        assert loop.run(store.count()) == 0
        loop.run(client.aclose())
    finally:
        loop.close()


def test_the_async_store_recovers_after_a_master_is_killed(
        replicated_client: redis.RedisCluster, replicated_cluster: LocalCluster) -> None:
    """SIGKILL of the master holding most of the sessions, the async client kept: once a
    replica took over, every session written with durable=True reads back (the executor
    re-read the slot map from the nodes left), and new writes work."""
    loop = Loop()
    try:
        victim_port = None
        first = AsyncSessionStore(loop.run(_make_client(replicated_cluster.primaries()[0].port)),
                                  namespace="akill", partitions=8, ttl=600, durable=True)
        tokens = [loop.run(first.create(i, {"n": i})) for i in range(40)]
        loop.run(first._ex.client.aclose())
        victim = busiest_master(replicated_cluster)
        victim_port = victim.port
        # the client that lives through the kill knows the cluster through the victim itself
        client = loop.run(_make_client(victim.port))
        store = AsyncSessionStore(client, namespace="akill", partitions=8, ttl=600, durable=True)
        assert loop.run(store.get(tokens[0])) is not None
        replicated_cluster.kill_master(victim, wait=True)
        started = time.monotonic()
        got = [loop.run(store.get(t)) for t in tokens]
        assert [g.data["n"] if g else None for g in got] == list(range(40))
        assert time.monotonic() - started < RECOVERY_SECONDS
        plain = AsyncSessionStore(client, namespace="akill", partitions=8, ttl=600)
        assert loop.run(plain.get(loop.run(plain.create(99, {"after": True})))) is not None
        loop.run(client.aclose())
    finally:
        loop.close()
        replicated_cluster.heal()
    assert victim_port is not None
