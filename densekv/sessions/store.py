"""SessionStore and AsyncSessionStore: the session API, as thin shells over SessionCore.

Every operation is a flow of densekv/sessions/core.py, run through SessionCore.guarded
(re-read the store's metadata now and then, retry a flow that met a repartition
tombstone); the shells only drive those flows with densekv/flows.py (sync, cluster or
asyncio executor). Anything with logic belongs in the core, so the two shells cannot
drift: they expose the same operations with the same arguments.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from types import EllipsisType
from typing import Any, TypeVar

import redis

from densekv.cluster_executor import executor_for
from densekv.errors import DensekvError
from densekv.errors import moved as _moved
from densekv.flows import Flow, adrive, drive
from densekv.server.probe import probe_flow
from densekv.sessions.core import (
    AUTO_TRAIN,
    DEFAULT_TTL,
    LAYOUTS,
    ServerFacts,
    SessionCore,
    facts_from_probe,
    facts_of,
    make_layout,
)
from densekv.sessions.model import Identity, Record, Session
from densekv.sessions.payload import DEFAULT_MAX_DATA_BYTES
from densekv.twins import share_docstrings

__all__ = ["LAYOUTS", "AsyncSessionStore", "ServerFacts", "SessionStore",
           "facts_from_probe", "facts_of", "make_layout"]

T = TypeVar("T")
Data = dict[str, Any]


class _Options:
    """The properties both shells read off their core."""

    def _core_or_none(self) -> SessionCore:
        core: SessionCore | None = getattr(self, "_core", None)
        if core is None:
            raise RuntimeError("await store.ready() (or any operation) first")
        return core

    @property
    def ttl(self) -> int:
        return self._core_or_none().ttl

    @property
    def idle_ttl(self) -> int | None:
        return self._core_or_none().idle_ttl

    @property
    def max_data_bytes(self) -> int:
        return self._core_or_none().codec.max_bytes

    @property
    def namespace(self) -> str:
        return self._core_or_none().namespace

    def now(self) -> int:
        """The store's clock (unix seconds): what expiries are compared with."""
        return self._core_or_none().now()

    def due_for_touch(self, session: Session) -> bool:
        """True when a quarter of the idle window has passed since the expiry was last
        rolled: call touch(token) only then, and most reads cost no write."""
        return self._core_or_none().due_for_touch(session)


class SessionStore(_Options):
    """Sessions in Redis/Valkey at a few dozen bytes each. Guide: docs/sessions.md.

    layout: "auto" (dense on every server measured), or json, packed, hash, zset, dense,
    fieldttl. expected_sessions sizes the partitions of a new store; `partitions` forces a
    count (a power of two); `fill` caps the mean sessions per partition (smaller listpacks
    make HGET faster at ~70 bytes per extra partition key). A namespace's first store
    writes its layout and partition count to `{namespace}:meta`; later stores adopt them,
    and `repartition()` (or `densekv repartition`) grows the count online.
    max_data_bytes bounds the packed session data; auto_train: after this many payloads
    written, a store of a namespace without a zstd dictionary trains one from them (None:
    only `train_dictionary()`).
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
        fill: int | None = None,
        facts: ServerFacts | None = None,
        clock: Callable[[], float] = time.time,
        max_data_bytes: int = DEFAULT_MAX_DATA_BYTES,
        auto_train: int | None = AUTO_TRAIN,
        durable: bool = False,
    ) -> None:
        self.client = client
        self._ex = executor_for(client, durable=durable)
        self._core = SessionCore(
            facts or facts_from_probe(client),
            namespace=namespace, layout=layout, ttl=ttl, idle_ttl=idle_ttl,
            expected_sessions=expected_sessions, index_identities=index_identities,
            partitions=partitions, clock=clock, fill=fill, max_data_bytes=max_data_bytes,
            auto_train=auto_train,
        )
        self._drive(self._core.open())

    def _drive(self, flow: Flow[T]) -> T:
        return drive(flow, self._ex)

    def _run(self, make: Callable[[SessionCore], Flow[T]]) -> T:
        """Run a flow made by `make` (core -> flow) as SessionCore.guarded runs it."""
        return drive(self._core.guarded(make), self._ex)

    @property
    def layout(self) -> str:
        return self._core.layout.name

    def explain(self) -> dict[str, Any]:
        return self._core.explain()

    def create(self, identity: Identity | None = None, data: Data | None = None, ttl: int | None = None,
               *, token: str | None = None) -> str:
        """A new session; identity None is anonymous. `token=` stores it under a given
        token (a session moved in from another store keeps its cookie value), unless a
        live session holds that token: SessionExists, nothing written."""
        made = self._core.new_records([identity], data, ttl) if token is None else \
            [self._core.new_record(identity, data, ttl, token)]
        return self._run(lambda c: c.put_records(made, given=token is not None))[0]

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
        made = self._core.new_records(identities, data, ttl)  # the same records on a retry
        return self._run(lambda c: c.put_records(made))

    def create_each(self, items: Iterable[tuple[Identity | None, Data | None]], ttl: int | None = None,
                    *, batch: int = 1000) -> list[str]:
        """One new session per (identity, data) pair, tokens in order; a round trip per batch
        as create_many (which gives every session the same data). Streams `items`."""
        out: list[str] = []
        made: list[tuple[Record, str, bytes | None]] = []
        for identity, data in items:
            made.append(self._core.new_record(identity, data, ttl))
            if len(made) >= batch:
                out += self._run(lambda c: c.put_records(made))  # noqa: B023 - run before made is rebound
                made = []
        if made:
            out += self._run(lambda c: c.put_records(made))
        return out

    def repartition(self, partitions: int, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Grow a partitioned store to `partitions` online (see SessionCore.repartition)."""
        return self._run(lambda c: c.repartition(partitions, progress))

    def train_dictionary(self, samples: Iterable[Data] | None = None) -> int:
        """Train, store and adopt the namespace's zstd dictionary (from `samples`, or from
        sessions already stored); returns its id."""
        return self._run(lambda c: c.train_dictionary(samples))

    def get(self, token: str, *, undecodable: str = "raise") -> Session | None:
        """The live session of `token`, or None. A stored session that does not decode
        raises DecodeError; undecodable="none" reads it as None with one logged warning
        (namespace and digest, never the token), as the web backends do."""
        return self._run(lambda c: c.get(token, undecodable))

    def get_many(self, tokens: Iterable[str]) -> list[Session | None]:
        """get() of many tokens in one pipeline round trip per step (not one per token)."""
        todo = list(tokens)
        return self._run(lambda c: c.get_many(todo))

    def touch(self, token: str) -> bool:
        return self._run(lambda c: c.touch(token))

    def set_ttl(self, token: str, ttl: int | None) -> bool:
        """A new lifetime for a live session: it ends `ttl` seconds from now (None: the
        store's ttl), longer or shorter than before (idle_ttl still applies). False if
        the session is gone; InvalidArgument for a ttl a record cannot hold."""
        return self._run(lambda c: c.set_ttl(token, ttl))

    def update(self, token: str, data: Data | None) -> bool:
        return self._run(lambda c: c.update(token, data))

    def apply(self, token: str, changes: Data, removed: Iterable[str] = (), *,
              ttl: int | None | EllipsisType = ..., read: Session | None = None) -> Data | None:
        """Merge top-level keys into the stored data (compare-and-set): the merged data,
        or None if the session is gone (never resurrected). `ttl=` gives the session a new
        lifetime in the same write, as set_ttl does (None: the store's ttl). `read=` the
        Session this request got from get(): written against it without reading it again
        (one round trip), merged afresh if it changed meanwhile."""
        return self._run(lambda c: c.apply(token, changes, removed, ttl, read))

    def destroy(self, token: str) -> bool:
        return self._run(lambda c: c.destroy(token))

    def destroy_id(self, session_id: str) -> bool:
        """End a session listed by sessions_of() (by its id, not its token)."""
        return self._run(lambda c: c.destroy_id(session_id))

    def regenerate(self, token: str) -> str | None:
        return self._run(lambda c: c.regenerate(token))

    def login(self, token: str, identity: Identity) -> str | None:
        """A new token for the session with `identity` set, the old token dead: one
        atomic step. None if the session is gone."""
        return self._run(lambda c: c.login(token, identity))

    def sessions_of(self, identity: Identity) -> list[Session]:
        return self._run(lambda c: c.sessions_of(identity))

    def destroy_all(self, identity: Identity) -> int:
        return self._run(lambda c: c.destroy_all(identity))

    def sweep(self, max_items: int | None = None) -> int:
        return self._run(lambda c: c.sweep(max_items))

    def count(self) -> int:
        return self._run(lambda c: c.count())

    def stats(self) -> dict[str, Any]:
        """Layout, sessions stored, the fullest partition, how many payloads did not fit
        inline (split, out of line: a SCAN of the database), refusals, and warnings."""
        out: dict[str, Any] = {**self.explain(), "refused_too_large": self._core.refused_too_large}
        if self._core.layout.partitions:
            counts = self._run(lambda c: c.partition_counts())
            split, outside = self._run(lambda c: c.outside_counts(counts))
            sizes = [e - c for e, c in counts]
            out.update(sessions=sum(sizes), fullest_partition=max(sizes, default=0),
                       fullest_partition_entries=max((e for e, _ in counts), default=0),
                       split_sessions=split, out_of_line_sessions=outside,
                       warnings=self._core.fill_warnings([e for e, _ in counts]))
        else:
            out.update(sessions=self.count(), warnings=[])
        return out


class AsyncSessionStore(_Options):
    """The asyncio twin of SessionStore: same names, awaited. Unless `facts` is given, the
    first operation (or `await store.ready()`) probes the server (server/probe.py)."""

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
        fill: int | None = None,
        facts: ServerFacts | None = None,
        clock: Callable[[], float] = time.time,
        max_data_bytes: int = DEFAULT_MAX_DATA_BYTES,
        auto_train: int | None = AUTO_TRAIN,
        durable: bool = False,
    ) -> None:
        self.client = client
        self._ex = executor_for(client, durable=durable)
        self._args = {"namespace": namespace, "layout": layout, "ttl": ttl, "idle_ttl": idle_ttl,
                      "expected_sessions": expected_sessions, "index_identities": index_identities,
                      "partitions": partitions, "clock": clock, "fill": fill,
                      "max_data_bytes": max_data_bytes, "auto_train": auto_train}
        self._facts = facts
        self._core: SessionCore | None = None

    async def ready(self) -> SessionCore:
        if self._core is None:
            facts = self._facts or facts_of(await adrive(probe_flow(), self._ex))
            core = SessionCore(facts, **self._args)  # type: ignore[arg-type]
            await self._drive(core.open())
            self._core = core
        return self._core

    async def _drive(self, flow: Flow[T]) -> T:
        return await adrive(flow, self._ex)

    async def _run(self, make: Callable[[SessionCore], Flow[T]]) -> T:
        """As SessionStore._run (ready() awaited only until the core exists)."""
        core = self._core or await self.ready()
        return await adrive(core.guarded(make), self._ex)

    @property
    def layout(self) -> str:
        return self._core_or_none().layout.name

    async def explain(self) -> dict[str, Any]:
        return (await self.ready()).explain()

    async def create(self, identity: Identity | None = None, data: Data | None = None, ttl: int | None = None,
                     *, token: str | None = None) -> str:
        core = await self.ready()
        made = core.new_records([identity], data, ttl) if token is None else \
            [core.new_record(identity, data, ttl, token)]
        return (await self._run(lambda c: c.put_records(made, given=token is not None)))[0]

    async def create_many(self, identities: Iterable[Identity | None], data: Data | None = None,
                          ttl: int | None = None, *, batch: int = 1000) -> list[str]:
        core = await self.ready()
        out: list[str] = []
        pending = list(identities)
        for i in range(0, len(pending), batch):
            made = core.new_records(pending[i : i + batch], data, ttl)  # the same records on a retry
            out += await self._run(lambda c, made=made: c.put_records(made))  # type: ignore[misc]
        return out

    async def create_each(self, items: Iterable[tuple[Identity | None, Data | None]], ttl: int | None = None,
                          *, batch: int = 1000) -> list[str]:
        core = await self.ready()
        out: list[str] = []
        made: list[tuple[Record, str, bytes | None]] = []
        for identity, data in items:
            made.append(core.new_record(identity, data, ttl))
            if len(made) >= batch:
                out += await self._run(lambda c: c.put_records(made))  # noqa: B023 - run before made is rebound
                made = []
        if made:
            out += await self._run(lambda c: c.put_records(made))
        return out

    async def repartition(self, partitions: int, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        return await self._run(lambda c: c.repartition(partitions, progress))

    async def train_dictionary(self, samples: Iterable[Data] | None = None) -> int:
        return await self._run(lambda c: c.train_dictionary(samples))

    async def count(self) -> int:
        return await self._run(lambda c: c.count())

    async def stats(self) -> dict[str, Any]:
        core = await self.ready()
        out: dict[str, Any] = {**core.explain(), "refused_too_large": core.refused_too_large}
        if core.layout.partitions:
            counts = await self._run(lambda c: c.partition_counts())
            split, outside = await self._run(lambda c: c.outside_counts(counts))
            sizes = [e - c for e, c in counts]
            out.update(sessions=sum(sizes), fullest_partition=max(sizes, default=0),
                       fullest_partition_entries=max((e for e, _ in counts), default=0),
                       split_sessions=split, out_of_line_sessions=outside,
                       warnings=core.fill_warnings([e for e, _ in counts]))
        else:
            out.update(sessions=await self.count(), warnings=[])
        return out

    async def get(self, token: str, *, undecodable: str = "raise") -> Session | None:
        return await self._run(lambda c: c.get(token, undecodable))

    async def get_many(self, tokens: Iterable[str]) -> list[Session | None]:
        todo = list(tokens)
        return await self._run(lambda c: c.get_many(todo))

    async def touch(self, token: str) -> bool:
        return await self._run(lambda c: c.touch(token))

    async def set_ttl(self, token: str, ttl: int | None) -> bool:
        return await self._run(lambda c: c.set_ttl(token, ttl))

    async def update(self, token: str, data: Data | None) -> bool:
        return await self._run(lambda c: c.update(token, data))

    async def apply(self, token: str, changes: Data, removed: Iterable[str] = (), *,
                    ttl: int | None | EllipsisType = ..., read: Session | None = None) -> Data | None:
        return await self._run(lambda c: c.apply(token, changes, removed, ttl, read))

    async def destroy(self, token: str) -> bool:
        return await self._run(lambda c: c.destroy(token))

    async def destroy_id(self, session_id: str) -> bool:
        return await self._run(lambda c: c.destroy_id(session_id))

    async def regenerate(self, token: str) -> str | None:
        return await self._run(lambda c: c.regenerate(token))

    async def login(self, token: str, identity: Identity) -> str | None:
        return await self._run(lambda c: c.login(token, identity))

    async def sessions_of(self, identity: Identity) -> list[Session]:
        return await self._run(lambda c: c.sessions_of(identity))

    async def destroy_all(self, identity: Identity) -> int:
        return await self._run(lambda c: c.destroy_all(identity))

    async def sweep(self, max_items: int | None = None) -> int:
        return await self._run(lambda c: c.sweep(max_items))


share_docstrings(SessionStore, AsyncSessionStore)


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("LayoutUnavailable",)


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
