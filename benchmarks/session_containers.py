"""Seed 003 rerun, the full matrix (issue 12): session containers under real HTTP load as
stored sessions grow.

Every container of densekv.tools.lab.containers.registry that this machine can run (none,
in-process dict, memcached, files flat/hashed, SQLite and PostgreSQL indexed/unindexed,
Flask-Session's Redis JSON+SETEX, densekv auto and dense+index) behind the same Flask
app under gunicorn (one sync worker), all started at once; the Redis containers on a
freshly started server of the matrix (--server). At each N (default 0, 1k, 10k, 50k,
100k, 1M stored sessions besides the load's own --active sessions), every container is
filled to N (half the new sessions expire in a day, half in 30 days), then --rounds
rounds of --requests read-only (GET /r) and --requests read-write (GET /w) requests per
container from wrk at concurrency 5, the containers in turn with the order rotating
each round (interleaved: compare containers within a run, never across runs), then the
housekeeping: the N/2 expired removed while a read-only load runs. The measuring is
densekv/tools/lab/containers/harness.py's (the lab's experiment runs the same code, smaller).

A container this machine cannot run (no PostgreSQL, no memcached, a missing Python
package) is one "note" record, never a failure. Everything the run writes (app logs,
files, SQLite, the PostgreSQL cluster, the Redis server's directory) lives in --workdir
(a fresh temporary directory by default), removed at the end unless --keep; every
process started is stopped on exit, on error, on Ctrl-C and on SIGTERM.

Usage: python benchmarks/session_containers.py [--server valkey-9.1] [--n 0 --n 1000 ...]
       [--containers dict,densekv,...] [--profile P2] [--active 1000] [--requests 1000]
       [--rounds 3] [--warmup 200] [--housekeeping each|last|none] [--load wrk|python]
       [--out FILE] [--workdir DIR] [--keep]
Table: python benchmarks/session_containers.py --table FILE   (markdown: req/s, p99 and
       bytes per session per container and N, and densekv against the dict)
At the end it logs one line per container: its read-only points and the seed's verdict
(falls / flat, from CPU per request: densekv.tools.lab.containers.findings.Trend), the same
lines `densekv lab` prints.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code

from densekv.tools.lab.containers.findings import (
    bytes_finding,
    densekv_findings,
    filesystem_of,
    housekeeping_finding,
    rps_findings,
    trend_line,
    trends,
)
from densekv.tools.lab.containers.harness import Plan, run_containers
from densekv.tools.lab.containers.registry import CONTAINERS
from densekv.tools.measure import Meter
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

DEFAULT_NS = (0, 1_000, 10_000, 50_000, 100_000, 1_000_000)


def _sigterm(*_: Any) -> None:
    raise SystemExit(143)  # unwind the `with` blocks: every process started is stopped


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write(path: str | None, record: dict[str, Any]) -> None:
    """One JSON line to stdout, and appended to `path` if given."""
    text = json.dumps(record)
    print(text, flush=True)
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


def flat(record: dict[str, Any], stamp: dict[str, Any]) -> dict[str, Any]:
    hk = record.get("housekeeping") or {}
    return {
        **stamp,
        "container": record["container"], "label": record["label"], "n": record["n"],
        "ro_rps": record["ro"]["rps"], "ro_p50_ms": record["ro"]["p50_ms"], "ro_p99_ms": record["ro"]["p99_ms"],
        "rw_rps": record["rw"]["rps"], "rw_p50_ms": record["rw"]["p50_ms"], "rw_p99_ms": record["rw"]["p99_ms"],
        "ro_cpu_us": round(record["ro"]["app_cpu_us"] + record["ro"]["store_cpu_us"], 1),
        "rw_cpu_us": round(record["rw"]["app_cpu_us"] + record["rw"]["store_cpu_us"], 1),
        "bytes_per_session": record["bytes_per_session"],
        "housekeeping_s": hk.get("seconds"), "housekeeping_removed": hk.get("removed"),
        "misses": record["ro"]["misses"] + record["rw"]["misses"],
        "errors": record["ro"]["errors"] + record["rw"]["errors"],
        "detail": record,
    }


def run(args: argparse.Namespace) -> int:
    names = tuple(args.containers.split(",")) if args.containers else tuple(c.name for c in CONTAINERS)
    ns = tuple(sorted(set(args.n or DEFAULT_NS)))
    plan = Plan(names, ns, profile=args.profile, active=args.active, requests=args.requests, warmup=args.warmup,
                rounds=args.rounds, housekeeping=args.housekeeping, load=args.load, ceiling_s=args.ceiling)
    binary = find_servers().get(args.server)
    if binary is None:
        print(f"session_containers: server {args.server} is not here: run scripts/get-servers", file=sys.stderr)
        return 2
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="session-containers-"))
    workdir.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    started = time.time()
    (workdir / "redis").mkdir(exist_ok=True)
    try:
        with ServerProcess(binary, workdir=workdir / "redis") as server:
            client = server.client()
            meter = Meter(client, clear=True)
            stamp = {"kind": "session_containers", "commit": gitstamp.commit(), "server": binary.name,
                     "version": meter.version, "allocator": meter.allocator, "profile": args.profile,
                     "active": args.active, "requests": args.requests, "rounds": args.rounds,
                     "filesystem": filesystem_of(workdir), "cpus": os.cpu_count(), "platform": platform.platform()}

            def emit(record: dict[str, Any]) -> None:
                records.append(record)
                write(args.out, flat(record, stamp))

            outcome = run_containers(plan, workdir, redis_url=server.url, client=client, meter=meter,
                                     progress=log, on_record=emit)
            client.close()
        for note in outcome.notes:
            write(args.out, {**stamp, "note": note})
        for t in trends(records):  # the seed's verdict per container, from its points (as `densekv lab` prints)
            log(trend_line(t))
        for sentence in (rps_findings(records, stamp["filesystem"]) + densekv_findings(records)
                         + [bytes_finding(records), housekeeping_finding(records)]):
            if sentence:
                log(sentence)
        log(f"done in {time.time() - started:.0f} s; generator: {outcome.generator}")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


def table(path: str) -> int:
    """Markdown tables from a records file: req/s, p99, bytes per session by container and N."""
    with open(path) as f:
        lines = [json.loads(ln) for ln in f if ln.strip()]
    recs = [r for r in lines if "container" in r]
    ns = sorted({r["n"] for r in recs})
    names = list(dict.fromkeys(r["label"] for r in recs))
    cell = {(r["label"], r["n"]): r for r in recs}
    top = {n: cell[(lab, n)]["ro_rps"] for lab in names for n in ns
           if (lab, n) in cell and cell[(lab, n)]["container"] == "none"}
    for r in recs:
        r["ro_share"] = round(r["ro_rps"] / top[r["n"]], 3) if top.get(r["n"]) else None
    for field, title in (("ro_rps", "read-only req/s"), ("rw_rps", "read-write req/s"),
                         ("ro_share", "read-only req/s as a share of the no-session ceiling in the same rounds"),
                         ("ro_cpu_us", "read-only CPU us per request (app worker + store processes)"),
                         ("rw_cpu_us", "read-write CPU us per request (app worker + store processes)"),
                         ("ro_p99_ms", "read-only p99 ms"), ("rw_p99_ms", "read-write p99 ms"),
                         ("bytes_per_session", "bytes per stored session")):
        if all(r.get(field) is None for r in recs):
            continue  # records from before the field existed
        print(f"\n{title}\n\n| container | " + " | ".join(f"{n:,}" for n in ns) + " |")
        print("|---" * (len(ns) + 1) + "|")
        for name in names:
            vals = []
            for n in ns:
                v = cell.get((name, n), {}).get(field)
                vals.append("-" if v is None else f"{v:.0%}" if field == "ro_share"
                            else f"{v:,.1f}" if isinstance(v, float) else f"{v:,}")
            print(f"| {name} | " + " | ".join(vals) + " |")
    dict_label = next((r["label"] for r in recs if r["container"] == "dict"), None)
    for r0 in [r for r in recs if r["container"].startswith("densekv") and r["n"] == ns[0]]:
        label = r0["label"]
        print(f"\n{label}: read-only req/s against its N = {ns[0]:,} figure and against the in-process dict\n")
        print("| N | req/s | vs N=0 | vs dict | CPU us/request | vs dict |\n|---|---|---|---|---|---|")
        for n in ns:
            r = cell.get((label, n))
            d = cell.get((dict_label, n)) if dict_label else None
            if r is None:
                continue
            vs0 = r["ro_rps"] / r0["ro_rps"] - 1 if r0["ro_rps"] else 0
            vsd = f"{r['ro_rps'] / d['ro_rps']:.0%}" if d and d["ro_rps"] else "-"
            cpu = r.get("ro_cpu_us")
            vsc = f"{cpu / d['ro_cpu_us']:.0%}" if cpu and d and d.get("ro_cpu_us") else "-"
            print(f"| {n:,} | {r['ro_rps']:,.0f} | {vs0:+.0%} | {vsd} | {cpu if cpu is not None else '-'} | {vsc} |")
    for r in lines:
        if "note" in r:
            print(f"\nnote: {r['note']}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", default="valkey-9.1")
    ap.add_argument("--n", type=int, action="append", help="stored sessions (repeat); default 0 1k 10k 50k 100k 1M")
    ap.add_argument("--containers", default=None, help="comma-separated (default: all)")
    ap.add_argument("--profile", default="P2", choices=("P0", "P1", "P2", "P3"))
    ap.add_argument("--active", type=int, default=1000, help="sessions the load reads and writes")
    ap.add_argument("--requests", type=int, default=1000, help="requests per load (read-only, read-write), per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--ceiling", type=float, default=20.0, help="seconds a load may take at most")
    ap.add_argument("--housekeeping", default="each", choices=("each", "last", "none"))
    ap.add_argument("--load", default="wrk", choices=("wrk", "python"))
    ap.add_argument("--out", default=None, help="append the JSON records to this file too")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep --workdir")
    ap.add_argument("--table", metavar="FILE", help="print markdown tables from a records file and exit")
    args = ap.parse_args()
    if args.table:
        return table(args.table)
    signal.signal(signal.SIGTERM, _sigterm)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
