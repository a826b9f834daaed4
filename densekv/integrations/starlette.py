"""Starlette/FastAPI sessions kept in densekv: a pure ASGI middleware in the place of
starlette.middleware.sessions.SessionMiddleware (same arguments, same cookie attributes),
whose cookie holds a densekv token instead of the signed data.

    store = densekv.AsyncSessionStore(redis.asyncio.Redis.from_url(url), idle_ttl=3600)
    app.add_middleware(SessionMiddleware, store=store)

`request.session` is a dict (DenseSession) that remembers which top-level keys the request
set or deleted. What a request costs the server:
  * no cookie, or one that is not a well-formed token: nothing (an empty new session);
  * a cookie: one `get` before the app runs (an async app cannot load lazily on first
    access), so the session a request sees is the one stored when it began;
  * when the response starts, at most one write:
      new and non-empty        -> create(None, data): an anonymous session, cookie set;
      changed                  -> apply(token, changed keys, deleted keys): merged into the
                                  stored data atomically, so concurrent requests that change
                                  different keys both keep theirs; the cookie is sent
                                  again (as Starlette's is on every change); None (the
                                  session ended meanwhile) is never resurrected: the
                                  cookie is cleared;
      cleared (or an anonymous session emptied) -> destroy, cookie cleared;
      unchanged                -> touch, only when store.due_for_touch() says the idle
                                  window needs it; no cookie.
    An empty or unmodified session is never written and never gets a cookie.
Only top-level assignments are seen: change a nested value in place and assign the key
again (session["cart"] = cart), or call session.mark_modified("cart").

Login, regenerate and logout everywhere are module functions that run densekv's atomic
operation at once and change the cookie the middleware sends (`await login(request, 42)`,
`await regenerate(request)`, `await logout_everywhere(request)`); a plain logout is
`request.session.clear()`. A session with an identity ends only by clear(), logout
everywhere or expiry: deleting its last key keeps the login.

Errors: a server outage raises out of the middleware (a 500 from Starlette's error
middleware) before anything is written; data the store refuses (SessionDataTooLarge,
SessionDataInvalid) raises when the response starts, so that response becomes a 500 and
the stored session is left as it was. Messages never contain the token. WebSocket scopes
get the session loaded but never saved, as with Starlette's own middleware.

Moving in from starsessions: `SessionMiddleware(..., move_in=StarsessionsRedis(redis))`
looks up a cookie densekv does not know in starsessions 2.2's RedisStore (same cookie
value), imports it with its remaining lifetime (at most the store's ttl) and deletes the
old key; one densekv refuses (too large, invalid) stays there to expire. Two requests that
move the same session in at the same moment may both import it; the later import then
replaces the earlier one, changes of the first request included (a window of a few
milliseconds, once per session).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from densekv.integrations.tracked import TrackedDict
from densekv.sessions.model import (
    Identity,
    Session,
    SessionDataInvalid,
    SessionDataTooLarge,
    SessionExists,
    digest_of,
)
from densekv.sessions.store import AsyncSessionStore

__all__ = ["DenseSession", "SessionMiddleware", "SessionState", "StarsessionsRedis", "login",
           "logout_everywhere", "regenerate"]

_EXPIRED = "expires=Thu, 01 Jan 1970 00:00:00 GMT; "


@dataclass
class SessionState:
    """What the middleware and the module functions keep about a request's session beside
    its data: where it is stored and what to write back. Theirs to change, not the app's."""

    store: AsyncSessionStore
    found: Session | None  # as loaded when the request began (for due_for_touch)
    token: str | None
    identity: Identity | None
    changed: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    cleared: bool = False  # clear() was called: an empty result ends the session
    new_cookie: bool = False  # login/regenerate drew a token the browser lacks
    ended: bool = False  # the session ended during the request: clear the cookie


class DenseSession(TrackedDict):
    """request.session: a dict that records which top-level keys this request set or
    deleted. `accessed` and `modified` mean what they mean on Starlette's Session;
    `identity` is the session's owner (None while anonymous)."""

    def __init__(self, store: AsyncSessionStore, found: Session | None = None) -> None:
        super().__init__(found.data if found is not None and found.data else {})
        self.accessed = False
        self.modified = False
        self.state = SessionState(store, found, found.token if found else None,
                                  found.identity if found else None)

    @property
    def identity(self) -> Identity | None:
        return self.state.identity

    # -- change tracking -------------------------------------------------------
    def mark_accessed(self) -> None:
        self.accessed = True

    def mark_modified(self, *keys: str) -> None:
        """Count `keys` (every key, if none is named) as changed by this request."""
        self.accessed = self.modified = True
        for key in keys or tuple(self):
            self.state.changed.add(key)
            self.state.removed.discard(key)

    def _deleted(self, key: str) -> None:
        self.accessed = self.modified = True
        self.state.changed.discard(key)
        self.state.removed.add(key)

    def _set(self, key: str) -> None:
        self.mark_modified(key)

    def _on_clear(self) -> None:
        self.state.cleared = self.accessed = self.modified = True


def _end(session: DenseSession) -> None:
    """The stored session is gone: forget it here too, and clear the cookie."""
    session.clear()
    state = session.state
    state.token = None
    state.identity = None
    state.found = None
    state.changed.clear()
    state.removed.clear()
    state.cleared = state.new_cookie = False
    state.ended = session.accessed = session.modified = True


def _session_of(request: HTTPConnection) -> DenseSession:
    session = request.scope.get("session")
    if not isinstance(session, DenseSession):
        raise TypeError("request.session is not densekv's: add densekv.integrations.starlette."
                        "SessionMiddleware to the app")
    session.mark_accessed()
    return session


async def login(request: HTTPConnection, identity: Identity) -> None:
    """Bind the session to `identity` under a new token, the old one dead (one atomic
    step on the server). Changes made in this request are kept and saved as usual. A
    request without a stored session (or whose session ended meanwhile) gets a new one
    holding its current data, written now even if empty: a login is worth a session."""
    session = _session_of(request)
    state = session.state
    store = state.store
    token = await store.login(state.token, identity) if state.token else None
    if token is None:
        token = await store.create(identity, dict(session))
        state.changed.clear()
        state.removed.clear()
    state.token, state.identity = token, identity
    state.new_cookie, state.cleared, state.ended = True, False, False


async def regenerate(request: HTTPConnection) -> None:
    """A new token for the same data and identity, the old one dead. A session not yet
    stored needs none (its first save draws one); a session that ended meanwhile ends
    here too (empty, cookie cleared)."""
    session = _session_of(request)
    state = session.state
    if state.token is None:
        return
    token = await state.store.regenerate(state.token)
    if token is None:
        _end(session)
    else:
        state.token, state.new_cookie = token, True


async def logout_everywhere(request: HTTPConnection) -> None:
    """End every session of this session's identity (this one too); an anonymous
    session ends alone. The session is empty afterwards and its cookie is cleared."""
    session = _session_of(request)
    state = session.state
    if state.identity is not None:
        await state.store.destroy_all(state.identity)
    elif state.token is not None:
        await state.store.destroy(state.token)
    _end(session)


class MoveInSource(Protocol):
    """Where sessions densekv does not have yet may still live, by cookie value."""

    async def read(self, token: str) -> tuple[dict[str, Any], int] | None:
        """The session's data and its seconds left (-1: no expiry), or None."""

    async def forget(self, token: str) -> None:
        """Delete the old copy once densekv holds the session."""


class StarsessionsRedis:
    """Sessions written by starsessions 2.2's RedisStore: one string key per session,
    prefix + session id ("starsessions." + 32 hex characters by default), holding the
    JsonSerializer's JSON of the session dict plus starsessions' own "__metadata__"
    entry (dropped here); the key's TTL is the session's remaining life. `connection` is
    a redis.asyncio.Redis; `prefix` a string or a callable as in RedisStore."""

    def __init__(self, connection: Any, prefix: str | Callable[[str], str] = "starsessions.",
                 deserialize: Callable[[bytes], Any] = json.loads) -> None:
        self.connection = connection
        self.key_of: Callable[[str], str] = prefix if callable(prefix) else prefix.__add__
        self.deserialize = deserialize

    async def read(self, token: str) -> tuple[dict[str, Any], int] | None:
        key = self.key_of(token)
        async with self.connection.pipeline(transaction=True) as pipe:
            raw, pttl = await pipe.get(key).pttl(key).execute()
        if not raw or pttl == -2:
            return None
        data = self.deserialize(raw)
        if not isinstance(data, dict):
            return None
        data.pop("__metadata__", None)
        return data, -1 if pttl < 0 else math.ceil(pttl / 1000)

    async def forget(self, token: str) -> None:
        await self.connection.delete(self.key_of(token))


class SessionMiddleware:
    """ASGI middleware: scope["session"] is a DenseSession stored in `store`. Cookie
    arguments as Starlette's SessionMiddleware; max_age=None (the default here) sends no
    Max-Age, a cookie that ends with the browser; the server side ends by the store's
    ttl/idle_ttl either way, so pass max_age=store.ttl for a cookie that outlives it."""

    def __init__(
        self,
        app: ASGIApp,
        store: AsyncSessionStore,
        *,
        session_cookie: str = "session",
        max_age: int | None = None,
        path: str = "/",
        same_site: Literal["lax", "strict", "none"] = "lax",
        https_only: bool = False,
        domain: str | None = None,
        partitioned: bool = False,
        move_in: MoveInSource | None = None,
    ) -> None:
        self.app = app
        self.store = store
        self.session_cookie = session_cookie
        self.max_age = max_age
        self.path = path
        self.move_in = move_in
        self.security_flags = "httponly; samesite=" + same_site
        if https_only:  # Secure flag can be used with HTTPS only
            self.security_flags += "; secure"
        if domain is not None:
            self.security_flags += f"; domain={domain}"
        if partitioned:
            self.security_flags += "; partitioned"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        session = await self.load(HTTPConnection(scope).cookies.get(self.session_cookie))
        scope["session"] = session

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                cookie = await self.save(session)  # raises before anything is sent
                headers = MutableHeaders(scope=message)
                if session.accessed:
                    headers.add_vary_header("Cookie")
                if cookie is not None:
                    headers.append("Set-Cookie", cookie)
            await send(message)

        await self.app(scope, receive, send_wrapper)

    async def load(self, token: str | None) -> DenseSession:
        """The session a cookie names; empty (and no server call) for a junk cookie."""
        if token is None or digest_of(token) is None:
            return DenseSession(self.store)
        found = await self.store.get(token)
        if found is None and self.move_in is not None:
            found = await self._move_in(token)
        return DenseSession(self.store, found)

    async def _move_in(self, token: str) -> Session | None:
        source = self.move_in
        assert source is not None
        old = await source.read(token)
        if old is None:
            return None
        data, left = old
        if not data:
            await source.forget(token)
            return None
        ttl = self.store.ttl if left <= 0 else min(left, self.store.ttl)
        try:
            await self.store.create(None, data, ttl=ttl, token=token)
        except SessionExists:  # another request moved it in a moment ago: theirs stands
            return await self.store.get(token)
        except (SessionDataTooLarge, SessionDataInvalid):
            return None  # left where it is, to expire there; this browser starts afresh
        await source.forget(token)
        return await self.store.get(token)

    async def save(self, session: DenseSession) -> str | None:
        """Write what the request changed (see the module docstring); return the
        Set-Cookie value to send, if any."""
        store = self.store
        state = session.state
        token = state.token
        if token is None:
            if not session:
                return self._cleared_cookie() if state.ended else None
            state.token = await store.create(None, dict(session))
            return self._cookie(state.token)
        if not session and session.modified and (state.cleared or state.identity is None):
            await store.destroy(token)
            return self._cleared_cookie()
        if state.changed or state.removed:
            changes = {key: session[key] for key in state.changed}
            merged = await store.apply(token, changes, sorted(state.removed))
            return self._cleared_cookie() if merged is None else self._cookie(token)
        if state.new_cookie:
            return self._cookie(token)
        if state.found is not None and store.due_for_touch(state.found):
            await store.touch(token)
        return None

    def _cookie(self, token: str) -> str:
        max_age = f"Max-Age={self.max_age}; " if self.max_age is not None else ""
        return f"{self.session_cookie}={token}; path={self.path}; {max_age}{self.security_flags}"

    def _cleared_cookie(self) -> str:
        return f"{self.session_cookie}=null; path={self.path}; {_EXPIRED}{self.security_flags}"
