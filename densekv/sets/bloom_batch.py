"""A batch of Bloom filter items on its way to the scripts: hashed once, grouped by shard,
cut into script calls under the per-call budget, and the replies put back in item order.

Pure (no I/O); bloom_core's flows drive it. What one item costs the client: one blake2b
call and a few C-level passes (map over C callables, array slices, extended-slice
assignment), no Python statement per item: about 0.45 us on this machine, where the
per-item loop it replaced (hash_bytes, reduce, struct.pack of a list) took about 1.3 us.

Items keep their order inside each shard ("shard order": the shards one after another);
a call is a contiguous range of that order, so its walks are array slices and its reply
(one "0"/"1" per item handled) lands in one slice of `flags`.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Sequence

from densekv.sets.bloom_math import Stage, hash_many, interleave_walks, walk_columns

#: Bits one script call may read or set: the scripts stop before the next item once they
#: have touched this many (so at most this plus one item's k per stage sent). One bit from
#: Lua costs about 0.3 us on redis-7.4 here on an idle machine (0.3-0.7 us on the other
#: servers) whichever way it is touched - GETBIT/SETBIT, BITFIELD of 7, BITFIELD of a whole
#: call's bits (dearer: arguments past redis.call's 32 cached ones are allocated one by one)
#: - and sent as BITFIELD with no script it costs the server's CPU the same
#: (benchmarks/bloom_speed.py --bit-ops), so a call holds the server about 0.3 ms (up to
#: ~0.7 ms on redis-7.0); benchmarks/bloom_speed.py measures the longest. Larger calls are cheaper per item (the
#: fixed part of a call is spread wider): 1000 costs a few per cent against 1500 and buys
#: a third off the longest call. The client sizes its calls so the budget rarely stops one.
SCRIPT_BITS = 1000
_ONE = ord("1")

#: (shard, lo, hi): items lo..hi-1 of the shard order, all in that shard
Span = tuple[int, int, int]


def items_per_call(bit_calls_per_item: int) -> int:
    """Items per script call when each item costs at most `bit_calls_per_item` bit calls."""
    return max(1, SCRIPT_BITS // max(1, bit_calls_per_item))


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
