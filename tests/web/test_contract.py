"""The web contract every densekv session backend keeps (Flask, Django, Starlette), run
through each framework's test app (tests/web/apps/, routes in tests/web/driver.py) on a
real server of the matrix: round trips, nothing written for unused sessions, junk cookies,
login / regenerate / logout with the old cookie dead, merged concurrent writes, no
resurrection after logout, idle rolling without needless writes, the payload profiles,
oversized data and a server outage.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis

from densekv.tools.lab.session_profiles import PROFILES
from densekv.tools.lab.session_profiles import session as profile_session
from densekv.tools.server.process import ServerProcess
from tests.web.conftest import WebFactory
from tests.web.driver import SLOW_SET_S, Driver

OK = (200, {"ok": True})


class Clock:
    """A clock the test moves by hand (whole seconds, from the real time)."""

    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now


def server_calls(client: redis.Redis) -> dict[str, int]:
    """Calls per command so far, INFO itself left out."""
    stats: dict[str, Any] = client.info("commandstats")
    return {name: int(s["calls"]) for name, s in stats.items() if not name.startswith("cmdstat_info")}


def value_of(web: Driver, key: str) -> Any:
    status, body = web.request("GET", f"/get/{key}")
    assert status == 200
    return body["value"]


def data_of(web: Driver) -> dict[str, Any]:
    status, body = web.request("GET", "/all")
    assert status == 200
    return body["data"]  # type: ignore[no-any-return]


def browser_with(web: Driver, cookie: str | None) -> Driver:
    other = web.new_browser()
    other.set_cookie(cookie)
    return other


# -- round trips and sessions that must not exist -------------------------------------------
def test_set_get_round_trip(web: Driver) -> None:
    assert web.request("POST", "/set/a", {"value": 1}) == OK
    assert web.cookie()
    assert web.request("POST", "/set/b", {"value": {"x": [1, "y", None, True, 2.5]}}) == OK
    assert value_of(web, "a") == 1
    assert value_of(web, "missing") is None
    assert data_of(web) == {"a": 1, "b": {"x": [1, "y", None, True, 2.5]}}
    assert web.request("POST", "/del/a") == OK
    assert data_of(web) == {"b": {"x": [1, "y", None, True, 2.5]}}
    assert data_of(web.new_browser()) == {}  # another browser sees none of it


@pytest.mark.parametrize("path", ["/noop", "/all", "/get/a"])
def test_unused_or_read_only_empty_session_writes_nothing(web: Driver, web_factory: WebFactory,
                                                          path: str) -> None:
    web_factory.store()  # the namespace's metadata exists before the snapshot
    client = web_factory.client()
    keys, size = web_factory.keys(), client.dbsize()
    assert web.request("GET", path)[0] == 200
    assert web.cookie() is None
    assert web_factory.keys() == keys
    assert client.dbsize() == size


JUNK = {
    "garbage": "!!definitely not a token!!",
    "short": "abc",
    "near-token": "A" * 31 + "!",
    "long": "A" * 3000,
    "non-ascii": "sessi\u00f3n-\u00e9t\u00e9-\u2603-" + "a" * 24,
}


@pytest.mark.parametrize("junk", list(JUNK), ids=list(JUNK))
def test_junk_cookie_is_an_empty_session_without_a_server_call(
        web: Driver, web_factory: WebFactory, junk: str) -> None:
    web_factory.store()
    client = web_factory.client()
    web.set_cookie(JUNK[junk])
    before = server_calls(client)
    assert web.request("GET", "/all") == (200, {"data": {}})
    assert server_calls(client) == before


def test_unknown_token_is_never_adopted(web: Driver, web_factory: WebFactory) -> None:
    """A well-formed token the store never issued: an empty session, and a write gets a
    token of the server's choosing (no session fixation)."""
    planted = secrets.token_urlsafe(24)
    web.set_cookie(planted)
    assert data_of(web) == {}
    assert web.request("POST", "/set/a", {"value": 1}) == OK
    assert web.cookie() not in (None, planted)
    assert web_factory.store().get(planted) is None


# -- login, regenerate, logout ----------------------------------------------------------------
@pytest.mark.parametrize("before", ["anonymous", "no-session"])
def test_login_moves_the_session_to_a_new_cookie(web: Driver, web_factory: WebFactory,
                                                 before: str) -> None:
    old = None
    if before == "anonymous":
        assert web.request("POST", "/set/a", {"value": "kept"}) == OK
        old = web.cookie()
        assert old
    assert web.request("POST", "/login/7") == OK
    new = web.cookie()
    assert new and new != old
    store = web_factory.store()
    assert [s.identity for s in store.sessions_of(7)] == [7]
    assert store.get(new) is not None and store.get(new).identity == 7  # type: ignore[union-attr]
    if old is not None:
        assert value_of(web, "a") == "kept"
        stale = browser_with(web, old)
        assert value_of(stale, "a") is None
        assert stale.request("POST", "/set/b", {"value": "intruder"}) == OK
        assert value_of(web, "b") is None  # the old cookie never reaches the new session


def test_regenerate_keeps_data_and_identity(web: Driver, web_factory: WebFactory) -> None:
    assert web.request("POST", "/login/8") == OK
    assert web.request("POST", "/set/a", {"value": [1, 2]}) == OK
    old = web.cookie()
    assert web.request("POST", "/regenerate") == OK
    new = web.cookie()
    assert new and new != old
    assert value_of(web, "a") == [1, 2]
    assert value_of(browser_with(web, old), "a") is None
    assert len(web_factory.store().sessions_of(8)) == 1


def test_logout_ends_the_session(web: Driver, web_factory: WebFactory) -> None:
    assert web.request("POST", "/login/9") == OK
    assert web.request("POST", "/set/a", {"value": "x"}) == OK
    old = web.cookie()
    assert web.request("POST", "/logout") == OK
    assert not web.cookie()
    assert value_of(web, "a") is None
    assert value_of(browser_with(web, old), "a") is None
    store = web_factory.store()
    assert store.sessions_of(9) == []
    assert old is not None and store.get(old) is None


def test_logout_everywhere_ends_every_session_of_that_user_only(
        web: Driver, web_factory: WebFactory) -> None:
    first, second, other_user = web, web.new_browser(), web.new_browser()
    for browser, uid, who in ((first, 5, "first"), (second, 5, "second"), (other_user, 6, "other")):
        assert browser.request("POST", "/login/" + str(uid)) == OK
        assert browser.request("POST", "/set/who", {"value": who}) == OK
    assert first.request("POST", "/logout-everywhere") == OK
    assert not first.cookie()
    assert value_of(second, "who") is None
    assert value_of(other_user, "who") == "other"
    store = web_factory.store()
    assert store.sessions_of(5) == []
    assert len(store.sessions_of(6)) == 1


# -- races --------------------------------------------------------------------------------
def test_concurrent_writes_to_different_keys_keep_both(web: Driver) -> None:
    assert web.request("POST", "/set/base", {"value": 0}) == OK
    other = browser_with(web, web.cookie())
    with ThreadPoolExecutor(2) as pool:
        slow = pool.submit(web.request, "POST", "/slow-set/a", {"value": 1})
        time.sleep(SLOW_SET_S / 3)
        fast = pool.submit(other.request, "POST", "/set/b", {"value": 2})
        assert fast.result() == OK
        assert slow.result() == OK
    assert data_of(browser_with(web, other.cookie())) == {"base": 0, "a": 1, "b": 2}


def test_a_slow_write_does_not_resurrect_a_logged_out_session(
        web: Driver, web_factory: WebFactory) -> None:
    assert web.request("POST", "/set/x", {"value": 1}) == OK
    token = web.cookie()
    other = browser_with(web, token)
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(web.request, "POST", "/slow-set/a", {"value": 1})
        time.sleep(SLOW_SET_S / 3)
        assert other.request("POST", "/logout") == OK
        # Flask and Starlette answer 200 and drop the cookie; Django answers 400 by design
        # (SessionInterrupted: "the request's session was deleted before it completed")
        assert slow.result()[0] in (200, 400)
    store = web_factory.store()
    assert token is not None and store.get(token) is None
    assert data_of(browser_with(web, token)) == {}
    assert store.count() == 0  # and not under a new token either


# -- idle expiry ----------------------------------------------------------------------------
def idle_session(web_factory: WebFactory, *, ttl: int, idle_ttl: int) -> tuple[Driver, Clock, Callable[[], Any]]:
    clock = Clock()
    web = web_factory(ttl=ttl, idle_ttl=idle_ttl, clock=clock)
    assert web.request("POST", "/set/a", {"value": 1}) == OK
    store, token = web_factory.store(clock=clock), web.cookie()
    assert token is not None
    return web, clock, lambda: store.get(token)


def test_an_early_read_does_not_roll_the_idle_expiry(web_factory: WebFactory) -> None:
    web, clock, stored = idle_session(web_factory, ttl=3600, idle_ttl=600)
    first = stored()
    assert first.expires_at == clock.now + 600
    clock.now += 60  # a tenth of the idle window: a touch would gain too little
    assert value_of(web, "a") == 1
    assert stored() == first


def test_a_late_read_rolls_the_idle_expiry(web_factory: WebFactory) -> None:
    web, clock, stored = idle_session(web_factory, ttl=3600, idle_ttl=600)
    clock.now += 540
    assert value_of(web, "a") == 1
    assert stored().expires_at == clock.now + 600


def test_idle_rolling_never_passes_the_absolute_expiry(web_factory: WebFactory) -> None:
    web, clock, stored = idle_session(web_factory, ttl=800, idle_ttl=600)
    start = clock.now
    clock.now += 540  # a touch would reach start + 1140: it stops at the absolute expiry
    assert value_of(web, "a") == 1
    assert stored().expires_at == stored().absolute_at == start + 800
    clock.now = start + 801
    assert value_of(web, "a") is None


# -- payloads -----------------------------------------------------------------------------
@pytest.mark.parametrize("profile", PROFILES)
def test_profile_round_trips_exactly(web: Driver, profile: str) -> None:
    _, data = profile_session(profile, 3)
    for key, value in data.items():
        assert web.request("POST", f"/set/{key}", {"value": value}) == OK
    assert data_of(web) == data


@pytest.mark.parametrize("state", ["new", "existing"])
def test_oversized_data_is_a_clean_error_with_nothing_written(web_factory: WebFactory,
                                                              state: str) -> None:
    web = web_factory(max_data_bytes=4096)
    web_factory.store().open()  # the namespace's metadata exists before the snapshot
    if state == "existing":
        assert web.request("POST", "/set/a", {"value": "small"}) == OK
    token = web.cookie()
    keys = web_factory.keys()
    status, _ = web.request("POST", "/set/big", {"value": secrets.token_urlsafe(8000)})
    assert status == 500
    assert web.cookie() == token
    assert web_factory.keys() == keys
    assert data_of(web) == ({} if state == "new" else {"a": "small"})


# -- outage -------------------------------------------------------------------------------
@pytest.mark.parametrize("method,path", [("GET", "/get/a"), ("GET", "/all"), ("POST", "/set/b")])
def test_server_down_is_a_500_not_a_new_session(web_factory: WebFactory, server_name: str,
                                                fresh_server: Callable[..., ServerProcess],
                                                method: str, path: str) -> None:
    srv = fresh_server(server_name)
    web = web_factory(url=srv.url)
    assert web.request("POST", "/set/a", {"value": 1}) == OK
    token = web.cookie()
    srv.kill()
    status, _ = web.request(method, path, {"value": 2} if method == "POST" else None)
    assert status == 500
    assert web.cookie() == token  # neither replaced by a fresh session nor dropped
