"""CompactSet and AsyncCompactSet: exact membership of fixed-size IDs at ~20 bytes each.

The logic is written once in SetCore as *flows* (generators that yield lists of plans, one
list = one round trip, and receive the decoded results); the sync and asyncio classes only
drive them, so they cannot drift. Invariants:
  * an item of the wrong type or size raises BadItem before any plan is built (in add,
    remove, `in` and the batches alike); add_many / contains_many check every item of the
    call first, so nothing of the call is sent;
  * add is one round trip: one command (SADD / HSETNX / ZADD NX / SET NX GET), atomic on
    the server, or for the split-field dense hash HSETNX + HGET (plus a script call in a
    second round trip only on a low-bit collision; layouts.DenseSplitHash says why that
    is exact), so concurrent adders of one item see exactly one True;
  * add_many / contains_many send one command or script call per partition present in a
    batch (one round trip per batch); the batch path works on the items as integers
    (ItemCodec.encode_ints) and groups them by partition in one pass;
  * the layout, partition count, item size and spreading of a set are written once to
    `{name}:meta:{0}` and read back by every later CompactSet of that name, so a second
    process (or a restart with another `expected`) can never look in the wrong partitions;
    a key there of another type is a WrongType error and is left untouched;
  * len() is the sum of SCARD/HLEN/ZCARD over the partitions (P commands, pipelined 1024 per
    round trip, no extra memory and no extra work on add); exact when no writer runs beside
    it. For `flat`, it counts keys with SCAN MATCH (it walks the whole keyspace);
  * iteration is SSCAN/HSCAN/ZSCAN per partition (SCAN MATCH for flat), never KEYS, and
    yields each item once even when a partition is rehashed mid-scan.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any, Generic, TypeVar

import redis

from densekv.capabilities import Capabilities, probe, probe_flow
from densekv.cluster_executor import AsyncClusterExecutor, executor_for
from densekv.errors import DensekvError, WrongType
from densekv.errors import SetMismatch as _SetMismatch
from densekv.errors import moved as _moved
from densekv.flows import Flow, Scan, adrive, drive
from densekv.keys import tag
from densekv.plan import command
from densekv.sets.items import ItemCodec
from densekv.sets.layouts import LAYOUTS, FlatKeys, SetLayout, SetLimits, make_layout
from densekv.twins import AsyncOpensOnce, OpensOnce, share_docstrings

T = TypeVar("T")
K = TypeVar("K")  # a kind's core (SetCore, family.FamilyCore)
C = TypeVar("C")  # the client: redis-py's sync or asyncio one

BATCH = 10_000  # least items per round trip in add_many / contains_many
MAX_BATCH = 200_000
#: items per partition command a default batch aims at (on average): many items per
#: command (a script call has a fixed cost: ~30 us on Redis 7.0), few enough that no one
#: command holds the server for long (64 x a few us)
PER_COMMAND = 64
PARTITION_BATCH = 1024  # partitions per round trip in len / stats / clear / iteration
META_VERSION = 1


# --- server facts ---------------------------------------------------------------------


def limits_of(caps: Capabilities) -> SetLimits:
    """What the set layouts need of the probe's Capabilities (a pure projection)."""
    return SetLimits(
        caps.hash_max_listpack_entries, caps.hash_max_listpack_value,
        caps.set_max_listpack_entries, caps.set_max_listpack_value,
        caps.zset_max_listpack_entries, caps.zset_max_listpack_value,
        "libc" if caps.allocator.startswith("libc") else "jemalloc", caps.cluster,
    )


def limits_from_probe(client: Any) -> SetLimits:
    """The limits of a sync (or cluster) client's server: limits_of(probe(client))."""
    return limits_of(probe(client))


class OpenedOnFirstUse(AsyncOpensOnce[K]):
    """What the asyncio twins of the set kinds (AsyncCompactSet, AsyncSetFamily) share: as
    their sync classes (OpensOnce), the first operation or `await open()` (`_ready`, which
    every operation awaits first) opens the core, reading the server's limits then unless
    they were given. The kind says how its core opens with them (`_open_with`)."""

    _ex: Any
    _limits: SetLimits | None

    async def _open_with(self, limits: SetLimits) -> K:
        raise NotImplementedError

    async def _open_core(self) -> K:
        limits = self._limits
        if limits is None:  # not `or`: mypy would type the result SetLimits | None
            limits = limits_of(await adrive(probe_flow(), self._ex))
        return await self._open_with(limits)

    async def _run(self, make: Callable[[K], Flow[T]]) -> T:
        core = self._core
        return await adrive(make(core if core is not None else await self._ready()), self._ex)

    def _opened(self) -> K:
        return self._core_if_open()


# --- the core ---------------------------------------------------------------------------


def group_by_partition(ints: list[int], partitions: int) -> dict[int, tuple[list[int], list[int]]]:
    """partition -> ([positions in `ints`], [quotients]) for items given as integers
    (x = q * partitions + p), in partition order of first appearance. The per-item
    grouping runs in C (map over bound methods), not in a Python loop."""
    n = len(ints)
    ps = [x % partitions for x in ints]
    qs = [x // partitions for x in ints]
    if partitions <= 4 * n:  # a list of lists indexed by partition: no hashing
        buckets: list[list[int]] = [[] for _ in range(partitions)]
        deque(map(list.append, map(buckets.__getitem__, ps), range(n)), maxlen=0)
        seen = dict.fromkeys(ps)  # partitions in order of first appearance
        where_of = {p: buckets[p] for p in seen}
    else:  # far more partitions than items (e.g. one per item): a dict
        where_of = {}
        for j, p in enumerate(ps):
            where_of.setdefault(p, []).append(j)
    return {p: (where, [qs[j] for j in where]) for p, where in where_of.items()}


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name or any(c in name for c in "{}"):
        raise ValueError("a set name is a non-empty string without braces")


@dataclass
class SetCore:
    """One open set: layout + item codec + why; builds flows, does no I/O."""

    name: str
    layout: SetLayout
    codec: ItemCodec
    reason: str
    limits: SetLimits
    cluster: bool = False

    # -- opening ----------------------------------------------------------------------
    @staticmethod
    def open(
        name: str, layout: str, expected: int, item_size: int, partitions: int | None,
        spread: bool, limits: SetLimits, cluster: bool,
    ) -> Flow[SetCore]:
        _check_name(name)
        if layout not in ("auto", *LAYOUTS, "dense-hash", "dense-set"):
            raise ValueError(f"unknown layout {layout!r}: choose one of auto, {', '.join(LAYOUTS)}, dense-hash, dense-set")
        if not isinstance(expected, int) or expected < 0:
            raise ValueError("expected is a whole number of items >= 0")
        codec = ItemCodec(item_size, spread)
        meta_key = tag(name, "meta", 0)
        found = (yield [command("GET", meta_key, keys=(meta_key,))])[0]
        if found is None:
            lay, reason = make_layout(layout, name, expected, item_size, limits, partitions)
            meta = json.dumps({"v": META_VERSION, "layout": lay.name, "code": lay.code,
                               "partitions": lay.partitions, "item_size": item_size,
                               "spread": spread}, sort_keys=True).encode()
            prev = (yield [command("SET", meta_key, meta, "NX", "GET", keys=(meta_key,))])[0]
            if prev is None:
                return SetCore(name, lay, codec, reason, limits, cluster)
            found = prev  # another process created it a moment ago
        try:
            meta = json.loads(found)
            kind = {"f": "flat", "s": "set", "h": "hash", "z": "zset", "ds": "dense-set",
                    "dq": "dense-hash", "dh": "dense-hash-v1"}[meta["code"]]
            stored_p, stored_size, stored_spread = int(meta["partitions"]), int(meta["item_size"]), bool(meta["spread"])
        except (ValueError, KeyError, TypeError) as exc:
            raise WrongType(f"key {meta_key.decode()} holds something densekv did not write: "
                            "choose another set name; the key was left untouched") from exc
        asked = layout if layout != "dense" else ("dense-set" if kind == "dense-set" else "dense-hash")
        if (layout != "auto" and asked != kind.removesuffix("-v1")) \
                or partitions not in (None, stored_p) \
                or stored_size != item_size or stored_spread != spread:
            raise _SetMismatch(
                f"set {name!r} exists as layout {kind} with {stored_p} partitions, {stored_size}-byte "
                f"items, spread={stored_spread}; open it with those (or layout='auto', partitions=None)"
            )
        lay, _ = make_layout(kind, name, expected, item_size, limits, stored_p)
        return SetCore(name, lay, codec, f"reopened: as recorded in {meta_key.decode()}", limits, cluster)

    # -- single items ---------------------------------------------------------------------
    def add(self, item: object) -> Flow[bool]:
        stored = self.codec.encode(item)
        got = (yield [self.layout.plan_add(stored)])[0]
        if got is None:  # the layout could not tell in one round trip (a rare collision)
            got = (yield [self.layout.plan_add_fallback(stored)])[0]
        return bool(got)

    def contains(self, item: object) -> Flow[bool]:
        plan = self.layout.plan_contains(self.codec.encode(item))  # BadItem like add()
        return bool((yield [plan])[0])

    def remove(self, item: object) -> Flow[bool]:
        plan = self.layout.plan_remove(self.codec.encode(item))
        return bool((yield [plan])[0])

    # -- batches ------------------------------------------------------------------------
    def batch_size(self, batch: int | None, total: int | None = None) -> int:
        """Items per round trip: `batch` if given; else about PER_COMMAND items per
        partition, at least 10k, at most 200k, split evenly over a call of `total` items
        (two round trips of 50k rather than 96k and a 4k stub: each round trip sends one
        command per partition it touches)."""
        if batch:
            return batch
        size = max(BATCH, min(MAX_BATCH, PER_COMMAND * self.layout.partitions))
        if total is None or total <= size:
            return size
        rounds = -(-total // size)
        return -(-total // rounds)

    def many(self, items: Iterable[object], op: str, batch: int | None = None) -> Flow[list[bool]]:
        ints = self.codec.encode_ints(items)  # every item checked before anything is sent
        layout = self.layout
        total = len(ints)
        size = self.batch_size(batch, total)
        out: list[Any] = []
        if isinstance(layout, FlatKeys):
            width = self.codec.item_size
            build = layout.plan_add if op == "add" else layout.plan_contains
            for i in range(0, total, size):
                out += (yield [build(n.to_bytes(width, "big")) for n in ints[i : i + size]])
            return [bool(x) for x in out]
        partitions = layout.partitions
        members_of = layout.members_of
        group = layout.plan_add_group if op == "add" else layout.plan_contains_group
        for i in range(0, total, size):
            chunk = ints[i : i + size]
            parts = group_by_partition(chunk, partitions)
            results = yield [group(p, members_of(qs)) for p, (_, qs) in parts.items()]
            if sum(map(len, results)) != len(chunk):  # the scatter below relies on it
                raise RuntimeError("a partition command answered for the wrong number of items")
            flags: list[Any] = [0] * len(chunk)
            positions = chain.from_iterable(where for where, _ in parts.values())
            deque(map(flags.__setitem__, positions, chain.from_iterable(results)), maxlen=0)
            out += flags
        return list(map(bool, out))

    # -- whole set ------------------------------------------------------------------------
    def partition_batches(self) -> Iterator[range]:
        p = self.layout.partitions
        for lo in range(0, p, PARTITION_BATCH):
            yield range(lo, min(p, lo + PARTITION_BATCH))

    def sizes(self) -> Flow[list[int]]:
        out: list[int] = []
        for chunk in self.partition_batches():
            out += (yield [self.layout.plan_size(p) for p in chunk])
        return out

    def flat_keys(self) -> Flow[list[bytes]]:
        """A flat set's keys, each once (SCAN may return a key twice): a flows.Scan, so the
        driver walks every primary of a cluster."""
        layout = self.layout
        assert isinstance(layout, FlatKeys)
        scan = Scan(layout.scan_pattern(), batch=PARTITION_BATCH)
        seen: dict[bytes, None] = {}
        while chunk := (yield scan):
            seen.update(dict.fromkeys(chunk))
        return list(seen)

    def count(self) -> Flow[int]:
        """Items: the partitions' sizes summed, or a flat set's keys counted."""
        if isinstance(self.layout, FlatKeys):
            return len((yield from self.flat_keys()))
        return sum((yield from self.sizes()))

    def clear(self) -> Flow[int]:
        """Remove every item (the layout record stays); the keys removed."""
        layout = self.layout
        removed = 0
        if isinstance(layout, FlatKeys):
            keys = yield from self.flat_keys()
            for i in range(0, len(keys), PARTITION_BATCH):
                removed += sum((yield [layout.plan_unlink_key(k) for k in keys[i : i + PARTITION_BATCH]]))
            return removed
        for chunk in self.partition_batches():
            removed += sum((yield [layout.plan_unlink(p) for p in chunk]))
        return removed

    def walk(self) -> Iterator[Flow[list[bytes]]]:
        """The set's items, as flows of one round trip each (a flat set's: one SCAN walk)
        that both iterators drive one after another: each runs before the next is asked
        for. Each item comes once, even when a partition is rehashed mid-scan."""
        if isinstance(self.layout, FlatKeys):
            yield self._flat_items()
            return
        seen: dict[int, set[bytes]] = {}
        for chunk in self.partition_batches():
            cursors = {p: 0 for p in chunk}  # each round leaves the open ones here
            while cursors:
                yield self._scan_round(cursors, seen)

    def _flat_items(self) -> Flow[list[bytes]]:
        layout = self.layout
        assert isinstance(layout, FlatKeys)
        keys = yield from self.flat_keys()
        return [self.codec.decode(layout.item_of_key(k)) for k in keys]

    def _scan_round(self, cursors: dict[int, int], seen: dict[int, set[bytes]]) -> Flow[list[bytes]]:
        """Items of one scan round of these partitions (each once); `cursors` is left
        holding the cursors still open."""
        replies = yield [self.layout.plan_scan(p, c) for p, c in cursors.items()]
        items: list[bytes] = []
        open_: dict[int, int] = {}
        for (p, cursor), (nxt, members) in zip(cursors.items(), replies):
            if nxt or cursor:  # more than one round for this partition: a rehash may repeat
                mine = seen.setdefault(p, set())
                members = [m for m in members if m not in mine]
                mine.update(members)
            items += [self.codec.decode(self.layout.stored_of(p, m)) for m in members]
            if nxt:
                open_[p] = nxt
            else:
                seen.pop(p, None)
        cursors.clear()
        cursors.update(open_)
        return items

    def stats(self) -> Flow[dict[str, Any]]:
        if isinstance(self.layout, FlatKeys):
            return {**self.explain(), "items": (yield from self.count()), "fullest_partition": None,
                    "encodings": {}, "converted_partitions": [], "converted_count": 0, "warnings": []}
        sizes: list[int] = []
        encodings: list[str | None] = []
        for chunk in self.partition_batches():
            replies = yield [self.layout.plan_size(p) for p in chunk] + [self.layout.plan_encoding(p) for p in chunk]
            sizes += replies[: len(chunk)]
            encodings += replies[len(chunk) :]
        return self.summarize(sizes, encodings)

    def summarize(self, sizes: list[int], encodings: list[str | None]) -> dict[str, Any]:
        compact = ("listpack", "listpackex", "intset", "ziplist")
        converted = [p for p, e in enumerate(encodings) if e is not None and e not in compact]
        fullest = max(range(len(sizes)), key=sizes.__getitem__) if sizes else None
        limit = self._entry_limit()
        warnings = []
        if converted:
            warnings.append(f"{len(converted)} partition(s) left the listpack encoding (several times "
                            "the memory): the set outgrew `expected`; copy it to a set made with a larger one")
        elif limit and sizes and max(sizes) > 0.9 * limit:
            warnings.append(f"the fullest partition holds {max(sizes)} of the {limit} items a listpack "
                            "may hold: the set is about to outgrow `expected`")
        return {
            **self.explain(),
            "items": sum(sizes),
            "fullest_partition": None if fullest is None else {"partition": fullest, "items": sizes[fullest]},
            "encodings": dict(Counter(e for e in encodings if e is not None)),
            "converted_partitions": converted[:20],
            "converted_count": len(converted),
            "warnings": warnings,
        }

    def _entry_limit(self) -> int | None:
        t = self.layout.redis_type
        if t == "hash":
            return self.limits.hash_max_listpack_entries
        if t == "zset":
            return self.limits.zset_max_listpack_entries
        if t == "set":
            return self.limits.set_max_listpack_entries
        return None

    def explain(self) -> dict[str, Any]:
        return {
            "name": self.name,
            **self.layout.describe(),
            "item_size": self.codec.item_size,
            "spread": self.codec.spread,
            "reason": self.reason,
            "server": {
                "hash_max_listpack_entries": self.limits.hash_max_listpack_entries,
                "hash_max_listpack_value": self.limits.hash_max_listpack_value,
                "set_max_listpack_entries": self.limits.set_max_listpack_entries,
                "zset_max_listpack_entries": self.limits.zset_max_listpack_entries,
                "allocator": self.limits.allocator,
            },
        }


class _SetShell(Generic[C]):
    """What CompactSet and its asyncio twin share: the one signature (neither does I/O in
    it: both open on first use or open()) and what they say of the open set."""

    def __init__(
        self,
        client: C,
        name: str,
        layout: str = "auto",
        expected: int = 100_000,
        item_size: int = 16,
        partitions: int | None = None,
        *,
        spread: bool = True,
        limits: SetLimits | None = None,
        durable: bool = False,
    ) -> None:
        """`client`: a redis-py client (redis.Redis or redis.RedisCluster) for the sync
        class, an asyncio one (redis.asyncio) for the twin."""
        _check_name(name)
        self.client = client
        self._ex = executor_for(client, durable=durable)
        self._limits = limits
        self._args = (name, layout, expected, item_size, partitions, spread)
        self._start()

    def _start(self) -> None:
        """Note that the set is not open yet (the first operation, or open(), opens it)."""
        raise NotImplementedError

    def _open(self, limits: SetLimits, cluster: bool) -> Flow[SetCore]:
        return SetCore.open(*self._args, limits, cluster)

    def _opened(self) -> SetCore:
        raise NotImplementedError

    @property
    def layout(self) -> str:
        """The layout (opens the set; on the asyncio twin: after `await s.open()`)."""
        return self._opened().layout.name

    @property
    def partitions(self) -> int:
        """The partition count (opens the set; on the asyncio twin: after `await s.open()`)."""
        return self._opened().layout.partitions

    @property
    def core(self) -> SetCore:
        """The set's operations as flows, without I/O (for pipelining many of them in one
        round trip: `densekv.flows.drive_many([s.core.add(x) for x in xs], s.executor)`;
        on the asyncio twin, after `await s.open()`, with `adrive_many`)."""
        return self._opened()

    @property
    def executor(self) -> Any:
        """The executor this set's flows run on (densekv.cluster_executor.executor_for of its client)."""
        return self._ex


class CompactSet(OpensOnce[SetCore], _SetShell[redis.Redis | redis.RedisCluster]):
    """A set of fixed-size IDs (16 bytes by default) kept in compact server encodings.

    layout: "auto" (= "dense"), "dense", "dense-hash", "dense-set", or the seed's "flat",
    "set", "hash", "zset" (with `partitions`, any whole number; default sized from
    `expected`). See densekv/sets/layouts.py for what each stores. The first operation
    (or `open()`) reads the server's limits, unless given, and the set's layout record.
    """

    def _start(self) -> None:
        self._core = None
        self._opening = threading.Lock()

    def _open_core(self) -> SetCore:
        limits = self._limits or limits_from_probe(self.client)
        return drive(self._open(limits, isinstance(self.client, redis.RedisCluster)), self._ex)

    def explain(self) -> dict[str, Any]:
        return self._opened().explain()

    def add(self, item: object) -> bool:
        """True if the item was new (one command; atomic)."""
        return drive(self._opened().add(item), self._ex)

    def add_many(self, items: Iterable[object], *, batch: int | None = None) -> list[bool]:
        return drive(self._opened().many(items, "add", batch), self._ex)

    def contains(self, item: object) -> bool:
        return drive(self._opened().contains(item), self._ex)

    __contains__ = contains

    def contains_many(self, items: Iterable[object], *, batch: int | None = None) -> list[bool]:
        return drive(self._opened().many(items, "contains", batch), self._ex)

    def remove(self, item: object) -> bool:
        """True if the item was there."""
        return drive(self._opened().remove(item), self._ex)

    def count(self) -> int:
        return drive(self._opened().count(), self._ex)

    def __len__(self) -> int:
        return self.count()

    def __iter__(self) -> Iterator[bytes]:
        for flow in self._opened().walk():
            yield from drive(flow, self._ex)

    def clear(self) -> None:
        """Remove every item (the set keeps its layout record)."""
        drive(self._opened().clear(), self._ex)

    def stats(self) -> dict[str, Any]:
        """Layout, items, the fullest partition, encodings seen, converted partitions, warnings."""
        return drive(self._opened().stats(), self._ex)


class AsyncCompactSet(OpenedOnFirstUse[SetCore], _SetShell[Any]):
    """The asyncio twin of CompactSet: same names, awaited (`await s.contains(x)` for `in`,
    `await s.count()` for len, `async for item in s`). The first call (or `await s.open()`)
    reads the server's limits and opens the set."""

    _not_open = "the set is not open yet: await s.open() (or any operation) first"

    def _start(self) -> None:
        self._core = None

    async def _open_with(self, limits: SetLimits) -> SetCore:
        cluster = isinstance(self._ex, AsyncClusterExecutor)
        return await adrive(self._open(limits, cluster), self._ex)

    async def ready(self) -> SetCore:
        """`await s.open()` under its older name, returning the set's core."""
        return await self._ready()

    async def explain(self) -> dict[str, Any]:
        return (await self._ready()).explain()

    async def add(self, item: object) -> bool:
        return await self._run(lambda c: c.add(item))

    async def add_many(self, items: Iterable[object], *, batch: int | None = None) -> list[bool]:
        items = list(items)
        return await self._run(lambda c: c.many(items, "add", batch))

    async def contains(self, item: object) -> bool:
        return await self._run(lambda c: c.contains(item))

    async def contains_many(self, items: Iterable[object], *, batch: int | None = None) -> list[bool]:
        items = list(items)
        return await self._run(lambda c: c.many(items, "contains", batch))

    async def remove(self, item: object) -> bool:
        return await self._run(lambda c: c.remove(item))

    async def count(self) -> int:
        return await self._run(lambda c: c.count())

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for flow in (await self._ready()).walk():
            for item in await adrive(flow, self._ex):
                yield item

    async def clear(self) -> None:
        await self._run(lambda c: c.clear())

    async def stats(self) -> dict[str, Any]:
        return await self._run(lambda c: c.stats())


share_docstrings(CompactSet, AsyncCompactSet)


# What other modules and the tools import from here (tests/unit/test_tools_use_public_names.py)
__all__ = ["AsyncCompactSet", "CompactSet", "OpenedOnFirstUse", "SetCore", "limits_from_probe",
           "limits_of"]


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("SetMismatch",)


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
