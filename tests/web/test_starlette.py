"""What only the Starlette/FastAPI middleware has to prove (the shared contract is in
test_contract.py, the faults in test_faults.py): cookies exactly as Starlette's own
middleware writes them (its defaults too), no write and no cookie for an empty or unchanged
session, junk cookies without a server call, outages as 500s only where the session is used
and refused data as 500s that change nothing, max_age bounding the stored session's life
(and "remember me"), login as another user dropping the previous user's data, logout
ending the stored session, undecodable sessions as no session, a store per event loop
(TestClient with and without `with`), the first request after a server restart,
concurrent requests under real asyncio, the idle touch, sessions moved in from
starsessions, a FastAPI app, and a real uvicorn with two worker processes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import redis
import redis.asyncio
from starlette.applications import Starlette
from starlette.middleware.sessions import SessionMiddleware as StarletteSessionMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import densekv
from densekv.integrations.starlette import (
    DenseSession,
    SessionMiddleware,
    StarsessionsRedis,
    login,
    logout,
    remember,
    store_of,
)
from densekv.tools.server.process import ServerProcess, free_port
from tests.web.app_server import wait_serving
from tests.web.apps.starlette_app import (
    ROUTES,
    StarletteDriver,
    driver_for,
    make_app,
    make_driver,
    make_store,
)
from tests.web.driver import UNREACHED_URLS, WRONG_URLS

NS = "st"


@pytest.fixture
def driver(client: redis.Redis, server: ServerProcess) -> Iterator[StarletteDriver]:
    d = make_driver(server.url, NS)
    yield d
    d.close()


def sync_store(client: redis.Redis, **kwargs: Any) -> densekv.SessionStore:
    return densekv.SessionStore(client, NS, ttl=3600, **kwargs)


def session_cookies(headers: Any) -> list[str]:
    return [h for h in headers.get_list("set-cookie") if h.startswith("session=")]


# -- cookies: Starlette's format, only when there is something to say -----------------

COOKIE_ARGS = [
    {},  # Starlette's defaults: Max-Age=1209600
    {"max_age": None},
    {"max_age": 600},
    {"max_age": 600, "https_only": True, "same_site": "strict", "domain": "example.org"},
    {"max_age": None, "path": "/app", "same_site": "none", "partitioned": True},
]


def starlette_cookies(kwargs: dict[str, Any]) -> tuple[str, str]:
    """What Starlette's own SessionMiddleware sends, with these arguments, when a session
    is first written and when it is cleared: (set, clear), the value cut out."""

    async def put(request: Request) -> JSONResponse:
        request.session["a"] = 1
        return JSONResponse({})

    async def clear(request: Request) -> JSONResponse:
        request.session.clear()
        return JSONResponse({})

    prefix = kwargs.get("path", "/").rstrip("/")  # the cookie comes back on its path only
    app = Starlette(routes=[Route(prefix + "/put", put), Route(prefix + "/clear", clear)])
    app.add_middleware(StarletteSessionMiddleware, secret_key="k", **kwargs)
    with TestClient(app, base_url="https://example.org") as tc:
        set_header = tc.get(prefix + "/put").headers["set-cookie"]
        cleared = tc.get(prefix + "/clear").headers["set-cookie"]
    return set_header.split(";", 1)[1], cleared.split(";", 1)[1]


@pytest.mark.parametrize("kwargs", COOKIE_ARGS, ids=lambda k: ",".join(map(str, k.values())) or "defaults")
def test_cookie_attributes_are_starlettes(client: redis.Redis, server: ServerProcess,
                                          kwargs: dict[str, Any]) -> None:
    want_set, want_cleared = starlette_cookies(kwargs)
    store = make_store(server.url, NS)
    d = driver_for(make_app(store, **kwargs), store)
    try:
        d.set_cookie(None)
        _, _, headers = d.exchange("POST", "/set/a", {"value": 1})
        (set_header,) = session_cookies(headers)
        token = set_header.split(";", 1)[0].removeprefix("session=")
        assert set_header == f"session={token};{want_set}"
        assert sync_store(client).get(token) is not None
        d.set_cookie(token)  # the jar would not send a Secure or foreign-domain cookie
        _, _, headers = d.exchange("POST", "/logout")
        assert session_cookies(headers) == [f"session=null;{want_cleared}"]
        assert sync_store(client).get(token) is None
    finally:
        d.close()


def test_empty_or_unchanged_session_is_never_written(client: redis.Redis,
                                                     driver: StarletteDriver) -> None:
    for method, path, body in [("GET", "/get/a", None), ("GET", "/all", None),
                               ("POST", "/del/a", None), ("GET", "/noop", None)]:
        status, _, headers = driver.exchange(method, path, body)
        assert status == 200 and session_cookies(headers) == []
    assert client.dbsize() == 0  # not even the store's metadata: no server call at all
    driver.request("POST", "/set/a", {"value": 1})
    token = driver.cookie()
    assert token is not None
    before = sync_store(client).get(token)
    for path in ("/get/a", "/all", "/noop"):
        status, body, headers = driver.exchange("GET", path)
        assert status == 200 and session_cookies(headers) == []
        # Vary: Cookie where the app looked at the session, as Starlette does
        assert ("cookie" in headers.get("vary", "").lower()) == (path != "/noop")
    assert sync_store(client).get(token) == before  # no touch without an idle TTL
    _, _, headers = driver.exchange("POST", "/set/a", {"value": 2})
    assert session_cookies(headers)[0].startswith(f"session={token};")  # same token


def test_junk_cookie_is_an_empty_session_without_a_server_call() -> None:
    # nothing listens on this port: any server call would be a 500
    store = make_store(f"redis://127.0.0.1:{free_port()}/0", NS)
    d = driver_for(make_app(store), store)
    try:
        for junk in ["", "null", "x", "a" * 21, "a" * 87, "héllo-wörld-" * 3, "../" * 10,
                     "a" * 31 + "=", "a b" * 10]:
            d.set_cookie(junk)
            status, body = d.request("GET", "/all")
            assert (status, body) == (200, {"data": {}}), junk
        token = "A" * 32  # well formed: the store is asked, and the server is not there
        d.set_cookie(token)
        status, body, _ = d.exchange("GET", "/all")
        assert status == 500 and body is None
    finally:
        d.close()


def test_outage_is_a_500_that_overwrites_nothing(server_name: str,
                                                  fresh_server: Callable[..., ServerProcess]) -> None:
    srv = fresh_server(server_name, aof=True)
    d = make_driver(srv.url, NS)
    try:
        d.request("POST", "/set/a", {"value": 1})
        token = d.cookie()
        srv.kill()
        assert d.request("GET", "/noop") == (200, {"ok": True})  # never used the session
        assert d.request("GET", "/all")[0] == 500  # uses the session: the load's error
        assert d.request("POST", "/set/a", {"value": 2})[0] == 500
        srv.restart()
        assert d.request("GET", "/all") == (200, {"data": {"a": 1}})
        # down while the request runs: the save at the response start fails
        killer = threading.Timer(0.1, srv.kill)
        killer.start()
        assert d.request("POST", "/slow-set/a", {"value": 3})[0] == 500
        killer.join()
        srv.restart()
        assert d.request("GET", "/all") == (200, {"data": {"a": 1}})
        assert d.cookie() == token
    finally:
        d.close()


def test_refused_data_is_a_500_and_the_stored_session_stays(driver: StarletteDriver) -> None:
    driver.request("POST", "/set/a", {"value": 1})
    token = driver.cookie()
    assert driver.request("POST", "/set/big", {"value": "~" * 70_000})[0] == 500
    assert driver.request("GET", "/all") == (200, {"data": {"a": 1}})
    fresh = driver.new_browser()  # a new session refused on creation: no cookie either
    assert fresh.request("POST", "/set/big", {"value": "~" * 70_000})[0] == 500
    assert fresh.cookie() is None
    assert driver.cookie() == token


# -- login and friends inside one request ---------------------------------------------

async def set_then_login(request: Request) -> JSONResponse:
    request.session["before"] = 1
    await login(request, int(request.path_params["uid"]))
    request.session["after"] = 2
    request.session.pop("gone", None)
    return JSONResponse({"identity": cast(DenseSession, request.session).identity})


async def clear_then_set(request: Request) -> JSONResponse:
    request.session.clear()
    request.session["flash"] = "bye"
    return JSONResponse({})


def test_login_keeps_the_changes_of_its_request(client: redis.Redis, server: ServerProcess) -> None:
    store = make_store(server.url, NS)
    d = driver_for(make_app(store, extra_routes=[
        Route("/combo/{uid}", set_then_login, methods=["POST"]),
        Route("/clear-then-set", clear_then_set, methods=["POST"])]), store)
    try:
        d.request("POST", "/set/gone", {"value": 0})
        d.request("POST", "/set/kept", {"value": 3})
        old = d.cookie()
        assert d.request("POST", "/combo/7") == (200, {"identity": 7})
        new = d.cookie()
        assert new is not None and new != old
        stored = sync_store(client).get(new)
        assert stored is not None and stored.identity == 7
        assert stored.data == {"before": 1, "after": 2, "kept": 3}
        assert sync_store(client).get(cast(str, old)) is None
        # a login on a browser without a session starts one that holds the identity
        other = d.new_browser()
        assert other.request("POST", "/combo/8")[0] == 200
        assert [s.data for s in sync_store(client).sessions_of(8)] == [{"before": 1, "after": 2}]
        # clear() then a new key (a logout with a flash message): the logged-in session
        # ends, and the key starts a new anonymous one
        d.request("POST", "/clear-then-set")
        assert d.request("GET", "/all") == (200, {"data": {"flash": "bye"}})
        flash = d.cookie()
        assert flash is not None and flash != new
        assert sync_store(client).get(new) is None and sync_store(client).sessions_of(7) == []
        assert cast(densekv.Session, sync_store(client).get(flash)).identity is None
    finally:
        d.close()


def test_logout_everywhere_ends_only_that_identity(client: redis.Redis,
                                                  driver: StarletteDriver) -> None:
    a, b, c = driver, driver.new_browser(), driver.new_browser()
    for browser, uid in ((a, 7), (b, 7), (c, 8)):
        browser.request("POST", "/set/k", {"value": uid})
        browser.request("POST", "/login/" + str(uid))
    _, _, headers = a.exchange("POST", "/logout-everywhere")
    assert session_cookies(headers)[0].startswith("session=null;")
    assert a.cookie() is None
    assert b.request("GET", "/all") == (200, {"data": {}})
    assert c.request("GET", "/all") == (200, {"data": {"k": 8}})
    assert sync_store(client).sessions_of(7) == []


def test_idle_touch_only_when_due(client: redis.Redis, server: ServerProcess) -> None:
    now = [float(int(time.time()))]
    d = make_driver(server.url, NS, ttl=3600, idle_ttl=600, clock=lambda: now[0])
    try:
        d.request("POST", "/set/a", {"value": 1})
        token = cast(str, d.cookie())
        store = sync_store(client, idle_ttl=600, clock=lambda: now[0])
        first = cast(densekv.Session, store.get(token)).expires_at
        now[0] += 60  # a touch would gain 60 s of 600: not worth a write
        _, _, headers = d.exchange("GET", "/get/a")
        assert cast(densekv.Session, store.get(token)).expires_at == first
        now[0] += 200  # now it would gain 260 s
        _, _, headers = d.exchange("GET", "/noop")
        assert cast(densekv.Session, store.get(token)).expires_at == int(now[0]) + 600
        assert session_cookies(headers) == []  # a touch changes no cookie
    finally:
        d.close()


def test_dense_session_tracks_top_level_keys() -> None:
    s = DenseSession(cast(Any, None))
    dict.update(s, {"a": 1, "b": 2, "c": 3})  # as loaded
    assert not s.modified
    s["x"] = 1
    s.update({"y": 2}, z=3)
    s |= {"w": 4}
    s.setdefault("a", 9)  # present: no change
    s.setdefault("v", 5)
    del s["a"]
    s.pop("b")
    s.pop("nope", None)
    s["c"] = [1]
    s["c"].append(2)  # in place: not seen, but "c" was assigned anyway
    s.pop("x")
    assert s.modified
    assert s.state.changed == {"y", "z", "w", "v", "c"}
    assert s.state.removed == {"a", "b", "x"}
    s.clear()
    assert s.state.changed == set() and s.state.removed == {"a", "b", "x", "y", "z", "w", "v", "c"}
    t = DenseSession(cast(Any, None))
    dict.update(t, {"cart": []})
    t["cart"].append(1)
    assert not t.modified
    t.mark_modified("cart")
    assert t.state.changed == {"cart"}


# -- real asyncio: concurrent requests on one cookie ----------------------------------

async def concurrently(url: str, scenario: Callable[[httpx.AsyncClient], Any]) -> Any:
    store = make_store(url, NS)
    app = make_app(store)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://testserver") as http:
            return await scenario(http)
    finally:
        await store.client.aclose()


def test_concurrent_requests_keep_both_keys(client: redis.Redis, server: ServerProcess) -> None:
    async def scenario(http: httpx.AsyncClient) -> tuple[float, Any]:
        await http.post("/set/a", json={"value": 0})
        started = time.monotonic()
        replies = await asyncio.gather(http.post("/slow-set/b", json={"value": 1}),
                                       http.post("/slow-set/c", json={"value": 2}))
        elapsed = time.monotonic() - started
        assert [r.status_code for r in replies] == [200, 200]
        return elapsed, (await http.get("/all")).json()

    elapsed, body = asyncio.run(concurrently(server.url, scenario))
    assert elapsed < 0.55  # the two 0.3 s requests overlapped: each saved over a stale load
    assert body == {"data": {"a": 0, "b": 1, "c": 2}}


def test_session_ended_meanwhile_is_not_resurrected(client: redis.Redis,
                                                    server: ServerProcess) -> None:
    async def scenario(http: httpx.AsyncClient) -> tuple[list[str], list[str]]:
        await http.post("/set/a", json={"value": 0})
        slow = asyncio.ensure_future(http.post("/slow-set/b", json={"value": 1}))
        await asyncio.sleep(0.1)
        logout = await http.post("/logout")
        late = await slow
        return session_cookies(logout.headers), session_cookies(late.headers)

    on_logout, on_late = asyncio.run(concurrently(server.url, scenario))
    assert on_logout[0].startswith("session=null;")
    assert on_late[0].startswith("session=null;")  # the late save learnt the session ended
    assert sync_store(client).count() == 0


# -- lifetimes: Starlette's max_age bounds the stored session too ---------------------

def stored_life(client: redis.Redis, token: str | None) -> float:
    """Seconds the stored session has left."""
    found = sync_store(client).get(cast(str, token))
    assert found is not None
    return found.expires_at - time.time()


@pytest.mark.parametrize("store_ttl", [30 * 86400, 3600])
def test_max_age_is_the_cookie_and_the_stored_sessions_life(client: redis.Redis, server: ServerProcess,
                                                             store_ttl: int) -> None:
    store = make_store(server.url, NS, ttl=store_ttl)
    d = driver_for(make_app(store), store)  # Starlette's default max_age: 14 days
    try:
        _, _, headers = d.exchange("POST", "/set/a", {"value": 1})
        assert "; Max-Age=1209600; " in session_cookies(headers)[0]
        # the shorter of max_age and the store's own ttl
        assert min(1209600, store_ttl) - 5 < stored_life(client, d.cookie()) <= min(1209600, store_ttl)
    finally:
        d.close()
    store = make_store(server.url, NS, ttl=store_ttl)
    d = driver_for(make_app(store, max_age=None), store)  # a browser-session cookie
    try:
        _, _, headers = d.exchange("POST", "/set/a", {"value": 1})
        assert "Max-Age" not in session_cookies(headers)[0]
        assert store_ttl - 5 < stored_life(client, d.cookie()) <= store_ttl  # the store's ttl
    finally:
        d.close()


def test_a_cookie_replayed_after_max_age_finds_no_session(client: redis.Redis,
                                                          server: ServerProcess) -> None:
    now = [float(int(time.time()))]
    store = make_store(server.url, NS, ttl=86400, clock=lambda: now[0])
    d = driver_for(make_app(store, max_age=600), store)
    try:
        d.request("POST", "/set/a", {"value": 1})
        token = d.cookie()
        now[0] += 400
        d.request("POST", "/set/b", {"value": 2})  # a change starts max_age again, as
        now[0] += 400  # Starlette's re-signed cookie does
        assert d.request("GET", "/all") == (200, {"data": {"a": 1, "b": 2}})
        now[0] += 500  # no change for 900 s: past max_age (the store's ttl is a day)
        d.set_cookie(token)  # the browser kept it (a replay)
        assert d.request("GET", "/all") == (200, {"data": {}})
        d.request("POST", "/set/a", {"value": 3})
        now[0] += 500
        d.request("POST", "/login/5")  # a login without a change of data renews the life too
        token = d.cookie()
        now[0] += 599
        assert d.request("GET", "/get/a") == (200, {"value": 3})
        now[0] += 2
        assert d.request("GET", "/get/a") == (200, {"value": None})
        assert sync_store(client, clock=lambda: now[0]).get(cast(str, token)) is None
    finally:
        d.close()


async def remember_route(request: Request) -> JSONResponse:
    days = (await request.json())["days"]
    await remember(request, None if days is None else days * 86400)
    return JSONResponse({})


def test_remember_me_gives_one_session_its_own_lifetime(client: redis.Redis,
                                                        server: ServerProcess) -> None:
    store = make_store(server.url, NS, ttl=90 * 86400)
    d = driver_for(make_app(store, max_age=3600, extra_routes=[
        Route("/remember", remember_route, methods=["POST"])]), store)
    try:
        d.request("POST", "/login/8")
        assert 3590 < stored_life(client, d.cookie()) <= 3600
        _, _, headers = d.exchange("POST", "/remember", {"days": 30})
        assert "; Max-Age=2592000; " in session_cookies(headers)[0]
        assert 30 * 86400 - 10 < stored_life(client, d.cookie()) <= 30 * 86400
        _, _, headers = d.exchange("POST", "/set/a", {"value": 1})  # later writes keep it
        assert "; Max-Age=2592000; " in session_cookies(headers)[0]
        assert 30 * 86400 - 10 < stored_life(client, d.cookie()) <= 30 * 86400
        _, _, headers = d.exchange("POST", "/remember", {"days": None})  # until the browser closes
        assert "Max-Age" not in session_cookies(headers)[0]
        assert 90 * 86400 - 10 < stored_life(client, d.cookie()) <= 90 * 86400  # the store's ttl
        d.request("POST", "/logout")  # a new session after a logout has the app's max_age
        _, _, headers = d.exchange("POST", "/set/a", {"value": 1})
        assert "; Max-Age=3600; " in session_cookies(headers)[0]
        assert 3590 < stored_life(client, d.cookie()) <= 3600
    finally:
        d.close()


@pytest.mark.parametrize("max_age", [0, -1])
def test_max_age_at_or_below_zero_stores_nothing(client: redis.Redis, server: ServerProcess,
                                                 max_age: int) -> None:
    store = make_store(server.url, NS)
    d = driver_for(make_app(store, max_age=max_age), store)
    try:
        status, _, headers = d.exchange("POST", "/set/a", {"value": 1})
        assert status == 200
        assert session_cookies(headers) == [f"session=null; path=/; Max-Age={max_age}; httponly; samesite=lax"]
        assert sync_store(client).count() == 0
    finally:
        d.close()


# -- login as another user, logout, undecodable sessions ----------------------------------

async def logout_now(request: Request) -> JSONResponse:
    await logout(request)
    return JSONResponse({})


def test_login_as_another_identity_drops_the_previous_users_data(client: redis.Redis,
                                                                 server: ServerProcess) -> None:
    store = make_store(server.url, NS)
    d = driver_for(make_app(store, extra_routes=[
        Route("/combo/{uid}", set_then_login, methods=["POST"])]), store)
    try:
        d.request("POST", "/set/secret", {"value": "of 50"})
        d.request("POST", "/login/50")
        d.request("POST", "/set/gone", {"value": 0})
        of_50 = d.cookie()
        d.request("POST", "/login/50")  # the same user again: data kept, token rotated
        assert d.request("GET", "/all") == (200, {"data": {"secret": "of 50", "gone": 0}})
        assert d.cookie() != of_50
        of_50 = d.cookie()
        # user 7 logs in on user 50's session: 50's data (and what this request set before
        # the login) is dropped, 50's session ends; keys set after the login stay
        assert d.request("POST", "/combo/7") == (200, {"identity": 7})
        assert d.request("GET", "/all") == (200, {"data": {"after": 2}})
        assert sync_store(client).get(cast(str, of_50)) is None
        assert sync_store(client).sessions_of(50) == []
        assert [s.data for s in sync_store(client).sessions_of(7)] == [{"after": 2}]
    finally:
        d.close()


def test_logout_ends_the_stored_session(client: redis.Redis, server: ServerProcess) -> None:
    store = make_store(server.url, NS)
    d = driver_for(make_app(store, extra_routes=[
        Route("/logout-now", logout_now, methods=["POST"])]), store)
    try:
        for path in ("/logout", "/logout-now"):  # session.clear(), and logout(request)
            d.request("POST", "/set/a", {"value": 1})
            d.request("POST", "/login/3")
            assert len(sync_store(client).sessions_of(3)) == 1
            _, _, headers = d.exchange("POST", path)
            assert session_cookies(headers)[0].startswith("session=null;")
            assert sync_store(client).sessions_of(3) == []
            assert sync_store(client).count() == 0
            assert d.request("GET", "/all") == (200, {"data": {}})
    finally:
        d.close()


async def clear_then_big(request: Request) -> JSONResponse:
    request.session.clear()
    request.session["big"] = "~" * 70_000
    return JSONResponse({})


def test_a_refused_write_after_clear_leaves_the_session_logged_in(client: redis.Redis,
                                                                  server: ServerProcess) -> None:
    store = make_store(server.url, NS)
    d = driver_for(make_app(store, extra_routes=[
        Route("/clear-then-big", clear_then_big, methods=["POST"])]), store)
    try:
        d.request("POST", "/set/a", {"value": 1})
        d.request("POST", "/login/3")
        token = d.cookie()
        assert d.request("POST", "/clear-then-big")[0] == 500
        assert d.cookie() == token
        assert d.request("GET", "/all") == (200, {"data": {"a": 1}})
        assert len(sync_store(client).sessions_of(3)) == 1
    finally:
        d.close()


async def devices(request: Request) -> JSONResponse:
    store = store_of(request)  # the loop's store, for the app's own calls
    return JSONResponse({"devices": len(await store.sessions_of(int(request.path_params["uid"])))})


def test_store_of_gives_the_app_the_loops_store(client: redis.Redis, server: ServerProcess) -> None:
    app = Starlette(routes=[*ROUTES, Route("/devices/{uid}", devices)])
    app.add_middleware(SessionMiddleware, url=server.url, store_options={"namespace": NS})
    laptop, phone = TestClient(app), TestClient(app)  # a loop per request: a store per loop
    for browser in (laptop, phone):
        assert browser.post("/login/6").status_code == 200
    assert laptop.get("/devices/6").json() == {"devices": 2}
    assert "set-cookie" not in laptop.get("/devices/6").headers


def undecodable_session(client: redis.Redis) -> str:
    """A stored session of user 77 whose zstd dictionary the server lost."""
    from densekv.dictionaries import dictionary_key
    from densekv.tools.lab.session_profiles import session, sessions

    writer = sync_store(client)
    writer.train_dictionary(data for _, data in sessions("P1", 300))
    token = writer.create(77, session("P1", 7)[1])
    client.delete(dictionary_key(NS))
    return token


@pytest.mark.parametrize("then", ["read", "login", "logout", "set"])
def test_an_undecodable_session_is_no_session(client: redis.Redis, server: ServerProcess,
                                              then: str) -> None:
    token = undecodable_session(client)
    d = make_driver(server.url, NS)  # a worker that never held the dictionary
    try:
        d.set_cookie(token)
        assert d.request("GET", "/all") == (200, {"data": {}})
        if then == "login":
            assert d.request("POST", "/login/77")[0] == 200
            fresh = d.cookie()
            assert fresh not in (None, token)
            assert len(sync_store(client).sessions_of(77)) == 1
            assert sync_store(client).count() == 1  # the undecodable one ended
        elif then == "logout":
            _, _, headers = d.exchange("POST", "/logout")
            assert session_cookies(headers)[0].startswith("session=null;")
            assert sync_store(client).sessions_of(77) == []
        elif then == "set":
            assert d.request("POST", "/set/a", {"value": 1})[0] == 200
            assert d.cookie() not in (None, token)
            assert d.request("GET", "/all") == (200, {"data": {"a": 1}})
    finally:
        d.close()


# -- event loops: a store per loop ---------------------------------------------------------

def connections(client: redis.Redis) -> int:
    return len(client.client_list())


def test_url_form_serves_testclient_without_with(client: redis.Redis, server: ServerProcess) -> None:
    """TestClient without `with` runs each request on a new event loop: the middleware
    built from a URL keeps a client per loop and closes it with the loop."""
    app = Starlette(routes=ROUTES)
    app.add_middleware(SessionMiddleware, url=server.url, store_options={"namespace": NS})
    tc = TestClient(app)
    before = connections(client)
    assert tc.post("/set/a", json={"value": 1}).status_code == 200
    for n in range(12):
        assert tc.get("/get/a").json() == {"value": 1}
        assert tc.post("/set/n", json={"value": n}).status_code == 200
    assert tc.post("/login/4").status_code == 200
    assert tc.get("/all").json() == {"data": {"a": 1, "n": 11}}
    assert [s.data for s in sync_store(client).sessions_of(4)] == [{"a": 1, "n": 11}]
    assert tc.post("/logout-everywhere").status_code == 200
    assert sync_store(client).count() == 0
    deadline = time.monotonic() + 5  # every loop's client was closed with its loop
    while connections(client) > before + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert connections(client) <= before + 1


def test_factory_form_builds_one_store_per_loop(client: redis.Redis, server: ServerProcess) -> None:
    made: list[densekv.AsyncSessionStore] = []

    def factory() -> densekv.AsyncSessionStore:
        made.append(make_store(server.url, NS))
        return made[-1]

    app = Starlette(routes=ROUTES)
    app.add_middleware(SessionMiddleware, store=factory)
    with TestClient(app) as tc:  # one loop
        for n in range(3):
            assert tc.post("/set/a", json={"value": n}).status_code == 200
        assert tc.get("/get/a").json() == {"value": 2}
    assert len(made) == 1
    tc = TestClient(app, cookies=dict(tc.cookies))  # a loop per request
    for _ in range(3):
        assert tc.get("/get/a").json() == {"value": 2}
    assert len(made) == 4


def test_a_store_given_directly_serves_one_loop_and_says_so(client: redis.Redis,
                                                            server: ServerProcess) -> None:
    store = make_store(server.url, NS)
    app = Starlette(routes=ROUTES)
    app.add_middleware(SessionMiddleware, store=store)
    tc = TestClient(app)
    assert tc.get("/noop").status_code == 200  # the store's loop now (no connection made)
    with pytest.raises(RuntimeError, match="TestClient without `with`.*url="):
        tc.get("/noop")
    with pytest.raises(TypeError, match="url= or store="):
        SessionMiddleware(app)
    with pytest.raises(TypeError, match="url= or store="):
        SessionMiddleware(app, store=store, url=server.url)


@pytest.mark.parametrize("url", WRONG_URLS)
def test_a_wrong_url_fails_at_setup(url: str) -> None:
    """Made directly, or by Starlette when it builds its middleware stack (at lifespan
    startup under uvicorn and `with TestClient(app)`), before any request."""
    with pytest.raises(densekv.InvalidArgument, match="SessionMiddleware: url") as raised:
        SessionMiddleware(Starlette(routes=ROUTES), url=url)
    assert "s3cret" not in str(raised.value)
    app = Starlette(routes=ROUTES)
    app.add_middleware(SessionMiddleware, url=url)
    with pytest.raises(densekv.InvalidArgument), TestClient(app):
        pass


@pytest.mark.parametrize("url", UNREACHED_URLS)
def test_a_url_that_names_no_server_is_set_up_without_connecting(url: str) -> None:
    app = Starlette(routes=ROUTES)
    app.add_middleware(SessionMiddleware, url=url, client_options={"socket_connect_timeout": 0.5})
    with TestClient(app) as tc:
        assert tc.get("/noop").status_code == 200


def test_first_request_after_a_server_restart_succeeds(server_name: str,
                                                       fresh_server: Callable[..., ServerProcess]) -> None:
    srv = fresh_server(server_name, aof=True)
    d = make_driver(srv.url, NS)
    try:
        d.request("POST", "/set/a", {"value": 1})
        srv.restart()  # the app's pooled connection now leads nowhere
        assert d.request("GET", "/all") == (200, {"data": {"a": 1}})
        srv.restart()
        assert d.request("POST", "/set/b", {"value": 2})[0] == 200
        assert d.request("GET", "/all") == (200, {"data": {"a": 1, "b": 2}})
    finally:
        d.close()


# -- moving in from starsessions --------------------------------------------------------

def test_starsessions_session_moves_in(client: redis.Redis, server: ServerProcess) -> None:
    from starlette.middleware import Middleware
    from starsessions import SessionAutoloadMiddleware
    from starsessions import SessionMiddleware as StarsessionsMiddleware
    from starsessions.stores.redis import RedisStore

    async def put(request: Request) -> JSONResponse:
        request.session.update({"user": "ann", "cart": [1, 2], "n": {"deep": True}})
        return JSONResponse({})

    def old_app(connection: redis.asyncio.Redis) -> Starlette:
        return Starlette(routes=[Route("/put", put, methods=["POST"])], middleware=[
            Middleware(StarsessionsMiddleware, store=RedisStore(connection=connection),
                       lifetime=600, cookie_https_only=False),
            Middleware(SessionAutoloadMiddleware)])

    old_cookies = []
    for _ in range(2):
        connection = redis.asyncio.Redis.from_url(server.url)
        with TestClient(old_app(connection)) as tc:
            tc.post("/put")
            old_cookies.append(tc.cookies["session"])
            tc.portal.call(connection.aclose)
    cookie, untouched = old_cookies
    assert client.ttl(f"starsessions.{cookie}") > 590

    store = make_store(server.url, NS)
    d = driver_for(make_app(store, move_in=StarsessionsRedis()), store)  # on the store's client
    try:
        d.set_cookie(cookie)
        started = time.time()
        status, body, headers = d.exchange("GET", "/all")
        assert (status, body) == (200, {"data": {"user": "ann", "cart": [1, 2], "n": {"deep": True}}})
        assert session_cookies(headers) == []  # the same cookie value goes on
        assert client.exists(f"starsessions.{cookie}") == 0
        moved = sync_store(client).get(cookie)
        assert moved is not None and moved.identity is None
        assert started + 590 <= moved.expires_at <= started + 602  # its remaining lifetime
        d.request("POST", "/set/user", {"value": "bob"})
        assert d.cookie() == cookie
        assert d.request("GET", "/get/user") == (200, {"value": "bob"})
        # a cookie neither store knows: an empty session, nothing written anywhere
        other = d.new_browser()
        other.set_cookie("f" * 32)
        assert other.request("GET", "/all") == (200, {"data": {}})
        assert sync_store(client).count() == 1
        assert client.exists(f"starsessions.{untouched}") == 1  # only moved when asked for
    finally:
        d.close()


# -- FastAPI ------------------------------------------------------------------------------

def test_fastapi_app(client: redis.Redis, server: ServerProcess) -> None:
    from fastapi import FastAPI

    store = make_store(server.url, NS)
    app = FastAPI()
    app.add_middleware(SessionMiddleware, store=store, max_age=3600)

    @app.post("/cart/{item}")
    async def add(item: str, request: Request) -> dict[str, Any]:
        request.session["cart"] = [*request.session.get("cart", []), item]
        return {"cart": request.session["cart"]}

    @app.get("/cart")
    async def cart(request: Request) -> dict[str, Any]:
        return {"cart": request.session.get("cart", [])}

    @app.post("/login/{uid}")
    async def do_login(uid: int, request: Request) -> dict[str, Any]:
        await login(request, uid)
        return {}

    with TestClient(app) as tc:
        try:
            tc.post("/cart/apple")
            first = tc.post("/cart/pear")
            assert "Max-Age=3600" in first.headers["set-cookie"]
            assert tc.get("/cart").json() == {"cart": ["apple", "pear"]}
            old = tc.cookies["session"]
            tc.post("/login/5")
            assert tc.cookies["session"] != old
            assert tc.get("/cart").json() == {"cart": ["apple", "pear"]}
            assert [s.data for s in sync_store(client).sessions_of(5)] == [{"cart": ["apple", "pear"]}]
        finally:
            tc.portal.call(store.client.aclose)


# -- a real server: uvicorn, two worker processes -----------------------------------------

def test_uvicorn_two_workers(client: redis.Redis, server: ServerProcess, tmp_path: Path) -> None:
    if server.binary.name != "valkey-9.1":
        pytest.skip("one real app-server run is enough: the store itself is tested on every server")
    port = free_port()
    env = {**os.environ, "DENSEKV_WEB_URL": server.url, "DENSEKV_WEB_NAMESPACE": NS}
    log = open(tmp_path / "uvicorn.log", "wb")  # noqa: SIM115 - closed in the finally
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "--app-dir", str(Path(__file__).parents[2]),
         "tests.web.apps.starlette_app:app_from_env", "--host", "127.0.0.1", "--port", str(port),
         "--workers", "2"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_serving(base, proc, tmp_path / "uvicorn.log")
        # a new connection per request, so both workers get some of them
        with httpx.Client(base_url=base, headers={"connection": "close"}) as http:
            assert http.post("/set/a", json={"value": 1}).status_code == 200
            token = http.cookies["session"]
            pids = set()
            until = time.monotonic() + 30  # the second worker may still be starting on a busy machine
            while len(pids) < 2 and time.monotonic() < until:
                reply = http.get("/whoami").json()
                assert reply["data"] == {"a": 1}
                pids.add(reply["pid"])
            assert len(pids) == 2  # both workers read the session the other one wrote
            assert http.post("/login/9").status_code == 200
            assert http.cookies["session"] != token
            assert http.get("/get/a").json() == {"value": 1}
            assert len(sync_store(client).sessions_of(9)) == 1
            assert http.post("/logout").status_code == 200
            assert "session" not in http.cookies
            assert http.get("/get/a").json() == {"value": None}
            assert sync_store(client).sessions_of(9) == []
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this test started
            proc.wait(5)
        log.close()


def test_a_starsessions_session_that_does_not_decode_is_not_moved_in(client: redis.Redis,
                                                                      server: ServerProcess) -> None:
    """integrations/movein.py: an old session the reader cannot decode moves nothing and
    stays to expire there; the browser starts afresh. Before, StarsessionsRedis raised the
    JSON error, so every request with that cookie that used the session was a 500."""
    store = make_store(server.url, NS)
    d = driver_for(make_app(store, move_in=StarsessionsRedis()), store)
    cookie = "e" * 32
    try:
        client.set(f"starsessions.{cookie}", b"\xc1 not json", ex=600)
        d.set_cookie(cookie)
        assert d.request("GET", "/all") == (200, {"data": {}})
        assert client.get(f"starsessions.{cookie}") == b"\xc1 not json"
        assert sync_store(client).get(cookie) is None
    finally:
        client.delete(f"starsessions.{cookie}")
        d.close()
