"""The web contract's Starlette app (routes and Driver in tests/web/driver.py) on
densekv.integrations.starlette.SessionMiddleware, driven in-process by Starlette's
TestClient. `app_from_env` builds the same app for a real server, configured from a URL
as docs/starlette.md advises (one store per event loop, so per uvicorn worker):

    DENSEKV_WEB_URL=redis://... DENSEKV_WEB_NAMESPACE=web \
        python -m uvicorn --factory tests.web.apps.starlette_app:app_from_env

The drivers give the middleware one store directly: one TestClient, entered (one event
loop, so one redis.asyncio connection pool), serves a driver and every browser made from
it; each browser keeps its own cookie jar and swaps it in for its requests. The
contract's `ttl` is the framework's lifetime here (max_age=ttl), as it is Django's
SESSION_COOKIE_AGE and Flask's PERMANENT_SESSION_LIFETIME.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from densekv import AsyncSessionStore
from densekv.connect import from_url
from densekv.integrations.starlette import (
    SessionMiddleware,
    login,
    logout_everywhere,
    regenerate,
)

from ..driver import COOKIE, SLOW_SET_S

OK = {"ok": True}


def make_store(url: str, namespace: str, *, ttl: int = 3600, idle_ttl: int | None = None,
               clock: Callable[[], float] = time.time, **store_kwargs: Any) -> AsyncSessionStore:
    return AsyncSessionStore(from_url(url, asyncio=True), namespace, ttl=ttl,
                             idle_ttl=idle_ttl, clock=clock, **store_kwargs)


async def get_key(request: Request) -> JSONResponse:
    return JSONResponse({"value": request.session.get(request.path_params["key"])})


async def get_all(request: Request) -> JSONResponse:
    return JSONResponse({"data": dict(request.session)})


async def noop(request: Request) -> JSONResponse:
    return JSONResponse(OK)


async def set_key(request: Request) -> JSONResponse:
    request.session[request.path_params["key"]] = (await request.json())["value"]
    return JSONResponse(OK)


async def slow_set(request: Request) -> JSONResponse:
    # the middleware loaded the session before this ran and saves it when the response
    # starts: the sleep sits between the two
    value = (await request.json())["value"]
    await asyncio.sleep(SLOW_SET_S)
    request.session[request.path_params["key"]] = value
    return JSONResponse(OK)


async def del_key(request: Request) -> JSONResponse:
    request.session.pop(request.path_params["key"], None)
    return JSONResponse(OK)


async def login_route(request: Request) -> JSONResponse:
    await login(request, request.path_params["uid"])
    return JSONResponse(OK)


async def regenerate_route(request: Request) -> JSONResponse:
    await regenerate(request)
    return JSONResponse(OK)


async def logout(request: Request) -> JSONResponse:
    request.session.clear()
    return JSONResponse(OK)


async def logout_everywhere_route(request: Request) -> JSONResponse:
    await logout_everywhere(request)
    return JSONResponse(OK)


ROUTES = [
    Route("/get/{key}", get_key),
    Route("/all", get_all),
    Route("/noop", noop),
    Route("/set/{key}", set_key, methods=["POST"]),
    Route("/slow-set/{key}", slow_set, methods=["POST"]),
    Route("/del/{key}", del_key, methods=["POST"]),
    Route("/login/{uid:int}", login_route, methods=["POST"]),
    Route("/regenerate", regenerate_route, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
    Route("/logout-everywhere", logout_everywhere_route, methods=["POST"]),
]


def make_app(store: AsyncSessionStore, *, extra_routes: list[Route] | None = None,
             **middleware_kwargs: Any) -> Starlette:
    """The contract's routes (and `extra_routes`) behind the middleware, given `store`
    directly (one event loop: an entered TestClient); the store's client closes with the
    app."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await store.client.aclose()

    app = Starlette(routes=[*ROUTES, *(extra_routes or [])], lifespan=lifespan)
    app.add_middleware(SessionMiddleware, store=store, **middleware_kwargs)
    return app


async def whoami(request: Request) -> JSONResponse:
    """Which worker process answered, and what it read from the session."""
    return JSONResponse({"pid": os.getpid(), "data": dict(request.session)})


def app_from_env() -> Starlette:
    """For `uvicorn --factory`: the store named by DENSEKV_WEB_URL and DENSEKV_WEB_NAMESPACE,
    plus GET /whoami."""
    app = Starlette(routes=[*ROUTES, Route("/whoami", whoami)])
    namespace = os.environ["DENSEKV_WEB_NAMESPACE"]
    app.add_middleware(SessionMiddleware, url=os.environ["DENSEKV_WEB_URL"],
                       store_options={"namespace": namespace, "ttl": 3600})
    return app


class _Shared:
    """The app, its store and the one TestClient every browser of a driver goes through."""

    def __init__(self, app: Starlette, store: AsyncSessionStore) -> None:
        self.app, self.store = app, store
        self.client = TestClient(app, raise_server_exceptions=False)
        self.client.__enter__()  # one portal (event loop) for the driver's whole life
        self.lock = threading.Lock()
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.client.__exit__(None, None, None)  # runs the lifespan: closes the client


class StarletteDriver:
    """The Driver of tests/web/driver.py for the Starlette app."""

    name = "starlette"

    def __init__(self, shared: _Shared, owner: bool) -> None:
        self._shared, self._owner = shared, owner
        self._jar = type(shared.client.cookies)()
        self._raw: str | None = None  # a non-ASCII cookie: the jar cannot send it

    @property
    def app(self) -> Starlette:
        return self._shared.app

    @property
    def store(self) -> AsyncSessionStore:
        return self._shared.store

    def request(self, method: str, path: str, json: Any = None) -> tuple[int, Any]:
        status, body, _ = self.exchange(method, path, json)
        return status, body

    def exchange(self, method: str, path: str, json: Any = None) -> tuple[int, Any, Any]:
        """As request(), plus the response headers (for the Starlette-only tests)."""
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

    def new_browser(self) -> StarletteDriver:
        return StarletteDriver(self._shared, owner=False)

    def close(self) -> None:
        if self._owner:
            self._shared.close()


def make_driver(url: str, namespace: str, *, ttl: int = 3600, idle_ttl: int | None = None,
                clock: Callable[[], float] = time.time, observer: Any = None,
                device_label: Callable[[Any], str | None] | None = None,
                **store_kwargs: Any) -> StarletteDriver:
    """`observer`: attached to the app's store; `device_label`: the middleware's hook."""
    store = make_store(url, namespace, ttl=ttl, idle_ttl=idle_ttl, clock=clock, **store_kwargs)
    if observer is not None:
        store.observe(observer)
    hook = {} if device_label is None else {"device_label": device_label}
    return StarletteDriver(_Shared(make_app(store, max_age=ttl, **hook), store), owner=True)


def driver_for(app: Starlette, store: AsyncSessionStore) -> StarletteDriver:
    """A driver on an app built here with other middleware arguments."""
    return StarletteDriver(_Shared(app, store), owner=True)
