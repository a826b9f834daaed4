"""count() of a one-key-per-session store is one flow (sessions/sweep.py count_keys, a
flows.Scan) in both shells and on every topology: it counts its own namespace's keys,
its glob characters escaped. Before, the sync store on a cluster scanned with the
namespace as a raw pattern: `s[12]` counted the 7 sessions of namespace `s1` and none of
its own."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio

from densekv.sessions import AsyncSessionStore, SessionStore
from densekv.tools.server.process import ServerProcess

GLOBBY = "s[12]"  # as a MATCH pattern it matches namespace "s1" too
DECOY = "s1"


def fill(client: redis.Redis | redis.RedisCluster, layout: str) -> None:
    SessionStore(client, namespace=DECOY, layout=layout).create_many([None] * 7)
    SessionStore(client, namespace=GLOBBY, layout=layout).create_many([1, 2, 3])


@pytest.mark.parametrize("layout", ["json", "packed", "hash", "dense"])
def test_count_is_the_namespace_own(client: redis.Redis, server: ServerProcess, layout: str) -> None:
    fill(client, layout)
    assert SessionStore(client, namespace=GLOBBY, layout=layout).count() == 3
    assert SessionStore(client, namespace=DECOY, layout=layout).count() == 7

    async def main() -> int:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            return await AsyncSessionStore(aclient, namespace=GLOBBY, layout=layout).count()
        finally:
            await aclient.aclose()

    assert asyncio.run(main()) == 3


@pytest.mark.cluster
@pytest.mark.parametrize("layout", ["json", "hash"])
def test_count_on_a_cluster_walks_every_node_with_the_escaped_pattern(
        cluster_client: redis.RedisCluster, layout: str) -> None:
    fill(cluster_client, layout)
    store = SessionStore(cluster_client, namespace=GLOBBY, layout=layout)
    tokens = store.create_many([None] * 60)  # spread over the three masters' slots
    assert store.count() == 63
    assert store.stats()["sessions"] == 63
    for t in tokens[:10]:
        store.destroy(t)
    assert store.count() == 53
    assert SessionStore(cluster_client, namespace=DECOY, layout=layout).count() == 7
