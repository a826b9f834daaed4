"""What only Django's engine (densekv.integrations.django) has to prove; the shared
contract is in test_contract.py, Django's own sessions tests run in
tests/peers/test_django_suite.py. Here: DENSEKV_SESSIONS checked whole (a typo names
itself); url clients with connect and read timeouts (a stalled server fails fast); cookies
as SESSION_COOKIE_* say; stored lifetimes equal to Django's db backend's (set_expiry,
SESSION_COOKIE_AGE, SESSION_EXPIRE_AT_BROWSER_CLOSE); data Django's serializer would change,
and data nested too deep; the clearsessions command; async views and the engine's real
asyncio; Django's own auth login()/logout() (another user's data dropped); undecodable
sessions read as none, login and logout working on them; logout_everywhere racing cycle_key;
the test Client's `session` and force_login(); sessions moved in from Django's cache
(RedisCache on the test server) and db (sqlite) backends; a real gunicorn with two workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.sessions.backends.base import CreateError
from django.contrib.sessions.exceptions import SessionInterrupted
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

import densekv
from densekv.errors import DecodeError, ServerUnavailable, SessionDataInvalid
from densekv.integrations.django import SessionStore
from densekv.sessions.model import digest_of, new_token
from densekv.tools.server.process import ServerProcess, free_port
from tests.web.app_server import wait_serving
from tests.web.apps import django_app
from tests.web.driver import COOKIE, SLOW_SET_S, WRONG_URLS

django_app.configure()

OK = (200, {"ok": True})
ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ns() -> str:
    return f"dj{uuid.uuid4().hex[:10]}"


@pytest.fixture
def driver(server: ServerProcess, ns: str) -> Iterator[django_app.DjangoDriver]:
    d = django_app.make_driver(server.url, ns)
    yield d
    d.close()


@pytest.fixture
def store(client: redis.Redis, ns: str) -> densekv.SessionStore:
    """The densekv store the engine writes to, opened on its own (the `client` fixture
    flushed the server first)."""
    return densekv.SessionStore(client, namespace=ns)


@pytest.fixture(scope="session")
def migrated() -> None:
    call_command("migrate", verbosity=0, interactive=False)


def engine_on(server: ServerProcess, ns: str, **conf: Any) -> type[SessionStore]:
    return SessionStore.bound_to({"url": server.url, "namespace": ns, **conf})


# -- the setting ----------------------------------------------------------------------------
def test_a_typo_in_the_setting_is_improperly_configured_naming_it(server: ServerProcess, ns: str) -> None:
    with (override_settings(DENSEKV_SESSIONS={"url": server.url, "namespace": ns, "idle_tll": 60}),
          pytest.raises(ImproperlyConfigured) as raised):
        SessionStore("x" * 40).load()
    message = str(raised.value)
    assert "DENSEKV_SESSIONS" in message and "'idle_tll'" in message
    assert "did you mean 'idle_ttl'" in message
    for key in ("url", "client", "async_client", "fallback", "namespace", "ttl", "idle_ttl",
                "socket_timeout", "socket_connect_timeout"):
        assert key in message.split("accepted keys are", 1)[1]
    for bad, named in [({"namespace": ns}, "'url', a 'client'"),
                       ({"url": server.url, "socket_timeout": 0}, "socket_timeout"),
                       ({"url": server.url, "socket_connect_timeout": "5"}, "socket_connect_timeout"),
                       ({"url": server.url, "fallback": "no.such.Backend"}, "fallback"),
                       (["url", server.url], "is a dict")]:
        with pytest.raises(ImproperlyConfigured, match=named):
            SessionStore.bound_to(bad)("x" * 40).load()  # type: ignore[arg-type]


@pytest.mark.parametrize("url", WRONG_URLS)
def test_a_wrong_url_is_improperly_configured(url: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="DENSEKV_SESSIONS") as raised:  # "": no url
        SessionStore.bound_to({"url": url})("x" * 40).load()
    assert "s3cret" not in str(raised.value)


def test_a_wrong_url_fails_when_django_starts(tmp_path: Path) -> None:
    """Django imports SESSION_ENGINE when it builds SessionMiddleware, as
    get_wsgi_application() does at startup: the engine checks the setting then, with no
    request and no connection."""
    script = (
        "import django\n"
        "from django.conf import settings\n"
        "settings.configure(SESSION_ENGINE='densekv.integrations.django', ROOT_URLCONF=[],\n"
        "    MIDDLEWARE=['django.contrib.sessions.middleware.SessionMiddleware'],\n"
        "    DENSEKV_SESSIONS={'url': URL})\n"
        "from django.core.wsgi import get_wsgi_application\n"
        "get_wsgi_application()\n"
        "print('started')\n")
    for url, ok in [("http://127.0.0.1:6379/0", False), ("redis://127.0.0.1:1/0", True)]:
        done = subprocess.run([sys.executable, "-c", f"URL = {url!r}\n{script}"], check=False, cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        if ok:
            assert done.returncode == 0 and "started" in done.stdout, done.stderr
        else:
            assert done.returncode != 0 and "ImproperlyConfigured" in done.stderr
            assert "DENSEKV_SESSIONS['url']" in done.stderr


def _pool_kwargs(client: Any) -> dict[str, Any]:
    return dict(client.connection_pool.connection_kwargs)


def test_clients_built_from_the_url_have_connect_and_read_timeouts(server: ServerProcess, ns: str) -> None:
    default = engine_on(server, ns)._backend()
    kwargs = _pool_kwargs(default.sync().client)
    assert (kwargs["socket_connect_timeout"], kwargs["socket_timeout"]) == (5.0, 5.0)
    tuned = engine_on(server, ns, socket_connect_timeout=0.5, socket_timeout=2)._backend()
    kwargs = _pool_kwargs(tuned.sync().client)
    assert (kwargs["socket_connect_timeout"], kwargs["socket_timeout"]) == (0.5, 2)

    async def per_loop() -> dict[str, Any]:
        return _pool_kwargs((await tuned.for_loop()).client)

    kwargs = asyncio.run(per_loop())
    assert (kwargs["socket_connect_timeout"], kwargs["socket_timeout"]) == (0.5, 2)
    default.close()
    tuned.close()


@contextlib.contextmanager
def stalled_server() -> Iterator[str]:
    """A url whose server takes connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


def test_a_stalled_server_fails_only_the_requests_that_use_the_session_and_fast(ns: str) -> None:
    with stalled_server() as url:
        engine = SessionStore.bound_to({"url": url, "namespace": ns, "socket_timeout": 0.3,
                                        "socket_connect_timeout": 0.3})
        engine_id = uuid.uuid4().hex
        django_app._ENGINES[engine_id] = engine
        try:
            with pytest.raises(ServerUnavailable, match="Timeout"):
                engine(new_token()).load()
            browser = django_app.DjangoDriver(engine_id, None)
            assert browser.request("GET", "/noop") == OK  # no session use, no server call
            browser.set_cookie(new_token())
            start = time.monotonic()
            assert browser.request("GET", "/get/a")[0] == 500
            assert time.monotonic() - start < 5  # the timeout, not a hang

            async def use() -> int:
                return (await browser.arequest("GET", "/async/get/a"))[0]

            start = time.monotonic()
            assert asyncio.run(use()) == 500
            assert time.monotonic() - start < 5
        finally:
            django_app._ENGINES.pop(engine_id, None)
            engine._backend().close()


# -- cookies and expiry ---------------------------------------------------------------------
def test_the_cookie_follows_the_session_cookie_settings(driver: django_app.DjangoDriver) -> None:
    with override_settings(SESSION_COOKIE_SECURE=True, SESSION_COOKIE_HTTPONLY=True,
                           SESSION_COOKIE_SAMESITE="Strict", SESSION_COOKIE_DOMAIN="example.test",
                           SESSION_COOKIE_PATH="/app", SESSION_COOKIE_AGE=1234):
        assert driver.request("POST", "/set/a", {"value": 1}) == OK
        morsel = driver.last_response.cookies[COOKIE]
    assert morsel.value == driver.cookie()
    assert (morsel["secure"], morsel["httponly"], morsel["samesite"]) == (True, True, "Strict")
    assert (morsel["domain"], morsel["path"], morsel["max-age"]) == ("example.test", "/app", 1234)
    with override_settings(SESSION_EXPIRE_AT_BROWSER_CLOSE=True, SESSION_COOKIE_HTTPONLY=False):
        assert driver.request("POST", "/set/b", {"value": 2}) == OK
        morsel = driver.last_response.cookies[COOKIE]
    assert (morsel["max-age"], morsel["expires"], morsel["httponly"]) == ("", "", "")
    assert morsel.value == driver.cookie()


def test_set_expiry_is_the_sessions_lifetime_before_and_after_the_first_save(
        driver: django_app.DjangoDriver, store: densekv.SessionStore) -> None:
    start = time.time()
    assert driver.request("POST", "/set-expiry/120") == OK
    assert driver.last_response.cookies[COOKIE]["max-age"] == 120
    token = driver.cookie()
    assert token is not None
    first = store.get(token)
    assert first is not None and start + 119 <= first.expires_at <= time.time() + 121
    # on an existing session the record follows the cookie: shorter, then much longer
    # than the store's ttl (SESSION_COOKIE_AGE): "remember me" is kept on the server too
    assert driver.request("POST", "/set-expiry/30") == OK
    assert driver.last_response.cookies[COOKIE]["max-age"] == 30
    assert driver.cookie() == token
    again = store.get(token)
    assert again is not None and start + 29 <= again.expires_at <= time.time() + 31
    month = 30 * 86400
    assert driver.request("POST", f"/set-expiry/{month}") == OK
    assert driver.last_response.cookies[COOKIE]["max-age"] == month
    later = store.get(token)
    assert later is not None and start + month - 1 <= later.expires_at <= time.time() + month + 1
    assert later.expires_at > start + settings.SESSION_COOKIE_AGE


def test_set_expiry_in_seconds_restarts_at_each_save(server: ServerProcess, ns: str,
                                                     store: densekv.SessionStore) -> None:
    """As Django's own backends: set_expiry(n) is n seconds of inactivity, counted from
    the last save; set_expiry(None) gives the store's ttl back."""
    clock = Clock()
    engine = engine_on(server, ns, clock=clock)
    s = engine()
    s["a"] = 1
    s.set_expiry(600)
    s.save()
    key = s.session_key
    got = store.get(key)
    assert got is not None and got.expires_at == int(clock.now) + 600
    clock.now += 500
    s = engine(key)
    s["a"] = 2
    s.save()
    got = store.get(key)
    assert got is not None and got.expires_at == int(clock.now) + 600
    s = engine(key)
    s.set_expiry(None)
    s.save()
    got = store.get(key)
    assert got is not None and got.expires_at == int(clock.now) + settings.SESSION_COOKIE_AGE


def test_an_expiry_already_past_ends_the_session(server: ServerProcess, ns: str,
                                                 store: densekv.SessionStore) -> None:
    engine = engine_on(server, ns)
    born_dead = engine()
    born_dead.set_expiry(-10)
    born_dead["a"] = 1
    born_dead.save()
    assert store.count() == 0  # nothing was stored for it
    session = engine()
    session["a"] = 1
    session.save()
    key = session.session_key
    session.set_expiry(datetime.timedelta(seconds=-10))
    session.save()
    assert engine(key).load() == {}
    assert store.get(key) is None


LIFETIMES = [(age, close, expiry) for age in (None, 777) for close in (False, True)
             for expiry in (None, 0, 300, "timedelta", "datetime")]


def test_the_stored_lifetime_is_djangos_db_backends(server: ServerProcess, ns: str, store: densekv.SessionStore,
                                                    migrated: None) -> None:
    """The same session saved by Django's db backend and by densekv's engine ends at the
    same moment, at the first save and at a later one, for every SESSION_COOKIE_AGE,
    SESSION_EXPIRE_AT_BROWSER_CLOSE and set_expiry (seconds, 0, timedelta, datetime)."""
    from django.contrib.sessions.backends.db import SessionStore as DbSession
    from django.contrib.sessions.models import Session as Row

    def settings_of(age: int | None, close: bool) -> Any:
        extra = {} if age is None else {"SESSION_COOKIE_AGE": age}
        return override_settings(SESSION_EXPIRE_AT_BROWSER_CLOSE=close, **extra,
                                 DENSEKV_SESSIONS={"url": server.url, "namespace": ns})

    def end_of(name: str, key: str) -> float:
        if name == "db":
            return float(Row.objects.get(session_key=key).expire_date.timestamp())
        got = store.get(key)
        assert got is not None
        return float(got.expires_at)

    engines = {"db": DbSession, "densekv": SessionStore}
    keys: dict[tuple[Any, ...], str] = {}
    ends: dict[tuple[Any, ...], list[float]] = {}
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=5)
    for age, close, expiry in LIFETIMES:  # the first save
        value = {"timedelta": datetime.timedelta(hours=2), "datetime": later}.get(expiry, expiry)
        with settings_of(age, close):
            for name, engine in engines.items():
                session = engine()
                session["a"] = 1
                if expiry is not None:
                    session.set_expiry(value)
                session.save()
                keys[age, close, expiry, name] = session.session_key
                ends[age, close, expiry, name] = [end_of(name, session.session_key)]
    time.sleep(1.1)  # a later save: Django's backends give the session its lifetime again
    for age, close, expiry in LIFETIMES:
        with settings_of(age, close):
            for name, engine in engines.items():
                session = engine(keys[age, close, expiry, name])
                session["a"] = 2
                session.save()
                ends[age, close, expiry, name].append(end_of(name, session.session_key))
    for age, close, expiry in LIFETIMES:
        db, dense = ends[age, close, expiry, "db"], ends[age, close, expiry, "densekv"]
        case = (age, close, expiry, db, dense)
        assert abs(db[0] - dense[0]) <= 2 and abs(db[1] - dense[1]) <= 2, case
        if expiry in (None, 0, 300):  # seconds from the last save: the later save extended it
            assert dense[1] > dense[0], case
        else:  # a moment in time: it stays (to the second: densekv counts whole seconds)
            assert abs(dense[1] - dense[0]) <= 1, case


def test_an_unchanged_save_restarts_the_lifetime_too(server: ServerProcess, ns: str,
                                                     store: densekv.SessionStore) -> None:
    """SESSION_SAVE_EVERY_REQUEST (or modified without a change): Django's backends write the
    session again with a new expiry; so does the engine (without rewriting the data)."""
    clock = Clock()
    engine = engine_on(server, ns, clock=clock)
    session = engine()
    session["a"] = 1
    session.save()
    key = session.session_key
    clock.now += 1000
    again = engine(key)
    assert again["a"] == 1
    again.modified = True
    again.save()
    got = store.get(key)
    assert got is not None and got.expires_at == int(clock.now) + settings.SESSION_COOKIE_AGE
    assert got.data == {"a": 1}


def test_a_value_changed_in_place_is_saved_and_the_next_save_diffs_against_it(
        server: ServerProcess, ns: str, store: densekv.SessionStore) -> None:
    """The base a save diffs against is a copy of what was loaded (values.copied), so a
    nested value the app changes in place counts as a change, this save and the next."""
    engine = engine_on(server, ns)
    session = engine()
    session["cart"] = {"items": [1, 2], "note": "x"}
    session["n"] = 1
    session.save()
    again = engine(session.session_key)
    again["cart"]["items"].append(3)  # in place: Django sees no assignment
    again.modified = True
    again.save()
    got = store.get(session.session_key)
    assert got is not None and got.data == {"cart": {"items": [1, 2, 3], "note": "x"}, "n": 1}
    again["cart"]["items"].append(4)  # again, after the save: against the data just saved
    again.modified = True
    again.save()
    got = store.get(session.session_key)
    assert got is not None and got.data["cart"]["items"] == [1, 2, 3, 4]


def test_expire_at_browser_close_sends_no_max_age_and_keeps_the_server_side_bound(
        server: ServerProcess, ns: str, store: densekv.SessionStore) -> None:
    driver = django_app.make_driver(server.url, ns, ttl=settings.SESSION_COOKIE_AGE)
    try:
        with override_settings(SESSION_EXPIRE_AT_BROWSER_CLOSE=True):
            assert driver.request("POST", "/set/a", {"value": 1}) == OK
            morsel = driver.last_response.cookies[COOKIE]
        assert (morsel["max-age"], morsel["expires"]) == ("", "")
        got = store.get(driver.cookie() or "")
        assert got is not None
        assert abs(got.expires_at - (time.time() + settings.SESSION_COOKIE_AGE)) <= 2
    finally:
        driver.close()


# -- data -----------------------------------------------------------------------------------
def test_values_densekv_cannot_keep_come_back_as_djangos_serializer_gives_them(
        server: ServerProcess, ns: str) -> None:
    engine = engine_on(server, ns)
    session = engine()
    session.update({"pair": (1, 2), "by_id": {"k": {7: "x"}}, "raw": b"\x00\xff", "n": 5})
    session.save()
    fresh = engine(session.session_key)
    assert fresh.load() == {"pair": [1, 2], "by_id": {"k": {"7": "x"}}, "raw": b"\x00\xff", "n": 5}
    fresh["when"] = datetime.datetime(2024, 1, 1)
    with pytest.raises(TypeError):  # JSON refuses it, as with every Django backend
        fresh.save()
    assert engine(session.session_key).load()["n"] == 5


def test_data_nested_too_deep_is_refused_before_anything_is_written(server: ServerProcess, ns: str,
                                                                   store: densekv.SessionStore) -> None:
    """A 600-deep dict (Django's db backend stores it; loading it would then fail) is
    SessionDataInvalid at save, new session or old, and what was stored stays readable."""
    from densekv.sessions.payload import MAX_NESTING

    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(600):
        inner["d"] = {}
        inner = inner["d"]
    engine = engine_on(server, ns)
    fresh = engine()
    fresh["deep"] = deep
    with pytest.raises(SessionDataInvalid, match=str(MAX_NESTING)):
        fresh.save()
    assert store.count() == 0
    session = engine()
    session["a"] = 1
    session.save()
    again = engine(session.session_key)
    again["deep"] = deep
    with pytest.raises(SessionDataInvalid):
        again.save()
    assert engine(session.session_key).load() == {"a": 1}


def test_must_create_refuses_a_key_in_use(server: ServerProcess, ns: str,
                                          store: densekv.SessionStore) -> None:
    engine = engine_on(server, ns)
    first = engine()
    first["a"] = 1
    first.save()
    clash = engine(first.session_key)
    with pytest.raises(CreateError):
        clash.save(must_create=True)
    django_style = "abcdefghijklmnopqrstuvwxyz012345"  # Django's own key alphabet
    chosen = engine()
    chosen["b"] = 2
    chosen._session_key = django_style  # as Django's own backends do in create()
    chosen.save(must_create=True)
    assert chosen.session_key == django_style
    moved = store.get(django_style)
    assert moved is not None and moved.data == {"b": 2}


def test_a_write_after_a_concurrent_logout_is_djangos_session_interrupted(
        driver: django_app.DjangoDriver, store: densekv.SessionStore) -> None:
    assert driver.request("POST", "/set/x", {"value": 1}) == OK
    token = driver.cookie()
    other = driver.new_browser()
    other.set_cookie(token)
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(driver.request, "POST", "/slow-set/a", {"value": 1})
        time.sleep(SLOW_SET_S / 3)
        assert other.request("POST", "/logout") == OK
        assert slow.result()[0] == 400  # SessionInterrupted, Django's answer
    assert token is not None and store.get(token) is None
    assert store.count() == 0


# -- the clearsessions command --------------------------------------------------------------
def test_clearsessions_sweeps_expired_sessions(server: ServerProcess, ns: str,
                                               store: densekv.SessionStore) -> None:
    clock = Clock()
    with override_settings(DENSEKV_SESSIONS={"url": server.url, "namespace": ns, "ttl": 60, "clock": clock}):
        for i in range(3):
            s = SessionStore()
            s["i"] = i
            s.save()
        clock.now += 61
        live = SessionStore()
        live["x"] = 1
        live.save()
        assert store.count() == 4
        call_command("clearsessions")
        assert store.count() == 1
        assert SessionStore().exists(live.session_key)
        clock.now += 61
        asyncio.run(SessionStore.aclear_expired())
        assert store.count() == 0


# -- async ----------------------------------------------------------------------------------
def test_async_views_share_sessions_with_sync_views(driver: django_app.DjangoDriver,
                                                    store: densekv.SessionStore) -> None:
    async def visit() -> str | None:
        assert await driver.arequest("POST", "/async/set/a", {"value": [1, 2]}) == OK
        assert await driver.arequest("GET", "/async/get/a") == (200, {"value": [1, 2]})
        anonymous = driver.cookie()
        assert await driver.arequest("POST", "/async/login/31") == OK
        return anonymous

    anonymous = asyncio.run(visit())
    assert driver.request("GET", "/get/a") == (200, {"value": [1, 2]})
    assert driver.cookie() not in (None, anonymous)
    assert [s.identity for s in store.sessions_of(31)] == [31]
    stale = driver.new_browser()
    stale.set_cookie(anonymous)
    assert stale.request("GET", "/get/a") == (200, {"value": None})
    assert asyncio.run(driver.arequest("POST", "/async/logout-everywhere")) == OK
    assert store.sessions_of(31) == [] and driver.cookie() is None


def test_each_store_observes_the_async_views_stores_too(server: ServerProcess, ns: str) -> None:
    """densekv_each_store hands metrics every store behind the engine: the sync one and one
    AsyncSessionStore per event loop (async views), and takes a loop's store back once the
    loop has closed; the counts of both sides add up under the namespace."""
    prometheus_client = pytest.importorskip("prometheus_client")
    from densekv.integrations.prometheus import SessionMetrics

    registry = prometheus_client.CollectorRegistry()
    metrics = SessionMetrics(registry)
    engine = engine_on(server, ns)
    told: list[str] = []

    def made(store: Any) -> None:
        told.append(type(store).__name__)
        metrics.observe(store, active_every=None)

    def gone(store: Any) -> None:
        told.append("gone " + type(store).__name__)
        metrics.retire(store)  # its counts stay in the export

    engine.densekv_each_store(made, gone)

    def created() -> float:
        got = registry.get_sample_value("densekv_sessions_created_total", {"namespace": ns})
        return 0.0 if got is None else got

    async def an_async_view() -> None:
        s = engine()
        await s.aset("a", 1)
        await s.asave()

    asyncio.run(an_async_view())
    assert told == ["AsyncSessionStore"] and created() == 1
    asyncio.run(an_async_view())  # a new loop: the old one's store is taken back when the next is made
    assert told == ["AsyncSessionStore", "gone AsyncSessionStore", "AsyncSessionStore"] and created() == 2
    s = engine()
    s["b"] = 2
    s.save()  # the sync store, built now
    assert told[-1] == "SessionStore" and created() == 3
    later: list[str] = []
    engine.densekv_each_store(lambda store: later.append(type(store).__name__))  # those built so far too
    assert later == ["SessionStore"]  # (the last loop's store is gone with its loop)
    assert sum(t.store is None for t in metrics.tallies) == 1  # the retired loop's counts, kept once


def _connections(client: redis.Redis) -> int:
    return len(client.client_list())


def test_the_async_engine_is_asyncio_and_closes_its_client_with_the_loop(
        server: ServerProcess, ns: str, client: redis.Redis) -> None:
    engine = engine_on(server, ns)
    engine._backend()  # built now (building may close an older engine's client)
    before = _connections(client)

    async def use() -> None:
        s = engine()
        await s.aset("a", 1)
        await s.asave()
        key = s.session_key
        assert _connections(client) == before + 1  # the loop's own client
        again = engine(key)
        assert await again.aget("a") == 1
        await again.acycle_key()
        assert not await again.aexists(key)
        assert await again.aexists(again.session_key)
        await again.adelete()
        assert not await again.aexists(again.session_key)

    asyncio.run(use())
    assert engine._backend().sync_stores.alive() == []  # no sync store behind the async calls
    deadline = time.monotonic() + 2
    while _connections(client) != before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _connections(client) == before  # closed when asyncio.run shut the loop down


def test_the_engine_on_a_cluster_url_sync_and_async(cluster_client: redis.RedisCluster, ns: str) -> None:
    """`redis+cluster://`: the sync engine on a RedisCluster, the async one on redis-py's
    asyncio RedisCluster (densekv's AsyncClusterExecutor), one store between them."""
    node = cluster_client.get_default_node()
    engine = SessionStore.bound_to({"url": f"redis+cluster://127.0.0.1:{node.port}/0", "namespace": ns})
    s = engine()
    s["a"] = 1
    s.save()

    async def use(key: str) -> str:
        again = engine(key)
        assert await again.aget("a") == 1
        await again.aset("b", 2)
        await again.asave()
        await again.acycle_key()
        assert not await again.aexists(key)
        return str(again.session_key)

    new_key = asyncio.run(use(str(s.session_key)))
    assert dict(engine(new_key).load()) == {"a": 1, "b": 2}
    engine(new_key).delete()
    assert not engine().exists(new_key)


# -- Django's own auth ----------------------------------------------------------------------
def test_contrib_auth_login_and_logout(driver: django_app.DjangoDriver, store: densekv.SessionStore,
                                       migrated: None) -> None:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(f"ann-{uuid.uuid4().hex[:8]}")
    assert driver.request("POST", "/set/cart", {"value": ["kettle"]}) == OK
    anonymous = driver.cookie()
    assert driver.request("POST", f"/auth/login/{user.pk}") == OK
    assert driver.cookie() not in (None, anonymous)
    assert driver.request("GET", "/auth/whoami") == (200, {"user": user.pk})
    assert driver.request("GET", "/get/cart") == (200, {"value": ["kettle"]})  # kept at login
    sessions = store.sessions_of(user.pk)
    assert [s.identity for s in sessions] == [user.pk]  # int: Django wrote str(pk)
    stale = driver.new_browser()
    stale.set_cookie(anonymous)
    assert stale.request("GET", "/auth/whoami") == (200, {"user": None})
    assert driver.request("POST", "/auth/logout") == OK
    assert driver.cookie() is None
    assert store.sessions_of(user.pk) == []


# -- sessions that do not decode ------------------------------------------------------------
def corrupt(store: densekv.SessionStore, client: redis.Redis, token: str) -> str:
    """Replace the stored payload of `token`'s session with bytes no codec reads (its record
    header, expiry and identity kept); the digest's hex, which densekv's warning names."""
    from densekv.sessions.layouts.partitioned import PartitionedLayout
    from densekv.sessions.record import pack_record, unpack_record

    layout = store._opened().layout  # opens it if no operation has
    if not isinstance(layout, PartitionedLayout):
        pytest.skip(f"the test corrupts a partitioned record, not the {layout.name} layout's")
    digest = digest_of(token)
    assert digest is not None
    partition, field = layout.locate(digest)
    raw = client.hget(layout.hash_key(partition), field)
    assert raw is not None
    client.hset(layout.hash_key(partition), field, pack_record(unpack_record(digest, raw), b"\xee\xee\xee\xee"))
    with pytest.raises(DecodeError):
        store.get(token)
    return digest.hex()


def test_a_session_that_does_not_decode_is_no_session_and_login_logout_work(
        driver: django_app.DjangoDriver, store: densekv.SessionStore, client: redis.Redis,
        migrated: None, caplog: pytest.LogCaptureFixture) -> None:
    """Read as no session (one warning naming the digest, never the token), as Django's own
    backends read data they cannot decode; logging in or out with it replaces or ends it."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(f"bo-{uuid.uuid4().hex[:8]}")
    assert driver.request("POST", f"/auth/login/{user.pk}") == OK
    assert driver.request("POST", "/set/a", {"value": 1}) == OK
    first = driver.cookie()
    assert first is not None
    corrupt(store, client, first)
    assert driver.request("POST", f"/auth/login/{user.pk}") == OK  # a new session, the old one ended
    second = driver.cookie()
    assert second not in (None, first)
    assert driver.request("GET", "/auth/whoami") == (200, {"user": user.pk})
    assert driver.request("GET", "/get/a") == (200, {"value": None})
    assert store.get(first) is None  # not there any more (no DecodeError)
    assert second is not None
    now = store.get(second)
    assert now is not None and [s.id for s in store.sessions_of(user.pk)] == [now.id]
    digest = corrupt(store, client, second)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="densekv"):
        assert driver.request("GET", "/auth/whoami") == (200, {"user": None})
    warned = [r.getMessage() for r in caplog.records if r.name.startswith("densekv")]
    assert warned and all(digest in m and second not in m for m in warned), warned
    assert driver.cookie() is None  # Django deletes the cookie of a session it could not read
    driver.set_cookie(second)  # another tab still sends it: logging out there ends it
    assert driver.request("POST", "/auth/logout") == OK
    assert driver.cookie() is None
    assert store.get(second) is None
    assert store.sessions_of(user.pk) == [] and store.count() == 0


def test_async_loads_read_an_undecodable_session_as_none(server: ServerProcess, ns: str,
                                                        store: densekv.SessionStore, client: redis.Redis) -> None:
    engine = engine_on(server, ns)
    session = engine()
    session.update({"a": 1, SESSION_KEY: "5"})
    session.save()
    key = session.session_key
    corrupt(store, client, key)

    async def use() -> tuple[Any, Any, bool]:
        again = engine(key)
        data = await again.aload()
        await again.acycle_key()  # as login() does on an empty session: a new one, the old ended
        return data, again.session_key, await again.aexists(key)

    data, new_key, old_exists = asyncio.run(use())
    assert data == {} and new_key not in (None, key) and not old_exists
    assert store.get(key) is None and store.sessions_of(5) == []


def test_a_new_session_ends_the_undecodable_one_its_cookie_named(server: ServerProcess, ns: str,
                                                                  store: densekv.SessionStore,
                                                                  client: redis.Redis) -> None:
    """decide.py's rule in Django too: a key that loaded as no session ends at the request's
    first write, here the new session's create (before, only a login's cycle_key or a
    logout's flush ended it, and an undecodable record stayed until it expired)."""
    engine = engine_on(server, ns)
    session = engine()
    session.update({"a": 1, SESSION_KEY: "5"})
    session.save()
    key = session.session_key
    corrupt(store, client, key)  # store.get(key) raises DecodeError now
    again = engine(key)
    assert again.load() == {}
    with pytest.raises(DecodeError):  # a read alone ends nothing
        store.get(key)
    again["b"] = 2
    again.save()
    assert again.session_key not in (None, key)
    assert store.get(key) is None  # ended, not left to expire
    assert store.get(again.session_key).data == {"b": 2}  # type: ignore[union-attr]


# -- log out everywhere --------------------------------------------------------------------
def _rotate(engine: type[SessionStore], key: str, stop: threading.Event, finals: list[str | None], i: int) -> None:
    """cycle_key() over and over until `stop` or the session is ended; its last key in finals[i]."""
    while not stop.is_set():
        s = engine(key)
        with contextlib.suppress(SessionInterrupted):  # ended between its read and its rotation
            s.cycle_key()
        if s.get(SESSION_KEY) is None:  # ended: no session, or a new anonymous one
            break
        key = s.session_key
    finals[i] = key


def test_logout_everywhere_catches_sessions_rotating_meanwhile(server: ServerProcess, ns: str,
                                                              store: densekv.SessionStore) -> None:
    """Browsers of one user cycle their keys (Django's cycle_key, densekv's regenerate) in
    threads while another of that user's browsers logs out everywhere: none survives."""
    engine = engine_on(server, ns)
    uid = 9
    for attempt in range(3):
        keys = []
        for _ in range(6):
            s = engine()
            s.update({SESSION_KEY: str(uid), "n": attempt})
            s.save()
            keys.append(s.session_key)
        stop = threading.Event()
        finals: list[str | None] = [None] * len(keys)
        threads = [threading.Thread(target=_rotate, args=(engine, k, stop, finals, i))
                   for i, k in enumerate(keys[1:], 1)]
        for t in threads:
            t.start()
        time.sleep(0.05)
        ended = engine(keys[0]).logout_everywhere()
        stop.set()
        for t in threads:
            t.join(10)
        assert ended == len(keys)
        assert store.sessions_of(uid) == []
        for key in finals[1:]:
            assert key is not None
            assert engine(key).load().get(SESSION_KEY) is None  # no session of uid survived
        store.sweep()


# -- Django's own testing idioms -----------------------------------------------------------
def test_client_session_and_force_login(server: ServerProcess, ns: str, store: densekv.SessionStore,
                                        migrated: None) -> None:
    """Django's test Client with the engine as SESSION_ENGINE: `client.session` writes what
    the views then read, force_login() logs in (the session indexed under the user), and
    logout() ends it."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.create_user(f"cy-{uuid.uuid4().hex[:8]}")
    with override_settings(DENSEKV_SESSIONS={"url": server.url, "namespace": ns}):
        http = Client()
        session = http.session
        session["cart"] = ["tea"]
        session.save()
        assert http.get("/get/cart").json() == {"value": ["tea"]}
        http.force_login(user)
        assert http.get("/auth/whoami").json() == {"user": user.pk}
        assert http.session["cart"] == ["tea"]  # an anonymous session keeps its data at login
        mine = store.get(http.cookies[COOKIE].value)
        assert mine is not None and [s.id for s in store.sessions_of(user.pk)] == [mine.id]
        http.logout()
        assert http.get("/auth/whoami").json() == {"user": None}
        assert store.sessions_of(user.pk) == []


def test_an_emptied_session_keeps_its_key_and_cookie(driver: django_app.DjangoDriver,
                                                     store: densekv.SessionStore) -> None:
    """What Django's SessionMiddlewareTests.test_empty_session_saved checks (excluded from the
    peer run: it reads Django's db table): emptied, not flushed, the session is saved empty
    under the same key and its cookie is sent again."""
    assert driver.request("POST", "/set/foo", {"value": "bar"}) == OK
    key = driver.cookie()
    assert driver.request("POST", "/del/foo") == OK
    assert driver.last_response.cookies[COOKIE].value == key
    got = store.get(key or "")
    assert got is not None and not got.data


def test_login_as_another_user_drops_the_previous_users_data(driver: django_app.DjangoDriver,
                                                              store: densekv.SessionStore, migrated: None) -> None:
    """contrib.auth's login() flushes a session of another user (Django's own behaviour);
    the engine ends that session on the server too; the same user again keeps the data."""
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    ann, ben = (users.create_user(f"{n}-{uuid.uuid4().hex[:8]}") for n in ("ann", "ben"))
    assert driver.request("POST", f"/auth/login/{ann.pk}") == OK
    assert driver.request("POST", "/set/secret", {"value": "ann's"}) == OK
    anns = driver.cookie()
    assert driver.request("POST", f"/auth/login/{ann.pk}") == OK  # the same user: data kept
    assert driver.request("GET", "/get/secret") == (200, {"value": "ann's"})
    assert driver.request("POST", f"/auth/login/{ben.pk}") == OK
    assert driver.cookie() not in (None, anns)
    assert driver.request("GET", "/auth/whoami") == (200, {"user": ben.pk})
    assert driver.request("GET", "/get/secret") == (200, {"value": None})
    assert store.sessions_of(ann.pk) == [] and len(store.sessions_of(ben.pk)) == 1
    assert anns is not None and store.get(anns) is None


# -- moving in from Django's cache and db backends ------------------------------------------
def test_sessions_move_in_from_djangos_redis_cache(server: ServerProcess, ns: str,
                                                   store: densekv.SessionStore) -> None:
    from django.contrib.sessions.backends.cache import SessionStore as CacheSession

    caches = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": server.url, "KEY_PREFIX": ns}}
    with override_settings(CACHES=caches):
        old = CacheSession()
        old.update({"a": 1, SESSION_KEY: "77"})
        old.set_expiry(300)
        old.save()
        key = old.session_key
        driver = django_app.make_driver(server.url, ns, fallback="cache")
        try:
            driver.set_cookie(key)
            assert driver.request("GET", "/get/a") == (200, {"value": 1})
            moved = store.get(key)
            assert moved is not None and moved.identity == 77
            assert moved.data == {"a": 1, SESSION_KEY: "77", "_session_expiry": 300}
            assert time.time() + 290 <= moved.expires_at <= time.time() + 301
            assert not CacheSession().exists(key)  # the old one is gone
            assert [s.id for s in store.sessions_of(77)] == [moved.id]
            assert driver.request("POST", "/set/b", {"value": 2}) == OK
            assert driver.cookie() == key  # the same cookie: nothing for the user to notice
        finally:
            driver.close()


def test_sessions_move_in_from_djangos_db_backend(server: ServerProcess, ns: str,
                                                  store: densekv.SessionStore, migrated: None) -> None:
    from django.contrib.sessions.backends.db import SessionStore as DbSession
    from django.contrib.sessions.models import Session as Row

    engine = engine_on(server, ns, fallback="db")
    old = DbSession()
    old["b"] = "x"
    old.set_expiry(600)
    old.save()
    key = old.session_key
    assert engine(key).load() == {"b": "x", "_session_expiry": 600}
    assert not Row.objects.filter(session_key=key).exists()
    moved = store.get(key)
    assert moved is not None and moved.identity is None
    assert time.time() + 590 <= moved.expires_at <= time.time() + 601
    later = DbSession()
    later["c"] = 3
    later.save()
    assert asyncio.run(engine(later.session_key).aload()) == {"c": 3}  # the async path too
    assert not Row.objects.filter(session_key=later.session_key).exists()
    expired = DbSession()
    expired["d"] = 4
    expired.set_expiry(-5)
    expired.save()
    assert engine(expired.session_key).load() == {}
    assert store.get(expired.session_key) is None


def test_a_junk_cookie_asks_neither_densekv_nor_the_fallback(server: ServerProcess, ns: str,
                                                             migrated: None) -> None:
    engine = engine_on(server, ns, fallback="db")
    with CaptureQueriesContext(connection) as queries:
        assert engine("not a token, not even close").load() == {}
    assert len(queries) == 0
    assert engine._backend().sync_stores.alive() == []  # no store was even opened
    with CaptureQueriesContext(connection) as queries:
        assert engine("abcdefghijklmnopqrstuvwxyz543210").load() == {}  # well-formed, unknown
    assert len(queries) == 1  # the fallback looked once


# -- a real server --------------------------------------------------------------------------
def test_gunicorn_with_two_workers(server: ServerProcess, ns: str, store: densekv.SessionStore) -> None:
    if server.binary.name != "valkey-9.1":
        pytest.skip("one real app-server run is enough: the store itself is tested on every server")
    port = free_port()
    app = f"tests.web.apps.django_app:wsgi_app({server.url!r}, {ns!r})"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--workers", "2", "--bind", f"127.0.0.1:{port}", app],
        cwd=ROOT, env={**_env(), "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_serving(base, proc)
        with httpx.Client(base_url=base) as http:
            assert http.post("/set/a", json={"value": "both"}).json() == {"ok": True}
            anonymous = http.cookies[COOKIE]
            until = time.monotonic() + 30  # the second worker may still be starting on a busy machine
            while True:
                with ThreadPoolExecutor(2) as pool:  # a sync worker serves one request at a time
                    answers = list(pool.map(lambda _: http.get("/pid", params={"sleep": 0.5, "key": "a"}).json(),
                                            range(2)))
                if len({a["pid"] for a in answers}) == 2 or time.monotonic() > until:
                    break
            assert len({a["pid"] for a in answers}) == 2  # both workers answered ...
            assert [a["value"] for a in answers] == ["both", "both"]  # ... from the same store
            assert http.post("/login/42").json() == {"ok": True}
            assert http.cookies[COOKIE] != anonymous
            assert [s.identity for s in store.sessions_of(42)] == [42]
            stale = httpx.get(f"{base}/get/a", cookies={COOKIE: anonymous})
            assert stale.json() == {"value": None}
            assert http.get("/get/a").json() == {"value": "both"}
            assert http.post("/logout").json() == {"ok": True}
            assert COOKIE not in http.cookies
            assert store.sessions_of(42) == [] and store.count() == 0
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        assert proc.stderr is not None
        proc.stderr.close()


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


