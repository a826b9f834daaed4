"""SessionStore and AsyncSessionStore: the session API, as thin shells over SessionCore.

Every operation is a flow of densekv/sessions/core.py, run through SessionCore.guarded
(re-read the store's metadata now and then, retry a flow that met a repartition
tombstone); the shells only drive those flows with densekv/flows.py (sync, cluster or
asyncio executor). Anything with logic belongs in the core, so the two shells cannot
drift: they expose the same operations with the same arguments.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from types import EllipsisType
from typing import TYPE_CHECKING, Any, TypeVar

import redis

from densekv.capabilities import probe_flow
from densekv.cluster_executor import executor_for
from densekv.errors import DensekvError
from densekv.errors import moved as _moved
from densekv.flows import Flow, adrive, drive
from densekv.sessions.core import (
    AUTO_TRAIN,
    DEFAULT_TTL,
    LAYOUTS,
    OneCreate,
    ServerFacts,
    SessionCore,
    facts_from_probe,
    facts_of,
    make_layout,
)
from densekv.sessions.meta import DEFAULT_FILL
from densekv.sessions.model import Identity, Record, Session
from densekv.sessions.payload import DEFAULT_MAX_DATA_BYTES
from densekv.twins import AsyncOpensOnce, OpensOnce, share_docstrings

if TYPE_CHECKING:
    from densekv.sessions.events import Observer

__all__ = ["LAYOUTS", "AsyncSessionStore", "ServerFacts", "SessionStore",
           "facts_from_probe", "facts_of", "make_layout"]

T = TypeVar("T")
Data = dict[str, Any]


class _Options:
    """The properties both shells read off their core (SessionStore opens it for them; the
    twin, which cannot await in a property, raises RuntimeError until it is open)."""

    _args: dict[str, Any]

    def _core_or_none(self) -> SessionCore:
        raise NotImplementedError

    @property
    def ttl(self) -> int:
        return self._core_or_none().ttl

    @property
    def idle_ttl(self) -> int | None:
        return self._core_or_none().idle_ttl

    @property
    def max_data_bytes(self) -> int:
        return self._core_or_none().payloads.codec.max_bytes

    @property
    def namespace(self) -> str:
        """The namespace given (known before the store is open)."""
        namespace: str = self._args["namespace"]
        return namespace

    def now(self) -> int:
        """The store's clock (unix seconds): what expiries are compared with."""
        return self._core_or_none().now()

    def due_for_touch(self, session: Session) -> bool:
        """True when a quarter of the idle window has passed since the expiry was last
        rolled: call touch(token) only then, and most reads cost no write."""
        return self._core_or_none().due_for_touch(session)

    def read_shares(self) -> tuple[float, float]:
        """(split, out of line): moving averages (weight 0.05) of this process's recent reads
        that found their payload split / stored out of line; no server call (for metrics:
        stats() counts the stored ones exactly, at the cost of a SCAN); (0.0, 0.0) before
        the store is open (it has read nothing), without opening it."""
        core: SessionCore | None = getattr(self, "_core", None)
        if core is None:
            return 0.0, 0.0
        return core.payloads.split_rate, core.payloads.ool_rate


def _store_args(namespace: str, layout: str, ttl: int, idle_ttl: int | None, expected_sessions: int,
                index_identities: bool, partitions: int | None, fill: int | None,
                clock: Callable[[], float], max_data_bytes: int, auto_train: int | None,
                track_devices: bool, max_sessions_per_identity: int | None, on_limit: str,
                events_stream: int | None) -> dict[str, Any]:
    """SessionCore's keywords, kept by a store until it opens."""
    return {"namespace": namespace, "layout": layout, "ttl": ttl, "idle_ttl": idle_ttl,
            "expected_sessions": expected_sessions, "index_identities": index_identities,
            "partitions": partitions, "clock": clock, "fill": fill,
            "max_data_bytes": max_data_bytes, "auto_train": auto_train,
            "track_devices": track_devices, "max_sessions_per_identity": max_sessions_per_identity,
            "on_limit": on_limit, "events_stream": events_stream}


class SessionStore(OpensOnce[SessionCore], _Options):
    """Sessions in Redis/Valkey at a few dozen bytes each. Guide: docs/sessions.md.

    layout: "auto" (dense on every server measured), or json, packed, hash, zset, dense,
    fieldttl. expected_sessions sizes the partitions of a new store; `partitions` forces a
    count (a power of two); `fill` caps the mean sessions per partition (DEFAULT_FILL, 64:
    shorter listpack scans per read and write at ~74 bytes per extra partition key; None:
    as many as the listpack limit allows, the densest). A namespace's first store
    writes its layout and partition count to `{namespace}:meta`; later stores adopt them,
    and `repartition()` (or `densekv repartition`) grows the count online.
    max_data_bytes bounds the packed session data; auto_train: a store trains the namespace's
    zstd dictionary after this many payloads, and again when its sessions change shape
    (docs/sessions.md "Sessions that change shape"); None: only `train_dictionary()`.

    The constructor does no I/O: the first operation, or `open()`, probes the server
    (unless `facts` are given) and opens the namespace's metadata, once.
    """

    def __init__(
        self,
        client: redis.Redis | redis.RedisCluster,
        namespace: str = "sess",
        layout: str = "auto",
        ttl: int = DEFAULT_TTL,
        idle_ttl: int | None = None,
        expected_sessions: int = 100_000,
        index_identities: bool = True,
        *,
        partitions: int | None = None,
        fill: int | None = DEFAULT_FILL,
        facts: ServerFacts | None = None,
        clock: Callable[[], float] = time.time,
        max_data_bytes: int = DEFAULT_MAX_DATA_BYTES,
        auto_train: int | None = AUTO_TRAIN,
        durable: bool = False,
        track_devices: bool = False,
        max_sessions_per_identity: int | None = None,
        on_limit: str = "evict",
        events_stream: int | None = None,
    ) -> None:
        self.client = client
        self._ex = executor_for(client, durable=durable)
        self._args = _store_args(namespace, layout, ttl, idle_ttl, expected_sessions, index_identities,
                                 partitions, fill, clock, max_data_bytes, auto_train, track_devices,
                                 max_sessions_per_identity, on_limit, events_stream)
        self._facts = facts
        self._core: SessionCore | None = None
        self._opening = threading.Lock()
        self._observers: list[Observer] = []
        self._call_sync: Callable[..., None] | None = None  # events.call_sync, once observed

    def _open_core(self) -> SessionCore:
        core = SessionCore(self._facts or facts_from_probe(self.client), **self._args)
        self._drive(core.open())
        if self._observers:
            core.recorder.listen(True)
        return core

    def _core_or_none(self) -> SessionCore:
        return self._opened()

    def _drive(self, flow: Flow[T]) -> T:
        return drive(flow, self._ex)

    def _run(self, make: Callable[[SessionCore], Flow[T]], op: str = "") -> T:
        """Run a flow made by `make` (core -> flow) as SessionCore.guarded runs it; `op`
        names the operation for observers (events.py). The first one opens the store."""
        core = self._core
        if core is None:
            core = self._opened()
        if self._observers or core.recorder.outbox is not None:
            return self._run_observed(core, make, op)
        return drive(core.guarded(make), self._ex)

    def _run_observed(self, core: SessionCore, make: Callable[[SessionCore], Flow[T]], op: str) -> T:
        start = time.perf_counter()
        error: str | None = None
        try:
            return drive(core.guarded(make), self._ex)
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            seconds = time.perf_counter() - start
            recorder = core.recorder
            if recorder.outbox is not None:  # XADDed after the operation; a failure is logged, never the operation's
                publish = recorder.publish(core.namespace)
                if publish is not None:
                    drive(publish, self._ex)
            observers = tuple(self._observers)
            call_sync = self._call_sync  # events.call_sync, set by observe(): no import per call
            if call_sync is not None and observers:  # else only the stream listens
                if recorder.owes_events():
                    for method, args in recorder.owed(op, seconds, error):
                        call_sync(observers, method, *args)
                else:  # the common case: the operation alone (issue 34: the observed path's cost)
                    call_sync(observers, "on_operation", op, seconds, error)

    def observe(self, observer: Observer) -> None:
        """Tell `observer` of every lifecycle event (its `on_event(SessionEvent)`) and every
        operation (`on_operation(name, seconds, error)`) from now on; events.py says which
        events exist and when. A store without observers records none and costs nothing."""
        from densekv.sessions.events import call_sync  # loaded once observed

        self._call_sync = call_sync
        if observer not in self._observers:
            self._observers.append(observer)
        with self._opening:  # an open under way records events once it ends (_open_core)
            if self._core is not None:
                self._core.recorder.listen(True)

    def unobserve(self, observer: Observer) -> None:
        """Stop telling `observer` (the last one gone, the store records no events)."""
        if observer in self._observers:
            self._observers.remove(observer)
        if not self._observers and self._core is not None:
            self._core.recorder.listen(False)

    @property
    def layout(self) -> str:
        return self._opened().layout.name

    def explain(self) -> dict[str, Any]:
        return self._opened().explain()

    def create(self, identity: Identity | None = None, data: Data | None = None, ttl: int | None = None,
               *, token: str | None = None, label: str | None = None) -> str:
        """A new session; identity None is anonymous. `token=` stores it under a given
        token (a session moved in from another store keeps its cookie value), unless a
        live session holds that token: SessionExists, nothing written. `label`: its
        device's label (track_devices); with max_sessions_per_identity, an identified
        create is a login (the limit applies)."""
        return self._run(OneCreate(identity, data, ttl, token, label), "create")[0]

    def create_many(self, identities: Iterable[Identity | None], data: Data | None = None, ttl: int | None = None,
                    *, batch: int = 1000) -> list[str]:
        """Create many sessions, one pipeline round trip (two with the index) per batch."""
        out: list[str] = []
        chunk: list[Identity | None] = []
        for identity in identities:
            chunk.append(identity)
            if len(chunk) >= batch:
                out += self._create_batch(chunk, data, ttl)
                chunk = []
        if chunk:
            out += self._create_batch(chunk, data, ttl)
        return out

    def _create_batch(self, identities: list[Identity | None], data: Data | None, ttl: int | None) -> list[str]:
        made = self._opened().new_records(identities, data, ttl)  # the same records on a retry
        return self._run(lambda c: c.put_records(made), "create")

    def create_each(self, items: Iterable[tuple[Identity | None, Data | None]], ttl: int | None = None,
                    *, batch: int = 1000) -> list[str]:
        """One new session per (identity, data) pair, tokens in order; a round trip per batch
        as create_many (which gives every session the same data). Streams `items`."""
        core = self._opened()
        out: list[str] = []
        made: list[tuple[Record, str, bytes | None]] = []
        for identity, data in items:
            made.append(core.new_record(identity, data, ttl))
            if len(made) >= batch:
                out += self._run(lambda c: c.put_records(made), "create")  # noqa: B023 - run before made is rebound
                made = []
        if made:
            out += self._run(lambda c: c.put_records(made), "create")
        return out

    def repartition(self, partitions: int, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Grow a partitioned store to `partitions` online (see SessionCore.repartition)."""
        return self._run(lambda c: c.repartition(partitions, progress), "repartition")

    def change_lifecycle(self, *, track_devices: bool | EllipsisType = ...,
                         max_sessions_per_identity: int | None | EllipsisType = ...,
                         on_limit: str | EllipsisType = ..., events_stream: int | None | EllipsisType = ...) -> None:
        """Record new lifecycle options for the namespace (those given; ... keeps one) and use
        them here; every process of the namespace adopts them at its next metadata read (within
        a minute), and a store opened with other ones raises LifecycleMismatch. In a rolling
        deploy, call it first, then deploy code that opens the store with the new options.
        Index entries written before keep their format until their session's next login."""
        self._run(lambda c: c.change_lifecycle(
            {"track_devices": track_devices, "max_sessions_per_identity": max_sessions_per_identity,
             "on_limit": on_limit, "events_stream": events_stream}), "change_lifecycle")

    def train_dictionary(self, samples: Iterable[Data] | None = None) -> int:
        """Train, store and adopt the namespace's zstd dictionary (from `samples`, or from
        sessions already stored); returns its id."""
        return self._run(lambda c: c.train_dictionary(samples), "train_dictionary")

    def get(self, token: str, *, undecodable: str = "raise") -> Session | None:
        """The live session of `token`, or None. A stored session that does not decode
        raises DecodeError; undecodable="none" reads it as None with one logged warning
        (namespace and digest, never the token), as the web backends do."""
        return self._run(lambda c: c.get(token, undecodable), "get")

    def get_many(self, tokens: Iterable[str]) -> list[Session | None]:
        """get() of many tokens in one pipeline round trip per step (not one per token)."""
        todo = list(tokens)
        return self._run(lambda c: c.get_many(todo), "get_many")

    def touch(self, token: str) -> bool:
        return self._run(lambda c: c.touch(token), "touch")

    def set_ttl(self, token: str, ttl: int | None) -> bool:
        """A new lifetime for a live session: it ends `ttl` seconds from now (None: the
        store's ttl), longer or shorter than before (idle_ttl still applies). False if
        the session is gone; InvalidArgument for a ttl a record cannot hold."""
        return self._run(lambda c: c.set_ttl(token, ttl), "set_ttl")

    def update(self, token: str, data: Data | None) -> bool:
        return self._run(lambda c: c.update(token, data), "update")

    def apply(self, token: str, changes: Data, removed: Iterable[str] = (), *,
              ttl: int | None | EllipsisType = ..., read: Session | None = None) -> Data | None:
        """Merge top-level keys into the stored data (compare-and-set): the merged data,
        or None if the session is gone (never resurrected). `ttl=` gives the session a new
        lifetime in the same write, as set_ttl does (None: the store's ttl). `read=` the
        Session this request got from get(): written against it without reading it again
        (one round trip), merged afresh if it changed meanwhile."""
        return self._run(lambda c: c.apply(token, changes, removed, ttl, read), "apply")

    def destroy(self, token: str) -> bool:
        return self._run(lambda c: c.destroy(token), "destroy")

    def destroy_id(self, session_id: str, *, identity: Identity | None = None) -> bool:
        """End a session listed by sessions_of() (by its id, not its token). `identity=`:
        only if the session is that identity's (a "your devices" revoke: a user can end
        only their own sessions, whatever id a request names)."""
        return self._run(lambda c: c.destroy_id(session_id, identity), "destroy_id")

    def regenerate(self, token: str) -> str | None:
        return self._run(lambda c: c.regenerate(token), "regenerate")

    def login(self, token: str, identity: Identity, *, label: str | None = None) -> str | None:
        """A new token for the session with `identity` set, the old token dead: one
        atomic step. None if the session is gone. `label`: the device's label, at most 32
        bytes of UTF-8, listed by sessions_of (a store made with track_devices=True).
        With max_sessions_per_identity, the least recently seen sessions past the limit
        end (on_limit="evict") or the login raises SessionLimitReached ("refuse")."""
        return self._run(lambda c: c.login(token, identity, label), "login")

    def sessions_of(self, identity: Identity) -> list[Session]:
        return self._run(lambda c: c.sessions_of(identity), "sessions_of")

    def destroy_all(self, identity: Identity, *, keep: str | None = None) -> int:
        """End every session of `identity` ("log out everywhere"), but the one of token
        `keep` if given ("log out my other devices"); the number ended."""
        return self._run(lambda c: c.destroy_all(identity, keep), "destroy_all")

    def sweep(self, max_items: int | None = None) -> int:
        return self._run(lambda c: c.sweep(max_items), "sweep")

    def count(self) -> int:
        return self._run(lambda c: c.count(), "count")

    def stats(self) -> dict[str, Any]:
        """Layout, sessions stored, the fullest partition, how many payloads did not fit
        inline (split, out of line: a SCAN of the database), refusals, and warnings."""
        core = self._opened()
        out: dict[str, Any] = {**core.explain(), "refused_too_large": core.payloads.refused_too_large}
        if core.layout.partitions:
            counts = self._run(lambda c: c.partition_counts(), "partition_counts")
            split, outside = self._run(lambda c: c.outside_counts(counts), "outside_counts")
            out.update(core.sweeper.summary(counts, split, outside))
        else:
            out.update(sessions=self.count(), warnings=[])
        return out


class AsyncSessionStore(AsyncOpensOnce[SessionCore], _Options):
    """The asyncio twin of SessionStore: same names, awaited. The constructor does no I/O:
    the first operation, or `await store.open()`, probes the server (unless `facts` are
    given) and opens the namespace's metadata, once, however many tasks race to it."""

    _not_open = "the store is not open yet: await store.open() (or any operation) first"

    def __init__(
        self,
        client: Any,
        namespace: str = "sess",
        layout: str = "auto",
        ttl: int = DEFAULT_TTL,
        idle_ttl: int | None = None,
        expected_sessions: int = 100_000,
        index_identities: bool = True,
        *,
        partitions: int | None = None,
        fill: int | None = DEFAULT_FILL,
        facts: ServerFacts | None = None,
        clock: Callable[[], float] = time.time,
        max_data_bytes: int = DEFAULT_MAX_DATA_BYTES,
        auto_train: int | None = AUTO_TRAIN,
        durable: bool = False,
        track_devices: bool = False,
        max_sessions_per_identity: int | None = None,
        on_limit: str = "evict",
        events_stream: int | None = None,
    ) -> None:
        self.client = client
        self._ex = executor_for(client, durable=durable)
        self._args = _store_args(namespace, layout, ttl, idle_ttl, expected_sessions, index_identities,
                                 partitions, fill, clock, max_data_bytes, auto_train, track_devices,
                                 max_sessions_per_identity, on_limit, events_stream)
        self._facts = facts
        self._core: SessionCore | None = None
        self._observers: list[Observer] = []
        self._call_async: Callable[..., Awaitable[None]] | None = None  # events.call_async, once observed

    async def _open_core(self) -> SessionCore:
        facts = self._facts or facts_of(await adrive(probe_flow(), self._ex))
        core = SessionCore(facts, **self._args)
        await self._drive(core.open())
        if self._observers:
            core.recorder.listen(True)
        return core

    def _core_or_none(self) -> SessionCore:
        return self._core_if_open()

    async def ready(self) -> SessionCore:
        """`await store.open()` under its older name, returning the store's core."""
        return await self._ready()

    async def _drive(self, flow: Flow[T]) -> T:
        return await adrive(flow, self._ex)

    async def _run(self, make: Callable[[SessionCore], Flow[T]], op: str = "") -> T:
        """As SessionStore._run (_ready() awaited only until the core exists)."""
        core = self._core
        if self._observers or (core.recorder.outbox if core is not None else self._args["events_stream"]) is not None:
            return await self._run_observed(make, op)
        core = core or await self._ready()
        return await adrive(core.guarded(make), self._ex)

    async def _run_observed(self, make: Callable[[SessionCore], Flow[T]], op: str) -> T:
        call_async = self._call_async  # events.call_async, set by observe(): no import per call
        start = time.perf_counter()
        error: str | None = None
        core: SessionCore | None = None
        try:
            core = await self._ready()
            return await adrive(core.guarded(make), self._ex)
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            seconds = time.perf_counter() - start
            recorder = core.recorder if core is not None else None
            if recorder is not None and recorder.outbox is not None:  # as SessionStore._run_observed
                publish = recorder.publish(core.namespace)  # type: ignore[union-attr]
                if publish is not None:
                    await adrive(publish, self._ex)
            observers = tuple(self._observers)
            if call_async is not None and observers:  # else only the stream listens
                if recorder is not None and recorder.owes_events():
                    for method, args in recorder.owed(op, seconds, error):
                        await call_async(observers, method, *args)
                else:
                    await call_async(observers, "on_operation", op, seconds, error)

    def observe(self, observer: Observer) -> None:
        from densekv.sessions.events import call_async

        self._call_async = call_async
        if observer not in self._observers:
            self._observers.append(observer)
        if self._core is not None:
            self._core.recorder.listen(True)

    def unobserve(self, observer: Observer) -> None:
        if observer in self._observers:
            self._observers.remove(observer)
        if not self._observers and self._core is not None:
            self._core.recorder.listen(False)

    @property
    def layout(self) -> str:
        return self._core_or_none().layout.name

    async def explain(self) -> dict[str, Any]:
        return (await self._ready()).explain()

    async def create(self, identity: Identity | None = None, data: Data | None = None, ttl: int | None = None,
                     *, token: str | None = None, label: str | None = None) -> str:
        return (await self._run(OneCreate(identity, data, ttl, token, label), "create"))[0]

    async def create_many(self, identities: Iterable[Identity | None], data: Data | None = None,
                          ttl: int | None = None, *, batch: int = 1000) -> list[str]:
        core = await self._ready()
        out: list[str] = []
        pending = list(identities)
        for i in range(0, len(pending), batch):
            made = core.new_records(pending[i : i + batch], data, ttl)  # the same records on a retry
            out += await self._run(lambda c, made=made: c.put_records(made), "create")  # type: ignore[misc]
        return out

    async def create_each(self, items: Iterable[tuple[Identity | None, Data | None]], ttl: int | None = None,
                          *, batch: int = 1000) -> list[str]:
        core = await self._ready()
        out: list[str] = []
        made: list[tuple[Record, str, bytes | None]] = []
        for identity, data in items:
            made.append(core.new_record(identity, data, ttl))
            if len(made) >= batch:
                out += await self._run(lambda c: c.put_records(made), "create")  # noqa: B023 - run before made is rebound
                made = []
        if made:
            out += await self._run(lambda c: c.put_records(made), "create")
        return out

    async def repartition(self, partitions: int, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        return await self._run(lambda c: c.repartition(partitions, progress), "repartition")

    async def change_lifecycle(self, *, track_devices: bool | EllipsisType = ...,
                               max_sessions_per_identity: int | None | EllipsisType = ...,
                               on_limit: str | EllipsisType = ..., events_stream: int | None | EllipsisType = ...) -> None:
        await self._run(lambda c: c.change_lifecycle(
            {"track_devices": track_devices, "max_sessions_per_identity": max_sessions_per_identity,
             "on_limit": on_limit, "events_stream": events_stream}), "change_lifecycle")

    async def train_dictionary(self, samples: Iterable[Data] | None = None) -> int:
        return await self._run(lambda c: c.train_dictionary(samples), "train_dictionary")

    async def count(self) -> int:
        return await self._run(lambda c: c.count(), "count")

    async def stats(self) -> dict[str, Any]:
        core = await self._ready()
        out: dict[str, Any] = {**core.explain(), "refused_too_large": core.payloads.refused_too_large}
        if core.layout.partitions:
            counts = await self._run(lambda c: c.partition_counts(), "partition_counts")
            split, outside = await self._run(lambda c: c.outside_counts(counts), "outside_counts")
            out.update(core.sweeper.summary(counts, split, outside))
        else:
            out.update(sessions=await self.count(), warnings=[])
        return out

    async def get(self, token: str, *, undecodable: str = "raise") -> Session | None:
        return await self._run(lambda c: c.get(token, undecodable), "get")

    async def get_many(self, tokens: Iterable[str]) -> list[Session | None]:
        todo = list(tokens)
        return await self._run(lambda c: c.get_many(todo), "get_many")

    async def touch(self, token: str) -> bool:
        return await self._run(lambda c: c.touch(token), "touch")

    async def set_ttl(self, token: str, ttl: int | None) -> bool:
        return await self._run(lambda c: c.set_ttl(token, ttl), "set_ttl")

    async def update(self, token: str, data: Data | None) -> bool:
        return await self._run(lambda c: c.update(token, data), "update")

    async def apply(self, token: str, changes: Data, removed: Iterable[str] = (), *,
                    ttl: int | None | EllipsisType = ..., read: Session | None = None) -> Data | None:
        return await self._run(lambda c: c.apply(token, changes, removed, ttl, read), "apply")

    async def destroy(self, token: str) -> bool:
        return await self._run(lambda c: c.destroy(token), "destroy")

    async def destroy_id(self, session_id: str, *, identity: Identity | None = None) -> bool:
        return await self._run(lambda c: c.destroy_id(session_id, identity), "destroy_id")

    async def regenerate(self, token: str) -> str | None:
        return await self._run(lambda c: c.regenerate(token), "regenerate")

    async def login(self, token: str, identity: Identity, *, label: str | None = None) -> str | None:
        return await self._run(lambda c: c.login(token, identity, label), "login")

    async def sessions_of(self, identity: Identity) -> list[Session]:
        return await self._run(lambda c: c.sessions_of(identity), "sessions_of")

    async def destroy_all(self, identity: Identity, *, keep: str | None = None) -> int:
        return await self._run(lambda c: c.destroy_all(identity, keep), "destroy_all")

    async def sweep(self, max_items: int | None = None) -> int:
        return await self._run(lambda c: c.sweep(max_items), "sweep")


share_docstrings(SessionStore, AsyncSessionStore)


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("LayoutUnavailable",)


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
