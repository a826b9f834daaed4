"""What only Django's engine (densekv.integrations.django) has to prove; the shared
contract is in test_contract.py. Django's own SessionTestsMixin, run from the sdist of the
installed Django; cookies as SESSION_COOKIE_* say; set_expiry; data Django's serializer
would change; the clearsessions command; async views and the engine's real asyncio; Django's
own auth login()/logout(); sessions moved in from Django's cache (RedisCache on the test
server) and db (sqlite) backends; and a real gunicorn with two workers over HTTP.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import subprocess
import sys
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
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

import densekv
from densekv.integrations.django import SessionStore
from densekv.server.process import ServerProcess, free_port
from tests.web import django_suite
from tests.web.apps import django_app
from tests.web.driver import COOKIE, SLOW_SET_S

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


# -- Django's own tests ---------------------------------------------------------------------
@pytest.fixture(scope="session")
def sessions_tests_dir() -> Path:
    return django_suite.fetch_sessions_tests()


def test_djangos_session_tests_mixin_passes(server: ServerProcess, sessions_tests_dir: Path) -> None:
    """Every test of Django's SessionTestsMixin (from the sdist of the installed version),
    run by Django's test case classes in a process of its own, against this engine."""
    done = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", str(Path(django_suite.__file__)),
         "--url", server.url, "--tests", str(sessions_tests_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.stdout.strip(), done.stderr[-4000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["failed"] == {}, "\n\n".join(f"{k}:\n{v}" for k, v in outcome["failed"].items())
    assert outcome["skipped"] == django_suite.SKIPS
    assert len(outcome["passed"]) >= 60, outcome["passed"]  # Django 5.2's mixin holds 65 tests
    assert "Exception ignored" not in done.stderr, done.stderr[-4000:]  # e.g. an unclosed connection


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
    assert engine._backend()._sync is None  # no sync store behind the async calls
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
    assert engine._backend()._sync is None  # no store was even opened
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
        _wait_for(base, proc)
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


def _wait_for(base: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            assert proc.stderr is not None
            raise AssertionError(f"gunicorn exited: {proc.stderr.read().decode()[-3000:]}")
        try:
            if httpx.get(f"{base}/noop", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("gunicorn did not answer within 30 s")
