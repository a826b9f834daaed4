"""DENSEKV_SESSIONS -> the densekv stores it configures: the sync store (on the client
passed in, or on one built from the url; one per process, built again in a forked child) and
the async stores (the async_client's, or one client per event loop, closed when that loop
shuts down its async generators), each held by an integrations/stores.py `Stores`, as every
web shell's are. Built once per value of the setting, the latest _MAX_BACKENDS values kept
(override_settings makes new ones).

The setting is checked whole before anything is built: a key that is neither the engine's
(ENGINE_KEYS) nor a keyword of densekv's SessionStore is ImproperlyConfigured naming it and
the accepted ones (a typo must not surface as a TypeError from deep inside), and so is a url
no client can be built from (integrations/urls.py). The package checks the setting when
Django imports it as SESSION_ENGINE (building its SessionMiddleware, at startup), and again
for each value on first use (override_settings). Every client
built from the url gets connect and read timeouts (densekv.connect.TIMEOUTS; a stopped or stalled
server then fails the requests that use the session instead of hanging them)."""

from __future__ import annotations

import difflib
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings  # type: ignore[import-untyped]
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]
from django.utils.module_loading import import_string  # type: ignore[import-untyped]

from densekv.connect import TIMEOUTS
from densekv.errors import InvalidArgument
from densekv.integrations.stores import Stores
from densekv.integrations.urls import check_url
from densekv.sessions import AsyncSessionStore
from densekv.sessions import SessionStore as DenseStore

DEFAULT_NAMESPACE = "django_sessions"
FALLBACKS = {  # short names for the backends sessions move in from
    "cache": "django.contrib.sessions.backends.cache.SessionStore",
    "db": "django.contrib.sessions.backends.db.SessionStore",
    "cached_db": "django.contrib.sessions.backends.cached_db.SessionStore",
}
ENGINE_KEYS = ("url", "client", "async_client", "fallback", "device_label", *TIMEOUTS)  # the rest: the store's
NOT_SETTINGS = ("self", "client")  # SessionStore parameters the engine fills in itself
_MAX_BACKENDS = 16  # settings values kept built at once (override_settings makes new ones)
WHO = "DENSEKV_SESSIONS"  # the shell named in the errors of its stores (integrations/stores.py)


def store_keys() -> tuple[str, ...]:
    """The keywords both densekv stores accept (what DENSEKV_SESSIONS passes through)."""
    sync = inspect.signature(DenseStore.__init__).parameters
    both = [k for k in sync if k in inspect.signature(AsyncSessionStore.__init__).parameters]
    return tuple(k for k in both if k not in NOT_SETTINGS)


def accepted_keys() -> tuple[str, ...]:
    return (*ENGINE_KEYS, *store_keys())


def check_settings(conf: Any) -> None:
    """ImproperlyConfigured for a DENSEKV_SESSIONS that is not a dict of known keys with
    timeouts that are positive numbers (or None: no timeout)."""
    if not isinstance(conf, Mapping):
        raise ImproperlyConfigured("DENSEKV_SESSIONS is a dict (url or client, namespace, ttl, ...)")
    accepted = accepted_keys()
    unknown = [k for k in conf if k not in accepted]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(str(key), accepted, n=1)
            hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ImproperlyConfigured(
            f"DENSEKV_SESSIONS has unknown key{'s' if len(unknown) > 1 else ''} {', '.join(hints)}; "
            f"the accepted keys are {', '.join(accepted)}")
    if not (conf.get("url") or conf.get("client") or conf.get("async_client")):
        raise ImproperlyConfigured("DENSEKV_SESSIONS needs a 'url', a 'client' or an 'async_client'")
    if conf.get("url"):
        try:
            check_url(conf["url"], "DENSEKV_SESSIONS['url']")
        except InvalidArgument as exc:
            raise ImproperlyConfigured(str(exc)) from exc
    hook = conf.get("device_label")
    if hook is not None:
        if not callable(hook) and not isinstance(hook, str):
            raise ImproperlyConfigured("DENSEKV_SESSIONS['device_label'] is a callable(request) -> str | None "
                                       f"or its dotted path, not {type(hook).__name__}")
        if not conf.get("track_devices"):
            raise ImproperlyConfigured("DENSEKV_SESSIONS['device_label'] needs 'track_devices': True "
                                       "(a store keeps labels only then)")
    for key in TIMEOUTS:
        value = conf.get(key, 1.0)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise ImproperlyConfigured(
                f"DENSEKV_SESSIONS[{key!r}] is a number of seconds above 0 (or None: wait forever), "
                f"not {value!r}")


class Backend:
    """The densekv stores of one DENSEKV_SESSIONS value, built on first use."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        check_settings(conf)
        self.conf = conf
        self.url: str | None = conf.get("url")
        self.client = conf.get("client")
        self.async_client = conf.get("async_client")
        self.timeouts: dict[str, Any] = {k: conf.get(k, v) for k, v in TIMEOUTS.items()}
        self.kwargs = {k: v for k, v in conf.items() if k not in ENGINE_KEYS}
        self.kwargs.setdefault("namespace", DEFAULT_NAMESPACE)
        self.kwargs.setdefault("ttl", settings.SESSION_COOKIE_AGE)
        name = conf.get("fallback")
        try:
            self.fallback: Any = import_string(FALLBACKS.get(name, name)) if name else None
        except ImportError as exc:
            raise ImproperlyConfigured(
                f"DENSEKV_SESSIONS['fallback'] is {', '.join(map(repr, FALLBACKS))} or the dotted path "
                f"of a SessionStore class; {name!r} does not import: {exc}") from exc
        hook = conf.get("device_label")
        try:
            self.device_label: Callable[[Any], str | None] | None = (
                import_string(hook) if isinstance(hook, str) else hook)
        except ImportError as exc:
            raise ImproperlyConfigured(
                f"DENSEKV_SESSIONS['device_label'] {hook!r} does not import: {exc}") from exc
        #: contrib.auth's login() logs the session in at once (engine.on_user_logged_in)
        self.eager_login = self.device_label is not None or conf.get("max_sessions_per_identity") is not None
        self._lock = threading.Lock()
        #: (made, gone) pairs of densekv_each_store, told of every store built from now on
        self._watchers: list[tuple[Callable[[Any], Any], Callable[[Any], Any] | None]] = []
        hooks: dict[str, Any] = {"made": self._made, "gone": self._gone}
        url_form: dict[str, Any] = {"url": self.url, "store_options": self.kwargs,
                                    "client_options": self.timeouts, **hooks}
        client, async_client, kwargs = self.client, self.async_client, self.kwargs
        #: the sync store of this process (again after a fork): on the client given, else the url's
        self.sync_stores: Stores[DenseStore] | None = None
        if client is not None:
            self.sync_stores = Stores(WHO, DenseStore, lambda: DenseStore(client, **kwargs), **hooks)
        elif self.url:
            self.sync_stores = Stores(WHO, DenseStore, **url_form)
        #: the async stores: the async_client's, shared by every loop (docs/django.md: the
        #: caller's to keep on one), else one per event loop from the url
        self.async_stores: Stores[AsyncSessionStore] | None = None
        if async_client is not None:
            self.async_stores = Stores(WHO, AsyncSessionStore, AsyncSessionStore(async_client, **kwargs),
                                       any_loop=True, **hooks)
        elif self.url:
            self.async_stores = Stores(WHO, AsyncSessionStore, **url_form)

    def each_store(self, made: Callable[[Any], Any], gone: Callable[[Any], Any] | None = None) -> None:
        """Call `made` with every store this backend has built and builds from now on (the
        sync store, and the async stores of async views: the async_client's, or one per
        event loop), and `gone` with a loop's store once that loop has closed (or the sync
        store of the parent process, in a forked child)."""
        with self._lock:
            self._watchers.append((made, gone))
        for stores in (self.sync_stores, self.async_stores):
            for store in stores.alive() if stores is not None else ():
                made(store)

    def _made(self, store: Any) -> None:
        for made, _ in list(self._watchers):
            made(store)

    def _gone(self, store: Any) -> None:
        for _, gone in list(self._watchers):
            if gone is not None:
                gone(store)

    def sync(self) -> DenseStore:
        if self.sync_stores is None:
            raise ImproperlyConfigured(
                "DENSEKV_SESSIONS has only an async_client: sync views and the "
                "clearsessions command need a 'url' or a 'client' too")
        return self.sync_stores.get()

    @property
    def real_async(self) -> bool:
        return self.async_stores is not None

    async def for_loop(self) -> AsyncSessionStore:
        """The async store of the running loop (the async_client's, or one per loop)."""
        assert self.async_stores is not None
        return await self.async_stores.current()

    def close(self) -> None:
        """Close the sync client built from the url (clients passed in are the caller's)."""
        if self.sync_stores is not None:
            self.sync_stores.close()


_BACKENDS: OrderedDict[tuple[int, int], Backend] = OrderedDict()
_BACKENDS_LOCK = threading.Lock()


def backend_for(conf: Any) -> Backend:
    """The backend of this exact settings value, built once (identity, not equality: a
    dict holding clients compares by identity anyway, and override_settings makes a new
    one)."""
    key = (id(conf), settings.SESSION_COOKIE_AGE)
    with _BACKENDS_LOCK:
        found = _BACKENDS.get(key)
        if found is not None and found.conf is conf:
            _BACKENDS.move_to_end(key)
            return found
    made = Backend(conf)
    with _BACKENDS_LOCK:
        _BACKENDS[key] = made
        evicted = [_BACKENDS.popitem(last=False)[1] for _ in range(len(_BACKENDS) - _MAX_BACKENDS)]
    for old in evicted:
        old.close()
    return made

