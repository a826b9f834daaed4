"""What only the Flask backend does, beyond the shared contract: cookie flags and the
lifetime from app.config (PERMANENT_SESSION_LIFETIME bounds the stored session, permanent or
not, as it bounds Flask's signed cookie), Flask's own value tags (flash() tuples, bytes,
UUID, datetimes), no server call for a request that never uses the session but a load on
any use of the session object (session_transaction()), login as another user dropping the
previous user's data, Flask-Login's login_user / logout_user / remember cookie as densekv's
login and logout, a session that cannot be decoded, clear() and nested changes, moving in
from Flask-Session 0.8 (written by the real package), and the app under a real gunicorn
with two workers. Flask's and Flask-Login's own suites run in tests/peers/test_flask_suites.py.
"""

from __future__ import annotations

import datetime as dt
import os
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
from flask import Flask, flash, get_flashed_messages, jsonify, session
from flask.typing import ResponseReturnValue
from flask_session import Session as FlaskSessionExtension

import densekv
from densekv.dictionaries import dictionary_key
from densekv.integrations.flask import DensekvSession, FlaskSessionFallback
from densekv.tools.lab.session_profiles import session as profile_session
from densekv.tools.lab.session_profiles import sessions as profile_sessions
from densekv.tools.server.process import ServerProcess, free_port
from tests.web.app_server import wait_serving
from tests.web.apps.flask_app import FlaskDriver, make_app, make_flask_login_app, make_store
from tests.web.driver import COOKIE, UNREACHED_URLS, WRONG_URLS

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


@pytest.mark.parametrize("backend", ["flask", "densekv"])
def test_a_lifetime_of_zero_keeps_no_session(store: densekv.SessionStore, backend: str) -> None:
    """PERMANENT_SESSION_LIFETIME = 0: Flask's own cookie session (the control) refuses its
    cookie once a second has passed; densekv stores nothing (the rule of every shell,
    decide.outlives_no_request) and ends a session the write changes. Before, densekv kept
    the session for the store's ttl."""
    from flask.sessions import SecureCookieSessionInterface

    own = SecureCookieSessionInterface() if backend == "flask" else None
    app = make_app(store, config={"PERMANENT_SESSION_LIFETIME": dt.timedelta(0), "SECRET_KEY": "k"},
                   interface=own)
    client = app.test_client()
    client.post("/set/a", json={"value": 1})
    time.sleep(1.1)
    assert client.get("/get/a").get_json() == {"value": None}
    if backend == "densekv":
        assert store.count() == 0
        app.permanent_session_lifetime = dt.timedelta(hours=1)  # a session stored before ...
        client.post("/set/a", json={"value": 1})
        token = client.get_cookie(COOKIE).value  # type: ignore[union-attr]
        assert store.get(token) is not None
        app.permanent_session_lifetime = dt.timedelta(0)  # ... ends at its next write
        client.post("/set/b", json={"value": 2})
        assert store.get(token) is None and client.get_cookie(COOKIE) is None


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


def test_a_value_nested_past_the_limit_is_a_500_with_nothing_written(store: densekv.SessionStore) -> None:
    from densekv.sessions.payload import MAX_NESTING

    deep: Any = 1
    for _ in range(MAX_NESTING + 5):
        deep = [deep]
    app = make_app(store)

    @app.post("/deep")
    def set_deep() -> ResponseReturnValue:
        session["deep"] = deep
        return jsonify(ok=True)

    web = FlaskDriver(app)
    assert web.request("POST", "/set/a", {"value": 1}) == OK
    assert web.request("POST", "/deep")[0] == 500
    assert web.request("GET", "/all") == (200, {"data": {"a": 1}})  # and it still loads
    fresh = FlaskDriver(app)
    assert fresh.request("POST", "/deep")[0] == 500
    assert fresh.cookie() is None and store.count() == 1


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


def _app(url: str, namespace: str, flask_login: bool) -> Flask:
    """The contract's app configured from a URL as docs/flask.md says (1 s timeouts), with
    or without Flask-Login (whose after-request hook reads the session on every request)."""
    from densekv.integrations.flask import SessionInterface

    interface = SessionInterface.from_url(
        url, namespace=namespace,
        client_options={"socket_connect_timeout": 1.0, "socket_timeout": 1.0})
    return (make_flask_login_app(None, interface=interface) if flask_login
            else make_app(None, interface=interface))


@pytest.mark.parametrize("flask_login", [False, True], ids=["plain", "flask-login"])
def test_a_route_without_the_session_is_served_while_the_server_is_stopped(
        fresh_server: Callable[..., ServerProcess], server_name: str, flask_login: bool,
        caplog: pytest.LogCaptureFixture) -> None:
    srv = fresh_server(server_name)
    app = _app(srv.url, f"outage{uuid.uuid4().hex[:8]}", flask_login)
    web = FlaskDriver(app)
    assert web.request("POST", "/set/a", {"value": 1}) == OK
    assert web.cookie() is not None
    srv.stop()
    assert web.request("GET", "/noop") == OK  # with the cookie: nothing to read for the view
    assert web.request("GET", "/get/a")[0] == 500  # the view uses it: Flask's 500
    assert web.request("POST", "/set/b", {"value": 2})[0] == 500
    assert web.new_browser().request("GET", "/noop") == OK  # no cookie
    if flask_login:  # its hook read the session after the view: said once per request
        assert "could not be read after the view" in caplog.text


@pytest.mark.parametrize("flask_login", [False, True], ids=["plain", "flask-login"])
@pytest.mark.parametrize("wrong", ["password", "port"])
def test_a_route_without_the_session_is_served_when_the_url_is_wrong(
        fresh_server: Callable[..., ServerProcess], server_name: str, flask_login: bool,
        wrong: str) -> None:
    """A URL that parses but does not give a working client (refused credentials, nothing
    listening) cannot fail at setup (constructors do no I/O): requests that use the session
    fail, the others are served, with or without a cookie."""
    srv = fresh_server(server_name, options={"requirepass": "right"})
    url = (f"redis://:wrong@127.0.0.1:{srv.port}/0" if wrong == "password"
           else f"redis://127.0.0.1:{free_port()}/0")
    web = FlaskDriver(_app(url, f"wrong{uuid.uuid4().hex[:8]}", flask_login))
    assert web.request("GET", "/noop") == OK
    web.set_cookie(secrets.token_urlsafe(24))
    assert web.request("GET", "/noop") == OK
    assert web.request("GET", "/get/a")[0] == 500


def test_flask_login_costs_one_read_on_a_route_without_the_session(
        fresh_server: Callable[..., ServerProcess], server_name: str) -> None:
    """What docs/flask.md says Flask-Login costs: its after-request hook reads the session
    of a request with a cookie (the commands of one store.get, one round trip, `Vary:
    Cookie`), writes nothing; without a cookie, nothing."""
    srv = fresh_server(server_name)
    app = _app(srv.url, f"cost{uuid.uuid4().hex[:8]}", True)
    web = FlaskDriver(app)
    assert web.request("POST", "/fl/login/5") == OK
    with srv.client() as c:
        def spent(do: Callable[[], Any]) -> dict[str, int]:
            def calls() -> dict[str, int]:
                stats = c.info("commandstats")
                return {k: v["calls"] for k, v in stats.items() if k != "cmdstat_info"}

            before = calls()
            do()
            after = calls()
            return {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}

        responses: list[Any] = []
        by_request = spent(lambda: responses.append(web.client.get("/noop")))
        assert responses[0].status_code == 200 and responses[0].headers.get("Vary") == "Cookie"
        assert "Set-Cookie" not in responses[0].headers
        token = web.cookie()
        assert by_request == spent(lambda: app.session_interface.store.get(token))  # type: ignore[attr-defined]
        assert spent(lambda: web.new_browser().request("GET", "/noop")) == {}


@pytest.mark.parametrize("url", WRONG_URLS)
def test_a_wrong_url_fails_at_setup(url: str) -> None:
    from densekv.integrations.flask import SessionInterface

    with pytest.raises(densekv.InvalidArgument, match="SessionInterface.from_url") as raised:
        SessionInterface.from_url(url)
    assert "s3cret" not in str(raised.value)


@pytest.mark.parametrize("url", UNREACHED_URLS)
def test_a_url_that_names_no_server_is_set_up_without_connecting(url: str) -> None:
    from densekv.integrations.flask import SessionInterface

    app = make_app(None, interface=SessionInterface.from_url(
        url, client_options={"socket_connect_timeout": 0.5}))
    assert FlaskDriver(app).request("GET", "/noop") == OK


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


class Clock:
    """A clock the test moves by hand (whole seconds, from the real time)."""

    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now


# -- any use of the session object loads it: session_transaction() ---------------------------
USES: dict[str, Callable[[DensekvSession], Any]] = {
    "getitem": lambda s: s["a"], "get": lambda s: s.get("a"), "contains": lambda s: "a" in s,
    "iter": list, "len": len, "bool": bool, "keys": lambda s: list(s.keys()),
    "values": lambda s: list(s.values()), "items": lambda s: list(s.items()), "dict": dict,
    "unpack": lambda s: {**s}, "copy": lambda s: s.copy(), "eq": lambda s: s == {"a": 1},
    "or": lambda s: s | {}, "repr": repr, "permanent": lambda s: s.permanent,
    "setitem": lambda s: s.__setitem__("b", 2), "delitem": lambda s: s.__delitem__("a"),
    "pop": lambda s: s.pop("a"), "popitem": lambda s: s.popitem(),
    "setdefault": lambda s: s.setdefault("b", 2), "update": lambda s: s.update(b=2),
    "clear": lambda s: s.clear(), "login": lambda s: s.login(3), "regenerate": lambda s: s.regenerate(),
}


@pytest.mark.parametrize("use", list(USES))
def test_any_use_of_the_session_object_reads_it_first(use: str) -> None:
    """Flask's session_transaction() hands the test the session object itself (not
    `flask.session`, so Flask never marks it accessed): every dict method must read it."""
    loads: list[int] = []

    def load(s: DensekvSession) -> None:
        loads.append(1)
        s.loaded({"a": 1}, "t" * 32, None, {"a": 1})

    s = DensekvSession(loader=load)
    assert not loads
    USES[use](s)
    assert loads == [1] and s.loader is None and s.token == "t" * 32
    USES["len"](s)
    assert loads == [1]  # read once


def test_session_transaction_sees_and_changes_an_existing_session(store: densekv.SessionStore) -> None:
    app = make_app(store)
    client = app.test_client()
    assert client.post("/set/a", json={"value": 1}).status_code == 200
    token = client.get_cookie(COOKIE).value  # type: ignore[union-attr]
    with client.session_transaction() as sess:
        assert len(sess) == 1 and sess["a"] == 1
        sess["b"] = [2]
    assert client.get("/all").get_json() == {"data": {"a": 1, "b": [2]}}
    with client.session_transaction() as sess:
        del sess["a"]
    assert client.get("/all").get_json() == {"data": {"b": [2]}}
    assert client.get_cookie(COOKIE).value == token  # type: ignore[union-attr]
    assert store.get(token).data == {"b": [2]}  # type: ignore[union-attr]
    with client.session_transaction() as sess:  # looked at only: nothing written
        assert dict(sess) == {"b": [2]}
    assert client.get_cookie(COOKIE).value == token  # type: ignore[union-attr]


# -- lifetime: PERMANENT_SESSION_LIFETIME bounds the stored session -------------------------
def lifetime_app(server: ServerProcess, *, lifetime: int, refresh: bool = True,
                 ttl: int = 3600) -> tuple[Flask, densekv.SessionStore, Clock]:
    clock = Clock()
    store = make_store(server.url, f"life{uuid.uuid4().hex[:12]}", ttl=ttl, clock=clock)
    app = make_app(store, config={"PERMANENT_SESSION_LIFETIME": dt.timedelta(seconds=lifetime),
                                  "SESSION_REFRESH_EACH_REQUEST": refresh})

    @app.post("/permanent/<int:on>")
    def permanent(on: int) -> ResponseReturnValue:
        session.permanent = bool(on)
        return jsonify(ok=True)

    return app, store, clock


@pytest.mark.parametrize("permanent", [False, True], ids=["browser-session", "permanent"])
def test_a_cookie_replayed_after_the_lifetime_finds_no_session(server: ServerProcess,
                                                               permanent: bool) -> None:
    """Flask refuses its own cookie PERMANENT_SESSION_LIFETIME after signing it, permanent
    or not: the stored session ends then too (not after the store's ttl, 3600 here)."""
    app, store, clock = lifetime_app(server, lifetime=600)
    try:
        client = app.test_client()
        client.post("/set/a", json={"value": 1})
        client.post(f"/permanent/{int(permanent)}")
        token = client.get_cookie(COOKIE).value  # type: ignore[union-attr]
        found = store.get(token)
        assert found is not None and found.absolute_at == clock.now + 600
        clock.now += 599
        assert store.get(token) is not None  # (a request would refresh a permanent one)
        clock.now += 2
        assert client.get("/get/a").get_json() == {"value": None}
        assert store.get(token) is None
    finally:
        store.client.close()


def test_every_write_restarts_the_lifetime_a_read_does_not(server: ServerProcess) -> None:
    app, store, clock = lifetime_app(server, lifetime=600)
    try:
        client = app.test_client()
        client.post("/set/a", json={"value": 1})
        token = client.get_cookie(COOKIE).value  # type: ignore[union-attr]
        start = clock.now
        clock.now += 400
        assert client.get("/get/a").get_json() == {"value": 1}
        assert store.get(token).absolute_at == start + 600  # type: ignore[union-attr]
        client.post("/set/b", json={"value": 2})  # Flask would sign its cookie afresh
        assert store.get(token).absolute_at == clock.now + 600  # type: ignore[union-attr]
    finally:
        store.client.close()


def test_the_store_ttl_still_bounds_a_session_that_is_not_permanent(server: ServerProcess) -> None:
    """PERMANENT_SESSION_LIFETIME longer than the store's ttl: a session that is not
    permanent lives the store's ttl from its creation (a hard limit writes do not move),
    which ends it before Flask would."""
    app, store, clock = lifetime_app(server, lifetime=7200, ttl=900)
    try:
        client = app.test_client()
        client.post("/set/a", json={"value": 1})
        token = client.get_cookie(COOKIE).value  # type: ignore[union-attr]
        start = clock.now
        assert store.get(token).absolute_at == start + 900  # type: ignore[union-attr]
        clock.now += 100
        client.post("/set/b", json={"value": 2})
        assert store.get(token).absolute_at == start + 900  # type: ignore[union-attr]
        client.post("/permanent/1")  # remember me: Flask's lifetime, longer than the store's
        assert store.get(token).absolute_at == clock.now + 7200  # type: ignore[union-attr]
    finally:
        store.client.close()


@pytest.mark.parametrize("refresh", [True, False])
def test_a_permanent_session_read_is_refreshed_as_flask_refreshes_its_cookie(
        server: ServerProcess, refresh: bool) -> None:
    """SESSION_REFRESH_EACH_REQUEST (Flask's default): a permanent session's cookie is set
    again on every request that uses it; the stored lifetime restarts too, once a quarter
    of it has passed (so not every read writes)."""
    app, store, clock = lifetime_app(server, lifetime=800, refresh=refresh)
    try:
        client = app.test_client()
        client.post("/set/a", json={"value": 1})
        client.post("/permanent/1")
        token = client.get_cookie(COOKIE).value  # type: ignore[union-attr]
        start = clock.now
        clock.now += 100  # an eighth: not yet
        response = client.get("/get/a")
        assert ("Set-Cookie" in response.headers) is refresh
        assert store.get(token).absolute_at == start + 800  # type: ignore[union-attr]
        clock.now += 150  # past a quarter
        client.get("/get/a")
        expected = clock.now + 800 if refresh else start + 800
        assert store.get(token).absolute_at == expected  # type: ignore[union-attr]
    finally:
        store.client.close()


# -- identity: login as another user, Flask-Login ---------------------------------------------
def test_login_as_another_user_drops_the_previous_users_data(store: densekv.SessionStore) -> None:
    app = make_app(store)

    @app.post("/switch/<int:uid>")
    def switch(uid: int) -> ResponseReturnValue:
        current = session._get_current_object()  # type: ignore[attr-defined]
        current["before"] = 1  # set before login(): the previous user's, dropped
        current.login(uid)
        current["after"] = 2  # set after login(): the new user's, kept
        return jsonify(ok=True)

    web = FlaskDriver(app)
    assert web.request("POST", "/login/50") == OK
    assert web.request("POST", "/set/a", {"value": "fifty's"}) == OK
    old = web.cookie()
    assert web.request("POST", "/login/50") == OK  # the same user: data kept, token rotated
    assert web.request("GET", "/get/a") == (200, {"value": "fifty's"}) and web.cookie() != old
    assert web.request("POST", "/switch/7") == OK
    assert web.request("GET", "/all") == (200, {"data": {"after": 2}})
    assert store.sessions_of(50) == []
    (mine,) = store.sessions_of(7)
    assert store.get(web.cookie()).id == mine.id  # type: ignore[arg-type,union-attr]


def test_an_anonymous_session_keeps_its_data_on_login(store: densekv.SessionStore) -> None:
    web = FlaskDriver(make_app(store))
    assert web.request("POST", "/set/cart", {"value": ["A-1"]}) == OK
    anonymous = web.cookie()
    assert web.request("POST", "/login/8") == OK
    assert web.request("GET", "/get/cart") == (200, {"value": ["A-1"]})
    assert web.cookie() != anonymous and store.get(anonymous) is None  # type: ignore[arg-type]


def test_flask_login_login_and_logout_are_densekvs(store: densekv.SessionStore) -> None:
    web = FlaskDriver(make_flask_login_app(store))
    assert web.request("POST", "/set/cart", {"value": ["A-1"]}) == OK
    anonymous = web.cookie()
    assert web.request("POST", "/fl/login/5") == OK
    logged_in = web.cookie()
    assert logged_in != anonymous and store.get(anonymous) is None  # type: ignore[arg-type]
    found = store.get(logged_in)  # type: ignore[arg-type]
    assert found is not None and found.identity == 5 and (found.data or {})["cart"] == ["A-1"]
    assert [s.id for s in store.sessions_of(5)] == [found.id]
    assert web.request("GET", "/fl/whoami") == (200, {"user": "5"})

    assert web.request("POST", "/fl/logout") == OK
    assert store.get(logged_in) is None  # type: ignore[arg-type]
    assert store.sessions_of(5) == []
    assert web.request("GET", "/fl/whoami") == (200, {"user": None})
    # what was not Flask-Login's stays, as with Flask's own session, in a new anonymous one
    assert web.request("GET", "/get/cart") == (200, {"value": ["A-1"]})
    after = store.get(web.cookie())  # type: ignore[arg-type]
    assert after is not None and after.identity is None and "_user_id" not in (after.data or {})


def test_flask_login_as_another_user_drops_the_previous_users_data(store: densekv.SessionStore) -> None:
    web = FlaskDriver(make_flask_login_app(store))
    assert web.request("POST", "/fl/login/5") == OK
    assert web.request("POST", "/set/cart", {"value": ["five's"]}) == OK
    assert web.request("POST", "/fl/login/6") == OK
    assert web.request("GET", "/fl/whoami") == (200, {"user": "6"})
    assert web.request("GET", "/get/cart") == (200, {"value": None})
    assert store.sessions_of(5) == [] and len(store.sessions_of(6)) == 1


def test_flask_login_remember_cookie_and_logout_everywhere(store: densekv.SessionStore) -> None:
    app = make_flask_login_app(store)

    @app.post("/fl/logout-everywhere")
    def fl_logout_everywhere() -> ResponseReturnValue:
        from flask_login import logout_user  # type: ignore[import-untyped]

        current = session._get_current_object()  # type: ignore[attr-defined]
        current.logout_everywhere()
        logout_user()  # and this browser's remember cookie
        return jsonify(ok=True)

    laptop, phone = FlaskDriver(app), FlaskDriver(app)
    assert laptop.request("POST", "/fl/login/5?remember=1") == OK
    assert phone.request("POST", "/fl/login/5") == OK
    assert laptop.client.get_cookie("remember_token") is not None
    laptop.set_cookie(None)  # the browser closed: the session cookie is gone ...
    assert laptop.request("GET", "/fl/whoami") == (200, {"user": "5"})  # ... the remember one not
    assert laptop.cookie() is not None and len(store.sessions_of(5)) == 3  # listed too

    assert laptop.request("POST", "/fl/logout-everywhere") == OK
    assert store.sessions_of(5) == []
    assert phone.request("GET", "/fl/whoami") == (200, {"user": None})
    assert laptop.request("GET", "/fl/whoami") == (200, {"user": None})
    assert laptop.client.get_cookie("remember_token") is None


@pytest.mark.parametrize("first,then", [("app", "flask-login"), ("flask-login", "app")])
def test_an_apps_identity_and_flask_logins_user_id_are_one_user(
        store: densekv.SessionStore, first: str, then: str) -> None:
    """session.login(42) and Flask-Login's `_user_id = "42"`: the same user, so a login
    through the other keeps the session's data (only the token rotates)."""
    web = FlaskDriver(make_flask_login_app(store))
    path = {"app": "/login/42", "flask-login": "/fl/login/42"}
    assert web.request("POST", path[first]) == OK
    assert web.request("POST", "/set/cart", {"value": ["A-1"]}) == OK
    before = web.cookie()
    assert web.request("POST", path[then]) == OK
    assert web.request("GET", "/get/cart") == (200, {"value": ["A-1"]})
    assert web.request("GET", "/fl/whoami") == (200, {"user": "42"})
    (listed,) = store.sessions_of(42)
    assert web.cookie() != before and store.get(web.cookie()).id == listed.id  # type: ignore[arg-type,union-attr]
    assert store.sessions_of("42") == []
    assert web.request("POST", "/fl/login/042") == OK  # "042" is another user's id
    assert web.request("GET", "/get/cart") == (200, {"value": None})
    assert store.sessions_of(42) == [] and len(store.sessions_of("042")) == 1


@pytest.mark.parametrize("older", ["str", "int"])
def test_logout_everywhere_ends_sessions_indexed_as_the_str_form_too(store: densekv.SessionStore,
                                                                    older: str) -> None:
    """Before identity_of, Flask-Login's `_user_id = "42"` was indexed as "42": a user's
    sessions from before an upgrade are listed under "42", later ones under 42. Log out
    everywhere, from either, ends both."""
    app = make_flask_login_app(store)

    @app.post("/fl/logout-everywhere")
    def fl_logout_everywhere() -> ResponseReturnValue:
        session._get_current_object().logout_everywhere()  # type: ignore[attr-defined]
        return jsonify(ok=True)

    old = store.create("42", {"_user_id": "42"})  # as the shell stored it before
    web = FlaskDriver(app)
    if older == "str":
        web.set_cookie(old)
        other = FlaskDriver(app)
        assert other.request("POST", "/fl/login/42") == OK
    else:
        assert web.request("POST", "/fl/login/42") == OK
    assert len(store.sessions_of("42")) == 1 and len(store.sessions_of(42)) == 1
    assert web.request("POST", "/fl/logout-everywhere") == OK
    assert store.sessions_of("42") == [] and store.sessions_of(42) == []
    assert store.get(old) is None


def test_flask_login_session_set_in_session_transaction_is_listed(store: densekv.SessionStore) -> None:
    """Flask-Login's own tests log a user in by writing `_user_id` in a transaction."""
    client = make_flask_login_app(store).test_client()
    with client.session_transaction() as sess:
        sess["_user_id"] = "9"
    assert client.get("/fl/whoami").get_json() == {"user": "9"}
    assert len(store.sessions_of(9)) == 1


@pytest.mark.parametrize("user_id", [1.5, "x" * 300], ids=["float", "too-long"])
def test_a_user_id_densekv_cannot_index_leaves_the_session_anonymous(
        store: densekv.SessionStore, user_id: Any, caplog: pytest.LogCaptureFixture) -> None:
    client = make_flask_login_app(store).test_client()
    with client.session_transaction() as sess:
        sess["_user_id"] = user_id
    found = store.get(client.get_cookie(COOKIE).value)  # type: ignore[union-attr]
    assert found is not None and found.identity is None
    assert (found.data or {})["_user_id"] == user_id
    assert "not an identity densekv can index" in caplog.text


def test_identity_key_none_follows_only_session_login(store: densekv.SessionStore) -> None:
    from densekv.integrations.flask import SessionInterface

    app = make_app(None, interface=SessionInterface(store, identity_key=None))
    web = FlaskDriver(app)
    assert web.request("POST", "/set/_user_id", {"value": "5"}) == OK
    assert store.sessions_of(5) == [] and store.sessions_of("5") == []
    found = store.get(web.cookie())  # type: ignore[arg-type]
    assert found is not None and found.identity is None


# -- a session that cannot be decoded -----------------------------------------------------------
@pytest.mark.parametrize("then", ["read", "write", "login", "logout"])
def test_an_undecodable_session_is_a_new_one_and_is_replaced(server: ServerProcess, then: str) -> None:
    namespace = f"undec{uuid.uuid4().hex[:12]}"
    writer = make_store(server.url, namespace, layout="dense")
    writer.train_dictionary(d for _, d in profile_sessions("P1", 300))
    token = writer.create(50, profile_session("P1", 7)[1])
    writer.client.delete(dictionary_key(namespace))  # its dictionary is lost
    reader = make_store(server.url, namespace)
    web = FlaskDriver(make_app(reader), owned=reader.client)
    try:
        web.set_cookie(token)
        if then == "read":
            assert web.request("GET", "/all") == (200, {"data": {}})
            assert web.cookie() == token  # nothing written: nothing changes
            return
        path, body = {"write": ("/set/a", {"value": 1}), "login": ("/login/7", None),
                      "logout": ("/logout", None)}[then]
        assert web.request("POST", path, body) == OK
        assert writer.get(token) is None  # the old record is gone (the writer could read it)
        assert writer.sessions_of(50) == []
        if then == "logout":
            assert web.cookie() is None
        else:
            assert web.cookie() not in (None, token)
            assert reader.get(web.cookie()) is not None  # type: ignore[arg-type]
    finally:
        web.close()
        writer.client.close()


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


def test_a_flask_login_user_moved_in_from_flask_session_is_listed(server: ServerProcess,
                                                                   store: densekv.SessionStore) -> None:
    with server.client() as client:
        old = flask_session_app(client).test_client()
        old.post("/set/_user_id", json={"value": "12"})
        sid = old.get_cookie(COOKIE).value  # type: ignore[union-attr]
        web = FlaskDriver(make_flask_login_app(store, fallback=FlaskSessionFallback(client)))
        web.set_cookie(sid)
        assert web.request("GET", "/fl/whoami") == (200, {"user": "12"})
        assert web.cookie() == sid and len(store.sessions_of(12)) == 1
        assert web.request("POST", "/fl/logout") == OK  # and logging out ends it
        assert store.sessions_of(12) == [] and store.get(sid) is None


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
def test_flask_session_fallback_reads_what_msgspec_wrote_without_msgspec(
        server: ServerProcess, fmt: str) -> None:
    """Flask-Session 0.8 encodes with msgspec; the fallback reads it with msgpack and json
    (no msgspec in the flask extra), giving back what msgspec's own decoder gives."""
    import msgspec

    value = {"user": "ann", "n": 2**63, "f": 1.5, "flags": [True, None], "b": b"\x00\xff",
             "at": dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc),
             "cart": ({"sku": "A-1"},), "id": uuid.UUID(int=7)}
    if fmt == "json":
        del value["b"]  # msgspec's JSON has no bytes that come back as bytes
    encode, decode = {"msgpack": (msgspec.msgpack.encode, msgspec.msgpack.decode),
                      "json": (msgspec.json.encode, msgspec.json.decode)}[fmt]
    sid = secrets.token_urlsafe(32)
    with server.client() as client:
        client.set(f"session:{sid}", encode(value), ex=600)
        read = FlaskSessionFallback(client).read(sid)
    assert read is not None and read[0] == decode(encode(value))
    assert 590 <= (read[1] or 0) <= 600


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
@pytest.mark.parametrize("preload", [False, True], ids=["app-per-worker", "preload"])
def test_under_gunicorn_with_two_workers(server: ServerProcess, tmp_path: Path, preload: bool) -> None:
    """SessionInterface.from_url: each worker builds its own store on first use, also when
    the app is made once in the master (--preload) and the workers are forked from it."""
    if server.binary.name != "valkey-9.1":
        pytest.skip("one real app-server run is enough: the store itself is tested on every server")
    port = free_port()
    namespace = f"gunicorn{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DENSEKV_WEB_URL": server.url, "DENSEKV_WEB_NAMESPACE": namespace}
    log = tmp_path / "gunicorn.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-w", "2", "-b", f"127.0.0.1:{port}",
             *(["--preload"] if preload else []), "tests.web.apps.flask_app:wsgi_app_from_env()"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            wait_serving(f"http://127.0.0.1:{port}", proc, log)
            assert http.post("/set/a", json={"value": "x"}).json() == {"ok": True}
            first = http.cookies[COOKIE]
            for _ in range(4):  # whichever worker answers, the session is in the store
                assert http.get("/get/a").json() == {"value": "x"}
            assert http.post("/login/21").status_code == 200
            assert http.cookies[COOKIE] != first
            assert http.get("/get/a").json() == {"value": "x"}
            looker = make_store(server.url, namespace)
            assert len(looker.sessions_of(21)) == 1
            assert http.post("/logout").status_code == 200
            assert COOKIE not in http.cookies
            assert http.get("/get/a").json() == {"value": None}
            assert looker.sessions_of(21) == []
            looker.client.close()
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


# -- docs/flask.md ------------------------------------------------------------------------------
DOC = (ROOT / "docs" / "flask.md").read_text()
DOC_BLOCKS = re.findall(r"```python\n(.*?)```", DOC, re.DOTALL)
DOC_FRAGMENTS = re.findall(r"```py\n(.*?)```", DOC, re.DOTALL)


def test_the_docs_page_has_runnable_blocks_and_its_fragments_compile() -> None:
    assert len(DOC_BLOCKS) >= 2 and len(DOC_FRAGMENTS) >= 2
    for fragment in DOC_FRAGMENTS:
        compile(fragment, "docs/flask.md", "exec")


@pytest.mark.parametrize("block", DOC_BLOCKS, ids=[f"block{i}" for i in range(len(DOC_BLOCKS))])
def test_a_docs_page_block_runs_as_written(block: str) -> None:
    done = subprocess.run([sys.executable, "-W", "error::ResourceWarning", "-c", block], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{block}\n--- stderr:\n{done.stderr[-3000:]}"


class _MovedMeanwhile:
    """A Flask-Session fallback raced by another request: by the time this request reads
    the old store, the other has moved the session in (densekv holds it under the cookie's
    token) and deleted the old key, so the old store has nothing."""

    def __init__(self, store: densekv.SessionStore) -> None:
        self.store = store

    def read(self, sid: str) -> None:
        self.store.create(None, {"cart": ["tea"]}, 600, token=sid)

    def forget(self, sid: str) -> None:
        raise AssertionError("nothing was read, nothing is forgotten")


def test_a_session_moved_in_by_a_concurrent_request_stands(store: densekv.SessionStore) -> None:
    """integrations/movein.py: when the old store has nothing, densekv is asked again for the
    token. Before, this request started afresh and its first write ended the session the
    other request had just moved in, as a cookie that loaded nothing (the cart lost)."""
    sid = secrets.token_urlsafe(32)
    web = FlaskDriver(make_app(store, fallback=_MovedMeanwhile(store)))  # type: ignore[arg-type]
    web.set_cookie(sid)
    assert web.request("POST", "/set/page", {"value": 2}) == OK
    assert web.cookie() == sid
    assert store.get(sid).data == {"cart": ["tea"], "page": 2}  # type: ignore[union-attr]
