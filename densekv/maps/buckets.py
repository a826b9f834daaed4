"""Bucketing: which hash (bucket) and which field an item of a compact map lives in.

Keys with a numeric tail ("user:1234", "img77") are split into prefix and number n; the
item goes to bucket b = n mod B of that prefix, under the field that stands for the
quotient q = n div B. Sequential ids fill every bucket evenly and densely; ids drawn at
random from a wide range (holey ids) spread evenly too, which bucketing by n div W (the
seed's gem) cannot do: there most buckets hold one item. Keys without a canonical numeric
tail go to bucket crc32(zipped key) mod B of the hashed buckets, field = the zipped key.
A tail with leading zeros keeps them in the prefix ("user:007" is prefix "user:00",
number 7), so no two keys share a place.

Numeric fields (format 2). A listpack stores a canonical decimal integer field in one of
these entries (listpack.c, lpEncodeIntegerGetType; +1 byte of back length each):
  7-bit  0..127                 1 byte     -> 2 bytes in the listpack
  13-bit -4096..4095            2 bytes    -> 3
  16-bit -32768..32767          3 bytes    -> 4
  24-bit -2^23..2^23-1          4 bytes    -> 5
  32-bit, 64-bit                5, 9 bytes -> 6, 10
The encodings are signed, so q itself (never negative) would use half of each range: q
up to 65535 would need the 24-bit form. The field is instead field_int(q), a bijection
from q >= 0 onto the integers ordered by entry size (0..127, then 128..4095 and
-1..-4096, then 4096..32767 and -4097..-32768, ...): q < 128 takes 2 bytes, q < 8192
3 bytes, q < 65536 4 bytes, q < 2^24 5 bytes. Holey ids from 0..10^8 (q < 62000 with
B = 1613) save a listpack byte per item over format 1 (plain q in decimal); jemalloc's
size classes absorb part of it: 0.5-0.7 B/item less used_memory in
benchmarks/map_memory.py (int_holey, str8_holey, 200k items, the four servers).

B comes from the expected item count, a target of about 124 items per bucket (see
bucket_count) and the server's hash-max-listpack-entries Z: the smallest B with
mean + 5 sqrt(mean) <= Z where mean = expected / B (random placement puts mean +- sqrt(mean)
items in a bucket; at 4 sigma one bucket of 467 went over in our tests), so buckets stay
listpacks. B is stored in the server when the map is created and never changes (every
process must find the same bucket). Values larger than hash-max-listpack-value go out of
line (own key, marker in the bucket); a field that would be larger than the limit (a very
long key) is refused.

Keys (all of one bucket share the hash tag, so one cluster slot; <b> is the bucket number
in base62, zero-padded to the width of base62(B - 1), and no separator follows it. So
bucket 1612 of prefix "user:" in map "kv" is "kv:m:{Q0user:}", 14 bytes, which Redis 7
keeps in a 16-byte allocation; format 1 named it "kv:m:{1612.user:}", a 24-byte one):
  {ns}:m:{<b><zipped prefix>}             numeric-tail bucket
  {ns}:h:{<b>}                            hashed bucket
  {ns}:o<m|h>:{<tag>}:<field>             out-of-line value of that bucket's field
So any tool that reads B from the map's meta decodes every key: prefix and bucket from
the key name, n = field_index(int(field)) * B + b. A map stored in format 1 (decimal
bucket numbers and "<b>.<prefix>", plain q fields) is refused by its format (FORMAT below,
checked when the map is opened), never read with this layout.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass

from densekv.codec import OUT_OF_LINE
from densekv.errors import DensekvError, InvalidArgument
from densekv.errors import KeyTooLong as _KeyTooLong
from densekv.errors import moved as _moved
from densekv.keys import checked, glob_escape, tag
from densekv.keys import key as untagged
from densekv.listpack import as_int64
from densekv.maps.zipkeys import ALPHABET, NO_ALIASES, Aliases, base62, unbase62, unzip_key, zip_key

FORMAT = "2"  # the map format this layout writes (1: plain-q fields, "<b>.<prefix>" bucket tags)

MAX_TAIL_DIGITS = 18  # longer numeric tails are hashed: a tail must fit an int64
_TAIL = re.compile(rf"(?:0|[1-9][0-9]{{0,{MAX_TAIL_DIGITS - 1}}})\Z")  # canonical, < 10**18
_BASE62 = frozenset(ALPHABET)

# The signed ranges of the listpack integer entries, smallest first.
_INT_RANGES = ((0, 127), (-4096, 4095), (-(2**15), 2**15 - 1), (-(2**23), 2**23 - 1),
               (-(2**31), 2**31 - 1), (-(2**63), 2**63 - 1))


@dataclass(frozen=True)
class Geometry:
    """How a map places items; stored in the server with the map (never recomputed)."""

    buckets: int  # B: buckets per numeric prefix, and hashed buckets
    entries_limit: int  # hash-max-listpack-entries when the map was made
    value_limit: int  # hash-max-listpack-value (checked against the live server too)

    def __post_init__(self) -> None:
        if self.buckets < 1 or self.entries_limit < 1 or self.value_limit < 8:
            raise InvalidArgument("buckets >= 1, entries_limit >= 1, value_limit >= 8")

    @property
    def tag_width(self) -> int:
        """Base62 digits of a bucket number in a numeric bucket's key."""
        return len(base62(self.buckets - 1))


def field_int(q: int) -> int:
    """The integer stored as the field of quotient q: the q-th integer in order of
    listpack entry size (0..127, 128..4095, -1..-4096, 4096..32767, -4097..-32768, ...)."""
    if q < 0:
        raise ValueError("a quotient is >= 0")
    start, lo0, hi0 = 0, 0, -1  # the range of the smaller entries (empty at first)
    for lo, hi in _INT_RANGES:
        size = (hi - lo) - (hi0 - lo0)
        if q < start + size:
            r, up = q - start, hi - hi0
            return hi0 + 1 + r if r < up else lo0 - 1 - (r - up)
        start, lo0, hi0 = start + size, lo, hi
    raise ValueError("quotient out of the int64 range")


def field_index(v: int) -> int:
    """The inverse of field_int."""
    start, lo0, hi0 = 0, 0, -1
    for lo, hi in _INT_RANGES:
        if lo <= v <= hi:
            return start + (v - hi0 - 1 if v > hi0 else (hi - hi0) + (lo0 - 1 - v))
        start, lo0, hi0 = start + (hi - lo) - (hi0 - lo0), lo, hi
    raise ValueError(f"{v} is not a 64-bit integer")


TARGET_ITEMS = 124  # items per bucket aimed at; see bucket_count


def bucket_count(expected: int, entries_limit: int, target: int | None = TARGET_ITEMS) -> int:
    """Smallest B with expected/B + 5 sqrt(expected/B) <= entries_limit and, when `target`
    is given, expected/B <= target.

    Why a target below the limit: with about 124 items per bucket, sequential ids give
    quotients 0..127 (fields of 2 bytes in the listpack instead of 3) and ids from 0..10^8
    quotients under 65536 (4 bytes instead of 5); that saves more than the extra buckets
    cost (key, object and dict entry: 56 bytes on Redis 7, plus allocator rounding), and
    HGET scans a 124-entry listpack, not a 400-entry one (server time per HGET roughly
    tracks the entries scanned). 124 and not 128: a few percent more items than expected
    keep the short fields, and 124 fields of 2 bytes with 32-bit integer values (6 bytes)
    make a 999-byte listpack, inside jemalloc's 1024-byte class."""
    if expected < 0 or entries_limit < 1:
        raise InvalidArgument("expected >= 0 and entries_limit >= 1")
    # mean m solves m + 5 sqrt(m) = Z  ->  sqrt(m) = -2.5 + sqrt(6.25 + Z)
    mean = (math.sqrt(6.25 + entries_limit) - 2.5) ** 2
    if target is not None:
        mean = min(mean, float(target))
    b = max(1, math.ceil(expected / mean)) if mean > 0 else max(1, expected)
    while expected / b + 5 * math.sqrt(expected / b) > entries_limit or (target and expected / b > target):
        b += 1
    return b


def split_numeric(key: str) -> tuple[str, int] | None:
    """(prefix, number) of a key with a canonical numeric tail; leading zeros stay in
    the prefix. None when the key does not end in a digit."""
    end = len(key)
    start = end
    while start > 0 and "0" <= key[start - 1] <= "9":
        start -= 1
    if start == end:
        return None
    digits = key[start:]
    stripped = digits.lstrip("0") or "0"
    if not _TAIL.match(stripped):
        return None  # more than 18 digits: hashed
    return key[: end - len(stripped)], int(stripped)


#: the marker a bucket holds for a value that lives out of line, in Location.ool
OOL = bytes([OUT_OF_LINE])
OOL_SLACK = 1  # an out-of-line key outlives its marker by a second (clock rounding)


@dataclass(frozen=True)
class Location:
    bucket: bytes
    field: bytes

    @property
    def ool(self) -> bytes:
        """The key an out-of-line value of this item lives in: `{ns}:o<m|h>:{<tag>}:<field>`,
        the bucket's name with its code prefixed by "o" (om / oh, checked in densekv/keys.py)."""
        ns, code, rest = self.bucket.split(b":", 2)
        checked("o" + code.decode())
        return ns + b":o" + code + b":" + rest + b":" + self.field


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def locate(namespace: str, key: str, geo: Geometry, aliases: Aliases = NO_ALIASES) -> Location:
    numeric = split_numeric(key)
    if numeric is not None:
        prefix, n = numeric
        q, b = divmod(n, geo.buckets)
        inner = base62(b).rjust(geo.tag_width, ALPHABET[0]) + zip_key(prefix, aliases)
        return Location(tag(namespace, "m", _bytes(inner)), str(field_int(q)).encode())
    field = _bytes(zip_key(key, aliases))
    if len(field) > geo.value_limit:
        raise _KeyTooLong(
            f"key {key[:40]!r}... zips to {len(field)} bytes, over the server's "
            f"hash-max-listpack-value {geo.value_limit}: use shorter keys (or aliases)"
        )
    b = zlib.crc32(field) % geo.buckets
    return Location(tag(namespace, "h", base62(b)), field)


def key_of(namespace: str, bucket: bytes, field: bytes, geo: Geometry,
           aliases: Aliases = NO_ALIASES) -> str:
    """The map key stored at (bucket, field): the inverse of locate(). ValueError for a
    bucket or field this map's layout cannot have written."""
    head = f"{namespace}:".encode()
    if not bucket.startswith(head) or not bucket.endswith(b"}"):
        raise ValueError(f"{bucket!r} is not a bucket of map {namespace!r}")
    code, rest = bucket[len(head) :].split(b":", 1)
    inner = rest[1:-1].decode("utf-8", "surrogatepass")
    if code == b"h" and rest.startswith(b"{"):
        return unzip_key(field.decode("utf-8", "surrogatepass"), aliases)
    w = geo.tag_width
    digits = inner[:w]
    if code != b"m" or not rest.startswith(b"{") or len(digits) < w or not set(digits) <= _BASE62:
        raise ValueError(f"{bucket!r} is not a bucket of map {namespace!r}")
    b = unbase62(digits)
    if b >= geo.buckets or as_int64(field) is None:  # a listpack integer, as locate writes
        raise ValueError(f"{bucket!r} / {field!r} is no place of a {geo.buckets}-bucket map "
                         f"in format {FORMAT}")
    n = field_index(int(field)) * geo.buckets + b
    if n >= 10**18:  # locate hashes longer tails: no numeric bucket holds this
        raise ValueError(f"field {field!r} of {bucket!r} stands for {n}, past the numeric tails")
    return unzip_key(inner[w:], aliases) + str(n)


def bucket_patterns(namespace: str) -> list[bytes]:
    """SCAN MATCH patterns of the map's buckets (the namespace has no glob characters)."""
    ns = glob_escape(namespace.encode())
    return [ns + f":{checked(code)}:{{*".encode() for code in ("m", "h")]


_DIGITS = "0123456789"


class Locator:
    """locate() with its per-prefix work cached (split, zip of the prefix, bucket
    name): a map's hot keys share a few prefixes, and locate costs 3-5 us a key.

    It relies on what this module documents: a numeric-tail key P+n lives
    in a bucket that depends on (P, n mod B) only and in a field that depends on n div B
    only. Bucket names are filled by locate itself; a field is str(field_int(q)),
    the format-2 field locate writes (computed, not looked up: holey ids seldom repeat a
    quotient, and a full locate costs ~5 us where field_int costs ~0.5). Keys locate does
    not put in a numeric bucket are never cached.
    tests/behaviour/test_map_batch.py checks it against locate on awkward keys."""

    LIMIT = 1 << 16  # entries (about 100 bytes each) before the caches start again

    def __init__(self, namespace: str, geo: Geometry, aliases: Aliases) -> None:
        self.namespace, self.geo, self.aliases = namespace, geo, aliases
        self.numeric = untagged(namespace, "m") + b":"
        self.b = geo.buckets
        self.heads: dict[str, dict[int, bytes]] = {}  # prefix -> n mod B -> bucket
        self.fields: dict[int, bytes] = {}  # n div B -> field
        self.size = 0

    def __call__(self, key: str) -> tuple[bytes, bytes]:
        head = key.rstrip(_DIGITS)
        tail = key[len(head):]
        if tail and tail[0] != "0" and len(tail) <= MAX_TAIL_DIGITS:  # no leading zero: prefix == head
            per = self.heads.get(head)
            if per is not None:
                q, r = divmod(int(tail), self.b)
                bucket = per.get(r)
                if bucket is not None:
                    field = self.fields.get(q)
                    if field is None:
                        if len(self.fields) >= self.LIMIT:
                            self.fields.clear()
                        field = self.fields[q] = str(field_int(q)).encode()
                    return bucket, field
        loc = locate(self.namespace, key, self.geo, self.aliases)
        if tail and tail[0] != "0" and len(tail) <= MAX_TAIL_DIGITS and loc.bucket.startswith(self.numeric):
            q, r = divmod(int(tail), self.b)
            self.size += 1
            if self.size > self.LIMIT:
                self.heads.clear()
                self.fields.clear()
                self.size = 1
            self.heads.setdefault(head, {})[r] = loc.bucket
            self.fields[q] = loc.field
        return loc.bucket, loc.field


# What other modules and the tools import from here (tests/unit/test_tools_use_public_names.py)
__all__ = ["FORMAT", "MAX_TAIL_DIGITS", "OOL", "OOL_SLACK", "TARGET_ITEMS", "Geometry", "Location",
           "Locator", "bucket_count", "bucket_patterns", "field_index", "field_int", "key_of",
           "locate", "split_numeric"]


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("KeyTooLong",)


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
