"""Batches and transactions of a compact map: queue operations, run them together.

Batches and transactions (`m.batch(transaction=False|True)`, results like a redis-py
pipeline's, in order, each also in the Pending the op returned):
  * a batch (transaction=False) runs its gets and sets through the fast path (maps/fast.py): one
    HMGET per bucket for consecutive gets, one HSET per bucket for consecutive sets (an op
    only moves earlier past ops on other buckets), one round trip, per-prefix locate work
    cached (buckets.Locator). Other ops run as their flows, in the same round trips, in order.
    An out-of-line value is read in a second round trip, only when its marker is seen;
    that read returns a value the item held between the two round trips (its key is
    written with its marker in one MULTI and rewritten only by a newer write of the same
    item), and a key gone by then (item replaced inline and the key reclaimed) makes the
    item be read again, never reported missing. When a later op of the same batch writes
    that item, the value is prefetched right after the bucket read instead, so the batch's
    own writes never show through an earlier get. Like a redis-py pipeline, a batch is not
    isolated from other clients. During a migration every op runs as its flow (fallback
    reads prefetched in the first round trip, as before);
  * a transaction (transaction=True) sends the first (and, for every op, only) round
    trip of all its ops inside one MULTI/EXEC: scripts as EVALSHA, loaded by SCRIPT LOAD
    ahead in the same round trip, and every get also reads the item's out-of-line key
    inside the MULTI, so nothing of the transaction needs a second round trip except
    loading a zstd dictionary not seen yet; that happens after EXEC and is still
    consistent: a stored dictionary never changes and its id is never reused. Refused with
    TransactionError before anything is sent: a map with a migration in progress (moving
    plain keys in takes reads then scripts, and fallback reads would be a second round
    trip) and, on a cluster, keys in more than one slot (the keys of one bucket share a
    hash tag; other buckets usually do not). Bad input (ValueTooLarge, KeyTooLong,
    TypeError) raises before anything is sent. As in Redis, an op that fails inside EXEC
    (NotAnInteger, WrongType) does not undo the others; the first such error raises after
    the transaction ran, as redis-py's transaction pipeline does.

A batch queues one frozen dataclass per operation (maps/queue.py) and, at execute, turns
the queue into one flow: runs of gets and sets through the fast path, any other
operation as its own flow, all gathered so they share round trips (flows.gather), or the
transaction flow below. MapBatch and AsyncMapBatch only drive that flow.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from redis.crc import key_slot

from densekv.dictionaries import dictionary_key
from densekv.errors import TransactionError
from densekv.flows import Flow, Lockstep, gather
from densekv.maps.core import MISSING, MapCore, key_str
from densekv.maps.fast import run_fast
from densekv.maps.queue import (
    Pending,
    Queued,
    QueuedFlow,
    QueuedGet,
    QueuedMGet,
    QueuedMSet,
    QueuedSet,
)
from densekv.plan import Command, Plan, ScriptCall

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

_NONE: Mapping[int, Any] = {}
Span = tuple[int, int, int]  # an op's results: flow f's result[start:stop] (start < 0: all of it)


class BatchOps:
    """Queues operations; each method returns a Pending. MapBatch and AsyncMapBatch run them.

    Gets and sets (get, mget, set, mset) are queued as data and run through the fast path
    (maps/fast.py: grouped commands); the other operations as flows. A transaction, or a
    map with a migration in progress, runs every operation as its flow."""

    def __init__(self, transaction: bool) -> None:
        self.transaction = transaction
        self._queued: list[Queued] = []
        self._mixed = False  # a write queued after a get: out-of-line prefetch may be needed
        self._reads = False

    def _add(self, make: Callable[[MapCore], Flow[Any]], writes: tuple[str, ...] = ()) -> Pending[Any]:
        op = QueuedFlow(make, writes)
        self._queued.append(op)
        self._mixed = self._mixed or (self._reads and bool(writes))
        return op.future

    def __len__(self) -> int:
        return len(self._queued)

    def get(self, key: str, default: Any = None) -> Pending[Any]:
        op = QueuedGet(key_str(key), default)
        self._queued.append(op)
        self._reads = True
        return op.future

    def mget(self, keys: Iterable[str]) -> Pending[list[Any]]:
        op = QueuedMGet([key_str(k) for k in keys])
        self._queued.append(op)
        self._reads = True
        return op.future

    def set(self, key: str, value: Any, ttl: float | None = None) -> Pending[bool]:
        op = QueuedSet(key_str(key), value, ttl)
        self._queued.append(op)
        self._mixed = self._mixed or self._reads
        return op.future

    def mset(self, items: Mapping[str, Any], ttl: float | None = None) -> Pending[bool]:
        op = QueuedMSet([(key_str(k), v) for k, v in items.items()], ttl)
        self._queued.append(op)
        self._mixed = self._mixed or self._reads
        return op.future

    def setnx(self, key: str, value: Any, ttl: float | None = None) -> Pending[bool]:
        k = key_str(key)
        return self._add(lambda c: c.setnx(k, value, ttl), writes=(k,))

    def getset(self, key: str, value: Any, ttl: float | None = None) -> Pending[Any]:
        k = key_str(key)
        return self._add(lambda c: c.getset(k, value, ttl), writes=(k,))

    def incr(self, key: str) -> Pending[int]:
        return self.incrby(key, 1)

    def incrby(self, key: str, delta: int) -> Pending[int]:
        k = key_str(key)
        return self._add(lambda c: c.incrby(k, delta), writes=(k,))

    def delete(self, *keys: str) -> Pending[int]:
        ks = tuple(key_str(k) for k in keys)
        return self._add(lambda c: c.delete_many(ks), writes=ks)

    def exists(self, key: str) -> Pending[bool]:
        k = key_str(key)
        return self._add(lambda c: c.exists(k))

    def ttl(self, key: str) -> Pending[int]:
        k = key_str(key)
        return self._add(lambda c: c.ttl_of(k))

    def expire(self, key: str, seconds: float | None) -> Pending[bool]:
        k = key_str(key)
        return self._add(lambda c: c.expire(k, seconds), writes=(k,))

    def persist(self, key: str) -> Pending[bool]:
        return self.expire(key, None)

    # -- running ----------------------------------------------------------------------------
    def _take(self, core: MapCore, cluster: bool) -> tuple[list[Queued], Flow[list[Any]], list[Span]]:
        """The queued ops, the one flow that runs them all (its result: one entry per flow),
        and per op the Span of its results. `cluster`: the executor is a cluster's (the
        fast path sends one plan per bucket; a transaction checks it stays in one slot)."""
        queued, self._queued = self._queued, []
        mixed, self._mixed, self._reads = self._mixed, False, False
        if self.transaction and core.fallback:
            raise TransactionError(
                f"map {core.namespace!r} has a migration in progress ({core.fallback!r}): a "
                "transaction cannot read or move the plain keys atomically; finish the migration "
                "(or use a batch without transaction=True)")
        if self.transaction or core.fallback:
            flows = [_flow_of(core, q) for q in queued]
            spans: list[Span] = [(i, -1, -1) for i in range(len(queued))]
            if self.transaction:
                return queued, transaction(core.namespace, flows, cluster), spans
            return queued, gather(flows), spans
        flows = []
        spans = []
        prefetch = _later_writes(queued) if mixed else _NONE
        run_from = 0  # queued[run_from:n] is the current run of gets and sets
        items = 0
        for n, op in enumerate(queued):
            if isinstance(op, QueuedFlow):
                if run_from < n:
                    flows.append(run_fast(core, queued[run_from:n], prefetch, run_from, cluster))  # type: ignore[arg-type]
                spans.append((len(flows), -1, -1))
                flows.append(op.make(core))
                run_from, items = n + 1, 0
                continue
            size = len(op.keys) if isinstance(op, QueuedMGet) else len(op.items) if isinstance(op, QueuedMSet) else 1
            spans.append((len(flows), items, items + size))
            items += size
        if run_from < len(queued):
            flows.append(run_fast(core, queued[run_from:], prefetch, run_from, cluster))  # type: ignore[arg-type]
        return queued, gather(flows), spans

    @staticmethod
    def _settle(queued: list[Queued], spans: list[Span], results: list[Any]) -> list[Any]:
        out = []
        for op, (f, start, stop) in zip(queued, spans):
            value: Any
            if isinstance(op, QueuedGet):
                v = results[f] if start < 0 else results[f][start]
                value = op.default if v is MISSING else v
            elif isinstance(op, (QueuedSet, QueuedMSet)):
                value = True
            elif isinstance(op, QueuedMGet):
                value = [None if v is MISSING else v for v in (results[f] if start < 0 else results[f][start:stop])]
            else:
                value = results[f]
            op.future.fulfil(value)
            out.append(value)
        return out


def _flow_of(core: MapCore, op: Queued) -> Flow[Any]:
    """An op as its own flow (transactions, and batches during a migration)."""
    if isinstance(op, QueuedGet):
        return core.get(op.key, prefetch=True)
    if isinstance(op, QueuedMGet):
        return core.get_many(op.keys, prefetch=True)
    if isinstance(op, QueuedSet):
        return core.set(op.key, op.value, op.ttl)
    if isinstance(op, QueuedMSet):
        return core.set_many(op.items, op.ttl)
    return op.make(core)


def _later_writes(queued: list[Queued]) -> dict[int, Any]:
    """Gets whose key a later op of the batch writes: their index -> True (an mget: a
    flag per key)."""
    later: set[str] = set()
    out: dict[int, Any] = {}
    for n in range(len(queued) - 1, -1, -1):
        op = queued[n]
        if isinstance(op, QueuedSet):
            later.add(op.key)
        elif isinstance(op, QueuedMSet):
            later.update(k for k, _ in op.items)
        elif isinstance(op, QueuedFlow):
            later.update(op.writes)
        elif later:
            if isinstance(op, QueuedGet):
                if op.key in later:
                    out[n] = True
            else:
                out[n] = [k in later for k in op.keys]
    return out


# --- transactions ---------------------------------------------------------------------


def transaction(namespace: str, flows: Sequence[Flow[Any]], cluster: bool) -> Flow[list[Any]]:
    """The flows' first round trips as one MULTI/EXEC, preceded by SCRIPT LOAD of the
    scripts it calls (same round trip, same connection: EVALSHA inside the MULTI cannot
    miss); then whatever they still need, which may only be dictionary loads. Every flow
    is started (values framed and refused) before anything is sent."""
    lock = Lockstep(flows)
    steps: list[Command] = []
    parts: list[tuple[Plan[Any], int, int]] = []
    scripts: dict[str, Any] = {}
    for plan in lock.plans():
        start = len(steps)
        for st in plan.steps:
            if isinstance(st, ScriptCall):
                scripts.setdefault(st.script.sha, st.script)
                steps.append(Command(st.evalsha, st.keys))
            else:
                steps.append(st)
        parts.append((plan, start, len(steps)))
    if steps:
        keys = [k for st in steps for k in st.keys]
        if cluster:
            slots = {key_slot(k.encode() if isinstance(k, str) else k) for k in keys}
            if len(slots) > 1:
                raise TransactionError(
                    f"this transaction touches keys in {len(slots)} cluster slots; a cluster runs a "
                    "transaction in one slot only: keep its keys in one bucket (same prefix and the "
                    "same id modulo the bucket count, see m.explain()['buckets']), or split it")
        anchor = tuple(keys[:1])  # routes the SCRIPT LOADs to the transaction's node
        wire: list[Plan[Any]] = [Plan((Command(("SCRIPT", "LOAD", s.source), anchor),)) for s in scripts.values()]
        wire.append(Plan(tuple(steps), atomic=True))
        replies = (yield wire)[-1]
        lock.advance([plan.decode(replies[a:b]) for plan, a, b in parts])
    allowed = dictionary_key(namespace)  # immutable: loading one after EXEC is still consistent
    for ask in lock.pending.values():
        if not isinstance(ask, list) or any(k != allowed for plan in ask for st in plan.steps for k in st.keys):
            raise TransactionError("a transaction op needed a second round trip that is not a "
                                   "dictionary load (a bug: please report it)")
    return (yield from lock.run())


class MapBatch(BatchOps):
    """Operations queued and sent together: `execute()` returns their results in order (and
    fills each Pending), like a redis-py pipeline. As a context manager it executes on exit.

    transaction=False: one round trip, plus one only for an out-of-line value or a
    dictionary not seen yet (or a migration fallback). transaction=True: every op in one
    MULTI/EXEC (see the module docstring for what that guarantees and refuses)."""

    def __init__(self, core: MapCore, run: Callable[[Flow[list[Any]]], list[Any]], cluster: bool,
                 transaction: bool = False) -> None:
        super().__init__(transaction)
        self._core, self._run, self._cluster = core, run, cluster

    def execute(self) -> list[Any]:
        queued, flow, spans = self._take(self._core, self._cluster)
        return self._settle(queued, spans, self._run(flow))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is None:
            self.execute()


class AsyncMapBatch(BatchOps):
    """The asyncio twin of MapBatch (`await b.execute()`, `async with`)."""

    def __init__(self, ready: Callable[[], Awaitable[MapCore]],
                 run: Callable[[Flow[list[Any]]], Awaitable[list[Any]]], cluster: bool,
                 transaction: bool = False) -> None:
        super().__init__(transaction)
        self._ready, self._run, self._cluster = ready, run, cluster

    async def execute(self) -> list[Any]:
        core = await self._ready()
        queued, flow, spans = self._take(core, self._cluster)
        return self._settle(queued, spans, await self._run(flow))

    async def __aenter__(self) -> Self:
        await self._ready()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is None:
            await self.execute()
