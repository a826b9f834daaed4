"""Hot migration: plain keys move into a compact map while reads fall back to them; a
migrator killed at any point and rerun loses and duplicates nothing; verify; reverse. In
both TTL modes (a moved key's TTL becomes the packed expiry or the field TTL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import redis

from densekv.capabilities import probe
from densekv.maps import CompactMap
from densekv.maps.compact import plain_value
from densekv.tools.server.process import ServerProcess

TTL_MODES = ["packed", "field"]


def need_ttl_mode(client: redis.Redis, ttl_mode: str) -> None:
    """Skip a field-TTL case on a server without hash field TTL (Redis 7.0, Valkey 8.0)."""
    if ttl_mode == "field" and probe(client).field_ttl == "none":
        pytest.skip("this server has no hash field TTL (HEXPIRE): ttl_mode='field' is refused here")


def load_plain(client: redis.Redis | redis.RedisCluster, n: int) -> dict[bytes, bytes]:
    data = {}
    for i in range(n):
        key = f"user:{i * 7}".encode() if i % 4 else f"profile:{i}:name".encode()
        data[key] = str(i * 3 - 50).encode() if i % 3 else (b"v%d" % i) * (1 + i % 40)
    for k, v in data.items():
        client.set(k, v, ex=1000 if int.from_bytes(k[-1:], "big") % 5 == 0 else None)
    client.set(b"other:1", b"not matched")
    client.hset(b"user:hash", mapping={b"a": b"1"})  # not a string: never touched
    return data


def expected_items(data: dict[bytes, bytes]) -> dict[str, object]:
    return {k.decode(): plain_value(v) for k, v in data.items()}


class Crash(Exception):
    pass


@pytest.mark.parametrize("ttl_mode", TTL_MODES)
def test_reads_fall_back_until_moved_and_a_crash_loses_nothing(client: redis.Redis, server_name: str,
                                                              ttl_mode: str) -> None:
    need_ttl_mode(client, ttl_mode)
    data = load_plain(client, 600)
    m = CompactMap(client, "mig", expected=1000, ttl_mode=ttl_mode)
    seen = []

    def crash_after_two(counts: dict[str, int]) -> None:
        seen.append(counts)
        if len(seen) == 2:
            raise Crash

    with pytest.raises(Crash):
        m.migrate_from("user:*", batch=50, progress=crash_after_two)
    with pytest.raises(Crash):
        seen.clear()
        m.migrate_from("profile:*", batch=20, progress=crash_after_two)
    # half-moved: every key reads the same through any map opened now, and once in items()
    other = CompactMap(client, "mig")
    want = expected_items(data)
    assert other.explain()["fallback"] == "profile:*"
    assert all(other.get(k) == v for k, v in want.items())
    # writes on keys not moved yet see the plain value first
    unmoved = next(k.decode() for k in data if client.exists(k) and data[k].isdigit())
    assert other.incr(unmoved) == int(data[unmoved.encode()]) + 1
    want[unmoved] = int(data[unmoved.encode()]) + 1
    other.set("user:new", 5)
    want["user:new"] = 5
    assert other.delete("profile:4:name") == 1
    del want["profile:4:name"]
    m2 = CompactMap(client, "mig")
    assert m2.migrate_from("user:*")["remaining"] == 0
    done = m2.migrate_from("profile:*")
    assert done["remaining"] == 0 and m2.explain()["fallback"] is None
    assert dict(m2.items()) == want
    assert client.get(b"other:1") == b"not matched" and client.type(b"user:hash") == b"hash"
    report = m2.verify("user:*")
    assert report["ok"] and report["items"] == len(want)
    ttls = [m2.ttl(k.decode()) for k in data if int.from_bytes(k[-1:], "big") % 5 == 0 and k.decode() in want]
    assert ttls and all(990 <= t <= 1000 for t in ttls)


@pytest.mark.parametrize("ttl_mode", TTL_MODES)
def test_reverse_migration_restores_the_plain_keys(client: redis.Redis, ttl_mode: str) -> None:
    need_ttl_mode(client, ttl_mode)
    data = load_plain(client, 300)
    ttls = {k: client.ttl(k) for k in data}
    m = CompactMap(client, "rev", expected=1000, ttl_mode=ttl_mode)
    m.migrate_from("user:*")
    m.migrate_from("profile:*")
    assert not any(client.exists(k) for k in data)
    back = m.migrate_to_plain()
    assert back["moved"] == len(data)
    assert {k: client.get(k) for k in data} == data
    assert all(abs(client.ttl(k) - t) <= 2 if t > 0 else client.ttl(k) == -1 for k, t in ttls.items())
    assert dict(m.items()) == {} and m.count() == 0


def test_killed_migrator_reruns_to_the_same_result(server: ServerProcess) -> None:
    client = server.client()
    client.flushall()
    data = load_plain(client, 3000)
    CompactMap(client, "kill", expected=4000)
    code = (
        "import redis, sys\n"
        "from densekv.maps import CompactMap\n"
        f"m = CompactMap(redis.Redis(port={server.port}), 'kill')\n"
        "m.migrate_from('*', batch=25, pause=0.02)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            left = client.exists(*data)  # one round trip: the poll must not outlast the migrator
            if left < len(data) * 0.7:
                break
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    left = client.exists(*data)
    assert 0 < left < len(data), "the migrator was not killed mid-run"
    m = CompactMap(client, "kill")
    assert all(m.get(k.decode()) == plain_value(v) for k, v in data.items())  # nothing lost meanwhile
    result = m.migrate_from("*")
    assert result["remaining"] == 0
    want = expected_items(data)
    want["other:1"] = b"not matched"
    assert dict(m.items()) == want  # nothing lost, nothing twice
    assert m.count() == len(want) and m.verify("*")["ok"]


@pytest.mark.parametrize("ttl_mode", TTL_MODES)
def test_migration_and_reverse_on_a_cluster(cluster_client: redis.RedisCluster, ttl_mode: str) -> None:
    data = load_plain(cluster_client, 300)
    ttls = {k: cluster_client.ttl(k) for k in data}
    started = time.monotonic()  # the remaining lives shrink by the time the moves take
    m = CompactMap(cluster_client, "cmig", expected=1000, ttl_mode=ttl_mode)
    r = m.migrate_from("user:*", batch=40)
    r2 = m.migrate_from("profile:*", batch=40)
    assert r["remaining"] == r2["remaining"] == 0
    assert dict(m.items()) == expected_items(data)
    assert m.verify("user:*")["ok"]
    moved_ttls = [m.ttl(k.decode()) for k, t in ttls.items() if t > 0]
    took = time.monotonic() - started
    assert moved_ttls and all(990 - took <= t <= 1000 for t in moved_ttls)
    back = m.migrate_to_plain()
    assert back["moved"] == len(data)
    assert {k: cluster_client.get(k) for k in data} == data
    slack = 2 + time.monotonic() - started  # a loaded machine may take seconds over the moves
    assert all(t - slack <= cluster_client.ttl(k) <= t + 1 if t > 0 else cluster_client.ttl(k) == -1
               for k, t in ttls.items())
