"""A throwaway Redis/Valkey cluster on loopback, for tests and the lab: N masters, each with
R replicas (`replicas=1` gives the 3 + 3 of a small production cluster).

Built the way an operator would by hand: N x (1 + R) processes with cluster-enabled, the
16384 slots split into N ranges with CLUSTER ADDSLOTSRANGE on the masters, every node
introduced with CLUSTER MEET, each replica attached with CLUSTER REPLICATE once it knows
its master. `start()` returns only when every node says cluster_state:ok, knows every
node, every replica's link is up and in sync, and every node agrees on who owns which
slot and who replicates whom (`Topology`). With replicas the node timeout is short
(1500 ms by default) so a killed master is replaced in a few seconds.

The faults that tests need are methods here too: `kill_master` (SIGKILL, then wait for
the replica's promotion), `failover` (CLUSTER FAILOVER on a replica), `migrate_slot`
(SETSLOT IMPORTING/MIGRATING, MIGRATE of the keys in batches, SETSLOT NODE everywhere;
it reports the longest MIGRATE call) and `heal` (restart killed nodes, which rejoin as
replicas, and wait until healthy).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis
from redis.crc import key_slot

from densekv.errors import ServerStartFailed
from densekv.tools.server.binaries import ServerBinary
from densekv.tools.server.cluster_topology import Topology
from densekv.tools.server.process import ServerProcess, free_port, port_in_use

SLOTS = 16384
#: cluster-node-timeout with replicas: a dead master is flagged FAIL after about this long
#: and its replica elected soon after, so a failover takes 2-4 s on loopback
REPLICATED_NODE_TIMEOUT_MS = 1500


def cluster_port() -> int:
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


def _text(reply: Any) -> str:
    return reply.decode() if isinstance(reply, bytes) else str(reply)


def _info_fields(text: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in text.split() if ":" in line)


def call(node: ServerProcess, *args: Any, timeout: float = 5.0) -> Any:
    """One command on one node, on a short-lived connection (raw reply)."""
    with node.client(socket_timeout=timeout, socket_connect_timeout=timeout) as c:
        return c.execute_command(*args)


@dataclass(frozen=True)
class MigrateReport:
    """What migrate_slot did: keys moved, MIGRATE calls, the longest call (seconds, as
    the client saw it: the node is blocked for at most that long)."""

    slot: int
    keys: int
    calls: int
    longest_migrate: float


class LocalCluster:
    """N cluster-enabled masters (and R replicas each) joined into one cluster.

    `nodes`: every process, the N masters first (in slot order) then the replicas
    (replica j of master i at N + i * R + j). Roles change with failovers: ask
    `primaries()` / `replicas_of()` for who is what now.
    """

    def __init__(self, binary: ServerBinary, masters: int = 3, options: dict[str, str] | None = None,
                 replicas: int = 0):
        if masters < 1:
            raise ValueError("a cluster needs at least one master")
        if replicas < 0:
            raise ValueError("replicas must be 0 or more")
        self.binary = binary
        self.masters = masters
        self.replicas = replicas
        timeout = REPLICATED_NODE_TIMEOUT_MS if replicas else 5000
        # repl-diskless-sync-delay 0: a replica's full sync starts at once (default: 5 s)
        quick = {"repl-diskless-sync-delay": "0"} if replicas else {}
        self.options = {"cluster-node-timeout": str(timeout), **quick, **dict(options or {})}
        self.nodes: list[ServerProcess] = []

    @property
    def url(self) -> str:
        return self.nodes[0].url

    @property
    def size(self) -> int:
        return self.masters * (1 + self.replicas)

    def start(self, timeout: float = 60.0) -> LocalCluster:
        try:
            for _ in range(self.size):
                node = ServerProcess(
                    self.binary,
                    port=cluster_port(),
                    options={
                        "cluster-enabled": "yes",
                        "cluster-config-file": "nodes.conf",
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
        deadline = time.monotonic() + timeout
        masters = self.nodes[: self.masters]
        for node, (lo, hi) in zip(masters, slot_ranges(self.masters)):
            call(node, "CLUSTER", "ADDSLOTSRANGE", lo, hi)
        for node in self.nodes[1:]:
            call(self.nodes[0], "CLUSTER", "MEET", "127.0.0.1", node.port)
        self._wait(lambda: all(self._knows_all(n) for n in self.nodes), deadline, "every node to know every node")
        for i, master in enumerate(masters):
            master_id = _text(call(master, "CLUSTER", "MYID"))
            for j in range(self.replicas):
                call(self.nodes[self.masters + i * self.replicas + j], "CLUSTER", "REPLICATE", master_id)
        if self.replicas:  # one replicated write each, so replicas report an offset (see healthy)
            ranges = slot_ranges(self.masters)
            self._wait(lambda: all(self._touch(m, r) for m, r in zip(masters, ranges)), deadline,
                       "replicas to attach")
        self.wait_healthy(max(0.1, deadline - time.monotonic()))

    def _touch(self, master: ServerProcess, slots: tuple[int, int]) -> bool:
        """A write its replicas acknowledge (WAIT): False until they are all attached."""
        key = next(k for i in range(100_000)
                   if slots[0] <= key_slot((k := f"densekv:formed:{i}").encode()) <= slots[1])
        with master.client(socket_timeout=5) as c:
            c.set(key, 1)
            c.delete(key)
            return int(c.execute_command("WAIT", self.replicas, 1000)) >= self.replicas

    def _knows_all(self, node: ServerProcess) -> bool:
        fields = _info_fields(_text(call(node, "CLUSTER", "INFO")))
        return fields.get("cluster_known_nodes") == str(self.size)

    @staticmethod
    def _wait(check: Any, deadline: float, what: str) -> None:
        while True:
            try:
                if check():
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                pass
            if time.monotonic() > deadline:
                raise ServerStartFailed(f"cluster: gave up waiting for {what}")
            time.sleep(0.05)

    # -- health -----------------------------------------------------------------------
    def live_nodes(self) -> list[ServerProcess]:
        return [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def topology(self, node: ServerProcess | None = None) -> Topology:
        """CLUSTER NODES as `node` (default: the first live node) sees it."""
        node = node or self.live_nodes()[0]
        return Topology.parse(_text(call(node, "CLUSTER", "NODES")))

    def healthy(self) -> bool:
        """Every live node: cluster_state ok, all slots served by live masters that every
        live node agrees on, every live replica listed by CLUSTER SLOTS everywhere (what
        clients route by), linked to its master and in sync."""
        live = self.live_nodes()
        ports = {n.port for n in live}
        views = []
        for node in live:
            fields = _info_fields(_text(call(node, "CLUSTER", "INFO")))
            if fields.get("cluster_state") != "ok" or fields.get("cluster_slots_ok") != str(SLOTS):
                return False
            views.append(self.topology(node))
        first = views[0]
        live_ids = {v.node_id for v in first.nodes.values() if v.port in ports}
        if any(v.roles(live_ids) != first.roles(live_ids) for v in views[1:]):
            return False
        if any(v.owners() != first.owners() for v in views[1:]):
            return False
        if set(first.owners().values()) - live_ids or any(first.nodes[i].failed for i in live_ids):
            return False
        expected = {first.nodes[m].port: sorted(v.port for v in first.nodes.values()
                                                if v.master_id == m and v.node_id in live_ids)
                    for m in set(first.owners().values())}
        if any(self._slots_listing(node) != expected for node in live):
            return False
        for node in live:
            view = first.by_port(node.port)
            if view.role == "slave":
                with node.client(socket_timeout=5) as c:
                    repl = c.info("replication")
                if repl.get("master_link_status") != "up" or repl.get("master_sync_in_progress"):
                    return False
        return True

    @staticmethod
    def _slots_listing(node: ServerProcess) -> dict[int, list[int]]:
        """master port -> replica ports, as CLUSTER SLOTS on `node` tells clients. A
        replica shows there only once it reported a replication offset (Valkey hides
        replicas at offset 0), which is what clients such as redis-py route by."""
        out: dict[int, list[int]] = {}
        for entry in call(node, "CLUSTER", "SLOTS"):
            out[int(entry[2][1])] = sorted(int(r[1]) for r in entry[3:])
        return out

    def wait_healthy(self, timeout: float = 30.0) -> None:
        self._wait(self.healthy, time.monotonic() + timeout,
                   f"a healthy cluster of {self.masters} masters x {self.replicas} replicas")

    def primaries(self) -> list[ServerProcess]:
        """The live nodes that are masters serving slots now."""
        view = self.topology()
        owners = set(view.owners().values())
        return [n for n in self.live_nodes() if view.by_port(n.port).node_id in owners]

    def node_of_slot(self, slot: int) -> ServerProcess:
        view = self.topology()
        owner = view.nodes[view.owners()[slot]]
        return next(n for n in self.nodes if n.port == owner.port)

    def replicas_of(self, master: ServerProcess) -> list[ServerProcess]:
        view = self.topology()
        master_id = view.by_port(master.port).node_id
        ports = {v.port for v in view.nodes.values() if v.master_id == master_id}
        return [n for n in self.live_nodes() if n.port in ports]

    def flush(self) -> None:
        """FLUSHALL SYNC on every master, then WAIT for its replicas."""
        for node in self.primaries():
            with node.client() as c:
                c.execute_command("FLUSHALL", "SYNC")
                if self.replicas:
                    c.execute_command("WAIT", self.replicas, 5000)

    # -- faults ---------------------------------------------------------------------------
    def kill_master(self, master: ServerProcess | None = None, *, wait: bool = True,
                    timeout: float = 30.0) -> ServerProcess:
        """SIGKILL a master (default: the one serving slot 0); with `wait`, return once a
        replica has taken over its slots and the cluster is ok again."""
        master = master or self.node_of_slot(0)
        slots = self.topology().by_port(master.port).slots
        master.kill()
        if wait:
            self._wait(lambda: self._served_by_live(slots), time.monotonic() + timeout,
                       f"a replica of port {master.port} to take over its slots")
            self.wait_healthy(timeout)
        return master

    def _served_by_live(self, slots: frozenset[int]) -> bool:
        live = {n.port for n in self.live_nodes()}
        return all(self.topology(n).owner_port(min(slots)) in live for n in self.live_nodes()) if slots else True

    def failover(self, replica: ServerProcess | None = None, timeout: float = 30.0) -> ServerProcess:
        """CLUSTER FAILOVER on a replica (default: the first replica of the master of slot
        0): a coordinated switch, no write lost. Returns the new master once every node
        agrees and the cluster is healthy."""
        if replica is None:
            replica = self.replicas_of(self.node_of_slot(0))[0]
        call(replica, "CLUSTER", "FAILOVER")
        self._wait(lambda: self.topology(replica).by_port(replica.port).role == "master",
                   time.monotonic() + timeout, f"port {replica.port} to become a master")
        self.wait_healthy(timeout)
        return replica

    def heal(self, timeout: float = 60.0) -> None:
        """Restart every killed node (same port and nodes.conf: it rejoins as a replica of
        whoever took its slots, and syncs) and wait until the cluster is healthy."""
        for node in self.nodes:
            if node.proc is None or node.proc.poll() is not None:
                node.restart()
        self.wait_healthy(timeout)

    def migrate_slot(self, slot: int, target: ServerProcess, *, batch: int = 100,
                     pause: float = 0.0, timeout_ms: int = 5000) -> MigrateReport:
        """Move one slot to `target` as an operator does: IMPORTING on the target, MIGRATING
        on the source, MIGRATE of the keys `batch` at a time (`pause` seconds between
        batches, for writers to run into the half-moved slot), then SETSLOT NODE on the
        target, the source and every other master."""
        source = self.node_of_slot(slot)
        if source.port == target.port:
            return MigrateReport(slot, 0, 0, 0.0)
        view = self.topology()
        source_id, target_id = view.by_port(source.port).node_id, view.by_port(target.port).node_id
        call(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        call(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
        moved = calls = 0
        longest = 0.0
        with source.client(socket_timeout=timeout_ms / 1000 + 5) as c:
            while True:
                keys = c.execute_command("CLUSTER", "GETKEYSINSLOT", slot, batch)
                if not keys:
                    break
                started = time.perf_counter()
                c.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, timeout_ms,
                                  "KEYS", *keys)
                longest = max(longest, time.perf_counter() - started)
                moved += len(keys)
                calls += 1
                if pause:
                    time.sleep(pause)
        call(target, "CLUSTER", "SETSLOT", slot, "NODE", target_id)
        call(source, "CLUSTER", "SETSLOT", slot, "NODE", target_id)
        for node in self.primaries():
            if node.port not in (source.port, target.port):
                call(node, "CLUSTER", "SETSLOT", slot, "NODE", target_id)
        return MigrateReport(slot, moved, calls, longest)

    # -- clients and lifecycle ----------------------------------------------------------
    def client(self, **kwargs: object) -> redis.RedisCluster:
        live = self.live_nodes() or self.nodes
        return redis.RedisCluster(host="127.0.0.1", port=live[0].port, **kwargs)  # type: ignore[arg-type]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self.nodes = []

    def __enter__(self) -> LocalCluster:  # noqa: PYI034  # typing.Self needs 3.11
        return self.start() if not self.nodes else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

