"""The lab's bytes per item vs a plain used_memory delta on a brand-new server (issue 6's done-when).

For every result record of the lab that carries bytes_per_item (sessions layouts, sets
layouts with dense and Bloom, small sets, maps layouts and codecs) the same items are
loaded again into a brand-new server process of the same kind (one per record, started
with the record's listpack settings and without a slow log, whose entries of ~1 KB each
would count as memory), through the record's experiment module's `replay`
(densekv/tools/lab/experiments/*.py: the same densekv calls, workload generators and seeds as
the lab). densekv's Meter is not used: the figure is INFO memory used_memory read once
before and once after the load, by a connection of its own, each time after

  * an EVAL of `collectgarbage('collect')` (the Lua heap's garbage is not data; the
    first one also starts the Lua engine, so that is paid before the first reading),
  * a fixed 1 s sleep, then polls every 0.25 s until used_memory has moved by at most
    256 bytes over three polls in a row and lazyfree_pending_objects is 0,

with the loader's connection closed before the second reading (the loader is its own
`redis.Redis.from_pool(...)` client, whose close() closes its sockets: an open loader
connection keeps its query buffer, ~25 KB on Redis 7.0, inside used_memory). Before the
first reading the replay's warm-up runs what the lab ran on its server before that
record's baseline and is not data (scripts loaded, the Lua heap grown, the sessions
store opened: see each `replay`), then the whole load once (priming: the first call of
each command allocates its latency histogram, ~25 KB of used_memory on every server of
the matrix, which the lab's server had paid in earlier configurations; --no-prime shows
what that changes), then FLUSHALL SYNC: one-time server costs are not counted, as in
the lab. Nothing is subtracted: the change in mem_clients_normal and in
the Lua heap between the readings is printed beside the figure, not taken out.

plain_bytes_per_item = (after - before) / items; diff_pct = (lab - plain) / plain x 100;
agree = |diff_pct| <= 5. A record that cannot be replayed prints agree null and why.

Usage: python benchmarks/lab_check.py [--server NAME ...] [--results PATH] [--n N]
       [--only KINDS] [--lab-out DIR] [--out FILE | --out -]
Without --results the lab runs first (its Python API, on a scratch server of each
--server kind, default valkey-9.1); with --results PATH its records are checked, each
on the kind it names (or the one --server given).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code
import redis

from densekv.errors import NotReplayable
from densekv.tools.lab.experiments import replay_of
from densekv.tools.lab.experiments.base import Replay
from densekv.tools.server.binaries import EMBEDDED, ServerBinary, find_servers
from densekv.tools.server.process import ServerProcess

DEFAULT_OUT = Path(__file__).parent / "results" / "lab_check.jsonl"
TOLERANCE_PCT = 5.0
LUA_GC = "collectgarbage('collect') return 0"
SLEEP_S = 1.0
POLL_S = 0.25
STILL_POLLS = 3
STILL_BYTES = 256
QUIET_TIMEOUT_S = 60.0
#: the slow log keeps each slow command's arguments (~1 KB per entry, up to 128 entries) inside
#: used_memory: a scripted load of 20k items per call adds entries, as many as the machine
#: is slow, so the check's servers keep no slow log (see the report on the Bloom records)
SERVER_OPTIONS = {"slowlog-log-slower-than": "-1"}
WARM_UP = ("before the first reading: the record's warm-up (what the lab ran before its baseline: "
           "scripts, Lua heap, store opened), the whole load once, FLUSHALL SYNC, a Lua GC")
WARM_UP_NO_PRIME = ("before the first reading: the record's warm-up (what the lab ran before its baseline: "
                    "scripts, Lua heap, store opened), FLUSHALL SYNC, a Lua GC; no priming load (--no-prime)")


def quiet(client: redis.Redis) -> dict[str, Any]:
    """INFO memory once the server is still: a Lua GC, a fixed sleep, then polls."""
    client.eval(LUA_GC, 0)
    time.sleep(SLEEP_S)
    deadline = time.monotonic() + QUIET_TIMEOUT_S
    last: int | None = None
    still = 0
    while True:
        mem: dict[str, Any] = client.info("memory")
        used = int(mem["used_memory"])
        pending = int(mem.get("lazyfree_pending_objects", 0))
        still = still + 1 if last is not None and abs(used - last) <= STILL_BYTES and pending == 0 else 0
        if still >= STILL_POLLS:
            return mem
        if time.monotonic() > deadline:
            raise RuntimeError(f"used_memory did not hold still within {QUIET_TIMEOUT_S:.0f}s")
        last = used
        time.sleep(POLL_S)


def _lua_bytes(mem: dict[str, Any]) -> int:
    for name in ("used_memory_vm_eval", "used_memory_lua"):
        if name in mem:
            return int(mem[name])
    return 0


def plain_delta(binary: ServerBinary, replay: Replay, *, prime: bool = True) -> dict[str, Any]:
    """Load the replay into a brand-new server; the used_memory delta and what moved.
    prime: load it once and flush before the first reading (every command's one-time
    cost, such as its ~25 KB latency histogram, is then paid before the baseline)."""
    with ServerProcess(binary, options={**replay.settings, **SERVER_OPTIONS}) as proc:
        reader = proc.client()
        loader = redis.Redis.from_pool(redis.ConnectionPool(host="127.0.0.1", port=proc.port))
        try:
            info = reader.info("server")
            version = str(info.get("valkey_version") or info["redis_version"])
            replay.warm_up(loader)
            if prime:
                replay.load(loader)
            reader.execute_command("FLUSHALL", "SYNC")  # type: ignore[no-untyped-call]
            loader.connection_pool.disconnect()
            before = quiet(reader)
            t0 = time.perf_counter()
            replay.load(loader)
            load_s = time.perf_counter() - t0
            loader.close()  # from_pool: the pool's sockets are closed, so their buffers go
            after = quiet(reader)
            keys = int(reader.dbsize())
        finally:
            loader.close()
            reader.close()
    delta = int(after["used_memory"]) - int(before["used_memory"])
    return {
        "version": version,
        "used_memory_before": int(before["used_memory"]),
        "used_memory_delta": delta,
        "plain_bytes_per_item": delta / replay.items,
        "clients_memory_delta": int(after.get("mem_clients_normal", 0)) - int(before.get("mem_clients_normal", 0)),
        "lua_memory_delta": _lua_bytes(after) - _lua_bytes(before),
        "keys": keys,
        "load_seconds": round(load_s, 2),
    }


def run_lab(name: str, n: int | None, only: tuple[str, ...] | None, out: Path) -> dict[str, Any]:
    from densekv.tools.lab.runner import LabConfig
    from densekv.tools.lab.runner import run_lab as lab

    run = lab(LabConfig(servers=(name,), n=n, only=only, out=out / name,
                        command=f"benchmarks/lab_check.py --server {name}"))
    for o in run.outputs:
        if o.status != "ran":
            print(f"lab: {o.kind} on {o.server}: {o.status} {o.reason}", file=sys.stderr)
    return run.doc


def records_to_check(doc: dict[str, Any], kinds: tuple[str, ...] | None) -> Iterator[dict[str, Any]]:
    for record in doc["runs"]:
        if record.get("bytes_per_item") is None or (kinds and record["kind"] not in kinds):
            continue
        yield record


def check(record: dict[str, Any], binary: ServerBinary | None, stamp: dict[str, Any], *,
          prime: bool = True) -> dict[str, Any]:
    lab = float(record["bytes_per_item"])
    out: dict[str, Any] = {
        "benchmark": "lab_check", "kind": record["kind"], "layout": record["layout"],
        "variant": record.get("variant"), "partitions": record.get("partitions"), "n": record["n"],
        "server": record["server"], "lab_version": record["version"], "allocator": record["allocator"],
        "lab_bytes_per_item": round(lab, 3), "plain_bytes_per_item": None, "diff_pct": None, "agree": None,
    }
    if binary is None:
        return {**out, "reason": f"no server binary of kind {record['server']!r} here (give --server)", **stamp}
    try:
        replay = replay_of(record)
        measured = plain_delta(binary, replay, prime=prime)
    except NotReplayable as exc:
        return {**out, "reason": f"not replayable: {exc}", **stamp}
    except Exception as exc:  # noqa: BLE001 - one record's failure is reported, the rest still run
        return {**out, "reason": f"replay failed: {type(exc).__name__}: {exc}", **stamp}
    plain = measured.pop("plain_bytes_per_item")
    diff = (lab - plain) / plain * 100 if plain else None
    out.update(
        plain_bytes_per_item=round(plain, 3),
        diff_pct=None if diff is None else round(diff, 2),
        agree=None if diff is None else abs(diff) <= TOLERANCE_PCT,
        lab_used_memory_delta=record.get("used_memory_delta"),
        items=replay.items, settings=replay.settings, server_options=SERVER_OPTIONS, warm_up=WARM_UP if prime else WARM_UP_NO_PRIME,
        **measured,
    )
    if measured["version"] != record["version"]:
        out["note"] = f"fresh server is {measured['version']}, the lab's was {record['version']}"
    if replay.note:
        out["replay_note"] = replay.note
    return {**out, **stamp}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", action="append", help=f"matrix server name, repeatable (default {EMBEDDED})")
    ap.add_argument("--results", type=Path, default=None, help="check this results.json instead of running the lab")
    ap.add_argument("--n", type=int, default=None, help="the lab's --n (default: the default lab)")
    ap.add_argument("--only", default=None, help="comma-separated kinds: sessions,sets,small_sets,maps")
    ap.add_argument("--lab-out", type=Path, default=None, help="keep the lab's outputs here (default: a temp dir)")
    ap.add_argument("--no-prime", action="store_true",
                    help="no priming load before the baseline (shows the one-time costs it keeps out)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="append the records to this JSONL file; - to only print")
    args = ap.parse_args()
    kinds = tuple(k.strip() for k in args.only.split(",") if k.strip()) if args.only else None
    servers = find_servers()
    names = args.server or ([] if args.results else [EMBEDDED])
    unknown = [s for s in names if s not in servers]
    if unknown:
        ap.error(f"unknown or missing server {unknown[0]!r}: present are {', '.join(servers)}")
    stamp = {"commit": gitstamp.commit(), "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    docs: list[tuple[dict[str, Any], str]] = []
    with tempfile.TemporaryDirectory(prefix="lab-check-") as tmp:
        if args.results:
            docs.append((json.loads(args.results.read_text()), str(args.results)))
        else:
            for name in names:
                t0 = time.monotonic()
                doc = run_lab(name, args.n, kinds, args.lab_out or Path(tmp))
                print(f"lab on {name}: {time.monotonic() - t0:.0f} s, {len(doc['runs'])} records", file=sys.stderr)
                docs.append((doc, "lab run"))
    rows: list[dict[str, Any]] = []
    for doc, source in docs:
        for record in records_to_check(doc, kinds):
            kind = record["server"] if record["server"] in servers else (names[0] if len(names) == 1 else None)
            if args.results and names and kind not in names:
                continue
            row = check(record, servers.get(kind) if kind else None,
                        {**stamp, "lab_source": source, "lab_n": doc["n"]}, prime=not args.no_prime)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.out != "-":
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                with open(args.out, "a") as f:
                    f.write(json.dumps(row) + "\n")
    compared = [r for r in rows if r["agree"] is not None]
    worst = sorted(compared, key=lambda r: -abs(r["diff_pct"]))[:5]
    print(f"{len(rows)} records, {len(compared)} compared, {sum(r['agree'] for r in compared)} agree within "
          f"{TOLERANCE_PCT:g}%; worst: " + "; ".join(f"{r['server']} {r['kind']} {r['variant']} {r['diff_pct']:+.2f}%"
                                                   for r in worst), file=sys.stderr)


if __name__ == "__main__":
    main()
