"""How fast `densekv analyze` samples and scans, what it costs the server, and whether
the client's memory stays flat as the keyspace grows.

For each keyspace size N (a fresh server, keys made by DEBUG POPULATE - the benchmark's
own loading; the analyzer never sends DEBUG): five big patterns (`user:<n>`, `sess:<n>`,
`cart:<n>`, `seen:<n>`, `score:<n>`, N/5 keys each minus the next ones) and 1000 small ones
(`p<letters>:<n>`, 100 keys each: more patterns than the table keeps, so its overflow runs).
Then `densekv analyze --json` runs in a child process: `--sample S --no-replay`; with
--with-replay `--sample S` (scan and replay); for the sizes in --full-sizes `--full
--no-replay`. Each record holds:
  seconds             wall time of the child (connect, scan, report)
  client_peak_rss_mb  the child's peak resident memory (getrusage of the child)
  server_usec         INFO commandstats usec of the analyzer's commands (delta of every
                      command but INFO, which the benchmark also sends)
  server_cpu_share    used_cpu_sys + used_cpu_user delta over the child's wall time: the
                      share of one core the analysis took from the server
Issue 13's targets: a 10k sample of a 10M-key server in <= 60 s costing <= 10% of the
server's CPU over that time; a full scan of 1M keys in <= 60 s; client memory flat with N.

Usage: python benchmarks/analyze_speed.py [--server valkey-9.1] [--sizes 1000000,10000000]
       [--sample 10000] [--full-sizes 1000000,3000000] [--with-replay] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource  # noqa: F401  (used by the child)
import subprocess
import sys
import time
from typing import Any

import gitstamp  # benchmarks/gitstamp.py
import redis

from densekv.tools.lab.observe import commandstats
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

BIG = ("user", "sess", "cart", "seen", "score")
SMALL_PATTERNS, SMALL_KEYS = 1000, 100


def populate(client: redis.Redis, n: int) -> None:
    small = SMALL_PATTERNS * SMALL_KEYS
    for prefix in BIG:
        client.execute_command("DEBUG", "POPULATE", (n - small) // len(BIG), prefix, 24)
    for i in range(SMALL_PATTERNS):  # "pbcd" etc.: letters, so each prefix is its own pattern
        word = "".join("abcdefghijklmnopqrstuvwxyz"[int(d)] for d in f"{i:03d}")
        client.execute_command("DEBUG", "POPULATE", SMALL_KEYS, f"p{word}", 24)


def cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


# The child reports its own peak RSS (getrusage of the benchmark's children would include
# the servers it stopped).
CHILD = """
import resource, sys
from densekv.tools.cli import main
sys.argv = ["densekv", "analyze", *sys.argv[1:]]
try:
    main()
finally:
    sys.stderr.write("\\nPEAK_RSS_KB=%d\\n" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def run_analysis(client: redis.Redis, url: str, args: list[str]) -> dict[str, Any]:
    stats0, cpu0 = commandstats(client), cpu(client)
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", CHILD, "--url", url, "--json", *args],
                         capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    cpu1, stats1 = cpu(client), commandstats(client)
    if out.returncode != 0:
        return {"error": out.stderr.strip()}
    peak = int(out.stderr.rsplit("PEAK_RSS_KB=", 1)[1].split()[0])
    doc = json.loads(out.stdout)
    usec = sum(u - stats0.get(name, (0, 0))[1] for name, (_, u) in stats1.items() if name != "info")
    calls = {name: c - stats0.get(name, (0, 0))[0] for name, (c, _) in stats1.items()
             if c - stats0.get(name, (0, 0))[0] > 0 and name != "info"}
    return {"seconds": round(seconds, 2), "client_peak_rss_mb": round(peak / 1024, 1), "server_usec": usec,
            "server_cpu_share": round((cpu1 - cpu0) / seconds, 4), "commands": calls,
            "keys_total": doc["keys_total"], "keys_sampled": doc["keys_sampled"],
            "patterns": len(doc["patterns"]), "overflow_keys": doc["scan"]["overflow_keys"],
            "scan_seconds": doc["scan"]["seconds"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default="valkey-9.1")
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--sample", type=int, default=10_000)
    ap.add_argument("--full-sizes", default="1000000,3000000")
    ap.add_argument("--with-replay", action="store_true", help="also time a sample run with its replay")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    binary = find_servers()[args.server]
    sizes = sorted({int(x) for x in args.sizes.split(",")} | {int(x) for x in args.full_sizes.split(",") if x})
    full = {int(x) for x in args.full_sizes.split(",") if x}
    commit = gitstamp.commit()
    for n in sizes:
        with ServerProcess(binary, options={"enable-debug-command": "yes"}) as proc:
            client = proc.client()
            populate(client, n)
            runs = [("sample", ["--sample", str(args.sample), "--no-replay"])]
            if args.with_replay:
                runs.append(("sample+replay", ["--sample", str(args.sample)]))
            if n in full:
                runs.append(("full", ["--full", "--no-replay"]))
            for mode, extra in runs:
                record = {"benchmark": "analyze_speed", "commit": commit, "server": args.server,
                          "version": binary.version, "keys": int(client.dbsize()), "mode": mode,
                          "sample": args.sample if mode.startswith("sample") else None,
                          "loadavg_1m": round(os.getloadavg()[0], 2), **run_analysis(client, proc.url, extra)}
                print(json.dumps(record), flush=True)
                if args.out:
                    with open(args.out, "a") as fh:
                        fh.write(json.dumps(record) + "\n")
            client.close()


if __name__ == "__main__":
    main()
