"""What only the aiohttp storage has to prove (the shared contract is in test_contract.py, and
aiohttp-session's own storage tests in tests/peers/test_aiohttp_suite.py): cookies as
aiohttp_session's RedisStorage sends them, max_age as the stored lifetime (and per session,
for "remember me"), invalidate() and new_session() as aiohttp_session defines them, login as
another user, emptied sessions, values changed in place, undecodable sessions, no server
call for a handler that never asks for the session, a store per event loop, pytest-aiohttp's
own test client, and gunicorn's aiohttp worker with two processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import aiohttp_session
import httpx
import pytest
import redis
import redis.asyncio
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from aiohttp_session.redis_storage import RedisStorage

import densekv
from densekv.dictionaries import dictionary_key
from densekv.integrations.aiohttp import AiohttpSessionRedis, Storage, login
from densekv.tools.lab.session_profiles import session as profile_session
from densekv.tools.lab.session_profiles import sessions as profile_sessions
from densekv.tools.server.process import ServerProcess, free_port
from tests.web.app_server import wait_serving
from tests.web.apps.aiohttp_app import AiohttpDriver, app_on, driver_for, make_app, make_store
from tests.web.driver import COOKIE, WRONG_URLS
from tests.web.test_contract import Clock, server_calls

OK = (200, {"ok": True})
DAY = 24 * 3600


@pytest.fixture
def ns() -> str:
    return f"aio{uuid.uuid4().hex[:12]}"


@pytest.fixture
def sync(client: redis.Redis, ns: str) -> Callable[..., densekv.SessionStore]:
    """A sync store on the test's namespace (layout adopted), to look at what the app wrote."""
    return lambda **kw: densekv.SessionStore(client, ns, **kw)


@pytest.fixture
def open_driver(server: ServerProcess, ns: str) -> Iterator[Callable[..., AiohttpDriver]]:
    """driver(routes=..., store_kwargs=..., **storage kwargs): the contract app with densekv's
    Storage, plus extra routes {path: handler} (POST)."""
    drivers: list[AiohttpDriver] = []

    def open_(routes: dict[str, Any] | None = None, store_kwargs: dict[str, Any] | None = None,
              **storage_kwargs: Any) -> AiohttpDriver:
        def make() -> web.Application:
            app = make_app(make_store(server.url, ns, **(store_kwargs or {})), **storage_kwargs)
            for path, handler in (routes or {}).items():
                app.router.add_post(path, handler)
            return app

        drivers.append(driver_for(make))
        return drivers[-1]

    yield open_
    for d in drivers:
        d.close()


def set_cookies(headers: Any, name: str = "session") -> list[SimpleCookie]:
    out = []
    for header in headers.getall("Set-Cookie", []):
        cookie: SimpleCookie = SimpleCookie()
        cookie.load(header)
        if name in cookie:
            out.append(cookie)
    return out


def attributes(cookie: SimpleCookie, name: str) -> dict[str, Any]:
    morsel = cookie[name]
    return {k: (bool(v) if k == "expires" else v) for k, v in morsel.items()}


@pytest.mark.parametrize("url", WRONG_URLS)
def test_a_wrong_url_fails_at_setup(url: str) -> None:
    """The aiohttp shell takes a store, not a URL: the client the setup of docs/aiohttp.md
    builds (`redis.asyncio.Redis.from_url` in create_app) refuses the URL there, with a
    ValueError, before the app serves a request. densekv's own URL check says the same."""
    from densekv.integrations.urls import check_url

    with pytest.raises(ValueError):
        redis.asyncio.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)
    with pytest.raises(densekv.InvalidArgument):
        check_url(url, "url")


# -- cookies --------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    {},
    {"max_age": 600, "path": "/", "domain": "example.test", "secure": True, "samesite": "Strict"},
    {"cookie_name": "sid", "httponly": False, "samesite": "Lax"},
], ids=["defaults", "all-set", "renamed"])
def test_cookies_are_the_ones_redis_storage_sends(server: ServerProcess, client: redis.Redis,
                                                  ns: str, kwargs: dict[str, Any]) -> None:
    name = kwargs.get("cookie_name", "AIOHTTP_SESSION")

    def theirs() -> web.Application:
        connection = redis.asyncio.Redis.from_url(server.url)
        app = app_on(RedisStorage(connection, **kwargs))

        async def close(app: web.Application) -> None:
            await connection.aclose()

        app.on_cleanup.append(close)
        return app

    def ours() -> web.Application:
        store = make_store(server.url, ns)
        app = app_on(Storage(store, **kwargs))

        async def close(app: web.Application) -> None:
            await store.client.aclose()

        app.on_cleanup.append(close)
        return app

    seen = {}
    for label, make in (("redis", theirs), ("densekv", ours)):
        d = driver_for(make)
        try:
            _, _, set_headers = d.exchange("POST", "/set/a", {"value": 1})
            token = set_cookies(set_headers, name)[0][name].value
            d.set_cookie(None)
            _, _, gone_headers = d.exchange("POST", "/logout", headers={"Cookie": f"{name}={token}"})
            seen[label] = ([attributes(c, name) for c in set_cookies(set_headers, name)],
                           [attributes(c, name) for c in set_cookies(gone_headers, name)],
                           set_cookies(gone_headers, name)[0][name].value)
        finally:
            d.close()
    assert seen["densekv"] == seen["redis"]
    assert seen["densekv"][2] == ""  # the logout deletes the cookie
    assert len(seen["densekv"][0]) == 1
    if "max_age" in kwargs:
        assert seen["densekv"][0][0]["max-age"] == "600"


# -- lifetimes ------------------------------------------------------------------------------
def test_max_age_is_the_stored_lifetime_from_the_last_change(
        open_driver: Callable[..., AiohttpDriver], sync: Callable[..., densekv.SessionStore]) -> None:
    clock = Clock()
    d = open_driver(store_kwargs={"clock": clock}, max_age=100)
    store = sync(clock=clock)
    start = clock.now
    assert d.request("POST", "/set/a", {"value": 1}) == OK
    token = d.cookie()
    assert token and store.get(token).expires_at == start + 100  # type: ignore[union-attr]
    clock.now += 50
    assert d.request("GET", "/get/a") == (200, {"value": 1})  # a read changes nothing
    assert store.get(token).expires_at == start + 100  # type: ignore[union-attr]
    assert d.request("POST", "/set/b", {"value": 2}) == OK  # a change: 100 s from now
    assert store.get(token).expires_at == start + 150  # type: ignore[union-attr]
    clock.now = start + 151  # the cookie is replayed after max_age: nothing is left
    assert d.request("GET", "/all") == (200, {"data": {}})


def test_max_age_longer_than_the_stores_ttl_is_bounded_by_it(
        open_driver: Callable[..., AiohttpDriver], sync: Callable[..., densekv.SessionStore]) -> None:
    clock = Clock()
    d = open_driver(store_kwargs={"clock": clock, "ttl": 3600}, max_age=30 * DAY)
    _, _, headers = d.exchange("POST", "/set/a", {"value": 1})
    assert set_cookies(headers)[0]["session"]["max-age"] == str(30 * DAY)
    assert sync(clock=clock).get(d.cookie()).expires_at == clock.now + 3600  # type: ignore[arg-type,union-attr]


def test_without_max_age_the_cookie_ends_with_the_browser_and_the_store_ttl_applies(
        open_driver: Callable[..., AiohttpDriver], sync: Callable[..., densekv.SessionStore]) -> None:
    clock = Clock()
    d = open_driver(store_kwargs={"clock": clock, "ttl": 3600})
    _, _, headers = d.exchange("POST", "/set/a", {"value": 1})
    assert set_cookies(headers)[0]["session"]["max-age"] == ""
    assert sync(clock=clock).get(d.cookie()).expires_at == clock.now + 3600  # type: ignore[arg-type,union-attr]


def test_a_max_age_of_zero_keeps_nothing(open_driver: Callable[..., AiohttpDriver],
                                         sync: Callable[..., densekv.SessionStore]) -> None:
    """RedisStorage answers 500 (SET ex=0 is refused); densekv stores nothing and deletes
    the cookie, as a Max-Age of 0 asks."""
    d = open_driver(max_age=0)
    _, _, headers = d.exchange("POST", "/set/a", {"value": 1})
    assert set_cookies(headers)[0]["session"]["max-age"] == "0"
    assert d.cookie() is None and sync().count() == 0


def test_storage_refuses_what_it_cannot_honour(server: ServerProcess, ns: str) -> None:
    store = make_store(server.url, ns)
    for kwargs in ({"encoder": str}, {"decoder": str}, {"key_factory": str}):
        with pytest.raises(TypeError, match="no encoder, decoder or key_factory"):
            Storage(store, **kwargs)
    with pytest.raises(TypeError, match="AsyncSessionStore"):
        Storage(None)  # type: ignore[arg-type]


async def remember_me(request: web.Request) -> web.Response:
    session = await aiohttp_session.get_session(request)
    session.max_age = 30 * DAY
    session.changed()  # save it even though no key changed
    return web.json_response({"ok": True})


def test_remember_me_is_a_longer_max_age_for_that_session(
        open_driver: Callable[..., AiohttpDriver], sync: Callable[..., densekv.SessionStore]) -> None:
    clock = Clock()
    d = open_driver({"/remember": remember_me}, {"clock": clock, "ttl": 60 * DAY}, max_age=3600)
    assert d.request("POST", "/login/4") == OK
    assert d.request("POST", "/set/a", {"value": 1}) == OK
    store = sync(clock=clock)
    assert store.get(d.cookie()).expires_at == clock.now + 3600  # type: ignore[arg-type,union-attr]
    _, _, headers = d.exchange("POST", "/remember")
    assert set_cookies(headers)[0]["session"]["max-age"] == str(30 * DAY)
    assert store.get(d.cookie()).expires_at == clock.now + 30 * DAY  # type: ignore[arg-type,union-attr]
    assert d.request("GET", "/all") == (200, {"data": {"a": 1}})


# -- invalidate, new_session, set_new_identity -----------------------------------------------
async def logout_then_flash(request: web.Request) -> web.Response:
    session = await aiohttp_session.get_session(request)
    session.invalidate()
    session["flash"] = "bye"
    return web.json_response({"ok": True})


def test_invalidate_ends_the_stored_session_and_later_keys_start_a_new_one(
        open_driver: Callable[..., AiohttpDriver], sync: Callable[..., densekv.SessionStore]) -> None:
    d = open_driver({"/bye": logout_then_flash})
    assert d.request("POST", "/set/a", {"value": 1}) == OK
    assert d.request("POST", "/login/9") == OK
    old = d.cookie()
    assert d.request("POST", "/bye") == OK
    store = sync()
    assert store.sessions_of(9) == []
    assert old is not None and store.get(old) is None
    assert d.cookie() not in (None, old)
    found = store.get(d.cookie())  # type: ignore[arg-type]
    assert found is not None and found.identity is None and found.data == {"flash": "bye"}


async def start_over(request: web.Request) -> web.Response:
    session = await aiohttp_session.new_session(request)
    assert session.new and not session
    session["fresh"] = True
    return web.json_response({"ok": True})


def test_new_session_starts_over_under_a_new_token(
        open_driver: Callable[..., AiohttpDriver], sync: Callable[..., densekv.SessionStore]) -> None:
    d = open_driver({"/start-over": start_over})
    assert d.request("POST", "/set/a", {"value": 1}) == OK
    old = d.cookie()
    assert d.request("POST", "/start-over") == OK
    assert d.cookie() not in (None, old)
    assert d.request("GET", "/all") == (200, {"data": {"fresh": True}})
    # as with aiohttp_session's storages, the session left behind is not ended (it expires)
    assert sync().get(old).data == {"a": 1}  # type: ignore[arg-type,union-attr]


async def new_for_user(request: web.Request) -> web.Response:
    session = await aiohttp_session.new_session(request)
    session.set_new_identity(int(request.match_info["uid"]))
    session["a"] = 1
    return web.json_response({"ok": True, "identity": session.identity})


def test_set_new_identity_stores_the_new_session_under_that_identity(
        open_driver: Callable[..., AiohttpDriver], sync: Callable[..., densekv.SessionStore]) -> None:
    d = open_driver({"/new-for/{uid}": new_for_user})
    assert d.request("POST", "/new-for/12") == (200, {"ok": True, "identity": 12})
    assert [(s.identity, s.data) for s in sync().sessions_of(12)] == [(12, {"a": 1})]


# -- login as another user; emptied sessions; values changed in place -------------------------
async def set_then_login(request: web.Request) -> web.Response:
    session = await aiohttp_session.get_session(request)
    session["before"] = 1
    await login(request, int(request.match_info["uid"]))
    session["after"] = 2
    return web.json_response({"ok": True, "identity": session.identity})


def test_login_as_another_identity_drops_the_previous_users_data(
        open_driver: Callable[..., AiohttpDriver], sync: Callable[..., densekv.SessionStore]) -> None:
    d = open_driver({"/combo/{uid}": set_then_login})
    assert d.request("POST", "/set/secret", {"value": "of 50"}) == OK
    assert d.request("POST", "/login/50") == OK  # anonymous -> 50: data kept
    assert d.request("POST", "/set/gone", {"value": 0}) == OK
    of_50 = d.cookie()
    assert d.request("POST", "/login/50") == OK  # the same user again: kept, token rotated
    assert d.request("GET", "/all") == (200, {"data": {"secret": "of 50", "gone": 0}})
    assert d.cookie() != of_50
    of_50 = d.cookie()
    assert d.request("POST", "/combo/7") == (200, {"ok": True, "identity": 7})
    assert d.request("GET", "/all") == (200, {"data": {"after": 2}})
    store = sync()
    assert of_50 is not None and store.get(of_50) is None
    assert store.sessions_of(50) == []
    assert [s.data for s in store.sessions_of(7)] == [{"after": 2}]


def test_an_emptied_anonymous_session_ends_but_a_login_stays(
        open_driver: Callable[..., AiohttpDriver], sync: Callable[..., densekv.SessionStore]) -> None:
    d = open_driver()
    assert d.request("POST", "/set/a", {"value": 1}) == OK
    _, _, headers = d.exchange("POST", "/del/a")
    assert set_cookies(headers)[0]["session"].value == ""
    assert d.cookie() is None and sync().count() == 0
    assert d.request("POST", "/login/3") == OK
    assert d.request("POST", "/set/a", {"value": 1}) == OK
    assert d.request("POST", "/del/a") == OK
    assert d.cookie() is not None
    assert len(sync().sessions_of(3)) == 1
    assert d.request("GET", "/all") == (200, {"data": {}})


async def append(request: web.Request) -> web.Response:
    session = await aiohttp_session.get_session(request)
    session.setdefault("items", []).append(len(session["items"]))
    if request.query.get("changed"):
        session.changed()
    return web.json_response({"ok": True})


def test_a_value_changed_in_place_is_saved_after_changed(
        open_driver: Callable[..., AiohttpDriver]) -> None:
    d = open_driver({"/append": append})
    assert d.request("POST", "/append") == OK  # a new key: saved
    assert d.request("POST", "/append") == OK  # in place, not marked: not saved
    assert d.request("GET", "/get/items") == (200, {"value": [0]})
    assert d.request("POST", "/append?changed=1") == OK
    assert d.request("GET", "/get/items") == (200, {"value": [0, 1]})


# -- laziness and undecodable sessions -----------------------------------------------------
def test_a_handler_that_never_asks_for_the_session_makes_no_server_call(
        open_driver: Callable[..., AiohttpDriver], client: redis.Redis) -> None:
    d = open_driver()
    assert d.request("POST", "/set/a", {"value": 1}) == OK
    before = server_calls(client)
    assert d.request("GET", "/noop") == OK
    assert server_calls(client) == before


def undecodable_session(client: redis.Redis, ns: str) -> tuple[str, densekv.SessionStore]:
    """A stored session of user 77 whose zstd dictionary the server lost, and the store that
    wrote it (which still holds the dictionary, so it can still read it)."""
    writer = densekv.SessionStore(client, ns)
    writer.train_dictionary(data for _, data in profile_sessions("P1", 300))
    token = writer.create(77, profile_session("P1", 7)[1])
    client.delete(dictionary_key(ns))
    return token, writer


@pytest.mark.parametrize("then", ["read", "set", "login", "logout", "logout-everywhere"])
def test_an_undecodable_session_is_no_session(open_driver: Callable[..., AiohttpDriver],
                                              sync: Callable[..., densekv.SessionStore],
                                              client: redis.Redis, ns: str, then: str) -> None:
    token, writer = undecodable_session(client, ns)
    d = open_driver()  # a worker that never held the dictionary
    d.set_cookie(token)
    assert d.request("GET", "/all") == (200, {"data": {}})
    assert d.cookie() == token  # a read writes nothing
    if then == "read":
        assert writer.get(token) is not None  # a read leaves it alone
        return
    path, body = {"set": ("/set/a", {"value": 1}), "login": ("/login/78", None),
                  "logout": ("/logout", None), "logout-everywhere": ("/logout-everywhere", None)}[then]
    assert d.request("POST", path, body) == OK
    assert writer.get(token) is None and writer.sessions_of(77) == []  # replaced, not left
    if then in ("logout", "logout-everywhere"):
        assert d.cookie() is None
    else:
        assert d.cookie() not in (None, token)
        assert sync().get(d.cookie()) is not None  # type: ignore[arg-type]
    if then == "login":
        assert len(sync().sessions_of(78)) == 1


# -- moving in from aiohttp-session's RedisStorage ----------------------------------------
def test_redis_storage_sessions_move_in_under_the_same_cookie(
        open_driver: Callable[..., AiohttpDriver], sync: Callable[..., densekv.SessionStore],
        server: ServerProcess, client: redis.Redis) -> None:
    """aiohttp-session's RedisStorage writes the old sessions (through aiohttp's test client
    on a real server); densekv's Storage with move_in=AiohttpSessionRedis(...) moves one in
    the first time its cookie comes, under the same value, with the lifetime it had left,
    and deletes the old key (integrations/movein.py's policy, as in every shell)."""
    def old_key(token: str) -> str:
        return f"{COOKIE}_{token}"

    def theirs() -> web.Application:
        connection = redis.asyncio.Redis.from_url(server.url)
        app = app_on(RedisStorage(connection, cookie_name=COOKIE, max_age=600))

        async def close(app: web.Application) -> None:
            await connection.aclose()

        app.on_cleanup.append(close)
        return app

    old = driver_for(theirs)
    try:
        old_cookies = []
        for _ in range(2):
            browser = old.new_browser()
            assert browser.request("POST", "/set/cart", {"value": ["tea", 2]}) == OK
            assert browser.request("POST", "/set/user", {"value": "ann"}) == OK
            old_cookies.append(browser.cookie())
    finally:
        old.close()
    cookie, untouched = old_cookies
    assert cookie is not None and untouched is not None and client.ttl(old_key(cookie)) > 590

    d = open_driver(max_age=3600, move_in=AiohttpSessionRedis(cookie_name=COOKIE, max_age=600))
    d.set_cookie(cookie)
    started = time.time()
    status, body, headers = d.exchange("GET", "/all")
    assert (status, body) == (200, {"data": {"cart": ["tea", 2], "user": "ann"}})
    assert set_cookies(headers, COOKIE) == []  # the same cookie value goes on
    assert client.exists(old_key(cookie)) == 0
    moved = sync().get(cookie)
    assert moved is not None and moved.identity is None  # RedisStorage keeps no user
    assert started + 588 <= moved.expires_at <= started + 601  # what it had left
    assert d.request("POST", "/set/n", {"value": 1}) == OK
    assert d.cookie() == cookie  # nobody is logged out by the move
    assert d.request("GET", "/all") == (200, {"data": {"cart": ["tea", 2], "user": "ann", "n": 1}})
    assert client.exists(old_key(untouched)) == 1  # only moved when its cookie comes

    now = int(time.time())
    kept = {  # what is not moved stays there, to expire
        "e" * 32: b"\xc1 not json",
        "a" * 32: json.dumps({"created": now - 700, "session": {"a": 1}}),  # past RedisStorage's max_age
        "c" * 32: json.dumps({"a": 1}),  # not RedisStorage's shape
    }
    for token, value in kept.items():
        client.set(old_key(token), value, ex=600)
        other = d.new_browser()
        other.set_cookie(token)
        assert other.request("GET", "/all") == (200, {"data": {}})
        assert client.exists(old_key(token)) == 1 and sync().get(token) is None
    aged = "b" * 32  # created 500 s ago: moves in with the 100 s RedisStorage left it
    client.set(old_key(aged), json.dumps({"created": now - 500, "session": {"a": 1}}), ex=600)
    other = d.new_browser()
    other.set_cookie(aged)
    assert other.request("GET", "/all") == (200, {"data": {"a": 1}})
    moved = sync().get(aged)
    assert moved is not None and moved.expires_at <= now + 101
    unknown = d.new_browser()  # a cookie neither store knows: nothing written anywhere
    unknown.set_cookie("f" * 32)
    assert unknown.request("GET", "/all") == (200, {"data": {}})
    assert sync().count() == 2


# -- event loops ----------------------------------------------------------------------------
def test_a_store_factory_gives_each_event_loop_its_own_store(server: ServerProcess, ns: str,
                                                              client: redis.Redis) -> None:
    made: list[densekv.AsyncSessionStore] = []

    def factory() -> densekv.AsyncSessionStore:
        made.append(make_store(server.url, ns))
        return made[-1]

    storage = Storage(factory)

    async def one_loop(cookie: str | None, value: int) -> tuple[str | None, Any]:
        app = app_on(storage)
        async with TestClient(TestServer(app)) as browser:
            if cookie is not None:
                browser.session.cookie_jar.update_cookies({"AIOHTTP_SESSION": cookie})
            async with browser.post("/set/n", json={"value": value}) as resp:
                assert resp.status == 200
            async with browser.get("/all") as resp:
                body = await resp.json()
            jar = {m.key: m.value for m in browser.session.cookie_jar}
        await made[-1].client.aclose()
        return jar.get("AIOHTTP_SESSION"), body

    token, first = asyncio.run(one_loop(None, 1))
    again, second = asyncio.run(one_loop(token, 2))  # a new loop, the same session
    assert len(made) == 2 and made[0] is not made[1]
    assert again == token
    assert (first, second) == ({"data": {"n": 1}}, {"data": {"n": 2}})


# -- testing with pytest-aiohttp's client ---------------------------------------------------
@pytest.mark.asyncio
async def test_pytest_aiohttp_client_fixture(aiohttp_client: Any, server: ServerProcess,
                                             ns: str) -> None:
    store = make_store(server.url, ns)
    app = app_on(Storage(store, cookie_name="session"))
    app.router.add_post("/combo/{uid}", set_then_login)
    browser = await aiohttp_client(app)
    resp = await browser.post("/combo/5")
    assert (resp.status, await resp.json()) == (200, {"ok": True, "identity": 5})
    resp = await browser.get("/all")
    assert await resp.json() == {"data": {"before": 1, "after": 2}}
    session = await store.get(browser.session.cookie_jar.filter_cookies(
        browser.make_url("/"))["session"].value)
    assert session is not None and session.identity == 5
    await store.client.aclose()


# -- a real server: gunicorn's aiohttp worker, two worker processes ---------------------------
def test_gunicorn_two_workers(server: ServerProcess, client: redis.Redis, ns: str,
                              sync: Callable[..., densekv.SessionStore], tmp_path: Path) -> None:
    """The async app factory (tests/web/apps/aiohttp_app.py:app_from_env) builds a store in
    each worker after the fork: both read what the other wrote; login and logout work."""
    if server.binary.name != "valkey-9.1":
        pytest.skip("one real app-server run is enough: the store itself is tested on every server")
    port = free_port()
    env = {**os.environ, "DENSEKV_WEB_URL": server.url, "DENSEKV_WEB_NAMESPACE": ns}
    log = open(tmp_path / "gunicorn.log", "wb")  # noqa: SIM115 - closed in the finally
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--chdir", str(Path(__file__).parents[2]),
         "tests.web.apps.aiohttp_app:app_from_env", "--bind", f"127.0.0.1:{port}",
         "--workers", "2", "--worker-class", "aiohttp.GunicornWebWorker"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_serving(base, proc, tmp_path / "gunicorn.log")
        with httpx.Client(base_url=base, headers={"connection": "close"}) as http:
            assert http.post("/set/a", json={"value": 1}).status_code == 200
            token = http.cookies["session"]
            pids = set()
            until = time.monotonic() + 30
            while len(pids) < 2 and time.monotonic() < until:
                reply = http.get("/whoami").json()
                assert reply["data"] == {"a": 1}
                pids.add(reply["pid"])
            assert len(pids) == 2  # both workers read the session the other one wrote
            assert http.post("/login/9").status_code == 200
            assert http.cookies["session"] != token
            assert http.get("/get/a").json() == {"value": 1}
            assert len(sync().sessions_of(9)) == 1
            assert http.post("/logout").status_code == 200
            assert "session" not in http.cookies
            assert http.get("/get/a").json() == {"value": None}
            assert sync().sessions_of(9) == []
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this test started
            proc.wait(5)
        log.close()
