"""Are `densekv analyze`'s figures the truth? Keys, bytes now and bytes in densekv per pattern.

A keyspace like issue 23's, written by the real producers (tests/behaviour/producers.py:
Flask-Session 0.8 through a Flask app, Django 5.2's cache session backend, SETNX flags
`seen:<hex>`, INCRBY counters `user:<n>`, small SETs `job:<n>:children`, hashes of objects,
small lists, JSON values with TTLs, a long list and a stream; ~280k keys at --scale 1),
recorded once and sent again, in the same order, to each fresh server. Then per server:
  1. `analyze(--sample N)` (default 10,000) on one copy: each pattern's keys, bytes_now
     and bytes_densekv (the replay's prediction);
  2. per pattern, on its own copy (a brand-new server sent the same commands: on
     valkey-9.1 what deleting a key frees depends by a few bytes on the order keys came
     in, so a DUMP/RESTORE copy would not do): the real key count (SCAN MATCH), and
     used_memory (densekv's meter: settled, client buffers excluded) before (B0) and after
     deleting the pattern's keys (B2): bytes_now's truth is B0 - B2. For a pattern densekv
     has a layout for, on another copy, the move done for real the way densekv moves it
     (CompactMap.migrate_from - what `densekv migrate` runs - for maps; the framework
     backends' import for sessions; CompactSet.add_many + UNLINK for flags; SetFamily for
     small sets): used_memory after it (B1) and after deleting every key it created (B2);
     bytes_densekv's truth is B1 - B2.
     Each move runs once on a few throwaway keys first (script cache, one-time allocations).
One JSON record per pattern and server, stamped with the commit, with the errors in % of
the truth. Issue 23's target: keys and bytes_now within 5%, bytes_densekv within 10%.

Usage: python benchmarks/analyze_accuracy.py [--server NAME ...] [--scale 1.0] [--sample 10000]
       [--only PATTERN ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gitstamp  # benchmarks/gitstamp.py
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.behaviour.producers

from densekv.tools.analyze.run import Options, analyze
from densekv.tools.analyze.shapes import decode_dict
from densekv.tools.measure import Meter
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess
from tests.behaviour.producers import TRUTH_OPTIONS, Keyspace, record, replay, wait_rehashed

QUIET = TRUTH_OPTIONS  # latency tracking and slowlog off, DEBUG on (wait_rehashed)


# --- the real moves -----------------------------------------------------------------------


def scan_keys(client: redis.Redis, glob: str) -> list[bytes]:
    return list(dict.fromkeys(client.scan_iter(match=glob, count=2000)))


def move_sessions(client: redis.Redis, glob: str, fmt: str, n: int) -> None:
    from densekv.integrations.flask import FlaskSessionFallback
    from densekv.sessions.store import SessionStore

    store = SessionStore(client, "sess", expected_sessions=n)
    prefix = glob.rstrip("*")
    fallback = FlaskSessionFallback(client, key_prefix=prefix)
    for key in scan_keys(client, glob):
        sid = key.decode()[len(prefix):]
        if fmt == "flask-session":
            old = fallback.read(sid)
            if old is None:
                continue
            data, ttl = old
            identity = None
        else:
            with client.pipeline(transaction=True) as pipe:
                raw, ms = pipe.get(key).pttl(key).execute()
            found = decode_dict(raw)
            if found is None:
                continue
            data = found[1]
            data.pop("__metadata__", None)
            ttl = None if ms < 0 else max(1, math.ceil(ms / 1000))
            uid = data.get("_auth_user_id")
            identity = int(uid) if fmt == "django" and uid and str(uid).isdecimal() else None
        store.create(identity, data, ttl, token=sid)
        client.delete(key)


def move_map(client: redis.Redis, glob: str, n: int, zstd: bool, ns: str) -> None:
    from densekv.maps import CompactMap

    m = CompactMap(client, ns, codec="zstd" if zstd else "auto", expected=n)
    if zstd:
        m.train([client.get(k) for k in scan_keys(client, glob)[:500]])
    m.migrate_from(glob)


def move_set(client: redis.Redis, glob: str, n: int, ns: str) -> None:
    from densekv.sets import CompactSet

    keys = scan_keys(client, glob)
    s = CompactSet(client, ns, expected=n, item_size=16).open()
    prefix = len(glob.rstrip("*"))
    for i in range(0, len(keys), 10_000):
        chunk = keys[i: i + 10_000]
        s.add_many([uuid.UUID(k.decode()[prefix:]).bytes for k in chunk])
        client.unlink(*chunk)


def move_family(client: redis.Redis, glob: str, expected_children: int | None, ns: str) -> None:
    from densekv.sets import SetFamily

    fam = SetFamily(client, ns, expected_children=expected_children).open()
    for key in scan_keys(client, glob):
        members = client.smembers(key)
        ttl = client.pttl(key)
        fam.add_many(key.decode().split(":")[1], list(members))
        if ttl > 0:
            fam.expire(key.decode().split(":")[1], ttl / 1000)
        client.delete(key)


def mover(row: dict[str, Any], n: int) -> Callable[[redis.Redis, str], None] | None:
    ns = row["namespace"]  # the name the analyzer's command (and its replay) uses
    kind = row["replay"]["densekv"]["kind"] if "densekv" in row.get("replay", {}) else None
    fmt = max(row["sessions"], key=row["sessions"].get) if row["sessions"] else None
    if kind == "sessions" and fmt:
        return lambda c, g: move_sessions(c, g, fmt, n)
    if kind in ("map", "map-zstd"):
        return lambda c, g: move_map(c, g, n, kind == "map-zstd", ns)
    if kind == "set":
        return lambda c, g: move_set(c, g, n, ns)
    if kind == "family":
        children = row["replay"]["densekv"].get("expected_children")
        return lambda c, g: move_family(c, g, children, ns)
    return None


def warm_up(client: redis.Redis, row: dict[str, Any], move: Callable[[redis.Redis, str], None]) -> None:
    """The same move on a few copies of the pattern's keys under another name, then
    everything it wrote is deleted: the scripts and one-time allocations stay."""
    before = set(client.scan_iter(count=5000))
    for key in scan_keys(client, row["glob"])[:20]:
        client.restore(b"warm" + key, 0, client.dump(key), replace=True)
    glob = "warm" + row["glob"]
    move(client, glob)
    made = set(client.scan_iter(count=5000)) - before
    if made:
        client.delete(*made)


def removal_truth(client: redis.Redis, glob: str) -> dict[str, Any]:
    """The pattern's real key count, and what deleting its keys frees (B0 - B2)."""
    meter = Meter(client, clear=True)
    keys = scan_keys(client, glob)
    wait_rehashed(client)
    b0 = meter.reading()
    for i in range(0, len(keys), 5000):
        client.delete(*keys[i: i + 5000])
    client.connection_pool.disconnect()
    freed = b0.minus(meter.reading())
    client.close()
    return {"keys": len(keys), "bytes_now": freed}


def move_truth(client: redis.Redis, glob: str, move: Callable[[redis.Redis, str], None],
               row: dict[str, Any]) -> int:
    """B1 - B2 on a copy of the keyspace: what the pattern takes in densekv."""
    meter = Meter(client, clear=True)
    warm_up(client, row, move)
    keys_before = set(client.scan_iter(count=5000))
    move(client, glob)
    client.connection_pool.disconnect()
    wait_rehashed(client)
    b1 = meter.reading()
    made = list(set(client.scan_iter(count=5000)) - keys_before)
    for i in range(0, len(made), 5000):
        client.delete(*made[i: i + 5000])
    client.connection_pool.disconnect()
    b2 = meter.reading()
    client.close()
    return b1.minus(b2)


def pct(predicted: float | None, true: float | None) -> float | None:
    if predicted is None or not true:
        return None
    return round(100 * (predicted - true) / true, 2)


def emit(record: dict[str, Any], out: str | None) -> None:
    print(json.dumps(record), flush=True)
    if out:
        with open(out, "a") as fh:
            fh.write(json.dumps(record) + "\n")


def copy_of(proc: ServerProcess, keyspace: Keyspace) -> None:
    with proc.client() as c:
        replay(c, keyspace.commands)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", action="append")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--sample", type=int, default=10_000)
    ap.add_argument("--only", action="append", help="only these patterns (as the analyzer names them)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    servers = find_servers()
    commit = gitstamp.commit()
    started = time.monotonic()
    with ServerProcess(servers["valkey-9.1"], options=QUIET) as rec:
        keyspace = record(rec.url, args.scale)
    recorded_in = time.monotonic() - started
    globs = {p.pattern: p.globs[0] for p in keyspace.parts}
    for name in args.server or ["valkey-9.1", "redis-7.0"]:
        with ServerProcess(servers[name], options=QUIET) as proc:
            copy_of(proc, keyspace)
            with proc.client() as client:
                total = int(client.dbsize())
            started = time.monotonic()
            doc = analyze(Options(url=proc.url, sample=args.sample))
            analysis_seconds = time.monotonic() - started
        rows = {r["pattern"]: r for r in doc["patterns"]}
        for pattern, glob in globs.items():
            if args.only and pattern not in args.only:
                continue
            row = rows.get(pattern)
            move = mover(row, row["keys"]) if row is not None and row["measured_saving"] is not None else None
            with ServerProcess(servers[name], options=QUIET) as copy:
                copy_of(copy, keyspace)
                truth = removal_truth(copy.client(), glob)
            truth["bytes_densekv"] = None
            if move is not None and row is not None:
                with ServerProcess(servers[name], options=QUIET) as copy:
                    copy_of(copy, keyspace)
                    truth["bytes_densekv"] = move_truth(copy.client(), glob, move, row)
            dk = None if row is None or row["measured_saving"] is None else \
                round(row["bytes_now"] * (1 - row["measured_saving"]))
            emit({"benchmark": "analyze_accuracy", "commit": commit, "server": name,
                  "version": servers[name].version, "keys_total": total, "sample": args.sample,
                  "keys_sampled": doc["keys_sampled"], "counted": doc.get("counted"), "pattern": pattern,
                  "found": row is not None, "recommendation": row and row["recommendation"],
                  "moved": move is not None,
                  "keys": row and row["keys"], "keys_true": truth["keys"], "keys_interval": row and row["keys_interval"],
                  "keys_error_pct": pct(row and row["keys"], truth["keys"]),
                  "bytes_now": row and row["bytes_now"], "bytes_now_true": truth["bytes_now"],
                  "bytes_now_interval": row and row["bytes_now_interval"],
                  "bytes_now_error_pct": pct(row and row["bytes_now"], truth["bytes_now"]),
                  "bytes_densekv": dk, "bytes_densekv_true": truth["bytes_densekv"],
                  "bytes_densekv_error_pct": pct(dk, truth["bytes_densekv"]) if move else None,
                  "overhead_per_key": row and row["overhead_per_key"],
                  "analysis_seconds": round(analysis_seconds, 2), "record_seconds": round(recorded_in, 1),
                  "scratch": doc["scratch"]}, args.out)


if __name__ == "__main__":
    main()
