"""What only the Starlette/FastAPI middleware has to prove (the shared contract is in
test_contract.py): cookies exactly as Starlette's own middleware writes them, no write and
no cookie for an empty or unchanged session, junk cookies without a server call, outages
and refused data as 500s that change nothing, concurrent requests under real asyncio,
the idle touch, sessions moved in from starsessions, a FastAPI app, and a real uvicorn
with two worker processes.
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
)
from densekv.server.process import ServerProcess, free_port
from tests.web.apps.starlette_app import (
    StarletteDriver,
    driver_for,
    make_app,
    make_driver,
    make_store,
)

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


@pytest.mark.parametrize("kwargs", COOKIE_ARGS, ids=lambda k: ",".join(map(str, k.values())))
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
        assert d.request("GET", "/all")[0] == 500  # at load
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
        # clear() then a new key: the session goes on with only that key
        d.request("POST", "/clear-then-set")
        assert d.request("GET", "/all") == (200, {"data": {"flash": "bye"}})
        assert d.cookie() == new
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
    d = driver_for(make_app(store, move_in=StarsessionsRedis(store.client)), store)
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
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "uvicorn.log").read_text()
            try:
                if httpx.get(base + "/noop").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "uvicorn.log").read_text()
            time.sleep(0.1)
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
