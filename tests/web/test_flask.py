"""What only the Flask backend does, beyond the shared contract: cookie flags and the
permanent lifetime from app.config, Flask's own value tags (flash() tuples, bytes, UUID,
datetimes), no server call for a request that never uses the session, clear() and nested
changes, moving in from Flask-Session 0.8 (written by the real package), and the app under
a real gunicorn with two workers.
"""

from __future__ import annotations

import datetime as dt
import os
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
from flask import Flask, flash, get_flashed_messages, jsonify, session
from flask.typing import ResponseReturnValue
from flask_session import Session as FlaskSessionExtension  # type: ignore[import-untyped]

import densekv
from densekv.integrations.flask import DensekvSession, FlaskSessionFallback
from densekv.server.process import ServerProcess, free_port
from tests.web.apps.flask_app import FlaskDriver, make_app, make_store
from tests.web.driver import COOKIE

ROOT = Path(__file__).resolve().parents[2]
OK = (200, {"ok": True})


@pytest.fixture
def store(server: ServerProcess) -> Iterator[densekv.SessionStore]:
    s = make_store(server.url, f"flask{uuid.uuid4().hex[:12]}")
    yield s
    s.client.close()


def set_cookie_header(response: Any) -> str:
    (header,) = response.headers.getlist("Set-Cookie")
    return str(header)


# -- cookie flags and lifetime from app.config ----------------------------------------------
@pytest.mark.parametrize("config,present,absent", [
    ({}, ["HttpOnly", "Path=/"], ["Secure", "Domain=", "SameSite=", "Expires="]),
    ({"SESSION_COOKIE_SECURE": True, "SESSION_COOKIE_HTTPONLY": False,
      "SESSION_COOKIE_SAMESITE": "Strict", "SESSION_COOKIE_DOMAIN": "example.test",
      "SESSION_COOKIE_PATH": "/app"},
     ["Secure", "SameSite=Strict", "Domain=example.test", "Path=/app"], ["HttpOnly", "Expires="]),
], ids=["defaults", "configured"])
def test_cookie_flags_come_from_app_config(store: densekv.SessionStore, config: dict[str, Any],
                                           present: list[str], absent: list[str]) -> None:
    client = make_app(store, config=config).test_client()
    header = set_cookie_header(client.post("/set/a", json={"value": 1}))
    assert header.startswith(f"{COOKIE}=")
    for flag in present:
        assert flag in header
    for flag in absent:
        assert flag not in header


def test_permanent_session_lives_for_permanent_session_lifetime(store: densekv.SessionStore) -> None:
    app = make_app(store, config={"PERMANENT_SESSION_LIFETIME": dt.timedelta(days=2)})

    @app.post("/permanent")
    def permanent() -> ResponseReturnValue:
        session.permanent = True
        return jsonify(ok=True)

    client = app.test_client()
    now = time.time()
    header = set_cookie_header(client.post("/permanent"))
    expires = header.split("Expires=")[1].split(";")[0]
    cookie_end = dt.datetime.strptime(expires, "%a, %d %b %Y %H:%M:%S GMT").replace(tzinfo=dt.timezone.utc)
    assert abs(cookie_end.timestamp() - (now + 2 * 86400)) < 5
    found = store.get(client.get_cookie(COOKIE).value)  # type: ignore[union-attr]
    assert found is not None and found.data == {"_permanent": True}
    assert abs(found.absolute_at - (now + 2 * 86400)) < 5  # not the store's ttl (3600)


def test_a_session_made_permanent_later_is_kept_that_long(store: densekv.SessionStore) -> None:
    """"Remember me" after the session exists: the stored lifetime follows the cookie's
    (store.set_ttl), and back to the store's ttl when it stops being permanent."""
    app = make_app(store, config={"PERMANENT_SESSION_LIFETIME": dt.timedelta(days=30)})

    @app.post("/remember/<int:on>")
    def remember(on: int) -> ResponseReturnValue:
        session.permanent = bool(on)
        return jsonify(ok=True)

    client = app.test_client()
    client.post("/set/a", json={"value": 1})
    token = client.get_cookie(COOKIE).value  # type: ignore[union-attr]
    first = store.get(token)
    assert first is not None and first.absolute_at < time.time() + 3601  # the store's ttl
    now = time.time()
    client.post("/remember/1")
    assert client.get_cookie(COOKIE).value == token  # type: ignore[union-attr]
    kept = store.get(token)
    assert kept is not None and abs(kept.absolute_at - (now + 30 * 86400)) < 5
    assert kept.data == {"a": 1, "_permanent": True}
    client.post("/remember/0")
    back = store.get(token)
    assert back is not None and back.absolute_at < time.time() + 3601


# -- values, clear(), nested changes, no needless server calls -------------------------------
def test_flask_tagged_values_come_back_as_themselves(store: densekv.SessionStore) -> None:
    app = make_app(store)
    when = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.timezone.utc)
    ident = uuid.UUID(int=12345)

    @app.post("/fill")
    def fill() -> ResponseReturnValue:
        flash("saved", "info")
        session.update(pair=("a", 1), raw=b"\x00\xff", when=when, id=ident,
                       tricky={" t": [1]})
        return jsonify(ok=True)

    @app.get("/check")
    def check() -> ResponseReturnValue:
        assert session["pair"] == ("a", 1) and session["raw"] == b"\x00\xff"
        assert session["when"] == when and session["id"] == ident
        assert session["tricky"] == {" t": [1]}
        return jsonify(flashes=get_flashed_messages(with_categories=True))

    client = app.test_client()
    assert client.post("/fill").status_code == 200
    assert client.get("/check").get_json() == {"flashes": [["info", "saved"]]}
    assert client.get("/check").get_json() == {"flashes": []}  # popped once, and saved so


def test_an_int_densekv_cannot_hold_is_a_500_with_nothing_written(store: densekv.SessionStore) -> None:
    web = FlaskDriver(make_app(store))
    assert web.request("POST", "/set/a", {"value": 1}) == OK
    assert web.request("POST", "/set/n", {"value": 2**70})[0] == 500
    assert web.request("GET", "/all") == (200, {"data": {"a": 1}})


def test_nested_change_marked_modified_is_saved(store: densekv.SessionStore) -> None:
    app = make_app(store)

    @app.post("/append/<int:n>")
    def append(n: int) -> ResponseReturnValue:
        session["cart"].append(n)
        session.modified = True
        return jsonify(ok=True)

    web = FlaskDriver(app)
    assert web.request("POST", "/set/cart", {"value": [1]}) == OK
    assert web.request("POST", "/append/2") == OK
    assert web.request("GET", "/get/cart") == (200, {"value": [1, 2]})


@pytest.mark.parametrize("identity", [None, 4])
def test_clear_destroys_the_session_and_the_cookie(store: densekv.SessionStore,
                                                   identity: int | None) -> None:
    app = make_app(store)

    @app.post("/clear")
    def clear() -> ResponseReturnValue:
        session.clear()
        return jsonify(ok=True)

    web = FlaskDriver(app)
    if identity is not None:
        assert web.request("POST", f"/login/{identity}") == OK
    assert web.request("POST", "/set/a", {"value": 1}) == OK
    token = web.cookie()
    assert token is not None
    assert web.request("POST", "/clear") == OK
    assert web.cookie() is None
    assert store.get(token) is None
    if identity is not None:
        assert store.sessions_of(identity) == []


def test_deleting_the_last_key_of_a_logged_in_session_keeps_it(store: densekv.SessionStore) -> None:
    web = FlaskDriver(make_app(store))
    assert web.request("POST", "/login/3") == OK
    assert web.request("POST", "/set/a", {"value": 1}) == OK
    assert web.request("POST", "/del/a") == OK
    token = web.cookie()
    assert token is not None
    found = store.get(token)
    assert found is not None and found.identity == 3


def test_a_request_that_never_uses_the_session_makes_no_server_call(
        fresh_server: Callable[..., ServerProcess], server_name: str) -> None:
    srv = fresh_server(server_name)
    s = make_store(srv.url, "lazy")
    web = FlaskDriver(make_app(s), owned=s.client)
    try:
        assert web.request("POST", "/set/a", {"value": 1}) == OK
        with srv.client() as c:
            before = c.info("commandstats")
            assert web.request("GET", "/noop") == OK
            after = c.info("commandstats")
        assert {k: v["calls"] for k, v in after.items() if k != "cmdstat_info"} == \
            {k: v["calls"] for k, v in before.items() if k != "cmdstat_info"}
        srv.kill()
        assert web.request("GET", "/noop") == OK  # the session is not needed: no outage
        assert web.request("GET", "/get/a")[0] == 500
    finally:
        web.close()


def _ior(s: DensekvSession) -> None:
    s |= {"c": 3}


MUTATIONS: dict[str, tuple[Callable[[DensekvSession], Any], dict[str, Any], list[str]]] = {
    "setitem": (lambda s: s.__setitem__("c", 3), {"c": 3}, []),
    "same value": (lambda s: s.__setitem__("a", 1), {"a": 1}, []),
    "update": (lambda s: s.update({"a": 5}, c=3), {"a": 5, "c": 3}, []),
    "ior": (_ior, {"c": 3}, []),
    "setdefault new": (lambda s: s.setdefault("c", 3), {"c": 3}, []),
    "delitem": (lambda s: s.__delitem__("a"), {}, ["a"]),
    "pop": (lambda s: s.pop("b"), {}, ["b"]),
    "popitem": (lambda s: s.popitem(), {}, ["b"]),
    "clear": (lambda s: s.clear(), {}, ["a", "b"]),
    "nested": (lambda s: s["b"].append(9), {"b": [1, 9]}, []),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_session_tracks_changes_made_with_any_dict_method(name: str) -> None:
    stored = {"a": 1, "b": [1]}
    s = DensekvSession({"a": 1, "b": [1]}, token="t" * 32, stored=stored)
    change, changed, removed = MUTATIONS[name]
    change(s)
    if name == "nested":  # Flask's rule: a change inside a value is flagged by hand
        assert not s.modified
        s.modified = True
    assert s.modified
    assert s.changes() == (changed, removed)


@pytest.mark.parametrize("read", [dict, len, list, lambda s: s.get("a"), lambda s: "a" in s,
                                  lambda s: s.setdefault("a", 0), lambda s: s.pop("zz", None)])
def test_reading_a_session_changes_nothing(read: Callable[[DensekvSession], Any]) -> None:
    s = DensekvSession({"a": 1}, token="t" * 32, stored={"a": 1})
    read(s)
    assert not s.modified


# -- moving in from Flask-Session ------------------------------------------------------------
def flask_session_app(client: redis.Redis) -> Flask:
    """The app before the move: Flask-Session 0.8 with its Redis store, msgpack values."""
    app = Flask("before_the_move")
    app.config.update(SESSION_TYPE="redis", SESSION_REDIS=client,
                      PERMANENT_SESSION_LIFETIME=dt.timedelta(hours=5))
    FlaskSessionExtension(app)

    @app.post("/set/<key>")
    def set_(key: str) -> ResponseReturnValue:
        from flask import request

        session[key] = (request.get_json() or {}).get("value")
        return jsonify(ok=True)

    return app


def test_flask_session_sessions_move_in_under_the_same_cookie(server: ServerProcess,
                                                              store: densekv.SessionStore) -> None:
    with server.client() as client:
        old = flask_session_app(client).test_client()
        old.post("/set/user", json={"value": "ann"})
        old.post("/set/cart", json={"value": [{"sku": "A-1", "qty": 2}]})
        sid = old.get_cookie(COOKIE).value  # type: ignore[union-attr]
        assert client.exists(f"session:{sid}")

        web = FlaskDriver(make_app(store, fallback=FlaskSessionFallback(client)))
        web.set_cookie(sid)
        now = time.time()
        expected = {"user": "ann", "cart": [{"sku": "A-1", "qty": 2}], "_permanent": True}
        assert web.request("GET", "/all") == (200, {"data": expected})
        assert not client.exists(f"session:{sid}")
        found = store.get(sid)
        assert found is not None and found.identity is None and found.data == expected
        assert abs(found.absolute_at - (now + 5 * 3600)) < 5  # the time it had left

        assert web.request("POST", "/set/page", {"value": 2}) == OK
        assert web.cookie() == sid  # same cookie: nobody is logged out by the move
        assert store.get(sid).data == {**expected, "page": 2}  # type: ignore[union-attr]
        assert web.request("POST", "/login/11") == OK
        assert web.cookie() != sid and store.get(sid) is None


@pytest.mark.parametrize("stored", [None, b"\xc1 not msgpack nor json"], ids=["absent", "unreadable"])
def test_flask_session_fallback_without_a_readable_session(server: ServerProcess,
                                                           store: densekv.SessionStore,
                                                           stored: bytes | None) -> None:
    sid = secrets.token_urlsafe(32)
    with server.client() as client:
        if stored is not None:
            client.set(f"session:{sid}", stored, ex=60)
        web = FlaskDriver(make_app(store, fallback=FlaskSessionFallback(client)))
        web.set_cookie(sid)
        assert web.request("GET", "/all") == (200, {"data": {}})
        assert store.get(sid) is None
        assert client.get(f"session:{sid}") == stored  # left as it was


# -- a real server ------------------------------------------------------------------------------
def test_under_gunicorn_with_two_workers(server: ServerProcess, tmp_path: Path) -> None:
    if server.binary.name != "valkey-9.1":
        pytest.skip("one real app-server run is enough: the store itself is tested on every server")
    port = free_port()
    env = {**os.environ, "DENSEKV_WEB_URL": server.url,
           "DENSEKV_WEB_NAMESPACE": f"gunicorn{uuid.uuid4().hex[:8]}"}
    log = tmp_path / "gunicorn.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-w", "2", "-b", f"127.0.0.1:{port}",
             "tests.web.apps.flask_app:wsgi_app_from_env()"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            deadline = time.monotonic() + 30
            while True:
                assert proc.poll() is None, log.read_text()[-2000:]
                try:
                    if http.get("/noop").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, log.read_text()[-2000:]
                time.sleep(0.1)
            assert http.post("/set/a", json={"value": "x"}).json() == {"ok": True}
            first = http.cookies[COOKIE]
            for _ in range(4):  # whichever worker answers, the session is in the store
                assert http.get("/get/a").json() == {"value": "x"}
            assert http.post("/login/21").status_code == 200
            assert http.cookies[COOKIE] != first
            assert http.get("/get/a").json() == {"value": "x"}
            assert http.post("/logout").status_code == 200
            assert COOKIE not in http.cookies
            assert http.get("/get/a").json() == {"value": None}
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
