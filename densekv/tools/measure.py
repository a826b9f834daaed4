"""The one honest memory meter: every byte count densekv prints comes from here.

A reading is INFO memory's used_memory taken when the server is quiet:
  * after a flush, only once FLUSHALL SYNC / FLUSHDB SYNC has returned *and*
    lazyfree_pending_objects is 0 (Valkey 8+ and Redis 7+ with lazyfree-lazy-user-flush
    free lazily: a reading right after a plain FLUSHALL still holds the old data set);
  * once no main hashtable is rehashing (mem_overhead_db_hashtable_rehashing, where the
    server reports it) and used_memory has stopped moving (on Redis 7.0, which reports
    no rehash state, a longer quiet window is required);
  * with the loading clients' connections closed, so their query and reply buffers do
    not count as data;
  * after the meter has run each of its own commands once (RANDOMKEY, MEMORY USAGE,
    OBJECT ENCODING, SCAN, DBSIZE) on a key that does not exist: with latency-tracking on
    (the default since Redis 7), a server allocates a ~25 KB latency histogram the first
    time it runs a command name, and that must not land inside the first delta taken.
    The same holds for the commands of the load itself, so callers warm those up before
    the baseline (a small load, flushed); a scratch server is best started with
    `slowlog-log-slower-than -1` too, as slowlog entries (~1 KB each) are not data either.
Bytes per item = (reading - baseline) / items, at several N (readings net of the change in
client buffer memory, mem_clients_normal, and in replication buffers on a master with
replicas: see Reading.minus), so fixed costs and encoding
conversions show up as a curve and not as a single misleading number. A sample of
MEMORY USAGE is reported beside it as a cross-check (it prices keys one by one and
misses the main dict's buckets, so it is expected to be somewhat lower).

The meter flushes only a target it owns: it refuses a non-empty server/database unless
told `clear=True`, so pointing it at a user's data cannot wipe that data by accident.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from densekv.errors import MeterError as _MeterError

QUIET_WINDOW = 0.15  # seconds used_memory must hold still (servers that report rehashing)
QUIET_WINDOW_BLIND = 1.2  # ... on servers that do not (Redis < 7.4)
STABLE_BYTES = 256  # INFO itself allocates a little; changes below this are "still"


@dataclass(frozen=True)
class Reading:
    used_memory: int
    clients_memory: int  # INFO mem_clients_normal: connection buffers, not data
    keys: int
    taken_at: float
    #: INFO mem_replication_backlog + mem_clients_slaves: what a master keeps for its
    #: replicas, not data (0 without replicas). The backlog grows with the write stream up
    #: to repl-backlog-size (1 MB by default) and stays after a flush.
    replication_memory: int = 0

    def minus(self, base: Reading) -> int:
        """Bytes of data added since `base`: the used_memory delta less the change in
        client memory and in replication buffers. A connection's reply buffer starts at
        16 KB and the server shrinks it when it has been idle a while (Redis 7+, Valkey),
        so the meter's own connection alone swings ~15 KB between readings, at random
        moments; a master's backlog grew 543 KB while 6,700 SETs of 50-byte values were
        written to it (valkey 9.1 with one replica)."""
        return ((self.used_memory - base.used_memory) - (self.clients_memory - base.clients_memory)
                - (self.replication_memory - base.replication_memory))


@dataclass(frozen=True)
class Point:
    n: int
    used_memory_delta: int
    bytes_per_item: float
    memory_usage_bytes_per_item: float | None = None


@dataclass(frozen=True)
class Curve:
    """Bytes per item at several N on one server: what the lab and benchmarks report."""

    label: str
    server: str
    version: str
    allocator: str
    baseline: int
    points: tuple[Point, ...] = field(default=())

    @property
    def final(self) -> Point:
        return self.points[-1]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["points"] = [asdict(p) for p in self.points]
        return data


def _info_memory(client: redis.Redis) -> dict[str, Any]:
    return client.info("memory")


class Meter:
    """Honest used_memory deltas on a server (scope="server") or one database ("db")."""

    def __init__(self, client: redis.Redis, *, scope: str = "server", clear: bool = False):
        if scope not in ("server", "db"):
            raise ValueError("scope is 'server' or 'db'")
        if isinstance(client, redis.RedisCluster):
            raise _MeterError("measure one node, not a cluster: pass a plain client")
        self.client = client
        self.scope = scope
        info = client.info("server")
        self.server = "valkey" if "valkey_version" in info else "redis"
        self.version = str(info.get("valkey_version") or info["redis_version"])
        self.allocator = str(_info_memory(client).get("mem_allocator", "unknown"))
        self._reports_rehash = "mem_overhead_db_hashtable_rehashing" in _info_memory(client)
        self._prime()
        if not clear and self._key_count() > 0:
            where = "server" if scope == "server" else "database"
            raise _MeterError(
                f"the {where} to measure is not empty: the meter flushes it, so give it a "
                "dedicated server or database (or clear=True if its data may go)"
            )
        self.baseline = 0
        self.base_reading: Reading | None = None

    # -- primitives ---------------------------------------------------------------
    PRIME_KEY = b"densekv:meter:never-written"

    def _prime(self) -> None:
        """Run once the read-only commands the meter (and the lab's observers) send, on a
        key that does not exist, so their one-time latency histograms exist before any
        baseline (see the module docstring). Nothing is written."""
        pipe = self.client.pipeline(transaction=False)
        # redis-py leaves execute_command untyped
        pipe.execute_command("RANDOMKEY")  # type: ignore[no-untyped-call]
        pipe.execute_command("MEMORY", "USAGE", self.PRIME_KEY, "SAMPLES", "0")  # type: ignore[no-untyped-call]
        pipe.execute_command("OBJECT", "ENCODING", self.PRIME_KEY)  # type: ignore[no-untyped-call]
        pipe.execute_command("SCAN", "0", "MATCH", self.PRIME_KEY, "COUNT", "1")  # type: ignore[no-untyped-call]
        pipe.execute_command("DBSIZE")  # type: ignore[no-untyped-call]
        pipe.execute(raise_on_error=False)

    def _key_count(self) -> int:
        if self.scope == "db":
            return int(self.client.dbsize())
        keyspace = self.client.info("keyspace")
        return sum(int(db.get("keys", 0)) for db in keyspace.values() if isinstance(db, dict))

    def flush(self) -> None:
        """FLUSHALL/FLUSHDB SYNC, then wait until no object is pending a lazy free."""
        self.client.execute_command(  # type: ignore[no-untyped-call]  # redis-py: untyped
            "FLUSHALL" if self.scope == "server" else "FLUSHDB", "SYNC"
        )
        self._wait(lambda m: int(m.get("lazyfree_pending_objects", 0)) == 0, "lazy free")

    def _wait(self, ok: Callable[[dict[str, Any]], bool], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not ok(_info_memory(self.client)):
            if time.monotonic() > deadline:
                raise _MeterError(f"the server did not finish its {what} within {timeout:.0f}s")
            time.sleep(0.01)

    def settle(self, timeout: float = 60) -> dict[str, Any]:
        """Wait for lazy frees, rehashing and used_memory to stop; return INFO memory."""
        window = QUIET_WINDOW if self._reports_rehash else QUIET_WINDOW_BLIND
        deadline = time.monotonic() + timeout
        last: dict[str, Any] | None = None
        still_since = time.monotonic()
        while True:
            mem = _info_memory(self.client)
            busy = int(mem.get("lazyfree_pending_objects", 0)) > 0 or int(
                mem.get("mem_overhead_db_hashtable_rehashing", 0)
            ) > 0
            now = time.monotonic()
            if busy or last is None or abs(mem["used_memory"] - last["used_memory"]) > STABLE_BYTES:
                still_since = now
            elif now - still_since >= window:
                return mem
            if now > deadline:
                raise _MeterError(f"used_memory did not settle within {timeout:.0f}s")
            last = mem
            time.sleep(0.03)

    def reading(self) -> Reading:
        mem = self.settle()
        return Reading(
            used_memory=int(mem["used_memory"]),
            clients_memory=int(mem.get("mem_clients_normal", 0)),
            keys=self._key_count(),
            taken_at=time.time(),
            replication_memory=int(mem.get("mem_replication_backlog", 0)) + int(mem.get("mem_clients_slaves", 0)),
        )

    # -- what callers use ---------------------------------------------------------------
    def reset(self) -> Reading:
        """Flush the target and take the baseline that deltas are measured from."""
        self.flush()
        return self.rebase()

    def rebase(self) -> Reading:
        """Take the baseline now, without flushing (what is there already is not counted)."""
        base = self.reading()
        self.baseline = base.used_memory
        self.base_reading = base
        return base

    def delta(self) -> int:
        """Bytes of data added since the baseline (see Reading.minus)."""
        if self.base_reading is None:
            raise _MeterError("take a baseline first: reset() or rebase()")
        return self.reading().minus(self.base_reading)

    def memory_usage_per_item(self, items: int, samples: int = 200) -> float | None:
        """MEMORY USAGE of random keys, scaled to the key count, per item."""
        keys = self._key_count()
        if keys == 0 or items == 0:
            return None
        seen: dict[bytes | str, int] = {}  # str keys on a decode_responses client
        for _ in range(min(samples, keys) * 2):
            key = self.client.randomkey()
            if key is None:
                break
            if key not in seen:
                usage = self.client.memory_usage(key, samples=0)
                seen[key] = int(usage or 0)
            if len(seen) >= samples:
                break
        if not seen:
            return None
        return sum(seen.values()) / len(seen) * keys / items

    def curve(
        self,
        label: str,
        load: Callable[[int, int], None],
        checkpoints: Sequence[int],
        *,
        on_point: Callable[[Point], None] | None = None,
    ) -> Curve:
        """Flush, then call load(start, stop) up to each checkpoint and read bytes/item.

        `load` must add items [start, stop) and close any extra connections it opened.
        """
        self.reset()
        points: list[Point] = []
        done = 0
        for n in sorted(set(checkpoints)):
            load(done, n)
            done = n
            delta = self.delta()
            point = Point(
                n=n,
                used_memory_delta=delta,
                bytes_per_item=delta / n,
                memory_usage_bytes_per_item=self.memory_usage_per_item(n),
            )
            points.append(point)
            if on_point is not None:
                on_point(point)
        return Curve(label, self.server, self.version, self.allocator, self.baseline, tuple(points))


def log_checkpoints(n: int, per_decade: int = 3, start: int = 1000) -> list[int]:
    """1000, 2154, 4641, 10000, ... up to and including n (log steps)."""
    points, value = [], float(start)
    factor = 10 ** (1 / per_decade)
    while value < n:
        points.append(round(value))
        value *= factor
    points.append(n)
    return sorted({p for p in points if p <= n})
