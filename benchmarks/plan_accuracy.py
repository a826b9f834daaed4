"""How close `densekv plan` predictions come to a full measured load (issue 6: within 10%
for N from 10k to 10M on at least two servers of the matrix).

For each (server, kind, N): `densekv.tools.planner.plan(kind, N, server=NAME)` (calibrations
measured in this run: a fresh cache directory unless --cache is given), then a fresh
server of the same kind loads the whole workload through the public API in the planned
layout and partition count, measured with densekv's Meter (FLUSHALL SYNC, settle,
used_memory delta). Before the measured load, a warm-up of 3000 items is loaded and
flushed: a fresh server's first densekv commands load the Lua scripts (~50 KB, once per
server) and a session store's first 2000 payloads train its dictionary (~150 KB that
FLUSHALL leaves on valkey-9.1), which are not costs per item; the record reports them as
`one_time_bytes`. Loads of
N <= 100k are repeated 3 times on that server (flushed between) and the median counts: a
fresh server's used_memory moves by a few dozen KB on its own (client and script
allocations), which is 10% of 10k sessions.
Prints one JSON record per run and appends them to benchmarks/results/plan_accuracy.jsonl.

Sessions priced from real payloads (issue 32): `--profile P0..P3` (repeatable) writes
SAMPLE_SESSIONS sessions of that web-session profile (densekv/tools/lab/session_profiles.py: P1 is
the Django login, P2 Flask-Login) as a `--sample` file and plans sessions from it: the
dictionary is trained on half of them, the other half priced (densekv/tools/planner/payloads.py).
`--verify` takes the figure `densekv plan --verify` prints (the planner's own load, on a
server like the target, median of 3 under 60k items) instead of this script's fresh-server
load; the record says which (`measured_by`).

Usage: python benchmarks/plan_accuracy.py [--server NAME ...] [--kind KIND ... | --profile P ...]
       [--n N ...] [--payload B] [--ttl] [--verify] [--cache DIR] [--out FILE | --out -]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code

from densekv.tools.lab.session_profiles import NAMES, PROFILES, write_sample
from densekv.tools.measure import Meter
from densekv.tools.planner.core import PUBLIC_WARM_ITEMS, check_input, loader_client
from densekv.tools.planner.kinds import KINDS, Candidate, Workload
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

DEFAULT_SERVERS = ("valkey-9.1", "redis-7.0")
DEFAULT_KINDS = ("sessions", "set", "map")
DEFAULT_N = (10_000, 100_000, 1_000_000)
REPEATS = 3  # loads of N <= 100k are repeated on the same server (flushed): the median counts
SAMPLE_SESSIONS = 4000  # sessions a --profile sample file holds (2000 train the dictionary, 2000 priced)


def measure_full(name: str, kind: str, wl: Workload, cand: Candidate) -> dict[str, object]:
    kp = KINDS[kind]
    with ServerProcess(find_servers()[name]) as proc:
        client = proc.client()
        fresh = int(client.info("memory")["used_memory"])
        meter = Meter(client)
        lc = loader_client(client)
        warm = min(PUBLIC_WARM_ITEMS, wl.items)  # past a session store's AUTO_TRAIN: its dictionary, too
        kp.load_full(lc, cand, dataclasses.replace(wl, items=warm, seed=wl.seed + 7), warm)
        lc.close()
        meter.reset()
        one_time = meter.baseline - fresh
        deltas = []
        t0 = time.perf_counter()
        for _ in range(REPEATS if wl.items <= 100_000 else 1):
            meter.reset()
            lc = loader_client(client)
            kp.load_full(lc, cand, wl, wl.items)
            lc.close()
            deltas.append(meter.delta())
        seconds = time.perf_counter() - t0
        client.close()
    delta = sorted(deltas)[len(deltas) // 2]
    return {"measured_total_bytes": delta, "measured_bytes_per_item": round(delta / wl.items, 3),
            "measured_runs_bytes_per_item": [round(d / wl.items, 3) for d in deltas],
            "one_time_bytes": one_time, "load_seconds": round(seconds, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", action="append")
    ap.add_argument("--kind", action="append", choices=list(KINDS))
    ap.add_argument("--profile", action="append", choices=list(PROFILES),
                    help="sessions priced from a sample file of this web-session profile")
    ap.add_argument("--n", action="append", type=int)
    ap.add_argument("--payload", type=int, default=0)
    ap.add_argument("--ttl", action="store_true")
    ap.add_argument("--verify", action="store_true", help="record plan --verify's figure, not a fresh-server load")
    ap.add_argument("--cache", default=None, help="calibration cache dir (default: a fresh temporary one)")
    ap.add_argument("--out", default="benchmarks/results/plan_accuracy.jsonl")
    args = ap.parse_args()
    os.environ["DENSEKV_CACHE_DIR"] = args.cache or tempfile.mkdtemp(prefix="densekv-plan-cache-")
    from densekv.tools.planner import plan

    commit = gitstamp.commit()
    samples = Path(tempfile.mkdtemp(prefix="densekv-plan-samples-"))
    runs: list[tuple[str, str | None]] = [("sessions", p) for p in args.profile or ()]
    runs += [(kind, None) for kind in args.kind or (() if args.profile else DEFAULT_KINDS)]
    for name in args.server or DEFAULT_SERVERS:
        for kind, profile in runs:
            sample = None
            if profile is not None:
                sample = str(samples / f"{profile}.jsonl")
                write_sample(profile, sample, SAMPLE_SESSIONS)
            for n in args.n or DEFAULT_N:
                t0 = time.perf_counter()
                rec = plan(kind, n, args.payload, args.ttl, sample=sample, server=name, verify=args.verify)
                plan_s = time.perf_counter() - t0
                kp = KINDS[kind]
                wl = check_input(kind, n, args.payload, args.ttl, sample)
                if args.verify:
                    v = rec.verify or {}
                    full: dict[str, object] = {
                        "measured_by": "plan --verify", "measured_total_bytes": v["measured_total_bytes"],
                        "measured_bytes_per_item": v["measured_bytes_per_item"], "n_loaded": v["n_loaded"],
                        "load_seconds": v["load_seconds"]}
                else:
                    cand = next(c for c in kp.candidates(wl, _caps(name)) if c.layout == rec.layout
                                and c.partitions == rec.partitions)
                    full = {"measured_by": "fresh server", **measure_full(name, kind, wl, cand)}
                measured = float(full["measured_total_bytes"])  # type: ignore[arg-type]
                cal = rec.calibration
                row = {
                    "benchmark": "plan_accuracy", "commit": commit, "server": name,
                    "version": rec.server["version"], "allocator": rec.server["allocator"],
                    "hash_max_listpack_entries": rec.server["hash_max_listpack_entries"],
                    "hash_max_listpack_value": rec.server["hash_max_listpack_value"],
                    "set_max_listpack_entries": rec.server["set_max_listpack_entries"],
                    "kind": kind, "n": n, "payload": args.payload, "ttl": args.ttl,
                    "profile": f"{profile} {NAMES[profile]}" if profile else None,
                    "payloads": _payloads(rec.payloads),
                    "layout": rec.layout, "partitions": rec.partitions, "config": rec.config,
                    "predicted_bytes_per_item": rec.predicted_bytes_per_item,
                    "predicted_total_bytes": rec.predicted_total_bytes, **full,
                    "error_pct": round(100 * (rec.predicted_total_bytes - measured) / measured, 2),
                    "calibration": {"per_key": cal["per_key"], "per_item": cal["per_item"],
                                    "sample_items": cal["sample_items"], "cached": cal["cached"]},
                    "plan_seconds": round(plan_s, 1),
                }
                line = json.dumps(row)
                print(line, flush=True)
                if args.out != "-":
                    with open(args.out, "a") as fh:
                        fh.write(line + "\n")


def _payloads(info: dict[str, object] | None) -> dict[str, object] | None:
    """The record's summary of what was priced (the planner's payloads, less its prose)."""
    if info is None:
        return None
    return {k: v for k, v in info.items() if k not in ("description", "file")}


_CAPS: dict[str, object] = {}


def _caps(name: str) -> object:
    """The probe of a scratch server of this kind (the candidates' limits), once per server."""
    if name not in _CAPS:
        from densekv.capabilities import probe

        with ServerProcess(find_servers()[name]) as proc:
            client = proc.client()
            _CAPS[name] = probe(client)
            client.close()
    return _CAPS[name]


if __name__ == "__main__":
    main()
