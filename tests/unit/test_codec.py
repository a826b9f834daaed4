"""Value framing without a server: headers, round trips, compression only when it pays,
typed errors naming the key, and the integer text a listpack stores as an integer."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from densekv import codec as c
from densekv.codec import Codec, ZstdDictionary, decode
from densekv.dictionaries import train_dictionary
from densekv.errors import CodecError, DecodeError

CODECS = [Codec.named(n) for n in ("auto", "msgpack", "zlib", "lz4", "zstd")]

values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False)
    | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=10,
)


@given(values, st.sampled_from(CODECS))
def test_every_value_round_trips_with_every_codec(value: object, codec: Codec) -> None:
    assert decode(codec.encode(value), key="k") == value


@given(st.text(), st.sampled_from(CODECS))
def test_compression_never_makes_a_value_larger(text: str, codec: Codec) -> None:
    plain = Codec(codec.serializer).encode(text)
    assert len(codec.encode(text)) <= len(plain)


@pytest.mark.parametrize(
    ("value", "framed"),
    [(0, b"0"), (-5, b"-5"), (2**63 - 1, b"9223372036854775807"), (b"ab", b"\x01ab"),
     ("ab", b"\x02ab"), (True, b"\x03\xc3"), (None, b"\x03\xc0"), (1.5, b"\x03\xcb?\xf8\x00\x00\x00\x00\x00\x00")],
)
def test_auto_framing_table(value: object, framed: bytes) -> None:
    assert Codec().encode(value) == framed


def test_integers_are_canonical_listpack_integers() -> None:
    for v in [0, 1, -1, 7, 2**31, -(2**63), 2**63 - 1]:
        assert c.is_canonical_int(Codec().encode(v))
    for text in [b"-0", b"007", b"+1", b"1 ", b"", b"9223372036854775808", b"1e3"]:
        assert not c.is_canonical_int(text)
    # out of int64: msgpack, still an int on the way back
    assert decode(Codec().encode(2**63), key="k") == 2**63


def test_headers_never_collide_with_integer_text() -> None:
    headers = [c.BYTES, c.STR, c.MSGPACK, c.EXPIRES, c.OUT_OF_LINE, c.ZLIB_BYTES, c.ZLIB_STR,
               c.ZLIB_MSGPACK, c.ZSTD_BYTES, c.ZSTD_STR, c.ZSTD_MSGPACK, c.LZ4_BYTES, c.LZ4_STR,
               c.LZ4_MSGPACK]
    assert len(set(headers)) == len(headers)
    assert not set(headers) & c.INTEGER_FIRST


def test_typed_codecs_refuse_other_types() -> None:
    with pytest.raises(CodecError):
        Codec("int").encode("x")
    with pytest.raises(CodecError):
        Codec("int").encode(True)
    with pytest.raises(CodecError):
        Codec("raw").encode(5)
    with pytest.raises(CodecError):
        Codec().encode(object())
    with pytest.raises(ValueError):
        Codec.named("gzip")


def test_compression_is_used_when_it_pays_and_named_in_the_header() -> None:
    text = "hello world " * 50
    for name, base in [("zlib", 0x10), ("lz4", 0x40), ("zstd", 0x20)]:
        framed = Codec.named(name).encode(text)
        assert framed[0] == base | c.STR and len(framed) < len(text)
        assert decode(framed, key="k") == text
    assert Codec.named("zlib").encode("short")[0] == c.STR  # did not pay


@pytest.mark.parametrize(
    "framed",
    [b"", b"\x00", b"\x07abc", b"\x11not-zlib", b"\x12" + b"\x00" * 5, b"\x41\xff\xff\xff\x7fzz",
     b"\x03\xc1", b"\x02\xff\xfe", b"-0", b"007", b"12a", b"\x21\x05abc", b"\x0f", b"\x23"],
)
def test_a_value_that_does_not_decode_raises_naming_the_key(framed: bytes) -> None:
    with pytest.raises(DecodeError, match="user:7") as info:
        decode(framed, key="user:7")
    assert info.value.key == "user:7"


def test_expiry_wrapper_round_trips() -> None:
    framed = c.with_expiry(b"42", 1_700_000_000)
    assert framed[0] == c.EXPIRES and c.split_expiry(framed) == (1_700_000_000, b"42")
    assert c.split_expiry(b"42") == (None, b"42")
    with pytest.raises(CodecError):
        c.with_expiry(b"1", 2**32)


@given(st.integers(0, 2**35 - 1))
def test_varint_round_trip(n: int) -> None:
    assert c.read_varint(c.varint(n) + b"tail", 0) == (n, len(c.varint(n)))


def _docs(n: int, seed: int = 1) -> list[dict[str, object]]:
    rng = random.Random(seed)
    return [
        {"id": i, "name": f"user {rng.randrange(10**6)}", "email": f"u{rng.randrange(10**6)}@example.com",
         "active": rng.random() < 0.5, "score": rng.randrange(1000), "tags": rng.sample(["a", "bb", "ccc", "dddd", "eeeee"], 2),
         "address": {"street": f"{rng.randrange(999)} Main Street", "city": rng.choice(["Paris", "Oslo", "Lima"]),
                     "zip": f"{rng.randrange(10**5):05d}"}}
        for i in range(n)
    ]


def test_a_trained_dictionary_shrinks_small_documents_and_is_named_in_the_value() -> None:
    docs = _docs(400)
    dictionary = ZstdDictionary(3, train_dictionary([json.dumps(d) for d in docs], size=4096))
    with_dict = Codec("auto", "zstd", dictionary=dictionary)
    without = Codec.named("zstd")
    doc = json.dumps(_docs(1, seed=99)[0])
    framed = with_dict.encode(doc)
    assert c.needed_dictionary(framed) == 3
    assert len(framed) < len(without.encode(doc)) < len(doc) + 1
    assert decode(framed, key="k", dictionaries={3: dictionary.data}) == doc
    with pytest.raises(DecodeError, match="dictionary 3"):
        decode(framed, key="k")


@pytest.mark.parametrize("kind_value", ["a short text", b"\x00raw bytes", {"doc": [1, 2]}])
def test_deflate_with_a_preset_dictionary_round_trips_and_names_it(kind_value: object) -> None:
    docs = _docs(400)
    dictionary = ZstdDictionary(5, train_dictionary([json.dumps(d) for d in docs], size=4096))
    doc = json.dumps(_docs(1, seed=42)[0])
    framed = Codec("auto", "zlib", dictionary=dictionary).encode(doc)
    assert framed[0] == 0x52 and c.needed_dictionary(framed) == 5  # STR, deflate with dictionary 5
    assert len(framed) < len(Codec.named("zlib").encode(doc))
    assert decode(framed, key="k", dictionaries={5: dictionary.data}) == doc
    with pytest.raises(DecodeError, match="dictionary 5"):
        decode(framed, key="k")
    other = Codec("auto", "zlib", level=9, dictionary=dictionary).encode(kind_value)
    assert decode(other, key="k", dictionaries={5: dictionary.data}) == kind_value


def test_two_dictionaries_under_one_id_never_share_a_compressor() -> None:
    """Two maps (or one made again after a flush) can hold different dictionaries with the
    same id in one process; each value must decode with its own dictionary."""
    first = ZstdDictionary(1, train_dictionary([json.dumps(d) for d in _docs(400, seed=1)], size=4096))
    second = ZstdDictionary(1, train_dictionary([json.dumps(d) + " extra words here" for d in _docs(400, seed=2)], size=4096))
    assert first.data != second.data
    doc = json.dumps(_docs(1, seed=7)[0])
    framed_first = Codec("auto", "zstd", dictionary=first).encode(doc)
    framed_second = Codec("auto", "zstd", dictionary=second).encode(doc)
    assert decode(framed_second, key="k", dictionaries={1: second.data}) == doc
    assert decode(framed_first, key="k", dictionaries={1: first.data}) == doc
