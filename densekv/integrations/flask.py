"""Flask backend: `app.session_interface = SessionInterface(store)` keeps Flask's session in
a densekv SessionStore; the cookie holds only the densekv token.

Invariants (checked for every backend by tests/web/test_contract.py):
  * nothing is written for a session that was not changed: a request that never touches the
    session, or only reads an empty one, creates no key and sets no cookie;
  * an existing session is saved with `store.apply(token, changes, removed)`: only the
    top-level keys this request changed, merged into the record as it is now, so two
    concurrent requests keep both changes; a session destroyed meanwhile (apply -> None) is
    never recreated and its cookie is dropped;
  * a junk cookie is a new empty session, decided without a server call; a request that
    never uses `flask.session` makes no server call at all (the session is read on first
    use, which Flask 3.1.3+ reports by setting `session.accessed`);
  * a server error propagates (Flask answers 500), never a fresh session in its place;
  * the idle expiry rolls (`store.touch`) only when `store.due_for_touch` says so, so most
    reads cost no write.
Cookie name, domain, path, flags and the permanent lifetime come from Flask's config through
the helpers of flask.sessions.SessionInterface; a permanent session is also stored for
PERMANENT_SESSION_LIFETIME, also when it becomes permanent (or stops being so) after it was
made (`store.set_ttl`).

Values pass through Flask's own tags (`session_json_serializer.tag`, as in Flask's cookie
session): tuples (flash() stores them), bytes, Markup, UUID and datetimes come back as
themselves; what densekv cannot hold even then (non-str keys, ints beyond 64 bits, ...)
raises densekv's typed error, a 500 with nothing written.

Moving in from Flask-Session 0.8 (RedisSessionInterface): `SessionInterface(store,
fallback=FlaskSessionFallback(redis_client))` imports an old session under the same cookie
value the first time densekv does not know it, with its remaining TTL, then deletes the old
key (two concurrent first requests import the same data twice, which is harmless).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import redis
from flask import Flask, Request, Response
from flask.sessions import SessionInterface as FlaskSessionInterface
from flask.sessions import SessionMixin, session_json_serializer

from densekv.errors import DensekvError, ServerUnavailable
from densekv.integrations.tracked import TrackedDict
from densekv.sessions.model import Identity, Session, SessionExists, digest_of
from densekv.sessions.store import SessionStore

__all__ = ["DensekvSession", "FlaskSessionFallback", "SessionInterface"]

_MISSING = object()


def _flask_marks_access() -> bool:
    """Flask 3.1.3+ sets session.accessed on every use of `flask.session`; older versions
    do not, so there the session is read when the request opens it."""
    from importlib.metadata import version

    parts = [int(p) for p in re.findall(r"\d+", version("flask"))[:3]]
    return tuple(parts) >= (3, 1, 3)


_LAZY = _flask_marks_access()


def tag_value(value: Any) -> Any:
    """A session value as stored: Flask's tagged-JSON form of it."""
    return session_json_serializer.tag(value)


def untag_value(value: Any) -> Any:
    """The inverse of tag_value, over nested dicts and lists."""
    if isinstance(value, dict):
        return session_json_serializer.untag({k: untag_value(v) for k, v in value.items()})
    if isinstance(value, list):
        return [untag_value(v) for v in value]
    return value


class DensekvSession(TrackedDict, SessionMixin):
    """Flask's `session` for one request: a dict that knows what the request changed.

    `stored` is the data as loaded (tagged form); at save time the changed top-level keys
    are those set during the request or whose value now differs from `stored`, and the
    removed keys are those of `stored` no longer present. login(), regenerate(),
    logout_everywhere() and destroy() take effect when the response is saved.
    """

    def __init__(self, data: Mapping[str, Any] | None = None, *, token: str | None = None,
                 found: Session | None = None, stored: Mapping[str, Any] | None = None,
                 loader: Callable[[DensekvSession], None] | None = None) -> None:
        super().__init__(data or {})
        self.loader = loader  # set: not read yet; the first access (accessed = True) reads it
        self.token = token
        self.found = found
        self.stored: dict[str, Any] = dict(stored or {})
        self.new = token is None
        self.modified = False
        self._accessed = False
        self.set_keys: set[str] = set()
        self.deleted_keys: set[str] = set()
        self.cleared = False
        self.login_as: Identity | None = None
        self.regenerate_asked = False
        self.ended: list[str] = []  # tokens to destroy at save time
        self.end_all: Identity | None = None
        self.failed = False  # a load or save raised: Flask's error path must not save

    @property
    def accessed(self) -> bool:
        return self._accessed

    @accessed.setter
    def accessed(self, value: bool) -> None:
        """Flask (3.1.3+) sets this on every use of `flask.session` in a request: the
        session is read from the store then, so a request that never uses it makes no
        server call."""
        self._accessed = value
        if value:
            self.read()

    def read(self) -> None:
        """Read the session from the store unless done already."""
        if self.loader is not None:
            loader, self.loader = self.loader, None
            try:
                loader(self)
            except BaseException:
                self.failed = True
                raise

    def loaded(self, data: Mapping[str, Any], token: str, found: Session | None,
               stored: Mapping[str, Any]) -> None:
        """Fill a session read from the store (no change is recorded)."""
        dict.update(self, data)
        self.token, self.found, self.stored, self.new = token, found, dict(stored), False

    @property
    def identity(self) -> Identity | None:
        """Who the session belongs to (a pending login() counts), or None."""
        if self.login_as is not None:
            return self.login_as
        return self.found.identity if self.found is not None else None

    # -- the densekv actions, applied by save_session -----------------------------------
    def login(self, identity: Identity) -> None:
        """Attach `identity` in one atomic step at save time: new cookie, old one dead."""
        self.login_as = identity
        self.modified = True

    def regenerate(self) -> None:
        """New cookie value at save time, same data and identity; the old value dies."""
        self.regenerate_asked = True
        self.modified = True

    def destroy(self) -> None:
        """End this session (server record and cookie); later writes start a new one."""
        if self.token is not None:
            self.ended.append(self.token)
        self.token, self.found, self.login_as = None, None, None
        self.regenerate_asked = False
        self.stored.clear()
        dict.clear(self)
        self.set_keys.clear()
        self.deleted_keys.clear()
        self.modified = True

    def logout_everywhere(self) -> None:
        """End every session of this session's identity (this one included)."""
        identity = self.found.identity if self.found is not None else None
        if identity is not None:
            self.end_all = identity
        self.destroy()

    # -- change tracking -------------------------------------------------------------------
    def _set(self, key: str) -> None:
        self.set_keys.add(key)
        self.deleted_keys.discard(key)
        self.modified = True

    def _deleted(self, key: str) -> None:
        self.deleted_keys.add(key)
        self.set_keys.discard(key)
        self.modified = True

    def _on_clear(self) -> None:
        self.cleared = True
        self.modified = True

    def tagged(self) -> dict[str, Any]:
        """All data in stored form (for a new session)."""
        return {k: tag_value(v) for k, v in self.items()}

    def changes(self) -> tuple[dict[str, Any], list[str]]:
        """(changed keys with their stored form, removed keys) against what was loaded."""
        changed: dict[str, Any] = {}
        for key, value in self.items():
            tagged = tag_value(value)
            if key in self.set_keys or self.stored.get(key, _MISSING) != tagged:
                changed[key] = tagged
        removed = [k for k in self.stored if k not in self]
        return changed, removed


class FlaskSessionFallback:
    """Reads the sessions Flask-Session 0.8's RedisSessionInterface wrote: key
    `<key_prefix><sid>` (default "session:"), value `dict(session)` encoded by msgspec as
    msgpack (default) or JSON, expiry = PERMANENT_SESSION_LIFETIME. Pickled values (before
    0.7) are not read: unpickling what is in a database runs code."""

    def __init__(self, client: redis.Redis, *, key_prefix: str = "session:") -> None:
        self.client = client
        self.key_prefix = key_prefix

    def read(self, sid: str) -> tuple[dict[str, Any], int | None] | None:
        """(data, remaining seconds or None for no expiry), or None if absent or unreadable."""
        import msgspec

        key = self.key_prefix + sid
        with self.client.pipeline(transaction=True) as pipe:
            pipe.get(key)
            pipe.pttl(key)
            raw, ms = pipe.execute()
        if raw is None:
            return None
        data: Any = None
        for decode in (msgspec.msgpack.decode, msgspec.json.decode):
            try:
                data = decode(raw)
                break
            except msgspec.DecodeError:
                continue
        if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
            return None
        ttl = None if ms < 0 else max(1, -(-int(ms) // 1000))
        return data, ttl

    def forget(self, sid: str) -> None:
        self.client.delete(self.key_prefix + sid)


class SessionInterface(FlaskSessionInterface):
    """Flask sessions in a densekv SessionStore (see the module docstring)."""

    session_class = DensekvSession

    def __init__(self, store: SessionStore, *, cookie_name: str | None = None,
                 fallback: FlaskSessionFallback | None = None) -> None:
        self.store = store
        self.cookie_name = cookie_name
        self.fallback = fallback

    def get_cookie_name(self, app: Flask) -> str:
        return self.cookie_name or super().get_cookie_name(app)

    # -- open ------------------------------------------------------------------------------
    def open_session(self, app: Flask, request: Request) -> DensekvSession:
        token = request.cookies.get(self.get_cookie_name(app))
        if not token or digest_of(token) is None:  # no cookie, or junk: no server call
            return DensekvSession()
        session = DensekvSession(loader=lambda s: self._load(app, s, token))
        if not _LAZY:
            session.read()
        return session

    def _load(self, app: Flask, session: DensekvSession, token: str) -> None:
        found = self.store.get(token)
        if found is not None:
            stored = found.data or {}
            session.loaded({k: untag_value(v) for k, v in stored.items()}, token, found, stored)
        elif self.fallback is not None:
            self._move_in(app, session, token)

    def _move_in(self, app: Flask, session: DensekvSession, token: str) -> None:
        assert self.fallback is not None
        old = self.fallback.read(token)
        if old is None:
            return
        data, ttl = old
        stored = {k: tag_value(v) for k, v in data.items()}
        try:
            self.store.create(None, stored, ttl, token=token)
        except SessionExists:  # another request moved it in a moment ago: theirs stands
            self._load(app, session, token)
            return
        except ServerUnavailable:
            raise
        except DensekvError as exc:  # data densekv cannot hold: start afresh, keep the old key
            app.logger.warning("densekv: a Flask-Session session was not imported: %s", exc)
            return
        self.fallback.forget(token)
        session.loaded(data, token, None, stored)

    # -- save ------------------------------------------------------------------------------
    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        if not isinstance(session, DensekvSession) or session.failed or session.loader:
            return  # open_session or the load raised (a 500), a save failed, or unused
        if session.accessed:
            response.vary.add("Cookie")
        try:
            self._save(app, session, response)
        except BaseException:
            session.failed = True
            raise

    def _save(self, app: Flask, session: DensekvSession, response: Response) -> None:
        store = self.store
        for token in session.ended:
            store.destroy(token)
        if session.end_all is not None:
            store.destroy_all(session.end_all)
        if session.token is None:
            self._save_new(app, session, response, dropped=bool(session.ended))
            return
        token = session.token
        if not session and session.login_as is None and (
            session.cleared or (session.modified and session.identity is None)
        ):  # emptied: Flask removes an emptied session
            store.destroy(token)
            self._drop_cookie(app, response)
            return
        alive = True
        if session.modified:
            changed, removed = session.changes()
            if changed or removed:  # remember me, or not: the lifetime in the same write
                lifetime = {"ttl": self._lifetime(app, session)} if "_permanent" in (*changed, *removed) else {}
                alive = store.apply(token, changed, removed, **lifetime) is not None
        new_token: str | None = token
        if alive and session.login_as is not None:
            new_token = store.login(token, session.login_as)
        elif alive and session.regenerate_asked:
            new_token = store.regenerate(token)
        if not alive or new_token is None:  # destroyed meanwhile: never resurrect it
            if session.login_as is not None:  # ... but a login starts a session of its own
                self._save_new(app, session, response, dropped=True)
            else:
                self._drop_cookie(app, response)
            return
        if new_token != token:
            self._set_cookie(app, session, response, new_token)
            return
        if session.found is not None and store.due_for_touch(session.found):
            store.touch(token)
        if self.should_set_cookie(app, session):
            self._set_cookie(app, session, response, token)

    def _save_new(self, app: Flask, session: DensekvSession, response: Response, *,
                  dropped: bool) -> None:
        if not session and session.login_as is None:
            if dropped:
                self._drop_cookie(app, response)
            return
        token = self.store.create(session.login_as, session.tagged(), self._lifetime(app, session))
        self._set_cookie(app, session, response, token)

    @staticmethod
    def _lifetime(app: Flask, session: DensekvSession) -> int | None:
        """A permanent session's ttl: PERMANENT_SESSION_LIFETIME; else the store's. A lifetime
        under a second (Flask allows 0) is the store's ttl too: the store refuses a session
        that would be dead at once."""
        return (int(app.permanent_session_lifetime.total_seconds()) or None) if session.permanent else None

    # -- cookies ---------------------------------------------------------------------------
    def _set_cookie(self, app: Flask, session: DensekvSession, response: Response,
                    token: str) -> None:
        response.set_cookie(
            self.get_cookie_name(app), token,
            expires=self.get_expiration_time(app, session),
            httponly=self.get_cookie_httponly(app), domain=self.get_cookie_domain(app),
            path=self.get_cookie_path(app), secure=self.get_cookie_secure(app),
            samesite=self.get_cookie_samesite(app),
            partitioned=self.get_cookie_partitioned(app),
        )
        response.vary.add("Cookie")

    def _drop_cookie(self, app: Flask, response: Response) -> None:
        response.delete_cookie(
            self.get_cookie_name(app), domain=self.get_cookie_domain(app),
            path=self.get_cookie_path(app), secure=self.get_cookie_secure(app),
            samesite=self.get_cookie_samesite(app),
            partitioned=self.get_cookie_partitioned(app),
            httponly=self.get_cookie_httponly(app),
        )
        response.vary.add("Cookie")
