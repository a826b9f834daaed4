"""The framework-neutral half of the ASGI session backends (Starlette's middleware, Litestar's
session backend): a request's session as a dict that remembers which top-level keys the
request set or deleted (DenseSession) with what the shell keeps beside it (SessionState),
the operations that act at once (login, regenerate, logout, log out everywhere, a session's
own lifetime), loading a cookie's session (moving it in from an old store if asked) and the
save when the response starts (integrations/decide.py's decision, carried out on the store).

It imports no web framework: each shell reads the cookie, puts the session where its
framework looks for it, and turns the save's CookieChange into its framework's Set-Cookie
header. The rules are the Starlette backend's (docs/starlette.md): max_age is the cookie's
Max-Age and bounds every write's ttl; a login as another identity ends that session and
starts an empty one; a load that failed raises where the app first uses the session.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from densekv.integrations import decide as rules
from densekv.integrations import identity_flows as flows
from densekv.integrations import movein
from densekv.integrations.decide import NOTHING, Held, carry, decide
from densekv.integrations.devices import DeviceLabel
from densekv.integrations.drive import Flow, arun
from densekv.integrations.movein import AsyncMoveInSource as MoveInSource
from densekv.integrations.tracked import TrackedDict
from densekv.sessions.model import Identity, Session, new_token, well_formed
from densekv.sessions.store import AsyncSessionStore

__all__ = ["MAX_AGE_KEY", "CookieChange", "DenseSession", "MoveInSource", "SessionRules",
           "SessionState", "check_lifetime", "login", "logout", "logout_everywhere", "regenerate"]

MAX_AGE_KEY = "_max_age"
"""The session key where remember() keeps a session's own max_age."""


@dataclass
class SessionState:
    """What the middleware and the module functions keep about a request's session beside
    its data: where it is stored and what to write back. Theirs to change, not the app's."""

    store: AsyncSessionStore
    found: Session | None  # as loaded when the request began (for due_for_touch)
    token: str | None
    identity: Identity | None
    max_age: int | None = None  # this session's: the cookie's Max-Age, bounds every write's ttl
    default_max_age: int | None = None  # the middleware's (a session not remembered)
    sent: str | None = None  # a well-formed token the cookie carried that loaded nothing
    changed: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    cleared: bool = False  # clear() was called: the stored session ends at the save
    new_cookie: bool = False  # login/regenerate drew a token the browser lacks
    lifetime_set: bool = False  # written with ttl this request: no set_ttl for the new cookie
    ended: bool = False  # the session ended during the request: clear the cookie
    failed: BaseException | None = None  # the load raised: raised again on first use
    device_label: DeviceLabel | None = None  # the middleware's hook, called by the shell's login()
    planned: str | None = None  # a token told to the app before the session is stored: its create's

    def session_id(self) -> str:
        """The session's token; for a session not stored yet, one drawn now, which its
        create stores it under (Litestar tells the app `request.get_session_id()` before
        the handler runs). A login draws its own (a new token at every login)."""
        if self.token is not None:
            return self.token
        if self.planned is None:
            self.planned = new_token()
        return self.planned


class DenseSession(TrackedDict):
    """request.session: a dict that records which top-level keys this request set or
    deleted. `accessed`: the request used the session (Vary: Cookie); `modified`: it changed
    it (as on Starlette's Session); `identity` is the session's owner (None while anonymous)."""

    def __init__(self, store: AsyncSessionStore, found: Session | None = None, *,
                 max_age: int | None = None) -> None:
        super().__init__(found.data if found is not None and found.data else {})
        self.accessed = False
        self.modified = False
        self.state = SessionState(store, found, found.token if found else None,
                                  found.identity if found else None, max_age, max_age)
        if dict.__contains__(self, MAX_AGE_KEY):
            self._remembered()

    @property
    def identity(self) -> Identity | None:
        """The session's user (login()), or None while anonymous."""
        return self.state.identity

    # -- change tracking -------------------------------------------------------
    def mark_accessed(self) -> None:
        """Starlette's request.session calls this first: a session whose load failed
        raises that error here, so only the requests that use it fail."""
        if self.state.failed is not None:
            raise self.state.failed
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
        if key == MAX_AGE_KEY:
            self.state.max_age = self.state.default_max_age

    def _set(self, key: str) -> None:
        self.mark_modified(key)
        if key == MAX_AGE_KEY:
            self._remembered()

    def _on_clear(self) -> None:
        self.state.cleared = self.accessed = self.modified = True

    def follow(self, held: flows.Rebind) -> None:
        """What an identity flow left (integrations/identity_flows.py), on this session."""
        state = self.state
        if held.ended:
            return _end(self)
        if held.data is not None:  # another user's data dropped, or the data stored whole
            _forget(self)
            dict.update(self, held.data)
            state.found = None  # the record read is not the session's any more
            if MAX_AGE_KEY in held.data:
                self._remembered()
        state.lifetime_set = state.lifetime_set or held.written
        state.token, state.identity, state.sent = held.token, held.identity, held.stale
        state.planned = held.planned
        if held.rotated:
            state.new_cookie, state.cleared, state.ended = True, False, False
            self.modified = True
        return None

    def _remembered(self) -> None:
        value = dict.get(self, MAX_AGE_KEY)
        valid = value is None or (type(value) is int and value >= 1)
        self.state.max_age = value if valid else self.state.default_max_age


def _forget(session: DenseSession) -> None:
    """Empty the session here, without counting it as a change of this request."""
    dict.clear(session)
    state = session.state
    state.changed.clear()
    state.removed.clear()
    state.cleared = False
    state.max_age = state.default_max_age


def _end(session: DenseSession) -> None:
    """The stored session is gone: forget it here too, and clear the cookie."""
    _forget(session)
    state = session.state
    state.token = state.identity = state.found = state.sent = None
    state.new_cookie = False
    state.ended = session.accessed = session.modified = True


# -- what acts at once ------------------------------------------------------------------------
# Each shell's module functions (login(request, 42), ...) find the request's session and call
# these; the rules are integrations/identity_flows.py's (written once with aiohttp's), run at
# once because Starlette's and Litestar's apps call them inside the route, where a refused
# login (SessionLimitReached) must reach the route. Their docstrings are the shells'.

async def login(session: DenseSession, identity: Identity, label: str | None = None) -> None:
    """Bind `session` to `identity` under a new token, the old one dead (see the shells'
    login()); `label`: the device's (the shell's device_label hook). A login past the
    store's max_sessions_per_identity with on_limit="refuse" raises SessionLimitReached,
    the session as it was."""
    data, max_age = dict(session), session.state.max_age
    await _act(session, lambda held: flows.login(held, identity, data, label, max_age))


async def regenerate(session: DenseSession) -> None:
    """A new token for the same data and identity, the old one dead."""
    await _act(session, flows.regenerate)


def check_lifetime(max_age: int | None) -> None:
    """remember()'s argument: a number of seconds from 1, or None."""
    if max_age is not None and (type(max_age) is not int or max_age < 1):
        raise ValueError(f"max_age is a number of seconds from 1, or None, not {max_age!r}")


async def logout(session: DenseSession) -> None:
    """End `session` now; it is empty and its cookie is cleared."""
    await _act(session, flows.logout)


async def logout_everywhere(session: DenseSession) -> None:
    """End every session of the session's identity (this one too; an anonymous session
    ends alone)."""
    await _act(session, lambda held: flows.logout(held, everywhere=True))


async def _act(session: DenseSession, flow: Callable[[flows.Rebind], Flow[None]]) -> None:
    """Run an identity flow on the session now; what it left is the session's, also when a
    call raised (a refused login leaves it as it was)."""
    state = session.state
    held = flows.Rebind(state.token, state.identity, state.sent, planned=state.planned)
    try:
        await arun(flow(held), state.store)
    finally:
        session.follow(held)


# -- load and save ----------------------------------------------------------------------------

@dataclass(frozen=True)
class CookieChange:
    """What the response's session cookie becomes: `value` with Max-Age `max_age` (None:
    no Max-Age), or, with value None, cleared (expired at once)."""

    value: str | None
    max_age: int | None = None


class SessionRules:
    """Loading a cookie's session and saving it when the response starts, for a shell whose
    lifetime is `max_age` (None: the browser's session and the store's ttl; <= 0: nothing
    outlives its request) and which may move sessions in from `move_in`; load() makes a
    `session_class`."""

    def __init__(self, max_age: int | None, move_in: MoveInSource | None = None,
                 session_class: type[DenseSession] = DenseSession) -> None:
        self.session_class = session_class
        self.max_age = max_age
        self.bound = None if rules.outlives_no_request(max_age) else max_age
        self.move_in = move_in

    async def load(self, store: AsyncSessionStore, token: str | None) -> DenseSession:
        """The session a cookie names; empty (and no server call) for a junk cookie. A
        load that raises gives a session that raises the same error when first used."""
        if token is None or not well_formed(token):
            return self.session_class(store, max_age=self.max_age)
        try:  # the move-in policy is integrations/movein.py's: the old session's seconds
            # left, at most max_age and the store's ttl; anonymous, its data as it was
            flow = movein.load(token, self.move_in, store=store, bound=self.bound,
                               within_store_ttl=True)
            found, moved = await arun(flow, store)
            found = found if found is not None else moved
        except Exception as exc:  # noqa: BLE001 - raised again where the app uses the session
            session = self.session_class(store, max_age=self.max_age)
            session.state.failed = exc
            return session
        session = self.session_class(store, found, max_age=self.max_age)
        if found is None:
            session.state.sent = token
        return session

    async def write(self, session: DenseSession) -> CookieChange | None:
        """Write what the request changed (integrations/decide.py's decision); return what
        the session cookie becomes, or None to send none."""
        return await arun(self._save(session), session.state.store)

    def _save(self, session: DenseSession) -> Flow[CookieChange | None]:
        state = session.state
        store = state.store
        if rules.outlives_no_request(state.max_age):  # dead at birth
            return (yield from self._write_nothing(session))
        token, found = state.token, state.found
        if (token is not None and not session.modified and not state.changed and not state.removed
                and not state.cleared and not state.new_cookie and not state.ended):
            # read only (most requests): decide's read-only rows, no cookie
            yield from rules.touch_if_due(token, found, store.due_for_touch)
            return None
        creates = token is None or state.cleared
        writes = bool(session) if creates else state.changed or state.removed or state.new_cookie
        ttl = (yield from flows.lifetime(state.max_age)) if writes else None  # (the store's ttl opens it: not for nothing)
        held = Held(
            token=token, read=found, stale=state.sent, ended=state.ended,
            modified=session.modified,
            data=dict(session) if creates else {},
            changed={key: session[key] for key in state.changed}, removed=sorted(state.removed),
            emptied=state.cleared,  # a logout: what was set after the clear starts anew
            rotated=state.new_cookie, lifetime_set=state.lifetime_set, ttl=ttl, life=ttl,
            touch_due=found is not None and store.due_for_touch(found),
            new_token=state.planned if creates else None)
        decision = decide(held)
        if decision is NOTHING:  # most requests: read, nothing due
            return None
        outcome = yield from carry(decision, token)
        state.token = outcome.token
        if session.modified:
            state.sent = None
        if state.cleared:
            state.identity, state.found, state.cleared = None, None, False
        if outcome.cookie == "set":
            assert outcome.token is not None
            return CookieChange(outcome.token, state.max_age)
        return CookieChange(None) if outcome.cookie == "delete" else None

    def _write_nothing(self, session: DenseSession) -> Flow[CookieChange | None]:
        """max_age <= 0: a session that would be dead at once is not stored; the cookie
        Starlette would send (with that Max-Age) is sent, holding no token."""
        state = session.state
        yield from rules.store_nothing(state.token, session.modified or state.new_cookie,
                                 state.sent if session.modified else None)
        if session.modified and session:
            return CookieChange("null", state.max_age)
        if session.modified and (state.token is not None or state.sent is not None):
            return CookieChange(None)
        return None
