"""Bulk-load throughput: SET k:<n> <8 bytes> from one Python process, pipelined.

Prints one JSON record. Claim (issue 2): >= 150k simple commands per second on a 2-core
machine. Usage: python benchmarks/bulk_load.py [--n 1000000] [--server valkey-9.1]
"""

from __future__ import annotations

import argparse
import json
import time

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code

import densekv
from densekv.tools.bulk import bulk_load


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--server", default="valkey-9.1")
    ap.add_argument("--batch", type=int, default=2000)
    args = ap.parse_args()
    with densekv.embedded(args.server) as srv:
        client = srv.client()
        commands = (("SET", b"k:%d" % i, b"%08d" % i) for i in range(args.n))
        t0 = time.perf_counter()
        sent = bulk_load(client, commands, batch=args.batch)
        elapsed = time.perf_counter() - t0
        assert client.dbsize() == args.n
        info = client.info("server")
    commit = gitstamp.commit()
    print(json.dumps({
        "benchmark": "bulk_load",
        "commit": commit,
        "server": args.server,
        "version": info.get("valkey_version") or info["redis_version"],
        "n": sent,
        "batch": args.batch,
        "seconds": round(elapsed, 3),
        "commands_per_s": round(sent / elapsed),
    }))


if __name__ == "__main__":
    main()
