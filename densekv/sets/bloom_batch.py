"""A batch of Bloom filter items on its way to the scripts: hashed once, grouped by shard,
cut into script calls under the per-call budget, and the replies put back in item order.

Pure (no I/O); bloom_core's flows drive it. What one item costs the client: one blake2b
call and a few C-level passes (map over C callables, array slices, extended-slice
assignment), no Python statement per item: about 0.45 us on this machine, where the
per-item loop it replaced (hash_bytes, reduce, struct.pack of a list) took about 1.3 us.

How each call reads its stages (GETBIT per bit, or one copy of a stage tested in Lua) and
how many items it carries is plan_call's choice, from the costs below.

Items keep their order inside each shard ("shard order": the shards one after another);
a call is a contiguous range of that order, so its walks are array slices and its reply
(one "0"/"1" per item handled) lands in one slice of `flags`.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from densekv.sets.bloom_math import Stage, hash_many, interleave_walks, walk_columns

#: What one script call may spend, in units of one bit read or set by redis.call from Lua
#: (the walk's arithmetic included). Measured per bit on an idle-ish machine (benchmarks/
#: bloom_speed.py --bit-ops --bit-items 40000, load average 1.0): GETBIT 0.26 us on
#: redis-7.4, 0.28 valkey-8.0, 0.42 valkey-9.1, 0.45 redis-7.0; SETBIT 0.28-0.63 (redis-7.0,
#: where batches set bits by BITFIELD, 0.52). The scripts stop before the next item once
#: they have spent the budget the client gives the call (so at most that plus one item's
#: units), whatever items it sends; the client sizes its calls so the budget rarely stops
#: one. A call that reads and sets every bit by redis.call gets SCRIPT_BITS (0.3-0.6 ms;
#: larger calls measured no cheaper per item). A contains call that copies a stage gets
#: COPY_CALL_BITS: a copy pays for itself only over many bits; 1,800 GETBIT-units are at
#: most 0.81 ms at 0.45 us, and the copy's and local reads' charges below are above what
#: they measured. Measured (bloom_speed.py --baseline HEAD, 200k items, p = 1%, load
#: average 0.6-0.7): such calls' median 0.37-0.55 ms, p99 0.43-0.66 ms on the four servers;
#: the longest 0.95-1.01 ms on redis-7.4 (one call in 623 over 1 ms, in one run of three),
#: where the GETBIT calls before took at most 0.41 ms.
SCRIPT_BITS = 1000
COPY_CALL_BITS = 1800
#: A bit tested in a copy of its stage inside the script (string.byte + bit.band, the walk
#: included): 0.04-0.07 us measured, plus ~0.05 us an item to decode its walk, which a
#: GETBIT call hides but a call of absent items (1-2 bits each) does not: charged 0.3
#: (0.135 us at 0.45 us a unit)
LOCAL_READ_UNITS = 0.3
#: A stage copied into the script with one GET: 0.71-1.11 ns a byte measured (the reply
#: made into a Lua string), charged a unit per 256 bytes (1.76 ns a byte at 0.45 us a unit)
COPY_BYTES_PER_UNIT = 256
#: No copy may take more than this share of its call's budget (the rest is for the items):
#: stages up to 270 KiB are copied (a 200k-item, 1% shard is 256 KiB on jemalloc)
COPY_MAX_SHARE = 0.6
#: A copy is planned only where the units say it saves at least a tenth: they are
#: conservative (the cap's), so a copy that barely wins on them may not win on the server
COPY_GAIN = 0.9
#: Calls are sized for this many times the bits their items are expected to read (or for
#: k bits in every stage, if that gives more items): a batch that reads more than the
#: last one meets the budget, and the rest of its calls go in the next round trip
READS_MARGIN = 2.0
_ONE = ord("1")

#: (shard, lo, hi): items lo..hi-1 of the shard order, all in that shard
Span = tuple[int, int, int]


def items_per_call(bit_calls_per_item: int) -> int:
    """Items per script call when each item costs at most `bit_calls_per_item` bit calls."""
    return max(1, SCRIPT_BITS // max(1, bit_calls_per_item))


@dataclass(frozen=True)
class CallPlan:
    """How one shard's script calls read its stages: items per call, the budget each call
    gets (units), and per stage sent the units of copying it whole (0: read by GETBIT)."""

    items: int
    budget: int
    copies: tuple[int, ...]


def copy_units(stage_bytes: int) -> int:
    return -(-stage_bytes // COPY_BYTES_PER_UNIT)


def plan_call(stages: Sequence[Stage], reads: Sequence[float], items: int, copyable: int) -> CallPlan:
    """Per-bit reads or a copy, for each of the first `copyable` stages of a call (the rest
    are read or set a bit at a time), the copy where it costs a tenth fewer units per item
    (COPY_GAIN) than GETBIT: a copy costs copy_units once per call and LOCAL_READ_UNITS a
    bit, GETBIT one unit a bit. `reads` holds the bits an item is expected to read or set in
    each stage, `items` how many the shard has to send (a call carries no more). A call
    carries what its budget, less the copies, pays for at READS_MARGIN times the expected
    reads, or at k bits in every stage (the most an item costs) if that is more: items
    that read more than expected (a batch unlike the last) may meet the budget, and the
    rest of the call goes in the next round trip."""

    def per_item(trial: list[int]) -> tuple[float, int, int]:
        budget = COPY_CALL_BITS if any(trial) else SCRIPT_BITS
        worst = sum(st.k * (LOCAL_READ_UNITS if c else 1) for st, c in zip(stages, trial))
        expected = sum(r * (LOCAL_READ_UNITS if c else 1) for r, c in zip(reads, trial))
        left = budget - sum(trial)
        n = min(items, max(1, int(left // max(1.0, worst)), int(left // max(0.01, READS_MARGIN * expected))))
        return (sum(trial) + n * expected) / n, n, budget

    copies = [0] * len(stages)
    best, n, budget = per_item(copies)
    for s in range(min(copyable, len(stages))):
        units = copy_units(stages[s].bytes)
        if units > COPY_MAX_SHARE * COPY_CALL_BITS:
            continue
        trial = copies[:s] + [units] + copies[s + 1 :]
        cost, got, given = per_item(trial)
        if cost < COPY_GAIN * best:
            best, n, budget, copies = cost, got, given, trial
    return CallPlan(n, budget, tuple(copies))


def cut(span: Span, per_call: int) -> list[Span]:
    """A span in calls of at most per_call items."""
    shard, lo, hi = span
    return [(shard, a, min(hi, a + per_call)) for a in range(lo, hi, per_call)]


def group_by_shard(picks: Sequence[int], shards: int) -> tuple[list[int], list[Span]]:
    """(batch positions in shard order, one span per shard present) for the shard picks."""
    n = len(picks)
    sid = list(map(shards.__rmod__, picks))
    if shards <= 4 * n:  # a list per shard: no hashing
        lists: list[list[int]] = [[] for _ in range(shards)]
        deque(map(list.append, map(lists.__getitem__, sid), range(n)), maxlen=0)
        groups = [(j, got) for j, got in enumerate(lists) if got]
    else:  # far more shards than items
        by: dict[int, list[int]] = {}
        for i, j in enumerate(sid):
            by.setdefault(j, []).append(i)
        groups = sorted(by.items())
    order: list[int] = []
    spans: list[Span] = []
    for j, got in groups:
        spans.append((j, len(order), len(order) + len(got)))
        order += got
    return order, spans


class Batch:
    """The items of one add_many / contains_many round, hashed and in shard order."""

    def __init__(self, data: Sequence[bytes], shards: int) -> None:
        words = hash_many(data)
        self.n = len(data)
        h1, h2 = words[0::3], words[1::3]
        self.order: list[int] | None = None
        if shards == 1:
            self.spans: list[Span] = [(0, 0, self.n)]
        else:
            self.order, self.spans = group_by_shard(words[2::3], shards)
            h1 = array(h1.typecode, map(h1.__getitem__, self.order))
            h2 = array(h2.typecode, map(h2.__getitem__, self.order))
        self._h1, self._h2 = h1, h2
        self._columns: dict[int, tuple[array[int], array[int]]] = {}
        self.flags = bytearray(b"0" * self.n)  # "1" / "0" per item in shard order

    def walks(self, stages: Sequence[Stage], lo: int, hi: int) -> bytes:
        """The walks argument of items lo..hi-1 for these stages (bloom_add.lua's format)."""
        cols = []
        for st in stages:
            col = self._columns.get(st.bits)
            if col is None:
                col = self._columns[st.bits] = walk_columns(self._h1, self._h2, st.bits)
            cols.append(col)
        return interleave_walks(cols, lo, hi)

    def put(self, lo: int, flags: bytes) -> None:
        self.flags[lo : lo + len(flags)] = flags

    def results(self) -> list[bool]:
        """One bool per item, in the order the items were given."""
        found = list(map(_ONE.__eq__, self.flags))
        if self.order is None:
            return found
        out = [False] * self.n
        deque(map(out.__setitem__, self.order, found), maxlen=0)
        return out
