"""The capability probe reports what each server of the matrix really does."""

from __future__ import annotations

import asyncio
import json

import redis
import redis.asyncio

import densekv
from densekv.capabilities import aprobe
from densekv.tools.server.cluster import LocalCluster

# What each server of the matrix must report (issue 2's "done when").
EXPECTED = {
    "redis-7.0": {"flavor": "redis", "version": "7.0.", "field_ttl": "none", "field_ttl_encoding": None,
                      "set_max_listpack_entries": None, "allocator": "jemalloc"},
    "redis-7.4": {"flavor": "redis", "version": "7.4.", "field_ttl": "hexpire",
                      "field_ttl_encoding": "listpackex", "allocator": "jemalloc"},
    "valkey-8.0": {"flavor": "valkey", "version": "8.0.", "field_ttl": "none", "field_ttl_encoding": None,
                       "allocator": "jemalloc"},
    "valkey-9.1": {"flavor": "valkey", "version": "9.1.", "field_ttl": "hsetex",
                       "field_ttl_encoding": "hashtable", "allocator": "libc"},
    # The newer servers (scripts/get-servers --all, Debian trixie): Redis 8.0 has HSETEX and
    # keeps a hash with an expiring field a listpackex, as 7.4 does; Valkey 8.1 has no field TTL.
    "redis-8.0": {"flavor": "redis", "version": "8.0.", "field_ttl": "hsetex",
                      "field_ttl_encoding": "listpackex", "allocator": "jemalloc"},
    "valkey-8.1": {"flavor": "valkey", "version": "8.1.", "field_ttl": "none", "field_ttl_encoding": None,
                       "allocator": "jemalloc"},
}

REQUIRED_JSON_FIELDS = {
    "flavor", "version", "allocator", "hash_max_listpack_entries", "hash_max_listpack_value",
    "zset_max_listpack_entries", "set_max_listpack_entries", "set_max_intset_entries",
    "field_ttl", "field_ttl_encoding", "modules", "cluster", "maxmemory_policy",
    "lazyfree_user_flush", "warnings",
}


def test_probe_matches_the_server(server_name: str, client: redis.Redis) -> None:
    caps = densekv.probe(client)
    expected = EXPECTED[server_name]
    assert caps.flavor == expected["flavor"]
    assert caps.version.startswith(expected["version"])
    assert caps.field_ttl == expected["field_ttl"]
    assert caps.field_ttl_encoding == expected["field_ttl_encoding"]
    assert caps.allocator.startswith(expected["allocator"])
    if "set_max_listpack_entries" in expected:
        assert caps.set_max_listpack_entries is None
    else:
        assert caps.set_max_listpack_entries == int(client.config_get("set-max-listpack-entries")["set-max-listpack-entries"])
    assert caps.hash_max_listpack_entries == int(client.config_get("hash-max-*-entries")["hash-max-listpack-entries"])
    assert caps.cluster is False
    assert ("bf" in caps.modules) == (server_name == "redis-7.4")
    assert client.dbsize() == 0, "the probe's scratch key must be gone"
    data = json.loads(caps.to_json())
    assert REQUIRED_JSON_FIELDS <= set(data)


def test_probe_warns_about_lowered_limits_and_evicting_policies(client: redis.Redis) -> None:
    old = client.config_get("hash-max-listpack-entries")["hash-max-listpack-entries"]
    try:
        client.config_set("hash-max-listpack-entries", 16)
        client.config_set("maxmemory-policy", "allkeys-lru")
        caps = densekv.probe(client)
        text = " ".join(caps.warnings)
        assert "hash-max-listpack-entries is 16" in text
        assert "allkeys-lru" in text and "whole partition" in text
    finally:
        client.config_set("hash-max-listpack-entries", old)
        client.config_set("maxmemory-policy", "noeviction")
    assert densekv.probe(client).warnings == ()


def test_probe_on_a_cluster(cluster: LocalCluster, cluster_client: redis.RedisCluster) -> None:
    caps = densekv.probe(cluster_client)
    assert caps.cluster is True
    assert caps.field_ttl_encoding == "hashtable"
    assert sum(n.client().dbsize() for n in cluster.nodes) == 0


def test_the_async_probe_reads_the_same_server(server_name: str, client: redis.Redis) -> None:
    """One probe flow for both: the asyncio client sees what the sync one sees (a server
    too old, one that forbids CONFIG, Redis 6.2's ziplist names: tests/unit/test_probe_flow.py)."""
    port = client.connection_pool.connection_kwargs["port"]

    async def main() -> densekv.Capabilities:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=port)
        try:
            return await aprobe(aclient)
        finally:
            await aclient.aclose()

    assert asyncio.run(main()) == densekv.probe(client)
    assert client.dbsize() == 0
