"""durable=True and lost replies.

  * A durable store's round trips that write end with WAIT 1 (one per round trip, on the
    same connection); reads send none; a store without durable never sends WAIT.
  * While no replica acknowledges (the replica is paused with SIGSTOP), every durable
    kind raises NotDurable instead of returning: on a server with a replica
    (densekv.embedded(replicas=1)), async too, and on the replicated cluster.
  * A reply lost after a write was sent (the connection killed while the write waited
    behind CLIENT PAUSE) raises WriteInDoubt and the write is not sent again; a lost
    read is simply asked again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis
from redis.crc import key_slot

import densekv
from densekv import (
    AsyncSessionStore,
    BloomFilter,
    CompactMap,
    CompactSet,
    NotDurable,
    SessionStore,
    WriteInDoubt,
)
from densekv.cluster_executor import ClusterExecutor, executor_for
from densekv.executors import Durability
from densekv.plan import command
from densekv.tools.server.cluster import LocalCluster
from densekv.tools.server.process import ServerProcess
from tests.conftest import PRESENT, REPLICATED_SERVER

SHORT = Durability(timeout_ms=300)  # a test need not wait 2 s for each refusal


@pytest.fixture(scope="module")
def pair() -> Iterator[densekv.EmbeddedServer]:
    if REPLICATED_SERVER not in PRESENT:
        pytest.skip(f"{REPLICATED_SERVER} is not present")
    with densekv.embedded(REPLICATED_SERVER, replicas=1) as srv:
        yield srv


@pytest.fixture
def primary(pair: densekv.EmbeddedServer) -> Iterator[redis.Redis]:
    c = pair.client()
    assert isinstance(c, redis.Redis)
    c.execute_command("FLUSHALL", "SYNC")
    c.execute_command("WAIT", 1, 5000)
    c.config_resetstat()
    yield c
    c.close()


@contextmanager
def paused(node: ServerProcess) -> Iterator[None]:
    """The node stopped (SIGSTOP): it acknowledges nothing until the block ends."""
    assert node.proc is not None
    os.kill(node.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(node.proc.pid, signal.SIGCONT)


def waits(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_wait", {}).get("calls", 0))


def stores(client: redis.Redis | redis.RedisCluster, durable: bool) -> list[tuple[str, object, object]]:
    """(kind, store, one write) for each kind that takes durable=."""
    sess = SessionStore(client, namespace="ds", partitions=4, durable=durable)
    cset = CompactSet(client, "dset", partitions=4, expected=100, durable=durable)
    cmap = CompactMap(client, "dmap", expected=50, durable=durable)
    bloom = BloomFilter(client, "dbf", capacity=1000, error_rate=0.01, durable=durable)
    return [("sessions", sess, lambda: sess.create(7, {"a": 1})),
            ("sets", cset, lambda: cset.add(os.urandom(16))),
            ("maps", cmap, lambda: cmap.incr("k")),
            ("bloom", bloom, lambda: bloom.add(b"x" + os.urandom(8)))]


def test_durable_writes_wait_and_reads_do_not(primary: redis.Redis) -> None:
    for kind, store, write in stores(primary, durable=True):
        before = waits(primary)
        write()  # type: ignore[operator]
        assert waits(primary) > before, kind
    ex = executor_for(primary, durable=True)
    before = waits(primary)
    ex.run_many([command("SET", f"k{i}", i, keys=[f"k{i}"]) for i in range(3)])
    assert waits(primary) == before + 1  # one WAIT per round trip, however many writes
    assert ex.run_many([command("GET", "k1", keys=["k1"])]) == [b"1"]
    assert waits(primary) == before + 1
    sess = SessionStore(primary, namespace="ds", durable=True)
    token = sess.create(1, {"x": 1})
    before = waits(primary)
    assert sess.get(token) is not None
    assert waits(primary) == before  # a read sends no WAIT


def test_without_durable_no_wait(primary: redis.Redis) -> None:
    for _, _, write in stores(primary, durable=False):
        write()  # type: ignore[operator]
    assert waits(primary) == 0


def test_every_durable_kind_refuses_silence(pair: densekv.EmbeddedServer, primary: redis.Redis) -> None:
    made = stores(primary, durable=True)
    plain = stores(primary, durable=False)
    for _, store, _ in made:
        store._ex.durable = SHORT  # type: ignore[attr-defined]
    with paused(pair.replicas[0]):
        for kind, _, write in made:
            with pytest.raises(NotDurable, match="no replica"):
                write()  # type: ignore[operator]
            print(kind, "refused")
        for _, _, write in plain:
            write()  # type: ignore[operator]  # not durable: no waiting, no error
    for _, _, write in made:
        write()  # type: ignore[operator]  # the replica is back: fine again


def test_async_durable_store(pair: densekv.EmbeddedServer, primary: redis.Redis) -> None:
    async def go() -> None:
        client = pair.async_client()
        store = AsyncSessionStore(client, namespace="das", partitions=4, durable=True)
        token = await store.create(1, {"a": 1})
        assert (await store.get(token)) is not None
        store._ex.durable = SHORT
        with paused(pair.replicas[0]), pytest.raises(NotDurable):
            await store.create(2, {"b": 2})
        await client.aclose()

    asyncio.run(go())


def test_durable_on_the_cluster_refuses_without_a_replica(
        replicated_client: redis.RedisCluster, replicated_cluster: LocalCluster) -> None:
    cset = CompactSet(replicated_client, "dcs", partitions=1, expected=10, durable=True)
    cset.add(os.urandom(16))
    cset._ex.durable = SHORT  # type: ignore[attr-defined]
    slot = key_slot(next(iter(replicated_client.scan_iter(match="dcs*", count=1000))))
    master = replicated_cluster.node_of_slot(slot)
    with paused(replicated_cluster.replicas_of(master)[0]), pytest.raises(NotDurable, match=str(master.port)):
        cset.add(os.urandom(16))


def kill_clients_later(node: ServerProcess, after: float, unpause_after: float) -> threading.Thread:
    """CLIENT KILL of every normal client of `node` after `after` s, then CLIENT UNPAUSE."""
    def go() -> None:
        with node.client() as admin:
            time.sleep(after)
            admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
            time.sleep(unpause_after)
            admin.execute_command("CLIENT", "UNPAUSE")

    t = threading.Thread(target=go)
    t.start()
    return t


def test_a_lost_write_reply_is_in_doubt_and_never_resent(
        replicated_client: redis.RedisCluster, replicated_cluster: LocalCluster) -> None:
    ex = ClusterExecutor(replicated_client)
    key = "{doubt}n"
    ex.run(command("SET", key, 10, keys=[key]))
    node = replicated_cluster.node_of_slot(key_slot(b"doubt"))
    with node.client() as admin:
        admin.execute_command("CLIENT", "PAUSE", 3000, "WRITE")
    killer = kill_clients_later(node, 0.3, 0.1)
    with pytest.raises(WriteInDoubt, match="may or may not"):
        ex.run(command("INCR", key, keys=[key]))
    killer.join()
    time.sleep(0.2)
    assert ex.run(command("GET", key, keys=[key])) == b"10"  # killed before it ran; not re-sent


def test_a_lost_read_reply_is_asked_again(
        replicated_client: redis.RedisCluster, replicated_cluster: LocalCluster) -> None:
    """A blocking read (XREAD BLOCK) whose connection is killed is sent again; the entry
    added meanwhile reaches the second one."""
    ex = ClusterExecutor(replicated_client)
    key = "{doubt}s"
    ex.run(command("XADD", key, "1-1", "f", "v", keys=[key]))
    node = replicated_cluster.node_of_slot(key_slot(b"doubt"))

    def kill_then_add() -> None:
        with node.client() as admin:
            time.sleep(0.3)
            admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
            time.sleep(0.3)
            admin.execute_command("XADD", key, "2-1", "f", "w")

    t = threading.Thread(target=kill_then_add)
    t.start()
    got = ex.run(command("XREAD", "BLOCK", 3000, "STREAMS", key, "1-1", keys=[key]))
    t.join()
    assert got is not None and b"2-1" in repr(got).encode()


def master_waits(cluster: LocalCluster) -> int:
    """WAIT calls summed over every master."""
    total = 0
    for node in cluster.primaries():
        with node.client() as c:
            total += waits(c)
    return total


def test_revocations_wait_for_a_replica_without_durable(
        replicated_client: redis.RedisCluster, replicated_cluster: LocalCluster) -> None:
    """destroy and regenerate of a store without durable still wait for a replica on a
    cluster whose slot has one, so a failover cannot revive the token given up; create
    and get do not wait. With the replica paused, the revocation says so (NotDurable)."""
    store = SessionStore(replicated_client, namespace="rv", partitions=1, index_identities=False)
    token = store.create(None, {"a": 1})
    before = master_waits(replicated_cluster)
    store.get(token)
    token2 = store.create(None, {"b": 2})
    assert master_waits(replicated_cluster) == before
    new = store.regenerate(token)
    assert new is not None and master_waits(replicated_cluster) == before + 1
    assert store.destroy(new) and master_waits(replicated_cluster) == before + 2
    store._ex.revocation = SHORT  # type: ignore[attr-defined]
    replica = replicated_cluster.replicas_of(replicated_cluster.node_of_slot(partition_slot(store)))[0]
    with paused(replica), pytest.raises(NotDurable):
        store.destroy(token2)


def partition_slot(store: SessionStore) -> int:
    """The slot of the store's one partition (its hash key, with a hash tag)."""
    for key in store.client.scan_iter(match=f"{store.namespace}*", count=1000):
        if b"{" in key and store.client.type(key) == b"hash":
            return key_slot(key)
    raise AssertionError("no partition key")
