"""Bloom filter speed: densekv's module-free filter against RedisBloom, same items, same run.

One server of the matrix that loads RedisBloom (redis-7.4 by default); N random 16-byte
items and N absent ones (fixed seeds); a densekv BloomFilter (module-free) and a RedisBloom
filter (BF.RESERVE key p N, its default expansion 2) of the same capacity N and error rate
p (--capacity C instead: a filter smaller than N grows, stages for densekv, sub-filters
for RedisBloom); with --baseline REV also the module-free filter of an older commit (its densekv package
taken with `git archive REV`, renamed densekv_base so both load in this process; with a
baseline, a server without RedisBloom may be measured too, old code against new). Every
operation runs in rounds in which the sides take turns, the first side changing from round
to round, so a busy machine slows all alike; a side's figure sums its turns and the ratio
to RedisBloom is the comparison (a rate is the median over the turns, a ratio the median
of the per-turn ratios: one stall of a busy machine hits one turn, not the figure):
  add_many          add_many(chunk)  | a pipeline of BF.MADD, 500 items each
  contains_present  contains_many of the added items | BF.MEXISTS likewise
  contains_absent   contains_many of the absent items (false positives counted)
  add, contains     one item per round trip: bf.add(x) / BF.ADD, x in bf / BF.EXISTS, on
                    filters of their own (same capacity and error rate), items new to both
  (chunk = --chunk items, 10,000 by default: densekv's default batch)
Per record and side: items per second, the ratio to RedisBloom, server microseconds per
item (INFO commandstats differences around each turn, median turn: EVALSHA and SCRIPT LOAD
for densekv, whose scripts' own commands are inside them; the BF.* command for
RedisBloom), and how long single calls took: the private server logs every call slower
than --slowlog-usec (default 50; each densekv batch call is slower than that, so all are
there) in a SLOWLOG long enough to keep them all, read and reset per phase (an entry is
told apart by its script SHA or command name; a script the two commits share has one SHA,
so with --baseline both sides show the same figures for it): median, 99th percentile and
longest (null: none was that slow). SLOWLOG times a call from start to end, so a server preempted on a
busy machine shows it too: RedisBloom's figures in the same phase are the gauge. A last record (op "filters")
says what each filter is: k, bits per item, false positives among the N absent items, and
with a baseline whether the two module-free filters hold the very same bits.

With --bit-ops (any server of the matrix, no module needed) it measures instead what one
bit costs the server from Lua, the floor under the module-free filter: --bit-items items of
k = 7 random bits in a 2 MiB string, the items in calls of BIT_OPS_ITEMS (what bloom_add.lua's
budget of SCRIPT_BITS bit calls gives at k = 7), each variant's server usec per item (INFO
commandstats usec of EVALSHA; for "client", which sends BITFIELD with no script, the server's
CPU time, which also holds the argument parsing the others do not pay), the variants taking
turns in 4 passes (median) and each one's ratio to setbit's time in the same run:
  walk          the scripts' own arithmetic only: decode a, b and walk a + i b mod m, no bit
  setbit        one SETBIT per bit (what bloom_add.lua does)   getbit: one GETBIT per bit
  bitfield      one BITFIELD SET u1 x k per item (4k + 2 arguments: redis.call's cached
                argument objects), bitfield_ro: BITFIELD_RO GET u1 x k per item
  bitfield_call one BITFIELD of every SET u1 of the call (4k x items arguments)
  client        BITFIELD SET u1 x k x 140 items sent by the client, pipelined (no Lua)
  copy          one GET of the whole string into the script per call of BIT_OPS_COPY_ITEMS
                items, no bit (its record: copy_ns_per_byte)
  copy_read     the same copy, then each bit tested in it with string.byte and bit.band, as
                bloom_has.lua does (its record: local_read_usec_per_bit, the walk included,
                the copy not)

Prints one JSON record per operation and appends them to benchmarks/results/bloom_speed.jsonl.

Usage: python benchmarks/bloom_speed.py [--server redis-7.4] [--n 200000] [--capacity C] [--p 0.01]
       [--chunk 10000] [--single 4000] [--slowlog-usec 50] [--baseline REV] [--out PATH]
       [--no-save]
       python benchmarks/bloom_speed.py --bit-ops [--server NAME] [--bit-items 10000]
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from statistics import median
from typing import Any

import gitstamp  # benchmarks/gitstamp.py: the commit, +dirty for uncommitted code
from records import emit  # benchmarks/records.py: print and append each record

import densekv
import densekv.lua
import densekv.sets.bloom
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

RESULTS = Path(__file__).parent / "results" / "bloom_speed.jsonl"
RB_BATCH = 500  # items per BF.MADD / BF.MEXISTS (as in issue 16's measurement)
ROUND_SINGLE = 100  # single-item calls per side per turn
HOUSEKEEPING = ("info", "slowlog", "config", "hello", "client", "ping", "module", "bf.info", "memory", "select")
#: commands whose usec already holds the commands they run (counted apart by commandstats)
WRAPPERS = ("evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro", "script|load")
BLOOM_SCRIPTS = ("bloom_add", "bloom_has", "bloom_meta")


def items(seed: int, n: int) -> list[bytes]:
    rnd = random.Random(seed)
    return [rnd.randbytes(16) for _ in range(n)]


def commandstats(client: Any) -> dict[str, tuple[int, int]]:
    return {key.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
            for key, v in client.info("commandstats").items()}


def server_usec(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """(calls, usec) between two snapshots: the scripts' own where scripts ran."""
    delta = {name: (c - before.get(name, (0, 0))[0], u - before.get(name, (0, 0))[1])
             for name, (c, u) in after.items()
             if c != before.get(name, (0, 0))[0] and name.split("|")[0] not in HOUSEKEEPING}
    if any(name in WRAPPERS for name in delta):
        delta = {name: cu for name, cu in delta.items() if name in WRAPPERS}
    return sum(c for c, _ in delta.values()), sum(u for _, u in delta.values())


@dataclass
class Side:
    """One implementation under test: how to run its operations, how to know its calls."""

    name: str
    add_many: Callable[[list[bytes]], list[Any]]
    contains_many: Callable[[list[bytes]], list[Any]]
    add: Callable[[bytes], Any]
    contains: Callable[[bytes], Any]
    owns: Callable[[list[bytes]], bool]  # a SLOWLOG entry's arguments: this side's call?
    filter: Any = None  # densekv sides: the filter add_many loads
    seconds: list[float] = field(default_factory=list)  # per turn
    calls: int = 0
    usec: list[int] = field(default_factory=list)  # server usec per turn
    got: list[Any] = field(default_factory=list)


def densekv_side(name: str, module: Any, lua: Any, client: Any, key: str, single_key: str, n: int,
                 p: float) -> Side:
    bf = module.BloomFilter(client, key, capacity=n, error_rate=p)
    one = module.BloomFilter(client, single_key, capacity=n, error_rate=p)
    for opened in (bf, one):  # a filter of this tree opens on first use: open it before the turns
        if hasattr(opened, "_opened"):  # (a --baseline one opened in its constructor)
            opened.open()
    shas = {lua.script(s).sha.encode() for s in BLOOM_SCRIPTS}
    return Side(name, bf.add_many, bf.contains_many, one.add, one.contains,
                lambda args: len(args) > 1 and args[0].lower() == b"evalsha" and args[1] in shas, bf)


def redisbloom_side(client: Any, key: str, single_key: str, n: int, p: float) -> Side:
    client.execute_command("BF.RESERVE", key, p, n)
    client.execute_command("BF.RESERVE", single_key, p, n)

    def many(verb: str) -> Callable[[list[bytes]], list[Any]]:
        def run(chunk: list[bytes]) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            for lo in range(0, len(chunk), RB_BATCH):
                pipe.execute_command(verb, key, *chunk[lo : lo + RB_BATCH])
            return [bool(x) for part in pipe.execute() for x in part]
        return run

    return Side("redisbloom", many("BF.MADD"), many("BF.MEXISTS"),
                lambda x: bool(client.execute_command("BF.ADD", single_key, x)),
                lambda x: bool(client.execute_command("BF.EXISTS", single_key, x)),
                lambda args: bool(args) and args[0].lower().startswith(b"bf."))


def baseline_package(rev: str) -> tuple[Any, Any]:
    """densekv as of commit `rev`, importable beside this one as densekv_base."""
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parent).stdout.strip()
    blob = subprocess.run(["git", "archive", rev, "densekv"], capture_output=True, check=True, cwd=top).stdout
    root = Path(tempfile.mkdtemp(prefix="densekv-base-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(root, filter="data")
    (root / "densekv").rename(root / "densekv_base")
    importer = re.compile(r"^(\s*)(from|import)\s+densekv\b", re.MULTILINE)
    for path in (root / "densekv_base").rglob("*.py"):
        text = path.read_text()
        text = importer.sub(lambda m: f"{m.group(1)}{m.group(2)} densekv_base", text)
        text = re.sub(r"^(\s*)import densekv_base$", r"\1import densekv_base as densekv", text, flags=re.MULTILINE)
        path.write_text(text)
    sys.path.insert(0, str(root))
    return importlib.import_module("densekv_base.sets.bloom"), importlib.import_module("densekv_base.lua")


def turns(client: Any, sides: list[Side], work: list[Callable[[Side], Any]]) -> None:
    """Each piece of work once per side, the sides taking turns, the first one rotating;
    wall time and server time per side and turn (commandstats around each turn, outside
    the timing)."""
    for i, job in enumerate(work):
        for j in range(len(sides)):
            side = sides[(i + j) % len(sides)]
            before = commandstats(client)
            t0 = time.perf_counter()
            side.got.append(job(side))
            side.seconds.append(time.perf_counter() - t0)
            calls, usec = server_usec(before, commandstats(client))
            side.calls += calls
            side.usec.append(usec)


def call_times(client: Any, side: Side) -> list[int]:
    """Durations (usec) of a side's calls the SLOWLOG kept in this phase, sorted."""
    entries = client.execute_command("SLOWLOG", "GET", "-1")  # raw: [id, time, usec, args, ...]
    return sorted(int(e[2]) for e in entries if side.owns(list(e[3])))


def phase(client: Any, op: str, count: int, sides: list[Side], work: list[Callable[[Side], Any]],
          base: dict[str, Any]) -> dict[str, Any]:
    """One operation's record. Rates are medians over the turns (a stall of a busy machine
    hits one turn), ratios the median of the per-turn ratios (sides timed back to back);
    the plain sums are kept as *_items_per_s_total."""
    for side in sides:
        side.seconds, side.calls, side.usec, side.got = [], 0, [], []
    gc.collect()
    client.slowlog_reset()
    turns(client, sides, work)
    per_turn = count / len(work)
    named = {s.name: s for s in sides}
    rec: dict[str, Any] = {**base, "op": op, "items": count, "turns": len(work),
                           "load_average_1m": round(os.getloadavg()[0], 2)}

    def ratio(a: Side, b: Side) -> float:  # b's speed over a's: a's time / b's time, per turn
        return round(median([x / y for x, y in zip(a.seconds, b.seconds)]), 4)

    if "baseline" in named:
        rec["densekv_speedup_over_baseline"] = ratio(named["baseline"], named["densekv"])
    for side in sides:
        if "redisbloom" in named:
            rec[f"{side.name}_ratio"] = ratio(named["redisbloom"], side)
        times = call_times(client, side)
        rec.update({
            f"{side.name}_items_per_s": round(median([per_turn / t for t in side.seconds])),
            f"{side.name}_items_per_s_total": round(count / sum(side.seconds)),
            f"{side.name}_server_usec_per_item": round(median(side.usec) / per_turn, 4),
            f"{side.name}_server_calls": side.calls,
            f"{side.name}_server_usec_per_call": round(sum(side.usec) / max(1, side.calls), 2),
            f"{side.name}_slow_calls": len(times),
            f"{side.name}_call_usec_median": times[len(times) // 2] if times else None,
            f"{side.name}_call_usec_p99": times[int(len(times) * 0.99)] if times else None,
            f"{side.name}_longest_call_usec": times[-1] if times else None,
            f"{side.name}_calls_over_1ms": sum(1 for t in times if t > 1000),
            f"{side.name}_true": sum(sum(map(bool, g)) if isinstance(g, list) else bool(g) for g in side.got),
        })
    return rec


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    binary = find_servers()[args.server]
    if "bf" not in binary.modules and not args.baseline:
        raise SystemExit(f"{args.server} has no RedisBloom module: use --server redis-7.4 or --baseline REV")
    n, p, chunk = args.n, args.p, args.chunk
    capacity = args.capacity or n
    present, absent, singles = items(1, n), items(2, n), items(3, args.single)
    options = {"slowlog-log-slower-than": str(args.slowlog_usec), "slowlog-max-len": "1000000"}
    with ServerProcess(binary, options=options) as proc:
        client = proc.client()
        modules = [(densekv.sets.bloom, densekv.lua, "densekv")]
        if args.baseline:
            bloom_base, lua_base = baseline_package(args.baseline)
            modules.append((bloom_base, lua_base, "baseline"))
        for module, _, name in modules:  # scripts loaded, commands' first use paid
            warm = module.BloomFilter(client, f"warm-{name}", capacity=20_000, error_rate=p)
            warm.add_many(items(4, 10_000))
            warm.contains_many(items(5, 10_000))
            warm.add(b"x"), warm.contains(b"y")
            warm.delete()
        sides = [densekv_side(name, module, lua, client, f"{name}", f"{name}-1", capacity, p)
                 for module, lua, name in modules]
        if "bf" in binary.modules:
            client.execute_command("BF.RESERVE", "warm-rb", p, 20_000)
            client.execute_command("BF.MADD", "warm-rb", *items(4, 1000))
            client.execute_command("BF.EXISTS", "warm-rb", b"x")
            client.delete("warm-rb")
            sides.append(redisbloom_side(client, "rb", "rb-1", capacity, p))
        base = {"benchmark": "bloom_speed", "commit": gitstamp.commit(), "baseline": args.baseline or None,
                "server": args.server, "version": binary.version, "n": n, "capacity": capacity, "error_rate": p,
                "chunk": chunk, "rb_batch": RB_BATCH, "script_bits": _script_bits()}

        def batches(data: list[bytes], verb: str) -> list[Callable[[Side], Any]]:
            return [lambda side, c=data[lo : lo + chunk]: getattr(side, verb)(c) for lo in range(0, len(data), chunk)]

        def one_by_one(verb: str) -> list[Callable[[Side], Any]]:
            return [lambda side, c=singles[lo : lo + ROUND_SINGLE]: [getattr(side, verb)(x) for x in c]
                    for lo in range(0, len(singles), ROUND_SINGLE)]

        records = [
            phase(client, "add_many", n, sides, batches(present, "add_many"), base),
            phase(client, "contains_present", n, sides, batches(present, "contains_many"), base),
            phase(client, "contains_absent", n, sides, batches(absent, "contains_many"), base),
            phase(client, "add", len(singles), sides, one_by_one("add"), base),
            phase(client, "contains", len(singles), sides, one_by_one("contains"), base),
        ]
        filters: dict[str, Any] = {**base, "op": "filters", "densekv_file": densekv.__file__}
        fp = records[2]
        for side in sides:
            if side.name == "redisbloom":
                info = client.execute_command("BF.INFO", "rb")
                fields = dict(zip(info[::2], info[1::2])) if isinstance(info, list) else info
                size = int(fields.get(b"Size", fields.get("Size", 0)))
                filters["redisbloom_bits_per_item"] = round(8 * size / n, 4)
            else:
                stats = side.filter.stats()
                filters.update({f"{side.name}_k": stats["k"], f"{side.name}_m": stats["m"],
                                f"{side.name}_stages": stats["stage_count"], f"{side.name}_inserted": stats["inserted"],
                                f"{side.name}_bits_per_item": round(8 * stats["bytes_allocated"] / n, 4),
                                f"{side.name}_fp_formula": stats["fp_rate"]})
            filters[f"{side.name}_fp_measured"] = fp[f"{side.name}_true"] / n
        if args.baseline:  # the same items set the same bits: the filters are one filter
            filters["baseline_bits_identical"] = all(
                client.get(f"densekv:bf{t}:{{0}}") == client.get(f"baseline:bf{t}:{{0}}")
                for t in range(filters["densekv_stages"]))
        records.append(filters)
    return records


BIT_OPS_K = 7
BIT_OPS_ITEMS = 140  # items per script call: bloom_add.lua's 1000 bit calls at k = 7
#: items per call of the copy variants (one copy per call, as bloom_has.lua's longer calls)
BIT_OPS_COPY_ITEMS = 2000
BIT_OPS_BYTES = 1 << 21
BIT_OPS_PASSES = 5
_WALK = """
local w, n, m, k = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local byte, call, key, out = string.byte, redis.call, KEYS[1], 0
local args = {}
for i = 0, k - 1 do args[4 * i + 1] = 'SET'; args[4 * i + 2] = 'u1'; args[4 * i + 4] = 1 end
local ro = {}
for i = 0, k - 1 do ro[3 * i + 1] = 'GET'; ro[3 * i + 2] = 'u1' end
local big = {}
local band, MASK, str = bit.band, {128, 64, 32, 16, 8, 4, 2, 1}, nil
%s
for j = 0, n - 1 do
  local p1, p2, p3, p4, q1, q2, q3, q4 = byte(w, 8 * j + 1, 8 * j + 8)
  local pos = p1 + p2 * 256 + p3 * 65536 + p4 * 16777216
  local step = q1 + q2 * 256 + q3 * 65536 + q4 * 16777216
  %s
end
%s
return out"""
_STEP = "pos = pos + step; if pos >= m then pos = pos - m end"
_COPY = "str = call('GET', key)"
_BIT_VARIANTS = {  # name: (Lua before the items, Lua per item, Lua after the items)
    "walk": ("", f"for _ = 1, k do out = out + pos % 2; {_STEP} end", ""),
    "setbit": ("", f"for _ = 1, k do out = out + call('SETBIT', key, pos, 1); {_STEP} end", ""),
    "getbit": ("", f"for _ = 1, k do out = out + call('GETBIT', key, pos); {_STEP} end", ""),
    "bitfield": ("", f"for i = 0, k - 1 do args[4 * i + 3] = pos; {_STEP} end "
                 + "local r = call('BITFIELD', key, unpack(args, 1, 4 * k)) for i = 1, k do out = out + r[i] end",
                 ""),
    "bitfield_ro": ("", f"for i = 0, k - 1 do ro[3 * i + 3] = pos; {_STEP} end "
                    + "local r = call('BITFIELD_RO', key, unpack(ro, 1, 3 * k)) for i = 1, k do out = out + r[i] end",
                    ""),
    "bitfield_call": ("", "for _ = 1, k do local b = #big; big[b + 1] = 'SET'; big[b + 2] = 'u1'; "
                      + f"big[b + 3] = pos; big[b + 4] = 1; {_STEP} end",
                      "local r = call('BITFIELD', key, unpack(big)) for i = 1, #r do out = out + r[i] end"),
    # what bloom_has.lua / bloom_add.lua do with a stage they copy: one GET of the whole
    # string per call ("copy" alone, no bit), then each bit tested in Lua
    "copy": (_COPY, "", ""),
    "copy_read": (_COPY, "for _ = 1, k do local r = pos % 8; "
                  + f"if band(byte(str, (pos - r) / 8 + 1), MASK[r + 1]) ~= 0 then out = out + 1 end; {_STEP} end", ""),
}


def bit_ops(args: argparse.Namespace) -> list[dict[str, Any]]:
    """What one bit costs the server from Lua, by mechanism (see the module docstring):
    BIT_OPS_PASSES passes in which every variant takes its turn (the first pass warms up),
    each variant's figure the median of its turns, its ratio to setbit's in the same run."""
    binary = find_servers()[args.server]
    rnd = random.Random(7)
    m, k, n = 8 * BIT_OPS_BYTES, BIT_OPS_K, args.bit_items
    walks = [(rnd.randrange(m), rnd.randrange(1, m)) for _ in range(n)]
    packed = b"".join(a.to_bytes(4, "little") + b.to_bytes(4, "little") for a, b in walks)
    raw = [[("SET", "u1", (a + i * b) % m, 1) for a, b in walks[lo : lo + BIT_OPS_ITEMS] for i in range(k)]
           for lo in range(0, n, BIT_OPS_ITEMS)]
    base = {"benchmark": "bloom_speed", "op": "bit_ops", "commit": gitstamp.commit(), "server": args.server,
            "version": binary.version, "items": n, "k": k, "bits": m, "items_per_call": BIT_OPS_ITEMS,
            "passes": BIT_OPS_PASSES - 1}
    usec: dict[str, list[float]] = {name: [] for name in (*_BIT_VARIANTS, "client")}
    with ServerProcess(binary) as proc:
        client = proc.client()
        shas = {name: client.script_load(_WALK % code) for name, code in _BIT_VARIANTS.items()}

        def fresh() -> None:
            client.delete("bits")
            client.setrange("bits", BIT_OPS_BYTES - 1, b"\0")

        def scripted(name: str) -> float:  # commandstats: the script's own time
            before = commandstats(client)
            per_call = BIT_OPS_COPY_ITEMS if name.startswith("copy") else BIT_OPS_ITEMS
            for lo in range(0, n, per_call):
                hi = min(n, lo + per_call)
                client.evalsha(shas[name], 1, "bits", packed[8 * lo : 8 * hi], hi - lo, m, k)
            return commandstats(client)["evalsha"][1] - before.get("evalsha", (0, 0))[1]

        def sent() -> float:  # no script: the server's CPU time, argument parsing included
            pipe = client.pipeline(transaction=False)
            for ops in raw:
                pipe.execute_command("BITFIELD", "bits", *(x for op in ops for x in op))
            cpu = client.info("cpu")
            t0 = cpu["used_cpu_user"] + cpu["used_cpu_sys"]
            pipe.execute()
            cpu = client.info("cpu")
            return 1e6 * (cpu["used_cpu_user"] + cpu["used_cpu_sys"] - t0)

        for turn in range(BIT_OPS_PASSES):
            names = list(usec)
            for name in names[turn % len(names) :] + names[: turn % len(names)]:
                fresh()
                spent = sent() if name == "client" else scripted(name)
                if turn:
                    usec[name].append(spent)
    setbit = median(usec["setbit"])
    calls = -(-n // BIT_OPS_COPY_ITEMS)
    copy = median(usec["copy"])
    extra = {  # a copy's cost per byte; a bit tested in the copy, the walk included, the copy not
        "copy": {"copy_ns_per_byte": round(1000 * copy / calls / BIT_OPS_BYTES, 3)},
        "copy_read": {"local_read_usec_per_bit": round((median(usec["copy_read"]) - copy) / n / k, 4)},
    }
    return [{**base, "variant": name, "server_usec_per_item": round(median(got) / n, 4),
             "server_usec_per_bit": round(median(got) / n / k, 4), "ratio_to_setbit": round(median(got) / setbit, 3),
             **extra.get(name, {}),
             "items_per_call": BIT_OPS_COPY_ITEMS if name.startswith("copy") else BIT_OPS_ITEMS,
             "measure": "used_cpu_user + used_cpu_sys" if name == "client" else "commandstats evalsha usec",
             "load_average_1m": round(os.getloadavg()[0], 2)} for name, got in usec.items()]


def _script_bits() -> int | None:
    try:
        from densekv.sets.bloom_batch import SCRIPT_BITS
    except ImportError:
        return None
    return SCRIPT_BITS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="redis-7.4")
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--capacity", type=int, help="the filters' capacity (default: N)")
    ap.add_argument("--p", type=float, default=0.01)
    ap.add_argument("--chunk", type=int, default=10_000)
    ap.add_argument("--single", type=int, default=4000)
    ap.add_argument("--slowlog-usec", type=int, default=50)
    ap.add_argument("--baseline", help="also measure densekv as of this commit (git archive)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-save", action="store_true", help="print the records only")
    ap.add_argument("--bit-ops", action="store_true", help="measure one bit's server cost by mechanism instead")
    ap.add_argument("--bit-items", type=int, default=10_000)
    args = ap.parse_args()
    for record in (bit_ops(args) if args.bit_ops else run(args)):
        emit(record, None if args.no_save else args.out)


if __name__ == "__main__":
    main()
