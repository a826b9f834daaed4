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
    }

The densekv stores are built once per value of the setting (override_settings with a new
dict builds new ones); a subclass may set ``densekv_settings`` instead of reading settings
(see ``SessionStore.bound_to``). With only a sync ``client``, the async methods run the sync
code in a thread; with a ``url`` (or an ``async_client``) they are real asyncio: one client
per event loop, closed when that loop shuts down its async generators (asyncio.run does).

How Django's session maps onto densekv (one fact each, all enforced below):
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
  * Expiry: a session's lifetime is fixed when it is created: ``get_expiry_age()`` if
    ``set_expiry()`` was called before the first save (a value already past stores
    nothing), else the store's ttl; ``idle_ttl`` rolls it on reads (only when due), never
    past that. A save does not extend it. ``set_expiry()`` on a session that exists already
    changes the cookie (Django derives Max-Age from it) and is kept in the data; the
    record's lifetime stays, except that an expiry moment already past (a datetime, or a
    negative number of seconds) ends the session at its next load.
  * ``clear_expired()`` (the ``clearsessions`` command) is ``store.sweep()``.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import redis
import redis.asyncio

try:
    from django.conf import settings  # type: ignore[import-untyped]
except ImportError as missing:  # pragma: no cover - depends on what is installed
    raise ImportError("densekv.integrations.django needs Django: pip install 'densekv[django]'") from missing
from asgiref.sync import sync_to_async
from django.contrib.auth import SESSION_KEY  # type: ignore[import-untyped]
from django.contrib.sessions.backends.base import (  # type: ignore[import-untyped]
    CreateError,
    SessionBase,
    UpdateError,
)
from django.contrib.sessions.exceptions import SessionInterrupted  # type: ignore[import-untyped]
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]
from django.utils import timezone  # type: ignore[import-untyped]
from django.utils.module_loading import import_string  # type: ignore[import-untyped]

from densekv.sessions import AsyncSessionStore, Session, SessionDataInvalid
from densekv.sessions import SessionStore as DenseStore
from densekv.sessions.model import Identity, digest_of, new_token
from densekv.sessions.payload import pack_data

__all__ = ["SessionStore"]

T = TypeVar("T")
Data = dict[str, Any]
DEFAULT_NAMESPACE = "django_sessions"
EXPIRY_KEY = "_session_expiry"  # where SessionBase.set_expiry keeps a custom expiry
FALLBACKS = {  # short names for the backends sessions move in from
    "cache": "django.contrib.sessions.backends.cache.SessionStore",
    "db": "django.contrib.sessions.backends.db.SessionStore",
    "cached_db": "django.contrib.sessions.backends.cached_db.SessionStore",
}
_ENGINE_KEYS = ("url", "client", "async_client", "fallback")  # the rest goes to the store
_MAX_BACKENDS = 16  # settings values kept built at once (override_settings makes new ones)


# -- values -----------------------------------------------------------------------------
def identity_of(data: Mapping[str, Any]) -> Identity | None:
    """The densekv identity of a session: its ``_auth_user_id``, int when it is a decimal
    string in densekv's int range (Django writes integer primary keys so), else str."""
    uid = data.get(SESSION_KEY)
    if uid is None or uid == "" or isinstance(uid, bool):
        return None
    if isinstance(uid, int) and 0 <= uid < 2**64:
        return uid
    text = str(uid)
    if text.isascii() and text.isdecimal() and int(text) < 2**64:
        return int(text)
    return text


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 == True, but they store apart)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


@dataclass(frozen=True)
class _Stored:
    """What this object last saw stored under `token`: the base of the next diff."""

    token: str
    identity: Identity | None
    data: Data


@dataclass(frozen=True)
class _Call:
    """One store call a flow asks for. `on` None: the densekv store (the async store has
    the same method, awaited); otherwise an object whose async twin is "a" + name.
    `plain`: no I/O, called as is by both drivers (due_for_touch)."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    on: Any = None
    plain: bool = False


Flow = Generator[_Call, Any, T]


# -- the stores one settings value configures --------------------------------------------
async def _closing(client: Any) -> AsyncIterator[None]:
    """Parked at its yield for the life of an event loop: the loop's shutdown_asyncgens()
    (asyncio.run calls it) closes this generator, and the loop's client with it."""
    try:
        yield
    finally:
        await client.aclose()


def _sync_client(url: str) -> redis.Redis | redis.RedisCluster:
    if url.startswith("redis+cluster://"):
        return redis.RedisCluster.from_url("redis://" + url[len("redis+cluster://"):])
    return redis.Redis.from_url(url)


class _Backend:
    """The densekv stores of one DENSEKV_SESSIONS value, built on first use."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        if not isinstance(conf, Mapping):
            raise ImproperlyConfigured("DENSEKV_SESSIONS is a dict (url or client, namespace, ttl, ...)")
        self.conf = conf
        self.url: str | None = conf.get("url")
        self.client = conf.get("client")
        self.async_client = conf.get("async_client")
        if not (self.url or self.client or self.async_client):
            raise ImproperlyConfigured("DENSEKV_SESSIONS needs a 'url', a 'client' or an 'async_client'")
        self.kwargs = {k: v for k, v in conf.items() if k not in _ENGINE_KEYS}
        self.kwargs.setdefault("namespace", DEFAULT_NAMESPACE)
        self.kwargs.setdefault("ttl", settings.SESSION_COOKIE_AGE)
        name = conf.get("fallback")
        self.fallback: Any = import_string(FALLBACKS.get(name, name)) if name else None
        self._lock = threading.Lock()
        self._sync: DenseStore | None = None
        self._owned: Any = None  # the sync client built from url (closed with the backend)
        self._shared_async: AsyncSessionStore | None = None
        self._per_loop: dict[asyncio.AbstractEventLoop, tuple[AsyncSessionStore, Any]] = {}

    def sync(self) -> DenseStore:
        if self._sync is None:
            with self._lock:
                if self._sync is None:
                    client = self.client
                    if client is None:
                        if not self.url:
                            raise ImproperlyConfigured(
                                "DENSEKV_SESSIONS has only an async_client: sync views and the "
                                "clearsessions command need a 'url' or a 'client' too")
                        client = self._owned = _sync_client(self.url)
                    self._sync = DenseStore(client, **self.kwargs)
        return self._sync

    @property
    def real_async(self) -> bool:
        return bool(self.async_client is not None or self.url)

    async def for_loop(self) -> AsyncSessionStore:
        """The async store of the running loop (the async_client's, or one per loop)."""
        if self.async_client is not None:
            if self._shared_async is None:
                self._shared_async = AsyncSessionStore(self.async_client, **self.kwargs)
            return self._shared_async
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._per_loop.get(loop)
        if entry is None:
            assert self.url
            client = redis.asyncio.Redis.from_url(self.url)
            keeper = _closing(client)
            await keeper.__anext__()  # registered with this loop: closed at its shutdown
            entry = (AsyncSessionStore(client, **self.kwargs), keeper)
            with self._lock:
                for gone in [old for old in self._per_loop if old.is_closed()]:
                    del self._per_loop[gone]  # its client was closed with it
                self._per_loop[loop] = entry
        return entry[0]

    def close(self) -> None:
        """Close the sync client built from the url (clients passed in are the caller's)."""
        if self._owned is not None:
            self._owned.close()


_BACKENDS: OrderedDict[tuple[int, int], _Backend] = OrderedDict()
_BACKENDS_LOCK = threading.Lock()


def _backend_for(conf: Any) -> _Backend:
    """The backend of this exact settings value, built once (identity, not equality: a
    dict holding clients compares by identity anyway, and override_settings makes a new
    one)."""
    key = (id(conf), settings.SESSION_COOKIE_AGE)
    with _BACKENDS_LOCK:
        found = _BACKENDS.get(key)
        if found is not None and found.conf is conf:
            _BACKENDS.move_to_end(key)
            return found
    made = _Backend(conf)
    with _BACKENDS_LOCK:
        _BACKENDS[key] = made
        evicted = [_BACKENDS.popitem(last=False)[1] for _ in range(len(_BACKENDS) - _MAX_BACKENDS)]
    for old in evicted:
        old.close()
    return made


# -- moving in from another Django backend -----------------------------------------------
class _Previous:
    """One session of the backend we move in from: load it (data and seconds left),
    delete it. Django's backends are sync at heart, so the async twins run in a thread."""

    def __init__(self, backend: Any, key: str) -> None:
        self.session = backend(key)

    def load(self) -> tuple[Data, int] | None:
        old = self.session
        if hasattr(old, "_get_session_from_db"):  # db, cached_db: the row says when it ends
            row = old._get_session_from_db()
            if row is None:
                return None
            left = (row.expire_date - timezone.now()).total_seconds()
            return old.decode(row.session_data), int(left)
        data = old.load()
        if old.session_key is None:
            return None
        return data, self._cache_ttl(old, data)

    @staticmethod
    def _cache_ttl(old: Any, data: Data) -> int:
        """Seconds left in a cache: exact on Django's RedisCache; otherwise the age Django
        gave the entry at its last save (the cache API does not say what is left)."""
        cache = getattr(old, "_cache", None)
        raw = getattr(cache, "_cache", None)
        if cache is not None and raw is not None and hasattr(raw, "get_client") and hasattr(old, "cache_key"):
            key = cache.make_and_validate_key(old.cache_key)
            left = raw.get_client(key).ttl(key)
            if isinstance(left, int) and left > 0:
                return left
            if left == -2:
                return 0
        return int(old.get_expiry_age(expiry=data.get(EXPIRY_KEY)))

    async def aload(self) -> tuple[Data, int] | None:
        return await sync_to_async(self.load)()

    def delete(self) -> None:
        self.session.delete()

    async def adelete(self) -> None:
        await sync_to_async(self.delete)()


# -- the engine ---------------------------------------------------------------------------
class SessionStore(SessionBase):  # type: ignore[misc]
    """A Django session whose server side is a densekv session (see the module docstring)."""

    densekv_settings: ClassVar[Mapping[str, Any] | None] = None  # None: settings.DENSEKV_SESSIONS
    _session_key: str | None  # SessionBase's validating property (8+ characters or None)

    def __init__(self, session_key: str | None = None) -> None:
        super().__init__(session_key)
        self._stored: _Stored | None = None

    @classmethod
    def bound_to(cls, conf: Mapping[str, Any]) -> type[SessionStore]:
        """A subclass using `conf` instead of settings (several stores in one project)."""
        return type(cls.__name__, (cls,), {"densekv_settings": conf, "__module__": cls.__module__})

    @classmethod
    def _backend(cls) -> _Backend:
        conf = cls.densekv_settings
        if conf is None:
            conf = getattr(settings, "DENSEKV_SESSIONS", None)
        if conf is None:
            raise ImproperlyConfigured(
                "densekv.integrations.django needs DENSEKV_SESSIONS = {'url': 'redis://...'} in settings")
        return _backend_for(conf)

    @classmethod
    def densekv_store(cls) -> DenseStore:
        """The densekv.SessionStore behind this engine (sessions_of, destroy_all, stats...)."""
        return cls._backend().sync()

    # -- drivers: run a flow against the sync or the async store --------------------------
    def _run(self, flow: Flow[T]) -> T:
        return _drive(flow, self._backend())

    async def _arun(self, flow: Flow[T]) -> T:
        backend = self._backend()
        if not backend.real_async:
            return await sync_to_async(_drive)(flow, backend)
        store: AsyncSessionStore | None = None  # opened at the first call that needs it
        result: Any = None
        error: BaseException | None = None
        while True:
            try:
                call = flow.send(result) if error is None else flow.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            try:
                if call.on is not None:
                    result = await getattr(call.on, "a" + call.name)(*call.args, **call.kwargs)
                else:
                    store = store or await backend.for_loop()
                    method = getattr(store, call.name)
                    result = method(*call.args, **call.kwargs) if call.plain else await method(
                        *call.args, **call.kwargs)
                error = None
            except Exception as exc:  # noqa: BLE001 - thrown into the flow, which re-raises it unless it handles it
                result, error = None, exc

    # -- flows: every operation once, for both drivers --------------------------------------
    def _storing(self, make: Callable[[Data], _Call], data: Data) -> Flow[tuple[Any, Data]]:
        """Run the write `make(data)`; if densekv refuses the data as one it cannot give back
        equal, write it once more with each refused top-level key as SESSION_SERIALIZER
        gives it back (see the module docstring). The data written comes back too."""
        try:
            return (yield make(data)), data
        except SessionDataInvalid:
            data = self._as_serialized(data)
            return (yield make(data)), data

    def _as_serialized(self, data: Data) -> Data:
        serializer = self.serializer()
        out: Data = {}
        for key, value in data.items():
            try:
                pack_data({key: value}, max_bytes=2**62)
                out[key] = value
            except SessionDataInvalid:  # a tuple, an int key, ...: as Django's backends give it
                out.update(serializer.loads(serializer.dumps({key: value})))
        return out

    def _ttl_of(self, data: Data) -> int | None:
        """The lifetime a new session gets: its custom expiry, else None (the store's)."""
        expiry = data.get(EXPIRY_KEY)
        return int(self.get_expiry_age(expiry=expiry)) if expiry else None

    def _past_expiry(self, data: Data) -> bool:
        expiry = data.get(EXPIRY_KEY)
        if not expiry or isinstance(expiry, bool):
            return False
        try:
            return bool(self.get_expiry_age(expiry=expiry) <= 0)
        except (TypeError, ValueError):  # not something set_expiry writes: not ours to judge
            return False

    def _base(self) -> _Stored | None:
        stored = self._stored
        return stored if stored is not None and stored.token == self.session_key else None

    def _load_flow(self) -> Flow[Data]:
        token = self.session_key
        session: Session | None = None
        if digest_of(token) is not None:  # a junk cookie costs no server call
            session = yield _Call("get", (token,))
        if session is None and self._backend().fallback is not None and digest_of(token) is not None:
            session = yield from self._move_in_flow(token)
        data: Data = dict(session.data or {}) if session is not None else {}
        if session is not None and self._past_expiry(data):
            yield _Call("destroy", (token,))
            session = None
        if session is None:
            self._session_key = None
            self._stored = None
            return {}
        if (yield _Call("due_for_touch", (session,), plain=True)):
            yield _Call("touch", (token,))
        self._stored = _Stored(token, session.identity, copy.deepcopy(data))
        return data

    def _move_in_flow(self, token: str) -> Flow[Session | None]:
        previous = _Previous(self._backend().fallback, token)
        found = yield _Call("load", on=previous)
        if found is None or found[1] <= 0:
            # not there either, unless another request just moved it in (and deleted it there)
            again: Session | None = yield _Call("get", (token,))
            return again
        data, left = found
        yield from self._storing(lambda d: _Call("create", (identity_of(d), d, left), {"token": token}), data)
        yield _Call("delete", on=previous)
        return (yield _Call("get", (token,)))  # type: ignore[no-any-return]

    def _create_flow(self, data: Data, token: str | None = None) -> Flow[None]:
        """A new session holding `data`; under `token` when given (CreateError if taken)."""
        ttl = self._ttl_of(data)
        if ttl is not None and ttl <= 0:  # over before it starts: nothing to store
            self._session_key = token or new_token()
            self._stored = None
            return
        if token is not None and (digest_of(token) is None or (yield _Call("get", (token,))) is not None):
            raise CreateError  # checked, not atomic: densekv's create(token=) would overwrite
        identity = identity_of(data)
        made, stored = yield from self._storing(
            lambda d: _Call("create", (identity, d, ttl), {"token": token}), data)
        self._session_key = made
        self._stored = _Stored(made, identity, copy.deepcopy(stored))

    def _save_flow(self, data: Data, must_create: bool) -> Flow[None]:
        token = self.session_key
        if token is None:
            return (yield from self._create_flow(data))
        if must_create:
            return (yield from self._create_flow(data, token))
        base = self._base()
        if base is None:  # data never read here (clear() before any load): read what is stored
            session = yield _Call("get", (token,))
            if session is None:
                raise UpdateError
            base = _Stored(token, session.identity, session.data or {})
        identity = identity_of(data)
        if identity is not None and identity != base.identity:
            moved = yield _Call("login", (token, identity))
            if moved is None:
                raise UpdateError
            self._session_key = token = moved
            base = _Stored(moved, identity, base.data)
        changes = {k: v for k, v in data.items() if k not in base.data or not _same(base.data[k], v)}
        removed = [k for k in base.data if k not in data]
        if not changes and not removed:
            self._stored = base
            return
        merged, _ = yield from self._storing(lambda d: _Call("apply", (token, d, removed)), changes)
        if merged is None:
            raise UpdateError
        data.clear()
        data.update(merged)
        self._stored = _Stored(token, identity if identity is not None else base.identity, copy.deepcopy(merged))

    def _cycle_flow(self, data: Data) -> Flow[None]:
        token = self.session_key
        if token is None:
            return (yield from self._create_flow(data))
        base = self._base()
        identity = identity_of(data)
        if identity is not None and (base is None or identity != base.identity):
            moved = yield _Call("login", (token, identity))
        else:
            moved = yield _Call("regenerate", (token,))
        if moved is None:
            if base is not None:  # read in this request, gone since: a concurrent logout
                raise SessionInterrupted("The session ended in another request while this one ran.")
            return (yield from self._create_flow(data))
        self._session_key = moved
        self._stored = None if base is None else _Stored(
            moved, identity if identity is not None else base.identity, base.data)

    def _delete_flow(self, session_key: str | None) -> Flow[None]:
        if session_key is None:
            session_key = self.session_key
            if session_key is None:
                return
        if digest_of(session_key) is not None:
            yield _Call("destroy", (session_key,))
        if session_key == self.session_key:
            self._stored = None

    def _exists_flow(self, session_key: str | None) -> Flow[bool]:
        if not session_key or digest_of(session_key) is None:
            return False
        return (yield _Call("get", (session_key,))) is not None

    def _end_all_flow(self, data: Data) -> Flow[int]:
        base = self._base()
        identity = base.identity if base is not None and base.identity is not None else identity_of(data)
        ended = 0
        if identity is not None:
            ended = yield _Call("destroy_all", (identity,))
        yield from self._delete_flow(None)
        return int(ended)

    # -- SessionBase, sync ------------------------------------------------------------------
    def _get_new_session_key(self) -> str:
        return new_token()  # 192 random bits: no need to ask the server whether it is taken

    async def _aget_new_session_key(self) -> str:
        return new_token()

    def exists(self, session_key: str | None) -> bool:
        return self._run(self._exists_flow(session_key))

    def create(self) -> None:
        self._run(self._create_flow(self._get_session(no_load=True)))
        self.modified = True

    def save(self, must_create: bool = False) -> None:
        if self.session_key is None:
            return self.create()
        self._run(self._save_flow(self._get_session(no_load=must_create), must_create))

    def delete(self, session_key: str | None = None) -> None:
        self._run(self._delete_flow(session_key))

    def load(self) -> Data:
        return self._run(self._load_flow())

    def cycle_key(self) -> None:
        """A new key, the data kept, the old key dead at once (densekv's atomic
        regenerate, or login when ``_auth_user_id`` differs from the stored identity)."""
        data = self._session
        self._run(self._cycle_flow(data))
        self._session_cache = data
        self.modified = True

    def logout_everywhere(self) -> int:
        """End every session of this session's user (this one too); the count ended."""
        ended = self._run(self._end_all_flow(self._session))
        self.clear()
        self._session_key = None
        return ended

    @classmethod
    def clear_expired(cls) -> None:
        cls._backend().sync().sweep()

    # -- SessionBase, async -----------------------------------------------------------------
    async def aexists(self, session_key: str | None) -> bool:
        return await self._arun(self._exists_flow(session_key))

    async def acreate(self) -> None:
        await self._arun(self._create_flow(await self._aget_session(no_load=True)))
        self.modified = True

    async def asave(self, must_create: bool = False) -> None:
        if self.session_key is None:
            return await self.acreate()
        data = await self._aget_session(no_load=must_create)
        await self._arun(self._save_flow(data, must_create))

    async def adelete(self, session_key: str | None = None) -> None:
        await self._arun(self._delete_flow(session_key))

    async def aload(self) -> Data:
        return await self._arun(self._load_flow())

    async def acycle_key(self) -> None:
        data = await self._aget_session()
        await self._arun(self._cycle_flow(data))
        self._session_cache = data
        self.modified = True

    async def alogout_everywhere(self) -> int:
        ended = await self._arun(self._end_all_flow(await self._aget_session()))
        self.clear()
        self._session_key = None
        return ended

    @classmethod
    async def aclear_expired(cls) -> None:
        backend = cls._backend()
        if backend.real_async:
            await (await backend.for_loop()).sweep()
        else:
            await sync_to_async(backend.sync().sweep)()


def _drive(flow: Flow[T], backend: _Backend) -> T:
    """Run a flow against the sync store (the calls a flow yields, in order)."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            call = flow.send(result) if error is None else flow.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            target = backend.sync() if call.on is None else call.on
            result, error = getattr(target, call.name)(*call.args, **call.kwargs), None
        except Exception as exc:  # noqa: BLE001 - thrown into the flow, which re-raises it unless it handles it
            result, error = None, exc
