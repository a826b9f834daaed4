"""The rules of a session interface in Flask's style, written once for the two shells that
keep Flask's session object, config and cookie helpers: the Flask shell (flask.py, sync) and
the Quart shell (quart.py, the same interface with coroutines). Each shell keeps its I/O
(how the store is reached and awaited) and the framework's request plumbing; what a load
fills in, what Flask-Login's `_user_id` means, the save as store calls (a flow of
typed store calls, integrations/calls.py, run by drive.run or drive.arun), the lifetime and refresh
rules and the cookie headers live here.

`interface` below is either shell's SessionInterface: both have Flask's cookie helpers
(get_cookie_name, get_cookie_domain, ..., should_set_cookie, get_expiration_time), an
`identity_key` and a `device_label` hook (integrations/devices.py; None: no label). `app` is a Flask or Quart app (config, permanent_session_lifetime, logger).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any

import redis

from densekv.errors import ServerUnavailable, SessionIdentityInvalid
from densekv.integrations import decide as rules
from densekv.integrations import identity_flows as flows
from densekv.integrations.calls import StoreCall
from densekv.integrations.decide import NOTHING, Held, Outcome, carry, decide
from densekv.integrations.devices import label_of
from densekv.integrations.flask_session import (
    MISSING,
    DensekvSession,
    identity_forms,
    identity_of,
    tag_value,
    untag_data,
)
from densekv.sessions.model import Identity, Session

__all__ = ["REFRESH_GAIN", "UNAVAILABLE", "apply_cookie", "follow_identity_key", "identity_in",
           "load_found", "load_moved", "save_flow", "served_without", "skip_save", "vary_cookie"]

#: what a load after the view (an after-request hook's) survives: the server not answering,
#: refusing the credentials (AuthenticationError is a ConnectionError) or too slow
UNAVAILABLE = (ServerUnavailable, redis.ConnectionError, redis.TimeoutError)
#: a permanent session read (not written) is refreshed once this part of its lifetime passed
REFRESH_GAIN = 0.25


def vary_cookie(response: Any) -> None:
    """`Vary: Cookie`, as `response.vary.add("Cookie")` gives it, without building
    werkzeug's HeaderSet and writing it back (every request that uses the session pays it)."""
    vary = response.headers.get("Vary")
    if not vary:
        response.headers["Vary"] = "Cookie"
    elif "cookie" not in (v.strip().lower() for v in vary.split(",")):
        response.headers["Vary"] = f"{vary}, Cookie"


# -- load --------------------------------------------------------------------------------------
def load_found(session: DensekvSession, token: str, found: Session | None) -> bool:
    """Fill `session` from what the store gave for the cookie's `token`; False when it gave
    nothing (expired, never issued, or undecodable): the caller may move one in, and a
    token still unfilled afterwards is marked stale (replaced when the session is written)."""
    if found is None:
        return False
    stored = found.data or {}
    session.loaded(untag_data(stored), token, found, stored)
    return True


def load_moved(session: DensekvSession, token: str, moved: Session | None) -> None:
    """Fill `session` from a session just moved in (integrations/movein.py), as not read: its
    first request keeps the lifetime it brought (no refresh, no touch due yet)."""
    if moved is not None:
        stored = moved.data or {}
        session.loaded(untag_data(stored), token, None, stored)


def served_without(app: Any, session: DensekvSession, exc: BaseException) -> bool:
    """A load that failed with `exc`: True when the response is served with the session
    empty (the view returned without using it; an after-request hook does, as
    Flask-Login's does on every request, and the server is unavailable), logged once;
    save writes nothing then. False: the error is the request's (a 500)."""
    if not session.after_view or not isinstance(exc, UNAVAILABLE):
        return False
    session.served_empty(exc)
    app.logger.warning("densekv: the session could not be read after the view "
                       "(%s: %s); the response is served without it", type(exc).__name__, exc)
    return True


def identity_in(app: Any, identity_key: str | None, data: Mapping[str, Any]) -> Identity | None:
    """The identity named by the session's identity_key, if any and storable."""
    if identity_key is None or identity_key not in data:
        return None
    try:
        return identity_of(data[identity_key])
    except SessionIdentityInvalid as exc:
        app.logger.warning("densekv: the session's %s (a %s) is not an identity densekv can "
                           "index (%s); the session stays anonymous", identity_key,
                           type(data[identity_key]).__name__, exc)
        return None


def moved_in_form(app: Any, identity_key: str | None,
                  data: Mapping[str, Any]) -> tuple[dict[str, Any], Identity | None]:
    """An old backend's session data (plain values) as densekv stores it (Flask's tagged
    form), and the identity its identity_key names."""
    return {k: tag_value(v) for k, v in data.items()}, identity_in(app, identity_key, data)


# -- save --------------------------------------------------------------------------------------
def skip_save(session: Any, response: Any) -> bool:
    """True when save_session has nothing to do: not densekv's session, opening or loading
    it raised (a 500), a save failed, or it was never used (still holds its loader); or
    the session was loaded after the view with the server unavailable (served_without),
    nothing changed. Adds `Vary: Cookie` to a session that is to be saved and was used."""
    if not isinstance(session, DensekvSession) or session.failed or session.loader is not None:
        return True
    if session.unavailable is not None:  # read after the view, server unavailable
        if session.modified:  # a hook changed it: that cannot be saved, so it fails
            session.failed = True
            raise session.unavailable
        return True
    if session.accessed:
        vary_cookie(response)
    return False


def follow_identity_key(app: Any, identity_key: str | None, session: DensekvSession) -> None:
    """Flask-Login's login_user() / logout_user() (or anything else that sets or removes
    identity_key) as densekv's login / destroy. An explicit session.login() in the same
    request wins."""
    key = identity_key
    if key is None or session.login_as is not None:
        return
    value = dict.get(session, key, MISSING)
    before = session.stored.get(key, MISSING)
    if value is MISSING:
        if before is not MISSING and session.token is not None:  # logged out
            session.restart(keep=dict(dict.items(session)))
        return
    if key not in session.set_keys and tag_value(value) == before:
        return  # unchanged: nothing to do
    identity = identity_in(app, key, session)
    if identity is None:
        return
    if flows.switches(session.identity, identity):  # another user: drop the old data
        session.restart(keep={k: dict.__getitem__(session, k) for k in session.set_keys
                               if dict.__contains__(session, k)})
    session.follow_login(identity)


def nothing_to_write(session: DensekvSession) -> bool:
    """A new session nothing was put in (no cookie, or one that loaded nothing): decide()
    answers NOTHING; answered without the store, which would be built (and the server
    reached) for it otherwise."""
    return (session.token is None and not session.modified and not session.ended
            and session.end_all is None and session.login_as is None)


def save_flow(interface: Any, app: Any, session: DensekvSession,
              store: Any, request: Any = None) -> Generator[StoreCall, Any, Outcome | None]:
    """The save as store calls (store: a SessionStore, or an AsyncSessionStore that is
    ready): the sessions ended earlier in the request, log out everywhere, then the
    decision. Returns the outcome (its cookie to send), or None when nothing was decided.
    `request`: what the interface's device_label hook is called with at a login."""
    # destroy() / a change of user / logout / log out everywhere, asked for earlier (at the
    # save, not at once: Flask-Login's logout_user() only removes a key, seen here)
    everywhere = () if session.end_all is None else identity_forms(identity_of(session.end_all))
    yield from flows.end_asked(session.ended, everywhere)
    writes = session.modified or session.login_as is not None or session.regenerate_asked
    if writes and rules.outlives_no_request(flask_lifetime(app)):
        # PERMANENT_SESSION_LIFETIME under a second: Flask refuses its own cookie as soon
        # as a second has passed, so nothing is stored (decide's one rule, as in the other
        # shells); the changed stored session and a stale cookie token end
        yield from rules.store_nothing(session.token, True, session.stale)
        gone = session.token is not None or session.stale is not None
        return Outcome(None, "delete" if gone else None)
    if (not session.modified and session.login_as is None and not session.regenerate_asked
            and session.token is not None and not interface.should_set_cookie(app, session)):
        # read only, no cookie to refresh (most requests): decide's read-only rows
        yield from rules.touch_if_due(session.token, session.found, store.due_for_touch)
        return None
    label = label_of(interface.device_label, request) if session.login_as is not None else None
    decision = decide(held(interface, app, session, store, label))
    if decision is NOTHING:  # most requests: read, nothing due
        return None
    return (yield from carry(decision, session.token))


def held(interface: Any, app: Any, session: DensekvSession, store: Any,
         label: str | None = None) -> Held:
    """The request's session as the save decision (integrations/decide.py) takes it."""
    token, found, login_as = session.token, session.found, session.login_as
    changed, removed = session.changes() if session.modified and token is not None else ({}, [])
    refresh = interface.should_set_cookie(app, session)
    # a lifetime matters only to a write (a read-only request at most touches)
    life = lifetime(app, session, store) if session.modified or refresh or token is None else None
    # Flask's lifetime binds (permanent, or shorter than the store's ttl): each write
    # restarts it, as Flask signs its cookie afresh; else the store's ttl from creation
    restarts = life is not None or (session.modified and session.permanent)
    idle = not changed and not removed  # refresh_ttl and touch_due count only then
    return Held(
        token=token, read=found, stale=session.stale, ended=bool(session.ended),
        modified=session.modified,
        data=session.tagged() if token is None or login_as is not None else {},
        changed=changed, removed=removed,
        # emptied: Flask removes a session left empty
        emptied=not session and login_as is None and (
            session.cleared or (session.modified and session.identity is None)),
        identity=login_as,
        rotate="login" if login_as is not None else (
            "regenerate" if session.regenerate_asked else None),
        ttl=life if restarts or "_permanent" in changed or "_permanent" in removed else ...,
        life=life, renew_on_rotate=restarts, refresh=refresh,
        refresh_ttl=idle and refresh and refresh_due(session, life, store),
        touch_due=idle and found is not None and store.due_for_touch(found),
        gone="create" if login_as is not None else "delete", label=label)


def flask_lifetime(app: Any) -> int:
    """PERMANENT_SESSION_LIFETIME in whole seconds (Flask allows 0)."""
    return int(app.permanent_session_lifetime.total_seconds())


def lifetime(app: Any, session: DensekvSession, store: Any) -> int | None:
    """The stored session's ttl from now (None: the store's ttl): Flask refuses its own
    cookie PERMANENT_SESSION_LIFETIME after it was signed, permanent or not, so a
    permanent session lives that long and any other min(store ttl, that). A lifetime
    under a second never gets here (save_flow stores nothing then)."""
    flask_life = flask_lifetime(app)
    if flask_life < 1:
        return None
    if session.permanent:
        return flask_life
    return flask_life if flask_life < store.ttl else None


def refresh_due(session: DensekvSession, life: int | None, store: Any) -> bool:
    """A session whose cookie Flask would sign afresh without a change (permanent,
    SESSION_REFRESH_EACH_REQUEST): its stored lifetime (`life`, None: the store's ttl)
    restarts once REFRESH_GAIN of it has passed, so reads do not each cost a write."""
    found = session.found
    if found is None or not found.absolute_at:
        return False
    now = store.now()  # the store's clock, as due_for_touch
    return bool(found.absolute_at - now <= (life or store.ttl) * (1 - REFRESH_GAIN))


# -- cookies -----------------------------------------------------------------------------------
def apply_cookie(interface: Any, app: Any, session: DensekvSession, response: Any,
                 outcome: Outcome | None) -> None:
    """The cookie the save's outcome asks for, written with the interface's helpers."""
    if outcome is None or outcome.cookie is None:
        return
    if outcome.cookie == "set":
        assert outcome.token is not None
        response.set_cookie(
            interface.get_cookie_name(app), outcome.token,
            expires=interface.get_expiration_time(app, session),
            httponly=interface.get_cookie_httponly(app), domain=interface.get_cookie_domain(app),
            path=interface.get_cookie_path(app), secure=interface.get_cookie_secure(app),
            samesite=interface.get_cookie_samesite(app),
            partitioned=interface.get_cookie_partitioned(app),
        )
    else:
        response.delete_cookie(
            interface.get_cookie_name(app), domain=interface.get_cookie_domain(app),
            path=interface.get_cookie_path(app), secure=interface.get_cookie_secure(app),
            samesite=interface.get_cookie_samesite(app),
            partitioned=interface.get_cookie_partitioned(app),
            httponly=interface.get_cookie_httponly(app),
        )
    vary_cookie(response)
