"""Starlette/FastAPI sessions kept in densekv: a pure ASGI middleware in the place of
starlette.middleware.sessions.SessionMiddleware (same cookie arguments and defaults, same
cookie attributes), whose cookie holds a densekv token instead of the signed data.

    app.add_middleware(SessionMiddleware, url="redis://localhost:6379/0",
                       store_options={"namespace": "web", "idle_ttl": 3600})

Where the sessions live (one of three forms; docs/starlette.md):
  * url=...: one redis.asyncio client and AsyncSessionStore per running event loop, built
    on the first request of that loop and closed when the loop shuts down its async
    generators (asyncio.run, uvicorn and TestClient's portal all do). Each uvicorn worker
    and each TestClient loop (TestClient without `with` runs every request on a new loop)
    gets its own. `store_options` are AsyncSessionStore's keywords (namespace defaults to
    "starlette_sessions"); `client_options` go to densekv.connect.from_url (connect and
    read timeouts default to densekv.connect.TIMEOUTS, 5 s each). A "redis+cluster://"
    URL makes a RedisCluster client. A URL no client can be built from raises
    InvalidArgument when the middleware is made (integrations/urls.py).
  * store=<callable>: a function of no arguments returning an AsyncSessionStore, called
    once per running loop, in that loop; the client of the store it returns is closed
    with the loop.
  * store=<AsyncSessionStore>: used as is, on the one event loop it first serves (a
    redis.asyncio client cannot move between loops). A request on another loop raises
    RuntimeError naming the two forms above. The store and its client stay the caller's.

`request.session` is a dict (DenseSession) that remembers which top-level keys the request
set or deleted. What a request costs the server:
  * no cookie, or one that is not a well-formed token: nothing (an empty new session);
  * a cookie: one `get` before the app runs (an async app cannot load lazily on first
    access, which is synchronous). A load that fails (server down) fails only a request
    that uses the session: the error is raised where the app first reads request.session.
    A session that does not decode is no session (get(undecodable="none"));
  * when the response starts, at most one write (two on login/clear, or to end a token that
    loaded nothing; the decision is integrations/decide.py's, see below):
      new and non-empty        -> create(None, data, ttl): an anonymous session, cookie set;
      changed                  -> apply(token, changed keys, deleted keys, ttl, read=the
                                  session as loaded: one round trip): merged into the
                                  stored data atomically, so concurrent requests that
                                  change different keys both keep theirs; the cookie is
                                  sent again (as Starlette's is on every change); None (the
                                  session ended meanwhile) is never resurrected: the
                                  cookie is cleared;
      cleared (session.clear()) -> the stored session ends (destroy: it leaves
                                  sessions_of(identity)); keys set after the clear start a
                                  new anonymous session under a new token;
      unchanged                -> touch, only when store.due_for_touch() says the idle
                                  window needs it; no cookie.
    An empty or unmodified session is never written and never gets a cookie.
Only top-level assignments are seen: change a nested value in place and assign the key
again (session["cart"] = cart), or call session.mark_modified("cart").

Lifetime, as Starlette's: max_age (default 14 days) is the cookie's Max-Age and also the
stored session's life, counted from its last write (Starlette re-signs its cookie on every
change; here every write passes ttl=max_age, or the store's ttl if that is shorter: a
store's ttl is a bound too). max_age=None: a cookie without Max-Age (it ends with the
browser) and the store's own ttl on the server, None meaning "no lifetime of the
framework's" as in the Flask backend. max_age <= 0: no session outlives its request
(nothing is stored; the cookie is sent with that Max-Age, as Starlette sends it).

Login, regenerate, logout and logout everywhere are module functions that run densekv's
operation at once and change the cookie the middleware sends (`await login(request, 42)`).
A login as another identity than the session's ends that session and starts an empty one
for the new identity (as Django's login() flushes); the same identity or an anonymous
session keeps its data; the token rotates either way. `remember(request, seconds)` gives
one session its own max_age ("remember me"; kept in its data under MAX_AGE_KEY), and
`store_of(request)` is the loop's store for the app's own calls (sessions_of, destroy_all).

Errors: a server outage raises out of the request that uses the session (a 500 from
Starlette's error middleware) before anything is written; data the store refuses
(SessionDataTooLarge, SessionDataInvalid) raises when the response starts, so that
response becomes a 500 and the stored session is left as it was. Messages never contain
the token. WebSocket scopes get the session loaded but never saved, as with Starlette's
own middleware.

Moving in from starsessions: `SessionMiddleware(..., move_in=StarsessionsRedis())` looks
up a cookie densekv does not know in starsessions 2.2's RedisStore (same cookie value, on
the loop's session client unless a connection is given), imports it with its remaining
lifetime (at most max_age, or the store's ttl) and deletes the old key; one densekv
refuses (too large, invalid, not decodable) stays there to expire. Two requests that move
the same session in at the same moment: the later one reads the session the first one
stored. The policy is integrations/movein.py's, the same in every shell.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal

from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from densekv.integrations import asgi
from densekv.integrations.asgi import (
    MAX_AGE_KEY,
    DenseSession,
    MoveInSource,
    SessionRules,
    SessionState,
    check_lifetime,
)
from densekv.integrations.devices import DeviceLabel, check_device_label, label_of
from densekv.integrations.movein import RedisKeyReader
from densekv.integrations.stores import Stores
from densekv.sessions.model import Identity
from densekv.sessions.store import AsyncSessionStore

__all__ = ["DEFAULT_MAX_AGE", "DEFAULT_NAMESPACE", "MAX_AGE_KEY", "DenseSession",
           "SessionMiddleware", "SessionState", "StarsessionsRedis", "login", "logout",
           "logout_everywhere", "regenerate", "remember", "store_of"]

DEFAULT_MAX_AGE = 14 * 24 * 60 * 60
"""The middleware's max_age when none is given: Starlette's own default, 14 days in seconds."""
DEFAULT_NAMESPACE = "starlette_sessions"
"""The namespace of the stores built from url= when store_options gives none."""
_EXPIRED = "expires=Thu, 01 Jan 1970 00:00:00 GMT; "

StoreFactory = Callable[[], AsyncSessionStore]


def _session_of(request: HTTPConnection) -> DenseSession:
    session = request.scope.get("session")
    if not isinstance(session, DenseSession):
        raise TypeError("request.session is not densekv's: add densekv.integrations.starlette."
                        "SessionMiddleware to the app")
    session.mark_accessed()
    return session


def store_of(request: HTTPConnection) -> AsyncSessionStore:
    """The session store serving this request's event loop: for the app's own calls in a
    handler (`await store_of(request).destroy_all(user_id)` from an admin page,
    `sessions_of(uid)` for a "your devices" page). Does not count as using the session."""
    session = request.scope.get("session")
    if not isinstance(session, DenseSession):
        raise TypeError("request.session is not densekv's: add densekv.integrations.starlette."
                        "SessionMiddleware to the app")
    return session.state.store


async def login(request: HTTPConnection, identity: Identity) -> None:
    """Bind the session to `identity` under a new token, the old one dead (one atomic
    step on the server). The session of another identity ends, and the new one starts
    empty (the previous user's data is dropped, changes made earlier in this request
    too, as Django's login() flushes); an anonymous session or one of the same identity
    keeps its data and this request's changes. A request without a stored session (or
    whose session ended meanwhile) gets a new one holding its current data, written now
    even if empty: a login is worth a session. The middleware's device_label hook labels
    it; a login past the store's max_sessions_per_identity with on_limit="refuse" raises
    SessionLimitReached here, the session as it was (an anonymous one kept)."""
    session = _session_of(request)
    hook = session.state.device_label
    await asgi.login(session, identity, None if hook is None else label_of(hook, request))


async def regenerate(request: HTTPConnection) -> None:
    """A new token for the same data and identity, the old one dead. A session not yet
    stored needs none (its first save draws one); a session that ended meanwhile ends
    here too (empty, cookie cleared)."""
    await asgi.regenerate(_session_of(request))


async def remember(request: HTTPConnection, max_age: int | None) -> None:
    """"Remember me": this session's cookie gets Max-Age=max_age and its stored life
    max_age seconds from each write (None: a cookie that ends with the browser, kept the
    store's ttl on the server), instead of the middleware's max_age, until it ends. Kept in
    the session as MAX_AGE_KEY (a change of this request: the cookie is sent again)."""
    check_lifetime(max_age)
    _session_of(request)[MAX_AGE_KEY] = max_age


async def logout(request: HTTPConnection) -> None:
    """End this session now (it leaves sessions_of(identity)); the session is empty and
    its cookie is cleared. `request.session.clear()` does the same when the response
    starts."""
    await asgi.logout(_session_of(request))


async def logout_everywhere(request: HTTPConnection) -> None:
    """End every session of this session's identity (this one too); an anonymous
    session ends alone. The session is empty afterwards and its cookie is cleared."""
    await asgi.logout_everywhere(_session_of(request))


# -- where sessions move in from -------------------------------------------------------------

class StarsessionsRedis(RedisKeyReader):
    """Sessions written by starsessions 2.2's RedisStore: one string key per session,
    prefix + session id ("starsessions." + 32 hex characters by default), holding the
    JsonSerializer's JSON of the session dict plus starsessions' own "__metadata__"
    entry (dropped here); the key's TTL is the session's remaining life. `connection`: a
    redis.asyncio.Redis of one event loop, or None (the default) for the client of the
    session store of each loop (starsessions on the same server); `prefix` a string or a
    callable as in RedisStore."""

    def __init__(self, connection: Any = None, prefix: str | Callable[[str], str] = "starsessions.",
                 deserialize: Callable[[bytes], Any] = json.loads) -> None:
        super().__init__(connection)
        self.prefix = prefix
        self.deserialize = deserialize

    def key_of(self, token: str) -> str:
        return self.prefix(token) if callable(self.prefix) else self.prefix + token

    @property
    def connection(self) -> Any:
        """The client read (None: each loop's session client)."""
        return self.client

    def decode(self, raw: bytes) -> dict[str, Any] | None:
        try:
            data = self.deserialize(raw)
        except ValueError:  # not JSON (JSONDecodeError, UnicodeDecodeError): nothing to move in
            return None
        if isinstance(data, dict):
            data.pop("__metadata__", None)
        return data if isinstance(data, dict) else None


class SessionMiddleware(SessionRules):
    """ASGI middleware: scope["session"] is a DenseSession stored in densekv. The
    sessions' store: url= (one per event loop), store=<function> (called once per loop)
    or store=<AsyncSessionStore> (one loop). Cookie arguments and defaults are Starlette's
    SessionMiddleware's (no secret_key: the cookie holds a random token, nothing to sign);
    max_age also bounds the stored session's life. store_options go to AsyncSessionStore
    (namespace, ttl, idle_ttl, ...), client_options to densekv.connect.from_url (timeouts);
    move_in: a StarsessionsRedis (or any source with async read/forget) to move sessions in
    from under the same cookie. device_label: a callable(request) -> str | None that labels
    the session at login() (a store with track_devices=True). A url no client can be built
    from, or a device_label whose store_options lack track_devices, raises InvalidArgument
    when the middleware is made."""

    def __init__(
        self,
        app: ASGIApp,
        store: AsyncSessionStore | StoreFactory | None = None,
        *,
        url: str | None = None,
        store_options: Mapping[str, Any] | None = None,
        client_options: Mapping[str, Any] | None = None,
        session_cookie: str = "session",
        max_age: int | None = DEFAULT_MAX_AGE,
        path: str = "/",
        same_site: Literal["lax", "strict", "none"] = "lax",
        https_only: bool = False,
        domain: str | None = None,
        partitioned: bool = False,
        move_in: MoveInSource | None = None,
        device_label: DeviceLabel | None = None,
    ) -> None:
        if store_options and url is None:
            raise TypeError("store_options go with url=; a store given is built already")
        super().__init__(max_age, move_in)
        self.app = app
        check_device_label(device_label, store_options or {"track_devices": url is None}, "SessionMiddleware")
        self.device_label = device_label
        self.stores = Stores("SessionMiddleware", AsyncSessionStore, store, url=url, url_arg="url=",
                             store_options={"namespace": DEFAULT_NAMESPACE, **(store_options or {})},
                             client_options=client_options)
        self.session_cookie = session_cookie
        self.path = path
        self.security_flags = "httponly; samesite=" + same_site
        if https_only:  # Secure flag can be used with HTTPS only
            self.security_flags += "; secure"
        if domain is not None:
            self.security_flags += f"; domain={domain}"
        if partitioned:
            self.security_flags += "; partitioned"

    async def store(self) -> AsyncSessionStore:
        """The session store of the running event loop (for the app's own calls, such as
        sessions_of or destroy_all outside a request)."""
        return await self.stores.current()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        store = await self.stores.current()
        session = await self.load(store, HTTPConnection(scope).cookies.get(self.session_cookie))
        scope["session"] = session
        session.state.device_label = self.device_label

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start" and session.state.failed is None:
                cookie = await self.save(session)  # raises before anything is sent
                headers = MutableHeaders(scope=message)
                if session.accessed:
                    headers.add_vary_header("Cookie")
                if cookie is not None:
                    headers.append("Set-Cookie", cookie)
            await send(message)

        await self.app(scope, receive, send_wrapper)

    async def save(self, session: DenseSession) -> str | None:
        """Write what the request changed (see the module docstring and integrations/
        decide.py); return the Set-Cookie value to send, if any."""
        change = await self.write(session)
        if change is None:
            return None
        if change.value is None:
            return self._cleared_cookie()
        return self._cookie(change.value, change.max_age)

    def _cookie(self, token: str, max_age_of: int | None) -> str:
        max_age = f"Max-Age={max_age_of}; " if max_age_of is not None else ""
        return f"{self.session_cookie}={token}; path={self.path}; {max_age}{self.security_flags}"

    def _cleared_cookie(self) -> str:
        return f"{self.session_cookie}=null; path={self.path}; {_EXPIRED}{self.security_flags}"
