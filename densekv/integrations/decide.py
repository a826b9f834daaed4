"""The save decision of a web session, written once for the four framework shells
(flask.py, django/engine.py, starlette.py, aiohttp.py). Sans-I/O: `decide` is a pure
function from what a request holds when its response is saved (`Held`: the session it read
or none, what it changed, whether it emptied or rotated it, its lifetime, the framework's
refresh setting) to a `Decision` (the store calls to make, the sessions to end after them,
the cookie to send); `carry` is a flow that yields those calls one at a time (typed,
integrations/calls.py) and is sent each result, so a shell runs it against the sync or the
async store (integrations/drive.py's run / arun). Nothing here touches a server.

The rules (tests/unit/test_web_decide.py holds them as a table):
  * no stored session: nothing is written for an empty anonymous session (a cookie that
    named a session that ended or never loaded is deleted); otherwise one `create`, cookie set;
  * emptied (logout, clear, every key removed from an anonymous session): the stored
    session ends; keys set after that go to a new anonymous session, created first (data the
    store refuses raises before anything ends); the cookie is set to it, else deleted;
  * changed keys: one `apply(token, changed, removed, ttl=, read=)` against the record this
    request read (no second read), then a `regenerate` if asked for; a `login` comes first
    and the changed keys are applied to the session it leaves (a login the store refuses,
    SessionLimitReached, must leave the session as it was: the keys a login sets, such as
    Flask-Login's `_user_id`, are not written to the session that stays anonymous);
  * a login or a create for an identity passes `label=` (the device's, when the shell has
    one) and nothing else does;
  * rotated (now or earlier in the request) and no lifetime written yet: `set_ttl(life)`
    when the framework restarts the lifetime with each new cookie;
  * nothing written: `set_ttl(life)` when the framework re-sends the cookie and its refresh
    is due, else `touch` when the idle expiry is due, else nothing (a read costs no write);
  * the cookie is sent after a write or rotation, or when the framework refreshes it;
  * a write that finds the session gone (ended by another request) never recreates it:
    the cookie is deleted (or, with a pending login, a new session is created for it; or the
    shell is told, for Django's UpdateError);
  * a cookie token that loaded nothing (gone, or undecodable) is ended once the request
    changes its session, after the writes.

The read-only rows are also a flow of their own, `touch_if_due`, which every shell runs for
a request that read a stored session and changed, rotated, ended and refreshed nothing (most
requests): `touch` when the idle expiry is due, else nothing, no cookie, without building
`Held` (~5 us a request; the table test checks it answers as decide() does). Where a shell
runs it is the framework's: at the save in Flask, Quart, Starlette and Litestar; at the load
in aiohttp and Django, whose frameworks save only a changed session (aiohttp_session's
middleware calls save_session for a changed session only; Django's SessionMiddleware saves
a modified one only, unless SESSION_SAVE_EVERY_REQUEST), so a read-only request there has
no save to touch in (docs/development.md, "Web core").

A lifetime under a second (a framework's max_age <= 0, a Django expiry already past) keeps
nothing: `outlives_no_request` says when, `store_nothing` what is written then, once for every
shell (the cookie sent with it is the framework's).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from types import EllipsisType
from typing import Any, Literal

from densekv.integrations.calls import (
    Apply,
    Create,
    Destroy,
    DueForTouch,
    Login,
    Regenerate,
    SetTtl,
    Touch,
)
from densekv.integrations.calls import StoreCall as Call
from densekv.sessions.model import Identity, Session

__all__ = ["NOTHING", "Call", "Decision", "Held", "Outcome", "Step", "carry", "decide",
           "outlives_no_request", "store_nothing", "touch_if_due"]

Cookie = Literal["set", "delete"] | None
Gone = Literal["delete", "create", "raise"]
Rotate = Literal["login", "regenerate"] | None


@dataclass(slots=True)
class Held:
    """What a request holds when its response is saved (the shell fills it in).

    token: the stored session it writes to (None: none, or it ended in this request);
    read: that session as this request read it (apply's read=; ignored for another token);
    stale: a token the cookie carried that loaded nothing; ended: a session ended in this
    request (its cookie is deleted unless a new session replaces it); modified: the
    request changed the session at all; data: the whole data now (what a create stores);
    changed / removed: the top-level keys to write; emptied: the stored session ends;
    identity: the owner of a new session, or whom `rotate="login"` logs in; rotated: the
    token changed earlier in this request; lifetime_set: ...and its lifetime was written;
    ttl: what apply passes (... keeps the stored lifetime); life: the lifetime of a create
    or set_ttl (None: the store's ttl); renew_on_rotate: a new cookie restarts the stored
    lifetime; refresh: the framework sends the cookie again although nothing changed;
    refresh_ttl: ...and the stored lifetime restarts now; touch_due: the idle expiry is due
    to roll (store.due_for_touch); gone: what a write that finds the session ended does;
    label: the device label a login (or a create for `identity`) gives the session;
    new_token: the token a create stores the session under (None: the store draws one),
    drawn earlier because the app was told it (Litestar's request.get_session_id()).
    """

    token: str | None = None
    read: Session | None = None
    stale: str | None = None
    ended: bool = False
    modified: bool = False
    data: Mapping[str, Any] = field(default_factory=dict)
    changed: Mapping[str, Any] = field(default_factory=dict)
    removed: Sequence[str] = ()
    emptied: bool = False
    identity: Identity | None = None
    rotate: Rotate = None
    rotated: bool = False
    lifetime_set: bool = False
    ttl: int | None | EllipsisType = ...
    life: int | None = None
    renew_on_rotate: bool = True
    refresh: bool = False
    refresh_ttl: bool = False
    touch_due: bool = False
    gone: Gone = "delete"
    label: str | None = None
    new_token: str | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """One store call on the session's current token (create: on none; it makes one)."""

    op: Literal["create", "apply", "login", "regenerate", "set_ttl", "touch"]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Decision:
    """The store calls in order, the tokens ended after them, the cookie to send ("set":
    the token the calls leave), and what follows when a call finds the session gone."""

    steps: tuple[Step, ...] = ()
    ends: tuple[str, ...] = ()
    cookie: Cookie = None
    gone: Gone = "delete"
    if_gone: Decision | None = None  # gone == "create": the session made instead


@dataclass(frozen=True, slots=True)
class Outcome:
    """After `carry`: the session's token (None: it has none), the cookie to send, whether
    a write found it gone, and the data apply merged (None without an apply)."""

    token: str | None
    cookie: Cookie
    gone: bool = False
    merged: dict[str, Any] | None = None


NOTHING = Decision()  # decide's answer when nothing is written and no cookie sent


def decide(held: Held) -> Decision:
    """What to write for `held` (see the module docstring for the rules)."""
    h = held
    ends: tuple[str, ...] = (h.stale,) if h.stale is not None and h.modified else ()
    if h.token is None or h.emptied:
        if h.token is not None:  # emptied: it ends after whatever replaces it is written
            ends = (*ends, h.token)
        if not h.data and h.identity is None:
            ended = h.ended or bool(ends)
            return Decision((), ends, "delete") if ended else NOTHING
        return Decision((_create(h),), ends, "set")
    steps: list[Step] = []
    lifetime_written = h.lifetime_set
    if h.rotate == "login":  # first: a refused login writes nothing
        steps.append(Step("login", (h.identity,), _labelled(h)))
    if h.changed or h.removed:
        read = h.read if h.read is not None and h.read.token == h.token and h.rotate != "login" else None
        steps.append(Step("apply", (dict(h.changed), list(h.removed)), {"ttl": h.ttl, "read": read}))
        lifetime_written = lifetime_written or h.ttl is not ...
    if h.rotate == "regenerate":
        steps.append(Step("regenerate"))
    rotated = h.rotated or h.rotate is not None
    if rotated and h.renew_on_rotate and not lifetime_written:
        steps.append(Step("set_ttl", (h.life,)))
    cookie: Cookie = "set" if steps or rotated or h.refresh else None
    if not steps and not rotated:  # nothing written in (or earlier in) this request
        if h.refresh and h.refresh_ttl:
            steps.append(Step("set_ttl", (h.life,)))
        elif h.touch_due:
            steps.append(Step("touch"))
    if not steps and cookie is None and not ends:
        return NOTHING
    if_gone = None
    if h.gone == "create":
        if_gone = Decision((_create(h),), (), "set")
    return Decision(tuple(steps), ends, cookie, h.gone, if_gone)


def _labelled(h: Held) -> dict[str, Any]:
    """The keywords of a login or of a create for an identity: the label, if any."""
    return {"label": h.label} if h.label is not None and h.identity is not None else {}


def _create(h: Held) -> Step:
    drawn = {"token": h.new_token} if h.new_token is not None else {}
    return Step("create", (h.identity, dict(h.data), h.life), {**_labelled(h), **drawn})


#: the call of each Step.op (create: on no token; the others: on the current one)
_CALLS: dict[str, Callable[..., Call]] = {"apply": Apply, "login": Login, "regenerate": Regenerate,
                                 "set_ttl": SetTtl, "touch": Touch}


def carry(decision: Decision, token: str | None) -> Generator[Call, Any, Outcome]:
    """The decision as store calls on `token` (integrations/calls.py): yields each, is sent
    its result."""
    merged: dict[str, Any] | None = None
    for step in decision.steps:
        if step.op == "create":
            token = yield Create(*step.args, **step.kwargs)
            continue
        assert token is not None
        result = yield _CALLS[step.op](token, *step.args, **step.kwargs)
        if step.op == "touch":
            continue  # a touch that finds nothing changes nothing this request decides
        if result is None or result is False:  # ended by another request meanwhile
            return (yield from _gone(decision))
        if step.op == "apply":
            merged = result
        elif step.op in ("login", "regenerate"):
            token = result
    for old in decision.ends:
        yield Destroy(old)
    return Outcome(token, decision.cookie, False, merged)


def _gone(decision: Decision) -> Generator[Call, Any, Outcome]:
    for old in decision.ends:
        yield Destroy(old)
    if decision.if_gone is not None:
        made = yield from carry(decision.if_gone, None)
        return Outcome(made.token, made.cookie, True, None)
    return Outcome(None, "delete" if decision.gone == "delete" else None, True, None)


def touch_if_due(token: str, found: Session | None,
                 due: Callable[[Session], bool] | None = None) -> Generator[Call, Any, None]:
    """The read-only rows of the table as a flow (the module docstring says when each shell
    runs it): a request that read `found` under `token` and changed, rotated, ended and
    refreshed nothing yields a `Touch` when the idle expiry is due, else nothing; no cookie
    either way. `due`: the store's due_for_touch, for a shell that holds the store; None:
    the flow asks its driver (DueForTouch, for a flow that does not hold it)."""
    if found is None:
        return
    if due(found) if due is not None else (yield DueForTouch(found)):
        yield Touch(token)


def outlives_no_request(life: int | None) -> bool:
    """A lifetime under a second (`life`, seconds; None: the store's ttl): the session
    would be dead at once, so nothing is stored for it (Starlette's and Litestar's max_age
    <= 0, aiohttp's, a Django expiry already past); see `store_nothing`."""
    return life is not None and life < 1


def store_nothing(token: str | None, changed: bool,
                  stale: str | None = None) -> Generator[Call, Any, None]:
    """What a request whose session outlives it (`outlives_no_request`) writes: nothing is
    created or applied; the stored session `token` ends if the request changed or rotated
    it (`changed`), and so does a cookie token that loaded nothing (`stale`), as decide()
    ends one. The cookie that goes with it is the shell's (its framework's: Starlette sends
    one with that Max-Age, aiohttp deletes it, Django sends the key it drew)."""
    if not changed:
        return
    if stale is not None:
        yield Destroy(stale)
    if token is not None:
        yield Destroy(token)
