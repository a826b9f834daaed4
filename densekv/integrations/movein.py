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
  * aiohttp-session's RedisStorage: none yet (the aiohttp shell does not move sessions in).

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

import logging
from collections.abc import Callable
from typing import Any, Protocol

from densekv.errors import (
    SessionDataInvalid,
    SessionDataTooLarge,
    SessionExists,
    SessionIdentityInvalid,
    SessionLimitReached,
)
from densekv.integrations.calls import Create, ForgetOld, Get, ReadOld, StoreTtl
from densekv.integrations.drive import Flow
from densekv.sessions.model import Identity, Session, check_identity

__all__ = ["REFUSED", "AsyncMoveInSource", "MoveInSource", "Old", "as_is", "move_in"]

log = logging.getLogger(__name__)

#: an old session: its data (a plain dict) and its seconds left (None: no expiry)
Old = tuple[dict[str, Any], int | None]
#: what the store may refuse of a session moved in (anything else is raised)
REFUSED = (SessionDataInvalid, SessionDataTooLarge, SessionIdentityInvalid, SessionLimitReached)


class MoveInSource(Protocol):
    """Where sessions densekv does not have yet may still live, by cookie value (sync)."""

    def read(self, token: str, /) -> Old | None:
        """The old session, or None (absent, expired, or not decodable)."""

    def forget(self, token: str, /) -> None:
        """Delete the old copy once densekv holds the session."""


class AsyncMoveInSource(Protocol):
    """The same for an async shell."""

    async def read(self, token: str, /) -> Old | None:
        """The old session, or None (absent, expired, or not decodable)."""

    async def forget(self, token: str, /) -> None:
        """Delete the old copy once densekv holds the session."""


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
