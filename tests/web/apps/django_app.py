"""The contract's Django app (routes in tests/web/driver.py) on densekv.integrations.django,
and its Driver over Django's own test Client.

Django's settings are global to a process, so `configure()` sets them once (sqlite in
memory, contrib.auth, SESSION_ENGINE = densekv.integrations.django, cookie "session") and
each driver gets its own engine: `SessionStore.bound_to(conf)` for its url and namespace,
which the middleware here picks by the X-Densekv-Engine header the driver's client sends
(without it, the settings' engine, as in `wsgi_app()` under gunicorn). The database is a
sqlite file in a temporary directory (the fallback tests move sessions in from it).

Login without contrib.auth: flush a session of another user (as contrib.auth's login()
does), set `_auth_user_id` and call `cycle_key()` (the engine moves the session with
densekv's atomic login). /auth/* use contrib.auth's real login()/logout().
Async twins of the routes live under /async/ (aget, aset, acycle_key, alogout_everywhere).
"""

from __future__ import annotations

import atexit
import http.cookies
import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import django
import redis
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, JsonResponse
from django.test import AsyncClient, Client
from django.urls import path
from django.views.decorators.http import require_GET, require_POST

from densekv import SessionLimitReached
from densekv.connect import from_url
from densekv.integrations.django import SessionStore
from tests.web.driver import COOKIE, SLOW_SET_S

ENGINE_HEADER = "X-Densekv-Engine"
_TMP: list[tempfile.TemporaryDirectory[str]] = []  # the sqlite file's directory, removed at exit
_ENGINES: dict[str, type[SessionStore]] = {}  # engine id -> a SessionStore bound to a driver's store


def _db_file() -> str:
    """A sqlite file (not :memory:, which is one database per thread: Django runs the sync
    parts of async views in another thread)."""
    if not _TMP:
        _TMP.append(tempfile.TemporaryDirectory(prefix="densekv-django-"))
        atexit.register(_TMP[0].cleanup)
    return str(Path(_TMP[0].name) / "db.sqlite3")


def configure(**overrides: Any) -> None:
    """Configure Django for this process, once (later calls change nothing)."""
    if settings.configured:
        return
    settings.configure(**{
        "DEBUG": False,
        "SECRET_KEY": "densekv-tests-only-" + "x" * 40,
        "ALLOWED_HOSTS": ["*"],
        "ROOT_URLCONF": __name__,
        "INSTALLED_APPS": ["django.contrib.contenttypes", "django.contrib.auth", "django.contrib.sessions"],
        "MIDDLEWARE": [f"{__name__}.DriverSessionMiddleware",
                       "django.contrib.auth.middleware.AuthenticationMiddleware"],
        "DATABASES": {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": _db_file()}},
        "CACHES": {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
        "DEFAULT_AUTO_FIELD": "django.db.models.AutoField",
        "USE_TZ": True,
        "SESSION_ENGINE": "densekv.integrations.django",
        "SESSION_COOKIE_NAME": COOKIE,
        **overrides,
    })
    django.setup()


class DriverSessionMiddleware(SessionMiddleware):  # type: ignore[misc]
    """Django's SessionMiddleware; a request naming a registered engine uses that one."""

    def process_request(self, request: HttpRequest) -> None:
        engine = _ENGINES.get(request.headers.get(ENGINE_HEADER, ""), self.SessionStore)
        request.session = engine(request.COOKIES.get(settings.SESSION_COOKIE_NAME))


# -- views ------------------------------------------------------------------------------
def _value(request: HttpRequest) -> Any:
    return (json.loads(request.body or b"null") or {}).get("value")


OK = {"ok": True}


@require_GET
def get_value(request: HttpRequest, key: str) -> JsonResponse:
    return JsonResponse({"value": request.session.get(key)})


@require_GET
def all_data(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"data": dict(request.session.items())})


@require_GET
def noop(request: HttpRequest) -> JsonResponse:
    return JsonResponse(OK)


@require_POST
def set_value(request: HttpRequest, key: str) -> JsonResponse:
    request.session[key] = _value(request)
    return JsonResponse(OK)


@require_POST
def slow_set(request: HttpRequest, key: str) -> JsonResponse:
    value = _value(request)
    request.session.get(key)  # loaded now; saved by the middleware after the sleep
    time.sleep(SLOW_SET_S)
    request.session[key] = value
    return JsonResponse(OK)


@require_POST
def del_value(request: HttpRequest, key: str) -> JsonResponse:
    request.session.pop(key, None)
    return JsonResponse(OK)


@require_POST
def login(request: HttpRequest, uid: int) -> JsonResponse:
    """As contrib.auth's login(): another user's session is flushed (its data dropped)."""
    if request.session.get(SESSION_KEY) not in (None, str(uid)):
        request.session.flush()
    request.session[SESSION_KEY] = str(uid)
    request.session.cycle_key()  # densekv's atomic login: identity uid, old key dead
    return JsonResponse(OK)


@require_POST
def regenerate(request: HttpRequest) -> JsonResponse:
    request.session.cycle_key()
    return JsonResponse(OK)


@require_POST
def logout(request: HttpRequest) -> JsonResponse:
    request.session.flush()
    return JsonResponse(OK)


@require_POST
def logout_everywhere(request: HttpRequest) -> JsonResponse:
    request.session.logout_everywhere()
    return JsonResponse(OK)


@require_POST
def set_expiry(request: HttpRequest, seconds: int) -> JsonResponse:
    request.session.set_expiry(seconds)
    request.session["expiry"] = seconds
    return JsonResponse(OK)


@require_GET
def pid(request: HttpRequest) -> JsonResponse:
    """Which worker process answered, after ?sleep= seconds (the gunicorn test keeps one
    worker busy to see the other answer), and what it reads under ?key= in the session."""
    time.sleep(float(request.GET.get("sleep", 0)))
    return JsonResponse({"pid": os.getpid(), "value": request.session.get(request.GET.get("key", ""))})


async def aget_value(request: HttpRequest, key: str) -> JsonResponse:
    return JsonResponse({"value": await request.session.aget(key)})


async def aset_value(request: HttpRequest, key: str) -> JsonResponse:
    await request.session.aset(key, _value(request))
    return JsonResponse(OK)


async def alogin(request: HttpRequest, uid: int) -> JsonResponse:
    if await request.session.aget(SESSION_KEY) not in (None, str(uid)):
        await request.session.aflush()
    await request.session.aset(SESSION_KEY, str(uid))
    await request.session.acycle_key()
    return JsonResponse(OK)


async def alogout_everywhere(request: HttpRequest) -> JsonResponse:
    await request.session.alogout_everywhere()
    return JsonResponse(OK)


@require_POST
def auth_login(request: HttpRequest, uid: int) -> JsonResponse:
    from django.contrib.auth import get_user_model
    from django.contrib.auth import login as django_login

    user = get_user_model().objects.get(pk=uid)
    try:
        django_login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    except SessionLimitReached:  # max_sessions_per_identity with on_limit="refuse"
        return JsonResponse({"error": "too many devices"}, status=409)
    return JsonResponse(OK)


@require_GET
def auth_whoami(request: HttpRequest) -> JsonResponse:
    user = request.user
    return JsonResponse({"user": user.pk if user.is_authenticated else None})


@require_POST
def auth_logout(request: HttpRequest) -> JsonResponse:
    from django.contrib.auth import logout as django_logout

    django_logout(request)
    return JsonResponse(OK)


urlpatterns = [
    path("get/<str:key>", get_value),
    path("all", all_data),
    path("noop", noop),
    path("set/<str:key>", set_value),
    path("slow-set/<str:key>", slow_set),
    path("del/<str:key>", del_value),
    path("login/<int:uid>", login),
    path("regenerate", regenerate),
    path("logout", logout),
    path("logout-everywhere", logout_everywhere),
    path("set-expiry/<int:seconds>", set_expiry),
    path("pid", pid),
    path("async/get/<str:key>", aget_value),
    path("async/set/<str:key>", aset_value),
    path("async/login/<int:uid>", alogin),
    path("async/logout-everywhere", alogout_everywhere),
    path("auth/login/<int:uid>", auth_login),
    path("auth/whoami", auth_whoami),
    path("auth/logout", auth_logout),
]


# -- the driver -------------------------------------------------------------------------
class DjangoDriver:
    """One browser: Django's test Client (and an AsyncClient sharing its cookie jar)."""

    name = "django"

    def __init__(self, engine_id: str, owned: redis.Redis | None) -> None:
        self.engine_id = engine_id
        self._owned = owned  # the first browser closes the store's client; the others share it
        headers = {ENGINE_HEADER: engine_id}
        self.http = Client(raise_request_exception=False, headers=headers)
        self.ahttp = AsyncClient(raise_request_exception=False)  # headers per request: its
        # constructor's would reach the app as "Http-X-..." (Django 5.2 turns them into WSGI names)
        self.ahttp.cookies = self.http.cookies
        self.last_response: Any = None

    @property
    def engine(self) -> type[SessionStore]:
        return _ENGINES[self.engine_id]

    def _reply(self, response: Any) -> tuple[int, Any]:
        self.last_response = response
        morsel = self.http.cookies.get(COOKIE)
        if morsel is not None and (not morsel.value or str(morsel["max-age"]) == "0"):
            del self.http.cookies[COOKIE]  # Django deleted it: a browser drops it
        body = response.json() if response.get("Content-Type", "").startswith("application/json") else None
        return response.status_code, body

    def request(self, method: str, path: str, json: Any = None) -> tuple[int, Any]:
        data = "" if json is None else _dumps(json)
        return self._reply(self.http.generic(method, path, data, content_type="application/json"))

    async def arequest(self, method: str, path: str, json: Any = None) -> tuple[int, Any]:
        """The same request through Django's AsyncClient (the ASGI handler, async views)."""
        data = "" if json is None else _dumps(json)
        return self._reply(await self.ahttp.generic(method, path, data, content_type="application/json",
                                                    headers={ENGINE_HEADER: self.engine_id}))

    def cookie(self) -> str | None:
        morsel = self.http.cookies.get(COOKIE)
        return morsel.value if morsel is not None and morsel.value else None

    def set_cookie(self, value: str | None) -> None:
        if value is None:
            self.http.cookies.pop(COOKIE, None)
            return
        morsel: http.cookies.Morsel[str] = http.cookies.Morsel()
        morsel.set(COOKIE, value, value.encode().decode("latin-1"))  # sent as its UTF-8 bytes
        self.http.cookies[COOKIE] = morsel

    def new_browser(self) -> DjangoDriver:
        return DjangoDriver(self.engine_id, None)

    def close(self) -> None:
        if self._owned is not None:
            _ENGINES.pop(self.engine_id, None)
            self._owned.close()
            self._owned = None


def _dumps(value: Any) -> str:
    return json.dumps(value)


def make_driver(url: str, namespace: str, *, ttl: int = 3600, idle_ttl: int | None = None,
                clock: Callable[[], float] = time.time, observer: Any = None,
                **store_kwargs: Any) -> DjangoDriver:
    """A browser on a Django app whose sessions live on `url` under `namespace`;
    `store_kwargs` go into the engine's settings dict (store keywords, "fallback",
    "device_label"); `observer` is attached to the engine's sync store (the contract's views
    are sync)."""
    configure()
    client = from_url(url)  # connect and read timeouts, as the docs say
    conf = {"client": client, "url": url, "namespace": namespace, "ttl": ttl, "idle_ttl": idle_ttl,
            "clock": clock, **store_kwargs}
    engine_id = uuid.uuid4().hex
    _ENGINES[engine_id] = SessionStore.bound_to(conf)
    if observer is not None:
        _ENGINES[engine_id].densekv_store().observe(observer)
    return DjangoDriver(engine_id, client)


def wsgi_app(url: str, namespace: str) -> WSGIHandler:
    """The app for a real WSGI server: `gunicorn 'tests.web.apps.django_app:wsgi_app(URL, NS)'`."""
    configure(DENSEKV_SESSIONS={"url": url, "namespace": namespace, "ttl": 3600})
    from django.core.wsgi import get_wsgi_application

    return get_wsgi_application()
