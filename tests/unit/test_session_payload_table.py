"""The key table (densekv/sessions/payload_table.py): a session coded against its
namespace's table comes back equal, in its order and types, whatever the table was trained
on; it is smaller than deflate on login sessions; a payload names the dictionary (and so
the table) it was written with; and bytes the table did not write are refused."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from densekv.codec import Codec, ZstdDictionary, needed_dictionary
from densekv.dictionaries import train_dictionary
from densekv.errors import SessionDataInvalid, SessionDataTooLarge
from densekv.sessions import payload_table
from densekv.sessions.payload import PayloadCodec, pack_data, retrain_table, train_payloads
from densekv.tools.lab.session_profiles import session, sessions

KEYS = ["_auth_user_id", "_auth_user_hash", "_fresh", "n", "csrf_token", "cart"]


def _trained(profile: str, n: int = 2000) -> ZstdDictionary:
    return ZstdDictionary.of(train_payloads([pack_data(d) for _, d in sessions(profile, n, start=10_000)]))


def _login_codec() -> PayloadCodec:
    """A codec whose table names the keys of KEYS with every shape: hex, decimal, int,
    constants and ANY (trained on sessions that hold them)."""
    samples = []
    for i in range(400):
        samples.append({"_auth_user_id": str(i * 7919), "_auth_user_hash": f"{i * 31337:064x}",
                        "_fresh": i % 3 == 0, "n": i % 50, "csrf_token": f"{i:040x}",
                        "cart": [{"sku": f"S-{i}", "qty": i % 4}]})
    codec = PayloadCodec()
    codec.use(ZstdDictionary.of(train_payloads([pack_data(d) for d in samples])))
    return codec


texts = st.one_of(
    st.text(max_size=20),
    st.binary(min_size=1, max_size=40).map(bytes.hex),  # hex of the table's length or another
    st.binary(min_size=32, max_size=32).map(bytes.hex),
    st.binary(min_size=20, max_size=20).map(lambda b: b.hex().upper()),
    st.integers(0, 10**20).map(str),  # decimal text, up to 21 digits
    st.integers(0, 999).map(lambda i: f"0{i}"),  # a leading zero: not canonical
    st.sampled_from(["١٢٣", "²", "-5", "+5", "0", ""]),  # digits that are not ASCII, signs, nothing
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False),
                    texts, st.binary(max_size=30))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=8)
datas = st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=10)), values, max_size=8)
LOGIN = _login_codec()


@settings(max_examples=400)
@given(datas)
def test_any_accepted_data_comes_back_equal_in_order_and_typed(data: dict) -> None:
    _, framed = LOGIN.encode(data)
    back = LOGIN.decode(framed, key=b"k")
    assert back == data
    assert repr(back) == repr(data)  # same order, same types: "7" stays str, 7 int, True bool
    body = LOGIN.table.encode(data)
    if body is not None:  # what the table codes, it gives back, whichever way the probe chose
        assert repr(LOGIN.table.decode(body)) == repr(data)


class _Shown(str):
    """A str whose str() is other text: what convert packs is not what was given."""

    def __str__(self) -> str:
        return "other text"


def test_a_tail_is_compared_unless_msgpack_gives_it_back_as_it_is() -> None:
    """Plain str, int, bool, None and bytes in the tail (an ESC key, an ANY value) are not
    unpacked to be compared (msgpack gives them back as they are); a value of another type,
    a subclass among them, still is: one that would come back as other data is refused."""
    plain = {"_auth_user_id": "42", "n": 7, "new": "text", "flag": True, "none": None, "raw": b"\x00\x01"}
    body = LOGIN.table.encode(plain)
    assert body is not None and repr(LOGIN.table.decode(body)) == repr(plain)
    shown = {"_auth_user_id": "42", "new": _Shown("given text")}
    assert LOGIN.table.encode(shown) is None  # it would come back as "other text"
    with pytest.raises(SessionDataInvalid):
        LOGIN.encode(shown)  # pack_data refuses it too, with its typed error


def test_the_table_names_each_key_once_with_its_shapes() -> None:
    entries = LOGIN.table.entries
    kinds = {(k, kind) for k, kind, _ in entries}
    assert (("_auth_user_hash", payload_table.HEX) in kinds and ("csrf_token", payload_table.HEX) in kinds
            and ("_auth_user_id", payload_table.DEC) in kinds and ("n", payload_table.INT) in kinds)
    assert ("_fresh", payload_table.CONST) in kinds and ("cart", payload_table.ANY) in kinds
    assert all((k, payload_table.ANY) in kinds for k in KEYS)  # any value of a named key codes
    assert dict(e[::2] for e in entries if e[1] == payload_table.HEX) == {"_auth_user_hash": 32, "csrf_token": 20}


@pytest.mark.parametrize(("profile", "saved"), [("P0", 2), ("P1", 4), ("P2", 8)])
def test_login_sessions_take_fewer_bytes_than_deflate(profile: str, saved: int) -> None:
    """The same dictionary, with and without its table: the table codes a login in fewer
    bytes (the tokens' random bytes bare, not Huffman-coded; a key in one byte)."""
    trained = _trained(profile)
    with_table = PayloadCodec()
    with_table.use(trained)
    deflate = Codec("raw", "zlib", level=9, dictionary=trained)
    data = [d for _, d in sessions(profile, 300)]
    coded = [with_table.encode(d) for d in data]
    assert all(f[0] == 0x61 for _, f in coded[100:])  # the table leads ...
    assert sum(packed is None for packed, _ in coded[100:]) >= 200 - 200 // 32 - 1  # ... and no msgpack is made but on probes
    table_bytes = sum(len(f) for _, f in coded)
    deflate_bytes = sum(len(deflate.encode(pack_data(d))) for d in data)
    assert table_bytes <= deflate_bytes - saved * len(data)


def test_deflate_keeps_sessions_the_table_does_not_shrink() -> None:
    """A cart and a long path repeat text the table cannot: deflate or zstd leads there."""
    codec = PayloadCodec()
    codec.use(_trained("P3"))
    framed = [codec.encode(d)[1] for _, d in sessions("P3", 300)]
    assert codec._leader != 2
    assert sum(f[0] == 0x61 for f in framed[100:]) <= 5  # probes only, when the table won one


def test_a_payload_names_the_dictionary_whose_table_wrote_it() -> None:
    """Content ids: a table-coded payload needs its own dictionary, and a codec that has
    loaded only another refuses it (the store loads it first), never decodes with it."""
    a, b = _trained("P1"), _trained("P2")
    writer = PayloadCodec()
    writer.use(a)
    framed = writer.encode(session("P1", 1)[1])[1]
    assert framed[0] == 0x61 and needed_dictionary(framed) == a.id
    reader = PayloadCodec()
    reader.use(b)
    assert reader.missing(framed) == a.id
    with pytest.raises(ValueError, match="not stored"):
        reader.decode(framed, key=b"k")
    reader.known[a.id] = a.data
    assert reader.decode(framed, key=b"k") == session("P1", 1)[1]


@pytest.mark.parametrize("profile", ["P1", "P3"])
def test_the_table_costs_deflate_and_zstd_nothing(profile: str) -> None:
    """The table sits at the head of the zstd dictionary's content, where neither codec
    reaches for recent bytes: they frame held-out sessions in as many bytes with the bundle
    as with the trained dictionary alone (P3 is zstd's profile). Where zstd would not load
    the bundle so, the table goes at the end, and still parses."""
    packed = [pack_data(d) for _, d in sessions(profile, 2000, start=10_000)]
    plain = ZstdDictionary.of(train_dictionary(packed, size=4096))
    bundle = ZstdDictionary.of(train_payloads(packed))
    held = [pack_data(d) for _, d in sessions(profile, 500)]
    for codec in ("zlib", "zstd"):
        alone, with_table = (Codec("raw", codec, level=9, dictionary=d) for d in (plain, bundle))
        assert sum(len(with_table.encode(p)) for p in held) == sum(len(alone.encode(p)) for p in held)
    entries = payload_table.parse(bundle.data)
    at_end = payload_table.bundle(plain.data, entries, lambda blob: False)
    assert at_end.startswith(plain.data) and payload_table.parse(at_end) == entries


def test_a_dictionary_without_a_table_still_frames_and_reads() -> None:
    """A store's dictionary from before tables: deflate or zstd, as before; and a bundle
    used whole as deflate's dictionary (what a process of that release does with it) reads."""
    plain = ZstdDictionary.of(train_dictionary([pack_data(d) for _, d in sessions("P1", 2000)], size=4096))
    assert payload_table.parse(plain.data) is None
    old = PayloadCodec()
    old.use(plain)
    framed = old.encode(session("P1", 5)[1])[1]
    assert old.table is None and framed[0] == 0x51
    bundle = _trained("P1")
    assert payload_table.parse(bundle.data) is not None and bundle.data.startswith(plain.data[:4])  # zstd magic first
    earlier_release = Codec("raw", "zlib", level=9, dictionary=bundle)
    new = PayloadCodec()
    new.use(bundle)
    data = session("P1", 6)[1]
    assert new.decode(earlier_release.encode(pack_data(data)), key=b"k") == data


SIG = payload_table._SIGNATURE


@pytest.mark.parametrize("blob", [b"", b"DKT1", SIG, SIG + b"\x00\x05", b"xx" + SIG + b"\x00\x02\x91",
                                  SIG + b"\x00\x07" + msgpack.packb([["k", 9, None]]),
                                  SIG + b"\x00\x08" + msgpack.packb([["k", 1, 2]]),  # HEX of 2 bytes
                                  SIG + b"\x00\x07" + msgpack.packb([[1, 3, None]])])
def test_bytes_that_are_no_table_parse_as_none(blob: bytes) -> None:
    assert payload_table.parse(blob) is None


@pytest.mark.parametrize("body", [b"", b"\x02\x00", b"\x01\xfe", b"\x01\x00\x00", b"\x02\x00\x00",
                                  b"\x01\xff", b"\x01\xff\x91\x01", b"\x01\xff\x92\x01\x02"])
def test_bytes_the_table_did_not_write_are_refused(body: bytes) -> None:
    """Truncated, a code past the table, trailing bytes, a key twice, a short or long tail,
    a key that is not text: ValueError, which a store reports as DecodeError."""
    table = payload_table.Table([("a", payload_table.CONST, True)], lambda v, p, d: v, lambda c, b: b)
    with pytest.raises(ValueError):  # each its own message
        table.decode(body)


def test_data_over_max_data_bytes_is_refused_though_the_table_codes_it_small() -> None:
    """max_data_bytes bounds the msgpack form, as without a table: a Flask-Login session
    packs to ~140 bytes and codes to ~93; a store of max_data_bytes=120 refuses it."""
    trained = _trained("P2")
    codec = PayloadCodec(120)
    codec.use(trained)
    data = session("P2", 3)[1]
    assert len(pack_data(data)) > 120 and len(codec.table.encode(data)) < 120
    for _ in range(100):  # past the probes: the table leads
        with pytest.raises(SessionDataTooLarge):
            codec.encode(data)
    roomy = PayloadCodec()
    roomy.use(trained)
    with pytest.raises(SessionDataInvalid, match="NaN"):
        roomy.encode({**data, "x": float("nan")})


def test_a_look_while_the_table_leads_keeps_the_zstd_dictionary_and_trains_the_table() -> None:
    """payload_flows.fit's cheap path: the zstd dictionary a bundle was made of comes back
    whole (table at the head or at the end), and a table trained again goes in with it."""
    packed = [pack_data(d) for _, d in sessions("P1", 2000, start=10_000)]
    zdict = train_dictionary(packed, size=4096)
    bundle = train_payloads(packed)
    entries = payload_table.parse(bundle)
    assert payload_table.zstd_part(bundle) == zdict and payload_table.zstd_part(zdict) == zdict
    assert payload_table.zstd_part(payload_table.bundle(zdict, entries, lambda blob: False)) == zdict
    grown = [{**d, "theme": "dark"} for _, d in sessions("P1", 500)]
    again = retrain_table(bundle, grown)
    assert payload_table.zstd_part(again) == zdict
    assert ("theme", payload_table.CONST) in {(k, kind) for k, kind, _ in payload_table.parse(again)}
    codec = PayloadCodec()
    codec.use(ZstdDictionary.of(again))
    assert all(codec.decode(codec.encode(d)[1], key=b"k") == d for d in grown[:50])
    assert codec.sizes(grown[:100]) == [len(codec.encode(d)[1]) for d in grown[:100]]
