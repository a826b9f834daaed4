"""Online repartition of the partitioned session layouts, and the store metadata that
makes every process agree on the partition count: nothing lost, nothing duplicated,
writers that still use the old count follow, a crash mid-way resumes."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from densekv.errors import DensekvError
from densekv.sessions import SessionStore
from densekv.sessions.layouts.partitioned import PartitionedLayout


def partitioned_layouts(client: Any) -> list[str]:
    from densekv.sessions.meta import SPECS, facts_from_probe

    facts = facts_from_probe(client)  # the registry's partitioned layouts this server can run
    return [s.name for s in SPECS if s.partitioned and s.unavailable(facts) is None]


def hash_encodings(client: Any, namespace: str = "sess") -> dict[bytes, set[bytes]]:
    out: dict[bytes, set[bytes]] = {}
    for key in client.scan_iter(match=f"{namespace}:sd:*".encode(), count=1000):
        out.setdefault(client.type(key), set()).add(client.object("encoding", key))
    return out


def test_repartition_keeps_every_session_on_every_layout(client: redis.Redis) -> None:
    for layout in partitioned_layouts(client):
        ns = f"r{layout}"
        store = SessionStore(client, namespace=ns, layout=layout, partitions=4, ttl=3600).open()
        tokens = store.create_many(range(600))
        expected = {t: store.get(t) for t in tokens}
        for target in (8, 64, 16384):  # s = 1, 3 and 8 extra bits (past a byte boundary)
            done = store.repartition(target)
            assert done["partitions"] == target
            assert store.explain()["partitions"] == target and store.explain()["repartition_from"] is None
            assert {t: store.get(t) for t in tokens} == expected, (layout, target)
            assert store.count() == 600
        assert sorted(s.identity for i in range(0, 600, 97) for s in store.sessions_of(i)) == list(range(0, 600, 97))
        kinds = hash_encodings(client, ns)
        if layout != "fieldttl":  # fieldttl hashes take the server's field-TTL encoding
            assert kinds[b"hash"] == {b"listpack"}
        assert set(kinds) == {b"hash", b"string"}  # partitions, and the tombstones of old ones
        assert store.destroy(tokens[0]) and store.get(tokens[0]) is None
        if layout != "fieldttl":
            clock_store = SessionStore(client, namespace=ns, layout=layout, clock=lambda: 10**10).open()
            assert clock_store.sweep() == 599 and clock_store.count() == 0


def test_a_second_store_adopts_the_partition_count_and_layout_on_the_server(client: redis.Redis) -> None:
    first = SessionStore(client, layout="dense", expected_sessions=1000).open()
    second = SessionStore(client, expected_sessions=10_000_000).open()  # auto: adopts dense and its count
    assert second.explain()["partitions"] == first.explain()["partitions"]
    token = first.create(7)
    assert second.get(token) is not None
    with pytest.raises(DensekvError, match="holds a 'dense' session store"):
        SessionStore(client, layout="zset").open()
    with pytest.raises(DensekvError, match="repartition"):
        SessionStore(client, layout="dense", partitions=1 << 12 if first.explain()["partitions"] != 1 << 12 else 1 << 13).open()


def test_a_writer_on_the_old_count_follows_the_tombstones(client: redis.Redis) -> None:
    stale = SessionStore(client, layout="dense", partitions=4).open()
    mover = SessionStore(client, layout="dense").open()
    old = stale.create_many(range(100))
    mover.repartition(32)
    assert stale.explain()["partitions"] == 4  # has not looked yet
    new = stale.create_many(range(100, 200))  # meets tombstones, re-reads, retries
    assert stale.explain()["partitions"] == 32
    assert all(mover.get(t) is not None for t in old + new)
    assert mover.count() == 200


def test_a_crashed_repartition_is_finished_by_operations_and_by_a_rerun(client: redis.Redis) -> None:
    store = SessionStore(client, layout="zset", partitions=16).open()
    tokens = store.create_many(range(400))
    mover = SessionStore(client, layout="zset").open()
    flow = mover._core.repartition(256)
    plans = next(flow)  # the metadata read
    plans = flow.send(mover._ex.run_many(plans))  # "begin": the metadata now says 16 -> 256
    plans = flow.send(mover._ex.run_many(plans))  # the first batch of splits...
    flow.close()  # ...and the process dies before the rest
    reader = SessionStore(client, layout="zset").open()
    assert reader.explain()["repartition_from"] == 16
    assert all(reader.get(t) is not None for t in tokens)  # splits on demand
    assert reader.count() == 400
    more = reader.create_many(range(400, 500))
    assert store.get(more[0]) is not None  # the stale store meets a tombstone and follows
    assert SessionStore(client, layout="zset").open().repartition(256)["partitions"] == 256
    assert reader.count() == 500 and store.count() == 500
    assert all(store.get(t) is not None for t in tokens + more)
    with pytest.raises(DensekvError, match="power of two"):
        store.repartition(1000)


def test_repartition_while_writers_run_loses_nothing(server: Any) -> None:
    admin = server.client()
    admin.execute_command("FLUSHALL", "SYNC")
    SessionStore(admin, layout="dense", partitions=8).open()
    made: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        try:
            store = SessionStore(server.client(), layout="dense").open()
            i = 0
            while not stop.is_set() or i < 50:
                token = store.create(seed * 100_000 + i)
                assert store.get(token) is not None
                with lock:
                    made.append(token)
                i += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    SessionStore(admin, layout="dense").open().repartition(1024)
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors
    final = SessionStore(admin, layout="dense").open()
    assert final.explain()["partitions"] == 1024
    assert final.count() == len(made)
    assert all(final.get(t) is not None for t in made)


def test_repartition_on_a_cluster(cluster_client: redis.RedisCluster) -> None:
    store = SessionStore(cluster_client, layout="dense", partitions=64).open()
    tokens = store.create_many(range(500))
    assert store.repartition(512)["moved"] == 500
    assert all(store.get(t) is not None for t in tokens)
    assert store.count() == 500
    assert isinstance(store._core.layout, PartitionedLayout)
    fresh = store.regenerate(tokens[1])
    assert fresh is not None and store.get(fresh) is not None and store.get(tokens[1]) is None
