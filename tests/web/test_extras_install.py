"""Moving in works from a minimal install of each framework extra, as a user installs it.

For flask, starlette, django and quart: a fresh venv (`python -m venv`), `pip install '<this
source>[<extra>]'` and nothing else (Flask-Login too for flask: the users who move from
Flask-Session are logged in by it), no Flask-Session, starsessions or msgspec. The old
backend writes a live session into the test's real server (Flask-Session and starsessions
from this interpreter; Django's cache backend from the venv, it is part of Django), then the
densekv app, set up as the framework's guide says, serves a request with the old cookie in
the venv through the framework: the user is still logged in (or their data is there), the
session is in densekv under the same cookie value, and the old key is gone.

The same for the aiohttp extra: aiohttp-session's RedisStorage writes the old session, the
densekv app in a venv holding only `.[aiohttp]` moves it in through aiohttp's test server.

And the litestar extra: a venv with only `.[litestar]` (so no Starlette) logs a user in
through Litestar, and moves in a session that Litestar's own ServerSideSessionConfig wrote to
its RedisStore (Litestar's, in the venv: it is part of Litestar).

And the docs extra: a venv with only `.[docs]` builds the site with `mkdocs build --strict`,
signatures formatted (README says that is the extra to install).

pip reuses the wheels of its cache: with a warm cache the four venvs take about 65 s together
on the shared 2-core machine (flask 13 s, starlette 12 s, django 9 s, docs 31 s; a cold cache
downloads about 60 MB first). Skipped when PyPI cannot be reached.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import sys
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest

from densekv.tools.server.process import ServerProcess

ROOT = Path(__file__).resolve().parents[2]


def _pypi_reachable() -> bool:
    try:
        with socket.create_connection(("pypi.org", 443), timeout=3):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This tree's files (tracked or new, not ignored) copied out, so pip's in-tree build
    writes its build/ and egg-info there, not into the checkout."""
    if not _pypi_reachable():
        pytest.skip("PyPI cannot be reached: the extras cannot be installed as a user would")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    out = tmp_path_factory.mktemp("src")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, out / name)
    return out


def venv_with(extra: str, source: Path, base: Path, *more: str) -> Path:
    """The python of a new venv holding densekv[extra] (and `more`), installed from source."""
    where = base / f"venv-{extra}"
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
         f"{source}[{extra}]", *more], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return python


def run_in(python: Path, script: str, *args: str, cwd: Path) -> Any:
    """Run `script` with the venv's python (outside the checkout: densekv is the venv's);
    its last stdout line is JSON."""
    path = cwd / f"script_{uuid.uuid4().hex[:8]}.py"
    path.write_text(script)
    done = subprocess.run([str(python), str(path), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def missing_in(python: Path, *modules: str) -> list[str]:
    found = run_in(python, "import importlib.util, json, sys\n"
                   "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]))\n",
                   *modules, cwd=python.parent)
    return list(found)


@pytest.fixture
def server(fresh_server: Any) -> ServerProcess:
    return fresh_server()  # type: ignore[no-any-return]  # one server: the point is the install


# -- Flask, from Flask-Session 0.8 -------------------------------------------------------------
FLASK_APP = """
import json, sys
import flask, redis
from flask_login import LoginManager, UserMixin, current_user
from densekv.integrations.flask import FlaskSessionFallback, SessionInterface

url, namespace, sid = sys.argv[1:4]
app = flask.Flask("moved_in")
app.config["SECRET_KEY"] = "flask-login's remember cookie needs one"
old = redis.Redis.from_url(url)
app.session_interface = SessionInterface.from_url(
    url, namespace=namespace, fallback=FlaskSessionFallback(old, key_prefix="session:"))
manager = LoginManager(app)

class User(UserMixin):
    def __init__(self, uid):
        self.id = uid

manager.user_loader(User)

@app.get("/me")
def me():
    return {"user": current_user.get_id() if current_user.is_authenticated else None,
            "cart": flask.session.get("cart"), "at": flask.session.get("at").isoformat()}

client = app.test_client()
client.set_cookie("session", sid)
response = client.get("/me")
store = app.session_interface.store
print(json.dumps({"status": response.status_code, "body": response.get_json(silent=True),
                  "cookie": client.get_cookie("session").value,
                  "listed": [s.id for s in store.sessions_of(12)] == [store.get(sid).id],
                  "old_left": old.exists("session:" + sid)}))
"""


def test_flask_extra_moves_a_flask_session_user_in(source: Path,
                                                   server: ServerProcess, tmp_path: Path) -> None:
    import datetime as dt

    from flask import Flask, session
    from flask_session import Session as FlaskSessionExtension

    python = venv_with("flask", source, tmp_path, "Flask-Login>=0.6.3")
    assert missing_in(python, "flask_session", "msgspec") == ["flask_session", "msgspec"]
    with server.client() as client:
        old_app = Flask("before_the_move")
        old_app.config.update(SESSION_TYPE="redis", SESSION_REDIS=client)
        FlaskSessionExtension(old_app)

        @old_app.post("/login")
        def login() -> str:
            session.update({"_user_id": "12", "_fresh": True, "cart": ["A-1"],
                            "at": dt.datetime(2026, 11, 28, 9, 0, tzinfo=dt.timezone.utc)})
            return "ok"

        old = old_app.test_client()
        old.post("/login")
        sid = old.get_cookie("session").value  # type: ignore[union-attr]
        assert client.exists(f"session:{sid}")
        namespace = f"mv{uuid.uuid4().hex[:8]}"
        seen = run_in(python, FLASK_APP, server.url, namespace, sid, cwd=tmp_path)
    assert seen["status"] == 200
    assert seen["body"] == {"user": "12", "cart": ["A-1"], "at": "2026-11-28T09:00:00+00:00"}
    assert seen["cookie"] == sid and seen["listed"] and not seen["old_left"]


# -- Starlette, from starsessions ---------------------------------------------------------------
STARLETTE_APP = """
import asyncio, json, sys
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
import redis
from densekv.integrations.starlette import SessionMiddleware, StarsessionsRedis

url, namespace, sid = sys.argv[1:4]

async def me(request):
    return JSONResponse({"user": request.session.get("user"), "cart": request.session.get("cart")})

app = Starlette(routes=[Route("/me", me)])
app.add_middleware(SessionMiddleware, url=url, store_options={"namespace": namespace},
                   move_in=StarsessionsRedis())

async def get(path, cookie):  # one request through the ASGI app (no HTTP client installed)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "client": ("127.0.0.1", 1), "server": ("test", 80),
             "headers": [(b"host", b"test"), (b"cookie", b"session=" + cookie.encode())]}
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body)

status, body = asyncio.run(get("/me", sid))
old = redis.Redis.from_url(url)
print(json.dumps({"status": status, "body": body,
                  "old_left": old.exists("starsessions." + sid)}))
"""


def test_starlette_extra_moves_a_starsessions_session_in(source: Path,
                                                         server: ServerProcess, tmp_path: Path) -> None:
    import redis.asyncio
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient
    from starsessions import SessionAutoloadMiddleware
    from starsessions import SessionMiddleware as StarsessionsMiddleware
    from starsessions.stores.redis import RedisStore

    python = venv_with("starlette", source, tmp_path)
    assert missing_in(python, "starsessions", "httpx") == ["starsessions", "httpx"]

    async def put(request: Request) -> JSONResponse:
        request.session.update({"user": "ann", "cart": [1, 2]})
        return JSONResponse({})

    connection = redis.asyncio.Redis.from_url(server.url)
    old_app = Starlette(routes=[Route("/put", put, methods=["POST"])], middleware=[
        Middleware(StarsessionsMiddleware, store=RedisStore(connection=connection), lifetime=600,
                   cookie_https_only=False),
        Middleware(SessionAutoloadMiddleware)])
    with TestClient(old_app) as tc:
        tc.post("/put")
        sid = tc.cookies["session"]
        tc.portal.call(connection.aclose)
    namespace = f"mv{uuid.uuid4().hex[:8]}"
    seen = run_in(python, STARLETTE_APP, server.url, namespace, sid, cwd=tmp_path)
    assert seen == {"status": 200, "body": {"user": "ann", "cart": [1, 2]}, "old_left": 0}
    with server.client() as client:
        import densekv

        moved = densekv.SessionStore(client, namespace=namespace).get(sid)
        assert moved is not None and moved.data == {"user": "ann", "cart": [1, 2]}


# -- Django, from its cache backend -------------------------------------------------------------
DJANGO_APP = """
import json, sys
import django
from django.conf import settings

phase, url, namespace, db, sid = sys.argv[1:6]
settings.configure(
    SECRET_KEY="x" * 50, ALLOWED_HOSTS=["*"], ROOT_URLCONF="__main__", USE_TZ=True,
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django.contrib.sessions"],
    MIDDLEWARE=["django.contrib.sessions.middleware.SessionMiddleware",
                "django.contrib.auth.middleware.AuthenticationMiddleware"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": db}},
    CACHES={"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}},
    SESSION_ENGINE=("django.contrib.sessions.backends.cache" if phase == "before"
                    else "densekv.integrations.django"),
    DENSEKV_SESSIONS={"url": url, "namespace": namespace, "fallback": "cache"},
)
django.setup()
from django.contrib.auth.models import User
from django.core.management import call_command
from django.http import JsonResponse
from django.test import Client
from django.urls import path

def me(request):
    return JsonResponse({"user": request.user.get_username() or None,
                         "cart": request.session.get("cart")})

urlpatterns = [path("me", me)]
client = Client()
if phase == "before":  # the app before the move: Django's cache sessions, a user logged in
    call_command("migrate", verbosity=0, interactive=False)
    client.force_login(User.objects.create_user("ann"))
    session = client.session
    session["cart"] = ["A-1"]
    session.save()
    print(json.dumps({"sid": client.cookies["sessionid"].value}))
else:
    client.cookies["sessionid"] = sid
    response = client.get("/me")
    from densekv.integrations.django import SessionStore
    store = SessionStore.densekv_store()
    from django.contrib.sessions.backends.cache import SessionStore as CacheSession
    print(json.dumps({"status": response.status_code, "body": response.json(),
                      "listed": len(store.sessions_of(User.objects.get(username="ann").pk)),
                      "old_left": CacheSession().exists(sid)}))
"""


def test_django_extra_moves_a_cache_session_user_in(source: Path,
                                                    server: ServerProcess, tmp_path: Path) -> None:
    python = venv_with("django", source, tmp_path)
    namespace, db = f"mv{uuid.uuid4().hex[:8]}", str(tmp_path / "db.sqlite3")
    before = run_in(python, DJANGO_APP, "before", server.url, namespace, db, "-", cwd=tmp_path)
    seen = run_in(python, DJANGO_APP, "after", server.url, namespace, db, before["sid"], cwd=tmp_path)
    assert seen == {"status": 200, "body": {"user": "ann", "cart": ["A-1"]}, "listed": 1,
                    "old_left": False}


# -- the docs extra builds the site -----------------------------------------------------------
def test_docs_extra_builds_the_site_without_warnings(source: Path, tmp_path: Path) -> None:
    """README: `pip install '.[docs]' && mkdocs build --strict`. Strict fails on a warning;
    the signature formatter missing is only an info line, looked for here."""
    python = venv_with("docs", source, tmp_path)
    done = subprocess.run([str(python), "-m", "mkdocs", "build", "--strict", "--verbose",
                           "--site-dir", str(tmp_path / "site")], cwd=source, capture_output=True,
                          text=True, timeout=300, check=False,
                          env={"PATH": f"{python.parent}:/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    assert "requires either Black or Ruff" not in done.stderr + done.stdout
    assert "WARNING" not in done.stderr


# -- Quart, from Quart-Session ------------------------------------------------------------------
QUART_APP = """
import asyncio, json, sys
import quart, redis
from densekv.integrations.quart import QuartSessionFallback, SessionInterface

url, namespace, sid = sys.argv[1:4]
app = quart.Quart("moved_in")
app.session_interface = SessionInterface.from_url(url, namespace=namespace,
                                                  fallback=QuartSessionFallback())

@app.get("/me")
async def me():
    return {"user": quart.session.get("_user_id"), "cart": quart.session.get("cart")}

async def main():
    client = app.test_client()
    client.set_cookie("localhost", "session", sid)
    response = await client.get("/me")
    store = await app.session_interface.store()
    listed = [s.id for s in await store.sessions_of(12)] == [(await store.get(sid)).id]
    return {"status": response.status_code, "body": await response.get_json(),
            "listed": listed, "old_left": redis.Redis.from_url(url).exists("session:" + sid)}

print(json.dumps(asyncio.run(main())))
"""


def test_quart_extra_moves_a_quart_session_user_in(source: Path,
                                                   server: ServerProcess, tmp_path: Path) -> None:
    """Quart-Session (it needs aioredis 1.x, which no longer installs) is stood in for by
    what its RedisSessionInterface writes: Flask's tagged JSON under session:<uuid4>."""
    from quart.sessions import session_json_serializer

    python = venv_with("quart", source, tmp_path)
    assert missing_in(python, "quart_session", "flask_session") == ["quart_session", "flask_session"]
    sid = str(uuid.uuid4())
    with server.client() as client:
        client.set(f"session:{sid}", session_json_serializer.dumps(
            {"_user_id": "12", "cart": ("A-1", 2)}), ex=900)
        seen = run_in(python, QUART_APP, server.url, f"mv{uuid.uuid4().hex[:8]}", sid, cwd=tmp_path)
    assert seen["status"] == 200
    assert seen["body"] == {"user": "12", "cart": ["A-1", 2]}
    assert seen["listed"] and not seen["old_left"]


# -- Litestar, without Starlette -----------------------------------------------------------------
LITESTAR_APP = """
import json, sys
import redis
from litestar import Litestar, Request, get, post
from litestar.middleware.session.server_side import ServerSideSessionConfig
from litestar.params import FromPath
from litestar.stores.redis import RedisStore
from litestar.testing import TestClient
import densekv
from densekv.integrations.litestar import LitestarRedisStore, SessionConfig, login

url, namespace = sys.argv[1:3]

@post("/put", status_code=200)
async def put(request: Request) -> dict:
    request.set_session({"user": "ann", "cart": [1, 2]})
    return {}

old = Litestar([put], stores={"sessions": RedisStore.with_client(url)},
               middleware=[ServerSideSessionConfig(max_age=600).middleware])
with TestClient(old) as client:
    client.post("/put")
    sid = client.cookies["session"]

config = SessionConfig(url=url, store_options={"namespace": namespace},
                       move_in=LitestarRedisStore())

@post("/login/{uid:int}", status_code=200)
async def sign_in(request: Request, uid: FromPath[int]) -> dict:
    await login(request, uid)
    request.session["cart"] = ["A-1", 2]
    return {"ok": True}

@get("/me")
async def me(request: Request) -> dict:
    return {"user": request.session.identity, "cart": request.session.get("cart")}

@get("/all")
async def everything(request: Request) -> dict:
    return dict(request.session)

with TestClient(Litestar([sign_in, me, everything], middleware=[config.middleware])) as client:
    client.cookies.set("session", sid)
    moved = client.get("/all").json()
    client.cookies.clear()
    status = client.post("/login/12").status_code
    body = client.get("/me").json()
with redis.Redis.from_url(url) as c:
    listed = len(densekv.SessionStore(c, namespace=namespace).sessions_of(12))
    old_left = c.exists("LITESTAR:" + sid)
print(json.dumps({"status": status, "body": body, "listed": listed, "moved": moved,
                  "old_left": old_left}))
"""


def test_litestar_extra_serves_and_moves_in_sessions_without_starlette(
        source: Path, server: ServerProcess, tmp_path: Path) -> None:
    """Litestar does not depend on Starlette, and neither does densekv's Litestar backend (the
    ASGI half it shares with the Starlette backend, integrations/asgi.py, imports no
    framework): a venv with only .[litestar] logs a user in through Litestar and moves in a
    session Litestar's own server-side backend wrote."""
    python = venv_with("litestar", source, tmp_path)
    assert missing_in(python, "starlette", "litestar") == ["starlette"]
    seen = run_in(python, LITESTAR_APP, server.url, f"ls{uuid.uuid4().hex[:8]}", cwd=tmp_path)
    assert seen == {"status": 200, "body": {"user": 12, "cart": ["A-1", 2]}, "listed": 1,
                    "moved": {"user": "ann", "cart": [1, 2]}, "old_left": 0}


# -- aiohttp, from aiohttp-session's RedisStorage ------------------------------------------------
AIOHTTP_APP = """
import asyncio, json, sys
import aiohttp_session, redis, redis.asyncio
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
import densekv
from densekv.connect import from_url
from densekv.integrations.aiohttp import AiohttpSessionRedis, Storage

url, namespace, sid = sys.argv[1:4]

async def me(request):
    session = await aiohttp_session.get_session(request)
    return web.json_response({"user": session.get("user"), "cart": session.get("cart")})

async def main():
    store = densekv.AsyncSessionStore(from_url(url, asyncio=True), namespace)
    app = web.Application()
    aiohttp_session.setup(app, Storage(store, move_in=AiohttpSessionRedis(max_age=600)))
    app.router.add_get("/me", me)
    async with TestServer(app) as server, TestClient(server) as client:
        client.session.cookie_jar.update_cookies({"AIOHTTP_SESSION": sid}, server.make_url("/"))
        response = await client.get("/me")
        seen = {"status": response.status, "body": await response.json()}
    await store.client.aclose()
    return seen

seen = asyncio.run(main())
seen["old_left"] = redis.Redis.from_url(url).exists("AIOHTTP_SESSION_" + sid)
print(json.dumps(seen))
"""


def test_aiohttp_extra_moves_a_redis_storage_session_in(source: Path,
                                                        server: ServerProcess, tmp_path: Path) -> None:
    """aiohttp-session's RedisStorage (from this interpreter) writes a live session through
    aiohttp; the venv holding only .[aiohttp] moves it in through aiohttp's test server."""
    import aiohttp_session
    import redis.asyncio
    from aiohttp import web
    from aiohttp.test_utils import TestClient, TestServer
    from aiohttp_session.redis_storage import RedisStorage

    python = venv_with("aiohttp", source, tmp_path)

    async def put(request: web.Request) -> web.Response:
        session = await aiohttp_session.get_session(request)
        session.update({"user": "ann", "cart": [1, 2]})
        return web.json_response({})

    async def write_old() -> str:
        connection = redis.asyncio.Redis.from_url(server.url)
        app = web.Application()
        aiohttp_session.setup(app, RedisStorage(connection, max_age=600))
        app.router.add_post("/put", put)
        async with TestServer(app) as srv, TestClient(srv) as client:
            await client.post("/put")
            sid = client.session.cookie_jar.filter_cookies(srv.make_url("/"))["AIOHTTP_SESSION"].value
        await connection.aclose()
        return sid

    with warnings.catch_warnings():  # aiohttp_session's str request keys (docs/aiohttp.md)
        warnings.simplefilter("ignore", web.NotAppKeyWarning)
        sid = asyncio.run(write_old())
    namespace = f"mv{uuid.uuid4().hex[:8]}"
    seen = run_in(python, AIOHTTP_APP, server.url, namespace, sid, cwd=tmp_path)
    assert seen == {"status": 200, "body": {"user": "ann", "cart": [1, 2]}, "old_left": 0}
    with server.client() as client:
        import densekv

        moved = densekv.SessionStore(client, namespace=namespace).get(sid)
        assert moved is not None and moved.data == {"user": "ann", "cart": [1, 2]}
