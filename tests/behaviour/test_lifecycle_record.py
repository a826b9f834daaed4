"""Every process of a namespace uses the same lifecycle options (issue 34): the namespace's
metadata hash records track_devices, max_sessions_per_identity, on_limit and events_stream
(field `life`, lua/store_meta.lua); the first store writes them, a store with other ones
refuses to open (LifecycleMismatch) before it touches a session, change_lifecycle rewrites
the record and every other store adopts it at its next metadata read. On each server of
the matrix (sync and async) and the cluster fixture; the record costs no command, and a
server that lost the metadata gets it back with the options in use."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
import redis
import redis.asyncio

from densekv.errors import DecodeError, InvalidArgument, LifecycleMismatch
from densekv.sessions import AsyncSessionStore, SessionStore
from densekv.sessions.events import event_from_stream, stream_key
from densekv.sessions.index import unpack_entry
from densekv.sessions.meta import META_REFRESH_S, Lifecycle, facts_from_probe, meta_key

DEFAULT = "devices=0 limit=none stream=none"


class Ticks:
    """A monotonic clock a test moves on: a store's metadata goes stale when it passes
    META_REFRESH_S (Metadata.stale), as a minute would."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now

    def minute(self) -> None:
        self.now += META_REFRESH_S + 1


def _ticking(store: SessionStore | AsyncSessionStore, ticks: Ticks) -> None:
    """Read `store`'s metadata age off `ticks` (the store is open; tests set state on purpose)."""
    core = store._core
    assert core is not None
    core.metadata.ticks = ticks
    core.metadata.read_at = ticks()


def _ns() -> str:
    return f"life-{time.time_ns()}"


def _life(client: Any, ns: str) -> str | None:
    raw = client.hget(meta_key(ns), "life")
    return None if raw is None else raw.decode()


def _snapshot(client: Any, ns: str) -> dict[bytes, Any]:
    return {k: client.dump(k) for k in client.scan_iter(match=f"{ns}:*")}


# --- the record --------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "text"), [
    ({}, DEFAULT),
    ({"track_devices": True}, "devices=1 limit=none stream=none"),
    ({"max_sessions_per_identity": 3}, "devices=0 limit=3 on_limit=evict stream=none"),
    ({"track_devices": True, "max_sessions_per_identity": 3, "on_limit": "refuse", "events_stream": 10_000},
     "devices=1 limit=3 on_limit=refuse stream=10000"),
    ({"on_limit": "refuse"}, DEFAULT),  # on_limit means nothing without a limit
])
def test_the_first_store_records_its_options(client: redis.Redis, options: dict[str, Any], text: str) -> None:
    ns = _ns()
    SessionStore(client, ns, layout="dense", **options).open()
    assert _life(client, ns) == text
    assert Lifecycle.parse(text) == Lifecycle.of(options.get("track_devices", False),
                                                 options.get("max_sessions_per_identity"),
                                                 options.get("on_limit", "evict"), options.get("events_stream"), True)


@pytest.mark.parametrize("other", [
    {"max_sessions_per_identity": 3, "track_devices": False},
    {"max_sessions_per_identity": 2},
    {"max_sessions_per_identity": 3, "on_limit": "refuse"},
    {"max_sessions_per_identity": 3, "track_devices": True, "events_stream": 100},
    {},
])
def test_a_store_with_other_options_refuses_to_open_before_touching_a_session(
        client: redis.Redis, other: dict[str, Any]) -> None:
    ns = _ns()
    first = SessionStore(client, ns, layout="dense", track_devices=True, max_sessions_per_identity=3).open()
    tokens = [first.create("ada", {"n": i}, label=f"d{i}") for i in range(3)]
    before = _snapshot(client, ns)
    second = SessionStore(client, ns, layout="dense", **other)
    with pytest.raises(LifecycleMismatch) as raised:
        second.open()
    message = str(raised.value)
    assert "track_devices=True, max_sessions_per_identity=3, on_limit='evict', events_stream=None" in message
    assert "this store was made with" in message and "change_lifecycle" in message
    assert "recorded options" in message
    with pytest.raises(LifecycleMismatch):  # any operation opens it first: refused the same way
        second.create("ada", {"n": 9})
    with pytest.raises(LifecycleMismatch):
        second.destroy(tokens[0])
    assert _snapshot(client, ns) == before  # nothing written, nothing removed
    assert all(t not in message for t in tokens)


def test_stores_with_the_same_options_open_fine_and_share_the_sessions(client: redis.Redis) -> None:
    ns = _ns()
    options = {"track_devices": True, "max_sessions_per_identity": 2, "on_limit": "refuse", "events_stream": 50}
    a = SessionStore(client, ns, layout="dense", **options).open()
    b = SessionStore(client, ns, layout="dense", **options).open()
    a.create("ada", label="phone")
    b.create("ada", label="laptop")
    assert sorted(s.device.label for s in a.sessions_of("ada")) == ["laptop", "phone"]  # type: ignore[union-attr]
    with pytest.raises(Exception, match="live sessions"):  # b enforces a's limit: SessionLimitReached
        b.create("ada")
    # on_limit is not compared without a limit
    SessionStore(client, ns + "x", layout="dense", on_limit="refuse").open()
    SessionStore(client, ns + "x", layout="dense").open()


@pytest.mark.parametrize("older", [
    # store_meta.lua's hash before the record: of the release that kept index and cont ...
    {"layout": "dense", "partitions": "16", "base": "16", "cont": "here", "index": "1"},
    # ... and of densekv 0.1.0 (neither)
    {"layout": "dense", "partitions": "16", "base": "16"},
])
def test_a_store_of_an_older_metadata_hash_records_its_options(client: redis.Redis, older: dict[str, str]) -> None:
    ns = _ns()
    client.hset(meta_key(ns), mapping=older)  # type: ignore[arg-type]
    store = SessionStore(client, ns, layout="dense", track_devices=True, events_stream=100).open()
    assert _life(client, ns) == "devices=1 limit=none stream=100"
    assert client.hget(meta_key(ns), "partitions") == b"16"  # the rest as it was
    token = store.create("ada", label="phone")
    assert [s.device.label for s in store.sessions_of("ada")] == ["phone"]  # type: ignore[union-attr]
    with pytest.raises(LifecycleMismatch):
        SessionStore(client, ns, layout="dense").open()
    assert store.get(token) is not None


def test_a_foreign_or_later_record_is_not_read_as_options(client: redis.Redis) -> None:
    ns = _ns()
    SessionStore(client, ns, layout="dense").open()
    client.hset(meta_key(ns), "life", "devices=0 limit=none stream=none metrics=1")  # a later release's
    with pytest.raises(DecodeError, match="lifecycle options"):
        SessionStore(client, ns, layout="dense").open()
    client.hset(meta_key(ns), "life", "devices=0 limit=none  stream=none")  # not as densekv writes it
    with pytest.raises(DecodeError, match="lifecycle options"):
        SessionStore(client, ns, layout="dense").open()


# --- change_lifecycle and the adoption -----------------------------------------------------


def test_change_lifecycle_is_adopted_by_every_store_at_its_next_refresh(
        client: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    ns = _ns()
    ticks = Ticks()
    a = SessionStore(client, ns, layout="dense").open()
    b = SessionStore(client, ns, layout="dense").open()
    _ticking(b, ticks)
    before = [a.create("carol", {"n": i}) for i in range(3)]  # listed in format 0
    with pytest.raises(InvalidArgument):  # checked before anything is sent: the record unchanged
        a.change_lifecycle(max_sessions_per_identity=0)
    assert _life(client, ns) == DEFAULT
    with caplog.at_level(logging.INFO, logger="densekv.sessions.meta"):
        a.change_lifecycle(track_devices=True, max_sessions_per_identity=3, events_stream=1000)
    assert _life(client, ns) == "devices=1 limit=3 on_limit=evict stream=1000"
    a.create("dan", label="phone")  # a uses them at once
    assert [s.device.label for s in a.sessions_of("dan")] == ["phone"]  # type: ignore[union-attr]
    assert client.xlen(stream_key(ns)) == 1
    # b has not read the metadata since: still the options it opened with
    with pytest.raises(InvalidArgument, match="track_devices"):
        b.create("dan", label="laptop")
    b.create("erin")
    assert client.xlen(stream_key(ns)) == 1
    caplog.clear()
    ticks.minute()
    with caplog.at_level(logging.INFO, logger="densekv.sessions.meta"):
        laptop = b.create("dan", label="laptop")  # re-reads the metadata first: adopts, then writes
    adopted = [r for r in caplog.records if r.name == "densekv.sessions.meta" and r.levelno == logging.INFO]
    assert len(adopted) == 1 and "devices=1 limit=3 on_limit=evict stream=1000" in adopted[0].getMessage()
    assert laptop not in caplog.text
    assert sorted(s.device.label for s in b.sessions_of("dan")) == ["laptop", "phone"]  # type: ignore[union-attr]
    for _ in range(3):  # and keeps the limit
        b.create("dan")
    assert len(b.sessions_of("dan")) == 3
    # b writes to the stream now (the adopting operation's event goes with the next one's)
    streamed = [event_from_stream(f) for _, f in client.xrange(stream_key(ns))]
    assert [(e.kind, e.label) for e in streamed if e.identity == "dan" and e.kind == "created"] == [
        ("created", "phone"), ("created", "laptop"), ("created", None), ("created", None), ("created", None)]
    assert [e.cause for e in streamed if e.kind == "destroyed"] == ["limit", "limit"]
    assert not [e for e in streamed if e.identity == "erin"]
    # sessions written before the change: listed (no device: their entries keep format 0
    # until the session's next login), destroyed one by one and all at once
    listed = b.sessions_of("carol")
    assert sorted(s.data["n"] for s in listed) == [0, 1, 2] and {s.device for s in listed} == {None}  # type: ignore[index]
    assert b.destroy(before[0]) and a.get(before[0]) is None
    assert a.destroy_all("carol") == 2 and b.sessions_of("carol") == []
    # a store opened now: the new options, or refused
    with pytest.raises(LifecycleMismatch):
        SessionStore(client, ns, layout="dense").open()
    SessionStore(client, ns, layout="dense", track_devices=True, max_sessions_per_identity=3,
                 events_stream=1000).open()


def test_turning_the_options_off_keeps_what_was_written_with_them(client: redis.Redis) -> None:
    ns = _ns()
    ticks = Ticks()
    a = SessionStore(client, ns, layout="dense", track_devices=True, max_sessions_per_identity=2).open()
    b = SessionStore(client, ns, layout="dense", track_devices=True, max_sessions_per_identity=2).open()
    _ticking(b, ticks)
    tokens = [a.create("ada", label=f"d{i}") for i in range(2)]
    values = [v for k in client.scan_iter(match=f"{ns}:si:*") for v in client.hgetall(k).values()]
    assert [unpack_entry(v) is not None for v in values] == [True, True]  # format 1
    a.change_lifecycle(track_devices=False, max_sessions_per_identity=None)
    assert _life(client, ns) == DEFAULT
    ticks.minute()
    more = [b.create("ada") for _ in range(3)]  # no limit now: nobody evicted
    assert all(a.get(t) is not None for t in tokens + more)
    assert len(b.sessions_of("ada")) == 5 and {s.device for s in b.sessions_of("ada")} == {None}
    assert b.destroy(tokens[0]) and a.get(tokens[0]) is None
    assert b.destroy_all("ada") == 4 and a.sessions_of("ada") == []
    assert not any(client.hlen(k) for k in client.scan_iter(match=f"{ns}:si:*"))


def test_a_refresh_that_finds_the_record_unchanged_changes_nothing(client: redis.Redis,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    ns = _ns()
    ticks = Ticks()
    store = SessionStore(client, ns, layout="dense", max_sessions_per_identity=2).open()
    _ticking(store, ticks)
    ticks.minute()
    with caplog.at_level(logging.INFO, logger="densekv.sessions.meta"):
        store.create("ada")
    assert not [r for r in caplog.records if r.name == "densekv.sessions.meta"]
    store.change_lifecycle(max_sessions_per_identity=2)  # the same options: written, nothing changes
    assert _life(client, ns) == "devices=0 limit=2 on_limit=evict stream=none"


def test_change_lifecycle_over_a_record_changed_meanwhile_keeps_the_other_change(client: redis.Redis) -> None:
    ns = _ns()
    a = SessionStore(client, ns, layout="dense").open()
    b = SessionStore(client, ns, layout="dense").open()
    a.change_lifecycle(track_devices=True)
    b.change_lifecycle(events_stream=500)  # b had not read a's change: a compare-and-set, made again
    assert _life(client, ns) == "devices=1 limit=none stream=500"
    assert b._core is not None and b._core.lines.track_devices  # b adopted a's change on the way


def test_the_async_store_records_refuses_changes_and_adopts(server: Any) -> None:
    async def main() -> None:
        client = redis.asyncio.Redis(port=server.port)
        ns = _ns()
        ticks = Ticks()
        try:
            a = AsyncSessionStore(client, ns, layout="dense", max_sessions_per_identity=2)
            await a.open()
            assert (await client.hget(meta_key(ns), "life")) == b"devices=0 limit=2 on_limit=evict stream=none"
            with pytest.raises(LifecycleMismatch):
                await AsyncSessionStore(client, ns, layout="dense").open()
            b = AsyncSessionStore(client, ns, layout="dense", max_sessions_per_identity=2)
            await b.open()
            _ticking(b, ticks)
            old = [await a.create("ada") for _ in range(2)]
            await a.change_lifecycle(max_sessions_per_identity=3, on_limit="refuse", track_devices=True)
            ticks.minute()
            await b.create("ada", label="tablet")  # a third: allowed once b adopted the new limit
            assert len(await b.sessions_of("ada")) == 3
            with pytest.raises(Exception, match="live sessions"):  # refuse, as recorded
                await b.create("ada")
            assert all([await b.get(t) is not None for t in old])
            assert await b.destroy_all("ada") == 3
        finally:
            await client.aclose()

    asyncio.run(main())


# --- what it costs, and a server that forgets -----------------------------------------------

#: what a default store sends to open and for create, get, apply, update, touch, sessions_of
#: and destroy (INFO commandstats after a warm-up, so every script is loaded): the same as
#: before the record at 1faeb29, but for one HSETNX more inside the open's store_meta script
#: (the record, written into the hash the same call made; no command of the client's more)
BEFORE = {"del": 1, "evalsha": 4, "exec": 1, "exists": 2, "hdel": 3, "hexists": 1, "hget": 6,
          "hgetall": 1, "hscan": 2, "hset": 5, "hsetnx": 1, "multi": 1, "script|load": 3}


def test_the_record_costs_no_command(client: redis.Redis) -> None:
    facts = facts_from_probe(client)

    def run(ns: str) -> None:
        store = SessionStore(client, ns, layout="dense", facts=facts, idle_ttl=600).open()
        token = store.create(7, {"a": 1})
        store.get(token)
        store.apply(token, {"b": 2})
        store.update(token, {"c": 3})
        store.touch(token)
        store.sessions_of(7)
        store.destroy(token)

    run("warm")
    client.config_resetstat()
    run("cmds")
    sent = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in client.info("commandstats").items()
            if k not in ("cmdstat_config|resetstat", "cmdstat_info")}
    assert sent == {**BEFORE, "hsetnx": BEFORE["hsetnx"] + 1}


# --- a server that lost the metadata --------------------------------------------------------


@pytest.mark.parametrize("how", ["del", "flushall"])
def test_the_record_is_written_again_after_the_metadata_is_lost(client: redis.Redis, how: str) -> None:
    ns = _ns()
    ticks = Ticks()
    store = SessionStore(client, ns, layout="dense", track_devices=True).open()
    idle = SessionStore(client, ns, layout="dense", track_devices=True).open()
    _ticking(idle, ticks)
    store.change_lifecycle(max_sessions_per_identity=4)  # what is recorded now is not what it was made with
    lost = "devices=1 limit=4 on_limit=evict stream=none"
    for flow in ("create", "refresh"):
        if how == "del":
            client.delete(meta_key(ns))
        else:
            client.flushall()
        assert _life(client, ns) is None
        if flow == "create":  # a create finds the metadata gone (plans_present) and recovers
            store.create("ada", label="phone")
        else:  # a store's metadata read finds it gone and writes it again
            ticks.minute()
            idle.get("x" * 32)
        assert _life(client, ns) == (lost if flow == "create" else "devices=1 limit=none stream=none")
        if flow == "create":
            # the idle store had not adopted the change: the options it uses are written
            with pytest.raises(LifecycleMismatch):
                SessionStore(client, ns, layout="dense", track_devices=True).open()
            SessionStore(client, ns, layout="dense", track_devices=True, max_sessions_per_identity=4).open()


# --- the cluster -----------------------------------------------------------------------------


def test_the_record_on_the_cluster(cluster_client: Any) -> None:
    ns = _ns()
    ticks = Ticks()
    a = SessionStore(cluster_client, ns, layout="dense", max_sessions_per_identity=2).open()
    b = SessionStore(cluster_client, ns, layout="dense", max_sessions_per_identity=2).open()
    _ticking(b, ticks)
    assert _life(cluster_client, ns) == "devices=0 limit=2 on_limit=evict stream=none"
    with pytest.raises(LifecycleMismatch):
        SessionStore(cluster_client, ns, layout="dense").open()
    old = [a.create("ada") for _ in range(2)]
    a.change_lifecycle(max_sessions_per_identity=None, events_stream=100)
    ticks.minute()
    more = [b.create("ada") for _ in range(2)]
    assert all(a.get(t) is not None for t in old + more)
    assert cluster_client.xlen(stream_key(ns)) == 2  # b's creates, each an event in the stream
    assert b.destroy_all("ada") == 4
