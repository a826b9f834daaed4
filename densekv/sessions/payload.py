"""Session payloads: what a web framework keeps in a session, in the fewest bytes that
still come back exactly as given.

Accepted data: a dict with str keys whose values are None, bool, int (-2**63 .. 2**64-1),
float (not NaN), str, bytes, list, or dict (str keys) of those, nested at most MAX_NESTING
(100) lists and dicts deep. Anything else (tuples, sets, datetimes, int keys, ...) would
come back different, and deeper data might not read back everywhere it is read (Python's
recursion limit: copy.deepcopy of a 600-deep dict fails), so it is refused with
SessionDataInvalid before anything is written; data whose msgpack form is over the store's
`max_data_bytes` (default 64 KiB) is refused with SessionDataTooLarge.

Bytes, for the partitioned layouts (record flag F_FRAMED, densekv/sessions/record.py):

    framed  = codec.py framing of a BYTES value holding the *packed* msgpack below,
              whichever of these is smallest for this payload:
              0x01 + packed                                 (no compression)
              0x51 + varint dictionary id + raw deflate with the dictionary as zdict
              0x21 + varint dictionary id + zstd frame with the dictionary
    marker  = the single byte 0x0F (codec.OUT_OF_LINE): the framed payload is in the
              session's own key (too large for hash-max-listpack-value), or
              0x0C (CONTINUED_HERE) + the framed payload's first part: the rest is
              the value of the session's continuation field in its own partition
              hash (partitioned.py cont_field), so one HMGET reads both, or
              0x0D (CONTINUED) + the first part, the rest in the partition's separate
              continuation hash: what densekv 0.1.0 wrote (still read and
              rewritten; densekv/sessions/layouts/partitioned.py)

    packed  = msgpack (bin type on) where a str value that is text of one of these kinds
              becomes an ext value holding its bytes, when that is shorter:
                ext 1  lowercase hex, even length     (a CSRF token: 40 chars -> 22 bytes)
                ext 2  uppercase hex, even length
                ext 3  base64url without padding, canonical (re-encodes to the same text)
                ext 4  a lowercase canonical UUID      (36 chars -> 18 bytes)
              and is restored as the same text on read. Ext numbers are format constants:
              a retired number is never reused.

A zstd dictionary trained on the namespace's own sessions (core.py) holds the repeated
key names and values ("_auth_user_backend": "django.contrib..."); deflate uses the same
bytes as its preset dictionary and, having no frame header, wins on small payloads: a
Django login (161 bytes of msgpack, 135 packed) takes 46-48 bytes, a CSRF-only session 27
(tests/unit/test_session_payload.py measures both). The dictionary also carries a key
table trained on the same payloads (payload_table.py, codec byte 0x61): no compression, a
key in a byte, a token as its bytes; it frames the Django login in 44 bytes and the
CSRF-only session in 27, and each write keeps the smallest of the three (encode()).
"""

from __future__ import annotations

import base64
import math
import re
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgpack

from densekv.codec import (
    OUT_OF_LINE,
    TABLE_CODED,
    Codec,
    ZstdDictionary,
    decode,
    needed_dictionary,
    read_varint,
    varint,
)
from densekv.errors import DensekvError
from densekv.errors import SessionDataInvalid as _SessionDataInvalid
from densekv.errors import SessionDataTooLarge as _SessionDataTooLarge
from densekv.errors import moved as _moved

if TYPE_CHECKING:  # loaded by the first store with a dictionary, not by `import densekv`
    from densekv.sessions.payload_table import Table

EXT_HEX = 1
EXT_HEX_UPPER = 2
EXT_B64URL = 3
EXT_UUID = 4
MARKER = bytes([OUT_OF_LINE])
CONTINUED = b"\x0d"  # codec.py reserves 0x0D for it: never a codec header
CONTINUED_HERE = b"\x0c"  # and 0x0C for this one
DEFAULT_MAX_DATA_BYTES = 64 * 1024
_MIN_PACKED = 8  # shorter text gains nothing from an ext header
# hex: fullmatch of an even-length text (0.19 us for 64 characters; \A(?:[0-9a-f]{2})+\Z took 0.63)
_HEX = re.compile(r"[0-9a-f]+")
_HEX_UPPER = re.compile(r"[0-9A-F]+")
_B64URL = re.compile(r"\A[A-Za-z0-9_-]+\Z")
_UUID = re.compile(r"\A[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
MAX_NESTING = 100  # lists and dicts inside one another, the session's own dict counted


def _ext_size(n: int) -> int:
    """Bytes msgpack spends on an ext value of n data bytes."""
    if n in (1, 2, 4, 8, 16):
        return 2 + n
    return n + (3 if n < 256 else 4 if n < 65536 else 6)


def _str_size(n: int) -> int:
    return n + (1 if n < 32 else 2 if n < 256 else 3 if n < 65536 else 5)


def _pack_text(s: str) -> Any:
    n = len(s)
    if n < _MIN_PACKED or not s.isascii():
        return s
    if n == 36 and _UUID.match(s):
        return msgpack.ExtType(EXT_UUID, uuid.UUID(s).bytes)
    if not n % 2:
        if _HEX.fullmatch(s):
            return msgpack.ExtType(EXT_HEX, bytes.fromhex(s))
        if _HEX_UPPER.fullmatch(s):
            return msgpack.ExtType(EXT_HEX_UPPER, bytes.fromhex(s))
    if n % 4 != 1 and _B64URL.match(s):
        raw = base64.urlsafe_b64decode(s + "=" * (-n % 4))
        if _ext_size(len(raw)) < _str_size(n) and base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == s:
            return msgpack.ExtType(EXT_B64URL, raw)
    return s


def _unpack_ext(code: int, data: bytes) -> str:
    if code == EXT_HEX:
        return data.hex()
    if code == EXT_HEX_UPPER:
        return data.hex().upper()
    if code == EXT_B64URL:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
    if code == EXT_UUID:
        return str(uuid.UUID(bytes=data))
    raise ValueError(f"unknown payload ext type {code}")


def _utf8_text(value: str, path: str) -> str:
    """The str itself, if msgpack can write it as UTF-8 (a lone surrogate cannot)."""
    text = str(value)
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise _SessionDataInvalid(f"session data {path} holds a lone surrogate, which is not UTF-8 "
                                     "text") from None
    return text


def _where(path: Any) -> str:
    """A value's place in the data for an error message: `path` is "data", or (the parent's
    path, a list index or dict key), built as _convert descends and rendered only here (an
    f-string per value cost a write ~3 us)."""
    parts = []
    while isinstance(path, tuple):
        path, key = path
        parts.append(f"[{key}]" if type(key) is int else f"[{key!r}]")
    return str(path) + "".join(reversed(parts))


def _convert(value: Any, path: Any, depth: int = 1) -> Any:
    """The value as it is packed; raises SessionDataInvalid for what would not round-trip."""
    t = type(value)
    if t is str and value.isascii():  # the common case first
        return _pack_text(value)
    if (t is dict or t is list or isinstance(value, (list, dict))) and depth > MAX_NESTING:
        raise _SessionDataInvalid(f"session data nests lists and dicts more than {MAX_NESTING} deep "
                                 f"(at {_where(path)[:80]}...): keep session data shallow")
    if value is None or t is bool or t is bytes:
        return value
    if isinstance(value, str):
        return _pack_text(_utf8_text(value, _where(path)))
    if isinstance(value, int) and not isinstance(value, bool):
        if not _INT_MIN <= value <= _INT_MAX:
            raise _SessionDataInvalid(f"session data {_where(path)} is an int outside -2**63 .. 2**64-1")
        return int(value)
    if isinstance(value, float):
        if math.isnan(value):
            raise _SessionDataInvalid(f"session data {_where(path)} is NaN, which never compares equal")
        return float(value)
    if isinstance(value, list):
        return [_convert(v, (path, i), depth + 1) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if type(k) is not str or not k.isascii():
                if not isinstance(k, str):
                    raise _SessionDataInvalid(
                        f"session data {_where(path)} has a {type(k).__name__} key {k!r}: keys are str")
                out[_utf8_text(k, _where(path) + " key")] = _convert(v, (path, k), depth + 1)
            elif type(v) is str and v.isascii():  # _convert's first case, without the call and path
                out[k] = _pack_text(v) if len(v) >= _MIN_PACKED else v
            else:
                out[k] = _convert(v, (path, k), depth + 1)
        return out
    raise _SessionDataInvalid(
        f"session data {_where(path)} is a {t.__name__}: keep None, bool, int, float, str, bytes, "
        "list and dict (str keys) in a session; a tuple, set or object would come back different")


def pack_data(data: Mapping[str, Any], max_bytes: int = DEFAULT_MAX_DATA_BYTES) -> bytes:
    """The packed msgpack of session data, checked to come back equal; typed errors."""
    if not isinstance(data, dict):
        raise _SessionDataInvalid(f"session data is a dict (or None), not {type(data).__name__}")
    packed: bytes = msgpack.packb(_convert(data, "data"), use_bin_type=True)
    if len(packed) > max_bytes:
        raise _SessionDataTooLarge(
            f"session data takes {len(packed)} bytes packed, over this store's max_data_bytes "
            f"{max_bytes}: keep bulky data out of the session, or raise max_data_bytes")
    if unpack_data(packed) != data:  # belt and braces: what is written decodes to what was given
        raise _SessionDataInvalid("session data does not come back equal after encoding")
    return packed


def unpack_data(packed: bytes) -> dict[str, Any]:
    data = msgpack.unpackb(packed, raw=False, ext_hook=_unpack_ext, strict_map_key=True)
    if not isinstance(data, dict):
        raise ValueError("a session payload is a map")  # noqa: TRY004  # bad stored bytes: a ValueError, as msgpack's
    return data


PROBE_FIRST = 64  # writes that try every codec after a dictionary is adopted ...
PROBE_EVERY = 32  # ... then one write in this many
PROBE_DECAY = 0.95  # weight of older probes in the bytes each codec lost


class PayloadCodec:
    """Frames session data with the namespace's current dictionary (if any), and decodes
    framed payloads with whatever dictionary they name. With a dictionary there are three
    ways to frame: the key table the dictionary carries (payload_table.py: no compression
    to run), or the packed msgpack deflated or zstd-compressed with the dictionary."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_DATA_BYTES) -> None:
        if max_bytes < 1:
            raise ValueError("max_data_bytes is a positive number of bytes")
        self.max_bytes = max_bytes
        self.dictionary: ZstdDictionary | None = None
        self.known: dict[int, bytes] = {}  # every dictionary loaded, by id
        self.table: Table | None = None  # the key table of the dictionary in use, if it has one
        self._tables: dict[int, Table | None] = {}  # key tables by dictionary id (None: that dictionary has none)
        self._codecs = [Codec("raw")]
        self._lost = [0.0]  # bytes each way lost to the best on the probed writes (decaying); the table's last
        self._leader = self._writes = 0
        self._table_head = b""  # 0x61 and the varint id of the dictionary in use

    def use(self, dictionary: ZstdDictionary | None) -> None:
        self.dictionary = dictionary
        self.table = None
        self._table_head = b""
        self._codecs = [Codec("raw")]
        self._lost = [0.0]
        self._leader = self._writes = 0
        if dictionary is not None:
            self.known[dictionary.id] = dictionary.data
            self._codecs = [Codec("raw", "zlib", level=9, dictionary=dictionary),
                            Codec("raw", "zstd", level=9, dictionary=dictionary)]
            self.table = self.table_of(dictionary.id)
            self._lost = [0.0, 0.0, 0.0] if self.table is not None else [0.0, 0.0]
            self._table_head = bytes([TABLE_CODED]) + varint(dictionary.id)

    def table_of(self, dictionary_id: int) -> Table | None:
        """The key table dictionary `dictionary_id` carries (None: it has none, or is not
        loaded), parsed once."""
        if dictionary_id not in self._tables:
            blob = self.known.get(dictionary_id)
            if blob is None:
                return None
            # loaded by the first store with a dictionary, not by `import densekv`
            from densekv.sessions import payload_table
            entries = payload_table.parse(blob)
            self._tables[dictionary_id] = None if entries is None else payload_table.Table(entries, _convert, _unpack_ext)
        return self._tables[dictionary_id]

    def frame(self, packed: bytes) -> bytes:
        """A small framing of a packed payload with deflate or zstd, the one of them that
        lost the fewest bytes on the probed writes (each codec keeps plain if smaller)."""
        codecs = self._codecs
        if len(codecs) == 1:
            return codecs[0].encode(packed)
        return codecs[0 if self._lost[0] <= self._lost[1] else 1].encode(packed)

    def _coded(self, table: Table, data: Mapping[str, Any]) -> bytes | None:
        """The table-coded framing of data (Table.encode checks it comes back equal), or
        None if the table cannot code it or its msgpack form could be over max_bytes
        (pack_data then decides, with its typed error)."""
        body = table.encode(data)  # checked to come back equal as it is made
        if body is None or len(body) + len(data) * table.slack > self.max_bytes:
            return None
        return self._table_head + body

    def encode(self, data: Mapping[str, Any]) -> tuple[bytes | None, bytes]:
        """(packed, framed) for session data; raises the typed errors above. packed is the
        msgpack form, or None when the key table framed the data (no msgpack was made).

        With a dictionary, every way is tried on the first PROBE_FIRST writes and on every
        PROBE_EVERY-th after; the others use the one that lost the fewest bytes on those
        (decaying): trying all cost 20-30 us a write. The table leads on login sessions
        (P0-P2, benchmarks/record_bytes.py), deflate where values repeat text (P3's cart)."""
        codecs = self._codecs
        if len(codecs) == 1:  # no dictionary
            packed = pack_data(data, self.max_bytes)
            return packed, codecs[0].encode(packed)
        table = self.table if isinstance(data, dict) else None  # pack_data refuses the others
        writes = self._writes + 1  # counted once encoded: data refused is no write
        if writes > PROBE_FIRST and writes % PROBE_EVERY:
            if self._leader == 2 and table is not None:
                coded = self._coded(table, data)
                if coded is not None:
                    self._writes = writes
                    return None, coded
            packed = pack_data(data, self.max_bytes)
            self._writes = writes
            return packed, self.frame(packed)
        coded = self._coded(table, data) if table is not None else None
        packed = pack_data(data, self.max_bytes)
        self._writes = writes
        outs = [c.encode(packed) for c in codecs]
        if self.table is not None:
            outs.append(coded if coded is not None else outs[0] + b"\x00")  # could not code it: lost a byte more
        best = min(map(len, outs))
        self._lost = [lost * PROBE_DECAY + len(o) - best for lost, o in zip(self._lost, outs)]
        self._leader = min(range(len(outs)), key=self._lost.__getitem__)
        return packed, min(outs, key=len)

    def leads_with_table(self) -> bool:
        """Whether the key table is the way writes take (the probes' leader)."""
        return self.table is not None and self._leader == 2

    def sizes(self, datas: list[dict[str, Any]], packed: list[bytes | None] | None = None) -> list[int]:
        """The framed size of each session's data, as small as any way makes it (no probe
        kept). As writes probe: every way is tried on the first PROBE_FIRST, and on the
        rest only the ways that were smallest on one of those (a look framed 2,000 shop
        sessions with the table too, which never wins them, in 148 ms against 105; login
        sessions with deflate and zstd too, which never win them, in 60 ms against 25:
        benchmarks/train_cost.py). `packed`: their msgpack forms where the caller has them."""
        table, codecs = self.table, self._codecs
        use_table, use_codecs = table is not None, True
        won_table = won_codecs = False
        out = []
        for i, data in enumerate(datas):
            if i == PROBE_FIRST:
                use_table, use_codecs = won_table, won_codecs or not won_table
            best = None
            if use_table:
                assert table is not None
                body = table.encode(data)
                if body is not None:
                    best = len(self._table_head) + len(body)
            if use_codecs or best is None:
                form = packed[i] if packed is not None else None
                if form is None:
                    form = pack_data(data, self.max_bytes)
                framed = min(len(c.encode(form)) for c in codecs)
                if best is None or framed < best:
                    best, won_codecs = framed, True
                else:
                    won_table = True
            else:
                won_table = True
            out.append(best)
        return out

    def missing(self, framed: bytes) -> int | None:
        """The dictionary a framed payload needs and this codec has not loaded."""
        need = needed_dictionary(framed)
        return need if need is not None and need not in self.known else None

    def decode(self, framed: bytes, *, key: Any) -> dict[str, Any]:
        if framed and framed[0] == TABLE_CODED:
            head = self._table_head
            if self.table is not None and framed.startswith(head):  # the dictionary in use: most reads
                return self.table.decode(framed, len(head))
            dictionary_id, pos = read_varint(framed, 1)
            table = self.table_of(dictionary_id)
            if table is None:
                raise ValueError(f"needs the key table of dictionary {dictionary_id}, which is not stored")
            return table.decode(framed, pos)
        raw = decode(framed, key=key, dictionaries=self.known)
        if not isinstance(raw, bytes):
            raise ValueError("a framed session payload holds bytes")  # noqa: TRY004  # as above
        return unpack_data(raw)


def retrain_table(blob: bytes, datas: list[dict[str, Any]]) -> bytes:
    """A session dictionary's bytes with the zstd dictionary of `blob` (a trained bundle or
    a dictionary from before tables) and a key table trained on `datas`."""
    from densekv.sessions import payload_table
    probe = pack_data(max(datas, key=len), 1 << 62)
    return payload_table.bundle(payload_table.zstd_part(blob), payload_table.train(datas),
                                lambda bundle: _zstd_loads(bundle, probe))


def train_payloads(packed: list[bytes], datas: list[dict[str, Any]] | None = None) -> bytes:
    """A session dictionary's bytes, trained on packed payloads (`datas`: the same, as
    data, if the caller has them): a 4 KiB zstd dictionary (deflate's preset dictionary
    too) with the key table in it (payload_table.bundle)."""
    from densekv.dictionaries import train_dictionary
    from densekv.sessions import payload_table
    zdict = train_dictionary(packed, size=4096)  # CodecUnavailable without zstandard
    probe = max(packed, key=len)
    table = payload_table.train(datas if datas is not None else (unpack_data(p) for p in packed))
    return payload_table.bundle(zdict, table, lambda bundle: _zstd_loads(bundle, probe))


def _zstd_loads(blob: bytes, probe: bytes) -> bool:
    """zstd loads `blob` as a dictionary and round-trips a payload with it (where a bundle
    puts its table, payload_table.bundle)."""
    import zstandard
    try:
        d = zstandard.ZstdCompressionDict(blob)
        frame = zstandard.ZstdCompressor(level=1, dict_data=d).compress(probe)  # loading it is the test
        return bool(zstandard.ZstdDecompressor(dict_data=d).decompress(frame) == probe)
    except zstandard.ZstdError:
        return False


__all__ = [
    "CONTINUED", "CONTINUED_HERE", "DEFAULT_MAX_DATA_BYTES", "MAX_NESTING", "PayloadCodec",
    "pack_data", "retrain_table", "train_payloads", "unpack_data"
]


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("SessionDataInvalid", "SessionDataTooLarge")


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
