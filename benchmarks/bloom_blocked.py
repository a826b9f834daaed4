"""A blocked Bloom filter, module-free, as a benchmark prototype (not a densekv feature).

Why: densekv's module-free BloomFilter is at the information limit in bits per item but
pays one redis.call per bit from Lua (k = 7 at p = 1%), 0.12-0.17x RedisBloom's batch
throughput on redis-7.4 (README, "Speed"). A blocked filter puts all k bits of an item in
one block of B bits (Putze, Sanders, Singler 2007), so an item costs one GETRANGE of its
block (plus one write when it is new) and k bit tests in Lua, at the price of more bits
per item for the same false-positive rate (a block's load varies from block to block).
This script measures that price and what it buys, so the owner can decide whether an
opt-in blocked layout is worth building.

The prototype: one plain string per filter, `blocks` = ceil(capacity * bits_per_item / B)
blocks of B bits (B = 512: a 64-byte block, or B = 64), made full length at once (a fixed
capacity: no stages, no growth, one shard, no cluster). Client side, per item one
BLAKE2b digest of DIGEST bytes, sent as it is (STRIDE bytes an item, one string argument
per script call); the script takes the block from its first 6 bytes (u48 mod blocks) and
k positions from the next bytes (1 byte each when B <= 256, else 2: byte and bit). So the
client does one C-level hash per item and one join per batch; all decoding is in Lua.
Scripts: benchmarks/lua/blocked_add.lua (GETRANGE, then one write of the changed bytes
if the item is new; an exact count in a second key) and blocked_has.lua (GETRANGE only).
Calls carry at most --add-call / --has-call items, pipelined per add_many/contains_many.

Modes:
  --size        for each block size and target p (1% and 1e-3): the fewest bits per item
                (and its k) at which the measured false-positive rate meets p. The search
                runs on an exact numpy replica of the filter (same digests, same bits:
                checked), --n items at capacity --n, --probes absent items, bits per item
                on a grid of --grid, every k in a range around the best; the winner is then
                built on the server (--server) and measured there with the same probes
                (the first of 3 grid points in a row that meet p, so that one lucky draw of
                the probes does not pick it), next to densekv's module-free BloomFilter
                and (where the server has it) RedisBloom's BF.RESERVE filter of the same capacity and p: bits per item
                (string bits / n; MEMORY USAGE too) and false-positive rate of each.
  --write-modes server usec per added item for each write of blocked_add.lua (block, span,
                splice, u8, setbit, bytes), taking turns in passes; which is cheaper.
  (default)     throughput, interleaved in one run (bloom_speed.py's phases: sides take
                turns per chunk, medians of per-turn rates and ratios): blocked B = 512 and
                B = 64 (sized from the --size records for --p), densekv's BloomFilter and,
                where the server loads it, RedisBloom (BF.MADD / BF.MEXISTS pipelined in
                batches of 500, BF.ADD / BF.EXISTS): add_many, contains_many of present and
                absent items, single add and contains. Each record gives every side's
                ratio to RedisBloom (`<side>_ratio`) and to densekv (`<side>_ratio_to_densekv`),
                server usec per item and the longest single call (SLOWLOG).

Prints one JSON record per configuration and appends them to
benchmarks/results/bloom_blocked.jsonl (--no-save: print only).

Usage: python benchmarks/bloom_blocked.py --size [--server redis-7.4] [--n 200000] [--probes 1000000]
       python benchmarks/bloom_blocked.py --write-modes [--server redis-7.4]
       python benchmarks/bloom_blocked.py [--server redis-7.4] [--p 0.01] [--write-mode span] [--add-call 100] [--has-call 300]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import os
from collections.abc import Callable, Sequence
from functools import partial
from operator import methodcaller
from pathlib import Path
from statistics import median
from typing import Any

import bloom_speed  # benchmarks/bloom_speed.py: items, commandstats, Side, phase, redisbloom_side
import gitstamp

import densekv.lua
import densekv.sets.bloom
from densekv.sets.bloom_math import items_bytes
from densekv.tools.server.binaries import find_servers
from densekv.tools.server.process import ServerProcess

RESULTS = Path(__file__).parent / "results" / "bloom_blocked.jsonl"
LUA = Path(__file__).parent / "lua"
DIGEST = 32  # bytes of BLAKE2b per item: 6 for the block, k positions after (k <= 13 at B = 512)
STRIDE = DIGEST
#: --size takes the first grid point from which RUN points in a row meet p (one lucky draw
#: of the probes is not enough)
RUN = 3
BLOCK_SIZES = (512, 64)
TARGETS = (0.01, 0.001)
WRITE_MODES = ("block", "span", "splice", "u8", "setbit", "bytes")
_hasher = partial(hashlib.blake2b, digest_size=DIGEST)
_digest = methodcaller("digest")
_one = (49).__eq__  # b"1"


def digests(data: Sequence[bytes]) -> bytes:
    """The digests of a batch, joined: one C-level hash per item, no Python loop."""
    return b"".join(map(_digest, map(_hasher, data)))


def width(block_bits: int) -> int:
    """Bytes per position in a digest: 1 when a byte covers the block (B <= 256), else 2
    (one picks the byte, one the bit: see blocked_has.lua)."""
    return 1 if block_bits <= 256 else 2


class BlockedBloom:
    """The prototype filter: fixed capacity, one string, all of an item's bits in one block."""

    def __init__(self, client: Any, name: str, capacity: int, bits_per_item: float, k: int, block_bits: int,
                 *, add_call: int, has_call: int, write_mode: str = "span") -> None:
        if block_bits not in (8, 16, 32, 64, 128, 256, 512, 1024, 2048):
            raise ValueError(f"block_bits is a power of 2 in 8..2048, got {block_bits}")
        if 6 + k * width(block_bits) > DIGEST:
            raise ValueError(f"k = {k} needs more than the {DIGEST} digest bytes at B = {block_bits}")
        self.client, self.k, self.block_bits, self.nb = client, k, block_bits, block_bits // 8
        self.blocks = math.ceil(capacity * bits_per_item / block_bits)
        self.bits_key, self.count_key = f"{{{name}}}:bits", f"{{{name}}}:n"
        self.add_call, self.has_call, self.write_mode = add_call, has_call, write_mode
        self.add_sha = client.script_load((LUA / "blocked_add.lua").read_text())
        self.has_sha = client.script_load((LUA / "blocked_has.lua").read_text())
        self.shas = {self.add_sha.encode(), self.has_sha.encode()}
        client.delete(self.bits_key, self.count_key)
        client.setrange(self.bits_key, self.blocks * self.nb - 1, b"\0")
        client.set(self.count_key, 0)

    @property
    def bits(self) -> int:
        return self.blocks * self.block_bits

    def _args(self, blob: bytes, n: int) -> tuple[Any, ...]:
        return (n, self.blocks, self.nb, self.k, width(self.block_bits), STRIDE, blob)

    def add_many(self, items: Sequence[object]) -> list[bool]:
        """True per item that was new; one pipeline of calls of at most add_call items."""
        blob, n, step = digests(items_bytes(items)), len(items), self.add_call
        head = ("EVALSHA", self.add_sha, 2, self.bits_key, self.count_key)
        if n <= step:
            return list(map(_one, self.client.execute_command(*head, *self._args(blob, n), self.write_mode)[1]))
        pipe = self.client.pipeline(transaction=False)
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            pipe.execute_command(*head, *self._args(blob[STRIDE * lo : STRIDE * hi], hi - lo), self.write_mode)
        return list(map(_one, b"".join(reply[1] for reply in pipe.execute())))

    def contains_many(self, items: Sequence[object]) -> list[bool]:
        blob, n, step = digests(items_bytes(items)), len(items), self.has_call
        head = ("EVALSHA", self.has_sha, 1, self.bits_key)
        if n <= step:
            return list(map(_one, self.client.execute_command(*head, *self._args(blob, n))))
        pipe = self.client.pipeline(transaction=False)
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            pipe.execute_command(*head, *self._args(blob[STRIDE * lo : STRIDE * hi], hi - lo))
        return list(map(_one, b"".join(pipe.execute())))

    def add(self, item: object) -> bool:
        return self.add_many([item])[0]

    def contains(self, item: object) -> bool:
        return self.contains_many([item])[0]

    def count(self) -> int:
        return int(self.client.get(self.count_key))


# --- the numpy replica and the false-positive formula ------------------------------------


def replica_columns(blob: bytes, block_bits: int, k: int, blocks: int) -> Any:
    """Bit numbers (n x k, int64) the scripts touch for these digests: block * B + pos."""
    import numpy as np

    d = np.frombuffer(blob, dtype=np.uint8).reshape(-1, STRIDE).astype(np.uint64)
    u48 = sum(d[:, i] << np.uint64(8 * i) for i in range(6))
    blk = (u48 % np.uint64(blocks)).astype(np.int64)
    nb = block_bits // 8
    if width(block_bits) == 1:  # byte x: bit x mod 8 of byte floor(x / 8) mod NB
        x = d[:, 6 : 6 + k].astype(np.int64)
        pos = 8 * ((x >> 3) % nb) + x % 8
    else:  # bytes x y: bit y mod 8 of byte x mod NB
        x, y = d[:, 6 : 6 + 2 * k : 2].astype(np.int64), d[:, 7 : 7 + 2 * k : 2].astype(np.int64)
        pos = 8 * (x % nb) + y % 8
    return blk[:, None] * block_bits + pos


def replica_fp(present: bytes, absent: bytes, block_bits: int, bits_per_item: float, k: int, n: int) -> tuple[
        float, Any]:
    """(false-positive rate over the absent digests, the bitmap as bools) of the filter
    the scripts build from the present digests."""
    import numpy as np

    blocks = math.ceil(n * bits_per_item / block_bits)
    bitmap = np.zeros(blocks * block_bits, dtype=bool)
    bitmap[replica_columns(present, block_bits, k, blocks).ravel()] = True
    hits = bitmap[replica_columns(absent, block_bits, k, blocks)].all(axis=1)
    return float(hits.mean()), bitmap


def formula_fp(block_bits: int, bits_per_item: float, k: int) -> float:
    """Blocked Bloom filter, k independent positions in a block: the block's load j is
    Poisson(B / bits_per_item), the rate sum_j P(j) (1 - (1 - 1/B)^(j k))^k."""
    lam = block_bits / bits_per_item
    total, term, j = 0.0, math.exp(-lam), 0
    while j < lam + 12 * math.sqrt(lam) + 30:
        total += term * (1 - (1 - 1 / block_bits) ** (j * k)) ** k
        j += 1
        term *= lam / j
    return total


def formula_bits(block_bits: int, k: int, p: float) -> float:
    """The bits per item at which formula_fp meets p (bisection)."""
    lo, hi = 1.0, 80.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if formula_fp(block_bits, mid, k) > p else (lo, mid)
    return hi


def base_record(args: argparse.Namespace, op: str) -> dict[str, Any]:
    binary = find_servers()[args.server]
    return {"benchmark": "bloom_blocked", "op": op, "commit": gitstamp.commit(), "server": args.server,
            "version": binary.version, "n": args.n, "capacity": args.n}


def size(args: argparse.Namespace) -> list[dict[str, Any]]:
    n = args.n
    present, absent = bloom_speed.items(1, n), bloom_speed.items(2, args.probes)
    pd, ad = digests(present), digests(absent)
    records = []
    binary = find_servers()[args.server]
    with ServerProcess(binary) as proc:
        client = proc.client()
        for p in TARGETS:
            peers: dict[str, Any] = {}
            bf = densekv.sets.bloom.BloomFilter(client, f"dk-{p}", capacity=n, error_rate=p)
            bf.add_many(present)
            stats = bf.stats()
            peers.update({"densekv_k": stats["k"], "densekv_bits_per_item": round(8 * stats["bytes_allocated"] / n, 4),
                          "densekv_fp_measured": sum(bf.contains_many(absent)) / args.probes})
            bf.delete()
            if "bf" in binary.modules:
                client.execute_command("BF.RESERVE", f"rb-{p}", p, n)
                for lo in range(0, n, 10_000):
                    client.execute_command("BF.MADD", f"rb-{p}", *present[lo : lo + 10_000])
                info = client.execute_command("BF.INFO", f"rb-{p}")
                fields = dict(zip(info[::2], info[1::2])) if isinstance(info, list) else info
                fp = sum(sum(client.execute_command("BF.MEXISTS", f"rb-{p}", *absent[lo : lo + 10_000]))
                         for lo in range(0, len(absent), 10_000))
                peers.update({"redisbloom_bits_per_item": round(8 * int(fields.get(b"Size", fields.get("Size", 0))) / n, 4),
                              "redisbloom_fp_measured": fp / args.probes})
                client.delete(f"rb-{p}")
            for block_bits in BLOCK_SIZES:
                per_k: dict[int, Any] = {}
                kmax = (DIGEST - 6) // width(block_bits)
                ks = sorted(range(2, kmax + 1), key=lambda k, b=block_bits: formula_bits(b, k, p))[:5]
                for k in sorted(ks):
                    bpi = round(math.floor((formula_bits(block_bits, k, p) - 0.5) / args.grid) * args.grid, 4)
                    run: list[float] = []  # replica rates at bpi and the grid points after it
                    while len(run) < RUN or max(run) > p:  # the first of RUN points in a row that meet p
                        if len(run) == RUN:
                            run.pop(0)
                            bpi = round(bpi + args.grid, 4)
                        run.append(replica_fp(pd, ad, block_bits, round(bpi + len(run) * args.grid, 4), k, n)[0])
                    fp = run[0]
                    per_k[k] = {"bits_per_item": bpi, "fp_replica": fp,
                                "fp_formula": round(formula_fp(block_bits, bpi, k), 7),
                                "formula_bits_per_item": round(formula_bits(block_bits, k, p), 3)}
                k = min(per_k, key=lambda x: (per_k[x]["bits_per_item"], x))
                bpi = per_k[k]["bits_per_item"]
                fp, bitmap = replica_fp(pd, ad, block_bits, bpi, k, n)
                import numpy as np

                f = BlockedBloom(client, f"blk-{block_bits}-{p}", n, bpi, k, block_bits, add_call=args.add_call,
                                 has_call=args.has_call)
                new = sum(f.add_many(present))
                server_fp = sum(f.contains_many(absent)) / args.probes
                false_neg = n - sum(f.contains_many(present))
                rec = {**base_record(args, "size"), "target_p": p, "block_bits": block_bits, "k": k,
                       "bits_per_item": round(f.bits / n, 4), "grid_bits_per_item": bpi, "blocks": f.blocks,
                       "probes": args.probes, "fp_server": server_fp, "fp_replica": fp,
                       "fp_formula": round(formula_fp(block_bits, f.bits / n, k), 7),
                       "fp_server_sigma": round(math.sqrt(p * (1 - p) / args.probes), 7),
                       "false_negatives": false_neg, "count": f.count(), "new_reported": new,
                       "memory_usage_bits_per_item": round(8 * int(client.memory_usage(f.bits_key)) / n, 4),
                       "bits_identical_to_replica": client.get(f.bits_key) == np.packbits(bitmap).tobytes(),
                       "per_k": per_k, "grid": args.grid, **peers,
                       "load_average_1m": round(os.getloadavg()[0], 2)}
                client.delete(f.bits_key, f.count_key)
                print(json.dumps(rec), flush=True)
                records.append(rec)
    return records


# --- speed ----------------------------------------------------------------------------------


def sizing(args: argparse.Namespace) -> dict[int, tuple[float, int]]:
    """(bits per item, k) per block size for --p: --config, else the latest --size record."""
    got: dict[int, tuple[float, int]] = {}
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("op") == "size" and rec["target_p"] == args.p and rec["capacity"] == args.n:
                got[rec["block_bits"]] = (rec["bits_per_item"], rec["k"])
    for spec in args.config or []:
        b, bpi, k = spec.split(":")
        got[int(b)] = (float(bpi), int(k))
    missing = [b for b in BLOCK_SIZES if b not in got]
    if missing:
        raise SystemExit(f"no size for B = {missing} at p = {args.p}: run --size first or give --config B:BPI:K")
    return got


def blocked_side(client: Any, name: str, capacity: int, bpi: float, k: int, block_bits: int,
                 args: argparse.Namespace) -> bloom_speed.Side:
    many = BlockedBloom(client, name, capacity, bpi, k, block_bits, add_call=args.add_call,
                        has_call=args.has_call, write_mode=args.write_mode)
    one = BlockedBloom(client, f"{name}-1", capacity, bpi, k, block_bits, add_call=args.add_call,
                       has_call=args.has_call, write_mode=args.write_mode)
    tag = f"{{{name}}}".encode()
    return bloom_speed.Side(name, many.add_many, many.contains_many, one.add, one.contains,
                            lambda a: len(a) > 3 and a[0].lower() == b"evalsha" and a[1] in many.shas
                            and a[3].startswith(tag), many)


def speed(args: argparse.Namespace) -> list[dict[str, Any]]:
    binary = find_servers()[args.server]
    sized = sizing(args)
    n, p, chunk = args.n, args.p, args.chunk
    present, absent, singles = bloom_speed.items(1, n), bloom_speed.items(2, n), bloom_speed.items(3, args.single)
    options = {"slowlog-log-slower-than": str(args.slowlog_usec), "slowlog-max-len": "1000000"}
    with ServerProcess(binary, options=options) as proc:
        client = proc.client()
        warm = densekv.sets.bloom.BloomFilter(client, "warm-dk", capacity=20_000, error_rate=p)
        warm.add_many(bloom_speed.items(4, 10_000)), warm.contains_many(bloom_speed.items(5, 10_000))
        warm.add(b"x"), warm.contains(b"y")
        warm.delete()
        for b, (bpi, k) in sized.items():
            w = BlockedBloom(client, "warm-blk", 20_000, bpi, k, b, add_call=args.add_call, has_call=args.has_call,
                             write_mode=args.write_mode)
            w.add_many(bloom_speed.items(4, 10_000)), w.contains_many(bloom_speed.items(5, 10_000))
            w.add(b"x"), w.contains(b"y")
            client.delete(w.bits_key, w.count_key)
        sides = [blocked_side(client, f"blocked{b}", n, *sized[b], b, args) for b in BLOCK_SIZES]
        sides.append(bloom_speed.densekv_side("densekv", densekv.sets.bloom, densekv.lua, client, "densekv",
                                              "densekv-1", n, p))
        if "bf" in binary.modules:
            client.execute_command("BF.RESERVE", "warm-rb", p, 20_000)
            client.execute_command("BF.MADD", "warm-rb", *bloom_speed.items(4, 1000))
            client.execute_command("BF.EXISTS", "warm-rb", b"x")
            client.delete("warm-rb")
            sides.append(bloom_speed.redisbloom_side(client, "rb", "rb-1", n, p))
        base = {**base_record(args, "?"), "error_rate": p, "chunk": chunk, "rb_batch": bloom_speed.RB_BATCH,
                "add_call": args.add_call, "has_call": args.has_call, "write_mode": args.write_mode,
                **{f"blocked{b}_bits_per_item": round(sides[i].filter.bits / n, 4) for i, b in enumerate(BLOCK_SIZES)},
                **{f"blocked{b}_k": sized[b][1] for b in BLOCK_SIZES}}

        def batches(data: list[bytes], verb: str) -> list[Callable[[bloom_speed.Side], Any]]:
            return [lambda side, c=data[lo : lo + chunk]: getattr(side, verb)(c) for lo in range(0, len(data), chunk)]

        def one_by_one(verb: str) -> list[Callable[[bloom_speed.Side], Any]]:
            step = bloom_speed.ROUND_SINGLE
            return [lambda side, c=singles[lo : lo + step]: [getattr(side, verb)(x) for x in c]
                    for lo in range(0, len(singles), step)]

        plan = [("add_many", n, batches(present, "add_many")),
                ("contains_present", n, batches(present, "contains_many")),
                ("contains_absent", n, batches(absent, "contains_many")),
                ("add", len(singles), one_by_one("add")), ("contains", len(singles), one_by_one("contains"))]
        records = []
        named = {s.name: s for s in sides}
        for op, count, work in plan:
            rec = bloom_speed.phase(client, op, count, sides, work, base)
            for side in sides:  # the densekv ratio: densekv's time / this side's, per turn
                rec[f"{side.name}_ratio_to_densekv"] = round(median(
                    [x / y for x, y in zip(named["densekv"].seconds, side.seconds)]), 4)
            rec["longest_blocked_call_usec"] = max((rec[f"blocked{b}_longest_call_usec"] or 0) for b in BLOCK_SIZES)
            print(json.dumps(rec), flush=True)
            records.append(rec)
        fp = records[2]
        records.append({**base, "op": "filters", **{f"{s.name}_fp_measured": fp[f"{s.name}_true"] / n for s in sides},
                        **{f"blocked{b}_count": named[f"blocked{b}"].filter.count() for b in BLOCK_SIZES},
                        "load_average_1m": round(os.getloadavg()[0], 2)})
        print(json.dumps(records[-1]), flush=True)
    return records


def write_modes(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Server usec per added item and the longest call, per write of blocked_add.lua."""
    binary = find_servers()[args.server]
    sized = sizing(args)
    present = bloom_speed.items(1, args.n)
    usec: dict[tuple[int, str], list[float]] = {(b, m): [] for b in BLOCK_SIZES for m in WRITE_MODES}
    longest: dict[tuple[int, str], int] = {key: 0 for key in usec}
    options = {"slowlog-log-slower-than": "0", "slowlog-max-len": "1000000"}
    with ServerProcess(binary, options=options) as proc:
        client = proc.client()
        names = list(usec)
        for turn in range(args.passes + 1):
            for b, mode in names[turn % len(names) :] + names[: turn % len(names)]:
                f = BlockedBloom(client, "wm", args.n, *sized[b], b, add_call=args.add_call, has_call=args.has_call,
                                 write_mode=mode)
                gc.collect()
                client.slowlog_reset()
                before = bloom_speed.commandstats(client)
                f.add_many(present)
                spent = bloom_speed.commandstats(client)["evalsha"][1] - before.get("evalsha", (0, 0))[1]
                entries = client.execute_command("SLOWLOG", "GET", "-1")
                if turn:  # the first pass warms up
                    usec[(b, mode)].append(spent / args.n)
                    longest[(b, mode)] = max([longest[(b, mode)]] + [int(e[2]) for e in entries
                                                                     if e[3][0].lower() == b"evalsha"])
                client.delete(f.bits_key, f.count_key)
    records = []
    for (b, mode), got in usec.items():
        rec = {**base_record(args, "write_modes"), "error_rate": args.p, "block_bits": b, "write_mode": mode,
               "k": sized[b][1], "bits_per_item": sized[b][0], "add_call": args.add_call, "passes": args.passes,
               "server_usec_per_item": round(median(got), 4),
               "ratio_to_block": round(median(got) / median(usec[(b, "block")]), 3),
               "longest_call_usec": longest[(b, mode)], "load_average_1m": round(os.getloadavg()[0], 2)}
        print(json.dumps(rec), flush=True)
        records.append(rec)
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="redis-7.4")
    ap.add_argument("--n", type=int, default=200_000, help="items, and the filters' capacity")
    ap.add_argument("--p", type=float, default=0.01)
    ap.add_argument("--size", action="store_true", help="find bits per item and k for p = 1%% and 1e-3")
    ap.add_argument("--write-modes", action="store_true", help="compare blocked_add.lua's writes")
    ap.add_argument("--probes", type=int, default=1_000_000, help="absent items for --size")
    ap.add_argument("--grid", type=float, default=0.05, help="bits per item step for --size")
    ap.add_argument("--passes", type=int, default=3, help="measured passes for --write-modes")
    ap.add_argument("--config", action="append", help="B:BITS_PER_ITEM:K instead of the --size record")
    ap.add_argument("--write-mode", default="span", choices=WRITE_MODES)
    ap.add_argument("--add-call", type=int, default=100, help="items per blocked_add.lua call")
    ap.add_argument("--has-call", type=int, default=300, help="items per blocked_has.lua call")
    ap.add_argument("--chunk", type=int, default=10_000)
    ap.add_argument("--single", type=int, default=4000)
    ap.add_argument("--slowlog-usec", type=int, default=50)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-save", action="store_true", help="print the records only")
    args = ap.parse_args()
    records = size(args) if args.size else write_modes(args) if args.write_modes else speed(args)
    if not args.no_save:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in records)


if __name__ == "__main__":
    main()
