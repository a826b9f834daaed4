"""The memory meter: honest used_memory deltas and the pitfalls it handles."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from densekv.errors import MeterError
from densekv.tools.bulk import bulk_load
from densekv.tools.measure import Meter
from densekv.tools.server.process import ServerProcess


def load_strings(client: redis.Redis, start: int, stop: int) -> None:
    bulk_load(client, (("SET", b"k:%d" % i, b"%08d" % i) for i in range(start, stop)))
    client.connection_pool.disconnect()  # the loader's buffers are not data


def plain_delta(proc: ServerProcess, n: int) -> float:
    """The naive but honest reference: fresh server, one reading before, one after."""
    client = proc.client()
    before = client.info("memory")["used_memory"]
    load_strings(client, 0, n)
    time.sleep(1.5)  # let rehashing and client-buffer shrinking finish
    after = client.info("memory")["used_memory"]
    client.close()
    return float(after - before) / n


def test_meter_refuses_a_server_with_data(client: redis.Redis) -> None:
    client.set("users-precious-key", "1")
    with pytest.raises(MeterError, match="not empty"):
        Meter(client)
    assert client.get("users-precious-key") == b"1"


def test_meter_refuses_a_cluster(cluster_client: redis.RedisCluster) -> None:
    with pytest.raises(MeterError, match="cluster"):
        Meter(cluster_client)  # type: ignore[arg-type]


def test_flush_then_immediate_reading_is_not_fooled_by_lazy_free(
    fresh_server: Callable[..., ServerProcess], server_name: str
) -> None:
    """A reading right after a lazy flush must not still count the old data set."""
    proc = fresh_server(server_name, options={"lazyfree-lazy-user-flush": "yes"})
    client = proc.client()
    meter = Meter(client)
    empty = meter.reset().used_memory
    load_strings(client, 0, 300_000)
    # The pitfall: plain FLUSHALL is asynchronous here; the meter's reset waits it out.
    client.flushall()
    after = meter.reset()
    assert client.info("memory")["lazyfree_pending_objects"] == 0
    assert abs(after.used_memory - empty) < 64 * 1024, (after.used_memory, empty)


def test_meter_agrees_with_a_plain_delta_on_a_fresh_server(
    fresh_server: Callable[..., ServerProcess], server_name: str
) -> None:
    n = 200_000
    reference = plain_delta(fresh_server(server_name), n)
    proc = fresh_server(server_name)
    client = proc.client()
    meter = Meter(client)
    # Dirty the server first: the meter must get back to an honest baseline.
    load_strings(client, 0, 50_000)
    meter = Meter(client, clear=True)
    curve = meter.curve("strings", lambda a, b: load_strings(client, a, b), [20_000, n])
    measured = curve.final.bytes_per_item
    assert abs(measured - reference) / reference < 0.03, (measured, reference)
    assert curve.points[0].n == 20_000 and curve.final.n == n
    assert curve.final.memory_usage_bytes_per_item is not None
    # MEMORY USAGE prices key+value but not the main dict's buckets: lower, same scale.
    assert 0.4 * measured < curve.final.memory_usage_bytes_per_item < 1.2 * measured


def test_the_meters_own_first_commands_do_not_land_in_a_delta(
    fresh_server: Callable[..., ServerProcess], server_name: str
) -> None:
    """A fresh server allocates a ~25 KB latency histogram the first time it runs each
    command name; the meter's sampling commands (RANDOMKEY, MEMORY USAGE, OBJECT ENCODING)
    must have run before its first baseline, or an empty load reads ~75 KB."""
    proc = fresh_server(server_name)
    client = proc.client()
    meter = Meter(client)
    client.set("one", "1")  # the load's own commands: warmed up before the baseline
    client.delete("one")
    meter.reset()
    client.set("one", "1")
    meter.memory_usage_per_item(1)
    client.object("encoding", "one")
    client.delete("one")
    assert abs(meter.delta()) < 4096
    client.close()


def test_db_scope_flushes_only_its_database(server: ServerProcess) -> None:
    other = server.client(db=1)
    mine = server.client(db=2)
    other.flushall()
    other.set("keep", "me")
    meter = Meter(mine, scope="db")
    mine.set("x", "1")
    meter.reset()
    assert mine.dbsize() == 0 and other.get("keep") == b"me"
    other.flushall()
