"""Issue 34 through the frameworks: the per-user session limit, device labels and lifecycle
events, each through the framework's own test client (the contract's apps and drivers,
tests/web/apps/<fw>_app.py, on every framework of conftest.FRAMEWORKS).

  * max_sessions_per_identity=2: three browsers log in as one user; with on_limit="evict"
    the first browser's cookie is dead (its next request is anonymous), with "refuse" the
    third login fails the request (a 500 from the contract's route, which does not catch
    SessionLimitReached) and its session stays as it was: anonymous, its data and cookie kept;
  * the shell's device_label hook is called with the framework's request at the login, and
    its answer is the label sessions_of lists and the rotated event carries;
  * an observer on the framework's store sees login, logout and logout everywhere.
Framework-only login paths (Flask-Login, Django's contrib.auth login) follow the generic tests.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from densekv.integrations.devices import clip_label, session_id, user_agent_label
from densekv.sessions.events import SessionEvent
from tests.web.conftest import WebFactory

OK = (200, {"ok": True})
UID = 7


class Events:
    """An observer keeping every event."""

    def __init__(self) -> None:
        self.seen: list[SessionEvent] = []

    def on_event(self, event: SessionEvent) -> None:
        self.seen.append(event)

    def take(self) -> list[SessionEvent]:
        out, self.seen = self.seen, []
        return out


def method_label(request: Any) -> str:
    """A device_label hook every framework's request answers: its method."""
    return f"{request.method} device"


def logged_in(browser: Any, key: str) -> str:
    """Anonymous session holding `key`, then a login as UID: the cookie after it."""
    assert browser.request("POST", f"/set/{key}", {"value": key}) == OK
    assert browser.request("POST", f"/login/{UID}") == OK
    cookie = browser.cookie()
    assert cookie is not None
    return str(cookie)


def test_with_evict_the_third_login_ends_the_first_browsers_session(web_factory: WebFactory) -> None:
    first = web_factory(max_sessions_per_identity=2, on_limit="evict")
    second, third = first.new_browser(), first.new_browser()
    old = logged_in(first, "a")
    logged_in(second, "b")
    logged_in(third, "c")
    looker = web_factory.store()
    assert looker.get(old) is None  # the first browser's cookie is dead
    assert first.request("GET", "/get/a") == (200, {"value": None})  # anonymous now
    assert second.request("GET", "/get/b") == (200, {"value": "b"})
    assert third.request("GET", "/get/c") == (200, {"value": "c"})
    assert sorted(s.id for s in looker.sessions_of(UID)) == sorted(
        session_id(b.cookie()) for b in (second, third))


def test_with_refuse_the_third_login_fails_and_its_session_stays_as_it_was(web_factory: WebFactory) -> None:
    first = web_factory(max_sessions_per_identity=2, on_limit="refuse")
    second, third = first.new_browser(), first.new_browser()
    logged_in(first, "a")
    logged_in(second, "b")
    assert third.request("POST", "/set/c", {"value": "c"}) == OK
    before = third.cookie()
    status, _ = third.request("POST", f"/login/{UID}")
    assert status == 500  # SessionLimitReached out of the route (the contract does not catch it)
    assert third.cookie() == before
    looker = web_factory.store()
    kept = looker.get(str(before))
    assert kept is not None and kept.identity is None and kept.data == {"c": "c"}
    assert third.request("GET", "/get/c") == (200, {"value": "c"})
    assert len(looker.sessions_of(UID)) == 2
    assert first.request("GET", "/get/a") == (200, {"value": "a"})  # nobody was evicted


def test_the_device_label_hook_labels_the_session_at_login(web_factory: WebFactory) -> None:
    if web_factory.app.__name__.endswith("django_app"):
        pytest.skip("Django's hook runs at contrib.auth's login(): test_django_auth_login_*")
    events = Events()
    browser = web_factory(track_devices=True, device_label=method_label, observer=events)
    logged_in(browser, "a")
    (listed,) = web_factory.store(track_devices=True).sessions_of(UID)
    assert listed.id == session_id(browser.cookie())
    assert listed.device is not None and listed.device.label == "POST device"
    (rotated,) = [e for e in events.take() if e.kind == "rotated"]
    assert (rotated.cause, rotated.identity, rotated.label) == ("login", UID, "POST device")


def test_login_logout_and_logout_everywhere_are_events_on_the_apps_store(web_factory: WebFactory) -> None:
    events = Events()
    one = web_factory(observer=events)
    two, three = one.new_browser(), one.new_browser()
    logged_in(one, "a")
    seen = events.take()
    assert [(e.kind, e.cause, e.identity) for e in seen] == [
        ("created", "create", None), ("rotated", "login", UID)]
    assert seen[1].old_session_id == seen[0].session_id
    assert seen[1].session_id == session_id(one.cookie())
    for browser, key in ((two, "b"), (three, "c")):
        logged_in(browser, key)
    events.take()
    gone = session_id(one.cookie())
    assert one.request("POST", "/logout") == OK
    assert [(e.kind, e.cause, e.session_id) for e in events.take()] == [("destroyed", "logout", gone)]
    ids = {session_id(two.cookie()), session_id(three.cookie())}
    assert two.request("POST", "/logout-everywhere") == OK
    ended = events.take()
    assert Counter((e.kind, e.cause, e.identity) for e in ended) == {
        ("destroyed", "logout_everywhere", UID): 2}
    assert {e.session_id for e in ended} == ids


# -- the helpers (no framework) ----------------------------------------------------------------
@pytest.mark.parametrize(("ua", "label"), [
    ("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "Firefox on Linux"),
    (("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0"), "Edge on Windows"),
    (("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like "
     "Gecko) Version/17.5 Mobile/15E148 Safari/604.1"), "Safari on iOS"),
    (("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/126.0.0.0 Safari/537.36"), "Chrome on macOS"),
    (("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/126.0.0.0 Mobile Safari/537.36"), "Chrome on Android"),
    ("curl/8.5.0", "curl"), ("", "Unknown device"), (None, "Unknown device"),
])
def test_user_agent_label(ua: str | None, label: str) -> None:
    assert user_agent_label(ua) == label
    assert len(label.encode()) <= 32


def test_a_label_is_clipped_to_32_bytes_at_a_character_boundary() -> None:
    assert clip_label("é" * 40) == "é" * 16
    assert clip_label("x" * 33) == "x" * 32
    assert clip_label("") is None and clip_label(None) is None


# -- Flask: Flask-Login's login_user() is a login too ----------------------------------------------
@pytest.fixture
def flask_login_app(request: pytest.FixtureRequest, server: Any) -> Any:
    """A Flask-Login app on a store with track_devices, a limit of 2 (the policy: the
    test's parameter) and a device_label hook; its store's client closes after the test."""
    import uuid

    from densekv.integrations.flask import SessionInterface
    from tests.web.apps.flask_app import make_flask_login_app, make_store

    store = make_store(server.url, f"fl{uuid.uuid4().hex[:10]}", track_devices=True,
                       max_sessions_per_identity=2, on_limit=request.param)
    app = make_flask_login_app(None, interface=SessionInterface(store, device_label=method_label))
    yield app
    store.client.close()


@pytest.mark.parametrize("flask_login_app", ["refuse"], indirect=True)
def test_flask_login_user_is_labelled_and_limited(flask_login_app: Any) -> None:
    from werkzeug.exceptions import InternalServerError

    from densekv import SessionLimitReached

    app = flask_login_app
    store = app.session_interface.store

    @app.errorhandler(InternalServerError)
    def too_many(error: InternalServerError) -> Any:  # the documented way to answer a refusal
        if isinstance(error.original_exception, SessionLimitReached):
            return {"error": "too many devices"}, 409
        return {"error": "server error"}, 500

    one, two, three = (app.test_client() for _ in range(3))
    for client in (one, two):
        assert client.post("/fl/login/7").status_code == 200
        assert client.get("/fl/whoami").json == {"user": "7"}
    assert {s.device.label for s in store.sessions_of(7) if s.device} == {"POST device"}
    assert three.post("/set/cart", json={"value": ["A-1"]}).status_code == 200
    response = three.post("/fl/login/7")
    assert (response.status_code, response.json) == (409, {"error": "too many devices"})
    # nothing was written: Flask-Login's _user_id did not reach the stored session, so the
    # browser is not logged in, and keeps its anonymous session
    assert three.get("/fl/whoami").json == {"user": None}
    assert three.get("/get/cart").json == {"value": ["A-1"]}
    assert len(store.sessions_of(7)) == 2


# -- Quart: the same, an error handler answers the refusal -------------------------------------------
def test_quart_refused_login_reaches_the_500_handler_and_leaves_the_session(server: Any) -> None:
    import asyncio
    import uuid

    from quart import Quart, session
    from werkzeug.exceptions import InternalServerError

    from densekv import SessionLimitReached
    from densekv.integrations.quart import SessionInterface

    app = Quart(__name__)
    app.session_interface = SessionInterface.from_url(
        server.url, namespace=f"q{uuid.uuid4().hex[:10]}", track_devices=True,
        max_sessions_per_identity=1, on_limit="refuse", device_label=method_label)

    @app.post("/login/<int:uid>")
    async def login(uid: int) -> Any:
        session["_user_id"] = str(uid)  # as Flask-Login's Quart ports log users in
        return {"ok": True}

    @app.get("/whoami")
    async def whoami() -> Any:
        return {"user": session.get("_user_id"), "cart": session.get("cart")}

    @app.post("/cart")
    async def cart() -> Any:
        session["cart"] = ["A-1"]
        return {"ok": True}

    @app.errorhandler(InternalServerError)
    async def too_many(error: InternalServerError) -> Any:
        if isinstance(error.original_exception, SessionLimitReached):
            return {"error": "too many devices"}, 409
        return {"error": "server error"}, 500

    async def check() -> None:
        one, two = app.test_client(), app.test_client()
        assert (await one.post("/login/7")).status_code == 200
        store = await app.session_interface.store()
        (listed,) = await store.sessions_of(7)
        assert listed.device is not None and listed.device.label == "POST device"
        await two.post("/cart")
        refused = await two.post("/login/7")
        assert (refused.status_code, await refused.get_json()) == (409, {"error": "too many devices"})
        assert await (await two.get("/whoami")).get_json() == {"user": None, "cart": ["A-1"]}
        assert len(await store.sessions_of(7)) == 1

    asyncio.run(check())


# -- Django: contrib.auth's login() labels the session and is refused in the view -------------------
@pytest.mark.parametrize("policy", ["refuse", "evict"])
def test_django_auth_login_is_labelled_and_limited_in_the_view(server: Any, policy: str) -> None:
    import uuid

    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from tests.web.apps import django_app

    events = Events()
    namespace = f"dj{uuid.uuid4().hex[:10]}"
    one = django_app.make_driver(server.url, namespace, track_devices=True, max_sessions_per_identity=2,
                                 on_limit=policy, device_label=method_label, observer=events)
    try:
        call_command("migrate", verbosity=0, interactive=False)
        user = get_user_model().objects.create_user(f"dev-{uuid.uuid4().hex[:8]}")
        two, three = one.new_browser(), one.new_browser()
        for browser in (one, two):
            assert browser.request("POST", f"/auth/login/{user.pk}") == OK
            assert browser.request("GET", "/auth/whoami") == (200, {"user": user.pk})
        store = one.engine.densekv_store()
        assert {s.device.label for s in store.sessions_of(user.pk) if s.device} == {"POST device"}
        logins = [e for e in events.take() if e.kind == "rotated" and e.cause == "login"]
        assert [e.label for e in logins] == ["POST device"] * 2
        assert three.request("POST", "/set/cart", {"value": ["A-1"]}) == OK
        first = one.cookie()
        if policy == "refuse":  # raised out of login() in the view, which answers it
            assert three.request("POST", f"/auth/login/{user.pk}") == (409, {"error": "too many devices"})
            assert three.request("GET", "/auth/whoami") == (200, {"user": None})
            assert three.request("GET", "/get/cart") == (200, {"value": ["A-1"]})
            assert one.request("GET", "/auth/whoami") == (200, {"user": user.pk})
        else:
            assert three.request("POST", f"/auth/login/{user.pk}") == OK
            assert store.get(str(first)) is None
            assert one.request("GET", "/auth/whoami") == (200, {"user": None})
            assert [e.cause for e in events.take() if e.kind == "destroyed"] == ["limit"]
        assert len(store.sessions_of(user.pk)) == 2
    finally:
        one.close()


def test_django_docs_devices_page_runs_as_written(server: Any) -> None:
    """docs/django.md's "your devices" block, as written, is the URLconf (with contrib.auth's
    login route of the contract app), through Django's test client."""
    import re
    import sys
    import types
    import uuid
    from pathlib import Path

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import override_settings
    from django.urls import path

    from tests.web.apps import django_app

    doc = (Path(__file__).resolve().parents[2] / "docs" / "django.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", doc, re.DOTALL) if "def log_out_others" in b]
    module = types.ModuleType("densekv_docs_django_devices")
    exec(compile(block, "docs/django.md", "exec"), module.__dict__)  # noqa: S102 - the docs' own block
    module.urlpatterns = [*module.urlpatterns, path("auth/login/<int:uid>", django_app.auth_login)]
    sys.modules[module.__name__] = module
    one = django_app.make_driver(server.url, f"dj{uuid.uuid4().hex[:10]}", track_devices=True,
                                 device_label=lambda r: user_agent_label(r.headers.get("User-Agent")))
    try:
        with override_settings(ROOT_URLCONF=module.__name__):
            call_command("migrate", verbosity=0, interactive=False)
            user = get_user_model().objects.create_user(f"dev-{uuid.uuid4().hex[:8]}")
            firefox, phone, tablet = one, one.new_browser(), one.new_browser()
            firefox.http.post(f"/auth/login/{user.pk}", HTTP_USER_AGENT="Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0")
            phone.http.post(f"/auth/login/{user.pk}", HTTP_USER_AGENT="Mozilla/5.0 (iPhone; CPU iPhone OS 17_5) Safari/604.1")
            tablet.http.post(f"/auth/login/{user.pk}")
            listed = firefox.http.get("/devices").json()["devices"]
            assert sorted((d["label"], d["this_device"]) for d in listed) == [
                ("Firefox on Linux", True), ("Safari on iOS", False), ("Unknown device", False)]
            (phone_id,) = [d["id"] for d in listed if d["label"] == "Safari on iOS"]
            assert firefox.http.post(f"/devices/{phone_id}/revoke").json() == {"ended": True}
            assert phone.http.get("/devices").status_code == 302  # logged out: to LOGIN_URL
            other = get_user_model().objects.create_user(f"eve-{uuid.uuid4().hex[:8]}")
            phone.http.post(f"/auth/login/{other.pk}")
            mine = [d["id"] for d in firefox.http.get("/devices").json()["devices"]]
            assert phone.http.post(f"/devices/{mine[0]}/revoke").json() == {"ended": False}  # not hers
            assert firefox.http.post("/devices/log-out-others").json() == {"ended": 1}
            assert [d["this_device"] for d in firefox.http.get("/devices").json()["devices"]] == [True]
    finally:
        sys.modules.pop(module.__name__, None)
        one.close()


# -- docs/starlette.md, docs/aiohttp.md and docs/litestar.md: their "your devices" page runs as written ---------------
# (docs/flask.md's and docs/quart.md's run with every block of those pages: test_flask.py,
# test_quart.py; docs/django.md's above, as a URLconf)
@pytest.mark.parametrize("page", ["starlette", "aiohttp", "litestar"])
def test_the_docs_devices_page_runs_as_written(page: str) -> None:
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / f"{page}.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", doc, re.DOTALL) if "def log_out_others" in b]
    done = subprocess.run([sys.executable, "-W", "error::ResourceWarning", "-c", block], cwd=root,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{block}\n--- stderr:\n{done.stderr[-3000:]}"
