"""Bucketing without a server: placement is lossless, dense for sequential and holey ids,
and buckets stay under the listpack limits."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from densekv.maps.buckets import Geometry, KeyTooLong, bucket_count, key_of, locate, split_numeric
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
