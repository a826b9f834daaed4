"""Litestar sessions kept in densekv: a session backend for Litestar's own session middleware,
configured like its ServerSideSessionConfig (same cookie fields and defaults), whose cookie
holds a densekv token and whose sessions live in an AsyncSessionStore, dense and indexed by
user.

    session_config = SessionConfig(url="redis://localhost:6379/0",
                                   store_options={"namespace": "web", "idle_ttl": 3600})
    app = Litestar(route_handlers=[...], middleware=[session_config.middleware])

The rules are the Starlette backend's, written once in integrations/asgi.py (docs/litestar.md):
one read before the handler for a well-formed cookie (none without one), at most one write
when the response starts (only the top-level keys the request changed), max_age the cookie's
Max-Age and a bound on the stored session's life, a read-only request touching only when the
idle expiry is due, login / regenerate / logout / log out everywhere as module functions that
act at once (`await login(request, 42)`), a failed read raised where the handler first uses
the session (a route that never uses it is served while the server is down).

What Litestar adds: the handler may replace the session (`request.set_session({...})`, a
dict or a dataclass / msgspec / pydantic value, turned into a dict with the app's JSON
encoder as Litestar's own backends do) or clear it (`request.clear_session()`). The backend
keeps its own state in the scope, not only in `request.session`: a replaced session writes
every key of the new value and removes the keys it lacks, keeping the token and the user; a
cleared one ends the stored session (its cookie is cleared), as `request.session.clear()`
does. The store: url= builds one client and store per running event loop (each uvicorn
worker, each TestClient loop), closed with the loop; store=<function> is called once per
loop; store=<AsyncSessionStore> serves the one loop it first serves.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie, MutableScopeHeaders
from litestar.enums import ScopeType
from litestar.exceptions import ImproperlyConfiguredException, SerializationException
from litestar.middleware.base import DefineMiddleware
from litestar.middleware.session.base import BaseBackendConfig, BaseSessionBackend
from litestar.middleware.session.base import SessionMiddleware as LitestarSessionMiddleware
from litestar.serialization import decode_json, encode_json
from litestar.types import Empty, Message, Scopes, ScopeSession
from litestar.utils import get_serializer_from_scope

from densekv.integrations import asgi
from densekv.integrations.asgi import (
    MAX_AGE_KEY,
    CookieChange,
    DenseSession,
    MoveInSource,
    SessionRules,
    check_lifetime,
)
from densekv.integrations.devices import DeviceLabel, check_device_label, label_of
from densekv.integrations.movein import RedisKeyReader
from densekv.integrations.stores import Stores
from densekv.sessions.model import Identity
from densekv.sessions.store import AsyncSessionStore

__all__ = ["DEFAULT_MAX_AGE", "DEFAULT_NAMESPACE", "MAX_AGE_KEY", "DenseSession",
           "LitestarRedisStore", "SessionBackend", "SessionConfig", "login", "logout", "logout_everywhere", "regenerate", "remember",
           "store_of"]

DEFAULT_MAX_AGE = 14 * 24 * 60 * 60
"""SessionConfig's max_age when none is given: Litestar's own default, 14 days in seconds."""
DEFAULT_NAMESPACE = "litestar_sessions"
"""The namespace of the stores built from url= when store_options gives none."""
_STATE = "densekv.session"  # the scope key of the request's DenseSession, whatever the app does
_FAILED_BODY = b'{"status_code":500,"detail":"Internal Server Error"}'  # Litestar's own 500
log = logging.getLogger(__name__)

StoreFactory = Callable[[], AsyncSessionStore]

# the dict methods a handler reads or changes the session through: each raises the error of
# a failed read (the session is used) and counts as access (Vary: Cookie)
_USES = ("__getitem__", "get", "__contains__", "__iter__", "__len__", "keys", "values", "items",
         "copy", "__eq__", "__ne__", "__or__", "__ror__", "__reversed__", "__setitem__",
         "__delitem__", "pop", "popitem", "setdefault", "update", "clear", "__ior__")


class _Used(DenseSession):
    """Litestar's request.session is the scope's value, with no hook on access: its use is
    seen by the dict methods themselves (the shell's internal reads go through dict's)."""


def _use(name: str) -> Any:
    plain = getattr(DenseSession, name)

    def used(self: DenseSession, *args: Any, **kwargs: Any) -> Any:
        self.mark_accessed()
        return plain(self, *args, **kwargs)

    used.__name__ = used.__qualname__ = name
    return used


for _name in _USES:
    setattr(_Used, _name, _use(_name))


def _adopt(scope: Any) -> DenseSession:
    """The request's DenseSession holding what the app made of the session: itself, a value
    given with set_session() (its keys written, the others removed), or Empty
    (clear_session(): the stored session ends). scope["session"] is it again after."""
    session = cast(DenseSession, scope[_STATE])
    value: object = scope.get("session", session)
    if value is session:
        return session
    session.mark_accessed()  # a failed read raises here: replacing data never read is a use
    if value is Empty or value is None:
        DenseSession.clear(session)
    else:
        if not isinstance(value, Mapping):  # a dataclass, msgspec Struct, pydantic model ...
            value = decode_json(encode_json(value, get_serializer_from_scope(scope)))
            if not isinstance(value, dict):
                raise TypeError("request.set_session() takes a dict or a value that encodes as a "
                                f"JSON object, not {type(value).__name__}")
        new = dict(value)
        for key in [k for k in dict.keys(session) if k not in new]:
            DenseSession.__delitem__(session, key)
        for key, item in new.items():
            DenseSession.__setitem__(session, key, item)
    scope["session"] = session
    return session


def _session_of(connection: ASGIConnection[Any, Any, Any, Any]) -> DenseSession:
    if not isinstance(connection.scope.get(_STATE), DenseSession):
        raise TypeError("request.session is not densekv's: add densekv.integrations.litestar."
                        "SessionConfig(...).middleware to the app's middleware")
    session = _adopt(connection.scope)
    session.mark_accessed()
    return session


def store_of(connection: ASGIConnection[Any, Any, Any, Any]) -> AsyncSessionStore:
    """The session store serving this request's event loop: for the app's own calls in a
    handler (`await store_of(request).destroy_all(user_id)` from an admin page,
    `sessions_of(uid)` for a "your devices" page). Does not count as using the session."""
    session = connection.scope.get(_STATE)
    if not isinstance(session, DenseSession):
        raise TypeError("request.session is not densekv's: add densekv.integrations.litestar."
                        "SessionConfig(...).middleware to the app's middleware")
    return session.state.store


async def login(connection: ASGIConnection[Any, Any, Any, Any], identity: Identity) -> None:
    """Bind the session to `identity` under a new token, the old one dead (one atomic
    step on the server). The session of another identity ends, and the new one starts
    empty (the previous user's data is dropped, changes made earlier in this request
    too); an anonymous session or one of the same identity keeps its data and this
    request's changes (a session given with set_session() included). A request without a
    stored session (or whose session ended meanwhile) gets a new one holding its current
    data, written now even if empty: a login is worth a session. The config's
    device_label hook labels it; a login past the store's max_sessions_per_identity with
    on_limit="refuse" raises SessionLimitReached here, the session as it was."""
    session = _session_of(connection)
    hook = session.state.device_label
    await asgi.login(session, identity, None if hook is None else label_of(hook, connection))


async def regenerate(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """A new token for the same data and identity, the old one dead. A session not yet
    stored needs none (its first save draws one); a session that ended meanwhile ends
    here too (empty, cookie cleared)."""
    await asgi.regenerate(_session_of(connection))


async def remember(connection: ASGIConnection[Any, Any, Any, Any], max_age: int | None) -> None:
    """"Remember me": this session's cookie gets Max-Age=max_age and its stored life
    max_age seconds from each write (None: a cookie that ends with the browser, kept the
    store's ttl on the server), instead of the config's max_age, until it ends. Kept in
    the session as MAX_AGE_KEY (a change of this request: the cookie is sent again)."""
    check_lifetime(max_age)
    _session_of(connection)[MAX_AGE_KEY] = max_age


async def logout(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """End this session now (it leaves sessions_of(identity)); the session is empty and
    its cookie is cleared. `request.clear_session()` and `request.session.clear()` do the
    same when the response starts."""
    await asgi.logout(_session_of(connection))


async def logout_everywhere(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """End every session of this session's identity (this one too); an anonymous
    session ends alone. The session is empty afterwards and its cookie is cleared."""
    await asgi.logout_everywhere(_session_of(connection))


# -- where sessions move in from -------------------------------------------------------------
class LitestarRedisStore(RedisKeyReader):
    """Sessions written by Litestar's own ServerSideSessionConfig on a RedisStore: one string
    key per session, the store's namespace + ":" + the session id (64 hex characters by
    default; a valid densekv token, so the cookie goes on unchanged), holding the session
    dict as JSON; the key's TTL is the session's remaining life. `namespace` is the
    RedisStore's, as given to it: "LITESTAR" by default (`RedisStore.with_client(url)`),
    "LITESTAR_sessions" for `root.with_namespace("sessions")`, None for none. `client`: a
    redis.asyncio.Redis of one event loop, or None (the default) for the client of the
    session store of each loop (Litestar's sessions on the same server)."""

    def __init__(self, client: Any = None, namespace: str | None = "LITESTAR") -> None:
        super().__init__(client)
        self.namespace = namespace

    def key_of(self, token: str) -> str:
        return f"{self.namespace}:{token}" if self.namespace else token

    def decode(self, raw: bytes) -> dict[str, Any] | None:
        try:
            data = decode_json(raw)
        except SerializationException:  # not JSON: nothing to move in
            return None
        return data if isinstance(data, dict) else None


class SessionBackend(BaseSessionBackend["SessionConfig"]):
    """What Litestar's SessionMiddleware calls: the session loaded before the handler, saved
    when the response starts. Made by SessionConfig.middleware."""

    def get_session_id(self, connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
        """request.get_session_id(): the token of the session loaded; for one not stored yet,
        the token its first write will store it under (drawn now, as Litestar's server-side
        backend draws its id before the handler: the cookie then carries this value). A
        login draws a new token, so the id told before a login in the same request is not
        the one after it."""
        session = connection.scope.get(_STATE)
        return session.state.session_id() if isinstance(session, DenseSession) else None

    async def load_from_connection(self, connection: ASGIConnection[Any, Any, Any, Any]) -> dict[str, Any]:
        config = self.config
        store = await config.stores.current()
        session = await config.rules.load(store, connection.cookies.get(config.key))
        connection.scope[_STATE] = session  # type: ignore[literal-required]
        session.state.device_label = config.device_label
        return session

    async def store_in_message(self, scope_session: ScopeSession, message: Message,
                               connection: ASGIConnection[Any, Any, Any, Any]) -> None:
        scope = connection.scope
        session = scope.get(_STATE)
        if not isinstance(session, DenseSession):
            return
        if session.state.failed is not None and scope_session is session:
            return  # the read failed and nothing used the session: served, nothing written
        session = _adopt(scope)
        accessed = session.accessed
        change = await self.config.rules.write(session)  # raises before anything is sent
        headers = MutableScopeHeaders.from_message(message)
        if accessed:
            vary = headers.get("vary")
            if vary is None:
                headers.add("vary", "Cookie")
            elif "cookie" not in vary.lower():
                headers["vary"] = f"{vary}, Cookie"
        if change is not None:
            headers.add("set-cookie", self.config.cookie(change).to_header(header=""))


class _Middleware(LitestarSessionMiddleware[SessionBackend]):
    """Litestar's SessionMiddleware, except that a save that raises (data the store refuses,
    the server gone since the read) turns the response into a 500 with nothing sent of the
    handler's: Litestar's exception middleware already counts the response as started when
    the session is saved, and would only break the connection."""

    def create_send_wrapper(self, connection: ASGIConnection[Any, Any, Any, Any]
                            ) -> Callable[[Message], Awaitable[None]]:
        send = connection.send
        replaced = False

        async def wrapped_send(message: Message) -> None:
            nonlocal replaced
            if replaced:  # the handler's body, after the 500 sent in its place
                return
            if message["type"] != "http.response.start":
                await send(message)
                return
            try:
                await self.backend.store_in_message(connection.scope.get("session"), message,
                                                    connection)
            except Exception:
                replaced = True
                log.exception("densekv: the session was not saved; the response is a 500")
                await send({"type": "http.response.start", "status": 500, "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(_FAILED_BODY)).encode())]})
                await send({"type": "http.response.body", "body": _FAILED_BODY,
                            "more_body": False})
                return
            await send(message)

        return wrapped_send


@dataclass
class SessionConfig(BaseBackendConfig[SessionBackend]):
    """Litestar's session middleware on densekv: `app = Litestar(..., middleware=[
    SessionConfig(url="redis://...").middleware])`. The sessions' store: url= (one per
    event loop), store=<function> (called once per loop) or store=<AsyncSessionStore> (one
    loop). store_options go to AsyncSessionStore (namespace, ttl, idle_ttl, ...; namespace
    "litestar_sessions" by default), client_options to densekv.connect.from_url (connect and
    read timeouts, 5 s each by default). Cookie fields and defaults are Litestar's
    ServerSideSessionConfig's; max_age (seconds, from 1) also bounds the stored session's
    life. move_in: a source with async read(token) / forget(token) to move sessions in from
    under the same cookie. A URL no client can be built from raises InvalidArgument here,
    at setup; nothing connects before the first request that has a session to read or
    write."""

    _backend_class = SessionBackend

    url: str | None = None
    """The server (redis://, rediss://, unix://, redis+cluster://): a client and store per
    running event loop, closed with the loop."""
    store: AsyncSessionStore | StoreFactory | None = None
    """Instead of url: a function of no arguments returning an AsyncSessionStore (called
    once per loop), or a store (one loop)."""
    store_options: Mapping[str, Any] | None = None
    """AsyncSessionStore's keywords for the stores built from url."""
    client_options: Mapping[str, Any] | None = None
    """densekv.connect.from_url's keywords for the clients built from url."""
    key: str = "session"
    """The cookie's name."""
    max_age: int = DEFAULT_MAX_AGE
    """The cookie's Max-Age, and the stored session's life from its last write (at most the
    store's ttl)."""
    scopes: Scopes = field(default_factory=lambda: {ScopeType.HTTP, ScopeType.WEBSOCKET})
    """The scopes the middleware serves (a WebSocket's session is loaded, never saved)."""
    path: str = "/"
    """The cookie's Path."""
    domain: str | None = None
    """The cookie's Domain."""
    secure: bool = False
    """The cookie's Secure flag."""
    httponly: bool = True
    """The cookie's HttpOnly flag."""
    samesite: Literal["lax", "strict", "none"] = "lax"
    """The cookie's SameSite."""
    exclude: str | list[str] | None = None
    """Path patterns the middleware skips."""
    exclude_opt_key: str = "skip_session"
    """A route handler option that skips the middleware."""
    move_in: MoveInSource | None = None
    """Where sessions densekv does not have yet may still live, by cookie value."""
    device_label: DeviceLabel | None = None
    """A callable(request) -> str | None that labels the session at login() ("your
    devices": a store with track_devices=True)."""
    rules: SessionRules = field(init=False, repr=False, compare=False)
    stores: Stores[AsyncSessionStore] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 1 <= len(self.key) <= 256:
            raise ImproperlyConfiguredException("key must be a string with a length between 1-256")
        if type(self.max_age) is not int or self.max_age < 1:
            raise ImproperlyConfiguredException("max_age is a number of seconds from 1")
        if (self.store is None) == (self.url is None):
            raise ImproperlyConfiguredException("SessionConfig needs url= or store= (one of them)")
        if self.store_options and self.url is None:
            raise ImproperlyConfiguredException(
                "store_options go with url=; a store given is built already")
        check_device_label(self.device_label, self.store_options or {"track_devices": self.url is None},
                           "SessionConfig")
        self.rules = SessionRules(self.max_age, self.move_in, session_class=_Used)
        self.stores = Stores("SessionConfig", AsyncSessionStore, self.store, url=self.url, url_arg="url=",
                             store_options={"namespace": DEFAULT_NAMESPACE, **(self.store_options or {})},
                             client_options=self.client_options)  # a wrong url fails here, at setup

    @property
    def middleware(self) -> DefineMiddleware:
        """The session middleware to put in the app's `middleware=[...]` (or a router's)."""
        return DefineMiddleware(_Middleware, backend=self._backend_class(config=self))

    async def current_store(self) -> AsyncSessionStore:
        """The session store of the running event loop (for the app's own calls outside a
        request, such as sessions_of or destroy_all)."""
        return await self.stores.current()

    def cookie(self, change: CookieChange) -> Cookie:
        """The Set-Cookie of a save: the token with this session's Max-Age, or cleared."""
        if change.value is None:
            return Cookie(key=self.key, value="null", max_age=0, expires=0, path=self.path,
                          domain=self.domain, secure=self.secure, httponly=self.httponly,
                          samesite=self.samesite)
        return Cookie(key=self.key, value=change.value, max_age=change.max_age, path=self.path,
                      domain=self.domain, secure=self.secure, httponly=self.httponly,
                      samesite=self.samesite)
