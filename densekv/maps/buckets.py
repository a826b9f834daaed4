"""Bucketing: which hash (bucket) and which field an item of a compact map lives in.

Keys with a numeric tail ("user:1234", "img77") are split into prefix and number n; the
item goes to bucket n mod B of that prefix, field n div B (decimal, so the listpack stores
the field as a 1-4 byte integer). Sequential ids fill every bucket evenly and densely;
ids drawn at random from a wide range (holey ids) spread evenly too, which bucketing by
n div W (the seed's gem) cannot do: there most buckets hold one item. Keys without a
canonical numeric tail go to bucket crc32(zipped key) mod B of the hashed buckets, field =
the zipped key. A tail with leading zeros keeps them in the prefix ("user:007" is prefix
"user:00", number 7), so no two keys share a place.

B comes from the expected item count, a target of about 124 items per bucket (so fields
stay in the listpack's short integer encodings, see bucket_count) and the server's
hash-max-listpack-entries Z: the
smallest B with mean + 5 sqrt(mean) <= Z where mean = expected / B (random placement puts
mean +- sqrt(mean) items in a bucket; at 4 sigma one bucket of 467 went over in our
tests), so buckets stay listpacks. B is stored in the
server when the map is created and never changes (every process must find the same
bucket). Values larger than hash-max-listpack-value go out of line (own key, marker in
the bucket); a field that would be larger than the limit (a very long key) is refused.

Keys (all of one bucket share the hash tag, so one cluster slot):
  {ns}:m:{<bucket>.<zipped prefix>}        numeric-tail bucket
  {ns}:h:{<bucket>}                         hashed bucket
  {ns}:o<m|h>:{<tag>}:<field>               out-of-line value of that bucket's field
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass

from densekv.errors import DensekvError
from densekv.maps.zipkeys import NO_ALIASES, Aliases, unzip_key, zip_key

_TAIL = re.compile(r"(?:0|[1-9][0-9]{0,17})\Z")  # canonical, < 10**18 (fits int64)


class KeyTooLong(DensekvError):
    """A key whose zipped form is longer than a listpack field may be."""


@dataclass(frozen=True)
class Geometry:
    """How a map places items; stored in the server with the map (never recomputed)."""

    buckets: int  # B: buckets per numeric prefix, and hashed buckets
    entries_limit: int  # hash-max-listpack-entries when the map was made
    value_limit: int  # hash-max-listpack-value (checked against the live server too)

    def __post_init__(self) -> None:
        if self.buckets < 1 or self.entries_limit < 1 or self.value_limit < 8:
            raise ValueError("buckets >= 1, entries_limit >= 1, value_limit >= 8")


TARGET_ITEMS = 124  # items per bucket aimed at; see bucket_count


def bucket_count(expected: int, entries_limit: int, target: int | None = TARGET_ITEMS) -> int:
    """Smallest B with expected/B + 5 sqrt(expected/B) <= entries_limit and, when `target`
    is given, expected/B <= target.

    Why a target below the limit: with about 124 items per bucket, sequential ids give
    fields 0..127 (a listpack stores those in 2 bytes instead of 3) and ids from 0..10^8
    fields under 65536 (4 bytes instead of 5); that saves more than the extra buckets cost
    (about 90 bytes each on jemalloc), and HGET scans a 124-entry listpack, not a 400-entry
    one (server time per HGET roughly tracks the entries scanned)."""
    if expected < 0 or entries_limit < 1:
        raise ValueError("expected >= 0 and entries_limit >= 1")
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


@dataclass(frozen=True)
class Location:
    bucket: bytes
    field: bytes

    @property
    def ool(self) -> bytes:
        """The key an out-of-line value of this item lives in."""
        ns, code, rest = self.bucket.split(b":", 2)
        return ns + b":o" + code + b":" + rest + b":" + self.field


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def locate(namespace: str, key: str, geo: Geometry, aliases: Aliases = NO_ALIASES) -> Location:
    numeric = split_numeric(key)
    if numeric is not None:
        prefix, n = numeric
        b, f = divmod(n, geo.buckets)[::-1]
        zp = zip_key(prefix, aliases)
        return Location(f"{namespace}:m:{{{b}.{zp}}}".encode("utf-8", "surrogatepass"), str(f).encode())
    field = _bytes(zip_key(key, aliases))
    if len(field) > geo.value_limit:
        raise KeyTooLong(
            f"key {key[:40]!r}... zips to {len(field)} bytes, over the server's "
            f"hash-max-listpack-value {geo.value_limit}: use shorter keys (or aliases)"
        )
    b = zlib.crc32(field) % geo.buckets
    return Location(f"{namespace}:h:{{{b}}}".encode(), field)


def key_of(namespace: str, bucket: bytes, field: bytes, geo: Geometry, aliases: Aliases = NO_ALIASES) -> str:
    """The map key stored at (bucket, field): the inverse of locate()."""
    head = f"{namespace}:".encode()
    if not bucket.startswith(head) or not bucket.endswith(b"}"):
        raise ValueError(f"{bucket!r} is not a bucket of map {namespace!r}")
    code, rest = bucket[len(head) :].split(b":", 1)
    inner = rest[1:-1].decode("utf-8", "surrogatepass")
    if code == b"h":
        return unzip_key(field.decode("utf-8", "surrogatepass"), aliases)
    b_text, zp = inner.split(".", 1)
    n = int(field) * geo.buckets + int(b_text)
    return unzip_key(zp, aliases) + str(n)


def bucket_patterns(namespace: str) -> list[bytes]:
    """SCAN MATCH patterns of the map's buckets (the namespace has no glob characters)."""
    from densekv.keys import glob_escape

    ns = glob_escape(namespace.encode())
    return [ns + b":m:{*", ns + b":h:{*"]
