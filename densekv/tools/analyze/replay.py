"""Replay: copies of a pattern's sampled keys, measured on a scratch server with the meter.

For each pattern whose keys can be copied (strings, hashes, sets, sorted sets, lists,
streams - entries and IDs, not consumer groups: the per-key overhead of its types and
encodings, and for a stream what MEMORY USAGE's estimate of it misses), and for each densekv has a layout for,
the reservoir's keys are read from the live
server (read commands only, scan.roundtrip) and written into a scratch server that
densekv starts: the same flavor and version line from the matrix when this machine has
it, else the embedded Valkey (and the report says so). Two measurements, each an honest
meter delta (densekv/tools/measure.py) after a warm-up pass of the same writes (so the Lua
script cache and the server's other one-time allocations are not counted), both over
ballast keys that make the scratch server a scale model of the live one (plan_ballast:
the main dictionary as full; ballast_ttl: the expires table as full, the copies the same
share of it - deleting the last keys of a table frees its bucket array, which deleting
a pattern live does not when other keys have TTLs):

  as they are   SET / HSET / SADD / ZADD / RPUSH with each key's TTL (PX), among the
                ballast in a random order, then DEL: the bytes per key that deleting frees
                beyond MEMORY USAGE (`overhead`: on Redis 7.0 a key with a TTL has an entry
                in the expires dictionary; on Valkey 8.1+ deleting can free a chained
                bucket), and a check: MEMORY USAGE of the copies on the scratch server
                against the live server's for the same keys. The main dictionary's bucket
                array is not counted: it stays when keys go.
                A pattern's bytes now = its keys' MEMORY USAGE + overhead per key: what
                moving (or deleting) them frees, the basis of every saving printed.
  with densekv  the layout of moves.py for the pattern's kind, sized for the pattern's
                full count (see moves.py for how a sample keeps the full-size fill): its
                fixed part (metadata, a trained dictionary) as a delta, and its items as
                what deleting everything the move wrote frees, less the fixed part.

The loads run on their own connection, closed before each reading (its buffers are not
data: the planner's loader_client). The scratch server runs with the slowlog and latency
tracking off (their entries are server memory, not data).
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from densekv.errors import AnalyzeError
from densekv.tools.analyze.scan import BIG_VALUE, RateLimiter, Target, roundtrip, shape_reads
from densekv.tools.analyze.table import KeyFacts, PatternStats
from densekv.tools.bulk import bulk_load
from densekv.tools.measure import Meter
from densekv.tools.planner.core import loader_client
from densekv.tools.server.binaries import EMBEDDED, find_servers
from densekv.tools.server.process import ServerProcess

SCRATCH_OPTIONS = {"slowlog-log-slower-than": "-1", "latency-tracking": "no"}
BALLAST_PREFIX = "densekv:ballast:"
BALLAST_MAX = 65_536
#: types read_copies copies (a stream: its entries with their IDs; consumer groups are not copied)
COPYABLE = frozenset({"string", "hash", "set", "zset", "list", "stream"})


def plan_ballast(live_keys: int, pattern_keys: float, copies: int) -> tuple[int, int]:
    """(ballast keys, copies to use) so that the scratch server's main dictionary is as
    full as the live one's and the copies are about the same share of it as the pattern
    is of the live keyspace: a scale model of the live server, K / 2^j keys (hash tables
    grow in powers of two, so K / 2^j keys fill theirs as K fill the live one), at most
    BALLAST_MAX + copies. Deleting the copies then frees what deleting the pattern frees
    live: on Valkey 8.1+, whose buckets chain when full, that depends on the fill and on
    the share deleted by a few bytes per key; and the dictionary never shrinks under
    them (a pattern of most of the keyspace aside)."""
    if live_keys <= 0 or copies <= 0:
        return 0, copies
    share = min(1.0, max(pattern_keys, 1.0) / live_keys)
    j = max(0, math.ceil(math.log2(live_keys * share / copies))) if live_keys * share > copies else 0
    total = live_keys / 2 ** j
    use = max(1, min(copies, round(total * share)))
    while total > BALLAST_MAX + copies:  # too big to load for a sample: a smaller model, all copies
        total /= 2
        use = copies
    return max(0, round(total) - use), use


# --- the scratch server -----------------------------------------------------------------


#: (flavor, major.minor) of a live server -> the servers of the matrix that stand in for
#: it, closest first (the newer ones only where scripts/get-servers --all fetched them)
STAND_INS = {
    ("redis", "7.0"): ("redis-7.0",), ("redis", "7.2"): ("redis-7.4",), ("redis", "7.4"): ("redis-7.4",),
    ("valkey", "8.0"): ("valkey-8.0",), ("valkey", "8.1"): ("valkey-8.1", "valkey-8.0"),
}


def stand_ins(flavor: str, version: str) -> tuple[str, ...]:
    """The servers of the matrix for a live server of this flavor and version, closest
    first; () for none."""
    parts = version.split(".")
    found = STAND_INS.get((flavor, ".".join(parts[:2])))
    if found is not None:
        return found
    if flavor == "redis" and parts[0] == "8":
        return ("redis-8.0", "redis-7.4")
    if flavor == "valkey" and parts[0] == "9":
        return ("valkey-9.1",)
    return ()


def scratch_name(flavor: str, version: str) -> tuple[str, str]:
    """(matrix server, note) for a live server of this flavor and version."""
    line = ".".join(version.split(".")[:2])
    wanted = stand_ins(flavor, version)
    present = find_servers()
    for name in wanted:
        if name in present:
            same = present[name].version.startswith(line + ".")
            return name, ("" if same else f"{name} stands in for {flavor} {version} (closest of the matrix here)")
    why = f"no server of the matrix for {flavor} {version} on this machine" if not wanted else \
        f"{' or '.join(wanted)} is not on this machine (scripts/get-servers fetches it)"
    return EMBEDDED, f"measured on the embedded {EMBEDDED}: {why}; per-key costs may differ from your server's"


@dataclass
class Scratch:
    name: str
    note: str
    proc: ServerProcess
    client: redis.Redis
    meter: Meter
    version: str = ""
    ballast: int = 0  # keys written under each measurement (plan_ballast)
    ballast_ttl: int = 0  # of which with a TTL (ballast_ttl: the expires table's model)


@contextlib.contextmanager
def scratch_server(flavor: str, version: str, override: str | None = None) -> Iterator[Scratch]:
    if override is not None:
        present = find_servers()
        if override not in present:
            raise AnalyzeError(f"--scratch {override}: not a server of the matrix on this machine "
                               f"({', '.join(present)})")
        name, note = override, f"measured on {override}, as asked (--scratch)"
    else:
        name, note = scratch_name(flavor, version)
    binary = find_servers()[name]
    proc = ServerProcess(binary, options=SCRATCH_OPTIONS).start()
    client = proc.client()
    try:
        yield Scratch(name, note, proc, client, Meter(client, clear=True), binary.version)
    finally:
        client.close()
        proc.stop()


# --- copies of the sampled keys ----------------------------------------------------------


@dataclass
class Copy:
    """One live key as read: its value (bytes; {field: value}; [members]; [(member, score)])."""

    key: bytes
    type: str
    value: Any
    pttl: int
    memory: int  # MEMORY USAGE on the live server


def read_copies(target: Target, stats: PatternStats, limiter: RateLimiter, limit: int) -> list[Copy]:
    """Read up to `limit` of the pattern's reservoir keys, whole (values over BIG_VALUE
    and keys gone or changed type since the scan are left out)."""
    by_node: dict[int, list[bytes]] = {}
    for node, key in stats.reservoir[:limit]:
        by_node.setdefault(node, []).append(key)
    out: list[Copy] = []
    for node, keys in by_node.items():
        client = target.nodes[node].client
        for start in range(0, len(keys), 200):
            chunk = keys[start: start + 200]
            cmds: list[tuple[Any, ...]] = []
            for k in chunk:
                cmds += [("TYPE", k), ("PTTL", k), ("MEMORY", "USAGE", k, "SAMPLES", "0")]
            limiter.take(len(cmds))
            head = roundtrip(client, cmds)
            facts = []
            for i, k in enumerate(chunk):
                kind, pttl, mem = head[3 * i: 3 * i + 3]
                kind_s = bytes(kind).decode() if isinstance(kind, bytes) else ""
                if kind_s in COPYABLE and isinstance(mem, int) and mem <= BIG_VALUE:
                    facts.append(KeyFacts(k, kind_s, int(pttl) if isinstance(pttl, int) else -1, "", mem, node))
            plans = [(f, shape_reads(f, whole=True)) for f in facts]
            reads = [c for _, cs in plans for c in cs]
            limiter.take(len(reads))
            replies = roundtrip(client, reads)
            at = 0
            for f, cs in plans:
                part, at = replies[at: at + len(cs)], at + len(cs)
                value = _value_of(f.type, part)
                if value is not None and f.pttl != -2:
                    out.append(Copy(f.key, f.type, value, f.pttl, f.memory))
    return out


def _value_of(kind: str, replies: list[Any]) -> Any:
    if not replies or any(isinstance(r, Exception) for r in replies) or replies[-1] is None:
        return None
    body = replies[-1]
    if kind == "string":
        return bytes(body)
    if kind == "stream":
        return [(bytes(e[0]), [bytes(x) for x in e[1]]) for e in body]
    items = [bytes(x) for x in body]
    if kind == "hash":
        return dict(zip(items[::2], items[1::2]))
    if kind == "zset":
        return [(m, float(s)) for m, s in zip(items[::2], items[1::2])]
    return items


def write_commands(copies: Sequence[Copy]) -> Iterator[tuple[Any, ...]]:
    """The commands that recreate the copies as they are (values and TTLs)."""
    for c in copies:
        if c.type == "string":
            yield ("SET", c.key, c.value, "PX", c.pttl) if c.pttl > 0 else ("SET", c.key, c.value)
            continue
        if c.type == "hash" and c.value:
            yield ("HSET", c.key, *[x for kv in c.value.items() for x in kv])
        elif c.type == "set" and c.value:
            yield ("SADD", c.key, *c.value)
        elif c.type == "zset" and c.value:
            yield ("ZADD", c.key, *[x for m, s in c.value for x in (repr(s), m)])
        elif c.type == "list" and c.value:
            yield ("RPUSH", c.key, *c.value)
        elif c.type == "stream" and c.value:  # the same IDs in the same order: the same listpacks
            for entry_id, fields in c.value:
                yield ("XADD", c.key, entry_id, *fields)
        else:
            continue
        if c.pttl > 0:
            yield ("PEXPIRE", c.key, c.pttl)


# --- measuring ------------------------------------------------------------------------------


@dataclass
class AsIs:
    keys: int
    freed: int  # used_memory delta of deleting the copies from the scratch server
    memory_usage: int  # their MEMORY USAGE there
    live_memory: int  # their MEMORY USAGE on the live server

    @property
    def per_key(self) -> float:
        return self.freed / self.keys if self.keys else 0.0

    @property
    def overhead(self) -> float:
        """Bytes per key that deleting frees beyond MEMORY USAGE (may be negative)."""
        return (self.freed - self.memory_usage) / self.keys if self.keys else 0.0

    @property
    def check(self) -> float | None:
        """MEMORY USAGE of the copies / of the originals (1.0: the copies are alike)."""
        return self.memory_usage / self.live_memory if self.live_memory else None


def _memory_usage(client: redis.Redis, keys: Sequence[bytes]) -> int:
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.execute_command("MEMORY", "USAGE", k, "SAMPLES", "0")  # type: ignore[no-untyped-call]
    return sum(int(v or 0) for v in pipe.execute(raise_on_error=False) if isinstance(v, int))


def _ballast(scratch: Scratch, n: int) -> None:
    lc = loader_client(scratch.client)
    try:
        bulk_load(lc, (("SET", f"{BALLAST_PREFIX}{i}", "1") for i in range(n)), batch=2000)
    finally:
        lc.close()


def _delete_all_but_ballast(scratch: Scratch) -> None:
    lc = loader_client(scratch.client)
    try:
        keys = [k for k in lc.scan_iter(count=2000) if not bytes(k).startswith(BALLAST_PREFIX.encode())]
        bulk_load(lc, (("DEL", k) for k in keys), batch=1000)
    finally:
        lc.close()


def ballast_ttl(ballast: int, copies: Sequence[Copy], live_keys: float, live_ttl_keys: float) -> int:
    """Ballast keys to give a TTL so that the scale model's expires table is as full as
    the live one's, and holds the copies in the same share: deleting the last keys of a
    table frees its bucket array, which deleting a pattern live does not when other keys
    have TTLs (without this, a pattern with TTLs looked ~8% bigger than it is)."""
    if live_keys <= 0:
        return 0
    model_ttl = live_ttl_keys * (ballast + len(copies)) / live_keys
    return max(0, min(ballast, round(model_ttl - sum(1 for c in copies if c.pttl > 0))))


BALLAST_PX = "9000000000"  # ~104 days: no ballast key expires during a measurement


def _mixed(ballast: int, copies: Sequence[Copy], seed: int = 7, with_ttl: int = 0) -> Iterator[tuple[Any, ...]]:
    """Ballast and copies written in one random order: a live server takes its keys mixed,
    and on Valkey 8.1+ what deleting a key frees depends on what came in after it (a key
    written after all the others frees ~2 B less than one written among them)."""
    groups: list[list[tuple[Any, ...]]] = [
        [("SET", f"{BALLAST_PREFIX}{i}", "1", "PX", BALLAST_PX) if i < with_ttl else ("SET", f"{BALLAST_PREFIX}{i}", "1")]
        for i in range(ballast)]
    groups += [list(write_commands([c])) for c in copies]
    random.Random(seed).shuffle(groups)
    for group in groups:
        yield from group


def measure_as_is(scratch: Scratch, copies: Sequence[Copy]) -> AsIs:
    """Write the copies among the ballast, then delete them: the delta of deleting."""
    meter = scratch.meter
    keys = [c.key for c in copies]
    for _ in range(2):  # a warm-up pass, then the measured one
        meter.reset()
        lc = loader_client(scratch.client)
        try:
            bulk_load(lc, _mixed(scratch.ballast, copies, with_ttl=scratch.ballast_ttl), batch=1000)
        finally:
            lc.close()
    usage = _memory_usage(scratch.client, keys)
    before = meter.reading()
    lc = loader_client(scratch.client)
    try:
        bulk_load(lc, (("DEL", k) for k in keys), batch=1000)
    finally:
        lc.close()
    freed = before.minus(meter.reading())
    meter.flush()
    return AsIs(len(copies), freed, usage, sum(c.memory for c in copies))


@dataclass
class Layout:
    """A densekv layout measured on a sample: bytes for the full count = fixed + per item."""

    kind: str
    description: str
    items: int  # items loaded in the measured pass
    stands_for: int  # the full count those items stand for (keys of the pattern, or members)
    fixed: int  # bytes of the layout's own keys (meta, dictionary), counted once
    variable: int  # bytes of the items loaded
    notes: list[str] = field(default_factory=list)

    @property
    def per_item(self) -> float:
        return self.variable / self.items if self.items else 0.0

    def total(self, items: float) -> float:
        return self.fixed + self.per_item * items


def measure_move(scratch: Scratch, move: Any, copies: Sequence[Copy]) -> Layout:
    """Measure a moves.py Move in the scale model: a warm-up pass; then the copies among
    the ballast as in measure_as_is, the layout's fixed part (build) as a delta, the
    items loaded while the copies they come from are deleted in the move's rhythm
    (moves.py: with libc malloc, as valkey-9.1 runs, the layout then reuses their
    chunks), and everything the move wrote deleted again: items = that delta less the fixed part (the same sense as the bytes
    now: what the keys hold, not the main dictionary's buckets they may have grown)."""
    meter = scratch.meter
    meter.reset()
    lc = loader_client(scratch.client)
    try:
        move.load(move.build(lc))
    finally:
        lc.close()
    meter.reset()
    lc = loader_client(scratch.client)
    try:
        bulk_load(lc, _mixed(scratch.ballast, copies, with_ttl=scratch.ballast_ttl), batch=1000)
        lc.connection_pool.disconnect()
        meter.rebase()
        handle = move.build(lc)
        lc.connection_pool.disconnect()
        fixed = meter.delta()

        def drop(keys: list[bytes]) -> None:
            bulk_load(lc, (("DEL", k) for k in keys), batch=1000)

        move.drop = drop
        loaded = move.load(handle)
        bulk_load(lc, (("DEL", c.key) for c in copies), batch=1000)  # any the move did not take
        lc.connection_pool.disconnect()
    finally:
        move.drop = None
        lc.close()
    before = meter.reading()
    _delete_all_but_ballast(scratch)
    freed = before.minus(meter.reading())
    meter.flush()
    fixed += int(getattr(move, "extra_fixed", 0))  # fixed parts written by load (a dictionary)
    return Layout(move.kind, move.describe(), loaded, move.stands_for, fixed, freed - fixed, list(move.notes))
