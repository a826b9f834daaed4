"""Moving sessions in from the backend a site used before densekv, written once for every
web shell: a `MoveInSource` reads an old session by its cookie value, and `move_in` (a flow
of integrations/calls.py's calls, run by the shell's driver) stores it in densekv under the
same token, so nobody is logged out by the move, then deletes the old copy. It runs when a
well-formed cookie names no densekv session.

A source: `read(token)` -> `(data, seconds left)` (None: no expiry) or None; `forget(token)`
deletes it. A sync shell's source has plain methods, an async shell's coroutines; the data
is the session's plain dict (the shell shapes it: Flask's value tags, the identity its user
key names). Readers, one per old backend:
  * Flask-Session 0.8 (Redis): flask.FlaskSessionFallback (sync);
  * Quart-Session (Redis): quart.QuartSessionFallback;
  * starsessions 2.2 (RedisStore): starlette.StarsessionsRedis (Starlette and Litestar);
  * Django's cache, db and cached_db backends: django/movein.py's OldBackend
    (DENSEKV_SESSIONS["fallback"]);
  * aiohttp-session's RedisStorage: aiohttp.AiohttpSessionRedis.
A shell loads a cookie's session with `load` (densekv's, else one moved in), which binds an
async source to the loop's client in one place (`bind`); the Redis readers share one shape
(`RedisKeyReader`).

The one policy (every shell, tests/unit/test_web_movein.py):
  * nothing to read (absent, expired, or data the reader cannot decode: a reader returns
    None for it, never raises): nothing moves and the old copy, if any, stays to expire
    there; densekv is asked once more for the token, which another request may have moved
    in a moment ago (its session stands, not a fresh one that would end it);
  * an old session with no seconds left, or with no data: nothing moves (an empty one is
    deleted there: there is nothing to keep);
  * an identity densekv cannot index: the session moves in anonymous (a warning logged);
  * the token is live in densekv already (another request moved it in a moment ago): that
    session stands, the old copy is left;
  * data or a session the store refuses (too large, not storable even as the shell's
    `fix` gives it, past an identity's session limit): nothing moves, the old copy stays to
    expire there, a warning is logged, and the browser starts afresh;
  * the lifetime: the seconds it had left, at most the shell's `bound` (None: none), and
    at most the store's ttl when the shell says so (`within_store_ttl`; no expiry: that
    bound, else the store's ttl);
  * an error of either server (densekv's, the old one's) is raised: the request fails as
    any failed load does in its shell.
What moved in is read back from densekv (one more read: moving in happens once a session).
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from densekv.errors import (
    SessionDataInvalid,
    SessionDataTooLarge,
    SessionExists,
    SessionIdentityInvalid,
    SessionLimitReached,
)
from densekv.integrations.calls import (
    AsyncMoveInSource,
    Create,
    ForgetOld,
    Get,
    MoveInSource,
    Old,
    ReadOld,
    StoreTtl,
)
from densekv.integrations.drive import Flow
from densekv.sessions.model import Identity, Session, check_identity

if TYPE_CHECKING:
    from densekv.sessions.store import AsyncSessionStore

__all__ = ["REFUSED", "AsyncMoveInSource", "MoveInSource", "Old", "RedisKeyReader", "as_is", "bind",
           "load", "move_in", "seconds_left"]

log = logging.getLogger(__name__)

#: what the store may refuse of a session moved in (anything else is raised)
REFUSED = (SessionDataInvalid, SessionDataTooLarge, SessionIdentityInvalid, SessionLimitReached)


def as_is(data: dict[str, Any]) -> tuple[dict[str, Any], Identity | None]:
    """A shell's `shape` when the old data is stored as is, anonymous."""
    return data, None


def move_in(source: MoveInSource | AsyncMoveInSource, token: str, *,
            shape: Callable[[dict[str, Any]], tuple[dict[str, Any], Identity | None]] = as_is,
            fix: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
            bound: int | None = None, within_store_ttl: bool = False,
            what: str = "an old session") -> Flow[Session | None]:
    """The session `token` names once moved in from `source` (the policy in the module
    docstring), or None. `shape`: the old data as the shell stores it, and its identity;
    `fix`: the data once more, when the store refuses it as invalid (Django: each refused
    key as its serializer gives it back); `what`: the old backend, for the log."""
    old = yield ReadOld(source, token)
    if old is None:  # unless another request just moved it in (and deleted it there)
        again: Session | None = yield Get(token)
        return again
    data, left = old
    if left is not None and left <= 0:
        return None
    if not data:
        yield ForgetOld(source, token)
        return None
    stored, identity = shape(data)
    identity = _indexable(identity, what)
    ttl = left
    if within_store_ttl:
        store_ttl: int = yield StoreTtl()
        cap = min(bound or store_ttl, store_ttl)
        ttl = cap if left is None else min(left, cap)
    elif bound is not None:
        ttl = bound if left is None else min(left, bound)
    try:
        try:
            yield Create(identity, stored, ttl, token=token)
        except SessionDataInvalid:
            if fix is None:
                raise
            yield Create(identity, fix(stored), ttl, token=token)
    except SessionExists:  # another request moved it in a moment ago: theirs stands
        theirs: Session | None = yield Get(token)
        return theirs
    except REFUSED as exc:  # left where it is, to expire there; this browser starts afresh
        log.warning("densekv: %s was not moved in: %s", what, exc)
        return None
    yield ForgetOld(source, token)
    moved: Session | None = yield Get(token)
    return moved


def _indexable(identity: Identity | None, what: str) -> Identity | None:
    if identity is None:
        return None
    try:
        return check_identity(identity)
    except SessionIdentityInvalid as exc:
        log.warning("densekv: %s moves in anonymous: its user is not an identity densekv can "
                    "index (%s)", what, exc)
        return None


# -- the async shells: a source on the loop's client, one reader shape ---------------------

class BindsToStore(Protocol):
    """A source that, given no client of its own, reads the server of the session store of
    each event loop (a redis.asyncio client serves one loop)."""

    def for_store(self, store: AsyncSessionStore, /) -> AsyncMoveInSource:
        """This source on the client of `store` (the loop's), unless it has its own."""


def bind(source: AsyncMoveInSource, store: AsyncSessionStore) -> AsyncMoveInSource:
    """`source` as it serves the loop of `store`: its `for_store(store)` when it has one
    (BindsToStore), else itself. The one place an async shell binds an old source."""
    for_store = getattr(source, "for_store", None)
    return source if for_store is None else for_store(store)


def load(token: str, source: MoveInSource | AsyncMoveInSource | None = None, *,
         store: AsyncSessionStore | None = None,
         shape: Callable[[dict[str, Any]], tuple[dict[str, Any], Identity | None]] = as_is,
         bound: int | None = None, within_store_ttl: bool = False,
         what: str = "an old session") -> Flow[tuple[Session | None, Session | None]]:
    """The load of a well-formed cookie's `token`, as a flow: (the session densekv has,
    None), else (None, the one moved in from `source` by `move_in`'s policy, or None).
    `store`: the async store the flow runs on, to which an async source is bound (`bind`);
    the other keywords are move_in's."""
    found: Session | None = yield Get(token)
    if found is not None or source is None:
        return found, None
    if store is not None:
        source = bind(source, store)  # type: ignore[arg-type]  # an async shell's source
    moved = yield from move_in(source, token, shape=shape, bound=bound,
                               within_store_ttl=within_store_ttl, what=what)
    return None, moved


def seconds_left(pttl_ms: int) -> int | None:
    """A key's PTTL, read with its value, as an old session's seconds left: None for no
    expiry, else rounded up (a key with 1 ms left has a second, not none)."""
    return None if pttl_ms < 0 else max(1, math.ceil(pttl_ms / 1000))


class RedisKeyReader:
    """An async MoveInSource for an old backend that kept each session in one Redis string
    key (starsessions' RedisStore, Quart-Session, aiohttp-session's RedisStorage): the
    value and its PTTL read in one transaction, the key deleted once densekv holds the
    session. A subclass names the key (`key_of`) and decodes the value (`decode`: the
    session's plain dict, or None for anything it cannot read, never an error).

    `client`: a redis.asyncio client on the old backend's server (of one event loop), or
    None for the client of the session store of each loop (`for_store`: the old backend on
    the same server)."""

    def __init__(self, client: Any = None) -> None:
        self.client = client

    def key_of(self, token: str) -> str:
        raise NotImplementedError

    def decode(self, raw: bytes) -> dict[str, Any] | None:
        raise NotImplementedError

    def for_store(self, store: AsyncSessionStore) -> RedisKeyReader:
        """This source on the client of `store` (the loop's), unless it has its own."""
        if self.client is not None:
            return self
        on_loop = copy.copy(self)
        on_loop.client = store.client
        return on_loop

    async def read(self, token: str) -> Old | None:
        """The old session's data and its seconds left (None: no expiry), or None."""
        key = self.key_of(token)
        async with self.client.pipeline(transaction=True) as pipe:
            raw, ms = await pipe.get(key).pttl(key).execute()
        if not raw:
            return None
        data = self.decode(raw)
        if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
            return None
        return data, seconds_left(ms)

    async def forget(self, token: str) -> None:
        """Delete the old session once densekv holds it."""
        await self.client.delete(self.key_of(token))
