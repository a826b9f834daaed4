"""Bloom filter arithmetic, no server: sizing, allocator size classes, hashing, positions."""

from __future__ import annotations

import itertools
import math
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from densekv.allocator import jemalloc_size_class
from densekv.errors import BadBloomItem, BloomFull, BloomParameterError
from densekv.sets.bloom_math import (
    EXACT,
    JEMALLOC,
    LIBC,
    MAX_SHARD_BYTES,
    MAX_STRING_BYTES,
    BloomSpec,
    allocator_rule,
    best_k,
    fill_string,
    fp_rate,
    glibc_usable,
    hash_bytes,
    hash_many,
    interleave_walks,
    item_bytes,
    items_bytes,
    min_bits,
    pack_walks,
    positions,
    reduce,
    sds_header,
    shard_capacity,
    shard_count,
    shard_of,
    stage_bytes,
    string_allocation,
    textbook_bits,
    walk_columns,
)

# (string length, bytes MEMORY USAGE reported minus the key's fixed 48) measured with
# SETRANGE on redis-7.0, redis-7.4 and valkey-8.0 (jemalloc-5.3.0), see test_bloom.py.
JEMALLOC_MEASURED = [
    (100, 112), (252, 256), (253, 320), (1000, 1024), (4090, 4096), (4091, 5120),
    (65530, 65536), (65531, 81920), (131062, 131072), (131063, 163840),
    (1198000, 1310720), (1310710, 1310720), (1310711, 1572864), (3594000, 3670016),
]
# valkey-9.1 (glibc), heap path: usable = 16j + 8 (MEMORY USAGE minus the key's 24).
LIBC_HEAP_MEASURED = [(100, 104), (101, 120), (1000, 1016), (65000, 65016), (1198001, 1198024)]


@pytest.mark.parametrize("length,alloc", JEMALLOC_MEASURED)
def test_jemalloc_string_allocation_matches_the_server(length: int, alloc: int) -> None:
    assert string_allocation(length, JEMALLOC) == alloc


@pytest.mark.parametrize("length,usable", LIBC_HEAP_MEASURED)
def test_glibc_heap_usable_size_matches_the_server(length: int, usable: int) -> None:
    request = sds_header(length) + length + 1
    heap = ((request + 8 + 15) & ~15) - 8
    assert heap == usable
    assert glibc_usable(request) <= heap  # densekv never asks for more than the heap gives


@pytest.mark.parametrize(
    "request_,klass",
    [(1, 8), (8, 8), (9, 16), (100, 112), (128, 128), (129, 160), (257, 320), (4097, 5120),
     (16385, 20480), (1 << 20, 1 << 20), ((1 << 20) + 1, 1310720), (3594010, 3670016)],
)
def test_jemalloc_size_classes(request_: int, klass: int) -> None:
    assert jemalloc_size_class(request_) == klass


@given(st.integers(min_value=1, max_value=1 << 32))
def test_jemalloc_classes_are_four_per_doubling(n: int) -> None:
    c = jemalloc_size_class(n)
    assert n <= c
    assert c <= max(n * 1.25, n + 15)
    assert jemalloc_size_class(c) == c


@given(st.integers(min_value=1, max_value=64 << 20))
def test_glibc_rounding_is_free_on_heap_and_mmap_paths(request_: int) -> None:
    usable = glibc_usable(request_)
    def heap(r: int) -> int:
        return max(24, ((r + 8 + 15) & ~15) - 8)

    def mmap(r: int) -> int:
        return ((r + 16 + 4095) // 4096) * 4096 - 16

    assert usable >= request_
    assert mmap(usable) == mmap(request_)
    if request_ + 16 <= 32 << 20:
        assert heap(usable) == heap(request_)


@pytest.mark.parametrize("rule", [JEMALLOC, LIBC, EXACT])
@given(length=st.integers(min_value=1, max_value=50 << 20))
@settings(max_examples=200)
def test_fill_string_costs_nothing_more(rule: str, length: int) -> None:
    filled = fill_string(length, rule)
    assert filled >= length
    assert string_allocation(filled, rule) == string_allocation(length, rule)
    if rule == JEMALLOC:  # and it is the longest such string
        assert string_allocation(filled + 1, rule) > string_allocation(length, rule)


def test_allocator_rule_from_info() -> None:
    assert allocator_rule("jemalloc-5.3.0") == JEMALLOC
    assert allocator_rule("libc") == LIBC
    assert allocator_rule("tcmalloc-2.9") == EXACT


@pytest.mark.parametrize("n,p", [(1, 0.5), (100, 0.01), (10_000, 0.001), (1_000_000, 0.01), (1_000_000, 1e-6), (5000, 0.3)])
def test_min_bits_reaches_p_with_an_integer_k(n: int, p: float) -> None:
    m = min_bits(n, p)
    assert fp_rate(m, n, best_k(m, n)) <= p
    assert m >= textbook_bits(n, p) * 0.999
    assert m <= textbook_bits(n, p) * 1.02 + 16
    if m > 16:
        assert min(fp_rate(m - 2, n, k) for k in range(1, 60)) > p * 0.999


def test_best_k_is_the_textbook_k_near_the_optimum() -> None:
    assert best_k(9_585_059, 1_000_000) == 7  # m/n ln 2 = 6.64
    assert best_k(28_755_176, 1_000_000) == 20  # 19.93
    k = best_k(10_000, 1000)
    assert all(fp_rate(10_000, 1000, k) <= fp_rate(10_000, 1000, j) for j in range(1, 30))


@pytest.mark.parametrize("rule", [JEMALLOC, LIBC, EXACT])
@pytest.mark.parametrize("p", [0.01, 1e-6])
def test_stage_zero_of_one_million(rule: str, p: float) -> None:
    spec = BloomSpec(1_000_000, p, 1, rule=rule)
    stage = spec.stage(0)
    assert stage.fp_rate(1_000_000) <= p
    assert stage.bits >= min_bits(1_000_000, p)
    assert stage.allocation == string_allocation(stage.bytes, rule)
    if rule == JEMALLOC:  # 1.2 MB and 3.6 MB land in the 1.25 MiB and 3.5 MiB classes
        assert stage.allocation == {0.01: 1310720, 1e-6: 3670016}[p]


def test_growth_stages_tighten_and_the_sum_is_bounded() -> None:
    spec = BloomSpec(1000, 0.01, 1, growth=2, tightening=0.5, rule=JEMALLOC)
    stages = [spec.stage(t) for t in range(8)]
    assert [s.capacity for s in stages] == [1000 * 2**t for t in range(8)]
    assert sum(s.fp_rate(s.capacity) for s in stages) <= spec.fp_bound == pytest.approx(0.02)
    assert all(b.k >= a.k for a, b in itertools.pairwise(stages))


def test_a_filter_past_512_mb_is_sharded_under_the_limit() -> None:
    n, p = 1_000_000_000, 0.001  # 1.8 GB of bits
    shards = shard_count(n, p)
    spec = BloomSpec(n, p, shards, rule=JEMALLOC)
    stage = spec.stage(0)
    assert shards > 1
    assert stage.bytes <= MAX_SHARD_BYTES * 1.3 and stage.bytes <= MAX_STRING_BYTES
    assert stage.bytes * shards > 512 << 20
    assert stage.fp_rate(shard_capacity(n, shards)) <= p


def test_shard_capacity_has_a_four_sigma_margin() -> None:
    assert shard_capacity(1000, 1) == 1000
    assert shard_capacity(1_000_000, 4) == 250_000 + 4 * 500


def test_a_stage_past_the_string_limit_is_refused() -> None:
    with pytest.raises(BloomFull):
        stage_bytes(10**10, 0.01, JEMALLOC)


@pytest.mark.parametrize(
    "capacity,error_rate",
    [(0, 0.01), (-5, 0.01), (1.5, 0.01), (True, 0.01), ("10", 0.01), (10, 0), (10, 1), (10, 1.5),
     (10, -0.1), (10, float("nan")), (10, "0.1")],
)
def test_bad_parameters_raise(capacity: object, error_rate: object) -> None:
    with pytest.raises(BloomParameterError):
        BloomSpec(capacity, error_rate, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("kw", [{"growth": 1}, {"growth": 2.5}, {"tightening": 1.0}, {"tightening": 0}, {"shards": 0}])
def test_bad_growth_settings_raise(kw: dict[str, object]) -> None:
    args = {"capacity": 10, "error_rate": 0.01, "shards": 1, **kw}
    with pytest.raises(BloomParameterError):
        BloomSpec(**args)  # type: ignore[arg-type]


# --- items, hashes, positions -------------------------------------------------------------


@pytest.mark.parametrize(
    "item,expected",
    [(b"ab", b"ab"), (bytearray(b"ab"), b"ab"), (memoryview(b"ab"), b"ab"), ("ab", b"ab"),
     ("é", "é".encode()), (42, b"42"), (-7, b"-7"), (0, b"0"),
     (uuid.UUID(int=1), (1).to_bytes(16, "big"))],
)
def test_item_conversion(item: object, expected: bytes) -> None:
    assert item_bytes(item) == expected


@pytest.mark.parametrize("item", [True, None, 1.5, [b"a"], {"a": 1}, object()])
def test_other_items_are_refused(item: object) -> None:
    with pytest.raises(BadBloomItem):
        item_bytes(item)


def test_hash_is_pinned() -> None:
    # Stored filters depend on it: changing the hash is a new metadata format.
    h = hash_bytes(b"densekv")
    assert h == (16743723799480106275, 17766850574048402594, 3134620477799258639)
    assert hash_bytes(b"densekv!") != h


def test_int_and_its_digits_are_one_item() -> None:
    assert hash_bytes(item_bytes(42)) == hash_bytes(item_bytes("42"))


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.integers(8, 1 << 32), st.integers(1, 40))
def test_positions_walk_like_the_script(h1: int, h2: int, m: int, k: int) -> None:
    a, b = reduce((h1, h2, 0), m)
    assert 0 <= a < m and 0 < b < m or (m == 1)
    walk, pos = [], a
    for _ in range(k):  # what bloom_add.lua does: additions only, no overflow past 2m
        walk.append(pos)
        pos += b
        if pos >= m:
            pos -= m
    assert walk == positions(a, b, m, k) == [(h1 + i * h2) % m if h2 % m else (h1 + i) % m for i in range(k)]
    assert 2 * m < 2**53  # exact in Lua's doubles


def test_shards_are_picked_evenly() -> None:
    counts = [0] * 8
    for i in range(16000):
        counts[shard_of(hash_bytes(i.to_bytes(4, "big")), 8)] += 1
    assert all(abs(c - 2000) < 4 * math.sqrt(2000) for c in counts)


def test_walks_are_packed_as_little_endian_u32_pairs() -> None:
    import struct

    hashed = [hash_bytes(b"a"), hash_bytes(b"b")]
    blob = pack_walks(hashed, [1000, 77])
    values = struct.unpack("<8I", blob)
    assert values == (*reduce(hashed[0], 1000), *reduce(hashed[0], 77), *reduce(hashed[1], 1000), *reduce(hashed[1], 77))
    assert pack_walks([], [1000]) == b""


def test_script_calls_are_bounded_by_bit_operations() -> None:
    """The client cuts a shard's items into calls of at most SCRIPT_BITS bit calls (the
    scripts also stop on their own once they have made that many)."""
    from densekv.sets.bloom_batch import SCRIPT_BITS, cut, items_per_call

    assert items_per_call(7) == SCRIPT_BITS // 7 and items_per_call(7) * 7 <= SCRIPT_BITS
    assert items_per_call(20 + 21) * 41 <= SCRIPT_BITS  # two stages sent: both k count
    assert items_per_call(10**6) == 1 and items_per_call(0) == SCRIPT_BITS  # floor, and no k
    assert cut((3, 10, 520), 214) == [(3, 10, 224), (3, 224, 438), (3, 438, 520)]
    assert cut((0, 5, 5), 214) == []


# --- the batch path: the same numbers as the per-item functions, in C-level passes ----------

batch_items = st.lists(st.one_of(st.binary(max_size=40), st.text(max_size=20), st.integers(-10**20, 10**20),
                                 st.uuids()), max_size=60)


@given(batch_items)
def test_items_bytes_is_item_bytes_of_each(items: list[object]) -> None:
    assert items_bytes(items) == [item_bytes(x) for x in items]


@pytest.mark.parametrize("items", [[b"a", "b", True], [None], ["x", 1.5], [b"ok", [b"a"]]])
def test_items_bytes_refuses_a_bad_item_anywhere(items: list[object]) -> None:
    with pytest.raises(BadBloomItem):
        items_bytes(items)


@given(st.lists(st.binary(max_size=40), max_size=60), st.integers(8, (1 << 32) - 8))
def test_batch_hashes_and_walks_are_the_per_item_ones(data: list[bytes], m: int) -> None:
    words = hash_many(data)
    assert [tuple(words[3 * i : 3 * i + 3]) for i in range(len(data))] == [hash_bytes(x) for x in data]
    a, b = walk_columns(words[0::3], words[1::3], m)
    assert list(zip(a, b)) == [reduce(hash_bytes(x), m) for x in data]
    assert interleave_walks([(a, b), walk_columns(words[0::3], words[1::3], 77)], 0, len(data)) == pack_walks(
        [hash_bytes(x) for x in data], [m, 77])


def test_a_zero_step_becomes_one() -> None:
    from array import array

    a, b = walk_columns(array("Q", [5, 1000]), array("Q", [1000, 2001]), 1000)  # h2 mod m = 0, then 1
    assert list(a) == [5, 0] and list(b) == [1, 1]


@given(st.lists(st.binary(min_size=1, max_size=8), min_size=1, max_size=80), st.integers(1, 300))
def test_a_batch_groups_by_shard_and_answers_in_item_order(data: list[bytes], shards: int) -> None:
    from densekv.sets.bloom_batch import Batch

    batch = Batch(data, shards)
    seen: list[int] = []
    for shard, lo, hi in batch.spans:
        members = list(range(lo, hi)) if batch.order is None else batch.order[lo:hi]
        assert all(shard_of(hash_bytes(data[i]), shards) == shard for i in members)
        assert members == sorted(members)  # item order kept inside a shard
        seen += members
        batch.put(lo, b"".join(b"1" if i % 3 == 0 else b"0" for i in members))
    assert sorted(seen) == list(range(len(data)))
    assert [shard for shard, _, _ in batch.spans] == sorted({shard_of(hash_bytes(x), shards) for x in data})
    assert batch.results() == [i % 3 == 0 for i in range(len(data))]
    stage = BloomSpec(100, 0.01, shards).stage(0)
    shard, lo, hi = batch.spans[0]
    members = list(range(lo, hi)) if batch.order is None else batch.order[lo:hi]
    assert batch.walks([stage], lo, hi) == pack_walks([hash_bytes(data[i]) for i in members], [stage.bits])
