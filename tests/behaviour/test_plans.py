"""One small real operation (compare-and-set as a Lua script, INCRBY as a command) run on
every executor: sync, asyncio, batch and cluster. The results must be identical."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio

from densekv.cluster_executor import ClusterExecutor, executor_for
from densekv.errors import WrongType
from densekv.executors import AsyncExecutor, SyncExecutor
from densekv.ops import plan_compare_and_set, plan_get, plan_incrby
from densekv.plan import Command, Plan
from densekv.tools.server.process import ServerProcess


def scenario() -> list[Plan[object]]:
    return [
        plan_compare_and_set("{u1}:name", None, b"ann"),
        plan_compare_and_set("{u1}:name", None, b"bob"),  # already there: refused
        plan_compare_and_set("{u1}:name", b"ann", b"cid"),
        plan_compare_and_set("{u1}:name", b"ann", b"dan"),  # stale expectation: refused
        plan_get("{u1}:name"),
        plan_incrby("{u2}:n", 5),
        plan_incrby("{u2}:n", -2),
    ]


EXPECTED = [True, False, True, False, b"cid", 5, 3]


def test_sync_one_by_one(client: redis.Redis) -> None:
    ex = SyncExecutor(client)
    assert [ex.run(p) for p in scenario()] == EXPECTED


def test_sync_batch_is_one_round_trip(client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    ex = SyncExecutor(client)
    checkouts: list[object] = []
    real = client.connection_pool.get_connection
    monkeypatch.setattr(client.connection_pool, "get_connection", lambda *a, **k: checkouts.append(1) or real(*a, **k))
    assert ex.run_many(scenario()) == EXPECTED
    assert len(checkouts) == 1  # one write, one read: a single pipeline


def test_replies_are_raw_even_for_a_decoding_client(server: ServerProcess) -> None:
    client = server.client(decode_responses=True)
    client.flushall()
    assert SyncExecutor(client).run_many(scenario()) == EXPECTED


def test_async(server: ServerProcess) -> None:
    async def main() -> tuple[list[object], list[object]]:
        client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        await client.flushall()
        ex = AsyncExecutor(client)
        batch = await ex.run_many(scenario())
        await client.flushall()
        single = [await ex.run(p) for p in scenario()]
        await client.aclose()
        return batch, single

    batch, single = asyncio.run(main())
    assert batch == EXPECTED and single == EXPECTED


def test_cluster(cluster_client: redis.RedisCluster) -> None:
    ex = executor_for(cluster_client)
    assert isinstance(ex, ClusterExecutor)
    assert ex.run_many(scenario()) == EXPECTED
    plans = [plan_incrby(f"{{p{i}}}:n", i) for i in range(300)]
    assert ex.run_many(plans) == list(range(300))


def test_script_is_reloaded_after_script_flush(client: redis.Redis) -> None:
    ex = SyncExecutor(client)
    assert ex.run(plan_compare_and_set("k", None, b"1")) is True
    client.script_flush()
    assert ex.run(plan_compare_and_set("k", b"1", b"2")) is True  # NOSCRIPT, reload, re-send
    client.script_flush()
    # A batch loads its scripts first, so its plans still run in order.
    assert ex.run_many([plan_compare_and_set("k", b"2", b"3"), plan_get("k")]) == [True, b"3"]


def test_script_reload_on_cluster_after_flush(cluster_client: redis.RedisCluster) -> None:
    ex = ClusterExecutor(cluster_client)
    assert ex.run(plan_compare_and_set("k", None, b"1")) is True
    for node in cluster_client.get_primaries():
        node.redis_connection.script_flush()
    assert ex.run(plan_compare_and_set("k", b"1", b"2")) is True


def test_wrong_type_is_typed_and_the_batch_still_completes(client: redis.Redis) -> None:
    client.hset("h", "f", "v")
    ex = SyncExecutor(client)
    with pytest.raises(WrongType, match="h"):
        ex.run_many([plan_incrby("n", 1), plan_incrby("h", 1), plan_incrby("n", 1)])
    assert client.get("n") == b"2"  # the other plans of the batch ran
    assert client.hgetall("h") == {b"f": b"v"}  # the foreign key is untouched
    assert ex.run(plan_get("n")) == b"2"  # connection still in a good state


def test_atomic_plan_runs_in_multi(client: redis.Redis) -> None:
    plan = Plan(
        (Command(("SET", "{a}x", "1"), ("{a}x",)), Command(("INCRBY", "{a}x", "9"), ("{a}x",))),
        decode=lambda r: r[1],
        atomic=True,
    )
    assert SyncExecutor(client).run(plan) == 10


def test_error_inside_exec_is_redis_pys_error_in_a_batch(client: redis.Redis) -> None:
    """A queued command that fails inside EXEC comes back as redis.ResponseError, on the
    batch path too (hiredis hands nested errors over as its own values)."""
    failing = Plan(
        (Command(("SET", "{a}x", "text"), ("{a}x",)), Command(("INCR", "{a}x"), ("{a}x",))),
        atomic=True,
    )
    ex = SyncExecutor(client)
    with pytest.raises(redis.ResponseError, match="not an integer"):
        ex.run_many([plan_incrby("n", 1), failing])
    assert client.get("{a}x") == b"text"  # EXEC ran the SET; the INCR alone failed
    assert ex.run(plan_get("n")) == b"1"


def test_executor_for_rejects_other_objects() -> None:
    with pytest.raises(TypeError):
        executor_for(object())
