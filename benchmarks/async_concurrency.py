"""The asyncio client path under concurrency (issue 30): what a session read costs the client's
CPU when N tasks share one event loop, densekv against redis.asyncio, without a web server.

Per server (valkey-9.1 and redis-7.0 by default, each started fresh on loopback), one client
process and one event loop, these sides:

  op     densekv                                      plain redis.asyncio (its defaults)
  get    await AsyncSessionStore.get(token)           json.loads(await GET key)
  rmw    await apply(t, {"n": v}, read=await get(t))  GET + json.loads, SET key json EX ttl

Data: 10,000 sessions of --profile (P1k: a Django login plus one small key "n", what the web
benchmarks' one-key writes leave; P2 Flask-Login), densekv's store with a dictionary trained
on 2,000 of them first (train_dictionary), the plain side the same sessions as JSON strings
(SET EX).

Timing: for each concurrency C (--concurrency, default 1,4,16), --rounds rounds in which the
sides take turns (A B, B A, ...); a turn is C tasks on the loop, each awaiting --calls / C
calls one after the other (inputs in a fixed shuffled order). Client CPU per call:
time.process_time() around the turn (in the loop, after the tasks are made) / calls; wall
per call likewise with perf_counter. Server CPU per call: INFO cpu (used_cpu_user +
used_cpu_sys) around the turn / calls; server wake-ups per call: Valkey's event-loop cycles
(INFO stats eventloop_cycles, less the INFO calls' own; None on Redis, which has no such
counter). Before the rounds, one counted turn per side and C
(not timed): event-loop iterations (selector.select calls), tasks and futures made, and
socket reads (StreamReader feeds) per call. Records: medians over rounds, densekv / plain
ratios of the medians, and the counts.

Usage: python benchmarks/async_concurrency.py [--servers valkey-9.1,redis-7.0] [--ops get,rmw]
       [--profile P1k] [--concurrency 1,4,16] [--calls 4000] [--rounds 9] [--out FILE] [--note TEXT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import gitstamp  # benchmarks/gitstamp.py
import redis
import redis.asyncio
from records import emit  # benchmarks/records.py

import densekv
from densekv.tools.lab.session_profiles import session
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

TTL = 14 * 24 * 3600
N = 10_000
TRAIN_N = 2_000
RESULTS = Path(__file__).resolve().parent / "results" / "async_concurrency.jsonl"

ACall = Callable[[int], Awaitable[Any]]


def login_session(profile: str, i: int) -> tuple[int | None, dict[str, Any]]:
    """Session i of a lab profile, or of "P1k" (a Django login plus one small key "n")."""
    if profile == "P1k":
        uid, data = session("P1", i)
        return uid, {**data, "n": i % 100}
    return session(profile, i)


def server_cpu(stats: redis.Redis) -> float:
    """CPU seconds the server process used so far (INFO cpu: user + system, microsecond
    resolution; the INFO call itself is in it, a few us per turn)."""
    cpu = stats.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def server_cycles(stats: redis.Redis) -> int | None:
    """The server's event-loop cycles so far (Valkey 8+; None elsewhere)."""
    cycles = stats.info("stats").get("eventloop_cycles")
    return None if cycles is None else int(cycles)


async def turn(acall: ACall, order: list[int], concurrency: int) -> tuple[float, float]:
    """CPU and wall seconds of `order`'s calls spread over `concurrency` tasks."""
    share = [order[k::concurrency] for k in range(concurrency)]

    async def worker(items: list[int]) -> None:
        for i in items:
            await acall(i)

    tasks = [asyncio.ensure_future(worker(items)) for items in share]
    c0, w0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*tasks)
    return time.process_time() - c0, time.perf_counter() - w0


async def counted(acall: ACall, order: list[int], concurrency: int) -> dict[str, float]:
    """One turn with the loop's iterations, tasks, futures and socket reads counted."""
    loop = asyncio.get_running_loop()
    sel = loop._selector  # type: ignore[attr-defined]  # noqa: SLF001  # the loop's own selector
    counts = dict.fromkeys(("loop_iterations", "tasks", "futures", "stream_reads"), 0)
    select, create_future = sel.select, loop.create_future
    feed = asyncio.StreamReader.feed_data

    def counting_select(timeout: float | None = None) -> Any:
        counts["loop_iterations"] += 1
        return select(timeout)

    def counting_future() -> Any:
        counts["futures"] += 1
        return create_future()

    def counting_feed(self: Any, data: bytes) -> None:
        counts["stream_reads"] += 1
        feed(self, data)

    def task_factory(loop: Any, coro: Any, **kw: Any) -> Any:
        counts["tasks"] += 1
        return asyncio.Task(coro, loop=loop, **kw)

    sel.select, loop.create_future = counting_select, counting_future  # type: ignore[method-assign]
    asyncio.StreamReader.feed_data = counting_feed  # type: ignore[method-assign, assignment]
    loop.set_task_factory(task_factory)
    try:
        await turn(acall, order, concurrency)
    finally:
        del sel.select, loop.create_future
        asyncio.StreamReader.feed_data = feed  # type: ignore[method-assign]
        loop.set_task_factory(None)
    counts["tasks"] -= concurrency  # the turn's own workers
    return {k: round(v / len(order), 3) for k, v in counts.items()}


def measure(server: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    rnd = random.Random(30)
    levels = [int(c) for c in args.concurrency.split(",")]
    total = args.calls * (args.rounds + 2)
    with ServerProcess(find_servers()[server], options={"slowlog-log-slower-than": "-1"}) as proc:
        stats = proc.client()
        info = stats.info("server")
        version = str(info.get("valkey_version") or info["redis_version"])
        store = densekv.SessionStore(redis.Redis.from_url(proc.url), namespace="sess", ttl=TTL,
                                     expected_sessions=N).open()
        store.train_dictionary([login_session(args.profile, i)[1] for i in range(TRAIN_N)])
        items = [login_session(args.profile, i) for i in range(N)]
        tokens = store.create_each(items, batch=1000)
        plain = redis.Redis.from_url(proc.url)
        keys = [f"plain:{secrets.token_urlsafe(32)}" for _ in items]
        pipe = plain.pipeline(transaction=False)
        for key, (_, data) in zip(keys, items):
            pipe.set(key, json.dumps(data), ex=TTL)
        pipe.execute()
        split = {k: v for k, v in store.stats().items() if "split" in k or "out_of_line" in k}
        order = [rnd.randrange(N) for _ in range(total)]
        loop = asyncio.new_event_loop()
        astore = densekv.AsyncSessionStore(redis.asyncio.Redis.from_url(proc.url), namespace="sess", ttl=TTL)
        aplain = redis.asyncio.Redis.from_url(proc.url)
        loop.run_until_complete(astore.open())

        async def plain_get(i: int) -> Any:
            return json.loads(await aplain.get(keys[i]))  # type: ignore[arg-type]  # stored above

        async def rmw(i: int) -> Any:
            return await astore.apply(tokens[i], {"n": i % 100}, read=await astore.get(tokens[i]))

        async def plain_rmw(i: int) -> Any:
            data = json.loads(await aplain.get(keys[i]))  # type: ignore[arg-type]  # stored above
            data["n"] = i % 100
            return await aplain.set(keys[i], json.dumps(data), ex=TTL)

        sides: dict[str, tuple[ACall, ACall]] = {
            "get": (lambda i: astore.get(tokens[i]), plain_get), "rmw": (rmw, plain_rmw)}
        records = []
        for op in args.ops.split(","):
            for c in levels:
                pair = sides[op]
                start = 0
                for acall in pair:  # warm-up: connections made, scripts loaded
                    loop.run_until_complete(turn(acall, order[:2 * c], c))
                counts = [loop.run_until_complete(counted(acall, order[:args.calls], c)) for acall in pair]
                cpu: list[list[float]] = [[], []]
                wall: list[list[float]] = [[], []]
                srv: list[list[float]] = [[], []]
                cycles: list[list[float]] = [[], []]
                for r in range(args.rounds):
                    start += args.calls
                    for k in ((0, 1) if r % 2 == 0 else (1, 0)):
                        s0, y0 = server_cpu(stats), server_cycles(stats)
                        spent, took = loop.run_until_complete(turn(pair[k], order[start:start + args.calls], c))
                        srv[k].append((server_cpu(stats) - s0) / args.calls * 1e6)
                        y1 = server_cycles(stats)
                        if y0 is not None and y1 is not None:  # less the INFO calls' own cycles
                            cycles[k].append((y1 - y0 - 2) / args.calls)
                        cpu[k].append(spent / args.calls * 1e6)
                        wall[k].append(took / args.calls * 1e6)
                med = [statistics.median(x) for x in cpu]
                records.append({
                    "benchmark": "async_concurrency", "commit": gitstamp.commit(), "server": server,
                    "version": version, "op": op, "profile": args.profile, "split": split,
                    "concurrency": c, "calls": args.calls, "rounds": args.rounds,
                    "densekv_cpu_us": round(med[0], 1), "plain_cpu_us": round(med[1], 1),
                    "cpu_ratio": round(med[0] / med[1], 3),
                    "cpu_ratio_paired": round(statistics.median(a / b for a, b in zip(*cpu)), 3),
                    "densekv_server_cpu_us": round(statistics.median(srv[0]), 1),
                    "plain_server_cpu_us": round(statistics.median(srv[1]), 1),
                    "server_cpu_ratio": round(statistics.median(srv[0]) / statistics.median(srv[1]), 3),
                    "densekv_server_wakeups": round(statistics.median(cycles[0]), 3) if cycles[0] else None,
                    "plain_server_wakeups": round(statistics.median(cycles[1]), 3) if cycles[1] else None,
                    "densekv_wall_us": round(statistics.median(wall[0]), 1),
                    "plain_wall_us": round(statistics.median(wall[1]), 1),
                    "densekv_counts": counts[0], "plain_counts": counts[1],
                    "load": [round(x, 2) for x in os.getloadavg()],
                    "python": sys.version.split()[0], "redis_py": redis.__version__,
                    "densekv_from": str(Path(densekv.__file__ or "").parent.parent), "note": args.note,
                    "table_row": ["op", "concurrency"]})
        loop.run_until_complete(astore.client.aclose())
        loop.run_until_complete(aplain.aclose())
        loop.close()
        store.client.close()
        plain.close()
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", default="valkey-9.1,redis-7.0")
    ap.add_argument("--ops", default="get,rmw")
    ap.add_argument("--profile", default="P1k", choices=("P1k", "P1", "P2"))
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--calls", type=int, default=4000, help="calls per turn")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--out", default=str(RESULTS), help="JSONL to append to ('' for none)")
    ap.add_argument("--note", default=None, help="kept in each record: which densekv was measured, when "
                    "PYTHONPATH points at another tree than the commit's (densekv_from says where)")
    args = ap.parse_args()
    for server in args.servers.split(","):
        for rec in measure(server, args):
            emit(rec, args.out or None)


if __name__ == "__main__":
    main()
