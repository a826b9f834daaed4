"""Faults every web backend survives (issue 21, section 2), through each framework's test app
(tests/web/apps/, the Driver of tests/web/driver.py) on the servers of the matrix:

* a restart without persistence while an old worker keeps running and a new one starts
  (every server of the matrix, all four backends):
  every browser reads back its own data, or none, through either worker, never another
  user's (the dictionary ids of before were counted and collided);
* a session that no longer decodes (its dictionary lost) is no session: 200 with empty
  data, and the user can log in, write and log out again;
* a dead server fails only the requests that use the session;
* "log out everywhere" while the user's other browsers rotate their sessions: none survives.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from densekv.dictionaries import dictionary_key
from densekv.tools.server.process import ServerProcess
from tests.web.conftest import WebFactory
from tests.web.driver import Driver

OK = (200, {"ok": True})
TRAIN = 20  # the apps' stores train their dictionary after this many payloads


def _blob(uid: int) -> str:
    """Session text that a dictionary compresses (the same words for every user) and
    that names its user, so that another user's data cannot pass for it."""
    return f"user {uid} " + "preferences theme=dark lang=en-GB tz=Europe/London " * 4 + f"end {uid}"


def _sign_in(web: Driver, uid: int) -> None:
    assert web.request("POST", f"/login/{uid}") == OK
    assert web.request("POST", "/set/blob", {"value": _blob(uid)}) == OK


def _blob_of(web: Driver) -> object:
    status, body = web.request("GET", "/get/blob")
    assert status == 200, "a stored session must never fail a request"
    return body["value"]


def _through(worker: Driver, cookie: str | None) -> Driver:
    browser = worker.new_browser()
    browser.set_cookie(cookie)
    return browser


def test_a_restart_without_persistence_never_shows_a_user_another_users_data(
        web_factory: WebFactory, server_name: str, fresh_server: Callable[..., ServerProcess]) -> None:
    srv = fresh_server(server_name)
    old = web_factory(url=srv.url, auto_train=TRAIN)
    before = []
    for uid in range(TRAIN + 5):  # the old worker trains its dictionary
        browser = old.new_browser()
        _sign_in(browser, uid)
        before.append(browser)
    srv.restart()
    new = web_factory(url=srv.url, auto_train=TRAIN)
    after: dict[int, str | None] = {}
    for uid in range(1000, 1000 + TRAIN + 5):  # the new worker trains another one
        browser = new.new_browser()
        _sign_in(browser, uid)
        after[uid] = browser.cookie()
    for uid in range(2000, 2010):  # the old worker writes on with its own
        browser = old.new_browser()
        _sign_in(browser, uid)
        after[uid] = browser.cookie()
    late = web_factory(url=srv.url)  # a worker started after all that
    for worker in (old, new, late):
        for uid, cookie in after.items():
            assert _blob_of(_through(worker, cookie)) == _blob(uid)
        for browser in before:  # gone with the restart: no data, never someone else's
            assert _blob_of(_through(worker, browser.cookie())) is None


def test_a_session_that_no_longer_decodes_is_no_session(
        web_factory: WebFactory, server_name: str, fresh_server: Callable[..., ServerProcess]) -> None:
    srv = fresh_server(server_name)
    first = web_factory(url=srv.url, auto_train=TRAIN)
    for uid in range(TRAIN + 2):
        _sign_in(first.new_browser(), uid)
    victim = first.new_browser()
    _sign_in(victim, 77)
    cookie = victim.cookie()
    with srv.client() as c:
        assert c.delete(dictionary_key(web_factory.namespace)) == 1  # its dictionary is lost
    browser = _through(web_factory(url=srv.url), cookie)  # a worker that never saw it
    assert _blob_of(browser) is None
    status, body = browser.request("GET", "/all")
    assert status == 200 and body["data"] == {}
    _sign_in(browser, 77)  # the user logs in again: a new session, readable
    assert browser.cookie() != cookie
    assert _blob_of(browser) == _blob(77)
    assert browser.request("POST", "/logout") == OK
    assert _blob_of(browser) is None


def test_a_dead_server_fails_only_the_requests_that_use_the_session(
        web_factory: WebFactory, server_name: str, fresh_server: Callable[..., ServerProcess]) -> None:
    srv = fresh_server(server_name)
    web = web_factory(url=srv.url)
    _sign_in(web, 5)
    srv.kill()
    assert web.request("GET", "/noop") == OK
    status, _ = web.request("GET", "/get/blob")
    assert status == 500


def test_logout_everywhere_while_the_other_browsers_rotate(web_factory: WebFactory) -> None:
    web = web_factory()
    laptops = [web.new_browser() for _ in range(6)]
    for laptop in laptops:
        _sign_in(laptop, 42)
    bystander = web.new_browser()
    _sign_in(bystander, 43)
    stop = threading.Event()
    failures: list[object] = []

    def rotate(laptop: Driver) -> None:
        while not stop.is_set():
            status, _ = laptop.request("POST", "/regenerate")
            if status == 400 and laptop.name == "django":
                return  # Django's SessionInterrupted: the session was deleted during the request
            if status != 200:
                failures.append(status)
                return

    threads = [threading.Thread(target=rotate, args=(laptop,)) for laptop in laptops[1:]]
    for t in threads:
        t.start()
    time.sleep(0.05)
    assert laptops[0].request("POST", "/logout-everywhere") == OK
    stop.set()
    for t in threads:
        t.join(30)
    assert not failures
    assert web_factory.store().sessions_of(42) == []
    for laptop in laptops:
        assert _blob_of(laptop) is None
    assert _blob_of(bystander) == _blob(43)


def test_a_stalled_server_fails_session_requests_within_the_timeout(
        web_factory: WebFactory, server_name: str, fresh_server: Callable[..., ServerProcess]) -> None:
    """A server that stops answering (SIGSTOP: a hung host, a long fork) must not hang the
    app: clients built from a URL (densekv.connect.from_url) time out in 5 s."""
    import signal

    if server_name != "valkey-9.1":
        pytest.skip("the timeout is the client's, the same on every server: one is enough")
    srv = fresh_server(server_name)
    web = web_factory(url=srv.url)
    _sign_in(web, 5)
    assert srv.proc is not None
    srv.proc.send_signal(signal.SIGSTOP)
    try:
        assert web.request("GET", "/noop") == OK
        started = time.monotonic()
        status, _ = web.request("GET", "/get/blob")
        took = time.monotonic() - started
    finally:
        srv.proc.send_signal(signal.SIGCONT)
    assert status == 500 and took < 15
    assert _blob_of(web) == _blob(5)  # and all is well once it answers again


def test_data_nested_too_deep_is_refused_with_nothing_written(web_factory: WebFactory) -> None:
    """A value nested past the documented limit (densekv.sessions.payload.MAX_NESTING) is a
    500 with the session as it was; one well inside it round-trips. (Written and then
    unreadable was the defect: a 600-deep dict raised RecursionError on every load.)"""
    from densekv.sessions.payload import MAX_NESTING

    def nested(depth: int) -> object:
        value: object = "leaf"
        for _ in range(depth):
            value = {"k": value}
        return value

    web = web_factory()
    _sign_in(web, 9)
    cookie = web.cookie()
    status, _ = web.request("POST", "/set/deep", {"value": nested(MAX_NESTING + 50)})
    assert status == 500
    assert _blob_of(_through(web, cookie)) == _blob(9)  # the session as it was
    status, body = _through(web, cookie).request("GET", "/get/deep")
    assert status == 200 and body["value"] is None
    assert web.request("POST", "/set/shallow", {"value": nested(20)}) == OK
    status, body = web.request("GET", "/get/shallow")
    assert status == 200 and body["value"] == nested(20)
