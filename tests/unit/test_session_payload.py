"""Session payloads (densekv/sessions/payload.py): what goes in comes back equal, text that
is bytes in disguise is stored as bytes, and anything that would change is refused."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from densekv.codec import ZstdDictionary
from densekv.dictionaries import train_dictionary
from densekv.errors import SessionDataInvalid, SessionDataTooLarge
from densekv.sessions.payload import PayloadCodec, pack_data, train_payloads, unpack_data
from densekv.tools.lab.session_profiles import PROFILES, session, sessions

texts = st.one_of(
    st.text(max_size=40),
    st.binary(min_size=1, max_size=40).map(bytes.hex),
    st.binary(min_size=1, max_size=40).map(lambda b: b.hex().upper()),
    st.uuids().map(str),
    st.from_regex(r"\A[A-Za-z0-9_-]{8,60}\Z"),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1),
                    st.floats(allow_nan=False), texts, st.binary(max_size=30))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)
datas = st.dictionaries(st.text(max_size=12), values, max_size=6)


@given(datas)
def test_any_accepted_data_comes_back_equal_and_typed(data: dict) -> None:
    back = unpack_data(pack_data(data))
    assert back == data
    assert repr(back) == repr(data)  # same types too: 1 stays int, True stays bool, "00" stays str


@pytest.mark.parametrize(("text", "stored"), [
    ("ab" * 20, 23),                         # 40 hex chars (a CSRF token, 42 as text): 20 bytes + 3
    ("AB" * 32, 35),                         # upper-case hex: 32 bytes + 3
    (str(uuid.UUID(int=7)), 18),             # UUID text (38 as text): 16 bytes + 2 (fixext 16)
    ("Zm9vYmFyYmF6cXV4cXV1eA", 18),          # base64url, canonical (24 as text): 16 bytes + 2
    ("Zm9vYmFyYmF6cXV4cXV1eB", 23),          # base64url, not canonical: stays text
    ("hello world", 12),                     # prose stays text
    ("abc", 4),                              # too short to gain
])
def test_text_that_is_bytes_in_disguise_is_stored_as_bytes(text: str, stored: int) -> None:
    packed = pack_data({"k": text})
    assert len(packed) - len(pack_data({"k": None})) + 1 == stored  # the value's bytes
    assert unpack_data(packed) == {"k": text}


@pytest.mark.parametrize("bad", [
    {1: "int key"}, {"t": (1, 2)}, {"s": {1}}, {"n": float("nan")}, {"big": 2**64}, {"small": -(2**63) - 1},
    {"o": object()}, {"deep": {"x": [{"y": {2: 3}}]}}, [("a", 1)], "text",
])
def test_what_would_not_come_back_equal_is_refused_with_a_typed_error(bad: object) -> None:
    with pytest.raises(SessionDataInvalid):
        pack_data(bad)  # type: ignore[arg-type]


def test_the_maximum_is_on_the_packed_bytes() -> None:
    pack_data({"k": "x." * 100}, max_bytes=210)
    with pytest.raises(SessionDataTooLarge, match="max_data_bytes 150"):
        pack_data({"k": "x." * 100}, max_bytes=150)


@pytest.mark.parametrize("profile", PROFILES)
def test_profiles_round_trip_through_a_dictionary_and_shrink(profile: str) -> None:
    codec = PayloadCodec()
    plain = [codec.encode(d)[1] for _, d in sessions(profile, 50)]
    trained = train_dictionary([pack_data(d) for _, d in sessions(profile, 500, start=1000)], size=4096)
    codec.use(ZstdDictionary(3, trained))
    for n in range(50):
        data = session(profile, n)[1]
        framed = codec.encode(data)[1]
        assert codec.decode(framed, key=b"k") == data
        assert len(framed) <= len(plain[n])  # the dictionary is used only where it is smaller
    reader = PayloadCodec()  # another process: needs the dictionary the frame names
    framed = codec.encode(session(profile, 1)[1])[1]
    if framed[0] == 0x21:
        assert reader.missing(framed) == 3


def test_a_django_login_fits_a_default_listpack_value_with_the_dictionary() -> None:
    """P1 must stay inline (<= 64 bytes of record) on a default server once trained, with
    an idle TTL (4 more bytes) and user ids up to 2**32; with the key table (what a store
    trains), also with one more key of a small int that the dictionary never saw."""
    codec = PayloadCodec()
    codec.use(ZstdDictionary(1, train_dictionary([pack_data(d) for _, d in sessions("P1", 2000, start=10_000)],
                                                  size=4096)))
    worst = max(len(codec.encode(d)[1]) for _, d in sessions("P1", 500))
    assert 1 + 4 + 4 + 4 + worst <= 64  # flags, expiry, absolute expiry, a 4-byte user id, the payload
    codec.use(ZstdDictionary.of(train_payloads([pack_data(d) for _, d in sessions("P1", 2000, start=10_000)])))
    worst = max(len(codec.encode({**d, "n": i % 100})[1]) for i, (_, d) in enumerate(sessions("P1", 500)))
    assert 1 + 4 + 4 + 4 + worst <= 64


@pytest.mark.parametrize("profile", ["P1", "P3"])
def test_a_write_compresses_once_with_the_codec_that_wins(profile: str) -> None:
    """Deflate and zstd are both tried only on probe writes; the rest use the one that lost
    the fewest bytes, which costs next to nothing against trying both every time."""
    from densekv.codec import Codec
    from densekv.sessions.payload import PROBE_EVERY, PROBE_FIRST

    trained = train_dictionary([pack_data(d) for _, d in sessions(profile, 2000, start=10_000)], size=4096)
    codec = PayloadCodec()
    codec.use(ZstdDictionary.of(trained))
    calls = [0, 0]
    for i, c in enumerate(list(codec._codecs)):
        def counted(value: object, c: Codec = c, i: int = i) -> bytes:
            calls[i] += 1
            return Codec.encode(c, value)
        object.__setattr__(c, "encode", counted)
    payloads = [pack_data(d) for _, d in sessions(profile, 2000)]
    framed = [codec.encode(d)[1] for _, d in sessions(profile, 2000)]
    probes = PROBE_FIRST + (len(payloads) - PROBE_FIRST) // PROBE_EVERY
    assert sum(calls) == len(payloads) + probes  # not 2 per write
    best = sum(min(len(c.encode(p)) for c in codec._codecs) for p in payloads)
    assert sum(map(len, framed)) <= best + 0.1 * len(payloads)
    assert all(codec.decode(f, key=b"k") == d for f, (_, d) in zip(framed, sessions(profile, 2000)))
