"""Listpack and allocator facts (densekv/listpack.py, densekv/allocator.py), no server:
the back-length follows Redis's lpEncodeBacklen at every boundary, the set layouts and
the planner price an entry alike, and every "is this a listpack integer" test of densekv
is the one rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from densekv.allocator import alloc_size, jemalloc_size_class, libc_heap_size
from densekv.codec import is_canonical_int
from densekv.listpack import (
    HEADER,
    as_int64,
    backlen,
    entry_size,
    int_entry_size,
    string_entry_size,
)
from densekv.maps.buckets import Geometry, key_of, locate
from densekv.sets.layouts import Radix, dense_item_bytes
from densekv.tools.planner.listpack import allocated, listpack_bytes

# src/listpack.c lpEncodeBacklen: 1 byte up to 127, 2 below 16383, 3 below 2097151, 4 below
# 268435455, else 5 (the set layouts' own copy used to say 2 bytes at 16383)
BACKLEN = [(1, 1), (126, 1), (127, 1), (128, 2), (129, 2), (16381, 2), (16382, 2), (16383, 3), (16384, 3),
           (2097150, 3), (2097151, 4), (2097152, 4), (268435454, 4), (268435455, 5), (268435456, 5)]


@pytest.mark.parametrize(("size", "length"), BACKLEN)
def test_backlen_is_redis_rule(size: int, length: int) -> None:
    assert backlen(size) == length


@pytest.mark.parametrize(("n", "size"), [
    (0, 2), (15, 17), (62, 64), (63, 65), (64, 67), (125, 128), (126, 130),  # 6-bit length: 1 byte
    (4095, 4099), (4096, 4103),  # 12-bit length: 2 bytes; then 5
    (16377, 16384),  # encoding + data 16382: a 2-byte back-length
    (16378, 16386),  # 16383: 3 bytes (the set layouts' own copy said 2)
    (2097145, 2097153), (2097146, 2097155),  # 2097150 / 2097151: 3 then 4
])
def test_string_entry_sizes_at_the_boundaries(n: int, size: int) -> None:
    assert string_entry_size(n) == size
    assert entry_size(b"x" * n) == size


@pytest.mark.parametrize(("value", "size"), [
    (0, 2), (127, 2), (128, 3), (-1, 3), (4095, 3), (-4096, 3), (4096, 4), (-4097, 4), (32767, 4),
    (-32768, 4), (32768, 5), (2**23 - 1, 5), (2**23, 6), (-(2**31), 6), (2**31, 10), (2**63 - 1, 10),
    (-(2**63), 10),
])
def test_integer_entries(value: int, size: int) -> None:
    assert int_entry_size(value) == size
    assert entry_size(str(value).encode()) == size


def test_the_set_layouts_price_entries_as_the_planner() -> None:
    for p in (1, 255, 256, 4096, 2592, 65536):
        member = bytes(Radix(p, 16).qbytes)  # a binary member: never an integer
        assert dense_item_bytes("set", p, 16) == entry_size(member)
        field = bytes(Radix(p, 16).field_split[0])
        assert dense_item_bytes("hash", p, 16) == entry_size(field) + entry_size(b"5")
    assert listpack_bytes([b"a", b"12", bytes(100)]) == HEADER + 3 + 2 + 103


@pytest.mark.parametrize(("text", "value"), [
    (b"0", 0), (b"-12", -12), (b"9223372036854775807", 2**63 - 1), (b"-9223372036854775808", -(2**63)),
    (b"-0", None), (b"007", None), (b"+1", None), (b" 1", None), (b"1 ", None), (b"", None), (b"-", None),
    (b"9223372036854775808", None), (b"-9223372036854775809", None), (b"1e3", None), (b"1\n", None),
])
def test_one_canonical_int64_rule(text: bytes, value: int | None) -> None:
    assert as_int64(text) == value
    assert is_canonical_int(text) is (value is not None)


@given(st.one_of(st.integers(-(2**64), 2**64).map(lambda i: str(i).encode()), st.binary(max_size=22)))
def test_canonical_means_round_trips_as_an_int64(text: bytes) -> None:
    try:
        value: int | None = int(text)
    except ValueError:
        value = None
    canonical = value is not None and str(value).encode() == text and -(2**63) <= value < 2**63
    assert (as_int64(text) is not None) is canonical
    assert is_canonical_int(text) is canonical


def test_map_bucket_fields_are_listpack_integers() -> None:
    geo = Geometry(1613, 512, 64)
    where = locate("kv", "user:123456", geo)
    assert key_of("kv", where.bucket, where.field, geo) == "user:123456"
    for bad in (b"007", b"-0", b"+5", b"5 ", b"x"):
        with pytest.raises(ValueError, match="no place"):
            key_of("kv", where.bucket, bad, geo)


@pytest.mark.parametrize(("size", "jemalloc", "libc"), [
    (1, 8, 24), (8, 8, 24), (9, 16, 24), (24, 32, 24), (25, 32, 40), (100, 112, 104), (128, 128, 136),
    (129, 160, 136), (1024, 1024, 1032), (1044, 1280, 1048), (6955, 7168, 6968),
])
def test_allocator_size_classes(size: int, jemalloc: int, libc: int) -> None:
    assert alloc_size(size, "jemalloc-5.3.0") == jemalloc == allocated(size, "jemalloc")
    assert alloc_size(size, "libc") == libc == allocated(size, "libc") == libc_heap_size(size)
    assert alloc_size(size, "other") == jemalloc  # unknown allocators are modelled as jemalloc


@given(st.integers(9, 1 << 30))
def test_jemalloc_classes_hold_the_request_and_are_fixed_points(size: int) -> None:
    c = alloc_size(size, "jemalloc")
    assert c == jemalloc_size_class(size) >= size and alloc_size(c, "jemalloc") == c
