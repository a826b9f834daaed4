"""The one flow runtime: what a flow is, and the loops that drive one (sync and asyncio).

A *flow* is a generator that does no I/O. It yields a list of plans (densekv/plan.py; one
list = one round trip), receives their decoded results in the same order, and returns its
result. Every operation of every kind is written once as a flow in its core; the sync and
asyncio shells only drive flows, so the two cannot drift. Everything about driving a flow
lives here, once:
  * `drive(flow, executor)` / `adrive(flow, executor)` run one flow on a sync or cluster
    executor / an asyncio one. An error of a round trip (WrongType, ScriptError,
    ServerUnavailable, a ResponseError) is thrown into the flow at the yield that sent
    it, so a flow may catch it (`retrying`) and its `finally` clauses run at once;
  * `gather(flows)` is a flow that runs several flows together: each round trip carries
    the next plans of every flow not finished, in the order of `flows`; `drive_many` /
    `adrive_many` drive it. A round trip's error is raised out of gather (it cannot say
    whose plan failed) and the unfinished flows are closed;
  * besides plans a flow may yield a `Scan` (the next chunk of keys matching a pattern;
    an empty chunk when the scan is over), a `Sleep` (a pause between batches of a long
    job) or a `Compute` (CPU work the asyncio driver runs in a worker thread, off the event
    loop). A SCAN over a cluster has to visit every node, which only the client knows, so
    the driver answers these with the client's own scan_iter (every primary of a
    RedisCluster), never the flow;
  * `retrying(make, recover)` runs `make()` again after an error of the given types when
    the flow `recover(error)` returns True (sessions: a repartition tombstone re-reads
    the store's metadata and retries on the new partition count).
A flow's yield is never an empty list of plans (an executor would send nothing and the
flow would receive []; flows skip the yield instead).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from densekv.errors import WrongType
from densekv.plan import Plan

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Scan:
    """Ask the driver for the next chunk of at most `batch` keys matching `pattern` (glob,
    bytes), of `type` if given; the empty list once every key was seen. Yield the same
    object again for each chunk: the driver keeps one cursor per Scan object (per drive).
    Like SCAN, a key changed during the walk may be seen or not, and on a cluster a slot
    moved during the walk may be seen twice."""

    pattern: bytes
    batch: int = 100
    count: int = 1000  # SCAN's COUNT hint
    type: str | None = None


@dataclass(frozen=True)
class Sleep:
    """Ask the driver to pause (a long job's courtesy to the server between batches)."""

    seconds: float


@dataclass(frozen=True)
class Compute:
    """Ask the driver to run `work()`, CPU only (no I/O, no shared state the flow's own
    process changes meanwhile without harm), and send its result: drive() calls it in place,
    adrive() in a worker thread (asyncio.to_thread), so that a computation of tens of
    milliseconds (a dictionary's training) does not hold an event loop serving other
    requests. An exception work() raises is thrown into the flow there."""

    work: Callable[[], Any]


def computed(work: Callable[[], T]) -> Flow[T]:
    """work()'s result, asked for as a Compute (in a worker thread under adrive)."""
    return cast("T", (yield Compute(work)))  # a Compute's reply is work()'s result


Ask = list[Plan[Any]] | Scan | Sleep | Compute
#: A flow: yields plans (one list per round trip; receives their results) or a Scan (receives
#: the next chunk of keys) or a Sleep (receives []) or a Compute (receives work()'s result),
#: and returns a T.
Flow = Generator[Ask, list[Any], T]


MAX_CAS_TRIES = 50  # compare-and-set retries while other writers change the same item


def cas_pause(lost: int) -> Flow[None]:
    """After the `lost`-th lost compare-and-set: at once the first time, then a random pause
    of up to 0.5 ms doubling to 20 ms. Two writers of one item can otherwise fall into
    step, one reading just before the other writes every time, until MAX_CAS_TRIES."""
    if lost > 1:
        yield Sleep(random.uniform(0, min(0.02, 0.00025 * 2 ** lost)))


def step(plan: Plan[T]) -> Flow[T]:
    """One plan in its own round trip: `x = yield from step(plan)`."""
    return (yield [plan])[0]  # type: ignore[no-any-return]


# --- scans ------------------------------------------------------------------------------


def _as_bytes(key: Any) -> bytes:
    return key if isinstance(key, bytes) else str(key).encode("utf-8", "surrogateescape")


def scan_chunks(client: Any, scan: Scan) -> Iterator[list[bytes]]:
    """Chunks of the keys a Scan asks for, with a sync client's scan_iter (a RedisCluster's
    visits every primary)."""
    chunk: list[bytes] = []
    for k in client.scan_iter(match=scan.pattern, count=scan.count, _type=scan.type):
        chunk.append(_as_bytes(k))
        if len(chunk) >= scan.batch:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


async def ascan_chunks(client: Any, scan: Scan) -> AsyncIterator[list[bytes]]:
    """The same with an asyncio client."""
    chunk: list[bytes] = []
    async for k in client.scan_iter(match=scan.pattern, count=scan.count, _type=scan.type):
        chunk.append(_as_bytes(k))
        if len(chunk) >= scan.batch:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


# --- drivers ----------------------------------------------------------------------------


class RunsPlans(Protocol):
    """What drive() needs of an executor (executors.SyncExecutor, cluster_executor.ClusterExecutor):
    one round trip of plans, and the client a Scan walks."""

    @property
    def client(self) -> Any: ...

    def run_many(self, plans: Sequence[Plan[Any]], /) -> list[Any]: ...


class RunsPlansAsync(Protocol):
    """What adrive() needs of an asyncio executor (executors.AsyncExecutor, AsyncClusterExecutor)."""

    @property
    def client(self) -> Any: ...

    async def run_many(self, plans: Sequence[Plan[Any]], /) -> list[Any]: ...


def drive(flow: Flow[T], executor: RunsPlans) -> T:
    """Run a flow to its result on a sync (or cluster) executor."""
    scans: dict[Scan, Iterator[list[bytes]]] = {}
    reply: Any = None  # what the first send() must be
    error: Exception | None = None
    try:
        while True:
            ask = flow.send(reply) if error is None else flow.throw(error)
            error = None
            try:
                if type(ask) is list:  # plans: nearly every ask
                    reply = executor.run_many(ask)
                elif isinstance(ask, Scan):
                    if ask not in scans:
                        scans[ask] = scan_chunks(executor.client, ask)
                    reply = next(scans[ask], [])
                elif isinstance(ask, Sleep):
                    time.sleep(ask.seconds)
                    reply = []
                elif isinstance(ask, Compute):
                    reply = ask.work()
                else:
                    reply = executor.run_many(ask)
            except Exception as exc:  # noqa: BLE001  # thrown into the flow at its yield (module doc)
                error = exc
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def adrive(flow: Flow[T], executor: RunsPlansAsync) -> T:
    """Run a flow to its result on an asyncio executor."""
    scans: dict[Scan, AsyncIterator[list[bytes]]] = {}
    reply: Any = None
    error: Exception | None = None
    try:
        while True:
            ask = flow.send(reply) if error is None else flow.throw(error)
            error = None
            try:
                if type(ask) is list:  # plans: nearly every ask (a lone plan: the executor's single path)
                    reply = await executor.run_many(ask)
                elif isinstance(ask, Scan):
                    if ask not in scans:
                        scans[ask] = ascan_chunks(executor.client, ask)
                    reply = await anext(scans[ask], [])
                elif isinstance(ask, Sleep):
                    await asyncio.sleep(ask.seconds)
                    reply = []
                elif isinstance(ask, Compute):
                    reply = await asyncio.to_thread(ask.work)
                else:
                    reply = await executor.run_many(ask)
            except Exception as exc:  # noqa: BLE001  # as in drive()
                error = exc
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def drive_many(flows: Sequence[Flow[Any]], executor: RunsPlans) -> list[Any]:
    """Several flows together, each round trip carrying all their next plans."""
    return drive(gather(flows), executor)


async def adrive_many(flows: Sequence[Flow[Any]], executor: RunsPlansAsync) -> list[Any]:
    return await adrive(gather(flows), executor)


# --- combinators ------------------------------------------------------------------------


class Lockstep:
    """Flows advanced together: `plans()` is the next round trip of all of them, in order;
    `advance(replies)` hands each flow its share. A flow that asks for a Scan, a Sleep or
    a Compute is `asking` until `answer()` resumes it. Used by gather and by flows that send the
    first round trip their own way (a map transaction wraps it in MULTI/EXEC)."""

    def __init__(self, flows: Sequence[Flow[Any]]) -> None:
        self.flows = list(flows)
        self.results: list[Any] = [None] * len(self.flows)
        self.pending: dict[int, Ask] = {}
        for i in range(len(self.flows)):
            self._send(i, None)

    def _send(self, i: int, value: list[Any] | None) -> None:
        try:
            self.pending[i] = self.flows[i].send(value)  # type: ignore[arg-type]  # None starts it
        except StopIteration as done:
            self.pending.pop(i, None)
            self.results[i] = done.value

    def asking(self) -> tuple[int, Scan | Sleep | Compute] | None:
        for i, ask in self.pending.items():
            if not isinstance(ask, list):
                return i, ask
        return None

    def answer(self, i: int, value: list[Any]) -> None:
        self._send(i, value)

    def plans(self) -> list[Plan[Any]]:
        return [p for ask in self.pending.values() if isinstance(ask, list) for p in ask]

    def advance(self, replies: Sequence[Any]) -> None:
        pos = 0
        for i, ask in list(self.pending.items()):
            assert isinstance(ask, list), "answer every Scan/Sleep/Compute before a round trip"
            mine = list(replies[pos : pos + len(ask)])
            pos += len(ask)
            self._send(i, mine)

    def run(self) -> Flow[list[Any]]:
        """The rest of the flows as one flow (what gather is, once started)."""
        try:
            while self.pending:
                while (asking := self.asking()) is not None:
                    self.answer(asking[0], (yield asking[1]))
                if self.pending:
                    self.advance((yield self.plans()))
        finally:
            for i in list(self.pending):
                self.flows[i].close()
        return self.results


def gather(flows: Sequence[Flow[Any]]) -> Flow[list[Any]]:
    """One flow of several: their results, in order (see the module docstring)."""
    return (yield from Lockstep(flows).run())


#: runs of an operation that meets an error `recover` can mend (a repartition's tombstone):
#: retrying's default, and SessionCore.guarded's own loop
RETRY_RUNS = 4


def retrying(make: Callable[[], Flow[T]], recover: Callable[[Exception], Flow[bool]],
             errors: tuple[type[Exception], ...] = (WrongType,), attempts: int = RETRY_RUNS) -> Flow[T]:
    """`make()`'s flow; after an error of `errors`, run `recover(error)` and, if it says
    True, a fresh `make()` (at most `attempts` runs in all). Whatever `make()` builds
    before its first yield is built again on each run."""
    for attempt in range(attempts):
        try:
            return (yield from make())
        except errors as exc:
            if attempt == attempts - 1 or not (yield from recover(exc)):
                raise
    raise AssertionError("unreachable")


__all__ = ["Ask", "Compute", "Flow", "Lockstep", "Scan", "Sleep", "adrive", "adrive_many", "ascan_chunks", "computed", "drive",
           "drive_many", "gather", "retrying", "scan_chunks", "step"]
