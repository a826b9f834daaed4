"""A throwaway Redis/Valkey cluster of N masters on loopback, for tests and the lab.

Built the way an operator would by hand: N processes with cluster-enabled, the 16384
slots split into N ranges with CLUSTER ADDSLOTSRANGE, the nodes introduced with
CLUSTER MEET, then a wait until every node says cluster_state:ok and sees all N masters.
No replicas: this is for behaviour (slot routing, hash tags), not for failover.
"""

from __future__ import annotations

import time

import redis

from densekv.errors import ServerStartFailed
from densekv.server.binaries import ServerBinary
from densekv.server.process import ServerProcess, free_port, port_in_use

SLOTS = 16384


def _cluster_port() -> int:
    """A free port whose cluster-bus port (port + 10000) is free too."""
    for _ in range(100):
        port = free_port()
        if port + 10000 < 65536 and not port_in_use(port + 10000):
            return port
    raise ServerStartFailed("no free pair of loopback ports for a cluster node")


def slot_ranges(masters: int) -> list[tuple[int, int]]:
    """Split 0..16383 into `masters` contiguous inclusive ranges."""
    step, rest = divmod(SLOTS, masters)
    ranges, start = [], 0
    for i in range(masters):
        end = start + step + (1 if i < rest else 0) - 1
        ranges.append((start, end))
        start = end + 1
    return ranges


class LocalCluster:
    """N cluster-enabled ServerProcess objects joined into one cluster."""

    def __init__(self, binary: ServerBinary, masters: int = 3, options: dict[str, str] | None = None):
        if masters < 1:
            raise ValueError("a cluster needs at least one master")
        self.binary = binary
        self.masters = masters
        self.options = dict(options or {})
        self.nodes: list[ServerProcess] = []

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self, timeout: float = 30.0) -> LocalCluster:
        try:
            for _ in range(self.masters):
                node = ServerProcess(
                    self.binary,
                    port=_cluster_port(),
                    options={
                        "cluster-enabled": "yes",
                        "cluster-config-file": "nodes.conf",
                        "cluster-node-timeout": "5000",
                        **self.options,
                    },
                )
                self.nodes.append(node.start())
            self._form(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _form(self, timeout: float) -> None:
        clients = [n.client() for n in self.nodes]
        try:
            # redis-py leaves execute_command untyped
            for client, (lo, hi) in zip(clients, slot_ranges(self.masters)):
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", lo, hi)  # type: ignore[no-untyped-call]
            for node in self.nodes[1:]:
                clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)  # type: ignore[no-untyped-call]
            deadline = time.monotonic() + timeout
            while not all(self._node_ready(c) for c in clients):
                if time.monotonic() > deadline:
                    raise ServerStartFailed(
                        f"cluster of {self.masters} did not reach cluster_state:ok in {timeout:.0f}s"
                    )
                time.sleep(0.05)
        finally:
            for c in clients:
                c.close()

    def _node_ready(self, client: redis.Redis) -> bool:
        info = client.execute_command("CLUSTER", "INFO")  # type: ignore[no-untyped-call]  # redis-py: untyped
        text = info.decode() if isinstance(info, bytes) else str(info)
        fields = dict(line.split(":", 1) for line in text.split() if ":" in line)
        return (
            fields.get("cluster_state") == "ok"
            and fields.get("cluster_known_nodes") == str(self.masters)
            and fields.get("cluster_slots_ok") == str(SLOTS)
        )

    def client(self, **kwargs: object) -> redis.RedisCluster:
        return redis.RedisCluster(host="127.0.0.1", port=self.nodes[0].port, **kwargs)  # type: ignore[arg-type]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self.nodes = []

    def __enter__(self) -> LocalCluster:
        return self.start() if not self.nodes else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
