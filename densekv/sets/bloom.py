"""BloomFilter and AsyncBloomFilter: "probably in the set" at the information limit, module-free.

    bf = BloomFilter(client, "seen", capacity=1_000_000, error_rate=0.01)
    bf.add(b"id")                 # True if it was (probably) new
    bf.add_many(ids)              # list[bool], one round trip per `batch` items
    b"id" in bf; bf.contains_many(ids)
    bf.stats()                    # m, k, shards, stages, inserted, bytes, fp rate and bound

Module-free: plain strings used as bitmaps, one Lua script call per shard per ~1,000
bit operations (densekv/lua/bloom_add.lua, bloom_has.lua; a contains_many call reads a
small stage from one copy of it instead, where that is cheaper), all calls of a batch in
one round trip. The sizes, the allocator rounding, the hash and the growth rule are in
bloom_math.py; the metadata format in bloom_spec.py; hashing and cutting a batch into
calls in bloom_batch.py; keys, plans and flows in bloom_core.py. With
`native=True` the same API runs on RedisBloom's BF.RESERVE/BF.MADD/BF.MEXISTS where the
server has the module, and raises BloomModuleMissing where it does not.

Opening a name that holds a filter opens that filter: its parameters must match those
given (BloomMismatch otherwise), or use BloomFilter.open(client, name) to take them from
the server. A name whose keys hold something else raises WrongType and touches nothing.
The asyncio twin has the same methods, awaited (`contains` stands for `in`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import redis

from densekv.capabilities import Capabilities, probe_flow
from densekv.cluster_executor import executor_for
from densekv.errors import BloomParameterError as _BloomParameterError
from densekv.errors import DensekvError
from densekv.errors import moved as _moved
from densekv.flows import Flow, adrive, drive
from densekv.sets.bloom_core import BloomCore
from densekv.sets.bloom_math import BloomSpec, items_bytes
from densekv.sets.bloom_spec import Request, facts_of
from densekv.twins import AsyncOpensOnce, OpensOnce, share_docstrings

__all__ = [
    "AsyncBloomFilter",
    "BloomFilter",
]

T = TypeVar("T")
C = TypeVar("C")  # the client: redis-py's sync or asyncio one
DEFAULT_BATCH = 10_000  # items per round trip in add_many / contains_many


def _as_bytes(items: Iterable[object]) -> list[bytes]:
    """Every item as the bytes it is hashed as, before the first batch goes out: bad input
    (BadBloomItem) writes nothing."""
    return items_bytes(items if isinstance(items, list) else list(items))


def _check_batch(batch: int) -> int:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise _BloomParameterError(f"batch is an int >= 1, got {batch!r}")
    return batch


class _OpenStoredOrThis:
    """`open` of BloomFilter and its twin. On the class, `BloomFilter.open(client, name)`:
    the filter stored under `name`, with its stored parameters, open (BloomNotFound if
    none). On a filter, `bf.open()`: open this one now (OpensOnce.open). Either way the
    server is asked at once and an open filter comes back."""

    def __init__(self, stored: Any, this: Callable[..., Any]) -> None:
        self.stored, self.this = stored, this
        self.__doc__ = _OpenStoredOrThis.__doc__

    def __get__(self, obj: object, cls: type | None = None) -> Any:
        if obj is None:
            return self.stored.__get__(cls, cls)
        return self.this.__get__(obj, cls)


class _BloomShell(Generic[C]):
    """What BloomFilter and its asyncio twin share: the one signature (neither does I/O in
    it: both open the filter on first use or open()) and what they say of the filter."""

    def __init__(
        self,
        client: C,
        name: str,
        capacity: int | None,
        error_rate: float | None,
        native: bool | None = False,
        *,
        shards: int | None = None,
        growth: int | None = None,
        tightening: float | None = None,
        batch: int = DEFAULT_BATCH,
        caps: Capabilities | None = None,
        _create: bool = True,
        durable: bool = False,
    ) -> None:
        """`client`: a redis-py client (redis.Redis or redis.RedisCluster) for the sync
        class, an asyncio one (redis.asyncio) for the twin."""
        self.client = client
        self.batch = _check_batch(batch)
        #: the filter's keys, plans and flows; `_core` is the same object once it is open
        self._filter = BloomCore(name, Request(capacity, error_rate, native, shards, growth, tightening))
        self._core: BloomCore | None = None
        self._ex = executor_for(client, durable=durable)
        self._facts = facts_of(caps) if caps is not None else None
        self._create = _create
        self._start()

    def _start(self) -> None:
        """Note that the filter is not open yet (the first operation, or open(), opens it)."""

    # -- what it is -------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._filter.name


class BloomFilter(OpensOnce[BloomCore], _BloomShell[redis.Redis | redis.RedisCluster]):
    """A (scalable) Bloom filter in Redis/Valkey strings. See the module docstring. The
    first operation (or `bf.open()`) probes the server (unless `caps` are given) and
    creates or reads the filter's metadata."""

    def _start(self) -> None:
        self._opening = threading.Lock()

    def _open_core(self) -> BloomCore:
        facts = self._facts or facts_of(drive(probe_flow(), self._ex))
        self._run(self._filter.open(facts, create=self._create))
        return self._filter

    @classmethod
    def _open_stored(cls, client: redis.Redis | redis.RedisCluster, name: str, *,
                     batch: int = DEFAULT_BATCH) -> BloomFilter:
        bf = cls(client, name, None, None, None, batch=batch, _create=False)
        bf._opened()
        return bf

    open = _OpenStoredOrThis(_open_stored, OpensOnce.open)

    @property
    def spec(self) -> BloomSpec:
        return self._opened().opened

    @property
    def native(self) -> bool:
        return self._opened().native

    def _run(self, flow: Flow[T]) -> T:
        return drive(flow, self._ex)

    # -- operations -----------------------------------------------------------------------
    def add(self, item: object) -> bool:
        """Add one item; True if it was probably new (some bit was 0). One round trip."""
        return self._run(self._opened().add_many([item]))[0]

    def add_many(self, items: Iterable[object]) -> list[bool]:
        """add() for many items, in order: one round trip per `batch` items."""
        return self._batched(items, self._opened().add_many)

    def contains(self, item: object) -> bool:
        return self._run(self._opened().contains_many([item]))[0]

    def __contains__(self, item: object) -> bool:
        return self.contains(item)

    def contains_many(self, items: Iterable[object]) -> list[bool]:
        return self._batched(items, self._opened().contains_many)

    def _batched(self, items: Iterable[object], flow: Callable[[list[bytes]], Flow[list[bool]]]) -> list[bool]:
        todo = _as_bytes(items)
        if len(todo) <= self.batch:
            return self._run(flow(todo))
        out: list[bool] = []
        for lo in range(0, len(todo), self.batch):
            out += self._run(flow(todo[lo : lo + self.batch]))
        return out

    def count(self) -> int:
        """Items added (adds that returned True), kept on the server atomically with them."""
        return self._run(self._opened().count())

    def __len__(self) -> int:
        return self.count()

    def stats(self) -> dict[str, Any]:
        """m, k, shards, stages, inserted count, bytes, theoretical fp rate and its bound."""
        return self._run(self._opened().stats())

    info = stats

    def delete(self) -> int:
        """Remove every key of the filter; returns the number of keys deleted."""
        return self._run(self._opened().delete())


class AsyncBloomFilter(AsyncOpensOnce[BloomCore], _BloomShell[Any]):
    """The asyncio twin of BloomFilter: same names, awaited; opened on first use or by
    `await bf.open()`. `await bf.contains(x)` stands for `x in bf`."""

    _not_open = "the filter is not open yet"  # as BloomCore.opened says

    async def _open_core(self) -> BloomCore:
        facts = self._facts or facts_of(await adrive(probe_flow(), self._ex))
        await self._drive(self._filter.open(facts, create=self._create))
        return self._filter

    @classmethod
    async def _open_stored(cls, client: Any, name: str, *, batch: int = DEFAULT_BATCH) -> AsyncBloomFilter:
        bf = cls(client, name, None, None, None, batch=batch, _create=False)
        await bf._ready()
        return bf

    open = _OpenStoredOrThis(_open_stored, AsyncOpensOnce.open)

    async def ready(self) -> AsyncBloomFilter:
        """`await bf.open()` under its older name."""
        await self._ready()
        return self

    @property
    def spec(self) -> BloomSpec:
        return self._filter.opened

    @property
    def native(self) -> bool:
        return self._filter.native

    async def _drive(self, flow: Flow[T]) -> T:
        return await adrive(flow, self._ex)

    async def _run(self, make: Callable[[BloomCore], Flow[T]]) -> T:
        return await self._drive(make(await self._ready()))

    async def add(self, item: object) -> bool:
        return (await self._run(lambda c: c.add_many([item])))[0]

    async def add_many(self, items: Iterable[object]) -> list[bool]:
        return await self._batched(items, "add")

    async def contains(self, item: object) -> bool:
        return (await self._run(lambda c: c.contains_many([item])))[0]

    async def contains_many(self, items: Iterable[object]) -> list[bool]:
        return await self._batched(items, "contains")

    async def _batched(self, items: Iterable[object], verb: str) -> list[bool]:
        todo = _as_bytes(items)
        core = await self._ready()
        flow = core.add_many if verb == "add" else core.contains_many
        out: list[bool] = []
        for lo in range(0, len(todo), self.batch):
            out += await self._drive(flow(todo[lo : lo + self.batch]))
        return out

    async def count(self) -> int:
        return await self._run(lambda c: c.count())

    async def stats(self) -> dict[str, Any]:
        return await self._run(lambda c: c.stats())

    info = stats

    async def delete(self) -> int:
        return await self._run(lambda c: c.delete())


share_docstrings(BloomFilter, AsyncBloomFilter)


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("BadBloomItem", "BloomFull", "BloomMismatch", "BloomModuleMissing", "BloomNotFound",
          "BloomParameterError")


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
