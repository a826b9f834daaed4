"""CompactMap and AsyncCompactMap: key -> small value at a few bytes per item.

Items live as fields of listpack hash buckets (maps/buckets.py), keys zipped
(maps/zipkeys.py), values framed with a one-byte codec header (densekv/codec.py). Every
operation is written once, as a flow (densekv/flows.py); the two classes here are thin
shells that only drive flows, so they offer the same operations with the same parameters
(a test checks it). Where things live:
  densekv/errors.py  the errors a map raises (beside every other densekv error)
  maps/settings.py   MapFacts: what a map needs of the server (a projection of the probe)
  maps/meta.py       the stored meta (geometry, aliases, TTL mode) and the TTL-mode decision
  maps/core.py       MapCore: single-item operations (get, set, setnx, incr, expire, ...)
  maps/fast.py       the batch fast path (gets and sets grouped per bucket)
  maps/queue.py      what a batch queues; maps/batch.py batches and transactions
  maps/whole.py      whole-map work (count, stats, sweep, items, verify)
  maps/migrate.py    hot migration from and to plain string keys
Invariants:
  * a bucket never leaves the listpack encoding because of a value: a framed value longer
    than hash-max-listpack-value goes to its own key (marker 0x0F in the bucket); a key
    whose zipped form is too long for a field is refused (KeyTooLong) before any write;
  * per-item expiry (ttl_mode "packed", see maps/meta.py, "Per-item TTL") is packed
    before the value (codec.EXPIRES) and checked on every read, so an expired item is never
    returned, swept or not; read-then-write operations on it (setnx, incr, expire, sweep)
    are one Lua script;
  * the map's geometry (bucket count), alias table and TTL mode are fixed in the server
    when the map is created: any process, with any `expected`, finds every item;
  * a value that does not decode raises DecodeError naming the key; nothing is returned
    raw and nothing else is touched;
  * while a migration runs (`fallback`), a missing item is read from the plain key of the
    same name, and a write first moves that key in (maps/migrate.py).
get is one HGET, set one HSET (two commands only for out-of-line values).
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from densekv.capabilities import probe_flow
from densekv.cluster_executor import AsyncClusterExecutor, ClusterExecutor, executor_for
from densekv.codec import Codec, ZstdDictionary
from densekv.errors import DensekvError, InvalidArgument
from densekv.errors import moved as _moved
from densekv.flows import Flow, adrive, ascan_chunks, drive, scan_chunks
from densekv.maps import whole
from densekv.maps.batch import AsyncMapBatch, MapBatch
from densekv.maps.core import MISSING, MapCore, key_str, open_map, plain_bytes, plain_value
from densekv.maps.meta import TTL_MODES, check_namespace, meta_key
from densekv.maps.queue import Pending
from densekv.maps.settings import MapFacts, facts_of
from densekv.twins import AsyncOpensOnce, OpensOnce, share_docstrings

T = TypeVar("T")

# The names other modules import from here (the stable import path of the map's API).
__all__ = ["AsyncCompactMap", "AsyncMapBatch", "CompactMap", "MapBatch",
           "MapFacts", "Pending", "meta_key", "plain_bytes", "plain_value"]


class CompactMap(OpensOnce[MapCore]):
    """key -> value at a few bytes per item; see the module docstring and docs/maps.md.

    `codec`: "auto", "int", "raw", "msgpack", "zlib", "lz4", "zstd" or a Codec. `expected`:
    the item count the buckets are sized for when the map is first created (stored; later
    instances use the stored geometry). `ttl`: default per-item TTL in seconds. `aliases`:
    crumb -> alias for key zipping, fixed at creation (None: use the stored table).
    `ttl_mode`: "auto", "packed" or "field", how items keep their TTL, fixed at creation
    ("auto": the stored mode, or for a new map the measured choice: packed; see
    maps/meta.py, "Per-item TTL"). "field" raises FieldTtlUnavailable on a server without
    hash field TTL. The constructor does no I/O: the first operation, or `open()`, probes
    the server (unless `facts` are given) and creates or opens the map, once.
    """

    def __init__(self, client: Any, namespace: str, codec: str | Codec = "auto", expected: int = 100_000,
                 ttl: float | None = None, *, aliases: Mapping[str, str] | None = None,
                 out_of_line: bool = True, ttl_mode: str = "auto", facts: MapFacts | None = None,
                 clock: Callable[[], float] = time.time, durable: bool = False) -> None:
        check_namespace(namespace)
        if ttl_mode not in TTL_MODES:
            raise InvalidArgument(f"ttl_mode is one of {', '.join(TTL_MODES)}, not {ttl_mode!r}")
        self.client = client
        self.namespace = namespace
        self._ex = executor_for(client, durable=durable)
        self._args = (codec, expected, ttl, aliases, out_of_line, ttl_mode, facts, clock)
        self._core: MapCore | None = None
        self._opening = threading.Lock()

    def _open_core(self) -> MapCore:
        codec, expected, ttl, aliases, out_of_line, ttl_mode, facts, clock = self._args
        facts = facts or facts_of(drive(probe_flow(), self._ex))
        return drive(open_map(self.namespace, facts, expected, aliases, ttl_mode, Codec.named(codec), ttl,
                              clock, out_of_line), self._ex)

    def _run(self, flow: Flow[T]) -> T:
        return drive(flow, self._ex)

    # -- the API ----------------------------------------------------------------------------
    def get(self, key: str, default: Any = None) -> Any:
        v = self._run(self._opened().get(key_str(key)))
        return default if v is MISSING else v

    def set(self, key: str, value: Any, ttl: float | None = None) -> bool:
        return self._run(self._opened().set(key_str(key), value, ttl))

    def setnx(self, key: str, value: Any, ttl: float | None = None) -> bool:
        return self._run(self._opened().setnx(key_str(key), value, ttl))

    def getset(self, key: str, value: Any, ttl: float | None = None) -> Any:
        return self._run(self._opened().getset(key_str(key), value, ttl))

    def incr(self, key: str) -> int:
        return self.incrby(key, 1)

    def incrby(self, key: str, delta: int) -> int:
        return self._run(self._opened().incrby(key_str(key), delta))

    def delete(self, *keys: str) -> int:
        return self._run(self._opened().delete_many([key_str(k) for k in keys]))

    def exists(self, key: str) -> bool:
        return self._run(self._opened().exists(key_str(key)))

    def mget(self, keys: Iterable[str]) -> list[Any]:
        b = self.batch()
        fut = b.mget(keys)
        b.execute()
        return fut.result()

    def mset(self, items: Mapping[str, Any], ttl: float | None = None) -> bool:
        b = self.batch()
        b.mset(items, ttl)
        b.execute()
        return True

    def ttl(self, key: str) -> int:
        return self._run(self._opened().ttl_of(key_str(key)))

    def expire(self, key: str, seconds: float | None) -> bool:
        return self._run(self._opened().expire(key_str(key), seconds))

    def persist(self, key: str) -> bool:
        return self.expire(key, None)

    def batch(self, transaction: bool = False) -> MapBatch:
        """Queue operations, run them in one round trip (`transaction=True`: atomically)."""
        return MapBatch(self._opened(), self._run, self.is_cluster, transaction)

    pipeline = batch

    # -- dict-style ---------------------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        v = self._run(self._opened().get(key_str(key)))
        if v is MISSING:
            raise KeyError(key)
        return v

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)

    def __delitem__(self, key: str) -> None:
        if not self.delete(key):
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, (str, bytes)) and self.exists(key)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self.items())

    def __len__(self) -> int:
        return sum(1 for _ in self.items())

    # -- whole-map work (maps/whole.py) ---------------------------------------------------------
    def keys(self) -> Iterator[str]:
        return iter(self)

    def values(self) -> Iterator[Any]:
        return (v for _, v in self.items())

    def buckets(self) -> Iterator[bytes]:
        for scan in self._opened().bucket_scans(1000):
            for chunk in scan_chunks(self.client, scan):
                yield from chunk

    def items(self, batch: int = 100) -> Iterator[tuple[str, Any]]:
        """Every live item (SCAN over the buckets; an item changed during the walk may be
        seen old or new, as with SCAN). During a migration, plain keys not yet moved too."""
        for scan, read in whole.walks(self._opened(), batch):
            for chunk in scan_chunks(self.client, scan):
                yield from self._run(read(chunk))

    def count(self) -> int:
        """Items stored, expired-but-unswept ones included (sum of HLEN, no values read)."""
        return self._run(whole.count(self._opened()))

    def sweep(self, batch: int = 100) -> int:
        """Remove expired items (one Lua script per bucket) and out-of-line keys no bucket
        points to any more; returns the number of expired items removed (always 0 in
        ttl_mode "field": the server removes them itself)."""
        return self._run(whole.sweep(self._opened(), batch))

    def stats(self) -> dict[str, Any]:
        """Geometry, item count, the fullest bucket, and warnings near the listpack limit."""
        return self._run(whole.stats(self._opened()))

    def explain(self) -> dict[str, Any]:
        return self._opened().explain()

    def train(self, samples: Iterable[Any], size: int = 16384) -> ZstdDictionary:
        """Train a zstd dictionary on sample values, store it in the server and write new
        values with it (other processes pick it up when they open the map)."""
        return self._run(self._opened().train(samples, size))

    # -- migration (maps/migrate.py) ---------------------------------------------------------
    def migrate_from(self, pattern: str, *, batch: int = 500, pause: float = 0.0,
                     progress: Callable[[dict[str, int]], None] | None = None) -> dict[str, int]:
        from densekv.maps import migrate  # loaded only when a migration runs

        return self._run(migrate.migrate_from(self._opened(), pattern, batch, pause, progress))

    def migrate_to_plain(self, *, batch: int = 200, pause: float = 0.0) -> dict[str, int]:
        from densekv.maps import migrate

        return self._run(migrate.migrate_to_plain(self._opened(), batch, pause))

    def verify(self, pattern: str | None = None) -> dict[str, Any]:
        return self._run(whole.verify(self._opened(), pattern))

    @property
    def is_cluster(self) -> bool:
        return isinstance(self._ex, ClusterExecutor)


class AsyncCompactMap(AsyncOpensOnce[MapCore]):
    """The asyncio twin of CompactMap: same names and parameters, awaited (iterators are
    async iterators). The first operation (or `await m.open()`) probes the server and
    creates or opens the map, once."""

    _not_open = "the map is not open yet: await m.open() (or any operation) first"

    def __init__(self, client: Any, namespace: str, codec: str | Codec = "auto", expected: int = 100_000,
                 ttl: float | None = None, *, aliases: Mapping[str, str] | None = None,
                 out_of_line: bool = True, ttl_mode: str = "auto", facts: MapFacts | None = None,
                 clock: Callable[[], float] = time.time, durable: bool = False) -> None:
        check_namespace(namespace)
        if ttl_mode not in TTL_MODES:
            raise InvalidArgument(f"ttl_mode is one of {', '.join(TTL_MODES)}, not {ttl_mode!r}")
        self.client = client
        self.namespace = namespace
        self._ex = executor_for(client, durable=durable)
        self._args = (codec, expected, ttl, aliases, out_of_line, ttl_mode, facts, clock)
        self._core: MapCore | None = None

    async def _open_core(self) -> MapCore:
        codec, expected, ttl, aliases, out_of_line, ttl_mode, facts, clock = self._args
        facts = facts or facts_of(await adrive(probe_flow(), self._ex))
        return await adrive(open_map(self.namespace, facts, expected, aliases, ttl_mode,
                                     Codec.named(codec), ttl, clock, out_of_line), self._ex)

    async def ready(self) -> MapCore:
        """`await m.open()` under its older name, returning the map's core."""
        return await self._ready()

    async def _run(self, make: Callable[[MapCore], Flow[T]]) -> T:
        core = await self._ready()
        return await adrive(make(core), self._ex)

    async def _drive(self, flow: Flow[T]) -> T:
        return await adrive(flow, self._ex)

    async def get(self, key: str, default: Any = None) -> Any:
        k = key_str(key)
        v = await self._run(lambda c: c.get(k))
        return default if v is MISSING else v

    async def set(self, key: str, value: Any, ttl: float | None = None) -> bool:
        k = key_str(key)
        return await self._run(lambda c: c.set(k, value, ttl))

    async def setnx(self, key: str, value: Any, ttl: float | None = None) -> bool:
        k = key_str(key)
        return await self._run(lambda c: c.setnx(k, value, ttl))

    async def getset(self, key: str, value: Any, ttl: float | None = None) -> Any:
        k = key_str(key)
        return await self._run(lambda c: c.getset(k, value, ttl))

    async def incr(self, key: str) -> int:
        return await self.incrby(key, 1)

    async def incrby(self, key: str, delta: int) -> int:
        k = key_str(key)
        return await self._run(lambda c: c.incrby(k, delta))

    async def delete(self, *keys: str) -> int:
        ks = [key_str(k) for k in keys]
        return await self._run(lambda c: c.delete_many(ks))

    async def exists(self, key: str) -> bool:
        k = key_str(key)
        return await self._run(lambda c: c.exists(k))

    async def mget(self, keys: Iterable[str]) -> list[Any]:
        b = self.batch()
        fut = b.mget(keys)
        await b.execute()
        return fut.result()

    async def mset(self, items: Mapping[str, Any], ttl: float | None = None) -> bool:
        b = self.batch()
        b.mset(items, ttl)
        await b.execute()
        return True

    async def ttl(self, key: str) -> int:
        k = key_str(key)
        return await self._run(lambda c: c.ttl_of(k))

    async def expire(self, key: str, seconds: float | None) -> bool:
        k = key_str(key)
        return await self._run(lambda c: c.expire(k, seconds))

    async def persist(self, key: str) -> bool:
        return await self.expire(key, None)

    def batch(self, transaction: bool = False) -> AsyncMapBatch:
        return AsyncMapBatch(self._ready, self._drive, self.is_cluster, transaction)

    pipeline = batch

    # -- whole-map work (maps/whole.py) ---------------------------------------------------------
    async def keys(self) -> AsyncIterator[str]:
        async for item in self.items():
            yield item[0]

    async def values(self) -> AsyncIterator[Any]:
        async for item in self.items():
            yield item[1]

    async def buckets(self) -> AsyncIterator[bytes]:
        core = await self._ready()
        for scan in core.bucket_scans(1000):
            async for chunk in ascan_chunks(self.client, scan):
                for b in chunk:
                    yield b

    async def items(self, batch: int = 100) -> AsyncIterator[tuple[str, Any]]:
        """Async iterator over live items (as CompactMap.items)."""
        core = await self._ready()
        for scan, read in whole.walks(core, batch):
            async for chunk in ascan_chunks(self.client, scan):
                for item in await adrive(read(chunk), self._ex):
                    yield item

    async def count(self) -> int:
        return await self._run(whole.count)

    async def sweep(self, batch: int = 100) -> int:
        return await self._run(lambda c: whole.sweep(c, batch))

    async def stats(self) -> dict[str, Any]:
        return await self._run(whole.stats)

    async def explain(self) -> dict[str, Any]:
        return (await self._ready()).explain()

    async def train(self, samples: Iterable[Any], size: int = 16384) -> ZstdDictionary:
        return await self._run(lambda c: c.train(samples, size))

    # -- migration (maps/migrate.py) ---------------------------------------------------------
    async def migrate_from(self, pattern: str, *, batch: int = 500, pause: float = 0.0,
                           progress: Callable[[dict[str, int]], None] | None = None) -> dict[str, int]:
        from densekv.maps import migrate  # loaded only when a migration runs

        return await self._run(lambda c: migrate.migrate_from(c, pattern, batch, pause, progress))

    async def migrate_to_plain(self, *, batch: int = 200, pause: float = 0.0) -> dict[str, int]:
        from densekv.maps import migrate

        return await self._run(lambda c: migrate.migrate_to_plain(c, batch, pause))

    async def verify(self, pattern: str | None = None) -> dict[str, Any]:
        return await self._run(lambda c: whole.verify(c, pattern))

    @property
    def is_cluster(self) -> bool:
        return isinstance(self._ex, AsyncClusterExecutor)


share_docstrings(CompactMap, AsyncCompactMap)


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("FieldTtlUnavailable", "MapConfigError", "MapKeyInvalid", "MapValueInvalid",
          "NotAnInteger", "TransactionError", "ValueTooLarge")


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
