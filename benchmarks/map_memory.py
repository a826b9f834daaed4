"""Bytes per item for CompactMap against plain SET, on each server of the matrix (issue 5).

Cases, N items each (default 200k), values and ids from fixed seeds:
  int_holey   random signed 32-bit ints under ids drawn from 0..10^8   key user:<id>
  int_seq     random signed 32-bit ints under ids 0..N-1
  str8_holey  8-byte ASCII strings under holey ids (and str8_seq under sequential ids)
  json        ~1 KB JSON documents of one schema (str), doc:<i>; the map compresses them
              with a zstd dictionary trained on 500 other documents (stored in the server,
              so its bytes count)
Each (server, case, layout) is measured with densekv's Meter (FLUSHALL SYNC, settle,
used_memory delta) at N/10 and N, after a warm-up load on a throwaway namespace (one-time
server costs: Lua scripts, a ~25 KB latency histogram per command name), loading through one pipeline round trip per 5000
items (the map through `m.batch()`, plain through SET plans). Then 50k gets and 50k sets
in batches of 1000: client throughput (ops/s from one Python process on a shared 2-core
machine: read low when others are busy), the client process's CPU per op (moved less
by other jobs than ops/s, though not immune) and the server's usec_per_call of the
commands sent (INFO commandstats). Issue 5 targets: int_holey <= 13, int_seq <= 10,
str8 <= 18 B/item on every server; json >= 3x less than plain; get/set server time
<= 2x GET/SET; batch throughput >= 150k ops/s.

With --ttl-mode packed|field every item gets a TTL (ITEM_TTL, one day: nothing expires
during the run): the map is made with that ttl_mode (expiry packed before the value, or
the server's hash field TTL) and the plain baseline uses SET EX. Records carry "ttl_mode"
(null without the option). compact.py's ttl_mode="auto" rule comes from these runs.

Usage: python benchmarks/map_memory.py [--n 200000] [--server NAME ...] [--case NAME ...]
       [--ttl-mode packed|field] [--out benchmarks/results/map_memory.jsonl | --out -]
"""

from __future__ import annotations

import argparse
import json
import random
import string
import time
from typing import Any

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code

from densekv.executors import SyncExecutor
from densekv.maps import CompactMap
from densekv.plan import command
from densekv.tools.lab.observe import commandstats, stats_delta
from densekv.tools.measure import Meter
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

CASES = ("int_holey", "int_seq", "str8_holey", "str8_seq", "json")
BATCH = 5000
ITEM_TTL = 86_400  # --ttl-mode: every item's TTL in seconds


def make_doc(rng: random.Random, i: int) -> str:
    doc = {
        "id": i, "uuid": f"{rng.getrandbits(128):032x}", "name": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
        "email": f"user{rng.randrange(10**7)}@{rng.choice(['example.com', 'mail.org', 'corp.net'])}",
        "active": rng.random() < 0.8, "age": rng.randrange(18, 90), "balance": round(rng.uniform(0, 10**5), 2),
        "created_at": f"20{rng.randrange(10, 25)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T"
                      f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}Z",
        "address": {"street": f"{rng.randrange(1, 999)} {rng.choice(LAST)} Street", "city": rng.choice(CITIES),
                    "zip": f"{rng.randrange(10**5):05d}", "country": rng.choice(["FR", "NO", "PE", "US", "DE"])},
        "tags": rng.sample(TAGS, 3),
        "preferences": {"newsletter": rng.random() < 0.5, "theme": rng.choice(["dark", "light"]),
                        "language": rng.choice(["en", "fr", "es", "de"]), "notifications": rng.random() < 0.5},
        "roles": rng.sample(["reader", "writer", "admin", "billing", "support"], 2),
        "last_login_ip": ".".join(str(rng.randrange(256)) for _ in range(4)),
        "bio": " ".join(rng.choice(WORDS) for _ in range(40)),
    }
    return json.dumps(doc)


FIRST = ["Alice", "Bob", "Chloé", "Dmitri", "Eva", "Farid", "Grace", "Hugo", "Ines", "Jonas"]
LAST = ["Martin", "Smith", "Garcia", "Müller", "Rossi", "Nakamura", "Silva", "Olsen", "Dubois", "Kim"]
CITIES = ["Paris", "Oslo", "Lima", "Berlin", "Osaka", "Austin", "Porto", "Quebec"]
TAGS = ["alpha", "beta", "gamma", "delta", "vip", "trial", "churn-risk", "mobile", "desktop", "beta-tester"]
WORDS = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do", "eiusmod", "tempor", "incididunt", "ut", "labore", "et", "dolore", "magna", "aliqua", "enim", "ad", "minim", "veniam", "quis", "nostrud", "exercitation"]


def dataset(case: str, n: int) -> tuple[list[str], list[Any]]:
    rng = random.Random(5)
    if case == "json":
        return [f"doc:{i}" for i in range(n)], [make_doc(rng, i) for i in range(n)]
    ids = rng.sample(range(10**8), n) if case.endswith("holey") else list(range(n))
    keys = [f"user:{i}" for i in ids]
    if case.startswith("int"):
        return keys, [rng.randrange(-(2**31), 2**31) for _ in range(n)]
    return keys, ["".join(rng.choices(string.ascii_letters, k=8)) for _ in range(n)]


def run_case(proc: ServerProcess, name: str, case: str, layout: str, n: int, commit: str,
             ttl_mode: str | None = None) -> dict[str, Any]:
    client = proc.client()
    keys, values = dataset(case, n)
    codec = "zstd" if case == "json" else "auto"
    ttl = ITEM_TTL if ttl_mode else None
    ex_args: tuple[Any, ...] = ("EX", ITEM_TTL) if ttl_mode else ()
    mode = ttl_mode or "auto"

    def load_into(namespace: str, start: int, stop: int) -> None:
        # a connection of its own, closed after: its query buffer must not count as data
        lc = proc.client()
        lex = SyncExecutor(lc)
        m = CompactMap(lc, namespace, codec=codec, expected=n, ttl_mode=mode) if layout == "map" else None
        if m is not None and case == "json" and start == 0:
            rng = random.Random(99)
            m.train([make_doc(rng, 10**7 + i) for i in range(500)], size=16384)
        for lo in range(start, stop, BATCH):
            hi = min(stop, lo + BATCH)
            if m is None:
                lex.run_many([command("SET", keys[i], values[i], *ex_args) for i in range(lo, hi)])
            else:
                b = m.batch()
                for i in range(lo, hi):
                    b.set(keys[i], values[i], ttl=ttl)
                b.execute()
        lc.close()

    def load(start: int, stop: int) -> None:
        load_into("kv", start, stop)

    # Warm-up: the same load (and the reads timed below) on a throwaway namespace before
    # the meter's flush and baseline. A server allocates a latency histogram (~25 KB) the
    # first time it runs each command name, and the first map of a server loads its Lua
    # scripts: one-time costs of the server, not bytes of these items.
    load_into("warm", 0, min(n, 2000))
    warm = CompactMap(client, "warm", codec=codec, ttl_mode=mode) if layout == "map" else None
    if warm is not None:
        with warm.batch() as wb:
            wb.get(keys[0])
        warm.get(keys[0])
    else:
        client.get(keys[0])
    t0 = time.perf_counter()
    curve = Meter(client, clear=True).curve(f"{case}/{layout}", load, [n // 10, n])
    load_s = time.perf_counter() - t0
    ex = SyncExecutor(client)
    the_map = CompactMap(client, "kv", codec=codec, ttl_mode=mode) if layout == "map" else None
    ops = min(50_000, n)
    rng = random.Random(7)
    picks = [rng.randrange(n) for _ in range(ops)]
    # snapshot differences, not CONFIG RESETSTAT: that frees the ~25 KB per-command latency
    # histograms, which the next case would allocate again inside its measurement
    stats0 = commandstats(client)
    t1, c1 = time.perf_counter(), time.process_time()
    got: list[Any] = []
    for lo in range(0, ops, 1000):
        chunk = picks[lo : lo + 1000]
        if layout == "plain":
            got += ex.run_many([command("GET", keys[i]) for i in chunk])
        else:
            b = the_map.batch()
            for i in chunk:
                b.get(keys[i])
            got += b.execute()
    get_s, get_cpu = time.perf_counter() - t1, time.process_time() - c1
    t2, c2 = time.perf_counter(), time.process_time()
    for lo in range(0, ops, 1000):
        chunk = picks[lo : lo + 1000]
        if layout == "plain":
            ex.run_many([command("SET", keys[i], values[i], *ex_args) for i in chunk])
        else:
            b = the_map.batch()
            for i in chunk:
                b.set(keys[i], values[i], ttl=ttl)
            b.execute()
    set_s, set_cpu = time.perf_counter() - t2, time.process_time() - c2
    if layout == "map":  # the benchmark checks what it measured reads back
        assert got == [values[i] for i in picks], "map read back other values"
    stats = {k: v["usec_per_call"] for k, v in stats_delta(stats0, commandstats(client))[1].items()}
    m = the_map
    info = client.info("server")
    record = {
        "benchmark": "map_memory", "commit": commit, "server": name, "version": curve.version,
        "allocator": curve.allocator, "mode": info.get("redis_mode", "standalone"),
        "hash_max_listpack_entries": int(client.config_get("hash-max-listpack-entries")["hash-max-listpack-entries"]),
        "hash_max_listpack_value": int(client.config_get("hash-max-listpack-value")["hash-max-listpack-value"]),
        "case": case, "layout": layout, "ttl_mode": ttl_mode, "n": n, "buckets": m.explain()["buckets"] if m else None,
        "bytes_per_item": round(curve.final.bytes_per_item, 2),
        "bytes_per_item_at_n_10": round(curve.points[0].bytes_per_item, 2),
        "memory_usage_bytes_per_item": round(curve.final.memory_usage_bytes_per_item or 0, 2),
        "load_per_s": round(n / load_s), "batch_get_per_s": round(ops / get_s), "batch_set_per_s": round(ops / set_s),
        # CPU of this (client) process per op: less moved than ops/s by other jobs on the machine
        "batch_get_client_cpu_us": round(get_cpu / ops * 1e6, 2), "batch_set_client_cpu_us": round(set_cpu / ops * 1e6, 2),
        "server_usec_per_call": {k: v for k, v in stats.items() if k in ("get", "set", "hget", "hset", "hmget", "multi", "exec", "evalsha", "hexpireat", "hsetex")},
        "encodings": sorted({client.object("encoding", k).decode() for k in list(client.scan_iter(match="kv:[mh]:*", count=1000))[:200]}) if m else None,
    }
    client.close()
    return record


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--server", action="append")
    ap.add_argument("--case", action="append", choices=CASES)
    ap.add_argument("--ttl-mode", choices=("packed", "field"),
                    help=f"every item gets a {ITEM_TTL} s TTL, kept by the map this way (plain: SET EX)")
    ap.add_argument("--out", default="benchmarks/results/map_memory.jsonl", help="append records here ('-': print only)")
    args = ap.parse_args()
    servers = find_servers()
    commit = gitstamp.commit()
    for name in args.server or list(servers):
        with ServerProcess(servers[name]) as proc:
            for case in args.case or CASES:
                for layout in ("plain", "map"):
                    record = run_case(proc, name, case, layout, args.n, commit, args.ttl_mode)
                    line = json.dumps(record)
                    print(line, flush=True)
                    if args.out != "-":
                        with open(args.out, "a") as f:
                            f.write(line + "\n")


if __name__ == "__main__":
    main()
