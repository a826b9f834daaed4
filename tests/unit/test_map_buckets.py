"""Bucketing without a server: placement is lossless, dense for sequential and holey ids,
numeric fields take the shortest listpack integer entries, and buckets stay under the
listpack limits."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from densekv.errors import KeyTooLong
from densekv.maps.buckets import (
    FORMAT,
    Geometry,
    bucket_count,
    field_index,
    field_int,
    key_of,
    locate,
    split_numeric,
)
from densekv.maps.zipkeys import Aliases

GEO = Geometry(buckets=bucket_count(200_000, 512), entries_limit=512, value_limit=64)


@given(st.text(max_size=40), st.sampled_from([Aliases(), Aliases({"user": "u", "post": "p"})]))
def test_locate_then_key_of_is_the_identity(key: str, aliases: Aliases) -> None:
    try:
        loc = locate("ns", key, GEO, aliases)
    except KeyTooLong:
        return
    assert key_of("ns", loc.bucket, loc.field, GEO, aliases) == key


@given(st.text(max_size=20), st.text(max_size=20))
def test_two_keys_never_share_a_place(a: str, b: str) -> None:
    if a != b:
        try:
            la, lb = locate("ns", a, GEO), locate("ns", b, GEO)
        except KeyTooLong:
            return
        assert (la.bucket, la.field) != (lb.bucket, lb.field)


@pytest.mark.parametrize(
    ("key", "split"),
    [("user:7", ("user:", 7)), ("user:007", ("user:00", 7)), ("user:000", ("user:00", 0)),
     ("77", ("", 77)), ("user:", None), ("x" + "9" * 19, None), ("a1b", None)],
)
def test_numeric_tails(key: str, split: tuple[str, int] | None) -> None:
    assert split_numeric(key) == split


def test_numeric_fields_are_listpack_integers() -> None:
    for n in [0, 1, 466, 467, 10**8, 10**17]:
        field = locate("ns", f"user:{n}", GEO).field
        assert field == str(int(field)).encode()


def test_sequential_and_holey_ids_fill_buckets_evenly_under_the_limit() -> None:
    rng = random.Random(5)
    for ids in (range(200_000), rng.sample(range(10**8), 200_000)):
        sizes = Counter(locate("ns", f"user:{i}", GEO).bucket for i in ids)
        assert len(sizes) == GEO.buckets
        assert max(sizes.values()) <= 512
        assert min(sizes.values()) > 60  # dense: the seed's id // 100 leaves ~1 per bucket here


def test_bucket_count_keeps_mean_plus_five_sigma_under_the_limit() -> None:
    for expected, limit in [(0, 128), (1, 128), (1000, 128), (200_000, 512), (10**7, 512)]:
        b = bucket_count(expected, limit, target=None)
        mean = expected / b
        assert mean + 5 * mean**0.5 <= limit
        if b > 1:
            smaller = expected / (b - 1)
            assert smaller + 5 * smaller**0.5 > limit


def test_the_target_keeps_sequential_fields_in_the_short_listpack_integers() -> None:
    b = bucket_count(200_000, 512)
    assert 200_000 / b <= 124
    assert max(int(locate("ns", f"user:{i}", Geometry(b, 512, 64)).field) for i in range(200_000)) <= 127


def test_a_key_too_long_for_a_field_is_refused_and_numeric_keys_never_are() -> None:
    with pytest.raises(KeyTooLong, match="hash-max-listpack-value"):
        locate("ns", "k" * 65, GEO)
    locate("ns", "k" * 500 + ":5", GEO)  # the prefix lives in the bucket's name


def entry_bytes(v: int) -> int:
    """Bytes of a listpack integer entry holding v, back length included (listpack.c,
    lpEncodeIntegerGetType), written out independently of buckets.py."""
    if 0 <= v <= 127:
        return 2
    for bits, size in ((13, 3), (16, 4), (24, 5), (32, 6)):
        if -(1 << (bits - 1)) <= v < 1 << (bits - 1):
            return size
    return 10


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_field_int_is_a_bijection_onto_int64(q: int) -> None:
    v = field_int(q)
    assert -(2**63) <= v < 2**63 and field_index(v) == q


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_field_index_inverts_every_int64(v: int) -> None:
    assert field_int(field_index(v)) == v


def test_field_int_orders_the_integers_by_entry_size() -> None:
    # the whole 16-bit range exactly, and every quotient takes the smallest entry it can
    assert sorted(field_int(q) for q in range(65536)) == list(range(-32768, 32768))
    sizes = [entry_bytes(field_int(q)) for q in range(70_000)]
    assert sizes == sorted(sizes)
    assert [sizes.count(s) for s in (2, 3, 4)] == [128, 8192 - 128, 65536 - 8192]
    for q, size in [(2**24 - 1, 5), (2**24, 6), (2**32 - 1, 6), (2**32, 10)]:
        assert entry_bytes(field_int(q)) == size


@pytest.mark.parametrize("q", [-1, 2**64])
def test_field_int_refuses_what_no_int64_holds(q: int) -> None:
    with pytest.raises(ValueError):
        field_int(q)


def test_holey_ids_get_four_byte_fields_and_sequential_ids_two() -> None:
    b = bucket_count(200_000, 512)
    geo = Geometry(b, 512, 64)
    rng = random.Random(5)
    holey = [entry_bytes(int(locate("ns", f"user:{i}", geo).field)) for i in rng.sample(range(10**8), 20_000)]
    seq = [entry_bytes(int(locate("ns", f"user:{i}", geo).field)) for i in range(200_000)]
    assert max(holey) == 4 and set(seq) == {2}


def test_numeric_fields_are_canonical_signed_integers() -> None:
    # a listpack keeps a field as an integer only in canonical form (no "+", "-0", "007")
    for n in range(0, 10**8, 9973):
        field = locate("ns", f"user:{n}", GEO).field
        assert field == str(int(field)).encode()


@pytest.mark.parametrize("buckets", [1, 2, 61, 62, 63, 1613, 3844, 3845, 10**6])
@pytest.mark.parametrize("key", ["user:0", "user:007", "7", "0", "a1", "user:999999999999999999", "x:{}.9"])
def test_round_trip_at_every_tag_width(buckets: int, key: str) -> None:
    geo = Geometry(buckets, 512, 64)
    loc = locate("ns", key, geo)
    assert key_of("ns", loc.bucket, loc.field, geo) == key


def test_leading_zeros_stay_distinct() -> None:
    keys = ["user:7", "user:07", "user:007", "user:0", "user:00", "user:", "7", "07"]
    places = {(loc.bucket, loc.field) for loc in (locate("ns", k, GEO) for k in keys)}
    assert len(places) == len(keys)


def test_bucket_names_are_short_and_tagged() -> None:
    b = bucket_count(200_000, 512)
    geo = Geometry(b, 512, 64)
    assert geo.tag_width == 2
    digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    r = 123456 % b
    loc = locate("kv", "user:123456", geo)
    assert loc.bucket == f"kv:m:{{{digits[r // 62]}{digits[r % 62]}user:}}".encode()  # 14 bytes
    assert loc.field == b"76"  # 123456 // 1613
    assert loc.ool == loc.bucket.replace(b"kv:m:", b"kv:om:") + b":" + loc.field
    assert locate("kv", "nodigits", geo).bucket.startswith(b"kv:h:{")


@pytest.mark.parametrize(
    ("bucket", "field"),
    [(b"other:m:{00user:}", b"1"), (b"ns:m:{00user:", b"1"), (b"ns:x:{00user:}", b"1"),
     (b"ns:m:{0}", b"1"), (b"ns:m:{zzuser:}", b"1"), (b"ns:m:{!!user:}", b"1"),
     (b"ns:m:{00user:}", b"007"), (b"ns:m:{00user:}", b"-0"), (b"ns:m:{00user:}", b"abc"),
     (b"ns:m:{00user:}", b"9223372036854775807")],
)
def test_key_of_refuses_places_this_layout_never_writes(bucket: bytes, field: bytes) -> None:
    with pytest.raises(ValueError):
        key_of("ns", bucket, field, Geometry(1613, 512, 64))


def test_the_format_names_this_layout() -> None:
    assert FORMAT == "2"


@given(st.text(alphabet="ab:{}.0", max_size=6), st.integers(min_value=0, max_value=10**18 - 1),
       st.integers(min_value=1, max_value=10**7))
def test_numeric_keys_round_trip_under_any_bucket_count(prefix: str, n: int, buckets: int) -> None:
    geo = Geometry(buckets, 512, 64)
    for key in (f"{prefix}{n}", f"{prefix}0{n}"):
        loc = locate("ns", key, geo)
        assert loc.bucket.startswith(b"ns:m:{") and key_of("ns", loc.bucket, loc.field, geo) == key
