"""Writers for the cluster fault tests: threads that run densekv operations (sessions,
set adds, map increments) on their own cluster client and keep a log of what the cluster
acknowledged, so a test can check the data against it afterwards: nothing acknowledged
lost (or, without durable, count what was), nothing duplicated, no given-up token live.

A writer never stops on an error: it records it (time, type, message) and goes on, so
a test can tell how long clients took to recover after a fault.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from densekv import CompactMap, CompactSet, SessionStore, WriteInDoubt
from densekv.tools.server.cluster import LocalCluster

KINDS = ("sessions", "sets", "maps")  # "bulk" (map mset of 200 keys a call) for the benchmark


@dataclass
class Log:
    ok: list[float] = field(default_factory=list)  # when each acknowledged op returned
    errors: list[tuple[float, str]] = field(default_factory=list)
    in_doubt: int = 0
    tokens: dict[str, int] = field(default_factory=dict)  # live token -> n
    given_up: list[str] = field(default_factory=list)  # regenerated or destroyed tokens
    doubtful: set[str] = field(default_factory=set)  # given up by a call that failed
    vanished: int = 0  # acknowledged sessions that regenerate found gone
    items: set[bytes] = field(default_factory=set)
    maybe_items: set[bytes] = field(default_factory=set)
    counts: Counter[str] = field(default_factory=Counter)
    bulk: dict[str, int] = field(default_factory=dict)  # key -> value last acknowledged
    maybe_counts: Counter[str] = field(default_factory=Counter)


class Writer(threading.Thread):
    """One kind of operation in a loop until stop(); `log` is what was acknowledged."""

    def __init__(self, cluster: LocalCluster, kind: str, *, name: str = "w", durable: bool = False,
                 seed: int = 1, pause: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.kind, self.pause = kind, pause
        self.client = cluster.client(socket_timeout=5, socket_connect_timeout=2)
        self.rng = random.Random(seed)
        self.log = Log()
        self._halt = threading.Event()
        self.n = 0
        ns = f"{name}-{kind}"
        if kind == "sessions":
            self.store: Any = SessionStore(self.client, namespace=ns, partitions=4, durable=durable)
        elif kind == "sets":
            self.store = CompactSet(self.client, ns, partitions=4, expected=2000, durable=durable)
        elif kind == "maps":
            self.store = CompactMap(self.client, ns, expected=100, durable=durable)
        else:
            self.store = CompactMap(self.client, ns, expected=20_000, durable=durable)

    def stop(self) -> None:
        self._halt.set()
        self.join(60)
        self.client.close()

    def run(self) -> None:
        while not self._halt.is_set():
            self.n += 1
            try:
                self.step(self.n)
                self.log.ok.append(time.monotonic())
            except WriteInDoubt as exc:
                self.log.in_doubt += 1
                self.log.errors.append((time.monotonic(), f"{type(exc).__name__}: {exc}"))
            except Exception as exc:  # noqa: BLE001  # recorded: the tests assert on them
                self.log.errors.append((time.monotonic(), f"{type(exc).__name__}: {exc}"))
            if self.pause:
                time.sleep(self.pause)

    def step(self, n: int) -> None:
        log = self.log
        if self.kind == "sessions":
            if n % 5 == 0 and log.tokens:
                old = self.rng.choice(list(log.tokens))
                value = log.tokens.pop(old)
                log.doubtful.add(old)  # until the cluster answers
                new = self.store.regenerate(old)
                log.doubtful.discard(old)
                log.given_up.append(old)
                if new is None:  # lost in a failover before: counted as lost
                    log.vanished += 1
                else:
                    log.tokens[new] = value
            elif n % 7 == 0 and log.tokens:
                old = self.rng.choice(list(log.tokens))
                del log.tokens[old]
                log.doubtful.add(old)
                self.store.destroy(old)
                log.doubtful.discard(old)
                log.given_up.append(old)
            else:
                log.tokens[self.store.create(n % 8, {"n": n})] = n
        elif self.kind == "sets":
            item = self.rng.randbytes(16)
            log.maybe_items.add(item)
            added = self.store.add(item)
            log.maybe_items.discard(item)
            assert added, "a fresh random item was reported present"
            log.items.add(item)
        elif self.kind == "bulk":
            items = {f"b{(n * 200 + j) % 20_000}": n for j in range(200)}
            self.store.mset(items)
            log.bulk.update(items)
        else:
            key = f"k{n % 40}"
            log.maybe_counts[key] += 1
            value = self.store.incr(key)
            log.maybe_counts[key] -= 1
            log.counts[key] += 1
            assert value >= log.counts[key], f"{key} went back: {value} < {log.counts[key]}"


@dataclass
class Check:
    """What a writer's log says against the data: lost acknowledged writes, duplicates,
    given-up tokens that are live again."""

    kind: str
    acknowledged: int
    lost: int
    duplicated: int
    revived: int


def check(writer: Writer) -> Check:
    log, store = writer.log, writer.store
    lost = duplicated = revived = 0
    if writer.kind == "sessions":
        for token, n in log.tokens.items():
            s = store.get(token)
            if s is None:
                lost += 1
            elif s.data != {"n": n}:
                duplicated += 1
        lost += log.vanished
        revived = sum(1 for t in log.given_up if store.get(t) is not None)
        acknowledged = len(log.tokens) + len(log.given_up)
    elif writer.kind == "sets":
        present = store.contains_many(list(log.items)) if log.items else []
        lost = sum(1 for p in present if not p)
        maybe = len(log.maybe_items)
        duplicated = max(0, store.count() - (len(log.items) - lost) - maybe)
        acknowledged = len(log.items)
    elif writer.kind == "bulk":
        keys = list(log.bulk)
        for lo in range(0, len(keys), 1000):
            chunk = keys[lo : lo + 1000]
            lost += sum(1 for k, v in zip(chunk, store.mget(chunk)) if v != log.bulk[k])
        acknowledged = len(keys)
    else:
        for key, count in log.counts.items():
            value = store.get(key) or 0
            if value < count:
                lost += count - value
            elif value > count + log.maybe_counts[key]:
                duplicated += value - count - log.maybe_counts[key]
        acknowledged = sum(log.counts.values())
    return Check(writer.kind, acknowledged, lost, duplicated, revived)


def stall_after(writer: Writer, since: float) -> float:
    """The longest wait for an acknowledgement after `since` (from `since` to the first
    op acknowledged after it, or between two acknowledged ops): how long the writer's
    client was stuck. The executor rides out a failover inside the call, so a client
    that recovers by itself shows a stall, not an error."""
    times = [since] + [t for t in writer.log.ok if t > since]
    if len(times) == 1:
        return float("inf")
    return max(b - a for a, b in itertools.pairwise(times))


def busiest_master(cluster: LocalCluster) -> Any:
    """The master that serves the most keys right now (the writers' partitions)."""
    counts: Counter[int] = Counter()
    for node in cluster.primaries():
        with node.client() as c:
            counts[node.port] = sum(1 for _ in c.scan_iter(count=1000))
    port = counts.most_common(1)[0][0]
    return next(n for n in cluster.nodes if n.port == port)
