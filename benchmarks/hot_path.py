"""The hot path (issue 22, section 2): what one single-item operation costs the client's CPU
and the server, densekv against the plain redis-py command a team would otherwise send.

Per server (valkey-9.1 and redis-7.0 by default, each started fresh on loopback and stopped
at exit), one client process, these operations, each a pair of sides:

  op              variant     densekv                              plain redis-py
  session_get     inline      store.get(token), P1 (Django login)  GET + json.loads
  session_get     split       store.get(token), P2 (Flask-Login)   GET + json.loads
  session_touch   idle_ttl    store.touch(token)                   EXPIRE key idle_ttl
  session_apply   read        store.apply(t, {k: v}, read=session) dict update, SET key json EX ttl
  session_apply   no_read     store.apply(t, {k: v})               dict update, SET key json EX ttl
                  (P1, k = "_auth_user_hash", a new 64-hex value: the session stays inline)
  session_create  P1          store.create(identity, data)         token, SET key json NX EX ttl
  set_add         new         CompactSet.add(16 new bytes)         SADD
  set_contains    present     CompactSet.contains(stored item)     SISMEMBER
  map_get         present     CompactMap.get(key)                  GET
  map_set         overwrite   CompactMap.set(key, 20-char str)     SET
  bloom_add       new         BloomFilter.add(new item)            BF.ADD    (with RedisBloom)
  bloom_contains  present     BloomFilter.contains(stored item)    BF.EXISTS (with RedisBloom)
  login_get       P1k, P2     store.get(token)                     GET + json.loads
  login_touch     P1k, P2     store.touch(token)                   EXPIRE key idle_ttl
  login_rmw       P1k, P2     store.get + store.apply(t, {"n": v}, read=session), both timed
                                                                   GET + json.loads + SET EX
                  (issue 30: the login sessions a web request reads and writes; P1k is a
                  Django login plus one small key "n", P2 Flask-Login; the server's process
                  CPU per call is bounded too: server_cpu_target / server_cpu_ok)
  alogin_get      P1k, P2     await AsyncSessionStore.get(token)   await redis.asyncio GET + json.loads
  alogin_touch    P1k, P2     await AsyncSessionStore.touch(token) await redis.asyncio EXPIRE
  alogin_rmw      P1k, P2     await get + await apply(read=)       await GET + json.loads + await SET EX
                  (the asyncio twins of the login cases, on the same stores and keys, each
                  side with its own redis.asyncio client on one event loop: a turn's calls
                  are awaited one after the other inside that loop, and its clocks are read
                  there, so the loop's own start and stop are not in the figures)

Data: session stores (namespace "inl": 10k P1 sessions; "splP2": 10k sessions of P2, or
"splP3" of P3 if P2 stays inline: the profile whose `SessionStore.stats()` reports split;
"crt", where the creates go: 10k P1 sessions, sized for those and the creates to come), each
with a zstd dictionary trained on 2,000 of its own sessions before any is stored, ttl 14
days, idle_ttl 2 days; the plain side holds the same sessions as JSON strings (SET EX).
Sets, maps and filters hold 10k items on both sides (the set sized for the adds to come;
densekv's Bloom filter is the module-free one, and its plain side exists only on a server
with RedisBloom: `--bloom-server redis-7.4` measures the two Bloom operations there too).

Timing: per operation, --rounds rounds of --calls calls per side, the sides taking turns
(A B, B A, ...). Client CPU per call: time.process_time() around a turn's calls / calls
(the server is another process, so nothing is subtracted). Work a call needs done before
it (the session get() a `read=` apply writes against, the plain side's GET + json.loads)
is done before the turn, outside the timing and the server counters. Server time per call:
INFO commandstats deltas around the turn. A wrapper (EXEC, EVALSHA, EVAL, FCALL) is booked
with the time of the commands it ran, and those commands are booked again under their own
names, so only top-level commands are summed: before its turns each side is run --probe
times with densekv.wire.exchange and redis.Redis.execute_command wrapped to count the
commands the client sent, and which of them it sent between MULTI and EXEC (run by EXEC,
so inside its time); a command name's usec in a turn is then counted in the share of its
calls the client sent outside a transaction (all of them for a plain command, none for one
only scripts or transactions ran, that share where both happen: the mean usec of the name
stands for both), and every wrapper (and MULTI) in full. The record lists per call
`*_commands` (all sent, queued ones included) and `*_nested` (run inside EXEC / EVALSHA).
`*_server_cpu_us` is the server process's used_cpu_user + used_cpu_sys per call over the
same turns (protocol parsing and replies included; tick-granular, so a gauge only).
The client's kernel time (`*_client_sys_us`, getrusage) and how often per call it slept
waiting for a reply (`*_client_sleeps_per_call`, voluntary context switches) say which state
a turn ran in: a call that blocks in recv costs ~15-20 us more CPU (the switch and the
wake-up) than one whose reply is already there, and which of the two happens depends on the
other load of the machine's cores (measured: plain GET 19 us per call without sleeping,
33 us when every call sleeps), so compare ratios from turns with similar sleeps.
Figures are medians over the rounds; `client_ratio` / `server_ratio` are densekv / plain
of the medians, `*_paired` the median of the per-round ratios, `*_target` the issue's
bound and `*_ok` whether the ratio meets it.

A full run takes ~2 min 10 s on the 2-core dev machine (16 rounds of 1000 calls), --quick
~15 s (4 rounds of 200). Prints one JSON record per (server, op, variant) and appends them
to --out (default benchmarks/results/hot_path.jsonl; --no-save: print only). --profile
prints instead where the time of session get (inline, split), apply (read / no_read) and
create goes:
cProfile over --calls calls each (wall clock: recv_into holds the wait for the reply),
densekv's own functions, the top 15 by cumulative and by self time, and the top 8 others
by self time.

--pin CLIENT,SERVER pins this process and the server to one core each (the issue 30 figures:
--pin 0,1 on the 2-core machine).

--observe prometheus (or otel, or otel-no-histograms: .otel's SessionMetrics(histograms=False))
measures instead what session metrics cost (issue 34: <= 5% of
the client's CPU per call): for session_get, session_touch and session_apply the two sides are
the same densekv calls, "observed" with densekv.integrations.prometheus.SessionMetrics (or
.otel's, on an SDK MeterProvider with an InMemoryMetricReader) attached to every session store
of the run and "bare" with none, taking turns as above (the observer attached before the
observed side's turn, removed before the bare side's, outside the timing). No scrape runs
during the turns (what a scrape costs is per scrape, not per call). The records
(benchmark "hot_path_observed") give `client_ratio` = observed / bare of the medians,
`client_ratio_paired` the median of the per-round ratios, `client_ratio_rounds` them all
(their spread is the noise of the run: the machine's 2 cores are shared), and
`client_target` 1.05.

Usage: python benchmarks/hot_path.py [--quick] [--pin 0,1] [--servers valkey-9.1,redis-7.0]
       [--observe prometheus|otel|otel-no-histograms]
       [--bloom-server redis-7.4 | --bloom-server ''] [--ops session_get,...] [--rounds 16]
       [--calls 1000] [--sessions 10000] [--out FILE | --no-save]
       python benchmarks/hot_path.py --profile [--servers valkey-9.1] [--calls 3000] [--ops alogin_get,...]
Tables: ... | python benchmarks/markdown_table.py --field client_ratio
        ... | python benchmarks/markdown_table.py --field server_ratio
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import pstats
import random
import resource
import secrets
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code
import redis
import redis.asyncio
from records import emit  # benchmarks/records.py: print and append each record

import densekv
import densekv.wire
from densekv.maps import CompactMap
from densekv.sets.bloom import BloomFilter
from densekv.tools.lab.observe import HOUSEKEEPING, WRAPPERS
from densekv.tools.lab.session_profiles import session
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

RESULTS = Path(__file__).parent / "results" / "hot_path.jsonl"
COMMIT = gitstamp.commit()  # the code this process imported (densekv/ may change during a run)
TTL = 14 * 86_400
IDLE_TTL = 2 * 86_400
TRAIN_N = 2000  # sessions whose data trains each store's dictionary
ITEMS = 10_000  # items in each set, map and filter
BLOOM_CAPACITY = 100_000
CONTAINERS = ("client", "config", "script", "memory", "object", "command", "cluster", "xinfo")
#: the issue's "Done when" bounds, densekv / plain (client CPU, server time)
TARGETS: dict[tuple[str, str], tuple[float | None, float | None]] = {
    ("session_get", "inline"): (1.3, 2.0),
    ("session_get", "split"): (1.3, 2.5),
    ("session_touch", "idle_ttl"): (1.3, 4.0),
    ("session_apply", "read"): (2.0, 5.0),
    ("session_apply", "no_read"): (2.0, 5.0),
    ("session_create", "P1"): (None, None),
    ("set_add", "new"): (1.3, None),
    ("set_contains", "present"): (1.3, None),
    ("map_get", "present"): (1.3, None),
    ("map_set", "overwrite"): (1.3, None),
    ("bloom_add", "new"): (None, None),
    ("bloom_contains", "present"): (None, None),
    # issue 30: the login profiles' read, touch and read-modify-write (server: process CPU)
    **{(op, prof): (1.3, None) for op in ("login_get", "login_touch", "login_rmw") for prof in ("P1k", "P2")},
    # ... and their asyncio twins (AsyncSessionStore against redis.asyncio)
    **{(op, prof): (1.3, None) for op in ("alogin_get", "alogin_touch", "alogin_rmw") for prof in ("P1k", "P2")},
}
#: issue 30's bounds on the server process's CPU per call, densekv / plain
SERVER_CPU_TARGETS = {"login_get": 1.3, "login_touch": 2.5, "login_rmw": 1.6,
                      "alogin_get": 1.3, "alogin_touch": 2.5, "alogin_rmw": 1.6}
ASYNC_LOGIN_OPS = ("alogin_get", "alogin_touch", "alogin_rmw")
LOGIN_PROFILES = ("P1k", "P2")
OPS = tuple(dict.fromkeys(op for op, _ in TARGETS))

Call = Callable[[int], Any]  # one operation on input i
ACall = Callable[[int], Awaitable[Any]]  # the same, awaited (an asyncio side)
SESSION_STORES: list[Any] = []  # every session store sessions_store() made (--observe attaches to them)
OBSERVED_OPS = ("session_get", "session_touch", "session_apply")  # --observe measures these
OBSERVE_TARGET = 1.05  # issue 34: metrics cost <= 5% of the client's CPU per call


@dataclass
class Side:
    """One implementation of an operation: `call(i)` runs it on input i; `prepare(lo, hi)`
    does, before a turn and outside its measurement, what calls lo..hi-1 need done first."""

    name: str
    call: Call
    prepare: Callable[[int, int], None] | None = None
    #: an asyncio side: `acall(i)` is awaited on `loop` (and `call` runs one call there)
    acall: ACall | None = None
    loop: asyncio.AbstractEventLoop | None = None
    cpu_us: list[float] = field(default_factory=list)  # per call, per round
    server_us: list[float] = field(default_factory=list)
    server_cpu_us: list[float] = field(default_factory=list)
    sys_us: list[float] = field(default_factory=list)  # the client's kernel time (getrusage)
    sleeps: list[float] = field(default_factory=list)  # the client's voluntary context switches
    top_share: dict[str, float] = field(default_factory=dict)  # command -> share sent by the client
    commands: dict[str, float] = field(default_factory=dict)  # sent per call
    nested: dict[str, float] = field(default_factory=dict)  # run inside wrappers per call


def async_side(name: str, loop: asyncio.AbstractEventLoop, acall: ACall) -> Side:
    """A side whose calls are coroutines awaited on `loop` (turn() awaits a whole turn there)."""
    return Side(name, lambda i: loop.run_until_complete(acall(i)), acall=acall, loop=loop)


@dataclass
class Case:
    op: str
    variant: str
    densekv: Side
    plain: Side | None
    what: str


# -- server counters ------------------------------------------------------------------------------
Stats = dict[str, tuple[int, int]]


def snapshot(client: redis.Redis) -> tuple[Stats, float]:
    """commandstats (command -> calls, usec) and the server's CPU seconds, in one INFO."""
    info = client.execute_command("INFO", "commandstats", "cpu")
    stats = {k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
             for k, v in info.items() if k.startswith("cmdstat_")}
    return stats, float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def delta(before: Stats, after: Stats) -> dict[str, tuple[int, int]]:
    out = {}
    for name, (calls, usec) in after.items():
        c0, u0 = before.get(name, (0, 0))
        if calls > c0 and name not in HOUSEKEEPING and name.split("|")[0] not in HOUSEKEEPING:
            out[name] = (calls - c0, usec - u0)
    return out


def command_name(args: tuple[Any, ...]) -> str:
    """commandstats' name of a command as sent: lower case, `container|sub` for containers."""
    def text(x: Any) -> str:
        return (x.decode() if isinstance(x, bytes) else str(x)).lower()
    name = text(args[0])
    if " " in name:  # redis-py sends "SCRIPT LOAD" as one argument
        name = "|".join(name.split()[:2])
    elif name in CONTAINERS and len(args) > 1:
        name = f"{name}|{text(args[1])}"
    return name


@contextmanager
def counting_sent() -> Iterator[tuple[Counter[str], Counter[str]]]:
    """Count the commands the client sends (densekv's batches, redis-py's commands): all of
    them, and those outside MULTI ... EXEC (the ones EXEC does not run, so not in its time)."""
    sent: Counter[str] = Counter()
    top: Counter[str] = Counter()
    exchange = densekv.wire.exchange
    aexchange = densekv.wire.aexchange
    execute = redis.Redis.execute_command
    aexecute = redis.asyncio.Redis.execute_command

    def count(commands: list[tuple[Any, ...]]) -> None:
        queued = False
        for c in commands:
            name = command_name(c)
            sent[name] += 1
            if name == "multi":
                queued = True
            elif name in ("exec", "discard"):
                queued = False
            if not queued or name == "multi":
                top[name] += 1

    def counted_exchange(conn: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
        count(commands)
        return exchange(conn, commands)

    async def counted_aexchange(conn: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
        count(commands)
        return await aexchange(conn, commands)

    def counted_execute(self: redis.Redis, *args: Any, **options: Any) -> Any:
        sent[command_name(args)] += 1
        top[command_name(args)] += 1
        return execute(self, *args, **options)

    async def counted_aexecute(self: redis.asyncio.Redis, *args: Any, **options: Any) -> Any:
        sent[command_name(args)] += 1
        top[command_name(args)] += 1
        return await aexecute(self, *args, **options)

    densekv.wire.exchange = counted_exchange  # type: ignore[assignment]
    densekv.wire.aexchange = counted_aexchange  # type: ignore[assignment]
    redis.Redis.execute_command = counted_execute  # type: ignore[method-assign]
    redis.asyncio.Redis.execute_command = counted_aexecute  # type: ignore[method-assign]
    try:
        yield sent, top
    finally:
        densekv.wire.exchange = exchange  # type: ignore[assignment]
        densekv.wire.aexchange = aexchange  # type: ignore[assignment]
        redis.Redis.execute_command = execute  # type: ignore[method-assign]
        redis.asyncio.Redis.execute_command = aexecute  # type: ignore[method-assign]


def probe(stats_client: redis.Redis, side: Side, start: int, n: int) -> None:
    """Which of the commands a side causes the client sends itself, and which run inside
    its scripts or transactions (see the module docstring)."""
    if side.prepare:
        side.prepare(start, start + n)
    before, _ = snapshot(stats_client)
    with counting_sent() as (sent, top):
        for i in range(start, start + n):
            side.call(i)
    ran = delta(before, snapshot(stats_client)[0])
    sent = Counter({k: v for k, v in sent.items() if k not in HOUSEKEEPING})
    side.top_share = {name: 1.0 if name in WRAPPERS else min(1.0, top.get(name, 0) / calls)
                      for name, (calls, _) in ran.items()}
    side.commands = {k: round(v / n, 3) for k, v in sorted(sent.items())}
    side.nested = {name: round((calls - top.get(name, 0)) / n, 3)
                   for name, (calls, _) in sorted(ran.items())
                   if name not in WRAPPERS and calls > top.get(name, 0)}


def turn(stats_client: redis.Redis, side: Side, start: int, n: int) -> None:
    if side.prepare:
        side.prepare(start, start + n)
    gc.collect()
    before, cpu0 = snapshot(stats_client)
    if side.acall is not None and side.loop is not None:
        spent, ru0, ru1 = side.loop.run_until_complete(atimed(side.acall, start, n))
    else:
        call = side.call
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.process_time()
        for i in range(start, start + n):
            call(i)
        spent = time.process_time() - t0
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
    after, cpu1 = snapshot(stats_client)
    side.sys_us.append(1e6 * (ru1.ru_stime - ru0.ru_stime) / n)
    side.sleeps.append((ru1.ru_nvcsw - ru0.ru_nvcsw) / n)
    usec = sum(u * side.top_share.get(name, 1.0) for name, (_, u) in delta(before, after).items())
    side.cpu_us.append(1e6 * spent / n)
    side.server_us.append(usec / n)
    side.server_cpu_us.append(1e6 * (cpu1 - cpu0) / n)


async def atimed(acall: ACall, start: int, n: int) -> tuple[float, Any, Any]:
    """A turn of an asyncio side inside its loop: the CPU seconds of its n awaited calls,
    and getrusage before and after (as turn() reads them for a sync side)."""
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.process_time()
    for i in range(start, start + n):
        await acall(i)
    spent = time.process_time() - t0
    return spent, ru0, resource.getrusage(resource.RUSAGE_SELF)


# -- the cases ------------------------------------------------------------------------------------
def login_session(profile: str, i: int) -> tuple[int | None, dict[str, Any]]:
    """Session i of a lab profile, or of "P1k": a Django login (P1) plus one small key,
    the "n" a request's one-key write sets (login_rmw)."""
    if profile == "P1k":
        uid, data = session("P1", i)
        return uid, {**data, "n": i % 100}
    return session(profile, i)


#: --fill: the session stores' fill= (None: the store's default)
FILL: dict[str, int | None] = {}


def sessions_store(url: str, namespace: str, profile: str, n: int,
                   expected: int | None = None) -> tuple[Any, list[str], list[dict[str, Any]]]:
    """A store of n sessions of `profile`, sized for `expected` (default n)."""
    store = densekv.SessionStore(redis.Redis.from_url(url), namespace=namespace, ttl=TTL,
                                 idle_ttl=IDLE_TTL, expected_sessions=expected or n, **FILL).open()
    store.train_dictionary([login_session(profile, i)[1] for i in range(TRAIN_N)])
    items = [login_session(profile, i) for i in range(n)]
    tokens = store.create_each(items, batch=1000)
    SESSION_STORES.append(store)
    return store, tokens, [data for _, data in items]


def plain_sessions(plain: redis.Redis, prefix: str, datas: list[dict[str, Any]]) -> list[str]:
    keys = [f"{prefix}:{secrets.token_urlsafe(32)}" for _ in datas]
    pipe = plain.pipeline(transaction=False)
    for key, data in zip(keys, datas):
        pipe.set(key, json.dumps(data), ex=TTL)
    pipe.execute()
    return keys


def build_cases(url: str, binary: Any, ops: list[str], n_sessions: int, total_calls: int,
                loop: asyncio.AbstractEventLoop | None = None) -> tuple[list[Case], dict[str, Any]]:
    """Every case of `ops` with its data loaded (see the module docstring); inputs cycle
    through stored items by a fixed shuffled order, new items are made for every call."""
    plain = redis.Redis.from_url(url)  # its own connection; redis-py with hiredis when installed
    client = redis.Redis.from_url(url)
    rnd = random.Random(22)
    cases: list[Case] = []
    facts: dict[str, Any] = {}
    has_bf = "bf" in binary.modules
    want = set(ops)

    def order(n: int) -> list[int]:
        idx = list(range(n))
        rnd.shuffle(idx)
        return idx

    if want & {"session_get", "session_touch", "session_apply", "session_create"}:
        store, tokens, datas = sessions_store(url, "inl", "P1", n_sessions)
        keys = plain_sessions(plain, "plain:inl", datas)
        st = store.stats()
        facts.update(inline_profile="P1", inline_split_sessions=st.get("split_sessions"),
                     layout=st.get("layout"), partitions=st.get("partitions"))
        pick = order(n_sessions)
        tok = [tokens[pick[i % n_sessions]] for i in range(total_calls)]
        key = [keys[pick[i % n_sessions]] for i in range(total_calls)]
        if "session_get" in want:
            cases.append(Case("session_get", "inline", Side("densekv", lambda i: store.get(tok[i])),
                              Side("plain", lambda i: json.loads(plain.get(key[i]))),
                              "P1 session: store.get / GET + json.loads"))
            for profile in ("P2", "P3"):  # the first that stats() reports split
                s2, t2, d2 = sessions_store(url, f"spl{profile}", profile, n_sessions)
                split = s2.stats().get("split_sessions") or 0
                facts[f"{profile}_split_sessions"] = split
                if split > n_sessions // 2:
                    k2, p2 = plain_sessions(plain, f"plain:spl{profile}", d2), order(n_sessions)
                    stok = [t2[p2[i % n_sessions]] for i in range(total_calls)]
                    skey = [k2[p2[i % n_sessions]] for i in range(total_calls)]
                    facts["split_profile"] = profile
                    cases.append(Case("session_get", "split",
                                      Side("densekv", lambda i, s2=s2, stok=stok: s2.get(stok[i])),
                                      Side("plain", lambda i, k=skey: json.loads(plain.get(k[i]))),
                                      f"{profile} session (split): store.get / GET + json.loads"))
                    break
        if "session_touch" in want:
            cases.append(Case("session_touch", "idle_ttl",
                              Side("densekv", lambda i: store.touch(tok[i])),
                              Side("plain", lambda i: plain.expire(key[i], IDLE_TTL)),
                              f"store.touch (idle_ttl {IDLE_TTL}) / EXPIRE key {IDLE_TTL}"))
        if "session_apply" in want:
            # a new _auth_user_hash, as Django's update_session_auth_hash writes: the session
            # keeps its size and stays inline (any added key splits a P1 session)
            hashes = [rnd.randbytes(32).hex() for _ in range(total_calls)]

            def change(i: int) -> dict[str, Any]:
                return {"_auth_user_hash": hashes[i]}
            reads: dict[int, Any] = {}
            plain_reads: dict[int, dict[str, Any]] = {}

            def read_densekv(lo: int, hi: int) -> None:
                reads.clear()
                reads.update((i, store.get(tok[i])) for i in range(lo, hi))

            def read_plain(lo: int, hi: int) -> None:
                plain_reads.clear()
                plain_reads.update((i, json.loads(plain.get(key[i]))) for i in range(lo, hi))

            def plain_apply(i: int) -> Any:
                data = plain_reads[i]
                data["_auth_user_hash"] = hashes[i]
                return plain.set(key[i], json.dumps(data), ex=TTL)

            def apply_read(i: int) -> Any:
                return store.apply(tok[i], change(i), read=reads[i])

            cases.append(Case("session_apply", "read", Side("densekv", apply_read, read_densekv),
                              Side("plain", plain_apply, read_plain),
                              "one key, written against the session get() returned (read "
                              "before the turn) / the dict json.loads gave, updated, SET EX"))
            cases.append(Case("session_apply", "no_read",
                              Side("densekv", lambda i: store.apply(tok[i], change(i))),
                              Side("plain", plain_apply, read_plain),
                              "one key, store.apply reads the session itself / as for read"))
        if "session_create" in want:
            new = [session("P1", n_sessions + i) for i in range(2 * total_calls)]  # both sides' own

            def plain_create(i: int) -> Any:
                data = new[total_calls + i][1]
                key = f"plain:new:{secrets.token_urlsafe(32)}"
                return plain.set(key, json.dumps(data), nx=True, ex=TTL)

            # a store of its own, sized for what it will hold: the creates do not grow the
            # other cases' partitions past their listpack limits (nor this one's)
            made, _, _ = sessions_store(url, "crt", "P1", n_sessions, n_sessions + total_calls)
            cases.append(Case("session_create", "P1",
                              Side("densekv", lambda i: made.create(*new[i])),
                              Side("plain", plain_create),
                              "a new P1 session: store.create / a token and SET NX EX of its JSON"))
    if want & {"set_add", "set_contains"}:
        cs = densekv.CompactSet(client, "set", expected=ITEMS + total_calls)  # it grows by the adds
        stored = [rnd.randbytes(16) for _ in range(ITEMS)]
        cs.add_many(stored)
        plain.sadd("pset", *stored)
        fresh = [rnd.randbytes(16) for _ in range(2 * total_calls)]
        present = [stored[i % ITEMS] for i in order(ITEMS)] * (total_calls // ITEMS + 1)
        facts.update(set_layout=cs.layout, set_partitions=cs.partitions)
        cases.append(Case("set_add", "new", Side("densekv", lambda i: cs.add(fresh[i])),
                          Side("plain", lambda i: plain.sadd("pset", fresh[total_calls + i])),
                          "16 new bytes: CompactSet.add / SADD"))
        cases.append(Case("set_contains", "present",
                          Side("densekv", lambda i: cs.contains(present[i])),
                          Side("plain", lambda i: plain.sismember("pset", present[i])),
                          "a stored 16-byte item: CompactSet.contains / SISMEMBER"))
    if want & {"map_get", "map_set"}:
        cm = CompactMap(client, "map", expected=ITEMS)
        mkeys = [f"user:{rnd.randrange(10**9)}" for _ in range(ITEMS)]
        values = [secrets.token_hex(10) for _ in range(ITEMS)]
        with cm.batch() as b:
            for k, v in zip(mkeys, values):
                b.set(k, v)
        pipe = plain.pipeline(transaction=False)
        for k, v in zip(mkeys, values):
            pipe.set(f"pm:{k}", v)
        pipe.execute()
        mpick = [mkeys[i % ITEMS] for i in order(ITEMS)] * (total_calls // ITEMS + 1)
        newv = [secrets.token_hex(10) for _ in range(total_calls)]
        facts.update(map_explain={k: v for k, v in cm.explain().items()
                                  if isinstance(v, (int, str, float))})
        cases.append(Case("map_get", "present", Side("densekv", lambda i: cm.get(mpick[i])),
                          Side("plain", lambda i: plain.get(f"pm:{mpick[i]}")),
                          "a stored 20-char str: CompactMap.get / GET"))
        cases.append(Case("map_set", "overwrite",
                          Side("densekv", lambda i: cm.set(mpick[i], newv[i])),
                          Side("plain", lambda i: plain.set(f"pm:{mpick[i]}", newv[i])),
                          "a new 20-char str for a stored key: CompactMap.set / SET"))
    if want & {"bloom_add", "bloom_contains"}:
        bf = BloomFilter(client, "bf", capacity=BLOOM_CAPACITY, error_rate=0.01)
        stored = [rnd.randbytes(16) for _ in range(ITEMS)]
        bf.add_many(stored)
        if has_bf:
            plain.execute_command("BF.RESERVE", "pbf", 0.01, BLOOM_CAPACITY)
            plain.execute_command("BF.MADD", "pbf", *stored)
        fresh = [rnd.randbytes(16) for _ in range(2 * total_calls)]
        present = [stored[i % ITEMS] for i in order(ITEMS)] * (total_calls // ITEMS + 1)
        note = "" if has_bf else " (no RedisBloom on this server: densekv only)"
        bf_add = Side("plain", lambda i: plain.execute_command("BF.ADD", "pbf",
                                                                fresh[total_calls + i]))
        bf_has = Side("plain", lambda i: plain.execute_command("BF.EXISTS", "pbf", present[i]))
        cases.append(Case("bloom_add", "new", Side("densekv", lambda i: bf.add(fresh[i])),
                          bf_add if has_bf else None,
                          "module-free BloomFilter.add / BF.ADD" + note))
        cases.append(Case("bloom_contains", "present",
                          Side("densekv", lambda i: bf.contains(present[i])),
                          bf_has if has_bf else None,
                          "module-free BloomFilter.contains / BF.EXISTS" + note))
    if want & {"login_get", "login_touch", "login_rmw", *ASYNC_LOGIN_OPS}:
        for prof in LOGIN_PROFILES:
            cases += login_cases(url, plain, prof, n_sessions, total_calls, order, want, facts, loop)
    cases = [c for c in cases if c.op in want]
    return cases, facts


def login_cases(url: str, plain: redis.Redis, prof: str, n_sessions: int, total_calls: int,
                order: Callable[[int], list[int]], want: set[str], facts: dict[str, Any],
                loop: asyncio.AbstractEventLoop | None = None) -> list[Case]:
    """Issue 30's per-call cases on a store of login sessions of `prof`: get / GET +
    json.loads, touch / EXPIRE, and a read-modify-write of one small key as the web
    backends do it (get, then apply(read=)) / GET + json.loads + SET EX, both timed whole;
    the alogin_* ops the same with AsyncSessionStore and redis.asyncio on `loop`."""
    store, tokens, datas = sessions_store(url, f"lg{prof}", prof, n_sessions)
    keys = plain_sessions(plain, f"plain:lg{prof}", datas)
    st = store.stats()
    facts[f"{prof}_split_sessions"] = st.get("split_sessions")
    facts[f"{prof}_out_of_line_sessions"] = st.get("out_of_line_sessions")
    pick = order(n_sessions)
    tok = [tokens[pick[i % n_sessions]] for i in range(total_calls)]
    key = [keys[pick[i % n_sessions]] for i in range(total_calls)]
    out = []
    if "login_get" in want:
        out.append(Case("login_get", prof, Side("densekv", lambda i: store.get(tok[i])),
                        Side("plain", lambda i: json.loads(plain.get(key[i]))),
                        f"{prof} session: store.get / GET + json.loads"))
    if "login_touch" in want:
        out.append(Case("login_touch", prof, Side("densekv", lambda i: store.touch(tok[i])),
                        Side("plain", lambda i: plain.expire(key[i], IDLE_TTL)),
                        f"{prof} session: store.touch (idle_ttl {IDLE_TTL}) / EXPIRE"))
    if "login_rmw" in want:
        def rmw(i: int) -> Any:
            return store.apply(tok[i], {"n": i % 100}, read=store.get(tok[i]))

        def plain_rmw(i: int) -> Any:
            data = json.loads(plain.get(key[i]))
            data["n"] = i % 100
            return plain.set(key[i], json.dumps(data), ex=TTL)

        out.append(Case("login_rmw", prof, Side("densekv", rmw), Side("plain", plain_rmw),
                        f"{prof} session, one small key: store.get + store.apply(read=) / GET + "
                        "json.loads + SET EX"))
    if want & set(ASYNC_LOGIN_OPS):
        assert loop is not None
        out += async_login_cases(url, loop, f"lg{prof}", prof, tok, key, want)
    return out


def async_login_cases(url: str, loop: asyncio.AbstractEventLoop, namespace: str, prof: str,
                      tok: list[str], key: list[str], want: set[str]) -> list[Case]:
    """The login cases with AsyncSessionStore (on the store login_cases filled) against
    redis.asyncio, each side with its own asyncio client, awaited on `loop`."""
    astore = densekv.AsyncSessionStore(redis.asyncio.Redis.from_url(url), namespace=namespace,
                                       ttl=TTL, idle_ttl=IDLE_TTL)
    aplain = redis.asyncio.Redis.from_url(url)
    loop.run_until_complete(astore.ready())  # adopts the stored metadata and dictionary
    out = []
    if "alogin_get" in want:
        async def plain_get(i: int) -> Any:
            return json.loads(await aplain.get(key[i]))

        out.append(Case("alogin_get", prof, async_side("densekv", loop, lambda i: astore.get(tok[i])),
                        async_side("plain", loop, plain_get),
                        f"{prof} session: await AsyncSessionStore.get / await GET + json.loads"))
    if "alogin_touch" in want:
        out.append(Case("alogin_touch", prof, async_side("densekv", loop, lambda i: astore.touch(tok[i])),
                        async_side("plain", loop, lambda i: aplain.expire(key[i], IDLE_TTL)),
                        f"{prof} session: await AsyncSessionStore.touch (idle_ttl {IDLE_TTL}) / "
                        "await EXPIRE"))
    if "alogin_rmw" in want:
        async def rmw(i: int) -> Any:
            return await astore.apply(tok[i], {"n": i % 100}, read=await astore.get(tok[i]))

        async def plain_rmw(i: int) -> Any:
            data = json.loads(await aplain.get(key[i]))
            data["n"] = i % 100
            return await aplain.set(key[i], json.dumps(data), ex=TTL)

        out.append(Case("alogin_rmw", prof, async_side("densekv", loop, rmw), async_side("plain", loop, plain_rmw),
                        f"{prof} session, one small key: await get + await apply(read=) / await GET + "
                        "json.loads + await SET EX"))
    return out


# -- the run --------------------------------------------------------------------------------------
def measure(server: str, ops: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    binary = find_servers()[server]
    total = args.probe + 2 + args.rounds * args.calls  # inputs: probe, warm-up, rounds
    t0 = time.perf_counter()
    loop = asyncio.new_event_loop()  # the asyncio sides' (alogin_*)
    with ServerProcess(binary, options={"slowlog-log-slower-than": "-1"}) as proc:
        if args.pin:  # the server on one core, this client on the other
            assert proc.proc is not None
            os.sched_setaffinity(proc.proc.pid, {args.pin[1]})
            os.sched_setaffinity(0, {args.pin[0]})
        stats_client = proc.client()
        SESSION_STORES.clear()
        cases, facts = build_cases(proc.url, binary, ops, args.sessions, total, loop)
        if args.observe:
            cases = observed_cases(cases, args.observe)
        info = stats_client.info("server")
        version = str(info.get("valkey_version") or info["redis_version"])
        setup_s = time.perf_counter() - t0
        records = []
        for case in cases:
            sides = [s for s in (case.densekv, case.plain) if s is not None]
            for side in sides:  # warm-up: scripts loaded, first use paid
                if side.prepare:
                    side.prepare(0, 2)
                side.call(0), side.call(1)
            for side in sides:
                probe(stats_client, side, 2, args.probe)
            start = 2 + args.probe
            for r in range(args.rounds):
                for side in sides if r % 2 == 0 else sides[::-1]:
                    turn(stats_client, side, start, args.calls)
                start += args.calls
            rec = record(case, server, version, facts, args)
            records.append(observed_record(rec, case, args.observe) if args.observe else rec)
        stats_client.close()
    loop.close()
    for rec in records:
        rec["server_setup_s"] = round(setup_s, 1)
    return records


def metrics_observer(kind: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """(attach, detach) of session metrics of `kind` to every store of SESSION_STORES."""
    if kind == "prometheus":
        import prometheus_client

        from densekv.integrations.prometheus import SessionMetrics

        metrics: Any = SessionMetrics(prometheus_client.CollectorRegistry())
    else:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        from densekv.integrations.otel import SessionMetrics as OtelMetrics

        metrics = OtelMetrics(MeterProvider(metric_readers=[InMemoryMetricReader()]),
                              histograms=kind != "otel-no-histograms")

    def attach() -> None:
        for store in SESSION_STORES:
            if store not in [t.store for t in metrics.tallies]:
                metrics.observe(store)

    def detach() -> None:
        for store in SESSION_STORES:
            metrics.unobserve(store)
    return attach, detach


def observed_cases(cases: list[Case], kind: str) -> list[Case]:
    """--observe: each session case as two sides of densekv itself, observed and bare."""
    attach, detach = metrics_observer(kind)

    def with_state(state: Callable[[], None], prepare: Callable[[int, int], None] | None
                   ) -> Callable[[int, int], None]:
        def run(lo: int, hi: int) -> None:
            state()
            if prepare is not None:
                prepare(lo, hi)
        return run

    out = []
    for case in cases:
        if case.op not in OBSERVED_OPS:
            continue
        d = case.densekv
        out.append(Case(case.op, case.variant,
                        Side("observed", d.call, with_state(attach, d.prepare)),
                        Side("bare", d.call, with_state(detach, d.prepare)),
                        f"{case.what.split(' / ')[0]}, with {kind} session metrics / without"))
    return out


def observed_record(rec: dict[str, Any], case: Case, kind: str) -> dict[str, Any]:
    """A record of --observe: observed / bare, the per-round ratios, the 5% bound."""
    o, b = case.densekv, case.plain
    assert b is not None
    rounds = [x / y for x, y in zip(o.cpu_us, b.cpu_us) if y]
    rec.update(benchmark="hot_path_observed", observer=kind, client_target=OBSERVE_TARGET,
               client_ok=rec["client_ratio"] is not None and rec["client_ratio"] <= OBSERVE_TARGET,
               client_ratio_rounds=[round(r, 3) for r in rounds],
               client_ratio_spread=[round(min(rounds), 3), round(max(rounds), 3)] if rounds else None,
               overhead_us=round(median(o.cpu_us) - median(b.cpu_us), 2),
               server_target=None, server_ok=None)
    for key in ("server_cpu_target", "server_cpu_ok"):
        rec.pop(key, None)
    return rec


def record(case: Case, server: str, version: str, facts: dict[str, Any],
           args: argparse.Namespace) -> dict[str, Any]:
    d, p = case.densekv, case.plain
    client_target, server_target = TARGETS[(case.op, case.variant)]  # --observe: observed_record's
    rec: dict[str, Any] = {
        "benchmark": "hot_path", "commit": COMMIT, "server": server, "version": version,
        "op": case.op, "variant": case.variant, "what": case.what, "rounds": args.rounds,
        "calls_per_turn": args.calls, "sessions": args.sessions, "table_row": ["op", "variant"],
        "fill": ("none" if FILL["fill"] is None else FILL["fill"]) if FILL else "default",
    }

    def med(xs: list[float]) -> float:
        return round(median(xs), 2)

    for side in (d, p):
        if side is None:
            continue
        rec.update({f"{side.name}_client_us": med(side.cpu_us),
                    f"{side.name}_server_us": med(side.server_us),
                    f"{side.name}_server_cpu_us": med(side.server_cpu_us),
                    f"{side.name}_client_sys_us": med(side.sys_us),
                    f"{side.name}_client_sleeps_per_call": round(median(side.sleeps), 3),
                    f"{side.name}_commands": side.commands, f"{side.name}_nested": side.nested})
    if p is not None:
        for what, a, b, target in (("client", d.cpu_us, p.cpu_us, client_target),
                                   ("server", d.server_us, p.server_us, server_target)):
            ratio = round(median(a) / median(b), 2) if median(b) else None
            rec[f"{what}_ratio"] = ratio
            rec[f"{what}_ratio_paired"] = round(median([x / y for x, y in zip(a, b) if y]), 2)
            rec[f"{what}_target"] = target
            rec[f"{what}_ok"] = None if target is None or ratio is None else ratio <= target
        rec["server_cpu_ratio"] = round(median(d.server_cpu_us) / median(p.server_cpu_us), 2) \
            if median(p.server_cpu_us) else None
        rec["server_cpu_ratio_paired"] = round(median([x / y for x, y in zip(d.server_cpu_us, p.server_cpu_us)
                                                       if y]), 2) if any(p.server_cpu_us) else None
        cpu_target = SERVER_CPU_TARGETS.get(case.op)
        if cpu_target is not None:
            rec["server_cpu_target"] = cpu_target
            rec["server_cpu_ok"] = None if rec["server_cpu_ratio"] is None else rec["server_cpu_ratio"] <= cpu_target
    else:
        rec.update(client_ratio=None, server_ratio=None)
    for side in (d, p):
        if side is not None:
            rec[f"{side.name}_client_us_rounds"] = [round(x, 1) for x in side.cpu_us]
            rec[f"{side.name}_server_us_rounds"] = [round(x, 2) for x in side.server_us]
    rec.update(facts)
    rec["load_average_1m"] = round(os.getloadavg()[0], 2)
    rec["pinned"] = list(args.pin) if args.pin else None
    return rec


def profile(server: str, args: argparse.Namespace) -> None:
    """cProfile of session get (inline, split), apply (read / no_read) and create, --calls calls each, printed
    as tables per call: densekv's own functions, top 15 by cumulative and by self time, and
    the top 8 others by self time (the I/O and the parser under them). The profiler's clock
    is the wall clock (a CPU clock costs a system call per event, which would swamp the
    figures): a function's time includes any wait under it, so recv_into's self time (and
    the cumulative time of everything above it) holds the wait for the server's reply. The
    profiler's own cost inflates every figure, more so for small functions: compare rows
    with each other, not with the timings of the records."""
    binary = find_servers()[server]
    n = args.calls
    home = str(Path(densekv.__file__).parent.parent) + "/"
    loop = asyncio.new_event_loop()
    with ServerProcess(binary) as proc:
        cases, _ = build_cases(proc.url, binary, args.ops.split(",") if args.ops else
                               ["session_get", "session_apply", "session_create"], args.sessions, n + 2, loop)
        for case in cases:
            side = case.densekv
            if side.prepare:
                side.prepare(0, n + 2)
            side.call(0), side.call(1)
            gc.collect()
            prof = cProfile.Profile()  # wall clock: process_time's syscall per event would swamp it
            if side.acall is not None and side.loop is not None:
                side.loop.run_until_complete(aprofiled(prof, side.acall, n))
            else:
                prof.enable()
                for i in range(2, n + 2):
                    side.call(i)
                prof.disable()
            raw = pstats.Stats(prof).stats  # type: ignore[attr-defined]  # (file, line, name) -> (cc, nc, tt, ct, callers)
            total_calls = sum(nc for _, nc, _, _, _ in raw.values())
            total_s = sum(tt for _, _, tt, _, _ in raw.values())
            rows = []
            for (file, line, name), (_, nc, tt, ct, _) in raw.items():
                ours = file.startswith(home + "densekv/")
                where = f"{file.removeprefix(home)}:{line}({name})" if file != "~" else name
                rows.append((ours, where, nc / n, 1e6 * tt / n, 1e6 * ct / n))
            print(f"## {server} {case.op} {case.variant} (densekv), cProfile over {n} calls: "
                  f"{total_calls / n:.0f} Python function calls and {1e6 * total_s / n:.1f} us "
                  "per call "
                  "(profiled, wall clock, the wait for the reply included)\n")
            for title, pick, key, count in (
                    ("densekv's own, by cumulative time", True, 4, 15),
                    ("densekv's own, by self time", True, 3, 15),
                    ("everything else, by self time", False, 3, 8)):
                print(f"### {title}\n\n| function | calls/op | self us/op | cumulative us/op |\n"
                      "|---|---|---|---|")
                chosen = sorted((r for r in rows if r[0] == pick), key=lambda r: -float(r[key]))
                for _, where, calls, tt, ct in chosen[:count]:
                    print(f"| {where} | {calls:.2f} | {tt:.2f} | {ct:.2f} |")
                print()
            sys.stdout.flush()
    loop.close()


async def aprofiled(prof: cProfile.Profile, acall: ACall, n: int) -> None:
    """`n` awaited calls (inputs 2..n+1) under `prof`, inside the loop."""
    prof.enable()
    for i in range(2, n + 2):
        await acall(i)
    prof.disable()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="4 rounds of 200 calls (under a minute)")
    ap.add_argument("--servers", default="valkey-9.1,redis-7.0")
    ap.add_argument("--bloom-server", default="redis-7.4",
                    help="also measure the Bloom operations here ('': no)")
    ap.add_argument("--ops", default=None, help=f"some of {','.join(OPS)} (default: all; with "
                    "--profile: session_get,session_apply,session_create, or these)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--calls", type=int, default=None, help="calls per side per round")
    ap.add_argument("--probe", type=int, default=200,
                    help="calls per side counting the commands sent")
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--fill", default="default", metavar="F|none",
                    help="the session stores' fill= (mean sessions per partition at most; 'none': "
                         "the densest the listpack limit allows; default: the store's default)")
    ap.add_argument("--pin", type=lambda v: tuple(int(x) for x in v.split(",")), default=None,
                    metavar="CLIENT,SERVER", help="pin this process and the server to these CPUs (e.g. 0,1)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-save", action="store_true", help="print the records only")
    ap.add_argument("--profile", action="store_true", help="cProfile session get, apply and create instead")
    ap.add_argument("--observe", choices=("prometheus", "otel", "otel-no-histograms"), default=None,
                    help="session get / touch / apply with these session metrics against without them")
    args = ap.parse_args()
    if args.fill != "default":
        FILL["fill"] = None if args.fill == "none" else int(args.fill)
    args.rounds = args.rounds or (4 if args.quick else 16)
    args.calls = args.calls or (200 if args.quick else 1000)
    servers = [s for s in args.servers.split(",") if s]
    if args.observe:
        args.bloom_server = ""  # the session operations only
    missing = [s for s in (*servers, args.bloom_server) if s and s not in find_servers()]
    if missing:
        sys.exit(f"servers not on this machine: {', '.join(missing)} (scripts/get-servers)")
    if args.profile:
        for server in servers:
            profile(server, args)
        return
    ops = [o for o in (args.ops or ",".join(OPS)).split(",") if o]
    if args.observe:
        ops = [o for o in ops if o in OBSERVED_OPS] or list(OBSERVED_OPS)
    unknown = set(ops) - set(OPS)
    if unknown:
        sys.exit(f"unknown ops: {', '.join(sorted(unknown))} (one of {', '.join(OPS)})")
    plan = [(s, ops) for s in servers]
    bloom_ops = [o for o in ops if o.startswith("bloom_")]
    if args.bloom_server and bloom_ops and args.bloom_server not in servers:
        plan.append((args.bloom_server, bloom_ops))
    started = time.perf_counter()
    for server, server_ops in plan:
        for rec in measure(server, server_ops, args):
            emit(rec, None if args.no_save else args.out)
    print(f"hot_path: {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
