"""The calls a web-session flow yields: one small frozen dataclass per session-store
operation, holding its arguments. Sans-I/O, like the flows that yield them
(integrations/decide.py's `carry`, flasklike.py's save, identity_flows.py's login and
logout, Django's engine); integrations/drive.py runs them, and `perform` below is the
one place a call becomes a store method call: dispatched by the call's type, so every call
is checked against both stores' signatures (SessionStore, AsyncSessionStore) by mypy.

`name` is the store operation a call names and `args` / `kwargs` its arguments as the store
method takes them (the fields without a default / with one): for logs and table tests, never
for dispatch.

An old source's protocols (MoveInSource, AsyncMoveInSource) are here, beside the two calls
that name one (ReadOld, ForgetOld); integrations/movein.py, the policy of moving sessions
in, gives them to the shells.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from types import EllipsisType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from densekv.sessions.model import Identity, Session

if TYPE_CHECKING:
    from densekv.sessions.store import AsyncSessionStore, SessionStore

__all__ = ["Apply", "AsyncMoveInSource", "Create", "Destroy", "DestroyAll", "DueForTouch", "ForgetOld",
           "Get", "Login", "MoveInSource", "Old", "ReadOld", "Regenerate", "SetTtl", "StoreCall",
           "StoreTtl", "Touch", "perform"]


@dataclasses.dataclass(frozen=True, slots=True)
class StoreCall:
    """A call a flow yields; a subclass per store operation. `on_store`: the call needs the
    session store (a driver given a way to open one opens it at the first such call)."""

    name: ClassVar[str] = ""
    on_store: ClassVar[bool] = True

    @property
    def args(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self) if _required(f))

    @property
    def kwargs(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not _required(f)}


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


@dataclasses.dataclass(frozen=True, slots=True)
class Get(StoreCall):
    """The session of `token`; one that does not decode is no session (the store logs it)."""

    name: ClassVar[str] = "get"
    token: str


@dataclasses.dataclass(frozen=True, slots=True)
class Create(StoreCall):
    """A new session (its token); under `token` when given (SessionExists if live)."""

    name: ClassVar[str] = "create"
    identity: Identity | None
    data: dict[str, Any]
    ttl: int | None
    token: str | None = None
    label: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Apply(StoreCall):
    """Top-level keys merged into the stored data (the merged data, None: gone)."""

    name: ClassVar[str] = "apply"
    token: str
    changes: dict[str, Any]
    removed: Sequence[str]
    ttl: int | None | EllipsisType = ...
    read: Session | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Login(StoreCall):
    """The session bound to `identity` under a new token (that token, None: gone)."""

    name: ClassVar[str] = "login"
    token: str
    identity: Identity
    label: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Regenerate(StoreCall):
    name: ClassVar[str] = "regenerate"
    token: str


@dataclasses.dataclass(frozen=True, slots=True)
class SetTtl(StoreCall):
    name: ClassVar[str] = "set_ttl"
    token: str
    ttl: int | None


@dataclasses.dataclass(frozen=True, slots=True)
class Touch(StoreCall):
    name: ClassVar[str] = "touch"
    token: str


@dataclasses.dataclass(frozen=True, slots=True)
class Destroy(StoreCall):
    name: ClassVar[str] = "destroy"
    token: str


@dataclasses.dataclass(frozen=True, slots=True)
class DestroyAll(StoreCall):
    name: ClassVar[str] = "destroy_all"
    identity: Identity


@dataclasses.dataclass(frozen=True, slots=True)
class DueForTouch(StoreCall):
    """store.due_for_touch(session): no I/O (for a flow that does not hold the store)."""

    name: ClassVar[str] = "due_for_touch"
    session: Session


@dataclasses.dataclass(frozen=True, slots=True)
class StoreTtl(StoreCall):
    """The store's ttl (an async store is opened first: its metadata says it)."""

    name: ClassVar[str] = "ttl"


#: an old session: its data (a plain dict) and its seconds left (None: no expiry)
Old = tuple[dict[str, Any], int | None]


class MoveInSource(Protocol):
    """Where sessions densekv does not have yet may still live, by cookie value (sync; the
    policy of moving them in is integrations/movein.py's)."""

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


@dataclasses.dataclass(frozen=True, slots=True)
class ReadOld(StoreCall):
    """`source.read(token)`: the old session (data, seconds left) or None."""

    name: ClassVar[str] = "read_old"
    on_store: ClassVar[bool] = False
    source: MoveInSource | AsyncMoveInSource
    token: str


@dataclasses.dataclass(frozen=True, slots=True)
class ForgetOld(StoreCall):
    """`source.forget(token)`: delete the old copy once densekv holds the session."""

    name: ClassVar[str] = "forget_old"
    on_store: ClassVar[bool] = False
    source: MoveInSource | AsyncMoveInSource
    token: str


def perform(store: SessionStore | AsyncSessionStore | None, call: StoreCall) -> Any:
    """`call` made on `store`: its result, or an awaitable of it (an async store's I/O, an
    async old source's). `store` may be None for a call with on_store False."""
    match call:
        case ReadOld(source, token):
            return source.read(token)
        case ForgetOld(source, token):
            return source.forget(token)
    assert store is not None, call
    match call:
        case Get(token):
            return store.get(token, undecodable="none")
        case Apply(token, changes, removed, ttl, read):
            return store.apply(token, changes, removed, ttl=ttl, read=read)
        case Create(identity, data, ttl, given, label):
            return store.create(identity, data, ttl, token=given, label=label)
        case Login(token, identity, label):
            return store.login(token, identity, label=label)
        case Regenerate(token):
            return store.regenerate(token)
        case SetTtl(token, ttl):
            return store.set_ttl(token, ttl)
        case Touch(token):
            return store.touch(token)
        case Destroy(token):
            return store.destroy(token)
        case DestroyAll(identity):
            return store.destroy_all(identity)
        case DueForTouch(session):
            return store.due_for_touch(session)
        case StoreTtl():
            from densekv.sessions.store import AsyncSessionStore

            return _ttl_of(store) if isinstance(store, AsyncSessionStore) else store.ttl
    raise TypeError(f"not a store call: {call!r}")


async def _ttl_of(store: AsyncSessionStore) -> int:
    return (await store.ready()).ttl
