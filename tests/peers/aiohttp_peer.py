"""The pytest plugin (-p tests.peers.aiohttp_peer) under which tests/peers/test_aiohttp_suite.py
runs aiohttp-session's own storage tests in a subprocess, in the place of their conftest
(which starts Redis and memcached in docker).

AIOHTTP_PEER_URL names the Redis/Valkey server of the run. AIOHTTP_PEER_BACKEND says whose
storage the tests exercise:

* "control": unchanged; RedisStorage on that server, SimpleCookieStorage where they use it.
* "densekv": densekv.integrations.aiohttp.Storage in their place. In test_redis_storage.py
  its helpers are rebound: create_app builds densekv's Storage on the test's redis client
  (a fresh namespace per test); make_cookie stores the session with store.create and puts
  the token in the cookie jar; load_cookie reads it back with store.get, in the shape
  aiohttp_session's storages keep (SessionData: {"created", "session"}; {} when there is no
  session, which is what RedisStorage stores for an emptied one). densekv keeps no
  "created": the helper reports the read time, as a loaded DenseSession does. Where the
  tests construct SimpleCookieStorage(...), they get densekv's Storage with those arguments.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from unittest import mock

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from aiohttp.test_utils import TestClient
from aiohttp.typedefs import Handler
from aiohttp_session import session_middleware

import densekv
from densekv.integrations.aiohttp import Storage
from densekv.sessions.model import digest_of

URL = os.environ["AIOHTTP_PEER_URL"]
DENSEKV = os.environ.get("AIOHTTP_PEER_BACKEND") == "densekv"
COOKIE = "AIOHTTP_SESSION"


class _Run:
    """The current test's namespace and the stores opened for it (closed after it)."""

    def __init__(self) -> None:
        self.namespace = "peer"
        self.clients: list[aioredis.Redis] = []


RUN = _Run()


def _store(client: aioredis.Redis) -> densekv.AsyncSessionStore:
    return densekv.AsyncSessionStore(client, RUN.namespace)


# -- the fixtures their conftest had (docker-free) ---------------------------------------------
@pytest.fixture
def redis_url() -> str:
    return URL


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    pool = aioredis.ConnectionPool.from_url(redis_url)
    client = aioredis.Redis(connection_pool=pool)
    yield client
    await client.aclose()
    await pool.disconnect()


@pytest.fixture
def mocker() -> Iterator[Any]:
    """The part of pytest-mock's `mocker` the suite uses: mocker.patch(target, new)."""
    patchers: list[Any] = []

    class Mocker:
        def patch(self, target: str, *args: Any, **kwargs: Any) -> Any:
            patcher = mock.patch(target, *args, **kwargs)
            patchers.append(patcher)
            return patcher.start()

    yield Mocker()
    for patcher in reversed(patchers):
        patcher.stop()


# -- densekv in the place of their storages ----------------------------------------------------
def create_app(handler: Handler, redis: aioredis.Redis, max_age: int | None = None,
               key_factory: Any = None) -> web.Application:
    """Their create_app, with densekv's Storage (there is no key_factory: densekv draws
    its tokens)."""
    app = web.Application(middlewares=[session_middleware(Storage(_store(redis), max_age=max_age))])
    app.router.add_route("GET", "/", handler)
    return app


async def make_cookie(client: TestClient[Any, Any], redis: aioredis.Redis,
                      data: dict[Any, Any]) -> None:
    token = await _store(redis).create(None, data)
    client.session.cookie_jar.update_cookies({COOKIE: token})


async def load_cookie(client: TestClient[Any, Any], redis: aioredis.Redis) -> Any:
    token = client.session.cookie_jar.filter_cookies(client.make_url("/"))[COOKIE].value
    found = await _store(redis).get(token) if digest_of(token) is not None else None
    return {} if found is None else {"created": int(time.time()), "session": found.data or {}}


def simple_storage(**cookie: Any) -> Storage:
    """SimpleCookieStorage(...) -> densekv's Storage with the same cookie arguments, one
    store per event loop on the run's server."""

    def make() -> densekv.AsyncSessionStore:
        client = aioredis.Redis.from_url(URL)
        RUN.clients.append(client)
        return _store(client)

    return Storage(make, **cookie)


@pytest.fixture(autouse=True)
async def _densekv_storage(request: pytest.FixtureRequest,
                           monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    if not DENSEKV:
        yield
        return
    RUN.namespace = f"peer{uuid.uuid4().hex[:12]}"
    module = request.module
    if hasattr(module, "RedisStorage"):
        for name, value in (("create_app", create_app), ("make_cookie", make_cookie),
                            ("load_cookie", load_cookie)):
            monkeypatch.setattr(module, name, value)
    if hasattr(module, "SimpleCookieStorage"):
        monkeypatch.setattr(module, "SimpleCookieStorage", simple_storage)
    yield
    while RUN.clients:
        await RUN.clients.pop().aclose()
