"""The web contract's aiohttp app (routes and Driver in tests/web/driver.py) on
aiohttp_session with densekv.integrations.aiohttp.Storage, driven by aiohttp's own
TestServer / TestClient on an event loop that runs in a background thread (the Driver
protocol is synchronous). `app_from_env` builds the same app for a real server:

    DENSEKV_WEB_URL=redis://... DENSEKV_WEB_NAMESPACE=web \\
        gunicorn tests.web.apps.aiohttp_app:app_from_env -w 2 \\
        --worker-class aiohttp.GunicornWebWorker

A driver owns the loop, the app, its store and the TestServer; every browser made from it
is a TestClient of its own (its own cookie jar) on that server.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import warnings
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import aiohttp
import aiohttp_session
import redis.asyncio
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request

from densekv import AsyncSessionStore
from densekv.connect import from_url
from densekv.integrations.aiohttp import Storage, login, logout_everywhere, regenerate
from tests.web.driver import COOKIE, SLOW_SET_S

T = TypeVar("T")
OK = {"ok": True}


def _take_the_str_key_warnings() -> None:
    """aiohttp warns (NotAppKeyWarning, once per key and process) that aiohttp_session keeps
    its storage and session under str request keys. The test suite turns warnings into
    errors, so that one warning is taken here, where it cannot fail a request."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", web.NotAppKeyWarning)
        request = make_mocked_request("GET", "/")
        request[aiohttp_session.STORAGE_KEY] = request[aiohttp_session.SESSION_KEY] = None


_take_the_str_key_warnings()


def make_store(url: str, namespace: str, *, ttl: int = 3600, idle_ttl: int | None = None,
               clock: Callable[[], float] = time.time, **store_kwargs: Any) -> AsyncSessionStore:
    return AsyncSessionStore(from_url(url, asyncio=True), namespace, ttl=ttl,
                             idle_ttl=idle_ttl, clock=clock, **store_kwargs)


async def get_key(request: web.Request) -> web.Response:
    session = await aiohttp_session.get_session(request)
    return web.json_response({"value": session.get(request.match_info["key"])})


async def get_all(request: web.Request) -> web.Response:
    return web.json_response({"data": dict(await aiohttp_session.get_session(request))})


async def noop(request: web.Request) -> web.Response:
    return web.json_response(OK)


async def set_key(request: web.Request) -> web.Response:
    session = await aiohttp_session.get_session(request)
    session[request.match_info["key"]] = (await request.json())["value"]
    return web.json_response(OK)


async def slow_set(request: web.Request) -> web.Response:
    value = (await request.json())["value"]
    session = await aiohttp_session.get_session(request)  # loaded before the sleep
    await asyncio.sleep(SLOW_SET_S)
    session[request.match_info["key"]] = value
    return web.json_response(OK)


async def del_key(request: web.Request) -> web.Response:
    (await aiohttp_session.get_session(request)).pop(request.match_info["key"], None)
    return web.json_response(OK)


async def login_route(request: web.Request) -> web.Response:
    await login(request, int(request.match_info["uid"]))
    return web.json_response(OK)


async def regenerate_route(request: web.Request) -> web.Response:
    await regenerate(request)
    return web.json_response(OK)


async def logout(request: web.Request) -> web.Response:
    (await aiohttp_session.get_session(request)).invalidate()  # aiohttp_session's own logout
    return web.json_response(OK)


async def logout_everywhere_route(request: web.Request) -> web.Response:
    await logout_everywhere(request)
    return web.json_response(OK)


async def whoami(request: web.Request) -> web.Response:
    """Which worker process answered, and what it read from the session."""
    session = await aiohttp_session.get_session(request)
    return web.json_response({"pid": os.getpid(), "data": dict(session)})


def make_app(store: AsyncSessionStore, **storage_kwargs: Any) -> web.Application:
    """The contract's routes behind aiohttp_session with densekv's Storage (cookie COOKIE
    unless `cookie_name` says otherwise); the store's client closes with the app."""
    storage_kwargs.setdefault("cookie_name", COOKIE)
    app = app_on(Storage(store, **storage_kwargs))

    async def close_client(app: web.Application) -> None:
        await store.client.aclose()

    app.on_cleanup.append(close_client)
    return app


def app_on(storage: aiohttp_session.AbstractStorage) -> web.Application:
    """The contract's routes behind aiohttp_session with `storage` (any storage: the
    aiohttp-only tests compare densekv's with aiohttp_session's own)."""
    app = web.Application()
    aiohttp_session.setup(app, storage)
    app.router.add_get("/get/{key}", get_key)
    app.router.add_get("/all", get_all)
    app.router.add_get("/noop", noop)
    app.router.add_get("/whoami", whoami)
    app.router.add_post("/set/{key}", set_key)
    app.router.add_post("/slow-set/{key}", slow_set)
    app.router.add_post("/del/{key}", del_key)
    app.router.add_post("/login/{uid:\\d+}", login_route)
    app.router.add_post("/regenerate", regenerate_route)
    app.router.add_post("/logout", logout)
    app.router.add_post("/logout-everywhere", logout_everywhere_route)
    return app


async def app_from_env(argv: list[str] | None = None) -> web.Application:
    """An async app factory (`python -m aiohttp.web`, or gunicorn's aiohttp worker, which
    calls it in each worker after the fork, in that worker's loop): the store named by
    DENSEKV_WEB_URL and DENSEKV_WEB_NAMESPACE, built in the loop that serves it."""
    url, namespace = os.environ["DENSEKV_WEB_URL"], os.environ["DENSEKV_WEB_NAMESPACE"]
    client = redis.asyncio.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)
    return make_app(AsyncSessionStore(client, namespace))


class _Shared:
    """A loop in a thread, the app on a TestServer in it, and every browser's client."""

    def __init__(self, make: Callable[[], web.Application]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.clients: list[TestClient[Any, Any]] = []
        self.closed = False

        async def start() -> TestServer:
            server = TestServer(make())
            await server.start_server()
            return server

        self.server = self.run(start())
        self.app = self.server.app

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def client(self) -> TestClient[Any, Any]:
        async def make() -> TestClient[Any, Any]:
            return TestClient(self.server, cookie_jar=aiohttp.CookieJar(unsafe=True))

        client = self.run(make())
        self.clients.append(client)
        return client

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True

        async def stop() -> None:
            for client in self.clients:
                await client.session.close()  # client.close() would stop the shared server
            await self.server.close()

        try:
            self.run(stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


class AiohttpDriver:
    """The Driver of tests/web/driver.py for the aiohttp app: one TestClient, one jar."""

    name = "aiohttp"

    def __init__(self, shared: _Shared, owner: bool) -> None:
        self._shared, self._owner = shared, owner
        self._client = shared.client()
        self._raw: str | None = None  # a non-ASCII cookie: sent by hand, not from the jar

    @property
    def app(self) -> web.Application:
        return self._shared.app

    def request(self, method: str, path: str, json: Any = None) -> tuple[int, Any]:
        status, body, _ = self.exchange(method, path, json)
        return status, body

    def exchange(self, method: str, path: str, json: Any = None,
                 headers: dict[str, str] | None = None) -> tuple[int, Any, Any]:
        """As request(), plus the response headers (for the aiohttp-only tests)."""
        headers = dict(headers or {})
        if self._raw is not None:
            headers["Cookie"] = f"{COOKIE}={self._raw}".encode().decode("latin-1")

        async def go() -> tuple[int, Any, Any]:
            async with self._client.request(method, path, json=json, headers=headers) as resp:
                try:
                    body = await resp.json(content_type=None)
                except ValueError:
                    body = None
                return resp.status, body, resp.headers.copy()

        status, body, response_headers = self._shared.run(go())
        if any(h.startswith(f"{COOKIE}=") for h in response_headers.getall("Set-Cookie", [])):
            self._raw = None
        return status, body, response_headers

    def _jar(self) -> aiohttp.abc.AbstractCookieJar:
        return self._client.session.cookie_jar

    def cookie(self) -> str | None:
        if self._raw is not None:
            return self._raw
        for morsel in self._jar():
            if morsel.key == COOKIE:
                return morsel.value
        return None

    def set_cookie(self, value: str | None) -> None:
        async def go() -> None:
            jar = self._jar()
            jar.clear(lambda morsel: morsel.key == COOKIE)
            if value is not None and value.isascii():
                jar.update_cookies({COOKIE: value}, self._shared.server.make_url("/"))

        self._shared.run(go())
        self._raw = value if value is not None and not value.isascii() else None

    def new_browser(self) -> AiohttpDriver:
        return AiohttpDriver(self._shared, owner=False)

    def close(self) -> None:
        if self._owner:
            self._shared.close()


def make_driver(url: str, namespace: str, *, ttl: int = 3600, idle_ttl: int | None = None,
                clock: Callable[[], float] = time.time, observer: Any = None,
                device_label: Callable[[Any], str | None] | None = None,
                **store_kwargs: Any) -> AiohttpDriver:
    """`observer`: attached to the app's store; `device_label`: the storage's hook."""
    def make() -> web.Application:
        store = make_store(url, namespace, ttl=ttl, idle_ttl=idle_ttl, clock=clock, **store_kwargs)
        if observer is not None:
            store.observe(observer)
        hook = {} if device_label is None else {"device_label": device_label}
        return make_app(store, **hook)

    return AiohttpDriver(_Shared(make), owner=True)


def driver_for(make: Callable[[], web.Application]) -> AiohttpDriver:
    """A driver on an app built (in the driver's loop) by `make`, e.g. with other storage
    arguments."""
    return AiohttpDriver(_Shared(make), owner=True)
