"""Bytes per session for every session layout, on each server of the matrix.

One fresh server per (server, layout); sessions with integer identities 0..N-1 and no
payload are created through SessionStore.create_many (pipelined, 5000 per round trip) and
measured with densekv's Meter at N/10 and N, and cross-checked by a plain used_memory
delta (INFO memory on the fresh server before anything is written, and after the load:
no flush, no settling) - `plain_bytes_per_item` and `meter_vs_plain_pct`. Also: pipelined
get() throughput and the server's usec_per_call for the commands a get() sends (INFO
commandstats).
Prints one JSON record per run. Issue 3 targets: dense <= 32 B/session at 1M without the
identity index, <= 50 with it.

Usage: python benchmarks/session_memory.py [--n 1000000] [--server NAME ...]
       [--layout NAME ...] [--index] [--gets 50000] [--partitions P] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import time

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code

from densekv.sessions import LAYOUTS, SessionStore
from densekv.tools.measure import Meter
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess


def commandstats(client) -> dict[str, dict[str, float]]:  # type: ignore[no-untyped-def]
    return {k.removeprefix("cmdstat_"): v for k, v in client.info("commandstats").items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--server", action="append")
    ap.add_argument("--layout", action="append")
    ap.add_argument("--index", action="store_true", help="keep the identity index (default off)")
    ap.add_argument("--gets", type=int, default=50_000)
    ap.add_argument("--partitions", type=int, default=None, help="force the partition count (zset variants)")
    ap.add_argument("--out", default=None, help="also append the records to this JSONL file")
    args = ap.parse_args()
    servers = find_servers()
    commit = gitstamp.commit()
    for name in args.server or list(servers):
        for layout in args.layout or LAYOUTS:
            with ServerProcess(servers[name]) as proc:
                client = proc.client()
                plain_before = int(client.info("memory")["used_memory"])
                meter = Meter(client)  # before the store writes its metadata key
                try:
                    store = SessionStore(client, layout=layout, expected_sessions=args.n,
                                         index_identities=args.index,
                                         partitions=args.partitions if layout in ("zset", "dense", "fieldttl") else None).open()
                except Exception as exc:  # noqa: BLE001  # any refusal is a "skipped" record, e.g. fieldttl where the server has no field TTL
                    print(json.dumps({"benchmark": "session_memory", "server": name, "layout": layout,
                                      "skipped": str(exc)}), flush=True)
                    continue
                tokens: list[str] = []

                def load(start: int, stop: int, store: SessionStore = store, tokens: list[str] = tokens) -> None:
                    for lo in range(start, stop, 5000):
                        made = store.create_many(range(lo, min(stop, lo + 5000)), batch=5000)
                        if len(tokens) < args.gets:
                            tokens.extend(made[: args.gets - len(tokens)])

                t0 = time.perf_counter()
                curve = meter.curve(layout, load, [args.n // 10, args.n])
                load_s = time.perf_counter() - t0
                plain = (int(client.info("memory")["used_memory"]) - plain_before) / args.n
                client.config_resetstat()
                t1 = time.perf_counter()
                for i in range(0, len(tokens), 1000):
                    store.get_many(tokens[i : i + 1000])
                get_s = time.perf_counter() - t1
                stats = commandstats(client)
            record = {
                "benchmark": "session_memory", "commit": commit, "server": name,
                "version": curve.version, "allocator": curve.allocator, "layout": layout,
                "partitions": store.explain().get("partitions"), "index": args.index,
                "n": args.n, "bytes_per_item": round(curve.final.bytes_per_item, 2),
                "bytes_per_item_at_n_10": round(curve.points[0].bytes_per_item, 2),
                "plain_bytes_per_item": round(plain, 2),
                "meter_vs_plain_pct": round(100 * (curve.final.bytes_per_item - plain) / plain, 2),
                "memory_usage_bytes_per_item": round(curve.final.memory_usage_bytes_per_item or 0, 2),
                "create_per_s": round(args.n / load_s),
                "get_per_s": round(len(tokens) / get_s) if tokens else None,
                "server_usec_per_call": {k: v["usec_per_call"] for k, v in stats.items()
                                         if k in ("get", "hget", "hgetall", "expiretime", "multi", "exec")},
            }
            print(json.dumps(record), flush=True)
            if args.out:
                with open(args.out, "a") as fh:
                    fh.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
