"""What only the Quart backend does, beyond the shared contract and fault suites (which run
on it through tests/web/apps/quart_app.py): cookie flags and lifetime from app.config, as in
the Flask shell; one read per request with a cookie (none without) and nothing written or
sent for a view that never uses the session; a route without the session served while the
server is stopped or the URL is wrong; URLs checked at setup; session_transaction(); Flask's
value tags; login as another user and `_user_id` as one identity; one store per event loop
from a URL; moving in from Quart-Session's Redis format; the app under hypercorn with two
workers; docs/quart.md's blocks run as written.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from quart import jsonify, session
from quart.sessions import session_json_serializer

import densekv
from densekv.integrations.quart import DensekvSession, QuartSessionFallback, SessionInterface
from densekv.tools.server.process import ServerProcess, free_port
from tests.web.app_server import wait_serving
from tests.web.apps.quart_app import QuartDriver, driver_for, make_app, make_store
from tests.web.driver import COOKIE, UNREACHED_URLS, WRONG_URLS

ROOT = Path(__file__).resolve().parents[2]
OK = (200, {"ok": True})


@pytest.fixture
def ns() -> str:
    return f"quart{uuid.uuid4().hex[:12]}"


@pytest.fixture
def looker(server: ServerProcess, ns: str) -> Iterator[densekv.SessionStore]:
    """A sync store on the test's namespace, to see what the app wrote."""
    client = server.client()
    yield densekv.SessionStore(client, namespace=ns)
    client.close()


def open_driver(url: str, ns: str, *, config: dict[str, Any] | None = None,
                **interface: Any) -> QuartDriver:
    store = make_store(url, ns)
    return driver_for(make_app(SessionInterface(store, **interface), config=config), store)


@pytest.fixture
def web(server: ServerProcess, ns: str) -> Iterator[QuartDriver]:
    d = open_driver(server.url, ns)
    yield d
    d.close()


def commands(client: redis.Redis) -> dict[str, int]:
    return {k: int(v["calls"]) for k, v in client.info("commandstats").items()
            if k != "cmdstat_info"}


# -- cookies and lifetime from app.config ------------------------------------------------------
def test_cookie_flags_and_lifetime_come_from_app_config(server: ServerProcess, ns: str,
                                                        looker: densekv.SessionStore) -> None:
    d = open_driver(server.url, ns, config={
        "SESSION_COOKIE_SECURE": True, "SESSION_COOKIE_SAMESITE": "Strict",
        "SESSION_COOKIE_DOMAIN": "example.test", "PERMANENT_SESSION_LIFETIME": 600})
    try:
        d.app.add_url_rule("/perm", "perm", _make_permanent, methods=["POST"])
        status, _, headers = d.exchange("POST", "/set/a", {"value": 1})
        (cookie,) = headers.getlist("Set-Cookie")
        assert status == 200 and "Secure" in cookie and "SameSite=Strict" in cookie
        assert "Domain=example.test" in cookie and "HttpOnly" in cookie
        assert "Expires" not in cookie  # not permanent: a browser-session cookie
        token = cookie.split(";")[0].split("=", 1)[1]
        stored = looker.get(token)
        assert stored is not None and stored.expires_at - time.time() <= 601  # min(600, store ttl)
        d.set_cookie(token)
        status, _, headers = d.exchange("POST", "/perm")
        (cookie,) = headers.getlist("Set-Cookie")
        assert "Expires" in cookie
        assert headers["Vary"] == "Cookie"
    finally:
        d.close()


async def _make_permanent() -> Any:
    session.permanent = True
    return jsonify(ok=True)


# -- what a request costs -------------------------------------------------------------------
def test_one_read_with_a_cookie_nothing_written_for_an_unused_session(
        web: QuartDriver, server: ServerProcess) -> None:
    assert web.request("POST", "/set/a", {"value": 1}) == OK
    with server.client() as c:
        before = commands(c)
        status, _, headers = web.exchange("GET", "/noop")
        after = commands(c)
        assert status == 200 and "Vary" not in headers and "Set-Cookie" not in headers
        assert sum(after.values()) - sum(before.values()) <= 2  # one get: a script or two reads
        assert not any(k for k in after if after[k] != before.get(k)
                       and k not in ("cmdstat_evalsha", "cmdstat_fcall", "cmdstat_hget",
                                     "cmdstat_hmget", "cmdstat_get", "cmdstat_mget",
                                     "cmdstat_exec", "cmdstat_multi", "cmdstat_pttl"))
        browser = web.new_browser()  # no cookie: no server call at all
        before = commands(c)
        assert browser.request("GET", "/noop") == OK
        assert browser.request("GET", "/all") == (200, {"data": {}})
        assert commands(c) == before
        status, _, headers = web.exchange("GET", "/get/a")
        assert status == 200 and headers["Vary"] == "Cookie" and "Set-Cookie" not in headers


@pytest.mark.parametrize("wrong", ["stopped", "password", "port"])
def test_a_route_without_the_session_is_served_when_the_server_is_unusable(
        fresh_server: Callable[..., ServerProcess], server_name: str, wrong: str) -> None:
    srv = fresh_server(server_name, options={"requirepass": "right"})
    url = {"stopped": f"redis://:right@127.0.0.1:{srv.port}/0",
           "password": f"redis://:wrong@127.0.0.1:{srv.port}/0",
           "port": f"redis://127.0.0.1:{free_port()}/0"}[wrong]
    interface = SessionInterface.from_url(url, namespace=f"q{uuid.uuid4().hex[:8]}",
                                          client_options={"socket_timeout": 1.0,
                                                          "socket_connect_timeout": 1.0})
    web = driver_for(make_app(interface))
    try:
        if wrong == "stopped":
            assert web.request("POST", "/set/a", {"value": 1}) == OK
            srv.stop()
        else:
            web.set_cookie(secrets.token_urlsafe(24))
        assert web.request("GET", "/noop") == OK
        assert web.request("GET", "/get/a")[0] == 500
        assert web.request("POST", "/set/b", {"value": 2})[0] == 500
        assert web.new_browser().request("GET", "/noop") == OK
    finally:
        web.loop.close()


@pytest.mark.parametrize("url", WRONG_URLS)
def test_a_wrong_url_fails_at_setup(url: str) -> None:
    with pytest.raises(densekv.InvalidArgument, match="from_url: url") as raised:
        SessionInterface.from_url(url)
    assert "s3cret" not in str(raised.value)


@pytest.mark.parametrize("url", UNREACHED_URLS)
def test_a_url_that_names_no_server_is_set_up_without_connecting(url: str) -> None:
    web = driver_for(make_app(SessionInterface.from_url(url)))
    try:
        assert web.request("GET", "/noop") == OK
    finally:
        web.loop.close()


# -- the session object ---------------------------------------------------------------------
def test_session_transaction_sees_and_changes_an_existing_session(
        web: QuartDriver, looker: densekv.SessionStore) -> None:
    assert web.request("POST", "/set/a", {"value": 1}) == OK

    async def transact() -> None:
        async with web.client.session_transaction() as sess:
            assert isinstance(sess, DensekvSession) and sess["a"] == 1
            sess["b"] = [1, 2]
            sess["_user_id"] = "7"  # as Flask-Login's tests (and its Quart ports) log in

    web.loop.run(transact())
    assert web.request("GET", "/all") == (200, {"data": {"a": 1, "b": [1, 2], "_user_id": "7"}})
    assert len(looker.sessions_of(7)) == 1  # "7" is indexed as 7, as in the Flask shell


def test_flask_tagged_values_come_back_as_themselves(web: QuartDriver) -> None:
    when = dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.timezone.utc)
    seen: dict[str, Any] = {}

    async def put() -> Any:
        session["t"] = ("a", 1)
        session["when"] = when
        session["raw"] = b"\x00\xff"
        return jsonify(ok=True)

    async def take() -> Any:
        seen.update(t=session["t"], when=session["when"], raw=session["raw"])
        return jsonify(ok=True)

    web.app.add_url_rule("/put", "put", put, methods=["POST"])
    web.app.add_url_rule("/take", "take", take)
    assert web.request("POST", "/put") == OK
    assert web.request("GET", "/take") == OK
    assert seen == {"t": ("a", 1), "when": when, "raw": b"\x00\xff"}


def test_login_as_another_user_drops_the_previous_users_data(
        web: QuartDriver, looker: densekv.SessionStore) -> None:
    assert web.request("POST", "/set/cart", {"value": ["tea"]}) == OK
    assert web.request("POST", "/login/1") == OK
    assert web.request("GET", "/all") == (200, {"data": {"cart": ["tea"]}})  # anonymous: kept
    assert web.request("POST", "/login/2") == OK
    assert web.request("GET", "/all") == (200, {"data": {}})
    assert looker.sessions_of(1) == [] and len(looker.sessions_of(2)) == 1


def test_user_id_and_login_are_one_identity(web: QuartDriver, looker: densekv.SessionStore) -> None:
    assert web.request("POST", "/login/42") == OK
    assert web.request("POST", "/set/_user_id", {"value": "42"}) == OK
    assert web.request("POST", "/set/a", {"value": 1}) == OK
    assert web.request("GET", "/all") == (200, {"data": {"_user_id": "42", "a": 1}})
    assert len(looker.sessions_of(42)) == 1
    assert web.request("POST", "/del/_user_id") == OK  # a logout, as logout_user()
    assert looker.sessions_of(42) == []
    assert web.request("GET", "/all") == (200, {"data": {"a": 1}})


def test_a_websocket_gets_the_session_and_saves_nothing(web: QuartDriver) -> None:
    assert web.request("POST", "/set/a", {"value": 1}) == OK

    @web.app.websocket("/ws")
    async def ws() -> None:
        from quart import websocket

        await websocket.send(str(session.get("a")))
        session["b"] = 2

    async def talk() -> str:
        async with web.client.websocket("/ws") as sock:
            return str(await sock.receive())

    assert web.loop.run(talk()) == "1"
    assert web.request("GET", "/all") == (200, {"data": {"a": 1}})


# -- stores and event loops --------------------------------------------------------------------
def test_from_url_serves_each_event_loop_with_its_own_store(server: ServerProcess, ns: str,
                                                             looker: densekv.SessionStore) -> None:
    app = make_app(SessionInterface.from_url(server.url, namespace=ns))
    client = app.test_client()

    async def call(method: str, path: str, json: Any = None) -> Any:
        response = await client.open(path, method=method, **({"json": json} if json else {}))
        return await response.get_json()

    assert asyncio.run(call("POST", "/set/a", {"value": 1})) == {"ok": True}
    for n in range(3):  # a new loop each time: a new client, closed with its loop
        assert asyncio.run(call("GET", "/get/a")) == {"value": 1}
        assert asyncio.run(call("POST", "/set/n", {"value": n})) == {"ok": True}
    assert asyncio.run(call("POST", "/login/3")) == {"ok": True}
    assert [s.data for s in looker.sessions_of(3)] == [{"a": 1, "n": 2}]


def test_a_store_given_directly_serves_one_loop_and_says_so(server: ServerProcess, ns: str) -> None:
    store = make_store(server.url, ns)
    app = make_app(SessionInterface(store))
    app.config["PROPAGATE_EXCEPTIONS"] = True
    client = app.test_client()

    async def call() -> int:
        return (await client.post("/set/a", json={"value": 1})).status_code

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(call()) == 200
        with pytest.raises(RuntimeError, match="one AsyncSessionStore"):
            asyncio.run(call())
        loop.run_until_complete(store.client.aclose())
    finally:
        loop.close()
    with pytest.raises(TypeError, match="AsyncSessionStore or a function"):
        SessionInterface(object())  # type: ignore[arg-type]


def test_first_request_after_a_server_restart_succeeds(
        server_name: str, fresh_server: Callable[..., ServerProcess], ns: str) -> None:
    srv = fresh_server(server_name, aof=True)
    d = open_driver(srv.url, ns)
    try:
        assert d.request("POST", "/set/a", {"value": 1}) == OK
        srv.restart()  # the app's pooled connection now leads nowhere
        assert d.request("GET", "/all") == (200, {"data": {"a": 1}})
        srv.restart()
        assert d.request("POST", "/set/b", {"value": 2}) == OK
        assert d.request("GET", "/all") == (200, {"data": {"a": 1, "b": 2}})
    finally:
        d.close()


# -- moving in from Quart-Session ------------------------------------------------------------
def test_quart_session_sessions_move_in_under_the_same_cookie(
        server: ServerProcess, ns: str, looker: densekv.SessionStore) -> None:
    """Quart-Session's RedisSessionInterface: `session:<uuid4>` holding Flask's tagged JSON,
    with PERMANENT_SESSION_LIFETIME as its expiry (written here as it writes it: the package needs
    aioredis 1.x, which no longer installs)."""
    sid = str(uuid.uuid4())
    old = {"_user_id": "12", "cart": ("tea", 2), "_permanent": True}
    with server.client() as c:
        c.set(f"session:{sid}", session_json_serializer.dumps(old), ex=900)
        d = open_driver(server.url, ns, fallback=QuartSessionFallback())
        try:
            d.set_cookie(sid)
            assert d.request("GET", "/get/cart") == (200, {"value": ["tea", 2]})
            assert c.exists(f"session:{sid}") == 0
            stored = looker.get(sid)
            assert stored is not None and stored.identity == 12
            assert 890 <= stored.expires_at - time.time() <= 901
            assert d.cookie() == sid  # nobody is logged out by the move
            assert d.request("POST", "/set/b", {"value": 1}) == OK
            assert d.request("GET", "/get/b") == (200, {"value": 1})
            unreadable = str(uuid.uuid4())
            c.set(f"session:{unreadable}", b"\xc1 not json", ex=900)
            other = d.new_browser()
            other.set_cookie(unreadable)
            assert other.request("GET", "/all") == (200, {"data": {}})
        finally:
            d.close()


# -- a real server ---------------------------------------------------------------------------
def test_under_hypercorn_with_two_workers(server: ServerProcess, server_name: str, ns: str,
                                          looker: densekv.SessionStore, tmp_path: Path) -> None:
    if server_name != "valkey-9.1":
        pytest.skip("one real app-server run is enough: the store itself is tested on every server")
    port = free_port()
    env = {"DENSEKV_WEB_URL": server.url, "DENSEKV_WEB_NAMESPACE": ns, "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(ROOT)}
    log = tmp_path / "hypercorn.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hypercorn", "-w", "2", "-b", f"127.0.0.1:{port}",
             "tests.web.apps.quart_app:app_from_env()"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            wait_serving(f"http://127.0.0.1:{port}", proc, log)
            assert http.post("/set/a", json={"value": "x"}).json() == {"ok": True}
            first = http.cookies[COOKIE]
            pids = set()
            for _ in range(8):  # whichever worker answers, the session is in the store
                body = http.get("/whoami").json()
                assert body["data"] == {"a": "x"}
                pids.add(body["pid"])
            assert http.post("/login/21").status_code == 200
            assert http.cookies[COOKIE] != first
            assert len(looker.sessions_of(21)) == 1
            assert http.post("/logout").status_code == 200
            assert COOKIE not in http.cookies
            assert looker.sessions_of(21) == []
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


# -- docs/quart.md -----------------------------------------------------------------------------
DOC = (ROOT / "docs" / "quart.md").read_text() if (ROOT / "docs" / "quart.md").exists() else ""
DOC_BLOCKS = re.findall(r"```python\n(.*?)```", DOC, re.DOTALL)
DOC_FRAGMENTS = re.findall(r"```py\n(.*?)```", DOC, re.DOTALL)


def test_the_docs_page_has_runnable_blocks_and_its_fragments_compile() -> None:
    assert len(DOC_BLOCKS) >= 1 and len(DOC_FRAGMENTS) >= 2
    for fragment in DOC_FRAGMENTS:
        compile(fragment, "docs/quart.md", "exec")


@pytest.mark.parametrize("block", DOC_BLOCKS, ids=[f"block{i}" for i in range(len(DOC_BLOCKS))])
def test_a_docs_page_block_runs_as_written(block: str) -> None:
    done = subprocess.run([sys.executable, "-W", "error::ResourceWarning", "-c", block], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{block}\n--- stderr:\n{done.stderr[-3000:]}"
