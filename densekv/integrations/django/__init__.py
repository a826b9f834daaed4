"""Django's session engine on densekv: ``SESSION_ENGINE = "densekv.integrations.django"``.

Configured by one setting (a dict; ``pip install 'densekv[django]'``)::

    DENSEKV_SESSIONS = {
        "url": "redis://localhost:6379/0",  # or "client": redis.Redis(...) (sync views, commands)
                                            # and/or "async_client": redis.asyncio.Redis(...)
        "namespace": "django_sessions",     # default
        "ttl": SESSION_COOKIE_AGE,          # default; idle_ttl, layout, max_data_bytes, ... and
                                            # every other densekv.SessionStore keyword pass through
        "fallback": "db",                   # optional: move sessions in from "cache", "db",
                                            # "cached_db" or a dotted SessionStore path
        "socket_connect_timeout": 5.0,      # default, seconds: clients built from the url
        "socket_timeout": 5.0,              # default, seconds (None: wait forever)
    }

Any other key, or a url no client can be built from, is ImproperlyConfigured naming it
(when Django imports this engine at startup, and at the first use of each value).
The guide: docs/django.md.

The densekv stores are built once per value of the setting (override_settings with a new
dict builds new ones); a subclass may set ``densekv_settings`` instead of reading settings
(see ``SessionStore.bound_to``). With only a sync ``client``, the async methods run the sync
code in a thread; with a ``url`` (or an ``async_client``) they are real asyncio: one client
per event loop, closed when that loop shuts down its async generators (asyncio.run does).

How Django's session maps onto densekv (one fact each, all enforced in engine.py):
  * The session key is the densekv token. New keys are densekv's (32 URL-safe characters,
    mixed case, ``-`` and ``_``): Django only requires 8+ characters; its own 32-char
    ``[a-z0-9]`` keys are valid densekv tokens too, which is what moving in relies on.
  * The data is the session dict itself (densekv packs it; nothing is serialized twice).
    A top-level value densekv cannot give back equal (a tuple, an int key inside) is passed
    once through SESSION_SERIALIZER, the round trip every Django backend applies, so it
    comes back as Django's db backend would give it (a list, a str key); what the
    serializer refuses raises its own error (TypeError for a datetime with JSON). Bytes,
    which densekv keeps and JSON would refuse, stay bytes.
  * Saving an existing session writes only the top-level keys that changed since it was
    read, with ``store.apply`` (compare-and-set), so two requests that change different
    keys both keep their change; a session deleted meanwhile is never written again
    (``UpdateError``, which the middleware turns into SessionInterrupted, a 400).
  * Identity: ``_auth_user_id`` (int if it is a decimal string, else str). Whenever a save
    or ``cycle_key()`` finds it differs from the stored identity, the session moves to a
    new key with ``store.login`` (old key dead, identity indexed), so ``sessions_of(user)``
    and ``logout_everywhere()`` see it. Django's ``login()`` cycles the key before it sets
    ``_auth_user_id``, so there the key changes twice; without contrib.auth, set
    ``session["_auth_user_id"] = str(uid)`` and call ``session.cycle_key()``. Removing
    ``_auth_user_id`` without ``flush()`` leaves the stored identity until the session ends.
  * Expiry, as Django's own backends: every save gives the stored session
    ``get_expiry_age()`` from now, in the same write as the data (``store.apply(ttl=)``,
    or ``store.set_ttl`` for a save that changed nothing): set_expiry's (seconds, a
    timedelta or datetime; 0 or None: the store's ttl, SESSION_COOKIE_AGE by default), so
    the stored session ends when the cookie sent with it does ("remember me" is kept on the
    server too; SESSION_EXPIRE_AT_BROWSER_CLOSE keeps SESSION_COOKIE_AGE on the server, as
    Django's db backend does). An expiry already past stores nothing, or ends the session.
    ``idle_ttl`` (densekv's, optional) rolls it on reads (only when due), never past that.
  * A stored session that cannot be decoded (corrupt, or a dictionary the server lost) is
    no session for the request (``store.get(undecodable="none")``: one warning naming the
    namespace and digest, never the key), as Django's backends read data they cannot
    decode; the first write of that request (a new session, a login's cycle_key, a
    logout's flush) ends it.
  * ``clear_expired()`` (the ``clearsessions`` command) is ``store.sweep()``.

Where each part lives (this package's modules, one job each):
  engine.py   SessionStore: the SessionBase methods, each a flow of typed store calls
              (integrations/calls.py) run by the web shells' drivers (integrations/drive.py)
  backend.py  DENSEKV_SESSIONS -> the densekv stores it configures (built once per value)
  movein.py   reading and deleting the sessions of the Django backend we move in from
  values.py   identity_of, the stored base of a diff, and comparing values exactly
"""

from __future__ import annotations

try:
    import django  # type: ignore[import-untyped]  # noqa: F401 - only to say which extra is missing
except ImportError as missing:  # pragma: no cover - depends on what is installed
    raise ImportError("densekv.integrations.django needs Django: pip install 'densekv[django]'") from missing

from densekv.integrations.django.backend import check_settings
from densekv.integrations.django.engine import SessionStore, on_user_logged_in

__all__ = ["SessionStore"]


def _check_at_startup() -> None:
    """Django imports SESSION_ENGINE when it builds its SessionMiddleware, which is at
    startup (runserver, get_wsgi_application, get_asgi_application): a DENSEKV_SESSIONS
    that cannot work (an unknown key, a url no client can be built from) is
    ImproperlyConfigured then, not on the first request. Nothing connects here."""
    from django.conf import settings  # type: ignore[import-untyped]

    if settings.configured and settings.SESSION_ENGINE == __name__:
        conf = getattr(settings, "DENSEKV_SESSIONS", None)
        if conf is not None:  # absent: said on first use (tests may bind a value later)
            check_settings(conf)


def _connect_login_signal() -> None:
    """contrib.auth's login() labels the session and enforces the session limit in the view
    (engine.on_user_logged_in), when DENSEKV_SESSIONS asks for either; nothing otherwise."""
    try:
        from django.contrib.auth.signals import user_logged_in  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - contrib.auth is part of Django
        return
    user_logged_in.connect(on_user_logged_in, dispatch_uid="densekv.integrations.django.login",
                           weak=False)


_check_at_startup()
_connect_login_signal()
