"""Server time of each Lua script a single-item operation runs (issue 22, section 1: "Lua
scripts trimmed to what each operation needs"), beside the plain command a team would send
instead, and the floor every script call stands on.

benchmarks/hot_path.py times whole operations through the client; this one times the
scripts alone, on the server, with the arguments densekv really sends: each case's EVALSHA
calls are captured from the library (densekv.executors.roundtrip wrapped: real calls where the
replay needs the state they leave, dry ones - recorded, not sent - where every call needs a
new item) and then sent as raw EVALSHA by redis-py, so only the script differs between
sides. Per server (valkey-9.1 and redis-7.0 by default, each a fresh densekv.embedded):

  case                    script           data (--sessions each)            plain side
  session_touch           hrec_touch       dense P1 sessions                 EXPIRE
  session_apply inline    hrec_update      dense P1 (a new _auth_user_hash)  SET EX of its JSON
  session_apply split     hrec_update      dense P2 (split: a continuation)  SET EX of its JSON
  key_touch json|msgpack|hash  key_touch   json / packed / hash layouts      EXPIRE
  kv_cas json             kv_cas           json layout (apply)               SET EX of its JSON
  hkey_update hash        hkey_update      hash layout (apply)               SET EX of its JSON
  set_family_add new      set_family_add   SetFamily, 1000 parents of 10     SADD
  map_setnx new           map_setnx        CompactMap of 10k, a new key      SET NX
  map_incr present        map_incr         CompactMap of 10k ints            INCRBY
  bloom_add new           bloom_add        module-free BloomFilter of 10k    BF.ADD (RedisBloom only)
  bloom_has present       bloom_has        the same filter, stored items     BF.EXISTS (idem)
  floor partition         `return 0`, HGET, HGET + HSET (the value back) on the touch's
                          partitions and fields; HGET + HSET on the same     HGET / HSET, and HGET
                          records in hashes of 8 fields (call2_small)        there (hget_small)

Replays stay valid: a touch's `now` argument advances one second per pass over the
sessions (every call writes, as a first touch in a new second does); an apply alternates,
per session, two captured updates that turn the record into each other (compare-and-set
included; every reply is checked: `unexpected_replies` must be 0). A captured pair is
kept only if it replays (1, 1) once before the rounds: ~0.3% of P2 sessions do not (their
payload for the same data comes out one byte different on the later apply: the codec's
choice over a sequence of writes) and are left out (said on stderr).

Timing: per case, --rounds rounds of --calls calls per side, the sides taking turns in
rotating order; server time per call from INFO commandstats deltas around the turn: the
EVALSHA's usec for a script (it includes what its redis.call ran; the nested commands are
booked again under their own names and not added), the command's own for a plain side.
Two modes: `single` (one call per round trip, as real use) and `pipelined` (--batch calls
per round trip: less cache disturbance between calls, the floor of the same work).
`--baseline REV` adds, per script case, the script as it was at git revision REV (loaded
by SCRIPT LOAD, the same arguments): `baseline_us`, and `vs_baseline` = current / baseline
of the medians (paired: `vs_baseline_paired`, the median of per-round ratios).
Records: per (server, case, variant, mode) `script_us`, `plain_us`, `ratio` (script /
plain), medians over the rounds, with the per-round figures; the floor record adds
`script_call_us` (EVALSHA of return 0), `hget_in_script_us` / `hset_in_script_us` (what one
redis.call of each adds) and `partition_scan_us` (HGET on the partition less HGET on an
8-field hash). A run with the defaults (8 rounds of 400 calls, batch 50, --baseline
included) takes ~40 s on the 2-core dev machine, the setup of 10k sessions per store
included.

Usage: python benchmarks/lua_scripts.py [--servers valkey-9.1,redis-7.0] [--bloom-server
       redis-7.4 | ''] [--cases session_touch,...] [--rounds 8] [--calls 400] [--batch 50]
       [--sessions 10000] [--baseline REV] [--out FILE | --no-save]
Tables: ... | python benchmarks/markdown_table.py --field ratio
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from hashlib import sha1
from pathlib import Path
from statistics import median
from typing import Any

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code
import redis
from records import emit  # benchmarks/records.py: print and append each record

import densekv
import densekv.executors
from densekv.lua import script
from densekv.maps import CompactMap
from densekv.sets.bloom import BloomFilter
from densekv.sets.family import SetFamily
from densekv.tools.lab.observe import HOUSEKEEPING, WRAPPERS
from densekv.tools.lab.session_profiles import session
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.embedded import embedded

RESULTS = Path(__file__).parent / "results" / "lua_scripts.jsonl"
COMMIT = gitstamp.commit()
TTL = 14 * 86_400
IDLE_TTL = 2 * 86_400
TRAIN_N = 2000
ITEMS = 10_000
CASES = ("session_touch", "session_apply", "key_touch", "kv_cas", "hkey_update", "set_family_add",
         "map_setnx", "map_incr", "bloom_add", "bloom_has", "floor")
SCRIPTS = ("hrec_touch", "hrec_update", "key_touch", "kv_cas", "hkey_update", "set_family_add",
           "map_setnx", "map_incr", "bloom_add", "bloom_has")
FLOOR = {  # the floor rows: what any script call costs, by the redis.calls it makes
    "return0": b"return 0",
    "call1": b"return redis.call('HGET', KEYS[1], ARGV[1])",
    "call2": b"local v = redis.call('HGET', KEYS[1], ARGV[1])\n"
             b"redis.call('HSET', KEYS[1], ARGV[1], v)\nreturn 1",
}

Args = tuple[Any, ...]  # numkeys, keys..., argv... (EVALSHA after the sha)


class _Dry(BaseException):
    """Raised in place of sending: the captured commands were not run."""


@contextmanager
def capture(dry: bool) -> Iterator[list[Args]]:
    """The EVALSHA calls densekv sends in the block, as (sha, numkeys, keys..., argv...);
    dry: recorded and not sent (the operation is abandoned by _Dry)."""
    got: list[Args] = []
    real = densekv.executors.roundtrip

    def wrapped(pool: Any, commands: list[tuple[Any, ...]], *rest: Any) -> list[Any]:
        got.extend(tuple(c[1:]) for c in commands if str(c[0]).upper() == "EVALSHA")
        if dry:
            raise _Dry
        return real(pool, commands, *rest)

    densekv.executors.roundtrip = wrapped  # type: ignore[assignment]
    try:
        yield got
    finally:
        densekv.executors.roundtrip = real  # type: ignore[assignment]


def dry_call(fn: Callable[[], Any]) -> Args:
    """The (last) EVALSHA `fn` would send, not sent."""
    with capture(True) as got:
        try:
            fn()
        except _Dry:
            pass
    assert got, "the operation sent no script"
    return got[-1]


def real_call(fn: Callable[[], Any]) -> Args:
    """`fn` run; the (last) EVALSHA it sent."""
    with capture(False) as got:
        fn()
    assert got, "the operation sent no script"
    return got[-1]


def with_arg(a: Args, argv_index: int, value: Any) -> Args:
    """`a` (numkeys, keys..., argv...) with ARGV[argv_index] replaced."""
    at = int(a[0]) + argv_index
    return (*a[:at], value, *a[at + 1:])


@dataclass
class Side:
    """One thing sent in turns: `make(j)` is its j-th command (`j` from `counter`, shared by
    the sides that write the same state in turn); `ok(reply)` checks a reply."""

    label: str
    make: Callable[[int], tuple[Any, ...]]
    counter: list[int]
    ok: Callable[[Any], bool] = lambda r: True
    script: str | None = None  # the EVALSHA's script (its usec counted), None: a plain command
    us: dict[str, list[float]] = field(default_factory=dict)  # mode -> per-call usec per round
    bad: int = 0

    def next(self) -> tuple[Any, ...]:
        j = self.counter[0]
        self.counter[0] += 1
        return self.make(j)


@dataclass
class Case:
    name: str
    variant: str
    script: str | None
    sides: list[Side]
    what: str


def evalsha(sha: str, a: Args) -> tuple[Any, ...]:
    return ("EVALSHA", sha, *a)


def script_sides(name: str, shas: dict[str, str], make: Callable[[int], Args],
                 ok: Callable[[Any], bool]) -> list[Side]:
    """The current script and (with --baseline) the old one, on one shared sequence."""
    counter = [0]
    sides = [Side("script", lambda j: evalsha(shas[name], make(j)), counter, ok, name)]
    if f"baseline:{name}" in shas:
        sides.append(Side("baseline", lambda j: evalsha(shas[f"baseline:{name}"], make(j)),
                          counter, ok, name))
    return sides


def plain_side(make: Callable[[int], tuple[Any, ...]]) -> Side:
    return Side("plain", make, [0])


def is1(r: Any) -> bool:
    return r == 1


def alternate(pairs: list[tuple[Args, Args]]) -> Callable[[int], Args]:
    """Per item, its two captured updates in turn (each turns the record into the other's
    starting point): pass p over the items sends the first if p is even."""
    k = len(pairs)
    return lambda j: pairs[j % k][(j // k) % 2]


def apply_pairs(r: redis.Redis, store: Any, tokens: list[str], key: str,
                rnd: random.Random) -> list[tuple[Args, Args]]:
    """Per token: apply(key=a) run, then apply(key=b) and apply(key=a) run and captured:
    b's update expects the record a left, a's the one b left. A pair is kept if sending
    both once more answers 1, 1 (the cycle holds)."""
    out = []
    for tok in tokens:
        a, b = rnd.randbytes(32).hex(), rnd.randbytes(32).hex()
        store.apply(tok, {key: a})
        first = real_call(lambda t=tok, v=b: store.apply(t, {key: v}))
        second = real_call(lambda t=tok, v=a: store.apply(t, {key: v}))
        if [r.execute_command("EVALSHA", *x) for x in (first, second)] == [1, 1]:
            out.append((first[1:], second[1:]))
    if len(out) < len(tokens):
        print(f"{store.layout} apply: {len(tokens) - len(out)} of {len(tokens)} captured update pairs "
              "did not replay (left out)", file=sys.stderr)
    return out


def touches(store: Any, tokens: list[str], now_at: int, n: int) -> Callable[[int], Args]:
    """The touch of tokens[j % n] at now = the capture's second + 1 + the pass over them."""
    caught = [dry_call(lambda t=t: store.touch(t))[1:] for t in tokens]
    now0 = int(time.time())
    return lambda j: with_arg(caught[j % n], now_at, now0 + 1 + j // n)


def build_cases(url: str, modules: tuple[str, ...], want: set[str], n: int, m: int,
                need: int, shas: dict[str, str]) -> list[Case]:
    """Every case of `want` with its data loaded (see the module docstring): n sessions or
    items, m of them captured where a capture runs the operation, `need` calls per side."""
    r = redis.Redis.from_url(url)
    plain = redis.Redis.from_url(url)
    rnd = random.Random(22)
    cases: list[Case] = []

    def order(k: int) -> list[int]:
        idx = list(range(k))
        rnd.shuffle(idx)
        return idx

    def plain_json(prefix: str, datas: list[dict[str, Any]], key: str) -> tuple[list[bytes], list[bytes]]:
        """Plain JSON strings of the sessions (SET EX), and two versions of each with `key`."""
        names = [f"{prefix}:{i}".encode() for i in range(len(datas))]
        pipe = plain.pipeline(transaction=False)
        for k, d in zip(names, datas):
            pipe.set(k, json.dumps(d), ex=TTL)
        pipe.execute()
        return names, [json.dumps({**d, key: rnd.randbytes(32).hex()}).encode() for d in datas]

    if want & {"session_touch", "session_apply", "floor"}:
        store = densekv.SessionStore(r, namespace="inl", ttl=TTL, idle_ttl=IDLE_TTL, expected_sessions=n)
        store.train_dictionary([session("P1", i)[1] for i in range(TRAIN_N)])
        items = [session("P1", i) for i in range(n)]
        tokens = store.create_each(items, batch=1000)
        pick = order(n)
        tok = [tokens[i] for i in pick]
        names, new = plain_json("plain:inl", [items[i][1] for i in pick], "_auth_user_hash")
        touch = touches(store, tok, 2, n)  # run after the applies (their records must stay as captured)
        if "session_apply" in want:
            pairs = apply_pairs(r, store, tok[:m], "_auth_user_hash", rnd)
            cases.append(Case("session_apply", "inline", "hrec_update",
                              [*script_sides("hrec_update", shas, alternate(pairs), is1),
                               plain_side(lambda j, names=names, new=new: ("SET", names[j % m], new[j % m], "EX", TTL))],
                              "store.apply(read=) of a new _auth_user_hash (P1, inline) / SET EX"))
            s2 = densekv.SessionStore(r, namespace="splP2", ttl=TTL, idle_ttl=IDLE_TTL, expected_sessions=n)
            s2.train_dictionary([session("P2", i)[1] for i in range(TRAIN_N)])
            items2 = [session("P2", i) for i in range(n)]
            t2 = s2.create_each(items2, batch=1000)
            st2 = s2.stats()
            split, outside = st2.get("split_sessions") or 0, st2.get("out_of_line_sessions") or 0
            names2, new2 = plain_json("plain:splP2", [d for _, d in items2[:m]], "_auth_user_hash")
            pairs2 = apply_pairs(r, s2, t2[:m], "_auth_user_hash", rnd)
            cases.append(Case("session_apply", "split", "hrec_update",
                              [*script_sides("hrec_update", shas, alternate(pairs2), is1),
                               plain_side(lambda j: ("SET", names2[j % m], new2[j % m], "EX", TTL))],
                              f"store.apply of a new _auth_user_hash (P2: of {n}, {split} split, {outside} out of "
                              "line: the old rest read for the compare-and-set) / SET EX"))
        if "session_touch" in want:
            cases.append(Case("session_touch", "idle_ttl", "hrec_touch",
                              [*script_sides("hrec_touch", shas, touch, lambda x: x > 1),
                               plain_side(lambda j, names=names: ("EXPIRE", names[j % n], IDLE_TTL))],
                              f"store.touch (P1, dense, idle_ttl {IDLE_TTL}) / EXPIRE"))
        if "floor" in want:
            where = [touch(j)[1:3] for j in range(m)]  # (partition, field)
            pipe = plain.pipeline(transaction=False)
            for k, f in where:
                pipe.hget(k, f)
            values = pipe.execute()
            pipe = plain.pipeline(transaction=False)
            for k in sorted({k for k, _ in where}):
                pipe.hlen(k)
            lens = pipe.execute()
            # the same records in hashes of 8 fields: the partition's listpack scan left out
            small = [(f"floor:small:{i // 8}".encode(), f) for i, (_, f) in enumerate(where)]
            pipe = plain.pipeline(transaction=False)
            for (k, f), v in zip(small, values):
                pipe.hset(k, f, v)
            pipe.execute()
            sides = [Side(name, lambda j, name=name: evalsha(shas[f"floor:{name}"], (1, *where[j % m])),
                          [0], script=f"floor:{name}") for name in FLOOR]
            sides += [Side("hget", lambda j: ("HGET", *where[j % m]), [0]),
                      Side("hset", lambda j: ("HSET", *where[j % m], values[j % m]), [0]),
                      Side("call2_small", lambda j: evalsha(shas["floor:call2"], (1, *small[j % m])), [0],
                           script="floor:call2"),
                      Side("hget_small", lambda j: ("HGET", *small[j % m]), [0])]
            cases.append(Case("floor", "partition", None, sides,
                              "EVALSHA of return 0, HGET, HGET + HSET (same value) / plain HGET, "
                              f"HSET, on the P1 partitions' fields (the {len(lens)} partitions hit hold "
                              f"{min(lens)}-{max(lens)} fields); *_small: the same records in hashes "
                              "of 8 fields"))
    for layout, kind in (("json", "json"), ("packed", "msgpack"), ("hash", "hash")):
        if not want & {"key_touch", "kv_cas", "hkey_update"}:
            break
        st = densekv.SessionStore(r, namespace=f"k{layout}", layout=layout, ttl=TTL, idle_ttl=IDLE_TTL,
                                  expected_sessions=n)
        items = [session("P1", i) for i in range(n)]
        tokens = st.create_each(items, batch=1000)
        tok = [tokens[i] for i in order(n)]
        names, new = plain_json(f"plain:k{layout}", [d for _, d in items[:m]], "_auth_user_hash")
        if "key_touch" in want:
            cases.append(Case("key_touch", kind, "key_touch",
                              [*script_sides("key_touch", shas, touches(st, tok, 1, n), lambda x: x > 1),
                               plain_side(lambda j, names=names: ("EXPIRE", names[j % m], IDLE_TTL))],
                              f"store.touch ({layout} layout) / EXPIRE"))
        apply_script = {"json": "kv_cas", "hash": "hkey_update"}.get(layout)
        if apply_script and apply_script in want:
            pairs = apply_pairs(r, st, tok[:m], "_auth_user_hash", rnd)
            cases.append(Case(apply_script, layout, apply_script,
                              [*script_sides(apply_script, shas, alternate(pairs), is1),
                               plain_side(lambda j, names=names, new=new: ("SET", names[j % m], new[j % m],
                                                                            "EX", TTL))],
                              f"store.apply of a new _auth_user_hash ({layout} layout) / SET EX"))
    if "set_family_add" in want:
        fam = SetFamily(r, "fam")
        parents = [f"job:{i}" for i in range(ITEMS // 10)]
        for p in parents:
            children = [rnd.randbytes(8).hex() for _ in range(10)]
            fam.add_many(p, children)
            plain.sadd(f"pfam:{p}", *children)
        fresh = [(parents[rnd.randrange(len(parents))], rnd.randbytes(8).hex()) for _ in range(2 * need)]
        caught = [dry_call(lambda p=p, c=c: fam.add(p, c))[1:] for p, c in fresh[:need]]
        cases.append(Case("set_family_add", "new", "set_family_add",
                          [*script_sides("set_family_add", shas, lambda j, caught=caught: caught[j], lambda x: True),
                           plain_side(lambda j, fresh=fresh: ("SADD", f"pfam:{fresh[need + j][0]}", fresh[need + j][1]))],
                          "SetFamily.add of a new child to one of 1000 parents of 10 / SADD"))
    if want & {"map_setnx", "map_incr"}:
        cm = CompactMap(r, "map", expected=ITEMS + need)
        mkeys = [f"user:{rnd.randrange(10**9)}" for _ in range(ITEMS)]
        with cm.batch() as b:
            for k in mkeys:
                b.set(k, rnd.randbytes(10).hex())
        if "map_setnx" in want:
            fresh_keys = [f"user:{rnd.randrange(10**9)}:n" for _ in range(2 * need)]
            value = rnd.randbytes(10).hex()
            caught = [dry_call(lambda k=k: cm.setnx(k, value))[1:] for k in fresh_keys[:need]]
            cases.append(Case("map_setnx", "new", "map_setnx",
                              [*script_sides("map_setnx", shas, lambda j, caught=caught: caught[j], is1),
                               plain_side(lambda j: ("SET", f"pm:{fresh_keys[need + j]}", value, "NX"))],
                              "CompactMap.setnx of a new key (20-char str) / SET NX"))
        if "map_incr" in want:
            ckeys = [f"count:{i}" for i in range(m)]
            with cm.batch() as b:
                for k in ckeys:
                    b.set(k, 0)
            plain.mset({f"pm:{k}": 0 for k in ckeys})
            caught = [real_call(lambda k=k: cm.incrby(k, 1))[1:] for k in ckeys]
            cases.append(Case("map_incr", "present", "map_incr",
                              [*script_sides("map_incr", shas, lambda j, caught=caught: caught[j % m], lambda x: True),
                               plain_side(lambda j: ("INCRBY", f"pm:{ckeys[j % m]}", 1))],
                              "CompactMap.incrby(key, 1) of a stored int / INCRBY"))
    if want & {"bloom_add", "bloom_has"}:
        bf = BloomFilter(r, "bf", capacity=100_000, error_rate=0.01)
        stored = [rnd.randbytes(16) for _ in range(ITEMS)]
        bf.add_many(stored)
        has_bf = "bf" in modules
        if has_bf:
            plain.execute_command("BF.RESERVE", "pbf", 0.01, 100_000)
            plain.execute_command("BF.MADD", "pbf", *stored)
        if "bloom_add" in want:
            fresh = [rnd.randbytes(16) for _ in range(2 * need)]
            caught = [dry_call(lambda x=x: bf.add(x))[1:] for x in fresh[:need]]
            cases.append(Case("bloom_add", "new", "bloom_add",
                              [*script_sides("bloom_add", shas, lambda j, caught=caught: caught[j], lambda x: True),
                               *([plain_side(lambda j, fresh=fresh: ("BF.ADD", "pbf", fresh[need + j]))] if has_bf else [])],
                              "module-free BloomFilter.add of a new item / BF.ADD (RedisBloom only)"))
        if "bloom_has" in want:
            caught = [real_call(lambda x=x: bf.contains(x))[1:] for x in stored[:m]]
            cases.append(Case("bloom_has", "present", "bloom_has",
                              [*script_sides("bloom_has", shas, lambda j: caught[j % m], lambda x: True),
                               *([plain_side(lambda j: ("BF.EXISTS", "pbf", stored[j % m]))] if has_bf else [])],
                              "module-free BloomFilter.contains of a stored item / BF.EXISTS (RedisBloom only)"))
    r.close()
    return [c for c in cases if c.name in want]


# -- timing -------------------------------------------------------------------------------------
Stats = dict[str, tuple[int, int]]


def snapshot(stats: redis.Redis) -> Stats:
    info = stats.execute_command("INFO", "commandstats")
    return {k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
            for k, v in info.items() if k.startswith("cmdstat_")}


def server_usec(before: Stats, after: Stats, side: Side) -> tuple[int, int]:
    """(calls, usec) of the side's top-level commands: the EVALSHA for a script (its nested
    commands are in its time), else every command but housekeeping and wrappers."""
    calls = usec = 0
    for name, (c, u) in after.items():
        c0, u0 = before.get(name, (0, 0))
        if c == c0 or name in HOUSEKEEPING or name.split("|")[0] in HOUSEKEEPING:
            continue
        if (name == "evalsha") == (side.script is not None) and (name == "evalsha" or name not in WRAPPERS):
            calls, usec = calls + c - c0, usec + u - u0
    return calls, usec


def turn(client: redis.Redis, stats: redis.Redis, side: Side, mode: str, calls: int, batch: int,
         keep: bool = True) -> None:
    cmds = [side.next() for _ in range(calls)]
    before = snapshot(stats)
    if mode == "single":
        replies = []
        for c in cmds:
            try:
                replies.append(client.execute_command(*c))
            except redis.ResponseError as exc:
                replies.append(exc)
    else:
        replies = []
        for lo in range(0, calls, batch):
            pipe = client.pipeline(transaction=False)
            for c in cmds[lo:lo + batch]:
                pipe.execute_command(*c)
            replies += pipe.execute(raise_on_error=False)
    after = snapshot(stats)
    bad = [x for x in replies if isinstance(x, Exception) or not side.ok(x)]
    if bad and not side.bad:
        print(f"{side.label} {side.script}: unexpected replies, e.g. {bad[:3]}", file=sys.stderr)
    side.bad += len(bad)
    _, usec = server_usec(before, after, side)
    if keep:
        side.us.setdefault(mode, []).append(usec / calls)


def measure(server: str, want: set[str], args: argparse.Namespace,
            baseline: dict[str, bytes]) -> list[dict[str, Any]]:
    binary = find_servers()[server]
    need = 2 * (2 if baseline else 1) * (args.rounds * args.calls + args.warmup) + 10  # per case's sequence
    t0 = time.perf_counter()
    with embedded(server) as srv:
        stats = redis.Redis.from_url(srv.url)
        client = redis.Redis.from_url(srv.url)
        version = str(stats.info("server").get("valkey_version") or stats.info("server")["redis_version"])
        shas: dict[str, str] = {}
        for name in SCRIPTS:
            src = script(name).source
            shas[name] = stats.script_load(src)
            assert shas[name] == script(name).sha
        for name, src in baseline.items():
            shas[f"baseline:{name}"] = stats.script_load(src)
            assert shas[f"baseline:{name}"] == sha1(src).hexdigest()
        for name, src in FLOOR.items():
            shas[f"floor:{name}"] = stats.script_load(src)
        cases = build_cases(srv.url, binary.modules, want, args.sessions, args.capture, need, shas)
        setup_s = time.perf_counter() - t0
        records = []
        for case in cases:
            for mode in ("single", "pipelined"):
                for side in case.sides:
                    turn(client, stats, side, mode, args.warmup, args.batch, keep=False)
                k = len(case.sides)
                for rnd in range(args.rounds):
                    for side in case.sides[rnd % k:] + case.sides[:rnd % k]:
                        turn(client, stats, side, mode, args.calls, args.batch)
                records.append(record(case, server, version, mode, args))
        client.close()
        stats.close()
    for rec in records:
        rec["server_setup_s"] = round(setup_s, 1)
    return records


def record(case: Case, server: str, version: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "benchmark": "lua_scripts", "commit": COMMIT, "server": server, "version": version,
        "case": case.name, "variant": case.variant, "mode": mode, "script": case.script,
        "what": case.what, "rounds": args.rounds, "calls_per_turn": args.calls,
        "batch": args.batch if mode == "pipelined" else 1, "sessions": args.sessions,
        "table_row": ["case", "variant", "mode"],
    }
    by = {s.label: s for s in case.sides}

    def med(label: str) -> float:
        return round(median(by[label].us[mode]), 2)

    for s in case.sides:
        key = {"script": "script_us", "plain": "plain_us", "baseline": "baseline_us"}.get(s.label, f"{s.label}_us")
        rec[key] = med(s.label)
    if "script" in by and "plain" in by:
        rec["ratio"] = round(med("script") / med("plain"), 2) if med("plain") else None
    if "baseline" in by:
        rec["vs_baseline"] = round(med("script") / med("baseline"), 3)
        rec["vs_baseline_paired"] = round(median(
            a / b for a, b in zip(by["script"].us[mode], by["baseline"].us[mode]) if b), 3)
        rec["baseline"] = args.baseline
    if case.name == "floor":
        rec["script_call_us"] = med("return0")  # EVALSHA's own floor
        rec["hset_in_script_us"] = round(med("call2") - med("call1"), 2)  # an HSET by redis.call
        rec["hget_in_script_us"] = round(med("call1") - med("return0"), 2)  # an HGET by redis.call
        rec["partition_scan_us"] = round(med("hget") - med("hget_small"), 2)  # per lookup
    rec["unexpected_replies"] = sum(s.bad for s in case.sides)
    for s in case.sides:
        rec[f"{s.label}_us_rounds"] = [round(x, 2) for x in s.us[mode]]
    rec["load_average_1m"] = round(os.getloadavg()[0], 2)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", default="valkey-9.1,redis-7.0")
    ap.add_argument("--bloom-server", default="redis-7.4",
                    help="also run the Bloom cases here, beside BF.ADD / BF.EXISTS ('': no)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--calls", type=int, default=400, help="calls per side per round")
    ap.add_argument("--batch", type=int, default=50, help="calls per round trip, pipelined mode")
    ap.add_argument("--warmup", type=int, default=50, help="calls per side before a case's rounds")
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--capture", type=int, default=2000,
                    help="items whose real operations are captured (applies, incr, contains)")
    ap.add_argument("--baseline", default=None, help="git revision whose scripts run beside the current ones")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-save", action="store_true", help="print the records only")
    args = ap.parse_args()
    args.capture = min(args.capture, args.sessions)
    want = {c for c in args.cases.split(",") if c}
    if want - set(CASES):
        sys.exit(f"unknown cases: {', '.join(sorted(want - set(CASES)))} (one of {', '.join(CASES)})")
    servers = [s for s in args.servers.split(",") if s]
    missing = [s for s in (*servers, args.bloom_server) if s and s not in find_servers()]
    if missing:
        sys.exit(f"servers not on this machine: {', '.join(missing)} (scripts/get-servers)")
    baseline: dict[str, bytes] = {}
    if args.baseline:
        for name in SCRIPTS:
            baseline[name] = subprocess.run(["git", "show", f"{args.baseline}:densekv/lua/{name}.lua"],
                                            check=True, capture_output=True,
                                            cwd=Path(__file__).parent.parent).stdout
    plan = [(s, want) for s in servers]
    bloom = want & {"bloom_add", "bloom_has"}
    if args.bloom_server and bloom and args.bloom_server not in servers:
        plan.append((args.bloom_server, bloom))
    started = time.perf_counter()
    for server, cases in plan:
        for rec in measure(server, cases, args, baseline):
            emit(rec, None if args.no_save else args.out)
    print(f"lua_scripts: {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
