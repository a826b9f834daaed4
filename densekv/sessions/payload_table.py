"""The key table: a session payload coded against what the namespace's sessions hold,
with no compression to run (issue 30, section 2: cut what is not information).

A login session is a handful of keys that every session of the app has, with values of a
few shapes: a constant ("_auth_user_backend": "django.contrib.auth.backends.ModelBackend",
"_fresh": true), lowercase hex of one length (a 64-character hash, a CSRF token), a
decimal user id, or anything else. Deflate with a 4 KiB preset dictionary finds the names
and constants again in each payload, then Huffman-codes the random bytes of the tokens into
*more* bytes than they are (about 8.5 bits each); on a busy web worker that costs 11-21 us a
write and 3 us a read (measured in situ, benchmarks/hot_path.py --profile). A table trained
on the same samples names each (key, shape) once, so a session is one byte a key and the
bare bytes of its values: a Django login plus one key takes 42 bytes of body against 47.5
for deflate, a Flask-Login session 93 against 104, and it is coded in 3-4 us, decoded in 1-2.

Bytes of a table-coded payload (codec header 0x61, sessions only: densekv/codec.py):

    0x61, varint dictionary id (the bundle's content id, as deflate's 0x51), then the body:
    m       1 byte: the number of top-level keys (0..254)
    codes   m bytes, one per key in the data's order: a table entry (0..254), or 255 (ESC)
            for a key the table does not name
    fixed   for each code in order: CONST nothing; HEX(n) the n bytes of the hex text;
            DEC an unsigned LEB128 varint of the decimal text's value; INT a varint of the int
    tail    only if some code is ANY or ESC: one msgpack array holding, in order, each ANY
            value and each ESC key and value, packed as payload.py packs (its ext types)

Table entries (key, kind, arg): CONST (arg: a str, bool, int or None the key often holds),
HEX (arg: n, for lowercase hex text of 2n characters), DEC (canonical decimal text: ASCII
digits, no leading zero, at most 19), INT (an int 0 .. 2**64-1), ANY (any value). A key
keeps an ANY entry beside its others, so any value of a named key codes.

The table travels inside the namespace's dictionary, so one content id names both (no new
reference in a payload, no new metadata field): a bundle is the zstd dictionary's header
(up to its repeat offsets 1, 4, 8), then b"DKT1", the table's length (2 bytes, big-endian)
and the table (msgpack of its entries), then the zstd dictionary's content. Deflate and zstd
use the whole bundle as their dictionary; the table sits at the far end of their window, so
they frame what they framed with the trained dictionary alone, and a bundle reads and writes
right for a process of a release before tables, which only lacks the 0x61 payloads (it
reads them as undecodable).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgpack

from densekv.codec import read_varint, varint

CONST, HEX, DEC, ANY, INT = 0, 1, 2, 3, 4
ESC = 255  # a key the table does not name: it and its value go to the tail
MAX_ENTRIES = 255  # codes 0..254
MAGIC = b"DKT1"
#: zstd's default repeat offsets (1, 4, 8 as 4-byte little-endian), the last bytes of a trained
#: dictionary's header: the table goes right after them, behind this signature
_REPCODES = bytes.fromhex("010000000400000008000000")
_SIGNATURE = _REPCODES + MAGIC
MIN_KEY_SHARE = 0.01  # a key is named if this share of the samples holds it (and two do) ...
CONST_SHARE = 0.05  # ... a value is a constant of its key if this share of the key's values are it ...
MAX_CONSTS = 4  # ... (the most common ones, up to this many) ...
SHAPE_SHARE = 0.5  # ... and HEX, DEC or INT is its shape if this share of its values have it
MAX_CONST_BYTES = 256  # constants whose text could be longer (4 bytes a character) are left to ANY
_HEX = re.compile(r"[0-9a-f]+")
_SCALARS = (str, bool, int, type(None))
_INT_END = 2**64

#: packs one value as payload.py does (its _convert: checks, ext types), given its path and depth
Convert = Callable[[Any, Any, int], Any]


def _decimal(v: Any) -> bool:
    """Whether v is canonical decimal text that DEC gives back exactly."""
    return type(v) is str and 0 < len(v) <= 19 and v.isascii() and v.isdigit() and (v[0] != "0" or v == "0")


def _hex_bytes(v: Any) -> int:
    """n if v is lowercase hex text of 2n characters (n >= 4), else 0."""
    n = len(v) if type(v) is str else 0
    return n // 2 if n >= 8 and not n % 2 and n <= 510 and _HEX.fullmatch(v) else 0


def train(samples: Iterable[dict[str, Any]]) -> list[tuple[str, int, Any]]:
    """Table entries for sessions like `samples`: their common keys, most common first,
    each with its common constants, its shape if most of its values have one, and ANY."""
    keys: Counter[str] = Counter()
    consts: defaultdict[str, Counter[tuple[type, Any]]] = defaultdict(Counter)
    hexes: defaultdict[str, Counter[int]] = defaultdict(Counter)
    decimals: Counter[str] = Counter()
    ints: Counter[str] = Counter()
    count = 0
    for data in samples:
        count += 1
        for k, v in data.items():
            if type(k) is not str:
                continue
            keys[k] += 1
            t = type(v)
            if (t is str and len(v) <= MAX_CONST_BYTES // 4) or t is bool or t is int or v is None:
                consts[k][(t, v)] += 1
            n = _hex_bytes(v)
            if n:
                hexes[k][n] += 1
            elif _decimal(v):
                decimals[k] += 1
            elif type(v) is int and 0 <= v < _INT_END:
                ints[k] += 1
    entries: list[tuple[str, int, Any]] = []
    for k, seen in keys.most_common():
        if seen < max(2, MIN_KEY_SHARE * count):
            break
        own = [(k, CONST, v) for (_, v), c in consts[k].most_common(MAX_CONSTS) if c >= max(2, CONST_SHARE * seen)]
        if hexes[k]:
            n, c = hexes[k].most_common(1)[0]
            if c >= SHAPE_SHARE * seen:
                own.append((k, HEX, n))
        if decimals[k] >= SHAPE_SHARE * seen:
            own.append((k, DEC, None))
        if ints[k] >= SHAPE_SHARE * seen:
            own.append((k, INT, None))
        own.append((k, ANY, None))
        if len(entries) + len(own) > MAX_ENTRIES:
            break
        entries += own
    return entries


def bundle(zdict: bytes, entries: list[tuple[str, int, Any]], check: Callable[[bytes], bool]) -> bytes:
    """A dictionary's bytes with the table in them (module docstring): at the head of the
    zstd dictionary's content, where neither zstd nor deflate reaches for recent bytes, so
    their output is what the trained dictionary alone gives (P1, P3: the same mean bytes);
    at its end if `check` (zstd loads the bundle and round-trips a payload with it) fails
    there, or the header's end is not found."""
    table: bytes = msgpack.packb([list(e) for e in entries], use_bin_type=True)
    if len(table) >= 1 << 16:
        raise ValueError("a key table is under 64 KiB")
    mark = _SIGNATURE + len(table).to_bytes(2, "big") + table
    head = zdict.find(_REPCODES, 8)  # the zstd header's last 12 bytes: its repeat offsets
    if head >= 0:
        front = zdict[:head] + mark + zdict[head + len(_REPCODES):]
        if check(front):
            return front
    return zdict + mark


def zstd_part(blob: bytes) -> bytes:
    """The zstd dictionary a bundle was made of (bundle's inverse); a dictionary of a
    release before tables as it is."""
    at = blob.find(_SIGNATURE)
    if at < 0:
        return blob
    pos = at + len(_SIGNATURE)
    end = pos + 2 + int.from_bytes(blob[pos:pos + 2], "big")
    rest = blob[end:]
    if not rest:  # the table was at the end: the dictionary is all before it
        return blob[:at]
    return blob[:at] + _REPCODES + rest


def parse(blob: bytes) -> list[tuple[str, int, Any]] | None:
    """The table a dictionary's bytes carry, or None (a dictionary of a release before
    tables, or bytes that are no table: never an error)."""
    at = blob.find(_SIGNATURE)
    if at < 0:
        return None
    pos = at + len(_SIGNATURE)
    n = int.from_bytes(blob[pos:pos + 2], "big")
    raw_table = blob[pos + 2:pos + 2 + n]
    if len(raw_table) != n or pos + 2 > len(blob):
        return None
    try:
        raw = msgpack.unpackb(raw_table, raw=False, strict_map_key=True)
    except Exception:  # noqa: BLE001  # any bytes that are not a table
        return None
    if not isinstance(raw, list) or len(raw) > MAX_ENTRIES:
        return None
    entries = []
    for e in raw:
        if not (isinstance(e, list) and len(e) == 3 and type(e[0]) is str and e[1] in (CONST, HEX, DEC, ANY, INT)):
            return None
        k, kind, arg = e
        if (kind == CONST and type(arg) not in _SCALARS) or (kind == HEX and not (type(arg) is int and 4 <= arg <= 255)) \
                or (kind in (DEC, ANY, INT) and arg is not None):
            return None
        entries.append((k, kind, arg))
    return entries


#: value types msgpack gives back equal, of the same type, when `convert` passed them on as
#: they are (an int as int(v): its range is checked there): a tail of only these and ASCII
#: keys is not unpacked to be compared (a str that `convert` made an ext, a float, a list or
#: a dict is; so is a subclass of any of these: its own __eq__ or __str__ may differ)
_EXACT = frozenset({str, int, bool, type(None), bytes})


def _as_given(value: Any, packed: Any) -> bool:
    """Whether msgpack gives `value` back as it is from `packed` (convert's form of it)."""
    return type(value) in _EXACT and (packed is value or type(value) is int)


class Table:
    """Codes session data against a table's entries (module docstring). `convert` packs
    an ANY value as payload.py does; `ext_hook` reads payload.py's ext types back."""

    def __init__(self, entries: list[tuple[str, int, Any]], convert: Convert,
                 ext_hook: Callable[[int, bytes], Any]) -> None:
        self.entries = entries
        self.convert = convert
        self.ext_hook = ext_hook
        # key -> [its constants {(type, value): code}, hex n, hex code, dec code, any code, int code]
        self._codes: dict[str, list[Any]] = {}
        for code, (k, kind, arg) in enumerate(entries):
            e = self._codes.setdefault(k, [{}, 0, None, None, None, None])
            if kind == CONST:
                e[0][(type(arg), arg)] = code
            elif kind == HEX:
                e[1], e[2] = arg, code
            elif kind == DEC:
                e[3] = code
            elif kind == INT:
                e[5] = code
            else:
                e[4] = code
        # what each code expands to, over the body's byte: the bound PayloadCodec checks
        # max_data_bytes against without packing (payload.py's msgpack form is at most this
        # much longer than the body a key)
        self.slack = 5 + max([_expansion(k, kind, arg) for k, kind, arg in entries] + [0])

    def encode(self, data: Mapping[str, Any]) -> bytes | None:
        """The body of data, or None if the table cannot code it (more than 254 keys, a key
        that is not ASCII text nor named, a named key without ANY, a tail that would not
        come back equal): payload.py packs it.

        Checked as it is made: a CONST, HEX, DEC or INT code gives back what it was given by
        construction (exact types, lowercase hex of the table's length, canonical decimal
        text), and the tail, which holds everything else, is unpacked and compared (belt and
        braces, as payload.pack_data, for a fifth of the cost of decoding the whole body)."""
        if len(data) > 254:
            return None
        codes = bytearray((len(data),))
        fixed = bytearray()
        tail: list[Any] = []
        given: list[Any] = []  # what the tail must give back
        exact = True  # every tail value one msgpack gives back as it is (_EXACT): no check
        table = self._codes
        convert = self.convert
        for k, v in data.items():
            e = table.get(k)
            if e is None:
                if type(k) is not str or not k.isascii():
                    return None
                codes.append(ESC)
                tail.append(k)
                packed_v = convert(v, ("data", k), 2)
                tail.append(packed_v)
                given += (k, v)
                exact = exact and _as_given(v, packed_v)
                continue
            t = type(v)
            if t is str:
                c = e[0].get((t, v))
                if c is not None:
                    codes.append(c)
                    continue
                n = e[1]
                if n and len(v) == 2 * n and _HEX.fullmatch(v):
                    codes.append(e[2])
                    fixed += bytes.fromhex(v)
                    continue
                if e[3] is not None and _decimal(v):
                    codes.append(e[3])
                    fixed += varint(int(v))
                    continue
            elif t is int:
                c = e[0].get((t, v))
                if c is not None:
                    codes.append(c)
                    continue
                if e[5] is not None and 0 <= v < _INT_END:
                    codes.append(e[5])
                    fixed += varint(v)
                    continue
            elif t is bool or v is None:
                c = e[0].get((t, v))
                if c is not None:
                    codes.append(c)
                    continue
            if e[4] is None:
                return None
            codes.append(e[4])
            packed_v = convert(v, ("data", k), 2)
            tail.append(packed_v)
            given.append(v)
            exact = exact and _as_given(v, packed_v)
        if tail:
            packed: bytes = msgpack.packb(tail, use_bin_type=True)
            if not exact and msgpack.unpackb(packed, raw=False, ext_hook=self.ext_hook,
                                             strict_map_key=True) != given:
                return None  # payload.py's pack_data then refuses it, with its typed error
            return bytes(codes + fixed) + packed
        return bytes(codes + fixed)

    def decode(self, data: bytes, start: int = 0) -> dict[str, Any]:
        """The data the body at data[start:] holds; ValueError for bytes this table did
        not write."""
        end = len(data)
        if start >= end:
            raise ValueError("empty key table payload")
        m = data[start]
        pos = start + 1 + m
        if end < pos:
            raise ValueError("truncated key table payload")
        codes = data[start + 1:pos]
        entries = self.entries
        values: list[Any] = []
        later = False
        for c in codes:
            if c == ESC:
                later = True
                continue
            if c >= len(entries):
                raise ValueError(f"key table code {c} is not in this table")
            _, kind, arg = entries[c]
            if kind == CONST:
                values.append(arg)
            elif kind == HEX:
                if pos + arg > end:
                    raise ValueError("truncated key table payload")
                values.append(data[pos:pos + arg].hex())
                pos += arg
            elif kind == DEC:
                n, pos = read_varint(data, pos, 63)
                values.append(str(n))
            elif kind == INT:
                n, pos = read_varint(data, pos, 63)
                values.append(n)
            else:
                later = True
        if later:
            tail = msgpack.unpackb(data[pos:], raw=False, ext_hook=self.ext_hook, strict_map_key=True)
            if type(tail) is not list:
                raise ValueError("key table payload's tail is not a list")
            return self._merge(codes, values, tail)
        if pos != end:
            raise ValueError("key table payload has trailing bytes")
        out = {entries[c][0]: v for c, v in zip(codes, values)}
        if len(out) != m:
            raise ValueError("key table payload names a key twice")
        return out

    def _merge(self, codes: bytes, values: list[Any], tail: list[Any]) -> dict[str, Any]:
        """decode()'s result when some values are in the tail: in the data's order."""
        entries = self.entries
        out: dict[str, Any] = {}
        fixed = iter(values)
        rest = iter(tail)
        try:
            for c in codes:
                if c == ESC:
                    k = next(rest)
                    if type(k) is not str:
                        raise ValueError("key table payload has a key that is not text")
                    out[k] = next(rest)
                else:
                    k, kind, _ = entries[c]
                    out[k] = next(rest) if kind == ANY else next(fixed)
        except StopIteration:
            raise ValueError("key table payload's tail is short") from None
        if next(rest, rest) is not rest:
            raise ValueError("key table payload's tail is long")
        if len(out) != len(codes):
            raise ValueError("key table payload names a key twice")
        return out


def _expansion(key: str, kind: int, arg: Any) -> int:
    """How many bytes payload.py's msgpack form of one coded key and value can take beyond
    its code and fixed bytes in the body (a key, plus a constant, an ext header or digits)."""
    extra = {CONST: len(msgpack.packb(arg, use_bin_type=True)), HEX: 3, DEC: 20, ANY: 0, INT: 9}[kind]
    return len(msgpack.packb(key, use_bin_type=True)) + extra


__all__ = ["ANY", "CONST", "DEC", "ESC", "HEX", "INT", "MAGIC", "Table", "bundle", "parse", "train", "zstd_part"]
