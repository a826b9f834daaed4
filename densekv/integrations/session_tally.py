"""What the metrics integrations count, without their libraries: one `Tally` per observed
store, and the `Active` count of its sessions.

A `Tally` is the store's observer (densekv/sessions/events.py): each operation, event and
payload size adds to plain dicts under one lock (a dict update and a bisect, well under a
microsecond), and the exporters read them when scraped: densekv/integrations/prometheus.py
turns them into metric families at each scrape (a custom collector: no prometheus_client
object is touched per operation), densekv/integrations/otel.py into observable counters
(its histograms are recorded per operation: the OpenTelemetry API has no other way in).

`Active` counts a store's sessions at most once per `every` seconds, and says how:
  * partitioned layouts (dense, zset, fieldttl): `store.count()` runs one small script per
    partition (HLEN-like, lua/part_len.lua; ~1 ms per 100 partitions): exact, of the records
    stored, so expired ones that no sweep removed yet are counted too (method
    "partition_counts", estimated "false");
  * one key per session (json, packed, hash): a SCAN of the whole database (every key
    visited, ~1 s per million keys on one core of the server): keys expiring or a rehash
    during the scan may miscount a few (method "scan", estimated "true");
  * `stats=True` counts with `store.stats()` instead, which adds the split and out-of-line
    sessions stored: a SCAN of the database for every layout.
Its refresh is timed (`refresh_seconds`), so the cost is in the metrics themselves.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from bisect import bisect_left
from typing import Any

from densekv.sessions.events import SessionEvent

__all__ = ["LATENCY_BUCKETS", "NAMES", "SIZE_BUCKETS", "Active", "Tally", "namespace_of", "retire"]

#: every metric family the observers export, in prometheus.py and otel.py alike (a
#: dashboard's names, without the exposition's _total / _bucket / _sum / _count suffixes)
NAMES = (
    "densekv_session_operations", "densekv_session_operation_seconds", "densekv_session_errors",
    "densekv_sessions_created", "densekv_sessions_rotated", "densekv_sessions_destroyed",
    "densekv_sessions_expired", "densekv_session_payload_bytes", "densekv_session_read_split_ratio",
    "densekv_session_read_out_of_line_ratio", "densekv_sessions_active",
    "densekv_sessions_active_refresh_seconds", "densekv_sessions_active_age_seconds",
    "densekv_sessions_stored_split", "densekv_sessions_stored_out_of_line",
)

log = logging.getLogger("densekv.sessions")

#: seconds: a session operation on loopback takes 50-500 us, a sweep or count up to seconds
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.01, 0.05, 0.25, 1.0, 5.0)
#: bytes of a stored payload (after compression; max_data_bytes is 64 KiB by default)
SIZE_BUCKETS = (64, 128, 256, 512, 1024, 4096, 16384, 65536)


def namespace_of(store: Any, namespace: str | None) -> str:
    """The namespace label of a store: given, or the store's (every store knows it from
    its constructor; an object without one can be given namespace=)."""
    if namespace is not None:
        return namespace
    try:
        return str(store.namespace)
    except RuntimeError:
        raise RuntimeError("this AsyncSessionStore is not ready: await store.ready() first, "
                           "or give namespace=") from None


class Tally:
    """The counts of one store (its observer)."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.lock = threading.Lock()
        # (operation, error type or None) -> latency bucket counts (+Inf last), then the sum
        self.calls: dict[tuple[str, str | None], list[float]] = {}
        self.events: dict[tuple[str, str, str], int] = {}  # (kind, cause, found_by or "") -> events
        self.sizes: list[float] = [0] * (len(SIZE_BUCKETS) + 2)  # buckets, +Inf, sum
        self.active: Active | None = None
        self.store: Any = None  # the store observed (read_shares), set by the exporter (watch)

    # -- the observer (events.py) ----------------------------------------------------------
    def on_operation(self, name: str, seconds: float, error: str | None) -> None:
        # one dict entry per (operation, error): its latency buckets, sum and count; the
        # operations and errors counters are summed from them when read
        with self.lock:
            row = self.calls.get((name, error))
            if row is None:
                row = self.calls[(name, error)] = [0] * (len(LATENCY_BUCKETS) + 2)
            row[bisect_left(LATENCY_BUCKETS, seconds)] += 1
            row[-1] += seconds

    def on_event(self, event: SessionEvent) -> None:
        key = (event.kind, event.cause, event.found_by or "")
        with self.lock:
            self.events[key] = self.events.get(key, 0) + 1

    def on_payloads(self, sizes: list[int]) -> None:
        with self.lock:
            row = self.sizes
            for n in sizes:
                row[bisect_left(SIZE_BUCKETS, n)] += 1
                row[-1] += n

    # -- for the exporters -------------------------------------------------------------------
    def watch(self, store: Any, active_every: float | None, stats: bool) -> None:
        """Hold `store` (read_shares, unobserve) and, with `active_every`, count its sessions
        at most that often (Active; an async store's first count starts now, so that the
        first scrape has one)."""
        self.store = store
        if active_every is not None:
            self.active = Active(store, active_every, stats)
            if self.active.is_async:
                self.active.kick()

    def absorb(self, other: Tally) -> None:
        """Add `other`'s counts to these (retire: a store gone keeps what it counted)."""
        with other.lock:
            calls = {k: list(v) for k, v in other.calls.items()}
            events, sizes = dict(other.events), list(other.sizes)
        with self.lock:
            for k, row in calls.items():
                have = self.calls.get(k)
                self.calls[k] = row if have is None else [a + b for a, b in zip(have, row)]
            for event, n in events.items():
                self.events[event] = self.events.get(event, 0) + n
            self.sizes = [a + b for a, b in zip(self.sizes, sizes)]

    def snapshot(self) -> dict[str, Any]:
        """A consistent copy of every count."""
        with self.lock:
            calls = {k: list(v) for k, v in self.calls.items()}
            events, sizes = dict(self.events), list(self.sizes)
        ops: dict[tuple[str, str], int] = {}
        errors: dict[str, int] = {}
        latency: dict[str, list[float]] = {}
        for (name, error), row in calls.items():
            n = int(sum(row[:-1]))
            ops[(name, error or "ok")] = n
            if error is not None:
                errors[error] = errors.get(error, 0) + n
            have = latency.get(name)
            latency[name] = row if have is None else [a + b for a, b in zip(have, row)]
        return {"ops": ops, "errors": errors, "events": events, "latency": latency, "sizes": sizes}

    def read_shares(self) -> tuple[float, float] | None:
        try:
            return self.store.read_shares() if self.store is not None else None
        except RuntimeError:  # an async store not ready yet
            return None


def cumulative(row: list[float], bounds: tuple[float, ...]) -> tuple[list[tuple[float, float]], float, float]:
    """(upper bound, cumulative count) per bucket with +Inf last, the sum and the count."""
    out, total = [], 0.0
    for bound, n in zip((*bounds, float("inf")), row[:-1]):
        total += n
        out.append((bound, total))
    return out, row[-1], total


class Active:
    """The sessions a store holds, counted at most once per `every` seconds (see the module
    docstring for what each layout's count costs), only when the metrics are read: a sync
    store is counted by the thread that reads them (a scrape), when the last count is older
    than `every`; an async store by a task on the event loop it was observed from, which a
    scrape starts when the count is due and does not wait for (it reports the last count;
    the first is started when the store is observed)."""

    def __init__(self, store: Any, every: float, stats: bool) -> None:
        self.store, self.every, self.stats = store, float(every), stats
        self.is_async = inspect.iscoroutinefunction(store.count)
        self.loop: asyncio.AbstractEventLoop | None = None
        if self.is_async:
            try:
                self.loop = asyncio.get_running_loop()
            except RuntimeError:
                raise RuntimeError("watch an AsyncSessionStore from its event loop (in a startup "
                                   "hook, or where the store is made)") from None
        self.value: int | None = None
        self.split: int | None = None
        self.out_of_line: int | None = None
        self.method = "?"
        self.estimated = True
        self.refresh_seconds: float | None = None
        self.refreshed_at: float | None = None  # time.monotonic()
        self.next_at = 0.0
        self.lock = threading.Lock()
        self.running = False
        self.task: asyncio.Future[None] | None = None

    def due(self) -> bool:
        return not self.running and time.monotonic() >= self.next_at

    def kick(self) -> None:
        """Start a count if one is due and none runs: a sync store's now (in this thread),
        an async store's as a task on its loop."""
        with self.lock:
            if not self.due():
                return
            self.running = True
            self.next_at = time.monotonic() + self.every
        if not self.is_async:
            try:
                self._take(self._count_sync())
            finally:
                self.running = False
            return
        assert self.loop is not None
        if self.loop.is_closed():
            self.running = False
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self.task = self.loop.create_task(self._count_async())
        else:
            self.task = asyncio.run_coroutine_threadsafe(self._count_async(), self.loop)  # type: ignore[assignment]

    def refresh(self) -> None:
        """A sync store: count now (whatever `every` says)."""
        self.next_at = 0.0
        self.kick()

    def _count_sync(self) -> tuple[Any, float, dict[str, Any]] | None:
        start = time.perf_counter()
        try:
            got = self.store.stats() if self.stats else self.store.count()
        except Exception:
            log.exception("densekv: counting the sessions of %r for metrics failed", self.store)
            return None
        return got, time.perf_counter() - start, self.store.explain()

    async def _count_async(self) -> None:
        start = time.perf_counter()
        try:
            got = await (self.store.stats() if self.stats else self.store.count())
            seconds = time.perf_counter() - start
            explained = await self.store.explain()
        except Exception:
            log.exception("densekv: counting the sessions of %r for metrics failed", self.store)
            return
        finally:
            self.running = False
        self._take((got, seconds, explained))

    async def arefresh(self) -> None:
        """An async store: count now, in this task (whatever `every` says)."""
        self.running = True
        self.next_at = time.monotonic() + self.every
        await self._count_async()

    def _take(self, done: tuple[Any, float, dict[str, Any]] | None) -> None:
        if done is None:
            return
        got, seconds, explained = done
        if isinstance(got, dict):
            self.value = int(got["sessions"])
            self.split, self.out_of_line = got.get("split_sessions"), got.get("out_of_line_sessions")
        else:
            self.value = int(got)
        partitioned = bool(explained.get("partitions"))
        self.method = "partition_counts" if partitioned else "scan"
        self.estimated = not partitioned
        self.refresh_seconds = seconds
        self.refreshed_at = time.monotonic()


def retire(tallies: list[Tally], store: Any) -> None:
    """Stop observing `store` and keep what its tallies counted: each is folded into one
    retired tally per namespace (no store, no active count), so that a counter never falls
    and an app that makes a store per event loop (Django's async views) holds one retired
    tally per namespace, not one per loop it ever ran."""
    for tally in [t for t in tallies if t.store is store]:
        store.unobserve(tally)
        tallies.remove(tally)
        kept = next((t for t in tallies if t.store is None and t.namespace == tally.namespace), None)
        if kept is None:
            kept = Tally(tally.namespace)
            tallies.append(kept)
        kept.absorb(tally)
