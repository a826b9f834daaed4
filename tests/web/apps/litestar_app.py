"""The web contract's Litestar app (routes and Driver in tests/web/driver.py) on
densekv.integrations.litestar.SessionConfig, driven in-process by Litestar's TestClient.
`app_from_env` builds the same app for a real server, configured from a URL as
docs/litestar.md advises (one store per event loop, so per uvicorn worker):

    DENSEKV_WEB_URL=redis://... DENSEKV_WEB_NAMESPACE=web \
        python -m uvicorn --factory tests.web.apps.litestar_app:app_from_env

The drivers give the config one store directly: one TestClient, entered (one event loop, so
one redis.asyncio connection pool), serves a driver and every browser made from it; each
browser keeps its own cookie jar and swaps it in for its requests. The contract's `ttl` is
the framework's lifetime here (max_age=ttl), as in the Starlette app. /logout is Litestar's
own idiom, request.clear_session().
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from litestar import Litestar, Request, get, post
from litestar.params import FromPath, JSONBody
from litestar.testing import TestClient
from litestar.types import ControllerRouterHandler

from densekv import AsyncSessionStore
from densekv.connect import from_url
from densekv.integrations.litestar import SessionConfig, login, logout_everywhere, regenerate

from ..driver import COOKIE, SLOW_SET_S

OK = {"ok": True}


def make_store(url: str, namespace: str, *, ttl: int = 3600, idle_ttl: int | None = None,
               clock: Callable[[], float] = time.time, **store_kwargs: Any) -> AsyncSessionStore:
    return AsyncSessionStore(from_url(url, asyncio=True), namespace, ttl=ttl,
                             idle_ttl=idle_ttl, clock=clock, **store_kwargs)


@get("/get/{key:str}")
async def get_key(request: Request[Any, Any, Any], key: FromPath[str]) -> dict[str, Any]:
    return {"value": request.session.get(key)}


@get("/all")
async def get_all(request: Request[Any, Any, Any]) -> dict[str, Any]:
    return {"data": dict(request.session)}


@get("/noop")
async def noop() -> dict[str, Any]:
    return OK


@post("/set/{key:str}", status_code=200)
async def set_key(request: Request[Any, Any, Any], key: FromPath[str], data: JSONBody[dict[str, Any]]) -> dict[str, Any]:
    request.session[key] = data["value"]
    return OK


@post("/slow-set/{key:str}", status_code=200)
async def slow_set(request: Request[Any, Any, Any], key: FromPath[str], data: JSONBody[dict[str, Any]]) -> dict[str, Any]:
    # the middleware loaded the session before this ran and saves it when the response
    # starts: the sleep sits between the two
    await asyncio.sleep(SLOW_SET_S)
    request.session[key] = data["value"]
    return OK


@post("/del/{key:str}", status_code=200)
async def del_key(request: Request[Any, Any, Any], key: FromPath[str]) -> dict[str, Any]:
    request.session.pop(key, None)
    return OK


@post("/login/{uid:int}", status_code=200)
async def login_route(request: Request[Any, Any, Any], uid: FromPath[int]) -> dict[str, Any]:
    await login(request, uid)
    return OK


@post("/regenerate", status_code=200)
async def regenerate_route(request: Request[Any, Any, Any]) -> dict[str, Any]:
    await regenerate(request)
    return OK


@post("/logout", status_code=200)
async def logout(request: Request[Any, Any, Any]) -> dict[str, Any]:
    request.clear_session()
    return OK


@post("/logout-everywhere", status_code=200)
async def logout_everywhere_route(request: Request[Any, Any, Any]) -> dict[str, Any]:
    await logout_everywhere(request)
    return OK


ROUTES: list[ControllerRouterHandler] = [
    get_key, get_all, noop, set_key, slow_set, del_key, login_route, regenerate_route, logout,
    logout_everywhere_route]


def make_app(store: AsyncSessionStore, *, extra_routes: list[ControllerRouterHandler] | None = None,
             **config: Any) -> Litestar:
    """The contract's routes (and `extra_routes`) behind the session middleware, given
    `store` directly (one event loop: an entered TestClient); the store's client closes
    with the app."""

    async def close() -> None:
        await store.client.aclose()

    session_config = SessionConfig(store=store, key=COOKIE, **config)
    return Litestar([*ROUTES, *(extra_routes or [])], middleware=[session_config.middleware],
                    on_shutdown=[close], debug=False)


@get("/whoami")
async def whoami(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """Which worker process answered, and what it read from the session."""
    return {"pid": os.getpid(), "data": dict(request.session)}


def app_from_env() -> Litestar:
    """For `uvicorn --factory`: the store named by DENSEKV_WEB_URL and DENSEKV_WEB_NAMESPACE,
    plus GET /whoami."""
    session_config = SessionConfig(url=os.environ["DENSEKV_WEB_URL"], key=COOKIE, store_options={
        "namespace": os.environ["DENSEKV_WEB_NAMESPACE"], "ttl": 3600})
    return Litestar([*ROUTES, whoami], middleware=[session_config.middleware])


class _Shared:
    """The app, its store and the one TestClient every browser of a driver goes through."""

    def __init__(self, app: Litestar, store: AsyncSessionStore) -> None:
        self.app, self.store = app, store
        self.client = TestClient(app, raise_server_exceptions=False)
        self.client.__enter__()  # one portal (event loop) for the driver's whole life
        self.lock = threading.Lock()
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.client.__exit__(None, None, None)  # runs the shutdown hooks: closes the client


class LitestarDriver:
    """The Driver of tests/web/driver.py for the Litestar app."""

    name = "litestar"

    def __init__(self, shared: _Shared, owner: bool) -> None:
        self._shared, self._owner = shared, owner
        self._jar = type(shared.client.cookies)()
        self._raw: str | None = None  # a non-ASCII cookie: the jar cannot send it

    @property
    def app(self) -> Litestar:
        return self._shared.app

    @property
    def store(self) -> AsyncSessionStore:
        return self._shared.store

    def request(self, method: str, path: str, json: Any = None) -> tuple[int, Any]:
        status, body, _ = self.exchange(method, path, json)
        return status, body

    def exchange(self, method: str, path: str, json: Any = None) -> tuple[int, Any, Any]:
        """As request(), plus the response headers (for the Litestar-only tests)."""
        shared = self._shared
        headers = None if self._raw is None else {b"cookie": f"{COOKIE}={self._raw}".encode()}
        with shared.lock:
            shared.client.cookies = self._jar
            try:
                response = shared.client.request(method, path, json=json, headers=headers)
            finally:
                self._jar = shared.client.cookies
        if any(h.startswith(f"{COOKIE}=") for h in response.headers.get_list("set-cookie")):
            self._raw = None
        try:
            body = response.json()
        except ValueError:
            body = None
        return response.status_code, body, response.headers

    def cookie(self) -> str | None:
        value = self._raw if self._raw is not None else self._jar.get(COOKIE)
        return None if value is None else str(value)

    def set_cookie(self, value: str | None) -> None:
        self._jar.delete(COOKIE)
        self._raw = None
        if value is not None and not value.isascii():
            self._raw = value
        elif value is not None:
            self._jar.set(COOKIE, value, domain="testserver.local", path="/")

    def new_browser(self) -> LitestarDriver:
        return LitestarDriver(self._shared, owner=False)

    def close(self) -> None:
        if self._owner:
            self._shared.close()


def make_driver(url: str, namespace: str, *, ttl: int = 3600, idle_ttl: int | None = None,
                clock: Callable[[], float] = time.time, observer: Any = None,
                device_label: Callable[[Any], str | None] | None = None,
                **store_kwargs: Any) -> LitestarDriver:
    """`observer`: attached to the app's store; `device_label`: the config's hook."""
    store = make_store(url, namespace, ttl=ttl, idle_ttl=idle_ttl, clock=clock, **store_kwargs)
    if observer is not None:
        store.observe(observer)
    hook = {} if device_label is None else {"device_label": device_label}
    return LitestarDriver(_Shared(make_app(store, max_age=ttl, **hook), store), owner=True)


def driver_for(app: Litestar, store: AsyncSessionStore) -> LitestarDriver:
    """A driver on an app built here with other config fields."""
    return LitestarDriver(_Shared(app, store), owner=True)
