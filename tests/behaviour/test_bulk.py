"""Bulk loading: everything arrives, errors stop the load and say how far it got."""

from __future__ import annotations

import pytest
import redis

from densekv.errors import BulkLoadError
from densekv.tools.bulk import bulk_load


def test_bulk_load_sends_every_command(client: redis.Redis) -> None:
    seen: list[int] = []
    n = bulk_load(client, (("SET", f"k:{i}", i) for i in range(25_000)), batch=1000, progress=seen.append)
    assert n == 25_000 and client.dbsize() == 25_000
    assert client.get("k:24999") == b"24999"
    assert seen[-1] == 25_000 and len(seen) == 25


def test_bulk_load_stops_at_the_first_error(client: redis.Redis) -> None:
    client.hset("h", "f", "v")
    cmds = [("SET", "a", 1), ("INCR", "h"), ("SET", "b", 2)]
    with pytest.raises(BulkLoadError, match="command 2") as err:
        bulk_load(client, cmds, batch=10)
    assert err.value.done == 1


def test_bulk_load_on_a_cluster(cluster_client: redis.RedisCluster) -> None:
    bulk_load(cluster_client, (("SET", f"k:{i}", i) for i in range(5000)), batch=500)
    assert cluster_client.get("k:4321") == b"4321"
    assert cluster_client.dbsize(target_nodes=redis.RedisCluster.ALL_NODES) == 5000  # summed over nodes
