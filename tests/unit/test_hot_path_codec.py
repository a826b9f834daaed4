"""The deflate window of a write (densekv/codec.py `_window_bits`): sized to what a match
can reach (the preset dictionary plus the value), it must give the very bytes the full
32 KiB window gives, so stored values, their sizes and every reader stay as they were."""

from __future__ import annotations

import random
import zlib

import pytest

from densekv.codec import Codec, ZstdDictionary, _window_bits, decode
from densekv.dictionaries import train_dictionary
from densekv.sessions.payload import pack_data
from densekv.tools.lab.session_profiles import session


def _full_window(level: int, mem_level: int, data: bytes, zdict: bytes | None) -> bytes:
    c = (zlib.compressobj(level, zlib.DEFLATED, -15, mem_level, zlib.Z_DEFAULT_STRATEGY, zdict)
         if zdict is not None else zlib.compressobj(level, zlib.DEFLATED, -15))
    return c.compress(data) + c.flush()


@pytest.mark.parametrize("profile", ["P1", "P3"])
def test_dictionary_writes_match_the_full_window(profile: str) -> None:
    samples = [pack_data(session(profile, i)[1]) for i in range(600)]
    zd = ZstdDictionary(7, train_dictionary(samples, size=4096))
    codec = Codec("raw", "zlib", level=9, dictionary=zd)
    rnd = random.Random(22)
    values = [pack_data(session(profile, i)[1]) for i in range(1000, 1300)]
    values += [rnd.randbytes(n) for n in (8, 100, 3000, 5000, 40_000)]  # past the small windows too
    compared = 0
    for value in values:
        framed = codec.encode(value)
        assert decode(framed, key="k", dictionaries={7: zd.data}) == value
        if framed[0] & 0xF0 == 0x50:  # deflate with the dictionary (else kept plain: smaller)
            assert framed[2:] == _full_window(9, 9, value, zd.data)
            compared += 1
    assert compared >= 250


def test_plain_zlib_writes_match_the_full_window() -> None:
    codec = Codec("raw", "zlib")
    rnd = random.Random(5)
    compared = 0
    for n in (16, 200, 4000, 20_000, 70_000):
        value = bytes(rnd.choice(b"abcdefgh") for _ in range(n))
        framed = codec.encode(value)
        assert decode(framed, key="k") == value
        if framed[0] & 0xF0 == 0x10:  # compressed (else kept plain: smaller)
            assert framed[1:] == _full_window(6, 8, value, None)
            compared += 1
    assert compared >= 4


def test_window_bits_cover_the_reach() -> None:
    for reach in (0, 1, 250, 4096 + 135, 32_000, 10**6):
        bits = _window_bits(reach)
        assert 9 <= bits <= 15
        assert bits == 15 or (1 << bits) - 262 >= reach


def test_primed_compressors_never_mix_dictionaries() -> None:
    rnd = random.Random(9)
    value = b"session:" + bytes(rnd.choice(b"abcdef") for _ in range(120))
    dictionaries = [ZstdDictionary(i + 1, bytes(rnd.choice(b"abcdef") for _ in range(4096))) for i in range(3)]
    outs = []
    for _ in range(2):  # the second round reuses the primed compressors
        for zd in dictionaries:
            framed = Codec("raw", "zlib", level=9, dictionary=zd).encode(value)
            assert framed[2:] == _full_window(9, 9, value, zd.data)
            assert decode(framed, key="k", dictionaries={zd.id: zd.data}) == value
            outs.append(framed)
    assert len(set(outs[:3])) == 3  # three dictionaries, three streams


def test_small_values_of_few_symbols_match_too() -> None:
    """Long hash chains (a value of two letters) and the 2 KiB bound of the smaller table."""
    rnd = random.Random(3)
    zd = ZstdDictionary(4, bytes(rnd.choice(b"abcdefgh ") for _ in range(4096)))
    codec = Codec("raw", "zlib", level=9, dictionary=zd)
    compared = 0
    for n in (*range(8, 2049, 160), 2048, 2049, 2600):
        for alphabet in (b"ab", b"abcdefgh ", bytes(range(256))):
            value = bytes(rnd.choice(alphabet) for _ in range(n))
            framed = codec.encode(value)
            if framed[0] & 0xF0 == 0x50:
                assert framed[2:] == _full_window(9, 9, value, zd.data)
                compared += 1
    assert compared >= 20
