"""The honest meter on a Redis/Valkey cluster: densekv.tools.measure.Meter on every master, summed.

A cluster's memory for its data is the sum over its masters of each master's used_memory
delta, each one read by its own `Meter` with every rule of densekv/tools/measure.py (quiet
server, lazy frees drained, client and replication buffers netted out). The masters are
read at the same time (one thread each), so a reading waits for the slowest master's
quiet window, not for the sum of them.

Replicas are not read: each holds a copy of its master's data, so the figures are per
cluster (one copy of the data); a cluster with R replicas per master uses about (1 + R)
times as much in all. Beside the total, each master's own delta is kept
(`ClusterReading.per_master`), and the imbalance is the largest master's delta over the
mean (1.0: an even spread; 3.0 on 3 masters: one master holds everything).

The masters are those serving slots when the meter is built; a failover while measuring
is not followed (the lab measures on a cluster of its own, where nothing fails).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import redis

from densekv.errors import MeterError
from densekv.tools.measure import Meter, Reading


@dataclass(frozen=True)
class ClusterReading(Reading):
    """The sum of one reading per master (`nodes`, in the meter's master order): its
    inherited `minus` is the cluster's delta, the sum of the masters' deltas."""

    nodes: tuple[Reading, ...] = ()

    @classmethod
    def of(cls, nodes: Sequence[Reading]) -> ClusterReading:
        return cls(
            used_memory=sum(r.used_memory for r in nodes),
            clients_memory=sum(r.clients_memory for r in nodes),
            keys=sum(r.keys for r in nodes),
            taken_at=max(r.taken_at for r in nodes),
            replication_memory=sum(r.replication_memory for r in nodes),
            nodes=tuple(nodes),
        )

    def per_master(self, base: ClusterReading) -> list[int]:
        """Each master's bytes of data added since `base` (they sum to `minus(base)`)."""
        if len(base.nodes) != len(self.nodes):
            raise MeterError("readings of different clusters: the masters changed")
        return [r.minus(b) for r, b in zip(self.nodes, base.nodes)]


def imbalance(deltas: Sequence[int]) -> float | None:
    """The largest master's delta over the mean delta (None when nothing was added)."""
    if not deltas:
        return None
    mean = sum(deltas) / len(deltas)
    return max(deltas) / mean if mean > 0 else None


def _credentials(cluster: redis.RedisCluster) -> dict[str, Any]:
    kwargs = cluster.nodes_manager.connection_kwargs
    return {k: kwargs[k] for k in ("username", "password") if kwargs.get(k) is not None}


class ClusterMeter(Meter):
    """Honest used_memory deltas of a cluster: the sum over its masters (see the module
    docstring). Takes the cluster client; opens one plain connection pool per master,
    closed by `close()`. Meter's reset, rebase, delta and curve work unchanged on it."""

    def __init__(self, cluster: redis.RedisCluster, *, clear: bool = False):  # noqa: PLW0231
        # Meter.__init__ is not called: it reads one server; each master gets its own Meter
        if not isinstance(cluster, redis.RedisCluster):
            raise MeterError("ClusterMeter measures a cluster: pass a redis.RedisCluster (else use Meter)")
        self.scope = "server"
        extra = _credentials(cluster)
        primaries = cluster.get_primaries()  # type: ignore[no-untyped-call]  # redis-py: untyped
        self.names = [f"{n.host}:{n.port}" for n in primaries]
        self.clients = [redis.Redis(host=n.host, port=n.port, **extra) for n in primaries]
        try:
            self.meters = [Meter(c, clear=clear) for c in self.clients]
        except BaseException:
            self.close()
            raise
        first = self.meters[0]
        self.server, self.version, self.allocator = first.server, first.version, first.allocator
        self.baseline = 0
        self.base_reading: Reading | None = None
        self.last: ClusterReading | None = None  # the latest reading, for per_master()
        self._pool = ThreadPoolExecutor(max_workers=len(self.meters), thread_name_prefix="densekv-meter")

    def close(self) -> None:
        if hasattr(self, "_pool"):
            self._pool.shutdown(wait=True)
        for c in self.clients:
            c.close()

    def _each(self, work: Any) -> list[Any]:
        return list(self._pool.map(work, self.meters))

    def _key_count(self) -> int:
        return sum(m._key_count() for m in self.meters)  # noqa: SLF001  # the masters' own Meters

    def flush(self) -> None:
        """FLUSHALL SYNC on every master, each drained of lazy frees (replicas follow)."""
        self._each(lambda m: m.flush())

    def settle(self, timeout: float = 60) -> dict[str, Any]:
        """Every master quiet; returns the masters' INFO memory by name."""
        mems = self._each(lambda m: m.settle(timeout))
        return dict(zip(self.names, mems))

    def reading(self) -> ClusterReading:
        reading = ClusterReading.of(self._each(lambda m: m.reading()))
        self.last = reading
        return reading

    def per_master(self) -> dict[str, int]:
        """Each master's delta at the latest reading since the baseline, by host:port."""
        if self.last is None or not isinstance(self.base_reading, ClusterReading):
            raise MeterError("take a baseline and a reading first")
        return dict(zip(self.names, self.last.per_master(self.base_reading)))

    def memory_usage_per_item(self, items: int, samples: int = 200) -> float | None:
        """MEMORY USAGE sampled on each master (samples shared out), scaled to each
        master's key count, summed, per item."""
        share = max(1, samples // len(self.meters))
        found = [u for u in self._each(lambda m: m.memory_usage_per_item(items, share)) if u is not None]
        return sum(found) if found else None
