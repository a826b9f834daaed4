"""The peers densekv's web sessions are compared with (issue 11), driven through their own
code, for benchmarks/web_sessions.py: Flask-Session 0.8 (RedisSessionInterface), Django's
cache session backend (django.contrib.sessions.backends.cache on RedisCache) and
starsessions 2.2 (RedisStore). Two jobs, one per half of the benchmark:

  * loaders: write N sessions exactly as the peer writes them (its serializer, its key
    names, its extra keys), fast enough for 1M, and read a sample back through the
    peer's own load path (a mismatch raises: a figure for bytes nobody writes is useless);
  * apps: one tiny app per framework whose session backend is either densekv's
    integration or the peer, with the framework's own test client (`Browser`).

What each peer writes for a session (the `data` of a profile, TTL 30 days):
  flask-session  SET session:<token_urlsafe(32)>  msgspec msgpack of {"_permanent": true, **data}
  django-cache   SET :1:django.contrib.sessions.cache<32 [a-z0-9]>  pickle (protocol 5) of data
  django-redis   the same key, written by django-redis's RedisCache (its pickle of data):
                 the e2e part's second Django peer (--frameworks django-redis), when
                 django-redis is installed (`pip install django-redis`)
  starsessions   SET starsessions.<token_hex(16)>  JSON of {**data, "__metadata__": {lifetime,
                 created, last_access}}
Loading one request at a time costs a round trip (~50 us) per session, so the loaders hand
the peer a redis-py pipeline where it takes a client and execute it every PIPELINE_EVERY
sessions; `driven` (one sentence per peer, copied into each record) says exactly how.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar, Protocol

import redis

PIPELINE_EVERY = 1000
COOKIE = "session"  # the cookie name in every app, as in tests/web/apps
SECRET = "web-sessions-benchmark-not-a-secret"

Item = tuple[int, Any, dict[str, Any]]  # (n, identity or None, data) of a profile
Sample = tuple[str, dict[str, Any]]  # (session id the peer gave out, data it must load)


class Loader(Protocol):
    name: str
    driven: str

    def load(self, items: Iterable[Item], keep: Callable[[int], bool]) -> list[Sample]:
        """Write every item; return (id, expected loaded data) for the items `keep` picks."""

    def verify(self, samples: list[Sample]) -> None:
        """Read the samples back through the peer's own load path; raise on a mismatch."""

    def close(self) -> None: ...


def _check(peer: str, sid: str, got: Any, want: dict[str, Any]) -> None:
    if got != want:
        raise AssertionError(f"{peer}: session {sid[:8]}... loads as {got!r}, expected {want!r}")


# -- Flask-Session ---------------------------------------------------------------------------
def flask_session_app(client: redis.Redis, ttl: int) -> Any:
    """A Flask app whose session interface is Flask-Session's, built by flask_session.Session
    from its documented config (SESSION_TYPE="redis", SESSION_REDIS=client)."""
    from flask import Flask
    from flask_session import Session

    app = Flask("web_peers_flask_session")
    app.config.update(SECRET_KEY=SECRET, SESSION_TYPE="redis", SESSION_REDIS=client,
                      PERMANENT_SESSION_LIFETIME=timedelta(seconds=ttl))
    Session(app)
    return app


class FlaskSessionLoader:
    name = "flask-session"
    driven = ("flask_session.Session(app) with SESSION_REDIS = a redis-py pipeline (a Redis "
              "subclass); per session the interface's open_session() on a cookie-less request, "
              "session.update(data), save_session() -> SET session:<sid> msgpack EX ttl; pipeline "
              f"executed every {PIPELINE_EVERY}; verified through open_session() with the cookie")

    def __init__(self, url: str, ttl: int) -> None:
        self.client = redis.Redis.from_url(url)
        self.pipe = self.client.pipeline(transaction=False)
        self.app = flask_session_app(self.pipe, ttl)
        self.ttl = ttl

    def load(self, items: Iterable[Item], keep: Callable[[int], bool]) -> list[Sample]:
        app, iface, pipe = self.app, self.app.session_interface, self.pipe
        request = app.request_class({"REQUEST_METHOD": "GET", "SERVER_NAME": "localhost",
                                     "SERVER_PORT": "80", "wsgi.url_scheme": "http"})
        samples: list[Sample] = []
        for n, _identity, data in items:
            session = iface.open_session(app, request)  # a new visitor: fresh sid, permanent
            session.update(data)
            iface.save_session(app, session, app.response_class())
            if keep(n):
                samples.append((session.sid, dict(session)))
            if len(pipe) >= PIPELINE_EVERY:
                pipe.execute()
        pipe.execute()
        return samples

    def verify(self, samples: list[Sample]) -> None:
        app = flask_session_app(self.client, self.ttl)  # the same interface on a plain client
        for sid, want in samples:
            with app.test_request_context("/", headers={"Cookie": f"{COOKIE}={sid}"}):
                from flask import request

                session = app.session_interface.open_session(app, request)
                _check(self.name, sid, dict(session) if session.sid == sid else None, want)

    def close(self) -> None:
        self.client.close()


# -- Django's cache backend ------------------------------------------------------------------
#: the cache backend under Django's cache session engine, per Django peer
CACHE_BACKENDS = {"django-cache": "django.core.cache.backends.redis.RedisCache",
                  "django-redis": "django_redis.cache.RedisCache"}


def django_configure(url: str, ttl: int, densekv: dict[str, Any] | None = None,
                     cache: str = "django-cache") -> None:
    """Configure Django once per process: the `cache` peer's cache backend on `url` (Django's
    RedisCache, or django-redis's), the cache session engine, cookie "session", and
    DENSEKV_SESSIONS for densekv's engine (the timing half switches SESSION_ENGINE per test
    client)."""
    import django
    from django.conf import settings

    if settings.configured:
        return
    settings.configure(
        SECRET_KEY=SECRET, DEBUG=False, ALLOWED_HOSTS=["testserver"], USE_TZ=True,
        INSTALLED_APPS=[], DATABASES={},
        CACHES={"default": {"BACKEND": CACHE_BACKENDS[cache], "LOCATION": url}},
        SESSION_ENGINE="django.contrib.sessions.backends.cache",
        SESSION_COOKIE_NAME=COOKIE, SESSION_COOKIE_AGE=ttl,
        MIDDLEWARE=["django.contrib.sessions.middleware.SessionMiddleware"],
        ROOT_URLCONF=DjangoUrls,
        DENSEKV_SESSIONS=densekv or {"url": url},
    )
    django.setup()


class DjangoUrls:
    """ROOT_URLCONF (Django takes any object with `urlpatterns`): GET /get/<key>, POST /seed."""

    urlpatterns: ClassVar[list[Any]] = []

    @classmethod
    def build(cls) -> None:
        from django.http import JsonResponse
        from django.urls import path

        def get(request: Any, key: str) -> Any:
            return JsonResponse({"value": request.session.get(key)})

        def seed(request: Any) -> Any:
            request.session.update(json.loads(request.body))
            return JsonResponse({"ok": True})

        cls.urlpatterns = [path("get/<str:key>", get), path("seed", seed)]


class DjangoCacheLoader:
    name = "django-cache"
    driven = ("django.contrib.sessions.backends.cache.SessionStore() per session: update(data), "
              "save() -> create(): its EXISTS check on a new key is a live round trip (on one "
              "redis.Redis of Django's pool, not a new one per call), its cache.add() (SET NX EX, pickled by RedisSerializer) goes to a redis-py pipeline "
              "returned by the RedisCacheClient's get_client(write=True) (RedisCache takes no "
              f"client object), executed every {PIPELINE_EVERY}; verified with "
              "SessionStore(key).load()")

    def __init__(self, url: str, ttl: int) -> None:
        django_configure(url, ttl)
        self.client = redis.Redis.from_url(url)
        self.pipe = self.client.pipeline(transaction=False)

    @contextlib.contextmanager
    def _writes_pipelined(self) -> Iterator[None]:
        from django.core.cache import caches

        cache_client = caches["default"]._cache  # RedisCacheClient
        # Django builds a new redis.Redis (~60 us) on its pool for every call: one is kept
        # for the reads here, which changes no byte written
        reader = cache_client.get_client(None, write=False)

        def get_client(key: Any = None, *, write: bool = False) -> Any:
            return self.pipe if write else reader

        cache_client.get_client = get_client
        try:
            yield
        finally:
            del cache_client.get_client  # back to the class's method
            for pool in cache_client._pools.values():
                pool.disconnect()  # the meter wants the loading connections closed

    def load(self, items: Iterable[Item], keep: Callable[[int], bool]) -> list[Sample]:
        from django.contrib.sessions.backends.cache import SessionStore

        samples: list[Sample] = []
        with self._writes_pipelined():
            for n, _identity, data in items:
                store = SessionStore()
                store.update(data)
                store.save()
                if keep(n):
                    samples.append((store.session_key, dict(data)))  # type: ignore[arg-type]
                self._written(False)
            self._written(True)
        return samples

    def _written(self, last: bool) -> None:
        if last or len(self.pipe) >= PIPELINE_EVERY:
            self.pipe.execute()

    def verify(self, samples: list[Sample]) -> None:
        from django.contrib.sessions.backends.cache import SessionStore

        for key, want in samples:
            _check(self.name, key, SessionStore(session_key=key).load(), want)

    def close(self) -> None:
        from django.core.cache import caches

        for pool in caches["default"]._cache._pools.values():
            pool.disconnect()
        self.client.close()


# -- starsessions ----------------------------------------------------------------------------
class StarsessionsLoader:
    name = "starsessions"
    driven = ("starsessions SessionHandler (what its SessionMiddleware runs per request) on a "
              "cookie-less connection: load(), session.update(data), save(remaining seconds) -> "
              "RedisStore(connection=a redis.asyncio pipeline).write -> SET starsessions.<hex> "
              f"JSON EX; pipeline executed every {PIPELINE_EVERY}; verified with a handler "
              "that loads the cookie's session on a plain connection")

    def __init__(self, url: str, ttl: int) -> None:
        self.url = url
        self.ttl = ttl

    async def _load(self, items: Iterable[Item], keep: Callable[[int], bool]) -> list[Sample]:
        from redis.asyncio import Redis
        from starlette.requests import HTTPConnection
        from starsessions import JsonSerializer
        from starsessions.session import SessionHandler, get_session_remaining_seconds
        from starsessions.stores.redis import RedisStore

        conn = Redis.from_url(self.url)
        pipe = conn.pipeline(transaction=False)
        store, serializer = RedisStore(connection=pipe), JsonSerializer()
        samples: list[Sample] = []
        try:
            for n, _identity, data in items:
                scope: dict[str, Any] = {"type": "http", "headers": []}
                connection = HTTPConnection(scope)
                handler = SessionHandler(connection, None, store, serializer, self.ttl)
                scope["session_handler"] = handler
                await handler.load()
                connection.session.update(data)
                sid = await handler.save(get_session_remaining_seconds(connection))
                if keep(n):
                    samples.append((sid, dict(data)))
                if len(pipe) >= PIPELINE_EVERY:
                    await pipe.execute()
            await pipe.execute()
        finally:
            await conn.aclose()
        return samples

    def load(self, items: Iterable[Item], keep: Callable[[int], bool]) -> list[Sample]:
        return asyncio.run(self._load(items, keep))

    async def _verify(self, samples: list[Sample]) -> None:
        from redis.asyncio import Redis
        from starlette.requests import HTTPConnection
        from starsessions import JsonSerializer
        from starsessions.session import SessionHandler
        from starsessions.stores.redis import RedisStore

        conn = Redis.from_url(self.url)
        try:
            for sid, want in samples:
                scope: dict[str, Any] = {"type": "http",
                                         "headers": [(b"cookie", f"{COOKIE}={sid}".encode())]}
                connection = HTTPConnection(scope)
                handler = SessionHandler(connection, connection.cookies.get(COOKIE),
                                         RedisStore(connection=conn), JsonSerializer(), self.ttl)
                await handler.load()
                _check(self.name, sid, dict(connection.session), want)
                if not handler.metadata or handler.metadata["lifetime"] != self.ttl:
                    raise AssertionError(f"starsessions: session {sid[:8]}... lost its metadata")
        finally:
            await conn.aclose()

    def verify(self, samples: list[Sample]) -> None:
        asyncio.run(self._verify(samples))

    def close(self) -> None:
        pass


class AiohttpSessionLoader:
    name = "aiohttp-session"
    driven = ("aiohttp_session.redis_storage.RedisStorage's own format, written as its "
              "save_session() writes it: SET <cookie_name>_<uuid4 hex> json.dumps({'created', "
              "'session'}) EX max_age (cookie_name 'session', the cookie value the uuid hex), "
              f"on a redis-py pipeline executed every {PIPELINE_EVERY}; verified with a GET and "
              "json.loads as its load_session() reads it")

    def __init__(self, url: str, ttl: int) -> None:
        self.client = redis.Redis.from_url(url)
        self.ttl = ttl

    def load(self, items: Iterable[Item], keep: Callable[[int], bool]) -> list[Sample]:
        pipe = self.client.pipeline(transaction=False)
        kept: list[Sample] = []
        created = int(time.time())
        for n, _identity, data in items:
            sid = uuid.uuid4().hex
            pipe.set(f"{COOKIE}_{sid}", json.dumps({"created": created, "session": data}), ex=self.ttl)
            if keep(n):
                kept.append((sid, data))
            if len(pipe) >= PIPELINE_EVERY:
                pipe.execute()
        pipe.execute()
        return kept

    def verify(self, samples: list[Sample]) -> None:
        for sid, want in samples:
            raw = self.client.get(f"{COOKIE}_{sid}")
            if raw is None or json.loads(raw)["session"] != want:
                raise AssertionError("aiohttp-session: a stored session reads back different")

    def close(self) -> None:
        self.client.close()


class DjangoRedisLoader(DjangoCacheLoader):
    """DjangoCacheLoader's load on django-redis's RedisCache, one session at a time."""

    name = "django-redis"
    driven = ("django.contrib.sessions.backends.cache.SessionStore() per session on django-redis's "
              "RedisCache: update(data), save() -> create() (its EXISTS, then django-redis's "
              "SET NX EX of its pickle), one session at a time; verified with "
              "SessionStore(key).load()")

    def __init__(self, url: str, ttl: int) -> None:
        try:
            import django_redis  # noqa: F401  # the issue's "django-redis if it installs"
        except ImportError as exc:
            raise SystemExit("the django-redis peer needs django-redis: pip install django-redis") from exc
        django_configure(url, ttl, cache="django-redis")
        self.client = redis.Redis.from_url(url)

    def _writes_pipelined(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # django-redis takes no pipeline: its own client writes

    def _written(self, last: bool) -> None:
        pass

    def close(self) -> None:
        from django.core.cache import caches

        caches["default"].close()
        self.client.close()


LOADERS: dict[str, type[FlaskSessionLoader | DjangoCacheLoader | StarsessionsLoader | AiohttpSessionLoader]] = {
    "flask-session": FlaskSessionLoader,
    "django-cache": DjangoCacheLoader,
    "django-redis": DjangoRedisLoader,
    "starsessions": StarsessionsLoader,
    "aiohttp-session": AiohttpSessionLoader,
}
#: the peer each framework's timing compares densekv with
PEER_OF = {"flask": "flask-session", "flask-norefresh": "flask-session",
           "django": "django-cache", "django-redis": "django-redis", "starlette": "starsessions",
           "aiohttp": "aiohttp-session"}
#: the app a framework variant serves: Flask without refresh is Flask, Django against
#: django-redis is Django (the same densekv engine; the peer's cache backend differs)
BASE = {"flask-norefresh": "flask", "django-redis": "django"}


def base(framework: str) -> str:
    return BASE.get(framework, framework)


# -- apps for the request timing ---------------------------------------------------------
class Browser(Protocol):
    """One backend's app behind the framework's own test client."""

    def seed(self, data: dict[str, Any]) -> str:
        """POST /seed: the app stores `data` in a new session; returns the cookie value."""

    def read(self, cookie: str, key: str) -> Any:
        """GET /get/<key> with that cookie; returns the session's value."""

    def close(self) -> None: ...


_SET_COOKIE = re.compile(COOKIE + r"=([^;]*)")


def _cookie_from(headers: Iterable[str]) -> str:
    for header in headers:
        m = _SET_COOKIE.match(header.strip())
        if m and m.group(1) not in ("", "''", '""'):
            return m.group(1)
    raise AssertionError("the app set no session cookie")


def flask_app(interface: Any, ttl: int, *, refresh: bool = True) -> Any:
    """GET /get/<key>, POST /seed; `refresh` is SESSION_REFRESH_EACH_REQUEST (Flask's default
    True makes Flask-Session, whose sessions are permanent by default, SET on every read)."""
    from flask import Flask, request, session

    app = Flask("web_sessions_flask")
    app.config.update(SECRET_KEY=SECRET, PERMANENT_SESSION_LIFETIME=timedelta(seconds=ttl),
                      SESSION_REFRESH_EACH_REQUEST=refresh)
    app.session_interface = interface

    @app.get("/get/<key>")
    def get(key: str) -> Any:
        return {"value": session.get(key)}

    @app.post("/seed")
    def seed() -> Any:
        session.update(request.get_json())
        return {"ok": True}

    return app


class FlaskBrowser:
    def __init__(self, app: Any) -> None:
        self.client = app.test_client(use_cookies=False)

    def seed(self, data: dict[str, Any]) -> str:
        resp = self.client.post("/seed", json=data)
        assert resp.status_code == 200, resp.status_code
        return _cookie_from(resp.headers.getlist("Set-Cookie"))

    def read(self, cookie: str, key: str) -> Any:
        resp = self.client.get(f"/get/{key}", headers={"Cookie": f"{COOKIE}={cookie}"})
        return resp.get_json()["value"]

    def close(self) -> None:
        pass


def flask_peer_browser(url: str, ttl: int, *, refresh: bool = True) -> FlaskBrowser:
    app = flask_session_app(redis.Redis.from_url(url), ttl)
    return FlaskBrowser(flask_app(app.session_interface, ttl, refresh=refresh))


class DjangoBrowser:
    def __init__(self, engine: str) -> None:
        from django.test import Client
        from django.test.utils import override_settings

        if not DjangoUrls.urlpatterns:
            DjangoUrls.build()
        self.client = Client()
        with override_settings(SESSION_ENGINE=engine):  # read once, when the middleware loads
            self.client.get("/get/warm")

    def seed(self, data: dict[str, Any]) -> str:
        self.client.cookies.clear()
        resp = self.client.post("/seed", data=json.dumps(data), content_type="application/json")
        assert resp.status_code == 200, resp.status_code
        return str(resp.cookies[COOKIE].value)

    def read(self, cookie: str, key: str) -> Any:
        self.client.cookies[COOKIE] = cookie
        return self.client.get(f"/get/{key}").json()["value"]

    def close(self) -> None:
        pass


def starlette_app(middleware: Any, *, load_first: bool) -> Any:
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def get(request: Any) -> Any:
        if load_first:  # starsessions loads on demand (or with its autoload middleware)
            from starsessions import load_session

            await load_session(request)
        return JSONResponse({"value": request.session.get(request.path_params["key"])})

    async def seed(request: Any) -> Any:
        if load_first:
            from starsessions import load_session

            await load_session(request)
        request.session.update(await request.json())
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/get/{key}", get), Route("/seed", seed, methods=["POST"])],
                     middleware=[middleware])


class StarletteBrowser:
    def __init__(self, app: Any) -> None:
        from starlette.testclient import TestClient

        self.client = TestClient(app)
        self.client.__enter__()  # one event loop (portal) for every request

    def seed(self, data: dict[str, Any]) -> str:
        self.client.cookies.clear()  # a new visitor
        resp = self.client.post("/seed", json=data)
        assert resp.status_code == 200, resp.status_code
        return _cookie_from(resp.headers.get_list("set-cookie"))

    def read(self, cookie: str, key: str) -> Any:
        self.client.cookies.clear()
        resp = self.client.get(f"/get/{key}", headers={"Cookie": f"{COOKIE}={cookie}"})
        return resp.json()["value"]

    def close(self) -> None:
        self.client.__exit__(None, None, None)


def starlette_peer_browser(url: str, ttl: int) -> StarletteBrowser:
    from redis.asyncio import Redis
    from starlette.middleware import Middleware
    from starsessions import SessionMiddleware
    from starsessions.stores.redis import RedisStore

    mw = Middleware(SessionMiddleware, store=RedisStore(connection=Redis.from_url(url)),
                    lifetime=ttl)
    return StarletteBrowser(starlette_app(mw, load_first=True))


# -- apps served by a real server (the end-to-end half: gunicorn / uvicorn + wrk) -----------
# Each worker builds its app from the environment after the fork: E2E_URL, E2E_BACKEND
# ("densekv" or "peer"), E2E_TTL, E2E_SESSIONS (the densekv store's expected_sessions, as
# its loader opened the namespace), E2E_REFRESH ("0": SESSION_REFRESH_EACH_REQUEST=False).
def _e2e() -> tuple[str, bool, int, int]:
    return (os.environ["E2E_URL"], os.environ["E2E_BACKEND"] == "densekv",
            int(os.environ["E2E_TTL"]), int(os.environ["E2E_SESSIONS"]))


def e2e_flask() -> Any:
    """gunicorn 'web_peers:e2e_flask()': densekv's SessionInterface.from_url (a store per
    worker, built on its first request) or Flask-Session's."""
    url, ours, ttl, n = _e2e()
    if ours:
        from densekv.integrations.flask import SessionInterface

        interface = SessionInterface.from_url(url, namespace="sess", expected_sessions=n, ttl=ttl)
    else:
        interface = flask_session_app(redis.Redis.from_url(url), ttl).session_interface
    return flask_app(interface, ttl, refresh=os.environ.get("E2E_REFRESH", "1") != "0")


def e2e_django() -> Any:
    """gunicorn 'web_peers:e2e_django()': densekv's engine, or Django's cache session engine
    on Django's RedisCache or (E2E_CACHE=django-redis) on django-redis's."""
    from django.conf import settings
    from django.core.wsgi import get_wsgi_application

    url, ours, ttl, n = _e2e()
    django_configure(url, ttl, {"url": url, "namespace": "sess", "expected_sessions": n,
                                "ttl": ttl}, cache=os.environ.get("E2E_CACHE", "django-cache"))
    settings.SESSION_ENGINE = ("densekv.integrations.django" if ours
                               else "django.contrib.sessions.backends.cache")
    DjangoUrls.build()
    return get_wsgi_application()


def e2e_starlette() -> Any:
    """uvicorn --factory 'web_peers:e2e_starlette': densekv's middleware (one store per
    worker's loop, from the url) or starsessions' with load_session() in the route."""
    from starlette.middleware import Middleware

    url, ours, ttl, n = _e2e()
    if ours:
        from densekv.integrations.starlette import SessionMiddleware

        options = {"namespace": "sess", "expected_sessions": n, "ttl": ttl}
        return starlette_app(Middleware(SessionMiddleware, url=url, store_options=options,
                                        max_age=ttl), load_first=False)
    from redis.asyncio import Redis
    from starsessions import SessionMiddleware as Starsessions
    from starsessions.stores.redis import RedisStore

    mw = Middleware(Starsessions, store=RedisStore(connection=Redis.from_url(url)), lifetime=ttl)
    return starlette_app(mw, load_first=True)


def e2e_aiohttp() -> Any:
    """aiohttp_workers() serves 'web_peers:e2e_aiohttp()': densekv's Storage (a
    store per worker's event loop, from the url) or aiohttp-session's RedisStorage, both with
    the cookie `session` and max_age ttl; GET /get/{key}, POST /seed."""
    import aiohttp_session
    from aiohttp import web

    url, ours, ttl, n = _e2e()
    storage: Any
    if ours:
        import densekv
        from densekv.integrations.aiohttp import Storage

        def make() -> Any:
            import redis.asyncio

            return densekv.AsyncSessionStore(redis.asyncio.Redis.from_url(url), namespace="sess",
                                             expected_sessions=n, ttl=ttl)

        storage = Storage(make, cookie_name=COOKIE, max_age=ttl)
    else:
        import redis.asyncio
        from aiohttp_session.redis_storage import RedisStorage

        storage = RedisStorage(redis.asyncio.Redis.from_url(url), cookie_name=COOKIE, max_age=ttl)

    async def get(request: web.Request) -> web.Response:
        session = await aiohttp_session.get_session(request)
        return web.json_response({"value": session.get(request.match_info["key"])})

    async def seed(request: web.Request) -> web.Response:
        session = await aiohttp_session.get_session(request)
        session.update(await request.json())
        return web.json_response({"ok": True})

    app = web.Application()
    aiohttp_session.setup(app, storage)
    app.router.add_get("/get/{key}", get)
    app.router.add_post("/seed", seed)
    return app


def reuseport_workers(port: int, workers: int, run: Callable[[Any], None]) -> None:
    """`workers` forked processes that each bind their own listening socket to the port with
    SO_REUSEPORT and call run(sock), so the kernel spreads wrk's connections over them. Under
    uvicorn's own --workers, or gunicorn's workers of an asyncio app, the processes share one
    socket and whichever event loop wakes first accepts every connection waiting (asyncio
    accepts up to its backlog per wake-up): measured here, req/s of the same app came out at
    ~4,700 or ~6,800 per round depending on whether both workers got connections (Starlette
    under uvicorn; aiohttp under gunicorn's aiohttp.GunicornWebWorker swung by a third the
    same way). Each socket also says it is TCP: uvicorn 0.54 binds with proto 0, so asyncio
    leaves TCP_NODELAY off on every accepted connection and each keep-alive response waits
    ~40 ms for the client's delayed ACK (uvicorn issue 3149: 92 req/s for a hello-world
    app). Both apps of a pair alike."""
    import socket

    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:  # a worker: its own socket, one server
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(("127.0.0.1", port))
            sock.listen(2048)
            try:
                run(sock)
            finally:
                os._exit(0)
        children.append(pid)
    for pid in children:  # the group is stopped by serve()'s caller (killpg)
        os.waitpid(pid, 0)


def uvicorn_workers(port: int, workers: int = 2) -> None:
    """`uvicorn --workers 2 --factory web_peers:e2e_starlette`, as reuseport_workers."""
    def run(sock: Any) -> None:
        import uvicorn

        config = uvicorn.Config("web_peers:e2e_starlette", factory=True, access_log=False,
                                log_level="warning")
        uvicorn.Server(config).run(sockets=[sock])

    reuseport_workers(port, workers, run)


def _not_connection_lost(record: Any) -> bool:
    """A logging filter: False for a request the client dropped (ConnectionResetError)."""
    return not (record.exc_info and isinstance(record.exc_info[1], ConnectionResetError))


def aiohttp_workers(port: int, workers: int = 2) -> None:
    """`gunicorn -w 2 -k aiohttp.GunicornWebWorker 'web_peers:e2e_aiohttp()'`, as
    reuseport_workers: aiohttp's own web.run_app on each worker's socket (aiohttp sets
    TCP_NODELAY on every connection it accepts)."""
    def run(sock: Any) -> None:
        import logging

        from aiohttp import web

        # wrk closes its connections at the end of a run with requests in flight: aiohttp
        # logs each as an error with its traceback (both apps alike); wrk counts real errors
        logging.getLogger("aiohttp.server").addFilter(_not_connection_lost)
        web.run_app(e2e_aiohttp(), sock=sock, access_log=None, print=None)

    reuseport_workers(port, workers, run)


#: how each framework's app is served: 2 sync gunicorn workers, or 2 uvicorn workers
SERVE = {"flask": ["gunicorn", "-w", "2", "-k", "sync", "web_peers:e2e_flask()"],
         "django": ["gunicorn", "-w", "2", "-k", "sync", "web_peers:e2e_django()"],
         "starlette": ["uvicorn", "--workers", "2", "--factory web_peers:e2e_starlette"],
         "aiohttp": ["aiohttp", "--workers", "2", "web_peers:e2e_aiohttp()"]}

#: what a record's "served" says for the apps SERVE does not start as written
SERVED_AS = {"starlette": "2 uvicorn servers, one SO_REUSEPORT socket each (web_peers.uvicorn_workers)",
             "aiohttp": "2 aiohttp web.run_app servers, one SO_REUSEPORT socket each (web_peers.aiohttp_workers)"}


def serve(framework: str, ours: bool, url: str, ttl: int, n: int, port: int) -> Any:
    """Start one app server (its own process group) on 127.0.0.1:port."""
    argv = list(SERVE[base(framework)])
    if argv[0] in ("uvicorn", "aiohttp"):  # asyncio workers: one SO_REUSEPORT socket each
        argv = ["-c", f"import web_peers; web_peers.{argv[0]}_workers({port}, {argv[2]})"]
    else:
        argv = ["-m", *argv[:-1], "-b", f"127.0.0.1:{port}", "--log-level", "warning", argv[-1]]
    here = str(Path(__file__).resolve().parent)
    env = {**os.environ, "E2E_URL": url, "E2E_BACKEND": "densekv" if ours else "peer",
           "E2E_TTL": str(ttl), "E2E_SESSIONS": str(n),
           "E2E_REFRESH": "0" if framework.endswith("-norefresh") else "1",
           "E2E_CACHE": PEER_OF[framework] if base(framework) == "django" else "",
           "PYTHONPATH": os.pathsep.join(filter(None, (os.environ.get("PYTHONPATH"), here)))}
    return subprocess.Popen([sys.executable, *argv], env=env,
                            start_new_session=True)


def http_get(port: str | int, path: str, cookie: str) -> Any:
    from urllib.request import Request, urlopen

    with urlopen(Request(f"http://127.0.0.1:{port}{path}", headers={"Cookie": f"session={cookie}"}),
                 timeout=10) as resp:
        return json.loads(resp.read())


def wait_up(port: int, proc: Any, cookie: str, key: str = "_auth_user_id") -> Any:
    deadline = time.monotonic() + 60
    while True:
        try:
            return http_get(port, f"/get/{key}", cookie)["value"]
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the app on port {port} did not come up") from None
            time.sleep(0.2)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
