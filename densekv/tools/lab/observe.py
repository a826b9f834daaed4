"""What the lab reads from a server besides memory: server time per command, encodings.

Server time comes from INFO commandstats *deltas* (never CONFIG RESETSTAT: on a user's
server that would wipe their statistics). Commands that wrap others - EXEC, EVAL,
EVALSHA, FCALL - are booked with the time of the commands inside them, and those inner
commands are booked again under their own names (measured on redis-7.0, redis-7.4,
valkey-8.0 and valkey-9.1). So when a phase contains a wrapper, its server time is the
wrappers' time (plus MULTI's) and the inner commands are listed but not added: nothing
is counted twice. The lab's phases never mix wrapped and unwrapped writes.

On a cluster (a RedisCluster client) the snapshot is the sum over the masters: every
master's commandstats, added command by command, so a phase's server time is the whole
cluster's.

Encodings come from OBJECT ENCODING on a fixed-seed sample of partition keys: the share
of listpacks that have converted to hashtables / skiplists at each checkpoint is what
puts the conversion points on the curves.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

import redis

#: Commands the lab itself sends around a phase (readings, sampling): never server work.
HOUSEKEEPING = frozenset({
    "info", "config", "config|get", "config|set", "ping", "select", "client", "hello",
    "memory", "memory|usage", "object", "object|encoding", "randomkey", "dbsize", "flushall",
    "flushdb", "command", "command|info", "script", "script|load", "client|setinfo",
    "client|setname", "slowlog",
})
WRAPPERS = frozenset({"exec", "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"})

Stats = dict[str, tuple[int, int]]  # command -> (calls, usec)


def commandstats(client: redis.Redis | redis.RedisCluster) -> Stats:
    if isinstance(client, redis.RedisCluster):
        per_node = client.info("commandstats", target_nodes=redis.RedisCluster.PRIMARIES)
        sections = [v for v in per_node.values() if isinstance(v, dict)]
    else:
        sections = [client.info("commandstats")]
    out: Stats = {}
    for section in sections:
        for key, value in section.items():
            if isinstance(value, dict):
                name = key.removeprefix("cmdstat_")
                calls, usec = out.get(name, (0, 0))
                out[name] = (calls + int(value.get("calls", 0)), usec + int(value.get("usec", 0)))
    return out


def stats_delta(before: Stats, after: Stats) -> tuple[float, dict[str, dict[str, float]]]:
    """(server usec of the phase, per-command {calls, usec, usec_per_call}) from two
    snapshots; wrappers counted instead of what they wrap (see the module comment)."""
    per: dict[str, dict[str, float]] = {}
    for name, (calls, usec) in after.items():
        c0, u0 = before.get(name, (0, 0))
        if name in HOUSEKEEPING or calls - c0 <= 0:
            continue
        dc, du = calls - c0, usec - u0
        per[name] = {"calls": dc, "usec": du, "usec_per_call": round(du / dc, 3)}
    wrapped = [n for n in per if n in WRAPPERS]
    if wrapped:
        total = sum(per[n]["usec"] for n in per if n in WRAPPERS or n == "multi")
    else:
        total = sum(v["usec"] for v in per.values())
    return float(total), per


def encodings(client: redis.Redis | redis.RedisCluster, keys: Iterable[bytes]) -> dict[str, int]:
    """How many of `keys` have each encoding (missing keys are left out)."""
    pipe = client.pipeline(transaction=False)
    keys = list(keys)
    for key in keys:
        pipe.object("encoding", key)
    counts: dict[str, int] = {}
    for reply in pipe.execute(raise_on_error=False):
        if reply is None or isinstance(reply, Exception):
            continue
        name = reply.decode() if isinstance(reply, bytes) else str(reply)
        counts[name] = counts.get(name, 0) + 1
    return counts


#: The encodings a small structure leaves when it outgrows its limit.
BIG_ENCODINGS = frozenset({"hashtable", "skiplist"})


def converted_share(counts: dict[str, int]) -> float | None:
    total = sum(counts.values())
    if not total:
        return None
    return sum(v for k, v in counts.items() if k in BIG_ENCODINGS) / total


def sample_partitions(partitions: int, k: int, seed: int = 7) -> list[int]:
    """A fixed-seed sample of partition numbers (all of them when there are few)."""
    if partitions <= k:
        return list(range(partitions))
    return sorted(random.Random(seed).sample(range(partitions), k))
