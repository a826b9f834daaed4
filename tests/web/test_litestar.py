"""What only the Litestar backend does, beyond the shared contract and fault suites (which run
on it through tests/web/apps/litestar_app.py, Litestar's own TestClient): the cookie from
SessionConfig's fields as Litestar's ServerSideSessionConfig names them; one read per request
with a cookie (none without) and nothing written or sent for a handler that never uses the
session; request.set_session() (a dict or a dataclass) and request.clear_session(); login,
remember, store_of; a save the store refuses is a clean 500; config checked at setup (URLs,
max_age); one store per event loop from a URL (TestClient without `with`); a route skipped
by exclude_opt_key; the app under uvicorn with two workers; docs/litestar.md's blocks run
as written.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from litestar import Litestar, Request, get, post
from litestar.exceptions import ImproperlyConfiguredException
from litestar.params import FromPath, JSONBody
from litestar.testing import TestClient

import densekv
from densekv.integrations.litestar import (
    MAX_AGE_KEY,
    DenseSession,
    SessionConfig,
    login,
    logout,
    remember,
    store_of,
)
from densekv.tools.server.process import ServerProcess, free_port
from tests.web.app_server import wait_serving
from tests.web.apps.litestar_app import ROUTES, LitestarDriver, driver_for, make_app, make_store
from tests.web.driver import COOKIE, UNREACHED_URLS, WRONG_URLS

ROOT = Path(__file__).resolve().parents[2]
OK = (200, {"ok": True})


@pytest.fixture
def ns() -> str:
    return f"lit{uuid.uuid4().hex[:12]}"


@pytest.fixture
def looker(server: ServerProcess, ns: str) -> Iterator[densekv.SessionStore]:
    """A sync store on the test's namespace, to see what the app wrote."""
    client = server.client()
    yield densekv.SessionStore(client, namespace=ns)
    client.close()


def open_driver(url: str, ns: str, *, extra: list[Any] | None = None, **config: Any) -> LitestarDriver:
    store = make_store(url, ns)
    return driver_for(make_app(store, extra_routes=extra, **config), store)


def commands(client: redis.Redis) -> dict[str, int]:
    return {k: int(v["calls"]) for k, v in client.info("commandstats").items()
            if k != "cmdstat_info"}


def session_cookies(headers: Any) -> list[str]:
    return [h for h in headers.get_list("set-cookie") if h.startswith(f"{COOKIE}=")]


# -- extra routes -----------------------------------------------------------------------------
@dataclasses.dataclass
class Profile:
    name: str
    tags: list[str]


@post("/replace", status_code=200)
async def replace(request: Request[Any, Any, Any], data: JSONBody[dict[str, Any]]) -> dict[str, Any]:
    request.set_session(data)
    return {"ok": True}


@post("/replace-profile", status_code=200)
async def replace_profile(request: Request[Any, Any, Any]) -> dict[str, Any]:
    request.set_session(Profile("ann", ["a", "b"]))
    return {"ok": True}


@post("/set-then-clear", status_code=200)
async def set_then_clear(request: Request[Any, Any, Any]) -> dict[str, Any]:
    request.session["x"] = 1
    request.clear_session()
    return {"ok": True}


@post("/remember/{seconds:int}", status_code=200)
async def remember_route(request: Request[Any, Any, Any], seconds: FromPath[int]) -> dict[str, Any]:
    await remember(request, seconds)
    return {"ok": True}


@post("/login-as/{uid:int}", status_code=200)
async def login_then_set(request: Request[Any, Any, Any], uid: FromPath[int]) -> dict[str, Any]:
    await login(request, uid)
    request.session["after"] = True
    return {"ok": True}


@post("/logout-now", status_code=200)
async def logout_now(request: Request[Any, Any, Any]) -> dict[str, Any]:
    await logout(request)
    return {"ok": True}


@get("/devices")
async def devices(request: Request[Any, Any, Any]) -> dict[str, Any]:
    session = request.session
    assert isinstance(session, DenseSession)
    found = await store_of(request).sessions_of(session.identity) if session.identity else []
    return {"count": len(found)}


@get("/skipped", opt={"skip_session": True})
async def skipped(request: Request[Any, Any, Any]) -> dict[str, Any]:
    return {"has": "session" in request.scope}


EXTRA = [replace, replace_profile, set_then_clear, remember_route, login_then_set, logout_now,
         devices, skipped]


@pytest.fixture
def web(server: ServerProcess, ns: str) -> Iterator[LitestarDriver]:
    d = open_driver(server.url, ns, extra=EXTRA)
    yield d
    d.close()


# -- cookies ------------------------------------------------------------------------------------
def test_cookie_attributes_come_from_the_config(server: ServerProcess, ns: str,
                                                web: LitestarDriver) -> None:
    d = open_driver(server.url, ns, max_age=600, secure=True, samesite="strict",
                    domain="testserver.local", path="/")
    try:
        _, _, headers = d.exchange("POST", "/set/a", {"value": 1})
        (cookie,) = session_cookies(headers)
        attrs = sorted(a.strip() for a in cookie.split(";")[1:])
        assert attrs == ["Domain=testserver.local", "HttpOnly", "Max-Age=600", "Path=/",
                         "SameSite=strict", "Secure"]
    finally:
        d.close()
    _, _, headers = web.exchange("POST", "/set/a", {"value": 1})  # Litestar's defaults
    (cookie,) = session_cookies(headers)
    assert sorted(a.strip() for a in cookie.split(";")[1:]) == [
        "HttpOnly", "Max-Age=1209600", "Path=/", "SameSite=lax"]
    _, _, headers = web.exchange("POST", "/logout")
    (cleared,) = session_cookies(headers)
    assert cleared.startswith(f"{COOKIE}=null;") and "Max-Age=0" in cleared
    assert web.cookie() is None


def test_a_request_costs_one_read_with_a_cookie_and_none_without(web: LitestarDriver,
                                                                 server: ServerProcess) -> None:
    with server.client() as c:
        assert web.request("POST", "/set/a", {"value": 1}) == OK
        fresh = web.new_browser()
        before = commands(c)
        status, _, headers = fresh.exchange("GET", "/noop")
        assert status == 200 and not session_cookies(headers) and "vary" not in headers
        assert commands(c) == before  # no cookie: no server call
        status, _, headers = web.exchange("GET", "/noop")
        assert status == 200 and not session_cookies(headers) and "vary" not in headers
        after = commands(c)
        assert sum(after.values()) - sum(before.values()) == 1  # the read, nothing written
        status, body, headers = web.exchange("GET", "/get/a")
        assert (status, body) == (200, {"value": 1})
        assert headers["vary"] == "Cookie" and not session_cookies(headers)


# -- what Litestar lets a handler do with the session -------------------------------------------
def test_set_session_replaces_the_data_under_the_same_token_and_user(
        web: LitestarDriver, looker: densekv.SessionStore) -> None:
    assert web.request("POST", "/login/5") == OK
    assert web.request("POST", "/set/a", {"value": 1}) == OK
    token = web.cookie()
    assert web.request("POST", "/replace", {"b": 2, "c": [3]}) == OK
    assert web.cookie() == token
    assert web.request("GET", "/all") == (200, {"data": {"b": 2, "c": [3]}})
    stored = looker.get(token)
    assert stored is not None and stored.identity == 5 and stored.data == {"b": 2, "c": [3]}
    assert web.request("POST", "/replace-profile") == OK  # a dataclass, through the app's encoder
    assert web.request("GET", "/all") == (200, {"data": {"name": "ann", "tags": ["a", "b"]}})


def test_clear_session_ends_the_stored_session(web: LitestarDriver,
                                               looker: densekv.SessionStore) -> None:
    assert web.request("POST", "/login/6") == OK
    token = web.cookie()
    assert web.request("POST", "/set-then-clear") == OK
    assert not web.cookie()
    assert token is not None and looker.get(token) is None
    assert looker.sessions_of(6) == []
    assert looker.count() == 0  # nothing set before the clear survives it


def test_login_keeps_the_anonymous_data_and_the_changes_after_it(
        web: LitestarDriver, looker: densekv.SessionStore) -> None:
    assert web.request("POST", "/set/cart", {"value": ["tea"]}) == OK
    old = web.cookie()
    assert web.request("POST", "/login-as/8") == OK
    assert web.cookie() not in (None, old)
    assert web.request("GET", "/all") == (200, {"data": {"cart": ["tea"], "after": True}})
    assert web.request("GET", "/devices") == (200, {"count": 1})
    assert web.request("POST", "/login-as/9") == OK  # another user: the data is dropped
    assert web.request("GET", "/all") == (200, {"data": {"after": True}})
    assert looker.sessions_of(8) == [] and len(looker.sessions_of(9)) == 1
    assert web.request("POST", "/logout-now") == OK
    assert not web.cookie() and looker.count() == 0


def test_remember_gives_one_session_its_own_lifetime(web: LitestarDriver,
                                                     looker: densekv.SessionStore) -> None:
    assert web.request("POST", "/set/a", {"value": 1}) == OK
    _, _, headers = web.exchange("POST", "/remember/120")
    (cookie,) = session_cookies(headers)
    assert "Max-Age=120" in cookie
    stored = looker.get(web.cookie())
    assert stored is not None and stored.data[MAX_AGE_KEY] == 120
    assert stored.expires_at - time.time() <= 121


def test_a_route_skipped_by_its_option_has_no_session(web: LitestarDriver) -> None:
    assert web.request("POST", "/set/a", {"value": 1}) == OK
    assert web.request("GET", "/skipped") == (200, {"has": False})


def test_refused_data_is_a_500_and_the_stored_session_stays(server: ServerProcess, ns: str,
                                                           looker: densekv.SessionStore) -> None:
    store = make_store(server.url, ns, max_data_bytes=2048)
    d = driver_for(make_app(store), store)
    try:
        assert d.request("POST", "/set/a", {"value": "small"}) == OK
        token = d.cookie()
        status, body, headers = d.exchange("POST", "/set/big", {"value": secrets.token_urlsafe(6000)})
        assert (status, body) == (500, {"status_code": 500, "detail": "Internal Server Error"})
        assert not session_cookies(headers) and d.cookie() == token
        assert looker.get(token).data == {"a": "small"}  # type: ignore[union-attr]
    finally:
        d.close()


# -- setup and event loops ----------------------------------------------------------------------
@pytest.mark.parametrize("url", WRONG_URLS)
def test_a_wrong_url_fails_at_setup(url: str) -> None:
    with pytest.raises(densekv.InvalidArgument, match="SessionConfig: url") as raised:
        SessionConfig(url=url)
    assert "s3cret" not in str(raised.value)


@pytest.mark.parametrize("url", UNREACHED_URLS)
def test_a_url_that_names_no_server_is_set_up_without_connecting(url: str) -> None:
    config = SessionConfig(url=url, client_options={"socket_connect_timeout": 0.5})
    with TestClient(Litestar(ROUTES, middleware=[config.middleware])) as tc:
        assert tc.get("/noop").status_code == 200


@pytest.mark.parametrize("fields", [{}, {"max_age": 0}, {"url": "redis://x", "store": lambda: None},
                                    {"store": lambda: None, "store_options": {"ttl": 5}}, {"key": ""}])
def test_config_mistakes_fail_at_setup(fields: dict[str, Any]) -> None:
    if "url" not in fields and "store" not in fields:
        fields = {"url": "redis://127.0.0.1:1/0", **fields} if fields else fields
    with pytest.raises(ImproperlyConfiguredException):
        SessionConfig(**fields)


def test_url_form_serves_testclient_without_with(server: ServerProcess, ns: str,
                                                 looker: densekv.SessionStore) -> None:
    """TestClient without `with` runs each request on a new event loop: the config built from
    a URL keeps a client per loop and closes it with the loop."""
    config = SessionConfig(url=server.url, key=COOKIE, store_options={"namespace": ns})
    tc = TestClient(Litestar(ROUTES, middleware=[config.middleware]))
    assert tc.post("/set/a", json={"value": 1}).status_code == 200
    for n in range(6):
        assert tc.get("/get/a").json() == {"value": 1}
        assert tc.post("/set/n", json={"value": n}).status_code == 200
    assert tc.post("/login/4").status_code == 200
    assert [s.data for s in looker.sessions_of(4)] == [{"a": 1, "n": 5}]
    assert tc.post("/logout-everywhere").status_code == 200
    assert looker.count() == 0


def test_a_store_given_directly_serves_one_loop_and_says_so(server: ServerProcess, ns: str) -> None:
    store = make_store(server.url, ns)
    config = SessionConfig(store=store, key=COOKIE)
    tc = TestClient(Litestar(ROUTES, middleware=[config.middleware]))  # a loop per request
    assert tc.get("/noop").status_code == 200
    assert tc.get("/noop").status_code == 500  # Litestar's exception middleware: the message
    with pytest.raises(RuntimeError, match="given one AsyncSessionStore.*function returning"):
        asyncio.run(config.current_store())


# -- a real server ---------------------------------------------------------------------------
def test_uvicorn_two_workers(server: ServerProcess, server_name: str, ns: str,
                             looker: densekv.SessionStore, tmp_path: Path) -> None:
    if server_name != "valkey-9.1":
        pytest.skip("one real app-server run is enough: the store itself is tested on every server")
    port = free_port()
    env = {**os.environ, "DENSEKV_WEB_URL": server.url, "DENSEKV_WEB_NAMESPACE": ns}
    log = open(tmp_path / "uvicorn.log", "wb")  # noqa: SIM115 - closed in the finally
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "--app-dir", str(ROOT),
         "tests.web.apps.litestar_app:app_from_env", "--host", "127.0.0.1", "--port", str(port),
         "--workers", "2"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_serving(base, proc, tmp_path / "uvicorn.log")
        with httpx.Client(base_url=base, headers={"connection": "close"}) as http:
            assert http.post("/set/a", json={"value": 1}).status_code == 200
            token = http.cookies[COOKIE]
            pids = set()
            until = time.monotonic() + 30  # the second worker may still be starting
            while len(pids) < 2 and time.monotonic() < until:
                reply = http.get("/whoami").json()
                assert reply["data"] == {"a": 1}
                pids.add(reply["pid"])
            assert len(pids) == 2  # both workers read the session the other one wrote
            assert http.post("/login/9").status_code == 200
            assert http.cookies[COOKIE] != token
            assert len(looker.sessions_of(9)) == 1
            assert http.post("/logout").status_code == 200
            assert COOKIE not in http.cookies
            assert looker.sessions_of(9) == []
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this test started
            proc.wait(5)
        log.close()


# -- docs/litestar.md --------------------------------------------------------------------------
DOC = (ROOT / "docs" / "litestar.md").read_text() if (ROOT / "docs" / "litestar.md").exists() else ""
DOC_BLOCKS = re.findall(r"```python\n(.*?)```", DOC, re.DOTALL)
DOC_FRAGMENTS = re.findall(r"```py\n(.*?)```", DOC, re.DOTALL)


def test_the_docs_page_has_runnable_blocks_and_its_fragments_compile() -> None:
    assert len(DOC_BLOCKS) >= 1 and len(DOC_FRAGMENTS) >= 2
    for fragment in DOC_FRAGMENTS:
        compile(fragment, "docs/litestar.md", "exec")


@pytest.mark.parametrize("block", DOC_BLOCKS, ids=[f"block{i}" for i in range(len(DOC_BLOCKS))])
def test_a_docs_page_block_runs_as_written(block: str) -> None:
    done = subprocess.run([sys.executable, "-W", "error::ResourceWarning", "-c", block], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{block}\n--- stderr:\n{done.stderr[-3000:]}"


# -- moving in from Litestar's own server-side sessions ----------------------------------------
@pytest.mark.parametrize("namespace", ["LITESTAR", "LITESTAR_sessions"])
def test_litestars_own_redis_sessions_move_in_under_the_same_cookie(
        server: ServerProcess, ns: str, looker: densekv.SessionStore, namespace: str) -> None:
    """A session Litestar's ServerSideSessionConfig wrote to its RedisStore (JSON under
    <namespace>:<64 hex>) is read by densekv's SessionConfig(move_in=LitestarRedisStore()),
    stored under the same cookie with the life it had left, the old key deleted; a cookie
    that names neither is an empty session."""
    from litestar.middleware.session.server_side import ServerSideSessionConfig
    from litestar.stores.redis import RedisStore

    from densekv.integrations.litestar import LitestarRedisStore

    @post("/put")
    async def put(request: Request[Any, Any, Any]) -> dict[str, Any]:
        request.set_session({"user": "ann", "cart": [1, 2], "n": {"deep": True}})
        return {}

    root = RedisStore.with_client(server.url)
    redis_store = root if namespace == "LITESTAR" else root.with_namespace("sessions")
    old = Litestar([put], stores={"sessions": redis_store},
                   middleware=[ServerSideSessionConfig(max_age=600, key=COOKIE).middleware])
    with TestClient(old) as tc:
        tc.post("/put")
        cookie = tc.cookies[COOKIE]
    client = server.client()
    try:
        assert len(cookie) == 64 and client.ttl(f"{namespace}:{cookie}") > 590
        store = make_store(server.url, ns)
        d = driver_for(make_app(store, move_in=LitestarRedisStore(namespace=namespace)), store)
        try:
            d.set_cookie(cookie)
            started = time.time()
            status, body, headers = d.exchange("GET", "/all")
            assert (status, body) == (200, {"data": {"user": "ann", "cart": [1, 2], "n": {"deep": True}}})
            assert session_cookies(headers) == []  # the same cookie value goes on
            assert client.exists(f"{namespace}:{cookie}") == 0
            moved = looker.get(cookie)
            assert moved is not None and moved.identity is None
            assert started + 585 <= moved.expires_at <= started + 602  # the life it had left
            assert d.request("POST", "/set/user", {"value": "bob"}) == OK
            assert d.cookie() == cookie and d.request("GET", "/get/user") == (200, {"value": "bob"})
            d.set_cookie(secrets.token_hex(32))  # in neither store
            assert d.request("GET", "/all") == (200, {"data": {}})
        finally:
            d.close()
    finally:
        client.close()


# -- request.get_session_id() ------------------------------------------------------------------
@get("/sid")
async def sid_only(request: Request[Any, Any, Any]) -> dict[str, Any]:
    return {"sid": request.get_session_id()}


@post("/sid/set")
async def sid_then_set(request: Request[Any, Any, Any]) -> dict[str, Any]:
    told = request.get_session_id()
    request.session["a"] = 1
    return {"sid": told}


@post("/sid/login/{uid:int}")
async def sid_then_login(request: Request[Any, Any, Any], uid: FromPath[int]) -> dict[str, Any]:
    told = request.get_session_id()
    await login(request, uid)
    return {"sid": told, "after": request.get_session_id()}


def test_get_session_id_is_the_token_the_cookie_will_carry(server: ServerProcess, ns: str,
                                                           looker: densekv.SessionStore) -> None:
    """As Litestar's server-side backend: the id a handler is told before the session is
    stored is the cookie's after the save; a request that stores nothing writes nothing for
    it; a cookie that loaded nothing is not reused; a login that creates the session stores
    it under the told token (never sent to a browser before), a login over a stored session
    draws a new one (Litestar keeps telling the id it told before the handler)."""
    d = open_driver(server.url, ns, extra=[sid_only, sid_then_set, sid_then_login])
    try:
        status, body, headers = d.exchange("GET", "/sid")
        assert status == 200 and isinstance(body["sid"], str) and session_cookies(headers) == []
        assert looker.count() == 0  # told, not stored
        told = d.request("POST", "/sid/set")[1]["sid"]
        assert d.cookie() == told and looker.get(told) is not None
        assert d.request("GET", "/sid") == (200, {"sid": told})  # a stored session: its token
        stale = secrets.token_urlsafe(16)
        other = d.new_browser()
        other.set_cookie(stale)
        again = other.request("POST", "/sid/set")[1]["sid"]
        assert again != stale and other.cookie() == again and looker.get(stale) is None
        fresh = d.new_browser()
        status, body = fresh.request("POST", "/sid/login/5")
        assert status == 201 and body["after"] == body["sid"] == fresh.cookie()
        found = looker.get(body["sid"])
        assert found is not None and found.identity == 5 and len(looker.sessions_of(5)) == 1
        status, body = fresh.request("POST", "/sid/login/6")  # another user: a new session
        assert status == 201 and body["sid"] == body["after"] != fresh.cookie()
        now = looker.get(str(fresh.cookie()))
        assert looker.sessions_of(5) == [] and now is not None and now.identity == 6
    finally:
        d.close()
