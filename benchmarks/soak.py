"""Soak: N client processes of mixed densekv operations for M minutes, and memory over time.

Issue 17 asks whether densekv holds up under a steady mixed load: throughput and latency per
operation kind, and no memory growth once the live set is steady. Each worker process
(multiprocessing, spawn) opens the same three namespaces through the public API and loops:

  sessions  get, touch, regenerate, and churn (destroy its oldest session, create a new
            one), so each worker keeps exactly --live sessions; identities 0..999 (the
            identity index holds several sessions per identity); payloads: 70% small
            (inline), 20% ~100 B (split into the continuation hash), 10% ~400 B (out of
            line, a `so` key each)
  sweeps    the main process runs SessionStore.sweep() and CompactMap.sweep() every
            --sweep seconds, as an application would (`densekv sweep --every N`): a map
            value overwritten by an inline one leaves its out-of-line key until a sweep
  sets      CompactSet add (check-and-set: True only when new), contains, remove, items
            drawn from a fixed universe of --set-universe 16-byte ids (prefilled half
            full, so adds and removes keep it at its equilibrium size)
  maps      CompactMap incr of --map-keys counters, and batches of 4 incr + 2 get + 2 set
            (values of 20-300 bytes, the large ones out of line) over the same keys

Before the clock starts every worker creates its --live sessions and the main process
prefills the set and the map, so the timed run starts at the steady state. The main
process samples every --sample seconds: used_memory (summed over the masters of a
cluster) and `data_memory`, the same less the buffers that fill up by themselves (the
replication backlog grows to repl-backlog-size per master once a replica is attached;
client and AOF buffers), and a census of densekv's keys by key code (densekv/keys.py
CODES): session index entries (fields of `si` hashes), sessions (fields of `sd` hashes),
continuation entries (`sc`), repartition tombstones (`sd`/`sc` keys that are strings),
out-of-line values (`so`, `om`, `oh` keys), dictionaries (fields of `zd`). The slopes are least-squares
fits over the samples after the first --settle fraction of the run; the memory slope is
given with its standard error, and data_memory's also as percent of its mean per hour.

Prints one JSON record per run (stamped with benchmarks/gitstamp.py's commit):
  {"benchmark": "soak", "commit", "server", "version", "cluster", "replicas", "processes",
   "seconds", "sweeps": [{"t", "expired_sessions", "ms"}], "ops": {kind: {"count", "per_s",
   "p50_us", "p99_us", "p999_us", "errors", "first_error"}}, "total_per_s", "memory":
   {"samples": [{"t", "used_memory", "data_memory", <buffers>, "keys": {...}}], "settle_s",
   "slope_bytes_per_s", "slope_stderr_bytes_per_s", "data_slope_bytes_per_s",
   "data_slope_stderr_bytes_per_s", "data_slope_pct_per_hour", "keys_slope_per_s": {...}}}
Latencies are wall time of one public API call seen by the client (client CPU included:
on 2 shared cores the Python side dominates); compare servers within one run's ratios.

Usage: python benchmarks/soak.py [--server NAME | --url URL] [--cluster 3 [--replicas 1]]
       [--processes 2] [--minutes 1 | --seconds S] [--sample 3] [--sweep 20] [--live 1000]
       [--out FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import multiprocessing as mp
import os
import queue
import random
import sys
import time
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code
import redis

import densekv

SESS_NS, SET_NS, MAP_NS = "soak-sess", "soak-set", "soak-map"
IDENTITIES = 1000
#: (kind, weight) of the timed loop; churn times its destroy and its create separately.
MIX = (("session_get", 30), ("session_touch", 10), ("session_regenerate", 5),
       ("session_churn", 10), ("set_add", 10), ("set_contains", 10), ("set_remove", 10),
       ("map_incr", 10), ("map_batch", 5))
COUNTED = ("si", "sd", "sc", "so", "om", "oh", "zd", "m", "h", "ds", "dq")


# -- clients --------------------------------------------------------------------------------
def open_client(url: str, cluster: bool) -> redis.Redis | redis.RedisCluster:
    return densekv.connect(url, cluster=cluster)


def masters(client: redis.Redis | redis.RedisCluster) -> list[redis.Redis]:
    """One plain client per master (the server itself when not a cluster)."""
    if isinstance(client, redis.RedisCluster):
        return [client.get_redis_connection(n)
                for n in client.get_primaries()]  # type: ignore[no-untyped-call]
    return [client]


def set_item(i: int) -> bytes:
    return hashlib.sha256(b"soak-set:%d" % i).digest()[:16]


def payload(rng: random.Random) -> dict[str, Any]:
    r = rng.random()
    if r < 0.7:
        return {"csrf": rng.randbytes(8).hex()}
    size = 100 if r < 0.9 else 400
    return {"csrf": rng.randbytes(8).hex(), "blob": rng.randbytes(size // 2).hex()}


def map_value(rng: random.Random) -> str:
    """20, 40 or 300 characters: the last ones are stored out of line."""
    return rng.randbytes(rng.choice((10, 20, 150))).hex()


class SoakError(Exception):
    """A one-line reason the soak cannot run (exit 2)."""


# -- the worker -----------------------------------------------------------------------------
def worker(wid: int, url: str, cluster: bool, args: dict[str, Any], ready: Any, go: Any,
           results: Any) -> None:
    rng = random.Random(1000 + wid)
    client = open_client(url, cluster)
    store = densekv.SessionStore(client, SESS_NS, idle_ttl=3600, expected_sessions=args["expected"])
    cset = densekv.CompactSet(client, SET_NS, expected=args["set_universe"])
    cmap = densekv.CompactMap(client, MAP_NS, expected=args["map_keys"])
    live: list[str] = [store.create(rng.randrange(IDENTITIES), payload(rng)) for _ in range(args["live"])]
    lat: dict[str, array[int]] = {kind: array("q") for kind, _ in MIX}
    for extra in ("session_create", "session_destroy"):
        lat[extra] = array("q")
    errors: dict[str, int] = {}
    first_error: dict[str, str] = {}
    kinds = [k for k, _ in MIX]
    weights = [w for _, w in MIX]
    ready.put(wid)
    go.wait()
    deadline = time.monotonic() + args["seconds"]

    def timed(kind: str, call: Callable[..., object], *call_args: object) -> object:
        t0 = time.perf_counter_ns()
        try:
            out = call(*call_args)
        except Exception as exc:  # noqa: BLE001 - counted and reported, the soak goes on
            errors[kind] = errors.get(kind, 0) + 1
            first_error.setdefault(kind, f"{type(exc).__name__}: {exc}"[:300])
            return None
        lat[kind].append((time.perf_counter_ns() - t0) // 1000)
        return out

    while time.monotonic() < deadline:
        for kind in rng.choices(kinds, weights, k=64):
            if kind == "session_get":
                timed(kind, store.get, rng.choice(live))
            elif kind == "session_touch":
                timed(kind, store.touch, rng.choice(live))
            elif kind == "session_regenerate":
                i = rng.randrange(len(live))
                new = timed(kind, store.regenerate, live[i])
                if isinstance(new, str):
                    live[i] = new
            elif kind == "session_churn":
                old = live.pop(0)
                timed("session_destroy", store.destroy, old)
                new = timed("session_create", store.create, rng.randrange(IDENTITIES), payload(rng))
                live.append(new if isinstance(new, str) else old)  # a failed create: keep the count
            elif kind in ("set_add", "set_contains", "set_remove"):
                item = set_item(rng.randrange(args["set_universe"]))
                op = {"set_add": cset.add, "set_contains": cset.contains, "set_remove": cset.remove}[kind]
                timed(kind, op, item)
            elif kind == "map_incr":
                timed(kind, cmap.incr, f"ctr:{rng.randrange(args['map_keys'])}")
            else:
                timed(kind, run_batch, cmap, rng, args["map_keys"])
    results.put({"wid": wid, "lat": {k: v.tobytes() for k, v in lat.items()}, "errors": errors,
                 "first_error": first_error})
    client.close()


def run_batch(cmap: densekv.CompactMap, rng: random.Random, keys: int) -> list[Any]:
    b = cmap.batch()
    for _ in range(4):
        b.incr(f"ctr:{rng.randrange(keys)}")
    for _ in range(2):
        b.get(f"val:{rng.randrange(keys // 4)}")
    for _ in range(2):
        b.set(f"val:{rng.randrange(keys // 4)}", map_value(rng))
    return b.execute()


# -- sampling -------------------------------------------------------------------------------
#: census names for the fields of the hashes of these codes
ENTRIES = {"si": "index_entries", "sd": "sessions", "sc": "continuations", "zd": "dictionaries"}


#: INFO memory fields that are buffers, not data: they fill up on their own (a replica's
#: backlog grows to repl-backlog-size under any write load) and are left out of `data_memory`.
BUFFERS = ("mem_replication_backlog", "mem_clients_slaves", "mem_clients_normal", "mem_aof_buffer")


def census(client: redis.Redis | redis.RedisCluster) -> tuple[dict[str, int], dict[str, int]]:
    """(used_memory and its buffers summed over masters, counts of densekv's keys and
    entries by code); `data_memory` is used_memory less the BUFFERS.

    Read-only and script-free (an EVAL would add to the server's script cache): SCAN, then
    TYPE of each key whose fields are counted, then HLEN of the hashes among them (HKEYS of
    the partition hashes: their continuation fields are counted apart); a string
    where a partition or continuation hash belongs is a repartition tombstone.

    On one server the HLENs run in one MULTI/EXEC, so the counts are one moment's (a session
    destroyed in one partition and its successor created in another are never both counted).
    A cluster refuses a transaction across slots, so there each count may be off by the
    operations in flight while it is read. Even one moment's counts show the index one entry
    ahead of the records mid-create or mid-regenerate: a session is listed under its identity
    before it can be found, so that destroy_all never misses it."""
    atomic = not isinstance(client, redis.RedisCluster)
    mem = dict.fromkeys(("used_memory", "data_memory", *BUFFERS), 0)
    keys: dict[str, int] = {f"{c}_keys": 0 for c in COUNTED}
    keys.update({name: 0 for name in ENTRIES.values()})
    keys["tombstones"] = 0
    for node in masters(client):
        info = node.info("memory")
        mem["used_memory"] += int(info["used_memory"])
        mem["data_memory"] += int(info["used_memory"]) - sum(int(info.get(b, 0)) for b in BUFFERS)
        for b in BUFFERS:
            mem[b] += int(info.get(b, 0))
        listed: list[tuple[str, bytes]] = []
        for k in node.scan_iter(match="soak-*", count=1000):
            parts = k.split(b":")
            code = parts[1].decode(errors="replace").rstrip("0123456789") if len(parts) > 1 else "?"
            if code in COUNTED:
                keys[f"{code}_keys"] += 1
            if code in ENTRIES:
                listed.append((code, k))
        pipe = node.pipeline(transaction=False)
        for _, k in listed:
            pipe.type(k)
        types = pipe.execute() if listed else []
        hashes = [(code, k) for (code, k), t in zip(listed, types) if t in (b"hash", "hash")]
        keys["tombstones"] += sum(1 for (code, _), t in zip(listed, types)
                                  if code in ("sd", "sc") and t in (b"string", "string"))
        counts = node.pipeline(transaction=atomic)
        for code, k in hashes:
            if code == "sd":  # a split session's continuation field is not a session
                counts.hkeys(k)
            else:
                counts.hlen(k)
        for (code, _), n in zip(hashes, counts.execute() if hashes else []):
            if code == "sd":
                conts = continuation_fields(n)
                keys["continuation_fields"] = keys.get("continuation_fields", 0) + conts
                n = len(n) - conts
            keys[ENTRIES[code]] += int(n)
    return mem, keys


def continuation_fields(fields: list[bytes]) -> int:
    """How many of a partition hash's fields are continuation fields (partitioned.py
    cont_field: a session's field with the top bit of its first byte set, or with one 0x00
    byte appended): those whose session's field is there too (a continuation is written and
    removed with its record, atomically; a session field that is another's with one bit
    flipped is a 1 in 2**120 chance)."""
    have = set(fields)
    return sum(1 for f in fields if (f[0] >= 0x80 and bytes((f[0] & 0x7F,)) + f[1:] in have)
               or (f.endswith(b"\x00") and f[:-1] in have))


def server_version(node: redis.Redis) -> str:
    info = node.info("server")
    return str(info.get("valkey_version") or info["redis_version"])


def slope(ts: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over ts (0.0 with fewer than two points)."""
    return fit(ts, ys)[0]


def fit(ts: list[float], ys: list[float]) -> tuple[float, float]:
    """(least-squares slope of ys over ts, its standard error); zeros when undetermined."""
    n = len(ts)
    if n < 2:
        return 0.0, 0.0
    mt, my = sum(ts) / n, sum(ys) / n
    den = sum((t - mt) ** 2 for t in ts)
    if not den:
        return 0.0, 0.0
    b = sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / den
    if n < 3:
        return b, 0.0
    resid = sum((y - my - b * (t - mt)) ** 2 for t, y in zip(ts, ys))
    return b, (resid / (n - 2) / den) ** 0.5


def pct(sorted_us: array[int], q: float) -> float | None:
    if not sorted_us:
        return None
    return float(sorted_us[min(len(sorted_us) - 1, int(q * len(sorted_us)))])


# -- the run --------------------------------------------------------------------------------
@contextmanager
def target(args: argparse.Namespace) -> Iterator[tuple[str, bool, str, str]]:
    """(url, is cluster, server name, version) of the server under test."""
    if args.url:
        client = open_client(args.url, args.cluster > 0)
        if any(True for node in masters(client) for _ in node.scan_iter(match="soak-*", count=1000)):
            client.close()
            raise SoakError("the database already holds soak-* keys: use an empty one")
        try:
            yield args.url, args.cluster > 0, "url", server_version(masters(client)[0])
        finally:
            for node in masters(client):
                for k in node.scan_iter(match="soak-*", count=1000):
                    node.unlink(k)
            client.close()
        return
    kw: dict[str, Any] = {"cluster": args.cluster}
    if args.replicas:
        if "replicas" not in inspect.signature(densekv.embedded).parameters:
            raise SoakError("this densekv.embedded() has no replicas= yet: leave out --replicas")
        kw["replicas"] = args.replicas
    with densekv.embedded(args.server, **kw) as srv:
        c = srv.client()
        version = server_version(masters(c)[0])
        c.close()
        yield srv.url, srv.is_cluster, args.server, version


def run(args: argparse.Namespace) -> dict[str, Any]:
    with target(args) as (url, cluster, server, version):
        client = open_client(url, cluster)
        # Open every namespace once here, so the workers adopt one geometry, and prefill.
        live_total = args.live * args.processes
        store = densekv.SessionStore(client, SESS_NS, idle_ttl=3600, expected_sessions=live_total).open()
        cset = densekv.CompactSet(client, SET_NS, expected=args.set_universe).open()
        cset.add_many([set_item(i) for i in random.Random(7).sample(range(args.set_universe),
                                                                     args.set_universe // 2)])
        cmap = densekv.CompactMap(client, MAP_NS, expected=args.map_keys).open()
        cmap.mset({f"ctr:{i}": 0 for i in range(args.map_keys)})
        rng = random.Random(8)
        cmap.mset({f"val:{i}": map_value(rng) for i in range(args.map_keys // 4)})
        ctx = mp.get_context("spawn")
        ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
        wargs = {"seconds": args.seconds, "live": args.live, "expected": live_total,
                 "set_universe": args.set_universe, "map_keys": args.map_keys}
        procs = [ctx.Process(target=worker, args=(w, url, cluster, wargs, ready, go, results), daemon=True)
                 for w in range(args.processes)]
        for p in procs:
            p.start()
        waiting = len(procs)
        while waiting:  # every worker has its live sessions; a dead one stops the soak
            try:
                ready.get(timeout=2)
                waiting -= 1
            except queue.Empty:
                dead = [p.exitcode for p in procs if p.exitcode is not None]
                if dead:
                    raise SoakError(f"a worker died before the start (exit {dead[0]})") from None
        samples: list[dict[str, Any]] = []
        sweeps: list[dict[str, Any]] = []
        go.set()
        t0 = time.monotonic()
        while (now := time.monotonic() - t0) < args.seconds:
            mem, keys = census(client)
            samples.append({"t": round(now, 2), **mem, "keys": keys})
            if args.sweep and now >= args.sweep * (len(sweeps) + 1):
                # What an application runs now and then (densekv sweep --every N): expired
                # sessions, and map values left out of line by an inline overwrite.
                t1 = time.perf_counter()
                expired = store.sweep()
                cmap.sweep()
                sweeps.append({"t": round(now, 2), "expired_sessions": expired,
                               "ms": round(1000 * (time.perf_counter() - t1), 1)})
            time.sleep(max(0.0, min(args.sample * len(samples), args.seconds) - (time.monotonic() - t0)))
        outs = [results.get(timeout=args.seconds + 120) for _ in procs]
        elapsed = time.monotonic() - t0
        mem, keys = census(client)
        samples.append({"t": round(elapsed, 2), **mem, "keys": keys})
        for p in procs:
            p.join(timeout=30)
        client.close()
    ops: dict[str, Any] = {}
    total = 0
    for kind in sorted({k for o in outs for k in o["lat"]}):
        us = array("q")
        for o in outs:
            us.frombytes(o["lat"][kind])
        us = array("q", sorted(us))
        errs = sum(o["errors"].get(kind, 0) for o in outs)
        if not us and not errs:
            continue  # session_churn: timed as its destroy and its create
        total += len(us)
        ops[kind] = {"count": len(us), "per_s": round(len(us) / args.seconds, 1),
                     "p50_us": pct(us, 0.5), "p99_us": pct(us, 0.99), "p999_us": pct(us, 0.999),
                     "errors": errs,
                     "first_error": next((o["first_error"][kind] for o in outs if kind in o["first_error"]),
                                         None)}
    settle = args.seconds * args.settle
    steady = [s for s in samples if s["t"] >= settle]
    ts = [float(s["t"]) for s in steady]
    mem_slope, mem_se = fit(ts, [float(s["used_memory"]) for s in steady])
    data_slope, data_se = fit(ts, [float(s["data_memory"]) for s in steady])
    mean_mem = sum(s["data_memory"] for s in steady) / len(steady) if steady else 0
    return {
        "benchmark": "soak", "commit": gitstamp.commit(), "server": server, "version": version,
        "cluster": args.cluster, "replicas": args.replicas, "processes": args.processes,
        "seconds": args.seconds, "live_sessions": live_total, "set_universe": args.set_universe,
        "map_keys": args.map_keys, "ops": ops, "total_per_s": round(total / args.seconds, 1),
        "sweep_every_s": args.sweep, "sweeps": sweeps,
        "memory": {
            "samples": samples, "settle_s": round(settle, 1),
            "slope_bytes_per_s": round(mem_slope, 2), "slope_stderr_bytes_per_s": round(mem_se, 2),
            "data_slope_bytes_per_s": round(data_slope, 2), "data_slope_stderr_bytes_per_s": round(data_se, 2),
            "data_slope_pct_per_hour": round(100 * data_slope * 3600 / mean_mem, 3) if mean_mem else None,
            "keys_slope_per_s": {k: round(slope(ts, [float(s["keys"][k]) for s in steady]), 4)
                                 for k in (steady[0]["keys"] if steady else {})},
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="mixed-load soak of densekv (see the module docstring)")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--server", default="valkey-9.1", help="embedded server of the matrix")
    where.add_argument("--url", help="an empty database to soak instead (soak-* keys removed after)")
    ap.add_argument("--cluster", type=int, default=0, help="masters of an embedded cluster (or: --url is one)")
    ap.add_argument("--replicas", type=int, default=0, help="replicas per master (embedded cluster)")
    ap.add_argument("--processes", type=int, default=2)
    dur = ap.add_mutually_exclusive_group()
    dur.add_argument("--minutes", type=float, default=1.0)
    dur.add_argument("--seconds", type=float)
    ap.add_argument("--sample", type=float, default=3.0, help="seconds between memory samples")
    ap.add_argument("--settle", type=float, default=0.2, help="fraction of the run left out of the slopes")
    ap.add_argument("--sweep", type=float, default=20.0,
                    help="seconds between store.sweep() + map.sweep() in the main process (0: never)")
    ap.add_argument("--live", type=int, default=1000, help="sessions each worker keeps alive")
    ap.add_argument("--set-universe", type=int, default=4096)
    ap.add_argument("--map-keys", type=int, default=2048)
    ap.add_argument("--out", help="also append the record to this JSONL file")
    args = ap.parse_args(argv)
    args.seconds = args.seconds if args.seconds is not None else args.minutes * 60
    if args.processes < 1 or args.seconds <= 0 or args.live < 1 or args.map_keys < 4 or args.set_universe < 2:
        ap.error("--processes, --seconds, --live >= 1, --map-keys >= 4, --set-universe >= 2")
    if args.replicas and not args.cluster:
        ap.error("--replicas needs --cluster")
    try:
        record = run(args)
    except (SoakError, densekv.DensekvError) as exc:
        print(f"soak: {exc}", file=sys.stderr)
        return 2
    line = json.dumps(record)
    print(line, flush=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
