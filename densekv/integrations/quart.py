"""Quart backend: `app.session_interface = SessionInterface.from_url("redis://...")` keeps
Quart's session in a densekv AsyncSessionStore; the cookie holds only the densekv token.

Quart's session interface is Flask's with coroutines, and its session object, config keys
and cookie helpers are Flask's, so this shell keeps the Flask shell's rules (written once
in integrations/flasklike.py: the save decision, lifetimes and refresh, Flask-Login's
`_user_id`, the cookie) and its session object (flask_session.DensekvSession: login(),
regenerate(), destroy(), logout_everywhere() at save time). What differs is I/O:

  * the load happens in open_session, before the view (an async store cannot be read on
    first access, which is synchronous), and only for a well-formed cookie: no cookie, or
    junk, costs no server call. The session is filled from that read on its first use, so
    a view that never uses it makes no write, sends no cookie and no `Vary: Cookie`; and a
    read that failed (server down, a timeout) raises where the session is first used, so a
    route that never uses it is served. (Flask's shell reads on first use instead: there a
    request with a cookie whose view never uses the session costs no read.)
  * the store: from_url builds one redis.asyncio client and store per running event loop
    (each hypercorn/uvicorn worker, each test's loop; integrations/loops.py), closed with
    the loop; a function of no arguments returning an AsyncSessionStore is called once per
    loop; a store given directly serves the one loop it first serves.
  * WebSocket routes get the session loaded, never saved (Quart's own cookie session cannot
    save one either: there is no response to carry a cookie); a change is logged.

Moving in from Quart-Session (its Redis interface): `fallback=QuartSessionFallback()` reads
a cookie densekv does not know under Quart-Session's key (`session:<sid>`, Flask's tagged
JSON), imports it under the same cookie value with its remaining lifetime (and its
`_user_id` as identity), and deletes the old key; what is refused and why is
integrations/movein.py's policy, the same in every shell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from quart import Quart, after_this_request, has_request_context, request
from quart.sessions import SessionInterface as QuartSessionInterface
from quart.sessions import SessionMixin

from densekv.integrations import movein
from densekv.integrations.devices import DeviceLabel, check_device_label
from densekv.integrations.drive import arun
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
from densekv.integrations.movein import RedisKeyReader
from densekv.integrations.stores import Stores, url_factory
from densekv.sessions.model import Session, well_formed
from densekv.sessions.store import AsyncSessionStore

__all__ = ["DensekvSession", "QuartSessionFallback", "SessionInterface"]

DEFAULT_NAMESPACE = "quart_sessions"
"""The namespace of the stores built by SessionInterface.from_url when none is given."""

StoreFactory = Callable[[], AsyncSessionStore]
#: what open_session hands the session's first use: the stored session (or None), the one
#: moved in (or None), or the error the read raised
_Read = tuple[Session | None, Session | None, BaseException | None]


class QuartSessionFallback(RedisKeyReader):
    """Reads the sessions Quart-Session's RedisSessionInterface wrote: key
    `<key_prefix><sid>` (Quart-Session's SESSION_KEY_PREFIX, "session:" by default), value
    Flask's tagged JSON of the session dict, expiry PERMANENT_SESSION_LIFETIME. Sessions
    behind a signed cookie (SESSION_USE_SIGNER) are not read: their cookie is not a token.

    client: a redis.asyncio client on the server Quart-Session used, or None (the default)
    for the client of the session store of each loop (Quart-Session on the same server).
    """

    def __init__(self, client: Any = None, *, key_prefix: str = "session:") -> None:
        super().__init__(client)
        self.key_prefix = key_prefix

    def key_of(self, token: str) -> str:
        return self.key_prefix + token

    def decode(self, raw: bytes) -> dict[str, Any] | None:
        from quart.sessions import session_json_serializer

        try:
            data = session_json_serializer.loads(raw)  # type: ignore[arg-type]  # bytes: json.loads reads them
        except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            return None
        return data if isinstance(data, dict) else None


class SessionInterface(QuartSessionInterface):
    """Quart's session interface on densekv: `app.session_interface =
    SessionInterface.from_url("redis://...")`. The cookie holds only a random token; a save
    writes only the top-level keys the request changed.

    store: an AsyncSessionStore (one event loop: the one it first serves), or a function of
    no arguments that builds one (called once per running loop, in it). cookie_name: instead
    of SESSION_COOKIE_NAME. fallback: a QuartSessionFallback to move sessions in from
    Quart-Session under the same cookie. identity_key: the session key whose value is the
    logged-in user (`_user_id`, as Flask-Login and its Quart ports keep it): setting it
    logs the session in as that user, removing it logs out; None to follow only
    session.login() / destroy(). device_label: a callable(request) -> str | None called at
    each login, whose answer labels the session in store.sessions_of (a store with
    track_devices=True; densekv.integrations.devices).
    """

    session_class = DensekvSession

    def __init__(self, store: AsyncSessionStore | StoreFactory, *, cookie_name: str | None = None,
                 fallback: QuartSessionFallback | None = None,
                 identity_key: str | None = "_user_id",
                 device_label: DeviceLabel | None = None) -> None:
        self.stores = Stores("SessionInterface", AsyncSessionStore, store, url_arg="SessionInterface.from_url")
        self.cookie_name = cookie_name
        self.fallback = fallback
        self.identity_key = identity_key
        check_device_label(device_label, {"track_devices": True}, "SessionInterface")
        self.device_label = device_label

    @classmethod
    def from_url(cls, url: str, *, namespace: str = DEFAULT_NAMESPACE,
                 client_options: Mapping[str, Any] | None = None, cookie_name: str | None = None,
                 fallback: QuartSessionFallback | None = None,
                 identity_key: str | None = "_user_id", device_label: DeviceLabel | None = None,
                 **store_options: Any) -> SessionInterface:
        """Sessions on the server at `url` (redis://, rediss://, unix://, redis+cluster://):
        one client and store per running event loop, built on its first request that has a
        session to read or write (never at import or app creation) and closed with the loop.
        `client_options` go to densekv.connect.from_url (connect and read timeouts, 5 s each
        by default), `store_options` to AsyncSessionStore (ttl, idle_ttl, layout,
        track_devices, max_sessions_per_identity, on_limit, ...). A URL no client can be
        built from, or a device_label without track_devices=True, raises InvalidArgument
        here, at setup."""
        build = url_factory(url, AsyncSessionStore, "SessionInterface.from_url: url",
                            {"namespace": namespace, **store_options}, client_options)
        check_device_label(device_label, store_options, "SessionInterface.from_url")
        return cls(build, cookie_name=cookie_name, fallback=fallback, identity_key=identity_key,
                   device_label=device_label)

    async def store(self) -> AsyncSessionStore:
        """The store of the running event loop (for the app's own calls in a view:
        `await app.session_interface.store()` then sessions_of, destroy_all, stats)."""
        return await self.stores.current()

    def get_cookie_name(self, app: Quart) -> str:
        return self.cookie_name or super().get_cookie_name(app)

    # -- open ------------------------------------------------------------------------------
    async def open_session(self, app: Quart, request: Any) -> DensekvSession:
        token = request.cookies.get(self.get_cookie_name(app))
        if not token or not well_formed(token):  # no cookie, or junk: no server call
            return DensekvSession(loader=_used)
        found = moved = None
        failed: BaseException | None = None
        try:
            store = await self.stores.current()
            found, moved = await arun(movein.load(  # the move-in policy: integrations/movein.py
                token, self.fallback, store=store, what="a Quart-Session session",
                shape=lambda d: moved_in_form(app, self.identity_key, d)), store)
        except Exception as exc:  # noqa: BLE001 - raised again where the app uses the session
            failed = exc
        read: _Read = (found, moved, failed)
        session = DensekvSession(loader=lambda s: _fill(app, s, token, read))
        if has_request_context():  # not in a WebSocket's context, nor outside a request
            after_this_request(session.view_returned)
        return session

    # -- save ------------------------------------------------------------------------------
    async def save_session(self, app: Quart, session: SessionMixin, response: Any) -> None:
        if response is None:  # a WebSocket's session: there is no response to set a cookie on
            if isinstance(session, DensekvSession) and session.modified:
                app.logger.warning("densekv: a session changed during a WebSocket is not saved")
            return
        if skip_save(session, response):
            return
        assert isinstance(session, DensekvSession)
        try:
            follow_identity_key(app, self.identity_key, session)
            if nothing_to_write(session):
                return
            store = await self.stores.current()
            await store.ready()  # the lifetime rules read its ttl and clock
            at = request if has_request_context() else None
            outcome = await arun(save_flow(self, app, session, store, at), store)
            apply_cookie(self, app, session, response, outcome)
        except BaseException:
            session.failed = True
            raise


def _used(session: DensekvSession) -> None:
    """The first use of a session that had nothing to read (no cookie, or junk)."""
    session.mark_accessed()


def _fill(app: Quart, session: DensekvSession, token: str, read: _Read) -> None:
    """The first use of a session whose cookie was read in open_session: filled from that
    read, or the read's error raised here (a view that never uses the session is served)."""
    session.mark_accessed()
    found, moved, failed = read
    if failed is not None:
        if served_without(app, session, failed):  # after the view: served, nothing written
            return
        raise failed
    if not load_found(session, token, found):
        load_moved(session, token, moved)
    session.load_done(token)
