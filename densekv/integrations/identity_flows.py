"""Login, regenerate, logout and log out everywhere of a web session, written once as
sans-I/O flows (typed store calls, integrations/calls.py; run by integrations/drive.py's
`run` / `arun`) for the shells that act on them at once: the ASGI shells (asgi.py, for
Starlette and Litestar) and aiohttp. Nothing here touches a server or a framework object.

A flow acts on a `Rebind`: the request's session as the shell holds it when the flow
starts (its token, its identity, a cookie token that loaded nothing), which the flow
changes as each call succeeds and the shell reads back afterwards, also when a call raised
(a login as another user that the store refuses after the old session ended leaves a
session with no token, not one naming the dead token). The rules
(tests/unit/test_web_identity_flows.py holds them as a table):
  * login: a session of another identity ends (destroy) and the login starts an empty one;
    a stored session of the same identity or none moves to a new token bound to the
    identity (one atomic `login`, its data and this request's pending changes kept, which
    the shell's save writes); with no stored session (none, gone, or the other user's just
    ended) a `create` for the identity writes the data whole, with the lifetime
    `lifetime(max_age)`, after ending a cookie token that loaded nothing; `label` (the
    shell's device_label hook's answer) goes to the login or the create. A login the store
    refuses (SessionLimitReached, on_limit="refuse") leaves the session as it was;
  * regenerate: a new token for the same data and identity, the old one dead; a session
    gone meanwhile ends; no stored session: nothing;
  * logout: the stored session ends; log out everywhere: every session of the identity
    ends (an anonymous session ends alone); either way a cookie token that loaded nothing
    ends too, the session is empty and the shell clears the cookie.

Flask and Quart act at the save instead (their framework decides the timing,
docs/development.md "Web core"): Flask-Login's login_user() / logout_user() only set or
remove a key of the session, seen at the save, so the shell's login() and logout() mark the
session (by `switches`: a login as another user ends the old session) and its save runs
`end_asked` (the sessions ended) and then decide's `rotate="login"` rows (the login, or a
create for the identity; flasklike.save_flow). Django acts through its engine's cycle flow
(django/engine.py), because its contrib.auth login() flushes another user's session itself
and then calls cycle_key(), whose contract (the key changes now, the data kept, a
concurrent logout raises SessionInterrupted) is Django's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from densekv.integrations import decide as rules
from densekv.integrations.calls import Create, Destroy, DestroyAll, Login, Regenerate, StoreTtl
from densekv.integrations.drive import Flow
from densekv.sessions.model import Identity, check_identity

__all__ = ["Rebind", "end_asked", "identity_forms", "identity_named", "lifetime", "login", "logout",
           "regenerate", "switches"]


# -- the identity a session's data names -------------------------------------------------------
def identity_named(value: object) -> Identity:
    """The identity a shell indexes a user under when it reads one from session data
    (Flask-Login's `_user_id` in the Flask and Quart shells, contrib.auth's `_auth_user_id`
    in Django's) or from the Flask shells' login(): `value` checked (model.check_identity),
    a str that is the canonical decimal text of an int identity ("42"; not "042", "+4",
    " 4", "٤٢") taken as that int. So `login(42)` and a `_user_id` of "42" (Flask-Login's
    get_id() returns a str, Django keeps the pk's text) are one user, listed by
    `store.sessions_of(42)`, and the CharField keys "042" and "42" stay two users. Any
    other str stays itself. Raises SessionIdentityInvalid for what no store can index."""
    identity = check_identity(value)
    if (isinstance(identity, str) and identity.isascii() and identity.isdigit()
            and (identity == "0" or identity[0] != "0") and int(identity) < 2**64):
        return int(identity)
    return identity


def identity_forms(identity: Identity) -> tuple[Identity, ...]:
    """Every form the store may list `identity`'s sessions under: an int identity also as
    its decimal str, as the Flask shell indexed Flask-Login users before identity_named (a
    "log out everywhere" after an upgrade must end those sessions too)."""
    if isinstance(identity, int):
        return identity, str(identity)
    return (identity,)


@dataclass(slots=True)
class Rebind:
    """A request's session as a flow here finds it and leaves it (the flow's to change).

    token: its stored session (None: none); identity: its owner; stale: a token the cookie
    carried that loaded nothing (ended before a new session is written); data: None while
    the session's data and pending changes stand, else what the session holds now (a login
    as another user: empty; a create: what it stored); written: that data is stored whole
    (nothing left pending; its lifetime written); rotated: a new token the browser lacks
    (the cookie is set); ended: the stored session ended (the session is empty, the cookie
    cleared); planned: a token the app was told before anything was stored (Litestar's
    request.get_session_id()), which a login that creates the session stores it under, once
    (never sent to a browser before, so no one else can hold it)."""

    token: str | None
    identity: Identity | None
    stale: str | None = None
    data: dict[str, Any] | None = None
    written: bool = False
    rotated: bool = False
    ended: bool = False
    planned: str | None = None

    @property
    def changed(self) -> bool:
        """The flow changed the session (a refused login did not)."""
        return self.rotated or self.ended or self.data is not None


def lifetime(max_age: int | None) -> Flow[int | None]:
    """The ttl a create passes for a shell whose cookie lives `max_age` seconds: max_age,
    never past the store's own ttl; None (the store's ttl) without one, or for one under a
    second (nothing outlives the request then: the shell's save ends what was written)."""
    if max_age is None or rules.outlives_no_request(max_age):
        return None
    ttl: int = yield StoreTtl()
    return min(max_age, ttl)


def switches(current: Identity | None, identity: Identity) -> bool:
    """A login as `identity` of a session owned by `current` ends that session and starts an
    empty one: another user's data is never carried over (an anonymous session's is). The
    rule of every shell but Django's, whose contrib.auth login flushes the session itself."""
    return current is not None and current != identity


def login(held: Rebind, identity: Identity, data: dict[str, Any], label: str | None = None,
          max_age: int | None = None) -> Flow[None]:
    """Bind the session to `identity` under a new token (the module docstring's rules);
    `data`: the session's data now, pending changes included (what a create stores)."""
    if held.token is not None and switches(held.identity, identity):
        yield Destroy(held.token)  # another user's session: it ends, this login starts empty
        held.token, held.identity, held.data, data = None, None, {}, {}
    token = (yield Login(held.token, identity, label)) if held.token is not None else None
    if token is None:  # no stored session (or it ended meanwhile): one is created for identity
        yield from _end_stale(held)
        ttl = yield from lifetime(max_age)
        token = yield Create(identity, dict(data), ttl, held.planned, label=label)
        held.data, held.written, held.planned = dict(data), True, None
    held.token, held.identity, held.rotated, held.ended = token, identity, True, False


def regenerate(held: Rebind) -> Flow[None]:
    """A new token for the same data and identity, the old one dead (the session ends if it
    was gone); nothing without a stored session."""
    if held.token is None:
        return
    token = yield Regenerate(held.token)
    if token is None:
        _ended(held)
    else:
        held.token, held.rotated = token, True


def logout(held: Rebind, everywhere: bool = False) -> Flow[None]:
    """End the session (`everywhere`: every session of its identity; an anonymous one
    ends alone)."""
    if everywhere and held.identity is not None:
        yield DestroyAll(held.identity)
    elif held.token is not None:
        yield Destroy(held.token)
    yield from _end_stale(held)
    _ended(held)


def end_asked(tokens: Iterable[str], everywhere: Iterable[Identity] = ()) -> Flow[None]:
    """The logouts a request asked for, made at its save (Flask, Quart: their logout() and
    a login as another user only mark the session, and Flask-Login's logout_user() only
    removes a key, seen at the save): every session of each identity in `everywhere` first
    (this session ends as one of them, and its event says so), then each token."""
    for identity in everywhere:
        yield DestroyAll(identity)
    for token in tokens:
        yield Destroy(token)


def _end_stale(held: Rebind) -> Flow[None]:
    """The cookie named a session that did not load (undecodable, or gone): it ends before
    the browser gets another cookie."""
    if held.stale is not None:
        yield Destroy(held.stale)
        held.stale = None


def _ended(held: Rebind) -> None:
    held.token = held.identity = held.stale = None
    held.data, held.written, held.rotated, held.ended = {}, False, False, True
