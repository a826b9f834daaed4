"""The web app the containers are measured through: Flask, run by gunicorn with one sync
worker (processes.AppServer), its session container chosen at start-up from the
environment (config.AppConfig).

Why Flask under gunicorn, one sync worker: Flask is the framework densekv's Flask backend
serves and Flask-Session (the JSON + SETEX baseline, and memcached) plugs into, so every
Redis and memcached container is the library people run, not a copy. One worker is what
makes an in-process dict one store (seed 003's MemoryStore lived in one dispatcher; with
two workers each would hold half the sessions), and a sync worker handles one request at
a time, so requests per second are the inverse of the time per request (app plus
container); the machine's other core is left to the load generator and the store
servers. Every container is measured in the same app with the same worker count.

Routes (every one answers text; none touches the session unless it says so):
  GET /health   "ok" without opening the session (readiness)
  GET /r        read the session: "hit" if it holds data, "miss" if not (a lost or
                expired session shows up as misses, not as speed)
  GET /w        read, then write: hits += 1 -> "hit N" or "new N" (a new session and cookie)
  GET /set?k=v  set keys (tests); GET /dump: the session as JSON (tests)
  /_lab/...     only with DENSEKV_CONTAINER_ADMIN=1, for the in-process dict, which only
                the worker can reach: POST fill (rows of [sid, JSON text], one expiry), POST
                sweep (housekeeping), GET rss (the worker's resident memory)
"""

from __future__ import annotations

import gc
import json
import os
import time
from datetime import timedelta
from typing import Any

from flask import Flask, Request, Response, jsonify, request, session
from flask.sessions import SessionInterface, SessionMixin
from werkzeug.datastructures import CallbackDict

from densekv.tools.lab.containers.config import COOKIE, FLASK_SESSION_PREFIX, AppConfig
from densekv.tools.lab.containers.stores import (
    DictStore,
    FileStore,
    SqlStore,
    Store,
    new_sid,
    valid_sid,
)


class StoreSession(CallbackDict[str, Any], SessionMixin):
    """Flask's session for the app's own stores: a dict that notes any change."""

    def __init__(self, data: dict[str, Any] | None = None, sid: str | None = None) -> None:
        def on_update(_: Any) -> None:
            self.modified = True

        super().__init__(data or {}, on_update)
        self.sid = sid
        self.modified = False


class StoreSessionInterface(SessionInterface):
    """Sessions in a stores.Store; the cookie holds the session id. A request that does
    not change its session writes nothing (Flask-Session and densekv are configured the
    same way: SESSION_REFRESH_EACH_REQUEST off)."""

    def __init__(self, store: Store, lifetime: int) -> None:
        self.store = store
        self.lifetime = lifetime

    def open_session(self, app: Flask, request: Request) -> StoreSession:
        sid = request.cookies.get(COOKIE)
        if valid_sid(sid):
            assert sid is not None
            data = self.store.load(sid, time.time())
            if data is not None:
                return StoreSession(data, sid)
        return StoreSession()

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        if not isinstance(session, StoreSession) or not session.modified:
            return
        if not session:
            if session.sid is not None:
                self.store.delete(session.sid)
                response.delete_cookie(COOKIE, path=self.get_cookie_path(app))
            return
        sid = session.sid or new_sid()
        self.store.save(sid, dict(session), time.time() + self.lifetime)
        if session.sid is None:
            response.set_cookie(COOKIE, sid, max_age=self.lifetime, httponly=True,
                                path=self.get_cookie_path(app))


def _plain_store(config: AppConfig) -> Store:
    name = config.container
    if name == "dict":
        return DictStore()
    if name in ("files-flat", "files-hashed"):
        return FileStore(config.files_root, hashed=name == "files-hashed", lifetime=config.lifetime)
    if name in ("sqlite-indexed", "sqlite-unindexed"):
        return SqlStore.sqlite(config.sqlite_path, indexed=name == "sqlite-indexed")
    if name in ("postgres-indexed", "postgres-unindexed"):
        return SqlStore.postgres(config.url, indexed=name == "postgres-indexed")
    raise ValueError(f"unknown container {name!r}")


def densekv_store(config: AppConfig, client: Any, **overrides: Any) -> Any:
    """The SessionStore of a densekv container (the app's, and the harness's for filling
    and sweeping: the same arguments, so both see one namespace the same way)."""
    from densekv import SessionStore

    if config.container == "densekv":
        kwargs: dict[str, Any] = {}
    elif config.container == "densekv-dense":
        kwargs = {"layout": "dense", "index_identities": True}
    else:
        raise ValueError(f"{config.container!r} is not a densekv container")
    return SessionStore(client, namespace=config.namespace, ttl=config.lifetime,
                        expected_sessions=config.expected, **kwargs, **overrides).open()


def install_container(app: Flask, config: AppConfig) -> Store | None:
    """Set app.session_interface for the container; the app's own Store if it has one."""
    name = config.container
    if name == "none":
        return None  # Flask's cookie session without a secret key: a null session, unused
    if name == "redis-json":
        import redis
        from flask_session.redis import RedisSessionInterface

        app.session_interface = RedisSessionInterface(
            app, client=redis.Redis.from_url(config.url), key_prefix=FLASK_SESSION_PREFIX,
            serialization_format="json")
        return None
    if name == "memcached":  # TCP_NODELAY: without it each write waits ~40 ms (delayed ACK)
        from flask_session.memcached import MemcachedSessionInterface
        from pymemcache.client.base import Client

        host, _, port = config.url.rpartition(":")
        app.session_interface = MemcachedSessionInterface(
            app, client=Client((host, int(port)), no_delay=True), key_prefix=FLASK_SESSION_PREFIX,
            serialization_format="json")
        return None
    if name in ("densekv", "densekv-dense"):
        import redis

        from densekv.integrations.flask import SessionInterface as DensekvInterface

        app.session_interface = DensekvInterface(densekv_store(config, redis.Redis.from_url(config.url)),
                                                 cookie_name=COOKIE)
        return None
    store = _plain_store(config)
    app.session_interface = StoreSessionInterface(store, config.lifetime)
    return store


def create_app(config: AppConfig | None = None) -> Flask:
    config = config or AppConfig.from_env()
    app = Flask("densekv-containers")
    app.config.update(
        SESSION_COOKIE_NAME=COOKIE,
        PERMANENT_SESSION_LIFETIME=timedelta(seconds=config.lifetime),
        SESSION_REFRESH_EACH_REQUEST=False,  # a read-only request writes nothing, in every container
    )
    store = install_container(app, config)
    none = config.container == "none"

    @app.get("/health")
    def health() -> str:
        return "ok"

    @app.get("/r")
    def read() -> str:
        if none:
            return "none"
        return "hit" if session else "miss"

    @app.get("/w")
    def write() -> str:
        if none:
            return "none"
        hit = bool(session)
        hits = int(session.get("hits", 0)) + 1
        session["hits"] = hits
        return f"{'hit' if hit else 'new'} {hits}"

    @app.get("/set")
    def set_keys() -> str:
        for key, value in request.args.items():
            session[key] = value
        return "ok"

    @app.get("/dump")
    def dump() -> Response:
        return jsonify({k: v for k, v in session.items() if k != "_permanent"})

    if config.admin and isinstance(store, DictStore):
        _admin_routes(app, store)
    return app


def _admin_routes(app: Flask, store: DictStore) -> None:
    @app.post("/_lab/fill")
    def fill() -> Response:
        args: dict[str, Any] = request.get_json(force=True)
        expires = float(args["expires"])
        count = store.fill((sid, json.loads(text), expires) for sid, text in args["rows"])
        return jsonify({"stored": count})

    @app.post("/_lab/sweep")
    def sweep() -> Response:
        as_of = float(request.get_json(force=True)["as_of"])
        t0 = time.perf_counter()
        removed = store.sweep(as_of)
        return jsonify({"removed": removed, "seconds": time.perf_counter() - t0})

    @app.get("/_lab/rss")
    def rss() -> Response:
        gc.collect()
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return Response(json.dumps({"rss": pages * os.sysconf("SC_PAGE_SIZE"), "sessions": len(store.items)}),
                        mimetype="application/json")
