"""Meter vs a plain used_memory delta on a freshly started server (issue 2's done-when).

For each server of the matrix present: 1M `SET k:<n> <8 bytes>`; (a) the meter's curve
on a server it flushed after dirtying it, (b) one reading before and one after on a
brand-new server. Prints one JSON record per server; `agree` is |a-b|/b < 3%.
Usage: python benchmarks/meter_check.py [--n 1000000] [--server NAME ...]
"""

from __future__ import annotations

import argparse
import json
import time

from densekv.tools.bulk import bulk_load
from densekv.tools.measure import Meter
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess


def load(client, start: int, stop: int) -> None:  # type: ignore[no-untyped-def]
    bulk_load(client, (("SET", b"k:%d" % i, b"%08d" % i) for i in range(start, stop)))
    client.connection_pool.disconnect()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--server", action="append")
    args = ap.parse_args()
    servers = find_servers()
    for name in args.server or list(servers):
        with ServerProcess(servers[name]) as proc:
            client = proc.client()
            before = client.info("memory")["used_memory"]
            load(client, 0, args.n)
            time.sleep(2)
            plain = (client.info("memory")["used_memory"] - before) / args.n
        with ServerProcess(servers[name]) as proc:
            client = proc.client()
            load(client, 0, args.n // 4)  # dirty it: the meter must recover a true baseline
            meter = Meter(client, clear=True)
            curve = meter.curve("set-8b", lambda a, b, client=client: load(client, a, b), [args.n // 10, args.n])
        measured = curve.final.bytes_per_item
        print(json.dumps({
            "benchmark": "meter_check", "server": name, "version": curve.version,
            "allocator": curve.allocator, "n": args.n,
            "meter_bytes_per_item": round(measured, 2),
            "plain_delta_bytes_per_item": round(plain, 2),
            "memory_usage_bytes_per_item": round(curve.final.memory_usage_bytes_per_item or 0, 2),
            "difference": round(abs(measured - plain) / plain, 4),
            "agree": abs(measured - plain) / plain < 0.03,
        }), flush=True)


if __name__ == "__main__":
    main()
