"""What the write that trains a session store's zstd dictionary pays for it.

A store keeps the packed payloads of its first AUTO_TRAIN (2000) writes and, on the write
that brings the 2000th, trains a 4 KB zstd dictionary from them and stores it
(densekv/sessions/payload_flows.py sample). That one request is slower by the training;
this measures the training itself (zstd.train_dictionary on the packed payloads of each
session profile, as the store does, no server) over several repeats, and prints one JSON
record per profile: median and max milliseconds.

Usage: python benchmarks/train_cost.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.gitstamp import commit
from densekv.dictionaries import train_dictionary
from densekv.sessions.payload import pack_data
from densekv.sessions.payload_flows import AUTO_TRAIN
from densekv.tools.lab.session_profiles import sessions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    for profile in ("P0", "P1", "P2", "P3"):
        packed = [pack_data(d) for _, d in sessions(profile, AUTO_TRAIN, start=10_000)]
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            train_dictionary(packed, size=4096)
            times.append((time.perf_counter() - t) * 1000)
        print(json.dumps({"bench": "train_cost", "profile": profile, "samples": AUTO_TRAIN,
                          "median_ms": round(statistics.median(times), 1),
                          "max_ms": round(max(times), 1), "commit": commit()}))


if __name__ == "__main__":
    main()
