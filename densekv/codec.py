"""Value framing: every value densekv's maps store starts with a one-byte codec header.

The header says how to read the rest, so a value decodes the same whatever codec the
map that reads it was configured with, and a value that does not decode is an error
(`DecodeError`, naming the key), never raw bytes handed back as if they were the value.

Header bytes (a retired number is never reused):

  0x00          reserved: never written (an empty or zeroed value is corrupt)
  0x01 BYTES    raw bytes follow
  0x02 STR      UTF-8 text follows
  0x03 MSGPACK  a msgpack document follows (dict, list, float, bool, None, big ints)
  0x0C CONTINUED_HERE  sessions only: as 0x0D, the rest in the session's continuation
                field of its own partition hash (densekv/sessions/payload.py)
  0x0D CONTINUED  sessions only: the first part of a framed value follows, the rest is
                stored elsewhere (densekv/sessions/payload.py); never a value's own header
  0x0E EXPIRES  per-item expiry: 4-byte big-endian unix seconds, then a framed value
  0x0F OUT_OF_LINE  the value lives in its own key (maps: too large for a listpack)
  0x11-0x13     zlib (raw deflate stream) of a BYTES / STR / MSGPACK payload
  0x21-0x23     zstd of a BYTES / STR / MSGPACK payload: one varint dictionary id
                (0 = no dictionary), then a magic-less zstd frame. Dictionary ids are
                derived from the dictionary's bytes (content_id: 4 varint bytes); small
                counted ids written before that still read with the dictionary stored
                under them
  '-', '0'-'9'  INTEGER: the whole value is the canonical decimal text of a signed
                64-bit integer (0x2D, 0x30-0x39). The header *is* the first character:
                a listpack stores such a value as a 1-9 byte integer instead of a string
                (a random 32-bit int costs 6 bytes instead of 12), and HINCRBY works on it.
  0x41-0x43     lz4 block (with its 4-byte size) of a BYTES / STR / MSGPACK payload
  0x51-0x53     raw deflate with a preset dictionary (zlib's zdict) of a BYTES / STR /
                MSGPACK payload: one varint dictionary id (>= 1), then the deflate stream.
                No frame header at all: for payloads under ~100 bytes it is 5-8 bytes
                smaller than a zstd frame with the same dictionary (a Django login: 46 vs
                54 bytes), so codecs that can pick per value try both.
  0x61          sessions only: a session's data coded with the key table its dictionary
                carries: one varint dictionary id (>= 1), then the table-coded body
                (densekv/sessions/payload_table.py); never a map value's header

Compression is kept only when it makes that value's framed bytes smaller. zstandard and
lz4 are optional (`pip install 'densekv[codecs]'`) and imported on first use.
"""

from __future__ import annotations

import hashlib
import threading
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import msgpack

from densekv.errors import CodecError as _CodecError
from densekv.errors import CodecUnavailable as _CodecUnavailable
from densekv.errors import DecodeError, DensekvError
from densekv.errors import moved as _moved
from densekv.listpack import as_int64

BYTES = 0x01  # raw bytes
STR = 0x02  # UTF-8 text
MSGPACK = 0x03  # msgpack document
EXPIRES = 0x0E  # u32 unix expiry, then a framed value
OUT_OF_LINE = 0x0F  # the value is in its own key
ZLIB_BYTES = 0x11  # zlib of BYTES payload
ZLIB_STR = 0x12  # zlib of STR payload
ZLIB_MSGPACK = 0x13  # zlib of MSGPACK payload
ZSTD_BYTES = 0x21  # varint dict id + zstd frame of BYTES payload
ZSTD_STR = 0x22  # ... of STR payload
ZSTD_MSGPACK = 0x23  # ... of MSGPACK payload
LZ4_BYTES = 0x41  # lz4 block of BYTES payload
LZ4_STR = 0x42  # ... of STR payload
LZ4_MSGPACK = 0x43  # ... of MSGPACK payload
DEFLATE_DICT_BASE = 0x50  # 0x51-0x53: varint dict id + raw deflate with that preset dictionary
TABLE_CODED = 0x61  # sessions only: varint dict id + a body coded with that dictionary's key table
INTEGER_FIRST = frozenset(b"-0123456789")  # INTEGER: canonical decimal int64 text

KINDS = (BYTES, STR, MSGPACK)
COMPRESSION_BASE = {"zlib": 0x10, "zstd": 0x20, "lz4": 0x40}
SERIALIZERS = ("auto", "int", "raw", "msgpack")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _zstd() -> Any:
    try:
        import zstandard
    except ImportError as exc:  # pragma: no cover - the test extra installs it
        raise _CodecUnavailable(
            "the zstd codec needs the zstandard package: pip install 'densekv[codecs]'"
        ) from exc
    return zstandard


def _lz4() -> Any:
    try:
        import lz4.block
    except ImportError as exc:  # pragma: no cover
        raise _CodecUnavailable("the lz4 codec needs the lz4 package: pip install 'densekv[codecs]'") from exc
    return lz4.block


# --- varints (dictionary ids) ----------------------------------------------------------


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def read_varint(data: bytes, pos: int, max_shift: int = 35) -> tuple[int, int]:
    """(value, position after it); `max_shift`: 35 for dictionary ids, 63 for 64-bit values."""
    if pos < len(data) and data[pos] < 0x80:  # one byte: every dictionary id below 128
        return data[pos], pos + 1
    n = shift = 0
    while True:
        if pos >= len(data) or shift > max_shift:
            raise ValueError("truncated varint (a dictionary id or a key table value)")
        byte = data[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return n, pos


# --- integers ---------------------------------------------------------------------------


def is_canonical_int(data: bytes) -> bool:
    """True for the exact text listpack stores as an integer ("-0" and "007" are not):
    densekv/listpack.py's as_int64."""
    return as_int64(data) is not None


def encode_int(value: int) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _CodecError(f"the int codec takes integers, not {type(value).__name__}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise _CodecError(f"{value} does not fit a signed 64-bit integer")
    return str(value).encode()


# --- zstd dictionaries --------------------------------------------------------------------


CONTENT_ID_MIN = 1 << 21  # content ids take exactly 4 varint bytes: [2**21, 2**28)
CONTENT_ID_SPAN = (1 << 28) - CONTENT_ID_MIN


def content_id(data: bytes) -> int:
    """The id a dictionary is stored and named under: derived from its bytes (BLAKE2b),
    so the same id always means the same bytes, in every process and after any restart.
    Counted ids (1, 2, ... from before) could be given again by a server that lost its
    data, and a process still holding the old dictionary under that id decoded other
    sessions' payloads into wrong data. 27 bits (a 4-byte varint, 3 bytes more per payload
    than id 1): two dictionaries of one namespace share an id with odds of 1 in 134
    million, and storing the second one is then refused (map_dict_store.lua)."""
    h = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")
    return CONTENT_ID_MIN + h % CONTENT_ID_SPAN


@dataclass(frozen=True)
class ZstdDictionary:
    """A trained zstd dictionary and the id it is stored under (dictionaries.py):
    `ZstdDictionary.of(data)` names it by its content (content_id)."""

    id: int
    data: bytes

    def __post_init__(self) -> None:
        if self.id < 1:
            raise ValueError("dictionary ids start at 1 (0 means no dictionary)")

    @classmethod
    def of(cls, data: bytes) -> ZstdDictionary:
        return cls(content_id(data), bytes(data))


_local = threading.local()  # zstd (de)compressors are not safe to share between threads


def _zstd_compressor(dictionary: ZstdDictionary | None, level: int) -> Any:
    # keyed by id and level, checked against the dictionary's bytes: two maps (or a map made
    # again after a flush) may hold different dictionaries under one id in one process
    cache: dict[tuple[int, int], tuple[bytes | None, Any]] = _local.__dict__.setdefault("c", {})
    key = (dictionary.id if dictionary else 0, level)
    data = dictionary.data if dictionary else None
    hit = cache.get(key)
    if hit is not None and (hit[0] is data or hit[0] == data):
        return hit[1]
    zstd = _zstd()
    params = zstd.ZstdCompressionParameters.from_level(
        level, format=zstd.FORMAT_ZSTD1_MAGICLESS, write_checksum=0,
        write_dict_id=0, write_content_size=1,
    )
    d = zstd.ZstdCompressionDict(dictionary.data) if dictionary else None
    comp = zstd.ZstdCompressor(dict_data=d, compression_params=params)
    cache[key] = (data, comp)
    return comp


def _zstd_decompress(frame: bytes, data: bytes | None, dict_id: int) -> bytes:
    cache: dict[int, tuple[bytes | None, Any]] = _local.__dict__.setdefault("d", {})
    hit = cache.get(dict_id)
    if hit is None or (hit[0] is not data and hit[0] != data):
        zstd = _zstd()
        d = zstd.ZstdCompressionDict(data) if data is not None else None
        hit = cache[dict_id] = (data, zstd.ZstdDecompressor(dict_data=d, format=zstd.FORMAT_ZSTD1_MAGICLESS))
    return hit[1].decompress(frame)  # type: ignore[no-any-return]


# --- the codec ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Codec:
    """How a map writes values. Reading never needs it: the header says everything.

    serializer: "auto" (int -> INTEGER, bytes -> BYTES, str -> STR, anything else ->
    MSGPACK), "int", "raw" (bytes/str only) or "msgpack" (everything but 64-bit ints,
    which stay INTEGER so that incr works and the listpack stores them as integers).
    compression: None, "zlib", "lz4" or "zstd" (with `dictionary` if trained), tried on
    each value and kept only when the framed value gets smaller.
    """

    serializer: str = "auto"
    compression: str | None = None
    level: int | None = None
    dictionary: ZstdDictionary | None = None

    def __post_init__(self) -> None:
        if self.serializer not in SERIALIZERS:
            raise ValueError(f"serializer is one of {', '.join(SERIALIZERS)}")
        if self.compression not in (None, *COMPRESSION_BASE):
            raise ValueError(f"compression is None or one of {', '.join(COMPRESSION_BASE)}")
        if self.dictionary is not None and self.compression not in ("zstd", "zlib"):
            raise ValueError("a dictionary goes with compression='zstd' or 'zlib'")
        if self.compression == "zstd":
            _zstd()
        elif self.compression == "lz4":
            _lz4()

    @classmethod
    def named(cls, name: str | Codec, dictionary: ZstdDictionary | None = None) -> Codec:
        """"auto", "int", "raw", "msgpack", "zlib", "lz4", "zstd" (or a Codec)."""
        if isinstance(name, Codec):
            return name
        if name in SERIALIZERS:
            return cls(name)
        if name in COMPRESSION_BASE:
            return cls("auto", name, dictionary=dictionary if name == "zstd" else None)
        raise ValueError(f"unknown codec {name!r}: auto, int, raw, msgpack, zlib, lz4 or zstd")

    def payload(self, value: Any) -> tuple[int, bytes]:
        """(kind, payload) of a non-INTEGER value; also what dictionaries are trained on."""
        s = self.serializer
        if s in ("raw", "auto") and isinstance(value, bytes):
            return BYTES, value
        if s in ("raw", "auto") and isinstance(value, str):
            return STR, value.encode("utf-8", "surrogatepass")
        if s == "raw":
            raise _CodecError(f"the raw codec takes bytes or str, not {type(value).__name__}")
        try:
            return MSGPACK, msgpack.packb(value, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as exc:
            raise _CodecError(f"cannot serialize a {type(value).__name__} with msgpack: {exc}") from exc

    def encode(self, value: Any) -> bytes:
        if self.serializer == "int" or (
            self.serializer in ("auto", "msgpack") and isinstance(value, int) and not isinstance(value, bool)
            and INT64_MIN <= value <= INT64_MAX
        ):
            return encode_int(value)
        kind, payload = self.payload(value)
        if self.compression is None or len(payload) < 8:
            return bytes([kind]) + payload
        packed = self._compress(kind, payload)  # kept if shorter than the plain framing, 1 + payload
        return packed if len(packed) <= len(payload) else bytes([kind]) + payload

    def _compress(self, kind: int, payload: bytes) -> bytes:
        if self.compression == "zlib" and self.dictionary is not None:  # sessions' usual codec first
            zd = self.dictionary
            c = _primed(zd.data, self.level if self.level is not None else 9,
                        _window_bits(len(zd.data) + len(payload)), 6 if len(payload) <= 2048 else 9).copy()
            body: bytes = c.compress(payload) + c.flush()
            return _dict_head(DEFLATE_DICT_BASE | kind, zd.id) + body
        head = bytes([COMPRESSION_BASE[self.compression] | kind])  # type: ignore[index]
        if self.compression == "zlib":
            c = zlib.compressobj(self.level if self.level is not None else 6, zlib.DEFLATED,
                                 -_window_bits(len(payload)))
            return head + c.compress(payload) + c.flush()
        if self.compression == "lz4":
            block: bytes = _lz4().compress(payload, store_size=True)
            return head + block
        d = self.dictionary
        comp = _zstd_compressor(d, self.level if self.level is not None else 3)
        frame: bytes = comp.compress(payload)
        return head + varint(d.id if d else 0) + frame


DEFAULT = Codec()


@lru_cache(maxsize=64)
def _dict_head(head: int, dict_id: int) -> bytes:
    """A header byte and a dictionary id's varint, made once per dictionary (0.3 us a write)."""
    return bytes([head]) + varint(dict_id)


_PRIMED: dict[tuple[int, int, int, int], tuple[bytes, Any]] = {}  # (id(dictionary), level,
_PRIMED_MAX = 12  # window, memLevel) -> (dictionary, compressor): at most ~300 KiB each


def _primed(zdict: bytes, level: int, wbits: int, mem_level: int) -> Any:
    """A deflate compressor with `zdict` already loaded, to copy() for each value instead of
    loading the 4 KiB dictionary again: 4.5 against 8.6 us for a P1 session (memLevel 6,
    which a value of up to 2 KiB gets: a smaller hash table to copy). Same stream as a new
    compressobj with memLevel 9 and the full window (tests/unit/test_hot_path_codec.py):
    a smaller hash only adds collisions, which the chains skip, and a value this short
    neither fills memLevel 6's 4096-symbol block nor makes a chain reach level 9's limit.
    Shared by threads: zlib's copy() holds the object's lock."""
    key = (id(zdict), level, wbits, mem_level)
    got = _PRIMED.get(key)
    if got is None or got[0] is not zdict:  # not cached, or an id() reused by another dictionary
        if len(_PRIMED) >= _PRIMED_MAX:
            _PRIMED.clear()
        got = (zdict, zlib.compressobj(level, zlib.DEFLATED, -wbits, mem_level, zlib.Z_DEFAULT_STRATEGY, zdict))
        _PRIMED[key] = got
    return got[1]


def _window_bits(reach: int) -> int:
    """The smallest deflate window (9-15 bits) whose matches reach back `reach` bytes (the
    preset dictionary and the value): the same stream as the 32 KiB window, since no match
    distance can be longer, for a fraction of the set-up (a 32 KiB window allocates and
    clears ~128 KiB more per compressobj: measured 79 us against 27 us of client CPU with a
    4 KiB dictionary on a loaded machine). zlib keeps MIN_LOOKAHEAD (262) bytes of the
    window out of reach; tests/unit/test_hot_path_codec.py checks that the bytes match."""
    return min(15, max(9, (reach + 262).bit_length()))

DictionaryLookup = Callable[[int], "bytes | None"]


def _where(key: Any) -> str:
    if isinstance(key, bytes):
        key = key.decode("utf-8", "replace")
    return f"the value of key {key!r}"


_EXPIRES_HEAD = bytes([EXPIRES])
_ZSTD_HEADS = frozenset((ZSTD_BYTES, ZSTD_STR, ZSTD_MSGPACK))


def needed_dictionary(data: bytes) -> int | None:
    """The dictionary id a framed value needs (None if it needs none)."""
    if data[:1] == _EXPIRES_HEAD:
        data = data[5:]
    if len(data) >= 2 and (data[0] in _ZSTD_HEADS or data[0] & 0xF0 == DEFLATE_DICT_BASE or data[0] == TABLE_CODED):
        if data[1] < 0x80:  # a one-byte id (read_varint's first case, without the call)
            return data[1] or None
        try:
            n = read_varint(data, 1)[0]
        except ValueError:
            return None
        return n or None
    return None


def split_expiry(data: bytes) -> tuple[int | None, bytes]:
    """(expiry unix seconds or None, the framed value inside)."""
    if data[:1] == bytes([EXPIRES]):
        if len(data) < 6:
            raise ValueError("truncated expiry")
        return int.from_bytes(data[1:5], "big"), data[5:]
    return None, data


def with_expiry(framed: bytes, expires_at: int | None) -> bytes:
    """A framed value with an EXPIRES header (u32 unix seconds) in front; None: unchanged."""
    if expires_at is None:
        return framed
    if not 0 < expires_at < 2**32:
        raise _CodecError("expiry must be a unix time in seconds before 2106")
    return bytes([EXPIRES]) + expires_at.to_bytes(4, "big") + framed


def decode(data: bytes, *, key: Any, dictionaries: Mapping[int, bytes] | None = None) -> Any:
    """The value a framed `data` holds. Any failure raises DecodeError naming `key`."""
    try:
        return _decode(data, dictionaries or {})
    except DecodeError:
        raise
    except Exception as exc:  # zlib.error, zstd.ZstdError, msgpack errors, UnicodeError, ...
        raise DecodeError(f"{_where(key)} does not decode: {exc}", key=key) from exc


#: every codec header byte _decode knows (a base | a kind), checked once per value
_HEADERS = frozenset(base | kind for base in (0x00, DEFLATE_DICT_BASE, *COMPRESSION_BASE.values()) for kind in KINDS)


def _decode(data: bytes, dictionaries: Mapping[int, bytes]) -> Any:
    if not data:
        raise ValueError("empty value (no codec header)")
    head = data[0]
    if head in INTEGER_FIRST:
        if not is_canonical_int(data):
            raise ValueError("not a canonical integer")
        return int(data)
    if head not in _HEADERS:
        raise ValueError(f"unknown codec header 0x{head:02x}")
    base, kind = head & 0xF0, head & 0x0F
    body = data[1:]
    if base == DEFLATE_DICT_BASE:
        dict_id, pos = read_varint(data, 1)
        zdict = dictionaries.get(dict_id)
        if zdict is None:
            raise ValueError(f"needs dictionary {dict_id}, which is not stored")
        d = zlib.decompressobj(-15, zdict)
        body = d.decompress(data[pos:]) + d.flush()
        if not d.eof or d.unused_data:
            raise ValueError("deflate stream is truncated or has trailing bytes")
    elif base == 0x10:
        d = zlib.decompressobj(-15)
        body = d.decompress(body) + d.flush()
        if not d.eof or d.unused_data:
            raise ValueError("zlib stream is truncated or has trailing bytes")
    elif base == 0x40:
        body = _lz4().decompress(body)
    elif base == 0x20:
        dict_id, pos = read_varint(data, 1)
        dict_data = None
        if dict_id:
            dict_data = dictionaries.get(dict_id)
            if dict_data is None:
                raise ValueError(f"needs zstd dictionary {dict_id}, which is not stored")
        body = _zstd_decompress(data[pos:], dict_data, dict_id)
    if kind == BYTES:
        return bytes(body)
    if kind == STR:
        return body.decode("utf-8", "surrogatepass")
    return msgpack.unpackb(body, raw=False, strict_map_key=False)


__all__ = [
    "COMPRESSION_BASE", "DEFAULT", "SERIALIZERS", "TABLE_CODED", "Codec", "ZstdDictionary", "content_id", "decode",
    "encode_int", "is_canonical_int", "needed_dictionary", "read_varint", "split_expiry", "varint",
    "with_expiry"
]


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("CodecError", "CodecUnavailable")


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
