"""How long an asyncio session store holds its event loop while it trains its dictionary
and looks at its fit.

An AsyncSessionStore trains the namespace's dictionary on the write that brings the
AUTO_TRAIN-th payload and looks at its fit REFIT_FIRST writes after adopting it
(densekv/sessions/payload_flows.py): tens of milliseconds of CPU, ~100 on shop-like
sessions (benchmarks/train_cost.py). On a web worker every other request of that event loop
waits for the work that holds the loop; since flows.Compute the asyncio driver runs it in a
worker thread.

Per profile, on a fresh embedded server: --tasks tasks create sessions of the profile
(AsyncSessionStore.create, one at a time each) until --writes were made (past the training
and the first look), while a ticker task sleeps 1 ms at a time and records how late each of
its wake-ups comes (the loop's lag: what a request arriving then would wait). Prints one
JSON record per profile: the largest lag, its 99.9th percentile, the writes per second, and
whether the store trained and looked (its dictionary; "dictionary_refits" counts only the
looks that adopted one).

Before and after a change: run the script from this tree against another tree's library,
`PYTHONPATH=/path/to/other/tree python benchmarks/loop_lag.py` (the record's `commit` is
this tree's; `densekv_from` says which library ran).

Usage: python benchmarks/loop_lag.py [--server valkey-9.1] [--profiles P1,P3]
       [--writes 5000] [--tasks 16] [--out FILE | --no-save]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code
import redis.asyncio
from records import emit  # benchmarks/records.py: print and append each record

import densekv
from densekv.sessions.payload_flows import AUTO_TRAIN, REFIT_FIRST
from densekv.tools.lab.session_profiles import session

RESULTS = Path(__file__).parent / "results" / "loop_lag.jsonl"
TICK = 0.001


async def run(url: str, profile: str, writes: int, tasks: int) -> dict[str, Any]:
    client = redis.asyncio.Redis.from_url(url)
    await client.flushall()
    store = densekv.AsyncSessionStore(client, namespace="lag", expected_sessions=writes)
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await asyncio.sleep(TICK)
            lags.append(time.perf_counter() - start - TICK)

    made = 0

    async def writer(k: int) -> None:
        nonlocal made
        i = k
        while i < writes:
            await store.create(None, session(profile, i)[1])
            made += 1
            i += tasks

    await store.open()
    tick = asyncio.create_task(ticker())
    start = time.perf_counter()
    await asyncio.gather(*(writer(k) for k in range(tasks)))
    seconds = time.perf_counter() - start
    done.set()
    await tick
    explain = await store.explain()
    await client.aclose()
    lags.sort()
    return {"writes": made, "writes_per_s": round(made / seconds), "ticks": len(lags),
            "max_lag_ms": round(1000 * lags[-1], 1),
            "p999_lag_ms": round(1000 * lags[int(0.999 * (len(lags) - 1))], 2),
            "p99_lag_ms": round(1000 * lags[int(0.99 * (len(lags) - 1))], 2),
            "dictionary": explain["dictionary"], "dictionary_refits": explain["dictionary_refits"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", default="valkey-9.1")
    ap.add_argument("--profiles", default="P1,P3")
    ap.add_argument("--writes", type=int, default=AUTO_TRAIN + REFIT_FIRST + 1000)
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    with densekv.embedded(args.server) as srv:
        for profile in args.profiles.split(","):
            got = asyncio.run(run(srv.url, profile, args.writes, args.tasks))
            emit({"benchmark": "loop_lag", "commit": gitstamp.commit(), "server": args.server,
                  "densekv_from": str(Path(densekv.__file__).resolve().parent.parent),
                  "profile": profile, "tasks": args.tasks,
                  "what": "AsyncSessionStore.create from --tasks tasks, past the dictionary's "
                          "training (AUTO_TRAIN) and its first look (REFIT_FIRST after); lag: "
                          "how late a 1 ms asyncio.sleep of a ticker task woke",
                  **got}, None if args.no_save else args.out)


if __name__ == "__main__":
    sys.exit(main())
