"""Pure session logic: tokens, digests, partition math and the compact record."""

from __future__ import annotations

from dataclasses import replace

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from densekv.errors import DecodeError
from densekv.keys import join_digest, partition_count, split_digest
from densekv.sessions.model import Record, digest_of, new_token
from densekv.sessions.payload import CONTINUED, CONTINUED_HERE, MARKER
from densekv.sessions.record import pack_record, unpack_record

identities = st.one_of(st.none(), st.integers(0, 2**64 - 1),
                       st.text(min_size=1, max_size=60).filter(lambda s: 0 < len(s.encode()) <= 255))
# codec headers: codec.py reserves the three markers' bytes, so no framed payload starts with one
framed = st.binary(min_size=2, max_size=80).filter(lambda b: b[:1] not in (MARKER, CONTINUED, CONTINUED_HERE))
payloads = st.one_of(st.none(), framed, st.just(MARKER), st.binary(max_size=60).map(lambda b: CONTINUED + b),
                     st.binary(max_size=60).map(lambda b: CONTINUED_HERE + b))


@given(st.binary(min_size=16, max_size=16), identities, st.integers(0, 2**32 - 1), st.integers(0, 1000), payloads)
def test_record_round_trips(digest: bytes, identity: object, expires: int, extra: int, payload: bytes | None) -> None:
    absolute = min(expires + extra, 2**32 - 1)
    rec = Record(digest, identity, expires, absolute)  # type: ignore[arg-type]
    raw = pack_record(rec, payload)
    got = unpack_record(digest, raw)
    here = payload is not None and payload[:1] == CONTINUED_HERE
    part = payload[1:] if payload is not None and payload[:1] in (CONTINUED, CONTINUED_HERE) else None
    outside = payload == MARKER or part is not None
    assert got == replace(rec, payload=None if outside else payload, outside=outside, raw=raw, part=part,
                          here=here)


def test_format_1_records_with_a_plain_msgpack_payload_still_read() -> None:
    raw = bytes([0x40 | 1]) + (1_800_000_000).to_bytes(4, "big") + b"\x07" + msgpack.packb({"a": 1})
    assert unpack_record(b"d" * 16, raw).data == {"a": 1}


def test_an_anonymous_record_has_no_identity_bytes() -> None:
    raw = pack_record(Record(b"d" * 16, None, 1_800_000_000, 1_800_000_000))
    assert len(raw) == 5 and unpack_record(b"d" * 16, raw).identity is None
    assert unpack_record(b"d" * 16, pack_record(Record(b"d" * 16, 0, 1, 1))).identity == 0


def test_small_record_is_small() -> None:
    assert len(pack_record(Record(b"d" * 16, 4_000_000_000, 1_800_000_000, 1_800_000_000))) == 9


@pytest.mark.parametrize("raw", [b"", b"\x04\x00", b"\x84abcdefgh", b"\x02\x00\x00\x00\x01ab\x00", b"\x44\x00\x00\x00\x01abcd\xc1"])
def test_garbage_records_raise_a_typed_error_naming_the_session(raw: bytes) -> None:
    with pytest.raises(DecodeError, match="00" * 16):
        unpack_record(b"\0" * 16, raw)


@given(st.binary(min_size=16, max_size=16), st.integers(0, 24))
def test_split_and_join_digest_are_inverse(digest: bytes, bits: int) -> None:
    partition, field = split_digest(digest, bits)
    assert partition < 2**bits
    assert len(field) == 16 - bits // 8
    assert join_digest(partition, field, bits) == digest


def test_tokens_are_long_random_and_have_digests() -> None:
    tokens = {new_token() for _ in range(1000)}
    assert len(tokens) == 1000
    for t in tokens:
        assert len(t) == 32
        d = digest_of(t)
        assert d is not None and len(d) == 16


@pytest.mark.parametrize("bad", ["", "x" * 21, "x" * 87, "é" * 32, "a" * 31 + "=", "a" * 31 + ".", None, 5, b"x" * 32])
def test_malformed_tokens_have_no_digest(bad: object) -> None:
    assert digest_of(bad) is None


@pytest.mark.parametrize("moved_in", ["a" * 22, "x" * 32, "k" * 43, "0123456789abcdef" * 2, "Z_-" * 28 + "Zz"])
def test_tokens_of_other_stores_have_digests(moved_in: str) -> None:
    """Django's 32 [a-z0-9], Flask-Session's 43 base64url, starsessions' hex: cookies keep working."""
    assert digest_of(moved_in) is not None


@pytest.mark.parametrize("n,z,expected", [(0, 512, 1), (1_000_000, 512, 4096), (1_000_000, 128, 16384), (10_000_000, 512, 32768)])
def test_partition_count_keeps_the_fullest_partition_under_the_limit(n: int, z: int, expected: int) -> None:
    assert partition_count(n, z) == expected
