"""aiohttp sessions kept in densekv: `aiohttp_session.setup(app, Storage(store))`, a storage
whose cookie holds only a densekv token. Lazy as aiohttp_session is; a save writes only the
keys the request set or deleted (`store.apply`), never an empty or untouched session;
`max_age` is the cookie's Max-Age and the stored session's life from its last change;
`invalidate()` is a logout (store.destroy). Semantics and differences: docs/aiohttp.md.

Moving in from aiohttp-session's RedisStorage: `Storage(store, move_in=AiohttpSessionRedis())`
reads a cookie densekv does not know under RedisStorage's key (`<cookie_name>_<key>`, the
JSON of `{"created": ..., "session": {...}}`), stores it in densekv under the same cookie
value with its remaining lifetime (at most max_age and the store's ttl), anonymous (RedisStorage
keeps no user), and deletes the old key; what is refused and why is integrations/movein.py's
policy, the same in every shell.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import aiohttp_session
from aiohttp import web

from densekv.integrations import decide as rules
from densekv.integrations import identity_flows as flows
from densekv.integrations import movein
from densekv.integrations.decide import Held, carry, decide
from densekv.integrations.devices import DeviceLabel, check_device_label, label_of
from densekv.integrations.drive import Flow, arun
from densekv.integrations.movein import AsyncMoveInSource, RedisKeyReader
from densekv.integrations.stores import Stores
from densekv.integrations.tracked import TrackedDict
from densekv.sessions.model import Identity, Session, check_identity, well_formed
from densekv.sessions.store import AsyncSessionStore

__all__ = ["AiohttpSessionRedis", "DenseSession", "Storage", "login", "logout_everywhere", "regenerate"]


class _Tracked(TrackedDict):
    """The session's mapping; `ops`: each top-level key set (True) or removed (False)."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.ops: dict[str, bool] = {}

    def _set(self, key: str) -> None:
        self.ops[key] = True

    def _deleted(self, key: str) -> None:
        self.ops[key] = False


class DenseSession(aiohttp_session.Session):
    """aiohttp_session's Session on a densekv session. `changed()` rewrites every key (for
    values changed in place); `invalidate()` ends the stored session when saved."""

    def __init__(self, store: AsyncSessionStore, found: Session | None, max_age: int | None,
                 stale: str | None = None) -> None:
        data: aiohttp_session.SessionData | None = None if found is None else {
            "created": int(time.time()), "session": found.data or {}}
        super().__init__(found and found.identity, data=data, new=found is None, max_age=max_age)
        self._mapping = self.tracked = _Tracked(self._mapping)
        self.store, self.token, self.found = store, None if found is None else found.token, found
        self.ended = self.new_cookie = self.invalidated = False
        self.stale = stale  # a token the store did not give a session for (gone, undecodable)
        self.device_label: DeviceLabel | None = None  # the storage's hook, called by login()

    def changed(self) -> None:
        """Save every key of the session (for a value changed in place), as aiohttp_session's
        Session.changed() asks."""
        self._changed = True
        self.tracked.ops.update(dict.fromkeys(self.tracked, True))

    def invalidate(self) -> None:
        """Log out: the stored session ends when the response is saved and the cookie is
        deleted; the session is empty."""
        self._mapping = self.tracked = _Tracked({})
        self._identity, self._changed, self.invalidated, self.ended = None, True, True, True

    def follow(self, held: flows.Rebind) -> None:
        """What an identity flow left (integrations/identity_flows.py): now stored under
        held.token (None: ended, the cookie is deleted); held.data what the session holds
        (None: the data and its pending changes stay as they are)."""
        self.stale = held.stale
        if not held.changed:  # a refused login: the session as it was
            return
        if held.data is not None:
            self._mapping = self.tracked = _Tracked(held.data)
        self.ended = self.ended or held.token is None
        self.token, self._identity, self.new_cookie, self._changed = (
            held.token, held.identity, True, True)

    async def lifetime(self) -> int | None:
        """The stored session's ttl: max_age, at most the store's; None: the store's."""
        return None if self.max_age is None else min(self.max_age, (await self.store.ready()).ttl)

    async def write(self) -> str | None:
        """Save what changed (integrations/decide.py); the cookie value to send ("" deletes
        it, None: no cookie). aiohttp_session saves only a changed session."""
        return await arun(self._save(await self.lifetime()), self.store)

    def _save(self, ttl: int | None) -> Flow[str | None]:
        if rules.outlives_no_request(ttl):  # a session that outlives no request is not kept
            yield from rules.store_nothing(self.token, True, self.stale)
            self.invalidate()
            self.token = self.stale = None
            return ""  # the cookie is deleted
        mapping, token, ops = self.tracked, self.token, self.tracked.ops
        emptied = self.invalidated or (not mapping and self.identity is None)  # logout, or emptied
        held = Held(token=token, read=self.found, stale=self.stale, ended=self.ended,
                    modified=True, data=dict(mapping) if token is None or emptied else {},
                    changed={key: mapping[key] for key, kept in ops.items() if kept},
                    removed=sorted(key for key, kept in ops.items() if not kept),
                    emptied=emptied, identity=self.identity if token is None else None,
                    rotated=self.new_cookie, ttl=... if ttl is None else ttl, life=ttl,
                    renew_on_rotate=False)
        outcome = yield from carry(decide(held), token)
        self.token, self.stale = outcome.token, None
        return {"set": outcome.token, "delete": ""}.get(outcome.cookie or "")


class AiohttpSessionRedis(RedisKeyReader):
    """Reads the sessions aiohttp-session's RedisStorage wrote: key `<cookie_name>_<key>`
    (its cookie_name, "AIOHTTP_SESSION" by default; the key a uuid4 hex, the cookie's
    value), value the JSON of `{"created": <unix time>, "session": {...}}`, expiry its
    max_age (none without one). Read with `json`, as RedisStorage's default decoder writes
    it (`decoder`: its own, if it was given one); aiohttp-session need not stay installed.

    client: a redis.asyncio client on the server RedisStorage used, or None (the default)
    for the client of the session store of each loop (RedisStorage on the same server).
    max_age: RedisStorage's, when it had one: aiohttp-session drops a session created
    longer ago than that, so it is not moved in, and one younger moves in with no more
    than what it had left.
    """

    def __init__(self, client: Any = None, *, cookie_name: str = "AIOHTTP_SESSION",
                 max_age: int | None = None, decoder: Callable[[str], Any] = json.loads) -> None:
        super().__init__(client)
        self.cookie_name, self.max_age, self.decoder = cookie_name, max_age, decoder

    def key_of(self, token: str) -> str:
        return f"{self.cookie_name}_{token}"

    def decode(self, raw: bytes) -> dict[str, Any] | None:
        try:
            stored = self.decoder(raw.decode("utf-8"))
        except ValueError:  # not JSON (JSONDecodeError, UnicodeDecodeError): nothing to move in
            return None
        if not isinstance(stored, dict) or not isinstance(stored.get("session"), dict):
            return None
        return {"created": stored.get("created"), "session": stored["session"]}

    async def read(self, token: str) -> tuple[dict[str, Any], int | None] | None:
        """The old session's data and its seconds left (None: no expiry), or None."""
        old = await super().read(token)
        if old is None:
            return None
        stored, left = old
        created, data = stored["created"], stored["session"]
        if self.max_age is not None and type(created) is int:
            by_age = created + self.max_age - int(time.time())
            left = by_age if left is None else min(left, by_age)
        return data, left


class Storage(aiohttp_session.AbstractStorage):
    """Sessions in `store`: an AsyncSessionStore (serving the one event loop it first
    serves, as a redis.asyncio client serves one loop: a request on another raises
    RuntimeError), or a callable that makes one (then one store per event loop). Keyword
    arguments are AbstractStorage's cookie arguments (cookie_name, domain, max_age, path, secure,
    httponly, samesite). device_label: a callable(request) -> str | None that labels the
    session at login() (a store with track_devices=True; densekv.integrations.devices).
    move_in: an AiohttpSessionRedis (or any source with async read/forget) to move sessions
    in from under the same cookie."""

    def __init__(self, store: AsyncSessionStore | Callable[[], AsyncSessionStore],
                 *, device_label: DeviceLabel | None = None,
                 move_in: AsyncMoveInSource | None = None, **cookie: Any) -> None:
        self.stores = Stores("Storage", AsyncSessionStore, store)
        if {"encoder", "decoder", "key_factory"} & cookie.keys():  # densekv codes, and draws tokens
            raise TypeError("densekv's Storage takes no encoder, decoder or key_factory")
        super().__init__(**cookie)
        check_device_label(device_label, {"track_devices": True}, "Storage")
        self.device_label = device_label
        self.move_in = move_in

    async def store(self) -> AsyncSessionStore:
        """The store of the running event loop (closed with that loop when made here; a store
        given serves the one loop it first served, and raises RuntimeError on another)."""
        return await self.stores.current()

    async def new_session(self) -> DenseSession:
        """An empty session, not stored until something is put in it (aiohttp_session's
        new_session())."""
        return self._made(DenseSession(await self.store(), None, self.max_age))

    def _made(self, session: DenseSession) -> DenseSession:
        session.device_label = self.device_label
        return session

    async def load_session(self, request: web.Request) -> DenseSession:
        """The session the request's cookie names (one read), or an empty one for no cookie,
        a malformed one, or a session that ended. Called by aiohttp_session.get_session."""
        token, store = self.load_cookie(request), await self.store()
        if token is None or not well_formed(token):
            return self._made(DenseSession(store, None, self.max_age))
        found = await arun(self._load(store, token), store)
        return self._made(DenseSession(store, found, self.max_age, stale=None if found else token))

    def _load(self, store: AsyncSessionStore, token: str) -> Flow[Session | None]:
        bound = None if rules.outlives_no_request(self.max_age) else self.max_age
        found, moved = yield from movein.load(token, self.move_in, store=store, bound=bound,
                                              within_store_ttl=True,
                                              what="an aiohttp-session session")
        found = found if found is not None else moved
        # touched at the load, not at the save: aiohttp_session saves a changed session only
        yield from rules.touch_if_due(token, found, store.due_for_touch)
        return found

    async def save_session(self, request: web.Request, response: web.StreamResponse,
                           session: aiohttp_session.Session) -> None:
        """Write what the request changed and set or delete the cookie (called by
        aiohttp_session's middleware for a changed session)."""
        if not isinstance(session, DenseSession):
            raise TypeError("the session was not made by densekv's Storage")
        cookie = await session.write()
        if cookie is not None:
            self.save_cookie(response, cookie, max_age=session.max_age)


async def _session_of(request: web.Request) -> DenseSession:
    session = await aiohttp_session.get_session(request)
    if not isinstance(session, DenseSession):
        raise TypeError("the session is not densekv's: aiohttp_session.setup(app, Storage(...))")
    return session


# login, regenerate and log out everywhere act at once, as the ASGI shells' do (the rules are
# integrations/identity_flows.py's): aiohttp_session has none of its own, and the route that
# calls one gets a refused login (SessionLimitReached) where it can answer it.

async def login(request: web.Request, identity: Identity) -> None:
    """Bind the session to `identity` under a new token, the old one dead. The same user or
    an anonymous session keeps its data (one atomic step); another user's is dropped (its
    session destroyed, a new empty one created). Written now, even if empty. The storage's
    device_label hook labels it; a login past the store's max_sessions_per_identity with
    on_limit="refuse" raises SessionLimitReached here, the session as it was (an
    anonymous one kept)."""
    session, identity = await _session_of(request), check_identity(identity)
    label = None if session.device_label is None else label_of(session.device_label, request)
    data, max_age = dict(session), session.max_age
    await _act(session, lambda held: flows.login(held, identity, data, label, max_age))


async def regenerate(request: web.Request) -> None:
    """A new token for the same data and identity, the old one dead."""
    await _act(await _session_of(request), flows.regenerate)


async def logout_everywhere(request: web.Request) -> None:
    """End every session of this session's identity (this one too); an anonymous session
    ends alone. The session is empty afterwards and its cookie is deleted."""
    await _act(await _session_of(request), lambda held: flows.logout(held, everywhere=True))


async def _act(session: DenseSession, flow: Callable[[flows.Rebind], Flow[None]]) -> None:
    """Run an identity flow on the session now; what it left is the session's, also when a
    call raised (a refused login leaves it as it was)."""
    held = flows.Rebind(session.token, session.identity, session.stale)
    try:
        await arun(flow(held), session.store)
    finally:
        session.follow(held)
