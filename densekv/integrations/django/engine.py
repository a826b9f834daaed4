"""SessionStore, Django's session engine on densekv (the mapping of one onto the other is in
the package docstring, densekv/integrations/django/__init__.py): every SessionBase
operation written once as a flow of store calls, run by the sync or the async driver."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, ClassVar, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings  # type: ignore[import-untyped]
from django.contrib.sessions.backends.base import (  # type: ignore[import-untyped]
    CreateError,
    SessionBase,
    UpdateError,
)
from django.contrib.sessions.exceptions import SessionInterrupted  # type: ignore[import-untyped]
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]

from densekv.errors import SessionDataInvalid, SessionExists, SessionLimitReached
from densekv.integrations import decide as rules
from densekv.integrations.calls import (
    Create,
    Destroy,
    DestroyAll,
    Get,
    Login,
    Regenerate,
    StoreCall,
)
from densekv.integrations.decide import Held, carry, decide
from densekv.integrations.devices import label_of
from densekv.integrations.django.backend import Backend, backend_for
from densekv.integrations.django.movein import AsyncOldBackend, OldBackend
from densekv.integrations.django.values import EXPIRY_KEY, Data, Stored, copied, identity_of, same
from densekv.integrations.drive import Flow, arun, run
from densekv.integrations.movein import AsyncMoveInSource, MoveInSource, move_in
from densekv.sessions import Session
from densekv.sessions import SessionStore as DenseStore
from densekv.sessions.model import new_token, well_formed
from densekv.sessions.payload import pack_data

__all__ = ["SessionStore", "on_user_logged_in"]

T = TypeVar("T")


def _flow(step: StoreCall | Flow[T]) -> Flow[T]:
    """A single call as a flow of one call (so _storing runs either)."""
    if isinstance(step, StoreCall):
        return (yield step)  # type: ignore[no-any-return]
    return (yield from step)


class SessionStore(SessionBase):  # type: ignore[misc]
    """A Django session whose server side is a densekv session (see the package docstring)."""

    densekv_settings: ClassVar[Mapping[str, Any] | None] = None  # None: settings.DENSEKV_SESSIONS
    _session_key: str | None  # SessionBase's validating property (8+ characters or None)
    #: the label this session's next login gives it (track_devices): set from the
    #: device_label hook by contrib.auth's login() (on_user_logged_in), or by the app before
    #: a login of its own (`session[SESSION_KEY] = uid; session.device_label = ...; cycle_key()`)
    device_label: str | None = None

    def __init__(self, session_key: str | None = None) -> None:
        super().__init__(session_key)
        self._stored: Stored | None = None
        self._unread: str | None = None  # a key that loaded as no session (gone, or undecodable)

    @classmethod
    def bound_to(cls, conf: Mapping[str, Any]) -> type[SessionStore]:
        """A subclass using `conf` instead of settings (several stores in one project)."""
        return type(cls.__name__, (cls,), {"densekv_settings": conf, "__module__": cls.__module__})

    @classmethod
    def _backend(cls) -> Backend:
        conf = cls.densekv_settings
        if conf is None:
            conf = getattr(settings, "DENSEKV_SESSIONS", None)
        if conf is None:
            raise ImproperlyConfigured(
                "densekv.integrations.django needs DENSEKV_SESSIONS = {'url': 'redis://...'} in settings")
        return backend_for(conf)

    @classmethod
    def densekv_store(cls) -> DenseStore:
        """The densekv.SessionStore behind this engine (sessions_of, destroy_all, stats...)."""
        return cls._backend().sync()

    @classmethod
    def densekv_each_store(cls, made: Callable[[Any], Any], gone: Callable[[Any], Any] | None = None) -> None:
        """Call `made` with every densekv store behind this engine, those built so far and
        those built later: the sync store (sync views, clearsessions) and the async stores of
        async views (the async_client's, or one AsyncSessionStore per event loop, made in it);
        `gone` with a loop's store once its loop has closed. For observers and metrics:
        `SessionStore.densekv_each_store(metrics.observe, metrics.unobserve)`."""
        cls._backend().each_store(made, gone)

    # -- drivers: run a flow against the sync or the async store --------------------------
    def _run(self, flow: Flow[T]) -> T:
        return run(flow, self._backend().sync)

    async def _arun(self, flow: Flow[T]) -> T:
        """The async store of the running loop, opened at the first call that needs it;
        with only a sync client configured, the sync driver in a thread."""
        backend = self._backend()
        if not backend.real_async:
            return await sync_to_async(run)(flow, backend.sync)
        return await arun(flow, backend.for_loop)

    def _old(self, asynchronous: bool) -> MoveInSource | AsyncMoveInSource | None:
        """The backend sessions move in from (the fallback), as the driver needs it."""
        backend = self._backend()
        if backend.fallback is None:
            return None
        old = OldBackend(backend.fallback)
        return AsyncOldBackend(old) if asynchronous and backend.real_async else old

    # -- flows: every operation once, for both drivers --------------------------------------
    def _storing(self, make: Callable[[Data], StoreCall | Flow[Any]], data: Data) -> Flow[tuple[Any, Data]]:
        """Run the write `make(data)` (a call, or a flow of calls); if densekv refuses the
        data as one it cannot give back equal, write it once more with each refused
        top-level key as SESSION_SERIALIZER gives it back (see the package docstring). The
        data written comes back too."""
        try:
            return (yield from _flow(make(data))), data
        except SessionDataInvalid:
            data = self._as_serialized(data)
            return (yield from _flow(make(data))), data

    def _as_serialized(self, data: Data) -> Data:
        serializer = self.serializer()
        out: Data = {}
        for key, value in data.items():
            try:
                pack_data({key: value}, max_bytes=2**62)
                out[key] = value
            except SessionDataInvalid:  # a tuple, an int key, ...: as Django's backends give it
                out.update(serializer.loads(serializer.dumps({key: value})))
        return out

    def _ttl_of(self, data: Data) -> int | None:
        """The lifetime a new session gets: its custom expiry, else None (the store's)."""
        expiry = data.get(EXPIRY_KEY)
        return int(self.get_expiry_age(expiry=expiry)) if expiry else None

    def _past_expiry(self, data: Data) -> bool:
        expiry = data.get(EXPIRY_KEY)
        if not expiry or isinstance(expiry, bool):
            return False
        try:
            return bool(self.get_expiry_age(expiry=expiry) <= 0)
        except (TypeError, ValueError):  # not something set_expiry writes: not ours to judge
            return False

    def _base(self) -> Stored | None:
        stored = self._stored
        return stored if stored is not None and stored.token == self.session_key else None

    def _load_flow(self, old: MoveInSource | AsyncMoveInSource | None) -> Flow[Data]:
        token = self.session_key
        session: Session | None = None
        if well_formed(token):  # a junk cookie costs no server call
            session = yield Get(token)
        if session is None and old is not None and well_formed(token):
            session = yield from self._move_in_flow(old, token)
        data: Data = dict(session.data or {}) if session is not None else {}
        if session is not None and self._past_expiry(data):
            yield Destroy(token)
            session = None
        if session is None:
            # no session for this request: a new one if anything is saved. A key that is
            # stored but does not decode is ended by this session's first write (the new
            # session's create, cycle_key or flush), never on a read alone.
            self._unread = token if well_formed(token) else None
            self._session_key = None
            self._stored = None
            return {}
        # touched at the load: Django saves a modified session only (integrations/decide.py)
        yield from rules.touch_if_due(token, session)
        self._stored = Stored(token, session.identity, copied(data), session)
        return data

    def _move_in_flow(self, old: MoveInSource | AsyncMoveInSource, token: str) -> Flow[Session | None]:
        """integrations/movein.py's policy; data densekv refuses as invalid is written once
        more as SESSION_SERIALIZER gives it back (as _storing does)."""
        return (yield from move_in(old, token, shape=lambda d: (d, identity_of(d)),
                                   fix=self._as_serialized, what="a Django session"))

    def _create_flow(self, data: Data, token: str | None = None) -> Flow[None]:
        """A new session holding `data`; under `token` when given (CreateError if taken).
        A key this object loaded as no session ends after it, as decide() ends a stale
        cookie token once the request writes its session."""
        ttl = self._ttl_of(data)
        if rules.outlives_no_request(ttl):  # over before it starts: nothing to store
            self._session_key = token or new_token()
            self._stored = None
            return (yield from self._end_unread_flow())
        if token is not None and not well_formed(token):
            raise CreateError
        identity = identity_of(data)
        label = self.device_label if identity is not None else None
        try:  # a given token is stored only if no live session holds it (one atomic step)
            made, stored = yield from self._storing(
                lambda d: Create(identity, d, ttl, token=token, label=label), data)
        except SessionExists:
            raise CreateError from None
        self._session_key = made
        self._stored = Stored(made, identity, copied(stored))
        yield from self._end_unread_flow()

    def _save_flow(self, data: Data, must_create: bool) -> Flow[None]:
        token = self.session_key
        if token is None:
            return (yield from self._create_flow(data))
        if must_create:
            return (yield from self._create_flow(data, token))
        base = self._base()
        if base is None:  # data never read here (clear() before any load): read what is stored
            session = yield Get(token)
            if session is None:
                raise UpdateError
            base = Stored(token, session.identity, session.data or {}, session)
        identity = identity_of(data)
        changes = {k: v for k, v in data.items() if k not in base.data or not same(base.data[k], v)}
        removed = [k for k in base.data if k not in data]
        # As Django's own backends: every save gives the session get_expiry_age() from now
        # (set_expiry's, else the store's ttl, SESSION_COOKIE_AGE by default), in the same
        # write as the data, so the stored session lives as long as the cookie sent with
        # it; an expiry already past ends it now.
        ttl = self._ttl_of(data)
        if rules.outlives_no_request(ttl):
            yield from rules.store_nothing(token, True)
            self._stored = None
            return
        # integrations/decide.py: apply(read=) of the changed keys, login on a change of
        # user, else set_ttl (Django restarts the lifetime on every save)
        login = identity is not None and identity != base.identity
        held = Held(token=token, read=base.read, modified=True, removed=removed,
                    identity=identity if login else None, rotate="login" if login else None,
                    ttl=ttl, life=ttl, refresh=True, refresh_ttl=True, gone="raise",
                    label=self.device_label)
        outcome, _ = yield from self._storing(
            lambda d: carry(decide(replace(held, changed=d)), token), changes)
        if outcome.gone:
            raise UpdateError
        self._session_key = token = outcome.token
        if outcome.merged is None:  # nothing changed: the base stands (under the new key)
            self._stored = Stored(token, identity, base.data) if login else base
            return
        data.clear()
        data.update(outcome.merged)
        self._stored = Stored(token, identity if identity is not None else base.identity,
                              copied(outcome.merged))

    def _end_unread_flow(self) -> Flow[None]:
        """End the key this object loaded as no session (undecodable, or already gone)."""
        unread, self._unread = self._unread, None
        if unread is not None:
            yield Destroy(unread)

    def _cycle_flow(self, data: Data) -> Flow[None]:
        token = self.session_key
        if token is None:
            yield from self._end_unread_flow()
            return (yield from self._create_flow(data))
        base = self._base()
        identity = identity_of(data)
        if identity is not None and (base is None or identity != base.identity):
            moved = yield Login(token, identity, self.device_label)
        else:
            moved = yield Regenerate(token)
        if moved is None:
            if base is not None:  # read in this request, gone since: a concurrent logout
                raise SessionInterrupted("The session ended in another request while this one ran.")
            return (yield from self._create_flow(data))
        self._session_key = moved
        self._stored = None if base is None else Stored(
            moved, identity if identity is not None else base.identity, base.data)

    def _delete_flow(self, session_key: str | None) -> Flow[None]:
        if session_key is None:
            session_key = self.session_key
            if session_key is None:
                yield from self._end_unread_flow()
                return
        if well_formed(session_key):
            yield Destroy(session_key)
        if session_key == self.session_key:
            self._stored = None

    def _exists_flow(self, session_key: str | None) -> Flow[bool]:
        if not session_key or not well_formed(session_key):
            return False
        return (yield Get(session_key)) is not None

    def _end_all_flow(self, data: Data) -> Flow[int]:
        base = self._base()
        identity = base.identity if base is not None and base.identity is not None else identity_of(data)
        ended = 0
        if identity is not None:
            ended = yield DestroyAll(identity)
        yield from self._delete_flow(None)
        return int(ended)

    # -- SessionBase, sync ------------------------------------------------------------------
    def _get_new_session_key(self) -> str:
        return new_token()  # 192 random bits: no need to ask the server whether it is taken

    async def _aget_new_session_key(self) -> str:
        return new_token()

    def exists(self, session_key: str | None) -> bool:
        return self._run(self._exists_flow(session_key))

    def create(self) -> None:
        self._run(self._create_flow(self._get_session(no_load=True)))
        self.modified = True

    def save(self, must_create: bool = False) -> None:
        if self.session_key is None:
            return self.create()
        self._run(self._save_flow(self._get_session(no_load=must_create), must_create))

    def delete(self, session_key: str | None = None) -> None:
        self._run(self._delete_flow(session_key))

    def load(self) -> Data:
        return self._run(self._load_flow(self._old(asynchronous=False)))

    def cycle_key(self) -> None:
        """A new key, the data kept, the old key dead at once (densekv's atomic
        regenerate, or login when ``_auth_user_id`` differs from the stored identity)."""
        data = self._session
        self._run(self._cycle_flow(data))
        self._session_cache = data
        self.modified = True

    def logout_everywhere(self) -> int:
        """End every session of this session's user (this one too); the count ended."""
        ended = self._run(self._end_all_flow(self._session))
        self.clear()
        self._session_key = None
        return ended

    @classmethod
    def clear_expired(cls) -> None:
        cls._backend().sync().sweep()

    # -- SessionBase, async -----------------------------------------------------------------
    async def aexists(self, session_key: str | None) -> bool:
        return await self._arun(self._exists_flow(session_key))

    async def acreate(self) -> None:
        await self._arun(self._create_flow(await self._aget_session(no_load=True)))
        self.modified = True

    async def asave(self, must_create: bool = False) -> None:
        if self.session_key is None:
            return await self.acreate()
        data = await self._aget_session(no_load=must_create)
        await self._arun(self._save_flow(data, must_create))

    async def adelete(self, session_key: str | None = None) -> None:
        await self._arun(self._delete_flow(session_key))

    async def aload(self) -> Data:
        return await self._arun(self._load_flow(self._old(asynchronous=True)))

    async def acycle_key(self) -> None:
        data = await self._aget_session()
        await self._arun(self._cycle_flow(data))
        self._session_cache = data
        self.modified = True

    async def alogout_everywhere(self) -> int:
        ended = await self._arun(self._end_all_flow(await self._aget_session()))
        self.clear()
        self._session_key = None
        return ended

    @classmethod
    async def aclear_expired(cls) -> None:
        backend = cls._backend()
        if backend.real_async:
            await (await backend.for_loop()).sweep()
        else:
            await sync_to_async(backend.sync().sweep)()



def on_user_logged_in(sender: Any, request: Any = None, user: Any = None, **kwargs: Any) -> None:
    """contrib.auth's user_logged_in (sent by login() and alogin() once the session holds the
    user): with a device_label hook or max_sessions_per_identity configured, label the
    session and log it in now, in the view, instead of when the response is saved, so a
    login the store refuses raises SessionLimitReached out of login() where the view can
    catch it. Refused, the session is left anonymous as it was before login() (its auth
    keys removed, request.user anonymous; Django's login() had already given it a new key)."""
    session = getattr(request, "session", None)
    if not isinstance(session, SessionStore):
        return
    backend = session._backend()  # noqa: SLF001 - this module's own class
    if not backend.eager_login:
        return
    session.device_label = label_of(backend.device_label, request)
    try:
        session.cycle_key()
    except SessionLimitReached:
        from django.contrib.auth import (  # type: ignore[import-untyped]
            BACKEND_SESSION_KEY,
            HASH_SESSION_KEY,
            SESSION_KEY,
        )
        from django.contrib.auth.models import AnonymousUser  # type: ignore[import-untyped]

        for key in (SESSION_KEY, BACKEND_SESSION_KEY, HASH_SESSION_KEY):
            session.pop(key, None)
        if hasattr(request, "user"):
            request.user = AnonymousUser()
        raise
