"""When a store talks to the server (issue 33, part 4; docs/api.md, "When densekv talks to
the server"): the same rule for every kind, sync and async.

* A constructor does no I/O: built on a client of a port where nothing listens, it raises
  nothing; on a real server, it sends no command.
* The first operation, or `open()`, opens it: the typed error of an unreachable server
  (ServerUnavailable) comes from there, and a failed open is tried again next time.
* `open()` returns the object and is idempotent: a second call sends nothing.
* Threads (sync) or tasks (async) racing to the first operation of one object probe the
  server once. Counted with the server's INFO commandstats: each probe sends two COMMAND
  INFO calls (capabilities.probe_flow), nothing else does.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
import redis.asyncio

import densekv
from densekv.errors import BloomNotFound
from densekv.tools.server.process import ServerProcess, free_port

#: kind -> (sync class, async class, extra constructor arguments)
KINDS: dict[str, tuple[type, type, dict[str, Any]]] = {
    "sessions": (densekv.SessionStore, densekv.AsyncSessionStore, {}),
    "set": (densekv.CompactSet, densekv.AsyncCompactSet, {}),
    "family": (densekv.SetFamily, densekv.AsyncSetFamily, {}),
    "map": (densekv.CompactMap, densekv.AsyncCompactMap, {}),
    "bloom": (densekv.BloomFilter, densekv.AsyncBloomFilter, {"capacity": 1000, "error_rate": 0.01}),
}
#: kind -> a first operation (object -> its result, awaitable on the twin)
FIRST: dict[str, Callable[[Any], Any]] = {
    "sessions": lambda s: s.count(),
    "set": lambda s: s.contains(b"x" * 16),
    "family": lambda f: f.count("parent"),
    "map": lambda m: m.get("key"),
    "bloom": lambda b: b.contains(b"x"),
}
#: what a first operation gives on an empty server
EMPTY: dict[str, Any] = {"sessions": 0, "set": False, "family": 0, "map": None, "bloom": False}


def make(kind: str, sync: bool, client: Any, name: str = "opening") -> Any:
    cls_sync, cls_async, extra = KINDS[kind]
    return (cls_sync if sync else cls_async)(client, name, **extra)


def calls(c: redis.Redis) -> dict[str, int]:
    """Commands served so far, by name (the INFO that asks left out)."""
    return {k: v["calls"] for k, v in c.info("commandstats").items() if k != "cmdstat_info"}


def spent(c: redis.Redis, before: dict[str, int]) -> dict[str, int]:
    return {k: n - before.get(k, 0) for k, n in calls(c).items() if n != before.get(k, 0)}


def probes(c: redis.Redis, before: dict[str, int]) -> int:
    """How many probes ran since `before`: two COMMAND INFO calls each ("cmdstat_command"
    on 6.2, "cmdstat_command|info" since 7.0)."""
    n = sum(v for k, v in spent(c, before).items() if k.startswith("cmdstat_command"))
    assert n % 2 == 0, n
    return n // 2


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(main())


# -- no I/O in a constructor; the first operation or open() raises the typed error ----------
@pytest.mark.parametrize("kind", KINDS)
def test_a_sync_constructor_does_no_io_and_the_first_use_raises(kind: str) -> None:
    dead = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.5)
    obj = make(kind, True, dead)  # nothing listens there: no error
    with pytest.raises(densekv.ServerUnavailable):
        FIRST[kind](obj)
    with pytest.raises(densekv.ServerUnavailable):  # not opened: tried again, same error
        obj.open()
    with pytest.raises(densekv.ServerUnavailable):
        make(kind, True, dead).open()
    dead.close()


@pytest.mark.parametrize("kind", KINDS)
def test_an_async_constructor_does_no_io_and_the_first_use_raises(kind: str) -> None:
    async def main() -> None:
        dead = redis.asyncio.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.5)
        obj = make(kind, False, dead)
        with pytest.raises(densekv.ServerUnavailable):
            await FIRST[kind](obj)
        with pytest.raises(densekv.ServerUnavailable):
            await obj.open()
        with pytest.raises(densekv.ServerUnavailable):
            await obj.ready()  # the older name
        await dead.aclose()

    run(main)


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_constructor_sends_no_command_and_open_is_idempotent(
        kind: str, sync: bool, client: redis.Redis, server: ServerProcess) -> None:
    if sync:
        before = calls(client)
        obj = make(kind, True, server.client())
        assert spent(client, before) == {}  # constructed: not a command
        assert obj.open() is obj
        assert probes(client, before) == 1
        opened = calls(client)
        assert obj.open() is obj  # open already: nothing sent
        assert spent(client, opened) == {}
        assert FIRST[kind](obj) == EMPTY[kind]
        assert probes(client, before) == 1
        obj.client.close()
        return

    async def main() -> None:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        before = calls(client)
        obj = make(kind, False, aclient)
        assert spent(client, before) == {}
        assert await obj.open() is obj
        assert probes(client, before) == 1
        opened = calls(client)
        assert await obj.open() is obj
        await obj.ready()
        assert spent(client, opened) == {}
        assert await FIRST[kind](obj) == EMPTY[kind]
        assert probes(client, before) == 1
        await aclient.aclose()

    run(main)


# -- racing first uses open once ---------------------------------------------------------------
RACERS = 8


@pytest.mark.parametrize("kind", KINDS)
def test_threads_racing_to_the_first_operation_probe_once(kind: str, client: redis.Redis,
                                                          server: ServerProcess) -> None:
    pool = redis.ConnectionPool(host="127.0.0.1", port=server.port, max_connections=RACERS + 2)
    obj = make(kind, True, redis.Redis(connection_pool=pool))
    start = threading.Barrier(RACERS)
    results: list[Any] = []
    errors: list[BaseException] = []

    def first() -> None:
        try:
            start.wait()
            results.append(FIRST[kind](obj))
        except BaseException as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)

    before = calls(client)
    threads = [threading.Thread(target=first) for _ in range(RACERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert results == [EMPTY[kind]] * RACERS
    assert probes(client, before) == 1
    pool.disconnect()


@pytest.mark.parametrize("kind", KINDS)
def test_tasks_racing_to_the_first_operation_probe_once(kind: str, client: redis.Redis,
                                                        server: ServerProcess) -> None:
    async def main() -> None:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        obj = make(kind, False, aclient)
        before = calls(client)
        results = await asyncio.gather(*(FIRST[kind](obj) for _ in range(RACERS)))
        assert results == [EMPTY[kind]] * RACERS
        assert probes(client, before) == 1
        opened = calls(client)
        await asyncio.gather(*(obj.open() for _ in range(RACERS)))
        assert spent(client, opened) == {}
        await aclient.aclose()

    run(main)


# -- what the rule keeps --------------------------------------------------------------------
def test_a_sync_property_opens_the_store_and_an_async_one_asks_for_open(
        client: redis.Redis, server: ServerProcess) -> None:
    """A sync property that needs the open store opens it (a first use); the twin's cannot
    await, so it raises RuntimeError until the store is open. The namespace needs no server."""
    store = densekv.SessionStore(server.client(), "props")
    assert store.namespace == "props"
    assert store.layout == "dense" and store.ttl > 0

    async def main() -> None:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        twin = densekv.AsyncSessionStore(aclient, "props")
        assert twin.namespace == "props"
        with pytest.raises(RuntimeError, match="open"):
            _ = twin.layout
        assert (await twin.open()).layout == "dense"
        aset = densekv.AsyncCompactSet(aclient, "props")
        with pytest.raises(RuntimeError, match="open"):
            _ = aset.layout
        await aset.open()
        assert aset.layout == densekv.CompactSet(server.client(), "props").layout
        await aclient.aclose()

    run(main)


def test_bloom_open_on_the_class_still_opens_a_stored_filter(client: redis.Redis, server: ServerProcess) -> None:
    """`BloomFilter.open(client, name)` (the stored filter, its parameters) talks to the server
    at once, as before; `bf.open()` on a filter opens that filter."""
    with pytest.raises(BloomNotFound):
        densekv.BloomFilter.open(server.client(), "missing")
    made = densekv.BloomFilter(server.client(), "kept", capacity=1000, error_rate=0.01)
    assert made.open() is made and made.add(b"x")
    again = densekv.BloomFilter.open(server.client(), "kept")
    assert again.spec == made.spec and again.contains(b"x")

    async def main() -> None:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        with pytest.raises(BloomNotFound):
            await densekv.AsyncBloomFilter.open(aclient, "missing")
        twin = await densekv.AsyncBloomFilter.open(aclient, "kept")
        assert twin.spec == made.spec and await twin.contains(b"x")
        await aclient.aclose()

    run(main)


def test_an_observer_added_before_the_open_hears_the_first_operation(client: redis.Redis,
                                                                      server: ServerProcess) -> None:
    heard: list[str] = []

    class Ops:
        def on_operation(self, name: str, seconds: float, error: str | None) -> None:
            heard.append(name)

        def on_event(self, event: Any) -> None:
            heard.append(type(event).__name__)

    store = densekv.SessionStore(server.client(), "observed")
    store.observe(Ops())  # not open yet: no server call
    store.create(7)
    assert "create" in heard and len(heard) > 1  # the operation and its lifecycle event(s)


def test_what_needs_no_server_does_not_open_the_store() -> None:
    """The namespace and the read shares a metrics scrape reads (issue 30) need no server:
    they open nothing, so a scrape before the first request costs no call and cannot fail."""
    dead = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.5)
    store = densekv.SessionStore(dead, "unopened")
    assert (store.namespace, store.read_shares()) == ("unopened", (0.0, 0.0))
    twin = densekv.AsyncSessionStore(redis.asyncio.Redis(port=free_port()), "unopened")
    assert (twin.namespace, twin.read_shares()) == ("unopened", (0.0, 0.0))
    with pytest.raises(densekv.ServerUnavailable):
        store.open()
    dead.close()
