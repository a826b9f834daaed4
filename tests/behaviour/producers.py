"""A keyspace written by the real producers, recorded once and replayed anywhere.

Why: the analyzer's figures are checked against keyspaces written the way real apps write
them (issue 23), and the truth per pattern (its real key count, and the used_memory
its keys free when they go) needs identical copies of the keyspace - one per pattern
removed. On valkey-9.1 what deleting a key frees depends by a few bytes on the order the
keys came in, so a copy is the same commands sent again in the same order: each producer
runs once against a recording server, every command it sends is recorded at the
connection (RecordingConnection.pack_command: what reaches the wire, pipelines
included), and `replay` sends them to a fresh server.

The producers (sizes scale with `scale`, fixed seeds):
  session:{tok}                         Flask-Session 0.8 through a Flask app (SET .. EX)
  :1:django.contrib.sessions.cache{tok} Django 5.2's cache session backend on django's
                                        RedisCache (in a child process: Django's settings
                                        are per process)
  seen:{hex}                            SETNX de-dup flags (SET k 1 NX)
  user:{n}                              integer counters (INCRBY)
  job:{n}:children                      small SETs of child ids per parent job (SADD)
  product:{n}                           hashes of objects (HSET of 5 fields)
  recent:{n}                            small lists (LPUSH + LTRIM)
  cache:{hex}                           JSON values with a TTL (SET .. EX)
  queue:jobs, events                    one long list, one stream (noise)
Each producer's writes are groups (one request, one app call); the groups of all producers
are interleaved in one seeded random order, as a live server takes them.

`python -m tests.behaviour.producers django URL N SEED OUT` is the child that runs Django.
"""

from __future__ import annotations

import json
import pickle
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

Command = tuple[Any, ...]
Group = list[Command]

_SENT: list[Command] = []
_HANDSHAKE = {"CLIENT", "HELLO", "AUTH", "SELECT", "PING"}


class RecordingConnection(redis.Connection):
    """A connection that records every command it packs (handshake commands aside)."""

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        _record(args)
        super().send_command(*args, **kwargs)

    def pack_commands(self, commands: Iterable[Command]) -> list[bytes | memoryview]:
        commands = list(commands)
        for args in commands:
            _record(args)
        return super().pack_commands(commands)


def _record(args: Command) -> None:
    head = args[0].split()[0] if isinstance(args[0], str) else bytes(args[0]).decode()
    if head.upper() not in _HANDSHAKE:
        _SENT.append(tuple(args))


def recording_client(url: str) -> redis.Redis:
    pool = redis.ConnectionPool.from_url(url, connection_class=RecordingConnection)
    return redis.Redis(connection_pool=pool)


def _taken(start: int) -> Group:
    group = _SENT[start:]
    del _SENT[start:]
    return group


@dataclass(frozen=True)
class Part:
    """One producer's pattern: its name as the analyzer should find it, and SCAN globs."""

    pattern: str
    globs: tuple[str, ...]
    count: int


BASE = {"session": 20_000, "django": 15_000, "seen": 100_000, "user": 80_000, "job": 10_000,
        "product": 20_000, "recent": 5_000, "cache": 30_000}


def parts(scale: float = 1.0) -> list[Part]:
    n = {k: max(5, round(v * scale)) for k, v in BASE.items()}
    return [Part("session:{tok}", ("session:*",), n["session"]),
            Part(":1:django.contrib.sessions.cache{tok}", (":1:django.contrib.sessions.cache*",), n["django"]),
            Part("seen:{hex}", ("seen:*",), n["seen"]),
            Part("user:{n}", ("user:*",), n["user"]),
            Part("job:{n}:children", ("job:*:children",), n["job"]),
            Part("product:{n}", ("product:*",), n["product"]),
            Part("recent:{n}", ("recent:*",), n["recent"]),
            Part("cache:{hex}", ("cache:*",), n["cache"]),
            Part("queue:jobs", ("queue:jobs",), 1),
            Part("events", ("events",), 1)]


# --- the producers ---------------------------------------------------------------------------


def flask_groups(url: str, n: int, seed: int) -> list[Group]:
    """n logins through a Flask app with Flask-Session 0.8 (Flask-Login and Flask-WTF keys)."""
    from flask import Flask, session
    from flask_session import Session

    rng = random.Random(seed)
    client = recording_client(url)
    app = Flask("producers")
    app.config.update(SESSION_TYPE="redis", SESSION_REDIS=client, SECRET_KEY="producers",
                      SESSION_PERMANENT=True)
    Session(app)

    @app.route("/login/<int:uid>")
    def login(uid: int) -> str:
        session["_user_id"] = str(uid)
        session["_fresh"] = True
        session["_id"] = rng.randbytes(64).hex()
        session["csrf_token"] = rng.randbytes(20).hex()
        return "ok"

    out = []
    for _ in range(n):  # a new visitor each time
        start = len(_SENT)
        with app.test_client() as browser:
            assert browser.get(f"/login/{rng.randrange(1, 10**7)}").status_code == 200
        out.append(_taken(start))
    client.close()
    return out


def _django_child(url: str, n: int, seed: int, out: str) -> None:
    import django
    from django.conf import settings

    settings.configure(CACHES={"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                           "LOCATION": url,
                                           "OPTIONS": {"connection_class": RecordingConnection}}},
                       SESSION_ENGINE="django.contrib.sessions.backends.cache", USE_TZ=True,
                       INSTALLED_APPS=["django.contrib.sessions"], SECRET_KEY="producers")
    django.setup()
    from django.contrib.sessions.backends.cache import SessionStore
    from django.core.cache import cache

    rng = random.Random(seed)
    groups = []
    for _ in range(n):  # what django.contrib.auth.login() leaves in a session
        start = len(_SENT)
        s = SessionStore()
        s["_auth_user_id"] = str(rng.randrange(1, 10**7))
        s["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
        s["_auth_user_hash"] = rng.randbytes(32).hex()
        s.save()
        groups.append(_taken(start))
    cache.close()
    Path(out).write_bytes(pickle.dumps(groups))


def django_groups(url: str, n: int, seed: int) -> list[Group]:
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "django.pickle")
        subprocess.run([sys.executable, "-m", "tests.behaviour.producers", "django", url, str(n), str(seed), out],
                       check=True, cwd=str(Path(__file__).resolve().parents[2]))
        groups: list[Group] = pickle.loads(Path(out).read_bytes())
    return groups


def plain_groups(sizes: dict[str, int], seed: int) -> list[Group]:
    """The app writes that need no framework, as redis-py sends them."""
    rng = random.Random(seed)
    out: list[Group] = []
    for _ in range(sizes["seen"]):
        out.append([("SET", f"seen:{uuid.UUID(int=rng.getrandbits(128), version=4).hex}", 1, "NX")])
    for uid in rng.sample(range(1, 10**7), sizes["user"]):
        out.append([("INCRBY", f"user:{uid}", rng.choice((1, 1, 1, 3, 17, 250, 12_000, 2_500_000)))])
    for job in rng.sample(range(1, 10**7), sizes["job"]):
        children = {f"{rng.randrange(10**8)}" for _ in range(rng.randrange(1, 9))}
        out.append([("SADD", f"job:{job}:children", *sorted(children))])
    for pid in range(1, sizes["product"] + 1):
        out.append([("HSET", f"product:{pid}", "name", f"Product {rng.randrange(10**6)}", "price",
                     f"{rng.randrange(100, 100_000) / 100:.2f}", "stock", rng.randrange(500),
                     "category", rng.choice(("books", "garden", "toys", "kitchen")),
                     "updated", 1_700_000_000 + rng.randrange(10**7))])
    for uid in rng.sample(range(1, 10**7), sizes["recent"]):
        items = [f"item:{rng.randrange(10**6)}" for _ in range(rng.randrange(2, 11))]
        out.append([("LPUSH", f"recent:{uid}", *items), ("LTRIM", f"recent:{uid}", 0, 9)])
    for _ in range(sizes["cache"]):
        page = {"id": rng.randrange(10**6), "title": f"page {rng.randrange(10**6)}",
                "tags": rng.sample(["a", "b", "news", "sport", "tech", "local"], 3), "views": rng.randrange(10**5)}
        out.append([("SET", f"cache:{rng.randbytes(12).hex()}", json.dumps(page), "EX", rng.randrange(3600, 86400))])
    out.append([("RPUSH", "queue:jobs", *[f"job-{i}" for i in range(2000)])])
    out.append([("XADD", "events", "*", "i", i) for i in range(5000)])
    return out


@dataclass
class Keyspace:
    """The recorded commands of every producer, in the order to send them."""

    commands: list[Command]
    parts: list[Part]

    @property
    def keys(self) -> int:
        return sum(p.count for p in self.parts)


def record(url: str, scale: float = 1.0, seed: int = 23) -> Keyspace:
    """Run every producer once against the (throwaway) server at `url`, recording."""
    ps = parts(scale)
    sizes = {k: max(5, round(v * scale)) for k, v in BASE.items()}
    groups = flask_groups(url, sizes["session"], seed) + django_groups(url, sizes["django"], seed + 1)
    groups += plain_groups(sizes, seed + 2)
    random.Random(seed + 3).shuffle(groups)
    return Keyspace([c for g in groups for c in g if _writes(c)], ps)


def _writes(command: Command) -> bool:
    name = command[0] if isinstance(command[0], str) else bytes(command[0]).decode()
    return name.split()[0].upper() not in ("GET", "EXISTS", "TTL", "PTTL", "MGET")


def replay(client: redis.Redis, commands: Iterable[Command], batch: int = 1000) -> None:
    """Send the commands again, in their order, on one connection."""
    pipe = client.pipeline(transaction=False)
    for i, args in enumerate(commands):
        pipe.execute_command(*args)  # type: ignore[no-untyped-call]
        if i % batch == batch - 1:
            pipe.execute()
    pipe.execute()
    client.connection_pool.disconnect()


def keys_of(client: redis.Redis, globs: Sequence[str]) -> list[bytes]:
    return list(dict.fromkeys(k for g in globs for k in client.scan_iter(match=g, count=2000)))


TRUTH_OPTIONS = {"latency-tracking": "no", "slowlog-log-slower-than": "-1", "enable-debug-command": "yes"}


def wait_rehashed(client: redis.Redis, timeout: float = 120) -> None:
    """Until no table of the keyspace is rehashing (DEBUG HTSTATS: the server must run with
    enable-debug-command, as TRUTH_OPTIONS). Redis 7.0 reports no rehash in INFO, and its
    rehash ends - freeing the old bucket array, 2 MiB at 262,144 keys - whenever enough
    commands or cron ticks have run: a reading taken mid-rehash put those 2 MiB in the next
    delta (a pattern's "truth" 20-34% too big on redis-7.0)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            stats = b"".join(bytes(client.execute_command("DEBUG", "HTSTATS", db))  # type: ignore[no-untyped-call]
                             for db in (0,))
        except redis.ResponseError:
            return  # DEBUG refused: nothing to wait on
        if b"rehashing target" not in stats or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def removal_truth(client: redis.Redis, part: Part, meter_factory: Callable[[redis.Redis], Any]) -> tuple[int, int]:
    """(keys, bytes freed) of deleting the part's keys: used_memory before/after (the meter)."""
    meter = meter_factory(client)
    keys = keys_of(client, part.globs)
    wait_rehashed(client)
    before = meter.reading()
    for i in range(0, len(keys), 5000):
        client.delete(*keys[i: i + 5000])
    client.connection_pool.disconnect()
    return len(keys), before.minus(meter.reading())


if __name__ == "__main__":
    if sys.argv[1:2] == ["django"]:
        _django_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
