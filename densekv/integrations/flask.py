"""Flask backend: `app.session_interface = SessionInterface(store)` keeps Flask's session in
a densekv SessionStore; the cookie holds only the densekv token.

Invariants (checked for every backend by tests/web/test_contract.py, and by Flask's and
Flask-Login's own test suites in tests/peers/test_flask_suites.py):
  * lazy: a request that never uses the session makes no server call; ANY use of it loads
    it first: `flask.session` (Flask 3.1.3+ marks it accessed), and every dict method of
    the session object itself, so `client.session_transaction()` (which bypasses
    `flask.session`) reads the stored session and its writes are saved;
  * nothing is written for a session that was not changed: a request that never touches the
    session, or only reads an empty one, creates no key and sets no cookie;
  * an existing session is saved with `store.apply(token, changes, removed, read=found)`:
    only the top-level keys this request changed, against the record this request read (one
    round trip) and merged into the record as it is now if it changed meanwhile, so two
    concurrent requests keep both changes; a session destroyed meanwhile (apply -> None) is
    never recreated and its cookie is dropped;
  * a junk cookie is a new empty session, decided without a server call; a stored session
    that cannot be decoded is a new empty session too (`store.get(..., undecodable="none")`),
    and the first write, login or logout replaces it;
  * a new session nothing was put in (no cookie, or one that loaded nothing) is not saved
    and does not build the store, so a request without a cookie never reaches the server;
  * a server error propagates (Flask answers 500), never a fresh session in its place;
    except for a load after the view returned (the view never used the session; an
    after-request hook does, as Flask-Login's does on every request): a server that does
    not answer, refuses the credentials or times out leaves the session empty for that
    hook, logs a warning and writes nothing, so the response is served (a hook that then
    changes the session makes it a 500);
  * the idle expiry rolls (`store.touch`) only when `store.due_for_touch` says so, so most
    reads cost no write.

Lifetime, as Flask's own cookie session: Flask signs its cookie with a timestamp and refuses
it PERMANENT_SESSION_LIFETIME after it was last set, permanent or not, and sets it again on
every change (and on every request for a permanent session under SESSION_REFRESH_EACH_REQUEST).
So a permanent session, or any session when PERMANENT_SESSION_LIFETIME is shorter than the
store's ttl, is stored for PERMANENT_SESSION_LIFETIME, restarted by every write (in the same
compare-and-set as the data); a permanent session read under SESSION_REFRESH_EACH_REQUEST is
refreshed with `store.set_ttl` once a quarter of its lifetime has passed (not on every read).
Any other session lives the store's ttl from its creation, which ends it no later than Flask
would. Cookie name, domain, path, flags and Expires come from
Flask's config through the helpers of flask.sessions.SessionInterface.

Identity: `session.login(uid)` (token rotated at save; another user's data dropped first, as
Django's login() flushes), `session.destroy()`, `session.logout_everywhere()`. Flask-Login
needs no glue: the session follows its `_user_id` key (`identity_key=`): set or changed in a
request, the session is logged in as that user at save (the previous user's data dropped,
what the request set kept); removed (`logout_user()`), the stored session ends and what is
left (say a flash message) goes on in a new anonymous session under a new cookie. Both take
an identity through identity_flows.identity_named (the web shells' one rule): a decimal str
is its int, so login(42) and Flask-Login's `_user_id = "42"` are one user, listed by `store.sessions_of(42)`.

Your devices and a limit (docs/flask.md): the store options track_devices,
max_sessions_per_identity and on_limit; `device_label=` (a callable(request)) labels each
login's session; `session.identity`, `session.id` and `session.token` are what a "your
devices" view compares and keeps. A login the store refuses (SessionLimitReached) raises
from save_session, nothing written: it is before any other write of the save.

Values pass through Flask's own tags (`session_json_serializer.tag`, as in Flask's cookie
session): tuples (flash() stores them), bytes, Markup, UUID and datetimes come back as
themselves; what densekv cannot hold even then (non-str keys, ints beyond 64 bits, ...)
raises densekv's typed error, a 500 with nothing written.

Moving in from Flask-Session 0.8 (RedisSessionInterface): `SessionInterface(store,
fallback=FlaskSessionFallback(redis_client))` imports an old session under the same cookie
value the first time densekv does not know it, with its remaining TTL (and its `_user_id`
as identity), then deletes the old key; what is refused and why is integrations/movein.py's
policy, the same in every shell.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import redis
from flask import Flask, Request, Response, after_this_request, has_request_context, request
from flask.sessions import SessionInterface as FlaskSessionInterface
from flask.sessions import SessionMixin

from densekv.integrations.devices import DeviceLabel, check_device_label
from densekv.integrations.drive import run
from densekv.integrations.flask_session import DensekvSession
from densekv.integrations.flasklike import (
    apply_cookie,
    follow_identity_key,
    load_found,
    load_moved,
    moved_in_form,
    nothing_to_write,
    save_flow,
    served_without,
    skip_save,
)
from densekv.integrations.movein import move_in, seconds_left
from densekv.integrations.stores import Stores, url_factory
from densekv.sessions.model import well_formed
from densekv.sessions.store import SessionStore

__all__ = ["DensekvSession", "FlaskSessionFallback", "SessionInterface"]

DEFAULT_NAMESPACE = "flask_sessions"  # of the stores built by SessionInterface.from_url


def _flask_marks_access() -> bool:
    """Flask 3.1.3+ sets session.accessed on every use of `flask.session`; older versions
    do not, so there the session is read when the request opens it."""
    from importlib.metadata import version

    parts = [int(p) for p in re.findall(r"\d+", version("flask"))[:3]]
    return tuple(parts) >= (3, 1, 3)


_LAZY = _flask_marks_access()


def _decode_flask_session(raw: bytes) -> Any:
    """A value Flask-Session 0.8 wrote, without msgspec (which Flask-Session brings and the
    flask extra does not): msgspec's msgpack is plain msgpack (its timestamps are msgpack's
    extension -1, read back as aware datetimes, as msgspec reads them), tried first as
    Flask-Session's own decoder does, then JSON; None if neither reads it."""
    import json

    import msgpack

    try:
        return msgpack.unpackb(raw, raw=False, timestamp=3, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException):
        pass
    try:
        return json.loads(raw)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None


class FlaskSessionFallback:
    """Reads the sessions Flask-Session 0.8's RedisSessionInterface wrote: key
    `<key_prefix><sid>` (default "session:"), value `dict(session)` encoded by msgspec as
    msgpack (default) or JSON, expiry = PERMANENT_SESSION_LIFETIME. Read with msgpack (a
    densekv dependency) and json, so neither Flask-Session nor msgspec needs to stay
    installed. Pickled values (before 0.7) are not read: unpickling what is in a database
    runs code.

    client: a redis.Redis on the server Flask-Session used; key_prefix: its
    SESSION_KEY_PREFIX.
    """

    def __init__(self, client: redis.Redis, *, key_prefix: str = "session:") -> None:
        self.client = client
        self.key_prefix = key_prefix

    def read(self, sid: str) -> tuple[dict[str, Any], int | None] | None:
        """(data, remaining seconds or None for no expiry), or None if absent or unreadable."""
        key = self.key_prefix + sid
        with self.client.pipeline(transaction=True) as pipe:
            pipe.get(key)
            pipe.pttl(key)
            raw, ms = pipe.execute()
        if raw is None:
            return None
        data = _decode_flask_session(raw)
        if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
            return None
        return data, seconds_left(ms)

    def forget(self, sid: str) -> None:
        """Delete the old session once densekv holds it."""
        self.client.delete(self.key_prefix + sid)


class SessionInterface(FlaskSessionInterface):
    """Flask's session interface on a densekv SessionStore: `app.session_interface =
    SessionInterface.from_url("redis://...")`. The cookie holds only a random token; a
    request that never uses the session makes no server call, and a save writes only the
    top-level keys the request changed.

    store: a SessionStore, or a function of no arguments that builds one (called once per
    process, again after a fork). cookie_name: instead of SESSION_COOKIE_NAME. fallback: a
    FlaskSessionFallback to move sessions in from Flask-Session under the same cookie.
    identity_key: the session key whose value is the logged-in user (Flask-Login's
    `_user_id`): setting it logs the session in as that user, removing it logs out; None
    to follow only session.login() / destroy(). device_label: a callable(request) -> str |
    None called at each login (session.login() or Flask-Login's), whose answer labels the
    session in store.sessions_of (a store with track_devices=True; densekv.integrations.devices).
    """

    session_class = DensekvSession

    def __init__(self, store: SessionStore | Callable[[], SessionStore], *,
                 cookie_name: str | None = None, fallback: FlaskSessionFallback | None = None,
                 identity_key: str | None = "_user_id",
                 device_label: DeviceLabel | None = None) -> None:
        self.stores = Stores("SessionInterface", SessionStore, store)
        self.cookie_name = cookie_name
        self.fallback = fallback
        self.identity_key = identity_key
        check_device_label(device_label, {"track_devices": True}, "SessionInterface")
        self.device_label = device_label

    @classmethod
    def from_url(cls, url: str, *, namespace: str = DEFAULT_NAMESPACE,
                 client_options: Mapping[str, Any] | None = None, cookie_name: str | None = None,
                 fallback: FlaskSessionFallback | None = None,
                 identity_key: str | None = "_user_id", device_label: DeviceLabel | None = None,
                 **store_options: Any) -> SessionInterface:
        """Sessions on the server at `url` (redis://, rediss://, unix://, redis+cluster://):
        each process builds its own client and store on its first use of a session (after
        a gunicorn fork, even with --preload; never at import or app creation, so a server
        that is down fails only requests that use the session). `client_options` go to
        densekv.connect.from_url (connect and read timeouts, 5 s each by default),
        `store_options` to SessionStore (ttl, idle_ttl, layout, track_devices,
        max_sessions_per_identity, on_limit, ...). A URL no client can be built from
        (another scheme, a port that is not a number, an option redis-py cannot read), or a
        device_label without track_devices=True, raises InvalidArgument here, at setup."""
        build = url_factory(url, SessionStore, "SessionInterface.from_url: url",
                            {"namespace": namespace, **store_options}, client_options)
        check_device_label(device_label, store_options, "SessionInterface.from_url")
        return cls(build, cookie_name=cookie_name, fallback=fallback, identity_key=identity_key,
                   device_label=device_label)

    @property
    def store(self) -> SessionStore:
        """The store; from a factory, built once per process (again in a forked child)."""
        return self.stores.get()

    def get_cookie_name(self, app: Flask) -> str:
        return self.cookie_name or super().get_cookie_name(app)

    # -- open ------------------------------------------------------------------------------
    def open_session(self, app: Flask, request: Request) -> DensekvSession:
        token = request.cookies.get(self.get_cookie_name(app))
        if not token or not well_formed(token):  # no cookie, or junk: no server call
            return DensekvSession()
        session = DensekvSession(loader=lambda s: self._load(app, s, token))
        if _LAZY:
            if has_request_context():  # Flask opens it in one; a caller outside needs no mark
                after_this_request(session.view_returned)  # runs before the app's after_request
        else:
            session.read()
        return session

    def _load(self, app: Flask, session: DensekvSession, token: str) -> None:
        try:
            found = self.store.get(token, undecodable="none")
        except Exception as exc:
            if served_without(app, session, exc):  # after the view: served, nothing written
                return
            raise
        if load_found(session, token, found):
            return
        if self.fallback is not None:
            self._move_in(app, session, token)
        session.load_done(token)

    def _move_in(self, app: Flask, session: DensekvSession, token: str) -> None:
        assert self.fallback is not None  # the policy: integrations/movein.py
        flow = move_in(self.fallback, token, shape=lambda d: moved_in_form(app, self.identity_key, d),
                       what="a Flask-Session session")
        load_moved(session, token, run(flow, self.store))

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        if skip_save(session, response):
            return
        assert isinstance(session, DensekvSession)
        try:
            follow_identity_key(app, self.identity_key, session)
            self._save(app, session, response)
        except BaseException:
            session.failed = True
            raise

    def _save(self, app: Flask, session: DensekvSession, response: Response) -> None:
        if nothing_to_write(session):
            return
        store = self.store
        outcome = run(save_flow(self, app, session, store, request if has_request_context() else None), store)
        apply_cookie(self, app, session, response, outcome)
