"""Items and partition math of compact sets: pure, no server."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from densekv.allocator import alloc_size
from densekv.errors import BadItem
from densekv.listpack import int_entry_size, string_entry_size
from densekv.sets.items import ItemCodec
from densekv.sets.layouts import (
    HASH_MARGIN,
    DenseHash,
    DenseSet,
    DenseSplitHash,
    FlatKeys,
    Radix,
    SetLimits,
    dense_item_bytes,
    plan_dense,
)


@given(st.binary(min_size=16, max_size=16), st.booleans())
def test_bytes_round_trip(raw: bytes, spread: bool) -> None:
    codec = ItemCodec(16, spread)
    stored = codec.encode(raw)
    assert len(stored) == 16 and codec.decode(stored) == raw


@given(st.integers(min_value=1, max_value=40), st.data())
def test_spread_is_a_bijection_for_every_width(size: int, data: st.DataObject) -> None:
    codec = ItemCodec(size)
    raw = data.draw(st.binary(min_size=size, max_size=size))
    assert codec.decode(codec.encode(raw)) == raw


def test_conversion_rules() -> None:
    codec = ItemCodec(16, spread=False)
    u = uuid.uuid4()
    assert codec.encode(u) == u.bytes
    assert codec.encode(str(u)) == u.bytes
    assert codec.encode(u.hex.upper()) == u.bytes
    assert codec.encode(f"urn:uuid:{u}") == u.bytes
    assert codec.encode(5) == (5).to_bytes(16, "big")
    assert codec.encode(2**128 - 1) == b"\xff" * 16
    assert codec.encode(bytearray(16)) == bytes(16)
    assert ItemCodec(4, spread=False).encode("0a0b0c0d") == b"\x0a\x0b\x0c\x0d"


@pytest.mark.parametrize(
    "bad",
    [b"short", b"x" * 17, -1, 2**128, "hello", "zz" * 16, 1.5, None, True, ["a"], {"a": 1}],
)
def test_bad_items_are_refused_with_a_typed_error(bad: object) -> None:
    with pytest.raises(BadItem):
        ItemCodec(16).encode(bad)


def test_uuid_needs_16_byte_items() -> None:
    with pytest.raises(BadItem):
        ItemCodec(8).encode(uuid.uuid4())
    with pytest.raises(BadItem):
        ItemCodec(8).encode(str(uuid.uuid4()))


def test_one_bad_item_in_a_batch_fails_the_batch() -> None:
    with pytest.raises(BadItem):
        ItemCodec(16).encode_all([bytes(16), b"bad"])
    with pytest.raises(BadItem):
        ItemCodec(16).encode_all(bytes(16))


def test_sequential_ints_spread_evenly_over_partitions() -> None:
    codec = ItemCodec(16)
    radix = Radix(64, 16)
    counts = [0] * 64
    for i in range(64 * 100):
        counts[radix.split(codec.encode(i))[0]] += 1
    assert max(counts) < 2 * 100 and min(counts) > 100 // 2
    plain = ItemCodec(16, spread=False)
    radix2 = Radix(64, 16)
    assert {radix2.split(plain.encode(i * 64))[0] for i in range(100)} == {0}  # why spread exists


@given(st.integers(min_value=1, max_value=200_000), st.binary(min_size=16, max_size=16))
def test_radix_split_join(partitions: int, raw: bytes) -> None:
    radix = Radix(partitions, 16)
    p, q = radix.split(raw)
    assert 0 <= p < partitions and q <= radix.qmax
    assert radix.join(p, q) == raw


@given(st.integers(min_value=1, max_value=100_000), st.binary(min_size=16, max_size=16))
def test_layout_members_round_trip(partitions: int, raw: bytes) -> None:
    for cls in (DenseSet, DenseHash, DenseSplitHash):
        lay = cls("ns", partitions, 16)
        key, member = lay.locate(raw)
        p = int(key[key.index(b"{") + 1 : -1])
        assert lay.stored_of(p, member) == raw
    flat = FlatKeys("ns", partitions, 16)
    key, _ = flat.locate(raw)
    assert flat.item_of_key(key) == raw


def test_dense_members_drop_the_partition() -> None:
    assert len(DenseSet("ns", 4096, 16).member(Radix(4096, 16).qmax)) == 15
    assert len(DenseSet("ns", 16, 16).member(Radix(16, 16).qmax)) == 16


@given(st.integers(min_value=1, max_value=2**32), st.integers(min_value=1, max_value=32))
def test_split_field_takes_at_most_seven_low_bits(partitions: int, size: int) -> None:
    radix = Radix(partitions, size)
    fbytes, low = radix.field_split
    assert 0 <= low <= 7 and fbytes >= 1
    assert radix.qmax >> low < 1 << (8 * fbytes)  # the high part fits the field
    lay = DenseSplitHash("ns", partitions, size)
    for q in (0, radix.qmax, radix.qmax // 3):
        member = lay.member(q)
        assert len(member) == fbytes + 1 and member[-1] < 128 and lay.quotient(member) == q


def test_split_field_saves_a_byte_per_16_byte_item() -> None:
    assert Radix(2592, 16).field_split == (14, 5)
    assert dense_item_bytes("hash", 2592, 16) == 16 + 2  # 14-byte field + 7-bit integer value
    assert dense_item_bytes("set", 12024, 16) == 17
    assert Radix(1, 16).field_split == (16, 0)  # one partition: nothing to gain, still exact


def test_listpack_cost_model() -> None:
    assert string_entry_size(15) == 17 and int_entry_size(0) == 2 and string_entry_size(100) == 103
    assert alloc_size(1044, "jemalloc") == 1280 and alloc_size(1024, "jemalloc") == 1024
    assert alloc_size(1044, "libc") == 1048


def test_dense_plan_per_server() -> None:
    old = SetLimits(512, 64, None, None, 128, 64, "jemalloc")
    new = SetLimits(512, 64, 128, 64, 128, 64, "jemalloc")
    assert plan_dense(1_000_000, 16, old).encoding == "hash"
    choice = plan_dense(1_000_000, 16, new)
    # a near tie goes to the set (one SADD per add, not a script)
    assert choice.encoding == "set" and choice.predicted["set"] < choice.predicted["hash"] + HASH_MARGIN
    assert plan_dense(1_000_000, 16, SetLimits(512, 64, 128, 64, 128, 64, "libc")).encoding == "set"
    # where a set holds far fewer per key than a hash, the split hash wins
    assert plan_dense(1_000_000, 16, SetLimits(512, 64, 16, 64, 128, 64, "jemalloc")).encoding == "hash"
    # the fullest partition stays under the limit: mean + 4 sigma
    mean = 1_000_000 / choice.partitions
    assert mean + 4 * mean**0.5 <= 128


# --- the batch path: integers, grouping, the split hash's one-round-trip add ---------------


@given(st.lists(st.one_of(st.binary(min_size=16, max_size=16), st.integers(0, 2**128 - 1), st.uuids()),
                max_size=30), st.booleans())
def test_encode_ints_is_encode_as_integers(items: list[object], spread: bool) -> None:
    codec = ItemCodec(16, spread)
    assert codec.encode_ints(items) == [int.from_bytes(codec.encode(x), "big") for x in items]
    assert codec.encode_all(items) == [codec.encode(x) for x in items]


def test_encode_ints_refuses_a_bad_item_anywhere() -> None:
    with pytest.raises(BadItem):
        ItemCodec(16).encode_ints([bytes(16), b"short", bytes(16)])
    with pytest.raises(BadItem):
        ItemCodec(16).encode_ints(bytes(16))  # one bytes object, not an iterable of items


@pytest.mark.parametrize("partitions", [1, 7, 1000, 10**9])  # buckets, and the dict branch
def test_group_by_partition_keeps_every_item_once(partitions: int) -> None:
    from densekv.sets.compact import group_by_partition

    ints = [(i * 2654435761) % 2**64 for i in range(500)] + [3, 3]
    parts = group_by_partition(ints, partitions)
    seen = sorted(j for where, _ in parts.values() for j in where)
    assert seen == list(range(len(ints)))
    for p, (where, qs) in parts.items():
        assert [ints[j] for j in where] == [q * partitions + p for q in qs]
        assert where == sorted(where)


def test_split_hash_add_reads_its_two_replies() -> None:
    lay = DenseSplitHash("n", 3000, 16)
    stored = lay.radix.join(5, (1234 << lay.low_bits) | 6)
    plan = lay.plan_add(stored)
    assert [s.args[0] for s in plan.steps] == ["HSETNX", "HGET"]
    assert plan.decode([1, b"6"]) is True  # made the short field
    assert plan.decode([0, b"6"]) is False  # the short field is this item
    assert plan.decode([0, str(6 + 128).encode()]) is False  # ... marked: it has long forms
    assert plan.decode([0, b"7"]) is None  # another item's field: the script decides
    assert plan.decode([0, None]) is None  # removed in between: the script decides
    fallback = lay.plan_add_fallback(stored)
    assert fallback.steps[0].script.name == "set_dense_add"  # type: ignore[union-attr]
