"""Lifecycle events (densekv/sessions/events.py): every kind on every layout, sync and
async, on each server of the matrix and the cluster fixture; each removal reported once
(a sweep run twice reports nothing twice), no token in any event, a failing observer is
not the caller's error, and a store without observers records nothing."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
import redis
import redis.asyncio

from densekv.sessions import AsyncSessionStore, SessionStore
from densekv.sessions.events import CAUSES, KINDS, SessionEvent
from densekv.sessions.model import digest_of
from tests.behaviour.test_sessions import Clock, layouts_for


class Recorder:
    def __init__(self) -> None:
        self.events: list[SessionEvent] = []
        self.ops: list[tuple[str, float, str | None]] = []

    def on_event(self, event: SessionEvent) -> None:
        self.events.append(event)

    def on_operation(self, name: str, seconds: float, error: str | None) -> None:
        self.ops.append((name, seconds, error))

    def kinds(self) -> list[tuple[str, str]]:
        return [(e.kind, e.cause) for e in self.events]


def sid(token: str) -> str:
    digest = digest_of(token)
    assert digest is not None
    return digest.hex()


def _sweeps(store: SessionStore) -> bool:
    return store.layout in ("dense", "zset")


def test_every_kind_on_every_layout(client: redis.Redis) -> None:
    for layout in layouts_for(client):
        clock = Clock()
        ns = f"ev-{layout}"
        store = SessionStore(client, ns, layout=layout, ttl=1000, idle_ttl=100, clock=clock)
        rec = Recorder()
        store.observe(rec)
        anon = store.create(None, {"cart": [1]})
        assert rec.kinds() == [("created", "create")], layout
        assert rec.events[0].session_id == sid(anon) and rec.events[0].identity is None
        logged = store.login(anon, 42)
        assert logged is not None
        ev = rec.events[-1]
        assert (ev.kind, ev.cause, ev.identity, ev.old_session_id, ev.session_id) == \
            ("rotated", "login", 42, sid(anon), sid(logged)), layout
        again = store.regenerate(logged)
        assert again is not None
        ev = rec.events[-1]
        assert (ev.kind, ev.cause, ev.identity, ev.old_session_id) == ("rotated", "regenerate", 42, sid(logged))
        assert store.destroy(again)
        assert rec.events[-1].kind == "destroyed" and rec.events[-1].cause == "logout"
        assert rec.events[-1].session_id == sid(again) and rec.events[-1].identity == 42
        assert not store.destroy(again)  # nothing removed: nothing reported
        assert rec.events[-1].session_id == sid(again) and len(rec.events) == 4
        a, b = store.create(7), store.create(7)
        assert store.destroy_all(7) == 2
        assert sorted((e.session_id, e.cause) for e in rec.events[-2:]) == \
            sorted([(sid(a), "logout_everywhere"), (sid(b), "logout_everywhere")])
        c = store.create(8)
        assert store.destroy_id(sid(c))
        assert (rec.events[-1].kind, rec.events[-1].cause) == ("destroyed", "admin")
        # expiry: idle (no touch for 100 s) and absolute (1000 s whatever the touches)
        idle = store.create(9)
        absolute = store.create(10, ttl=50)
        before = len(rec.events)
        clock.now += 120
        assert store.get(idle) is None and len(rec.events) == before  # a read reports nothing
        store.sweep()
        expired = {e.session_id: e for e in rec.events[before:]}
        if _sweeps(store):
            assert {k: (e.kind, e.cause, e.found_by) for k, e in expired.items()} == {
                sid(idle): ("expired", "idle", "sweep"), sid(absolute): ("expired", "absolute", "sweep")}, layout
            store.sweep()
            assert len(rec.events) == before + 2  # a second sweep reports nothing again
        else:  # the server expires these layouts' data itself: nothing sweeps, nothing to report
            assert expired == {}, layout
        for event in rec.events:
            assert event.kind in KINDS and event.cause in CAUSES[event.kind]
            assert not any(t in repr(event) for t in (anon, logged, again, a, b, c, idle, absolute))
        names = [name for name, _, _ in rec.ops]
        assert names[:4] == ["create", "login", "regenerate", "destroy"] and all(e is None for _, _, e in rec.ops)


def test_destroy_of_an_unswept_expired_session_reports_expiry(client: redis.Redis) -> None:
    clock = Clock()
    store = SessionStore(client, "ev-late", layout="dense", ttl=60, clock=clock)
    rec = Recorder()
    store.observe(rec)
    token = store.create(5)
    clock.now += 61
    assert not store.destroy(token)  # dead already: False, and the removal is an expiry
    assert [(e.kind, e.cause, e.found_by) for e in rec.events[1:]] == [("expired", "absolute", "destroy")]


def test_failing_observer_is_logged_not_raised(client: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    store = SessionStore(client, "ev-fail", layout="dense")

    class Broken:
        def on_event(self, event: SessionEvent) -> None:
            raise RuntimeError("observer bug")

    rec = Recorder()
    store.observe(Broken())
    store.observe(rec)
    with caplog.at_level(logging.ERROR, logger="densekv.sessions"):
        token = store.create(1)
    assert store.get(token) is not None and rec.kinds() == [("created", "create")]
    assert "observer bug" in caplog.text


def test_errors_reach_on_operation_and_events_of_a_failed_call_are_kept(client: redis.Redis) -> None:
    store = SessionStore(client, "ev-err", layout="dense")
    rec = Recorder()
    store.observe(rec)
    with pytest.raises(Exception):  # noqa: B017 - any typed refusal
        store.create(1, {"x": object()})
    assert rec.ops[-1][0] == "create" and rec.ops[-1][2] == "SessionDataInvalid" and rec.events == []


def test_no_observer_no_buffer(client: redis.Redis) -> None:
    store = SessionStore(client, "ev-off", layout="dense")
    rec = Recorder()
    store.observe(rec)
    store.unobserve(rec)
    store.create(1)
    assert rec.events == [] and store._core.recorder.events is None


def test_async_store_awaits_async_observers(server: Any) -> None:
    async def main() -> list[tuple[str, str]]:
        client = redis.asyncio.Redis(port=server.port)
        seen: list[SessionEvent] = []

        class AsyncObserver:
            async def on_event(self, event: SessionEvent) -> None:
                await asyncio.sleep(0)
                seen.append(event)

        ns = f"ev-async-{time.time_ns()}"
        store = AsyncSessionStore(client, ns, layout="dense", events_stream=100)
        store.observe(AsyncObserver())
        token = await store.create(None)
        token = await store.login(token, "ada") or ""
        await store.destroy(token)
        from densekv.sessions.events import event_from_stream, stream_key

        streamed = [event_from_stream(f) for _, f in await client.xrange(stream_key(ns))]
        await client.aclose()
        assert streamed == seen
        return [(e.kind, e.cause) for e in seen]

    assert asyncio.run(main()) == [("created", "create"), ("rotated", "login"), ("destroyed", "logout")]


def test_events_on_the_cluster(cluster_client: Any) -> None:
    ns = f"ev-cl-{time.time_ns()}"
    store = SessionStore(cluster_client, ns, layout="dense", ttl=60, clock=(clock := Clock()), events_stream=10_000)
    rec = Recorder()
    store.observe(rec)
    tokens = [store.create(i) for i in range(20)]
    moved = [store.login(t, i + 100) for i, t in enumerate(tokens)]
    clock.now += 61
    store.sweep()
    kinds: dict[str, int] = {}
    for e in rec.events:
        kinds[e.kind] = kinds.get(e.kind, 0) + 1
    assert kinds == {"created": 20, "rotated": 20, "expired": 20}
    assert {e.session_id for e in rec.events if e.kind == "expired"} == {sid(t) for t in moved if t}
    assert sorted(_stream(cluster_client, ns), key=repr) == sorted(rec.events, key=repr)  # one slot: the namespace's




def _stream(client: Any, ns: str) -> list[SessionEvent]:
    from densekv.sessions.events import event_from_stream, stream_key

    return [event_from_stream(fields) for _, fields in client.xrange(stream_key(ns))]


def test_event_stream_carries_every_kind(client: redis.Redis) -> None:
    clock = Clock()
    ns = f"evs-{time.time_ns()}"
    store = SessionStore(client, ns, layout="dense", ttl=100, idle_ttl=50, clock=clock, events_stream=1000,
                         track_devices=True)
    rec = Recorder()
    store.observe(rec)
    anon = store.create(None)
    user = store.login(anon, "ada", label="phone") or ""
    store.destroy(store.create(7))
    store.create(8)
    clock.now += 60
    store.sweep()
    got = _stream(client, ns)
    assert got == rec.events  # the same events, in order, both ways (`at` is the store's clock)
    assert [(e.kind, e.cause) for e in got] == [("created", "create"), ("rotated", "login"), ("created", "create"),
                                                ("destroyed", "logout"), ("created", "create"),
                                                ("expired", "idle"), ("expired", "idle")]
    assert got[1].label == "phone" and got[1].identity == "ada"
    raw = b"".join(v for _, f in client.xrange(f"{ns}:ev:{{{ns}}}") for v in f.values())
    assert anon.encode() not in raw and user.encode() not in raw


class KillsTheRemoval:
    """An executor that loses the connection on the round trip that would remove expired
    sessions (hrec_sweep, not dry): a sweep dying between its announcement and removal."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.client = inner.client

    def run_many(self, plans: Any) -> Any:
        for plan in plans:
            for step in plan.steps:
                script = getattr(step, "script", None)
                if script is not None and script.name == "hrec_sweep" and step.args[-1] == b"0":
                    raise redis.ConnectionError("killed between announcing and removing")
        return self.inner.run_many(plans)


def test_a_sweep_killed_after_its_announcement_announces_again(client: redis.Redis) -> None:
    """Expiries reach the stream at least once: a sweep that dies after announcing and
    before removing leaves the sessions and their announcement; the next sweep announces
    them again (one duplicate per interruption) and removes them."""
    clock = Clock()
    ns = f"evk-{time.time_ns()}"
    # one partition: one sweep round, killed after its announcement
    store = SessionStore(client, ns, layout="dense", ttl=10, clock=clock, events_stream=1000, partitions=1)
    tokens = [store.create(i) for i in range(20)]
    clock.now += 11
    real = store._ex
    store._ex = KillsTheRemoval(real)  # type: ignore[assignment]
    with pytest.raises(redis.ConnectionError):
        store.sweep()
    store._ex = real
    expired = sorted(e.session_id for e in _stream(client, ns) if e.kind == "expired")
    assert expired == sorted(sid(t) for t in tokens) and store.count() == 20  # told, nothing removed
    store.sweep()
    expired = sorted(e.session_id for e in _stream(client, ns) if e.kind == "expired")
    assert expired == sorted([sid(t) for t in tokens] * 2) and store.count() == 0
    store.sweep()  # nothing left: nothing announced
    assert len([e for e in _stream(client, ns) if e.kind == "expired"]) == 40


def test_a_stream_without_observers(client: redis.Redis) -> None:
    """events_stream alone (no observer): the stream hears every event, sync and async."""
    from densekv.sessions.events import stream_key

    ns = f"evso-{time.time_ns()}"
    store = SessionStore(client, ns, layout="dense", events_stream=100)
    store.destroy(store.create(1))
    assert [f[b"kind"] for _, f in client.xrange(stream_key(ns))] == [b"created", b"destroyed"]
