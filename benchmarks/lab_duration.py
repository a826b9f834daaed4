"""How long the default `densekv lab` takes (issue 6: at most 3 minutes on 2 cores).

Runs `python -m densekv.tools.lab --json --out TMPDIR` exactly as a user would (the embedded
valkey-9.1, the default N), in a fresh process, and prints one JSON record: wall time,
N, the machine's CPU count, each experiment's status and seconds, and the server stamp.
Appends it to benchmarks/results/lab_duration.jsonl.

Usage: python benchmarks/lab_duration.py [--append] [-- extra lab arguments]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code

RESULTS = Path(__file__).resolve().parent / "results" / "lab_duration.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--append", action="store_true", help=f"append the record to {RESULTS.name}")
    ap.add_argument("extra", nargs="*", help="extra arguments for the lab (after --)")
    args = ap.parse_args()
    commit = gitstamp.commit()
    with tempfile.TemporaryDirectory(prefix="densekv-lab-") as out:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "densekv.tools.lab", "--json", "--out", out, *args.extra],
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            print(json.dumps({"benchmark": "lab_duration", "error": proc.stderr.strip()[-500:],
                              "returncode": proc.returncode}))
            sys.exit(1)
        doc = json.loads(proc.stdout)
        report_bytes = (Path(out) / "report.html").stat().st_size
    server = doc["servers"][0] if doc["servers"] else {}
    record = {
        "benchmark": "lab_duration", "commit": commit, "args": args.extra,
        "wall_s": round(wall, 1), "limit_s": 180, "within_limit": wall <= 180,
        "n": doc["n"], "cpus": os.cpu_count(),
        "server": server.get("name"), "version": server.get("version"), "allocator": server.get("allocator"),
        "listpack": server.get("listpack"),
        "experiments": [{"kind": e["kind"], "status": e["status"], "seconds": e["seconds"]}
                        for e in doc["experiments"]],
        "runs": len(doc["runs"]), "report_bytes": report_bytes,
    }
    line = json.dumps(record)
    print(line, flush=True)
    if args.append:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with RESULTS.open("a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
