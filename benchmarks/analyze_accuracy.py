"""Does `densekv analyze` predict what moving a pattern into densekv really saves?

One fresh server per server name, loaded with a keyspace from real producers (fixed
seeds): Flask-Session 0.8 sessions (a Flask app's test client), Django 5.2's cache session
backend (django.contrib.sessions.backends.cache over django's RedisCache), starsessions 2.2
(a Starlette app with its middleware, through Starlette's TestClient), seed 001's SETNX
de-dup flags `seen:<uuid>`, seed 004's counters `user:<id>:visits` (INCR) and `score:<n>`
(sequential ids), seed 002's small sets `job:<id>:done`, and noise (a 100k-element list, a
10k-entry stream). Then:
  1. `analyze(--sample N)` predicts each pattern's saving (replaying its sample on a
     scratch server of the same kind);
  2. each pattern with a densekv layout is moved, for real, on its own copy of the keyspace
     (a brand-new server of the same kind loaded again by the same producers in the same
     order from the same seeds: a copy by DUMP/RESTORE, or by GET/SET in any order, frees
     ~3 bytes per key more on deletion than the original on valkey-9.1, whose hash table
     layout depends on the order keys came in), the way densekv moves it: CompactMap.migrate_from (what `densekv
     migrate` runs) for maps; the framework backends' import (FlaskSessionFallback.read /
     the same decode for Django and starsessions, store.create(..., token=<the old id>),
     old key deleted) for sessions; CompactSet.add_many + UNLINK for flags; SetFamily for
     small sets. used_memory (densekv's meter: settled, client buffers excluded) before
     (B0), after the move (B1), and after deleting the keys the move created (B2):
         measured saving = (B0 - B1) / (B0 - B2)
     Each move runs once on a few throwaway keys first (script cache, one-time allocations).
One JSON record per pattern and server (predicted vs measured), stamped with the commit.
Issue 13's target: |predicted - measured| <= 10% of measured, every pattern, on valkey-9.1
and redis-7.0, sampling 10k keys out of 1M+.

Usage: python benchmarks/analyze_accuracy.py [--server NAME ...] [--scale 1.0] [--sample 10000]
       [--full] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import pickle  # noqa: F401  (Django's cache pickles; we decode with the analyzer's safe reader)
import random
import time
import uuid
from collections.abc import Callable
from typing import Any

import gitstamp  # benchmarks/gitstamp.py
import redis

from densekv.analyze.run import Options, analyze
from densekv.analyze.shapes import decode_dict
from densekv.measure import Meter
from densekv.server.binaries import find_servers
from densekv.server.process import ServerProcess

QUIET = {"latency-tracking": "no", "slowlog-log-slower-than": "-1"}
BASE = {"flask": 40_000, "django": 30_000, "star": 30_000, "flags": 400_000, "visits": 200_000,
        "scores": 200_000, "jobs": 100_000}


# --- producers ------------------------------------------------------------------------------


def load_flask(client: redis.Redis, n: int, seed: int) -> None:
    rng = random.Random(seed)
    from flask import Flask, session
    from flask_session import Session

    app = Flask("bench")
    app.config.update(SESSION_TYPE="redis", SESSION_REDIS=client, SECRET_KEY="bench", SESSION_PERMANENT=True)
    Session(app)

    @app.route("/login/<int:uid>")
    def login(uid: int) -> str:  # Flask-Login + Flask-WTF keys (DESIGN.md)
        session["_user_id"] = str(uid)
        session["_fresh"] = True
        session["_id"] = rng.randbytes(64).hex()
        session["csrf_token"] = rng.randbytes(20).hex()
        return "ok"

    for _ in range(n):
        with app.test_client() as browser:
            browser.get(f"/login/{rng.randrange(1, 10**7)}")


def load_django(url: str, n: int, seed: int) -> None:
    """In a child process: Django's settings (the cache's URL) are set once per process."""
    import subprocess
    import sys

    subprocess.run([sys.executable, __file__, "--django-load", url, str(n), str(seed)], check=True)


def _django_child(url: str, n: int, seed: int) -> None:
    import django
    from django.conf import settings

    settings.configure(CACHES={"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                           "LOCATION": url}},
                       SESSION_ENGINE="django.contrib.sessions.backends.cache", USE_TZ=True,
                       INSTALLED_APPS=["django.contrib.sessions"], SECRET_KEY="bench")
    django.setup()
    from django.contrib.sessions.backends.cache import SessionStore
    from django.core.cache import cache

    rng = random.Random(seed)
    for _ in range(n):  # what django.contrib.auth.login() leaves in a session
        s = SessionStore()
        s["_auth_user_id"] = str(rng.randrange(1, 10**7))
        s["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
        s["_auth_user_hash"] = rng.randbytes(32).hex()
        s.save()
    cache.close()


def load_starsessions(url: str, n: int, seed: int) -> None:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient
    from starsessions import SessionAutoloadMiddleware, SessionMiddleware
    from starsessions.stores.redis import RedisStore

    rng = random.Random(seed)

    async def login(request: Request) -> PlainTextResponse:
        request.session["user"] = rng.randrange(1, 10**7)
        request.session["role"] = "user"
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/login", login)])
    app.add_middleware(SessionAutoloadMiddleware)
    app.add_middleware(SessionMiddleware, store=RedisStore(url), lifetime=86400)
    with TestClient(app) as browser:
        for _ in range(n):
            browser.cookies.clear()
            browser.get("/login")


def load_plain(client: redis.Redis, sizes: dict[str, int], seed: int) -> None:
    rng = random.Random(seed)
    def batches(cmds: Any) -> None:
        pipe = client.pipeline(transaction=False)
        for i, add in enumerate(cmds):
            add(pipe)
            if i % 5000 == 4999:
                pipe.execute()
        pipe.execute()

    flags = [uuid.UUID(int=rng.getrandbits(128), version=4) for _ in range(sizes["flags"])]
    batches(lambda p, u=u: p.set(f"seen:{u}", 1, nx=True) for u in flags)
    batches(lambda p, uid=uid: p.incr(f"user:{uid}:visits", rng.randrange(1, 500))
            for uid in rng.sample(range(1, 10**8), sizes["visits"]))
    batches(lambda p, i=i: p.set(f"score:{i}", rng.randrange(10**6)) for i in range(sizes["scores"]))
    batches(lambda p, i=i: p.sadd(f"job:{i}:done", *{f"child-{rng.randrange(10**6)}" for _ in range(rng.randrange(1, 12))})
            for i in range(sizes["jobs"]))
    client.rpush("queue:jobs", *[f"job-{i}" for i in range(100_000)])
    for i in range(0, 10_000, 1000):
        pipe = client.pipeline(transaction=False)
        for j in range(i, i + 1000):
            pipe.xadd("events", {"i": j})
        pipe.execute()


def load_keyspace(proc: ServerProcess, sizes: dict[str, int]) -> float:
    """The whole keyspace, producer by producer, in one order, from fixed seeds; seconds."""
    started = time.monotonic()
    with proc.client() as client:
        load_flask(client, sizes["flask"], 1)
        load_django(proc.url, sizes["django"], 2)
        load_starsessions(proc.url, sizes["star"], 3)
        load_plain(client, sizes, 4)
    return time.monotonic() - started


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


def move_map(client: redis.Redis, glob: str, n: int, zstd: bool) -> None:
    from densekv.maps import CompactMap

    m = CompactMap(client, "kv" + glob.split(":")[0], codec="zstd" if zstd else "auto", expected=n)
    if zstd:
        m.train([client.get(k) for k in scan_keys(client, glob)[:500]])
    m.migrate_from(glob)


def move_set(client: redis.Redis, glob: str, n: int) -> None:
    from densekv.sets import CompactSet

    keys = scan_keys(client, glob)
    s = CompactSet(client, "seen_ids", expected=n, item_size=16)
    prefix = len(glob.rstrip("*"))
    for i in range(0, len(keys), 10_000):
        chunk = keys[i: i + 10_000]
        s.add_many([uuid.UUID(k.decode()[prefix:]).bytes for k in chunk])
        client.unlink(*chunk)


def move_family(client: redis.Redis, glob: str, expected_children: int | None) -> None:
    from densekv.sets import SetFamily

    fam = SetFamily(client, "jobs_done", expected_children=expected_children)
    for key in scan_keys(client, glob):
        members = client.smembers(key)
        ttl = client.pttl(key)
        fam.add_many(key.decode().split(":")[1], list(members))
        if ttl > 0:
            fam.expire(key.decode().split(":")[1], ttl / 1000)
        client.delete(key)


def mover(row: dict[str, Any], n: int) -> Callable[[redis.Redis, str], None] | None:
    kind = row["replay"]["densekv"]["kind"] if "densekv" in row.get("replay", {}) else None
    fmt = max(row["sessions"], key=row["sessions"].get) if row["sessions"] else None
    if kind == "sessions" and fmt:
        return lambda c, g: move_sessions(c, g, fmt, n)
    if kind in ("map", "map-zstd"):
        return lambda c, g: move_map(c, g, n, kind == "map-zstd")
    if kind == "set":
        return lambda c, g: move_set(c, g, n)
    if kind == "family":
        children = row["replay"]["densekv"].get("expected_children")
        return lambda c, g: move_family(c, g, children)
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


def measure_move(client: redis.Redis, row: dict[str, Any], move: Callable[[redis.Redis, str], None]
                 ) -> dict[str, Any]:
    """B0, B1, B2 on a copy of the keyspace (see the module docstring)."""
    meter = Meter(client, clear=True)
    keys_true = len(scan_keys(client, row["glob"]))
    warm_up(client, row, move)
    keys_before = set(client.scan_iter(count=5000))
    b0 = meter.reading()
    move(client, row["glob"])
    client.connection_pool.disconnect()
    b1 = meter.reading()
    made = list(set(client.scan_iter(count=5000)) - keys_before)
    for i in range(0, len(made), 5000):
        client.delete(*made[i: i + 5000])
    b2 = meter.reading()
    client.close()
    now_true, dk_true = b0.minus(b2), b1.minus(b2)
    measured = b0.minus(b1) / now_true if now_true else 0.0
    predicted = row["measured_saving"]
    return {"moved": True, "keys_true": keys_true, "bytes_now_predicted": row["bytes_now"],
            "bytes_now_measured": now_true, "bytes_densekv_predicted": round(row["bytes_now"] * (1 - predicted)),
            "bytes_densekv_measured": dk_true, "saving_predicted": predicted, "saving_interval": row["interval"],
            "saving_measured": round(measured, 4), "error_pp": round(100 * (predicted - measured), 2),
            "error_pct_of_measured": round(100 * (predicted - measured) / measured, 2) if measured else None}


def emit(record: dict[str, Any], out: str | None) -> None:
    print(json.dumps(record), flush=True)
    if out:
        with open(out, "a") as fh:
            fh.write(json.dumps(record) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", action="append")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--sample", type=int, default=10_000)
    ap.add_argument("--full", action="store_true", help="analyze every key instead of a sample")
    ap.add_argument("--out", default=None)
    ap.add_argument("--django-load", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.django_load:
        url, n, seed = args.django_load
        _django_child(url, int(n), int(seed))
        return
    servers = find_servers()
    commit = gitstamp.commit()
    sizes = {k: max(10, int(v * args.scale)) for k, v in BASE.items()}
    for name in args.server or ["valkey-9.1", "redis-7.0"]:
        with ServerProcess(servers[name], options=QUIET) as proc:
            loaded_in = load_keyspace(proc, sizes)
            with proc.client() as client:
                total = int(client.dbsize())
            started = time.monotonic()
            doc = analyze(Options(url=proc.url, sample=None if args.full else args.sample))
            analysis_seconds = time.monotonic() - started
        for row in doc["patterns"]:
            move = mover(row, row["keys"])
            base = {"benchmark": "analyze_accuracy", "commit": commit, "server": name,
                    "version": servers[name].version, "keys_total": total, "mode": doc["mode"],
                    "sample": doc["keys_sampled"], "pattern": row["pattern"],
                    "keys_predicted": row["keys"], "keys_interval": row["keys_interval"],
                    "recommendation": row["recommendation"], "reason": row["reason"],
                    "analysis_seconds": round(analysis_seconds, 2), "load_seconds": round(loaded_in, 1),
                    "scratch": doc["scratch"]}
            if move is None or row["measured_saving"] is None:
                emit({**base, "moved": False}, args.out)
                continue
            with ServerProcess(servers[name], options=QUIET) as copy:
                load_keyspace(copy, sizes)
                emit({**base, **measure_move(copy.client(), row, move)}, args.out)


if __name__ == "__main__":
    main()
