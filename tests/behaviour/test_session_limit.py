"""A per-identity session limit (max_sessions_per_identity) under simultaneous logins:
8 sessions of one user log in at once with N = 3, repeated, on each server of the matrix
and the cluster fixture: exactly 3 remain each time, every eviction is one destroyed
event (cause "limit"), and every evicted cookie is dead; with on_limit="refuse" exactly
3 logins succeed and the refused sessions stay as they were. Plus the limit's rules one
at a time: least recently seen first, rotations are one session, refusals write nothing."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from densekv.errors import InvalidArgument, SessionLimitReached
from densekv.sessions import SessionStore
from densekv.sessions.events import SessionEvent
from tests.behaviour.test_sessions import Clock

ROUNDS = int(os.environ.get("DENSEKV_LIMIT_ROUNDS", "200"))
N, LOGINS = 3, 8


class Limits:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.evicted: list[str] = []

    def on_event(self, event: SessionEvent) -> None:
        if event.kind == "destroyed" and event.cause == "limit":
            with self.lock:
                self.evicted.append(event.session_id)


def _login(gate: threading.Barrier, store: SessionStore, token: str, user: str, results: list[Any], i: int) -> None:
    gate.wait()
    try:
        results[i] = store.login(token, user)
    except SessionLimitReached as exc:
        results[i] = exc


def _race(client: Any, ns: str, policy: str, rounds: int) -> None:
    limits = Limits()
    stores = [SessionStore(client, ns, layout="dense", max_sessions_per_identity=N, on_limit=policy).open()
              for _ in range(LOGINS)]  # one store per worker, as separate processes would have
    for s in stores:
        s.observe(limits)
    for round_ in range(rounds):
        user = f"u{round_}"
        anons = [s.create(None, {"i": i}) for i, s in enumerate(stores)]
        results: list[Any] = [None] * LOGINS
        gate = threading.Barrier(LOGINS)

        threads = [threading.Thread(target=_login, args=(gate, stores[i], anons[i], user, results, i))
                   for i in range(LOGINS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        listed = stores[0].sessions_of(user)
        assert len(listed) == N, (round_, policy, results)
        tokens = [r for r in results if isinstance(r, str)]
        live = [t for t in tokens if stores[0].get(t) is not None]
        assert len(live) == N, (round_, policy, results)
        assert {stores[0].get(t).id for t in live} == {s.id for s in listed}  # type: ignore[union-attr]
        for i, r in enumerate(results):
            if isinstance(r, SessionLimitReached):  # refused: the anonymous session as it was
                kept = stores[0].get(anons[i])
                assert kept is not None and kept.identity is None and kept.data == {"i": i}
            else:  # logged in (maybe evicted since): the old cookie is dead either way
                assert stores[0].get(anons[i]) is None
        if policy == "evict":
            assert sum(isinstance(r, SessionLimitReached) for r in results) == 0
            assert len(limits.evicted) == LOGINS - N, (round_, limits.evicted)
        else:
            assert sum(isinstance(r, SessionLimitReached) for r in results) == LOGINS - N
            assert limits.evicted == []
        limits.evicted.clear()


def test_simultaneous_logins_keep_the_limit(client: Any) -> None:
    _race(client, f"lim-{time.time_ns()}", "evict", ROUNDS)


def test_simultaneous_logins_refused_past_the_limit(client: Any) -> None:
    _race(client, f"limr-{time.time_ns()}", "refuse", max(1, ROUNDS // 4))


def test_simultaneous_logins_on_the_cluster(cluster_client: Any) -> None:
    _race(cluster_client, f"limc-{time.time_ns()}", "evict", ROUNDS)


def test_least_recently_seen_goes_first_and_rotation_is_one_session(client: Any) -> None:
    clock = Clock()
    store = SessionStore(client, f"lim1-{time.time_ns()}", layout="dense", idle_ttl=1000,
                         max_sessions_per_identity=2, clock=clock).open()
    a = store.login(store.create(None), 1)
    clock.now += 10
    b = store.login(store.create(None), 1)
    assert a is not None and b is not None
    clock.now += 400  # a quarter of the idle window and more: a touch rolls a's expiry
    assert store.touch(a)
    a2 = store.regenerate(a)  # one session rotating: still two sessions, nothing evicted
    assert a2 is not None and store.get(b) is not None and len(store.sessions_of(1)) == 2
    c = store.create(1)  # b was seen least recently: b goes
    assert store.get(b) is None and store.get(a2) is not None and store.get(c) is not None
    assert len(store.sessions_of(1)) == 2
    other = store.create(2)  # other identities are not counted
    assert store.get(other) is not None and len(store.sessions_of(1)) == 2
    clock.now += 1001  # both of identity 1 idled out: dead sessions do not count
    d = store.create(1)
    e = store.create(1)
    assert store.get(d) is not None and store.get(e) is not None


def test_refusal_writes_nothing(client: Any) -> None:
    store = SessionStore(client, f"lim2-{time.time_ns()}", layout="dense",
                         max_sessions_per_identity=1, on_limit="refuse").open()
    first = store.create(7)
    anon = store.create(None, {"x": 1})
    with pytest.raises(SessionLimitReached):
        store.login(anon, 7)
    with pytest.raises(SessionLimitReached):
        store.create(7)
    assert store.get(anon) is not None and store.get(anon).identity is None  # type: ignore[union-attr]
    assert [s.id for s in store.sessions_of(7)] == [store.get(first).id]  # type: ignore[union-attr]
    assert store.regenerate(first) is not None  # a rotation is no new session


def test_limit_options_are_checked(client: Any) -> None:
    for bad in (0, -1, True, 2.5):
        with pytest.raises(InvalidArgument):
            SessionStore(client, "lim3", max_sessions_per_identity=bad).open()  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        SessionStore(client, "lim3", max_sessions_per_identity=2, on_limit="drop").open()
    with pytest.raises(InvalidArgument):
        SessionStore(client, "lim3", max_sessions_per_identity=2, index_identities=False).open()
