"""The web contract's Quart app (routes in tests/web/driver.py) on densekv.integrations.quart,
and its Driver over Quart's own test client. `app_from_env()` builds the same app for a
real ASGI server (hypercorn) from DENSEKV_WEB_URL and DENSEKV_WEB_NAMESPACE, configured from
a URL as docs/quart.md says (one store per event loop, so per worker).

A driver runs one event loop in a thread of its own; every browser of the driver is a
QuartClient (its own cookie jar) whose requests run on that loop, so concurrent requests
from the test's threads run concurrently on it. The interface is given the store directly
(one loop). The contract's `ttl` is the store's, PERMANENT_SESSION_LIFETIME Quart's default,
as in the Flask app.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from quart import Quart, jsonify, request, session
from quart.testing import QuartClient

from densekv import AsyncSessionStore
from densekv.connect import from_url
from densekv.integrations.quart import DensekvSession, QuartSessionFallback, SessionInterface
from tests.web.driver import COOKIE, SLOW_SET_S

T = TypeVar("T")


def _session() -> DensekvSession:
    current = session._get_current_object()  # type: ignore[attr-defined]
    assert isinstance(current, DensekvSession)
    return current


def make_app(interface: SessionInterface, *, config: Mapping[str, Any] | None = None) -> Quart:
    app = Quart(__name__)
    app.config.update(SESSION_COOKIE_NAME=COOKIE, **(config or {}))
    app.session_interface = interface

    @app.get("/get/<key>")
    async def get(key: str) -> Any:
        return jsonify(value=session.get(key))

    @app.get("/all")
    async def all_() -> Any:
        return jsonify(data=dict(session))

    @app.get("/noop")
    async def noop() -> Any:
        return jsonify(ok=True)

    @app.post("/set/<key>")
    async def set_(key: str) -> Any:
        session[key] = ((await request.get_json()) or {}).get("value")
        return jsonify(ok=True)

    @app.post("/slow-set/<key>")
    async def slow_set(key: str) -> Any:
        value = ((await request.get_json()) or {}).get("value")
        await asyncio.sleep(SLOW_SET_S)  # read in open_session before this, saved after
        session[key] = value
        return jsonify(ok=True)

    @app.post("/del/<key>")
    async def del_(key: str) -> Any:
        session.pop(key, None)
        return jsonify(ok=True)

    @app.post("/login/<int:uid>")
    async def login(uid: int) -> Any:
        _session().login(uid)
        return jsonify(ok=True)

    @app.post("/regenerate")
    async def regenerate() -> Any:
        _session().regenerate()
        return jsonify(ok=True)

    @app.post("/logout")
    async def logout() -> Any:
        _session().destroy()
        return jsonify(ok=True)

    @app.post("/logout-everywhere")
    async def logout_everywhere() -> Any:
        _session().logout_everywhere()
        return jsonify(ok=True)

    return app


class Loop:
    """An event loop running in a thread of its own until close()."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self, last: Coroutine[Any, Any, Any] | None = None) -> None:
        if last is not None:
            self.run(last)
        self.run(self.loop.shutdown_asyncgens())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class QuartDriver:
    """One browser: a Quart test client with its own cookie jar, on the driver's loop."""

    name = "quart"

    def __init__(self, app: Quart, loop: Loop, store: AsyncSessionStore | None = None) -> None:
        self.app, self.loop, self._store = app, loop, store
        self.client: QuartClient = app.test_client()
        self._raw: str | None = None  # a non-ASCII cookie: the jar cannot send it

    def request(self, method: str, path: str, json: Any = None) -> tuple[int, Any]:
        status, body, _ = self.exchange(method, path, json)
        return status, body

    def exchange(self, method: str, path: str, json: Any = None) -> tuple[int, Any, Any]:
        """As request(), plus the response headers (for the Quart-only tests)."""
        headers = {}
        if self._raw is not None:  # its UTF-8 bytes on the wire (ASGI headers are bytes)
            headers["cookie"] = f"{COOKIE}={self._raw}".encode().decode("latin-1")

        async def go() -> tuple[int, Any, Any]:
            kwargs: dict[str, Any] = {"method": method, "headers": headers}
            if json is not None:
                kwargs["json"] = json
            response = await self.client.open(path, **kwargs)
            try:
                body = await response.get_json(force=True)
            except Exception:  # noqa: BLE001 - not JSON
                body = None
            return response.status_code, body, response.headers

        status, body, got = self.loop.run(go())
        if any(h.startswith(f"{COOKIE}=") for h in got.getlist("set-cookie")):
            self._raw = None
        return status, body, got

    def cookie(self) -> str | None:
        if self._raw is not None:
            return self._raw
        assert self.client.cookie_jar is not None
        for c in self.client.cookie_jar:
            if c.name == COOKIE:
                return c.value
        return None

    def set_cookie(self, value: str | None) -> None:
        jar = self.client.cookie_jar
        assert jar is not None
        for c in [c for c in jar if c.name == COOKIE]:
            jar.clear(c.domain, c.path, c.name)
        self._raw = None
        if value is not None and not value.isascii():
            self._raw = value
        elif value is not None:
            self.client.set_cookie("localhost", COOKIE, value)

    def new_browser(self) -> QuartDriver:
        return QuartDriver(self.app, self.loop)

    def close(self) -> None:
        if self._store is not None:
            self.loop.close(self._store.client.aclose())


def make_store(url: str, namespace: str, *, ttl: int = 3600, idle_ttl: int | None = None,
               clock: Callable[[], float] = time.time, **store_kwargs: Any) -> AsyncSessionStore:
    return AsyncSessionStore(from_url(url, asyncio=True), namespace, ttl=ttl, idle_ttl=idle_ttl,
                             clock=clock, **store_kwargs)


def make_driver(url: str, namespace: str, *, ttl: int = 3600, idle_ttl: int | None = None,
                clock: Callable[[], float] = time.time, observer: Any = None,
                device_label: Callable[[Any], str | None] | None = None,
                **store_kwargs: Any) -> QuartDriver:
    """`observer`: attached to the app's store; `device_label`: the interface's hook."""
    store = make_store(url, namespace, ttl=ttl, idle_ttl=idle_ttl, clock=clock, **store_kwargs)
    if observer is not None:
        store.observe(observer)
    app = make_app(SessionInterface(store, device_label=device_label))
    return QuartDriver(app, Loop(), store)


def driver_for(app: Quart, store: AsyncSessionStore | None = None) -> QuartDriver:
    """A driver on an app built here with other settings (`store`: closed with it)."""
    return QuartDriver(app, Loop(), store)


def app_from_env(fallback: QuartSessionFallback | None = None) -> Quart:
    """For `hypercorn 'tests.web.apps.quart_app:app_from_env()'`: the interface configured
    from a URL (a store per event loop, so per worker), plus GET /whoami."""
    interface = SessionInterface.from_url(os.environ["DENSEKV_WEB_URL"],
                                          namespace=os.environ["DENSEKV_WEB_NAMESPACE"], ttl=3600,
                                          fallback=fallback)
    app = make_app(interface)

    @app.get("/whoami")
    async def whoami() -> Any:
        return jsonify(pid=os.getpid(), data=dict(session))

    return app
