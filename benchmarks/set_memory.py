"""Bytes per 16-byte random ID for every compact-set layout, on each server of the matrix.

One fresh server per (server, layout, partitions); N random IDs (fixed seed) added with
CompactSet.add_many (100k per call) and measured with densekv's Meter at N/10 and N.
Then, on the loaded set: 100k CAS adds (half new, half already present) through add_many,
in one add_many call, timed from one Python process (items/s), and 20k single add() calls
(half new), with the server's time (INFO commandstats):
  cas_usec_per_call   usec_per_call of each CAS command (sadd / hsetnx / hget / zadd /
                      set / evalsha)
  cas_usec_per_add    server usec per add() call: the sum over the commands add() sends
                      at top level (dense hash: HSETNX + HGET; a script call's time already
                      holds the commands it runs, so those are not counted again)
  add_many_usec_per_item  the same per item of the add_many call
Prints one JSON record per run and appends it to benchmarks/results/set_memory.jsonl.
Issue 4 targets: dense <= 20 B/ID at 1M on each server; CAS usec_per_call <= 3;
add_many >= 150k items/s.

--family measures SetFamily instead: P parents x K string children ("job-<n>"), HASH
against SET per parent, bytes per child.

Usage: python benchmarks/set_memory.py [--n 1000000] [--server NAME ...]
       [--layout NAME[:PARTITIONS] ...] [--family] [--no-save]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code

from densekv.capabilities import probe
from densekv.sets import CompactSet, SetFamily
from densekv.tools.measure import Meter
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

RESULTS = Path(__file__).parent / "results" / "set_memory.jsonl"
# layout:partitions ("" = the layout's own sizing from --n); the seed's sweep points
DEFAULT_RUNS = ["dense", "dense-hash", "dense-set", "hash:4096", "hash:8192", "set:256",
                "set:16384", "zset:16384", "flat:4096"]
CAS_COMMANDS = ("sadd", "hsetnx", "hget", "zadd", "set", "evalsha")


def top_level_usec(cmd: dict[str, Any], batch: bool) -> float:
    """Server usec of the CAS commands sent at top level. EVALSHA's time includes the
    commands its script ran (counted under their own names too): in add_many every
    partition's items go in one script call (flat: SET), and single adds are either all
    scripts (the first dense hash) or none (a rare collision fallback makes the sum an
    upper bound; cas_script_calls shows it)."""
    total = float(sum(v["usec"] for k, v in cmd.items() if k in CAS_COMMANDS))
    if "evalsha" in cmd and (batch or cmd["evalsha"]["calls"] >= SINGLE_CAS):
        return float(cmd["evalsha"]["usec"] + cmd.get("set", {}).get("usec", 0))
    return total
SINGLE_CAS = 20_000  # single add() calls timed for the server's usec_per_call


def ids(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.getrandbits(128).to_bytes(16, "big") for _ in range(n)]


def stamp(client: Any, name: str, commit: str) -> dict[str, Any]:
    caps = probe(client)
    return {"commit": commit, "server": name, "version": caps.version, "allocator": caps.allocator,
            "listpack": {"hash_max_listpack_entries": caps.hash_max_listpack_entries,
                         "hash_max_listpack_value": caps.hash_max_listpack_value,
                         "set_max_listpack_entries": caps.set_max_listpack_entries,
                         "zset_max_listpack_entries": caps.zset_max_listpack_entries}}


def run_set(name: str, binary: Any, spec: str, n: int, commit: str) -> dict[str, Any]:
    layout, _, parts = spec.partition(":")
    items = ids(1, n)
    with ServerProcess(binary) as proc:
        client = proc.client()
        base = {"benchmark": "set_memory", **stamp(client, name, commit), "layout": layout, "n": n}
        meter = Meter(client)
        holder: dict[str, CompactSet] = {}

        def load(start: int, stop: int) -> None:
            if "s" not in holder:  # made after the meter's flush: its layout record counts
                holder["s"] = CompactSet(client, "b", layout=layout, expected=n,
                                         partitions=int(parts) if parts else None)
            for lo in range(start, stop, 100_000):
                holder["s"].add_many(items[lo : min(stop, lo + 100_000)])

        try:
            t0 = time.perf_counter()
            curve = meter.curve(spec, load, [n // 10, n])
            load_s = time.perf_counter() - t0
        except ValueError as exc:  # e.g. dense-set on a server without listpack sets
            return {**base, "skipped": str(exc)}
        s = holder["s"]
        stats = s.stats()
        # CAS: 50k new + 50k present, shuffled, one process, add_many batches of 10k
        fresh = ids(2, 50_000)
        cas = fresh + items[:50_000]
        random.Random(3).shuffle(cas)
        client.config_resetstat()
        t1 = time.perf_counter()
        got = s.add_many(cas)  # round trips of max(10k, 8 x partitions) items
        cas_s = time.perf_counter() - t1
        assert sum(got) == 50_000, sum(got)
        batch_cmd = {k.removeprefix("cmdstat_"): v for k, v in client.info("commandstats").items()}
        # single CAS adds (one command each, as add() sends them): the server's usec_per_call
        client.config_resetstat()
        for item in ids(4, SINGLE_CAS // 2) + items[50_000 : 50_000 + SINGLE_CAS // 2]:
            s.add(item)
        cmd = {k.removeprefix("cmdstat_"): v for k, v in client.info("commandstats").items()}
        return {
            **base, "partitions": s.partitions, "encoding": s.explain().get("encoding"),
            "reason": s.explain()["reason"],
            "bytes_per_item": round(curve.final.bytes_per_item, 2),
            "predicted_bytes_per_item": s.explain().get("predicted_bytes_per_item"),
            "bytes_per_item_at_n_10": round(curve.points[0].bytes_per_item, 2),
            "memory_usage_bytes_per_item": round(curve.final.memory_usage_bytes_per_item or 0, 2),
            "encodings": stats["encodings"], "converted_partitions": stats["converted_count"],
            "fullest_partition": stats["fullest_partition"],
            "load_items_per_s": round(n / load_s),
            "add_many_items_per_s": round(len(cas) / cas_s),
            "cas_usec_per_call": {k: v["usec_per_call"] for k, v in cmd.items() if k in CAS_COMMANDS},
            "cas_usec_per_add": round(top_level_usec(cmd, False) / SINGLE_CAS, 2),
            "cas_script_calls": cmd.get("evalsha", {}).get("calls", 0),
            "add_many_usec_per_item": round(top_level_usec(batch_cmd, True) / len(cas), 2),
        }


def run_family(name: str, binary: Any, encoding: str, parents: int, children: int, commit: str) -> dict[str, Any]:
    with ServerProcess(binary) as proc:
        client = proc.client()
        base = {"benchmark": "set_family_memory", **stamp(client, name, commit), "encoding": encoding,
                "parents": parents, "children_per_parent": children}
        fam = SetFamily(client, "f", encoding=encoding)

        def load(start: int, stop: int) -> None:
            for p in range(start // children, stop // children):
                fam.add_many(f"parent-{p}", [f"job-{p * children + c}" for c in range(children)])

        n = parents * children
        curve = Meter(client).curve(encoding, load, [n // 10 // children * children, n])
        return {**base, "n": n, "bytes_per_child": round(curve.final.bytes_per_item, 2),
                "encoding_seen": client.object("encoding", fam.key_of("parent-0")).decode()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--server", action="append")
    ap.add_argument("--layout", action="append", help="layout[:partitions], repeatable")
    ap.add_argument("--family", action="store_true")
    ap.add_argument("--parents", type=int, default=2000)
    ap.add_argument("--children", type=int, default=100)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    servers = find_servers()
    commit = gitstamp.commit()
    for name in args.server or list(servers):
        runs = [(run_family, (name, servers[name], enc, args.parents, args.children, commit))
                for enc in ("hash", "set")] if args.family else [
                (run_set, (name, servers[name], spec, args.n, commit)) for spec in args.layout or DEFAULT_RUNS]
        for fn, fargs in runs:
            record = fn(*fargs)  # type: ignore[operator]
            print(json.dumps(record), flush=True)
            if not args.no_save:
                RESULTS.parent.mkdir(exist_ok=True)
                with RESULTS.open("a") as fh:
                    fh.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
