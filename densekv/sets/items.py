"""Items of a compact set: what the caller may pass, and the one byte form stored.

Every item becomes exactly `item_size` bytes before any layout sees it (pure, no I/O):
  bytes / bytearray / memoryview  taken as is; the length must be item_size
  uuid.UUID                       its 16 bytes (`.bytes`); needs item_size == 16
  int                             unsigned big-endian, item_size bytes; 0 <= n < 2**(8*item_size)
  str                             exactly 2*item_size ASCII hex digits (any case), or, when
                                  item_size == 16, a UUID in one of its standard spellings:
                                  8-4-4-4-12 with dashes, that in braces ("{...}"), or after
                                  "urn:uuid:". Nothing else: no spaces (bytes.fromhex would
                                  skip them and give a shorter item), no dashes elsewhere, no
                                  underscores or non-ASCII digits (which uuid.UUID() and int()
                                  accept). Any other text is refused: densekv does not
                                  hash it for you, because a set that hashed would hand back
                                  digests, not your strings. Hash it yourself, e.g.
                                  hashlib.blake2b(text.encode(), digest_size=16).digest().
So every accepted form is lossless, iteration yields the bytes form, and anything else
raises BadItem before a command is built (nothing is written).

Spreading: a partitioned layout takes the partition from the item (x mod P; the dense
layout does not store it again). Random IDs spread evenly; sequential integers
or structured IDs would pile into one partition and push it out of its listpack. With
`spread=True` (the default) items are first passed through a fixed bijection of
item_size-byte integers (multiply by an odd constant mod 2**bits, which carries every
input bit into the top half, then xor the top half into the bottom half; both steps are
invertible), so partitions fill evenly and the stored form stays exactly as long and
lossless whatever the items look like. `spread=False`
stores the item's own bytes (readable in redis-cli) and is right for random IDs only.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

from densekv.errors import BadItem as _BadItem
from densekv.errors import DensekvError
from densekv.errors import moved as _moved

Item = bytes | bytearray | memoryview | str | int | uuid.UUID

# What text an item may be (ASCII only: re's [0-9a-f] never matches other scripts' digits).
_HEX = re.compile(r"[0-9a-fA-F]+")
_DASHED = r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
_UUID = re.compile(rf"{_DASHED}|\{{{_DASHED}\}}|(?i:urn:uuid:){_DASHED}")

# A 128-bit constant (the golden ratio's fractional bits); an item_size-byte multiplier is
# cut from it (repeated for wider items) and forced odd, so it is invertible mod 2**bits.
_GOLDEN = 0x9E3779B97F4A7C15F39CC0605CEDC835 | 1


@dataclass(frozen=True)
class ItemCodec:
    """Item -> item_size bytes (spread or not) and back."""

    item_size: int = 16
    spread: bool = True
    _mod: int = field(init=False, repr=False)
    _mul: int = field(init=False, repr=False)
    _inv: int = field(init=False, repr=False)
    _half: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.item_size, int) or not 1 <= self.item_size <= 64:
            raise ValueError("item_size is a number of bytes from 1 to 64")
        mod = 1 << (8 * self.item_size)
        mul = int.from_bytes((_GOLDEN.to_bytes(16, "big") * 4)[: self.item_size], "big") | 1
        object.__setattr__(self, "_mod", mod)
        object.__setattr__(self, "_mul", mul)
        object.__setattr__(self, "_inv", pow(mul, -1, mod))
        object.__setattr__(self, "_half", 4 * self.item_size)

    # -- caller's item -> canonical bytes -------------------------------------------------
    def canonical(self, item: object) -> bytes:
        """The item's bytes form (what iteration gives back), or BadItem."""
        size = self.item_size
        if isinstance(item, (bytes, bytearray, memoryview)):
            raw = bytes(item)
            if len(raw) != size:
                raise _BadItem(f"a {len(raw)}-byte item in a set of {size}-byte items")
            return raw
        if isinstance(item, uuid.UUID):
            if size != 16:
                raise _BadItem(f"a UUID is 16 bytes; this set holds {size}-byte items")
            return item.bytes
        if isinstance(item, bool):
            raise _BadItem("a bool is not an item: pass bytes, str, int or UUID")
        if isinstance(item, int):
            if not 0 <= item < self._mod:
                raise _BadItem(f"int item {item} is outside 0 .. 2**{8 * size} - 1")
            return item.to_bytes(size, "big")
        if isinstance(item, str):
            if len(item) == 2 * size and _HEX.fullmatch(item):
                return bytes.fromhex(item)
            if size == 16:
                spelled = _UUID.fullmatch(item)
                if spelled:
                    return bytes.fromhex("".join(g for g in spelled.groups() if g).replace("-", ""))
            raise _BadItem(
                f"text item {item[:40]!r} is neither {2 * size} hex digits"
                + (" nor a UUID" if size == 16 else "")
                + ": hash it yourself (hashlib.blake2b(text.encode(), digest_size="
                + f"{size}).digest()) and store the digest"
            )
        raise _BadItem(f"items are bytes, str, int or UUID, not {type(item).__name__}")

    # -- canonical bytes <-> stored bytes (the spread bijection) ----------------------------
    def encode(self, item: object) -> bytes:
        """The bytes the layouts store and partition by."""
        raw = self.canonical(item)
        if not self.spread:
            return raw
        n = (int.from_bytes(raw, "big") * self._mul) % self._mod
        n ^= n >> self._half
        return n.to_bytes(self.item_size, "big")

    def decode(self, stored: bytes) -> bytes:
        """The inverse of encode: stored bytes -> the canonical item bytes."""
        if not self.spread:
            return stored
        n = int.from_bytes(stored, "big")
        n ^= n >> self._half
        n = (n * self._inv) % self._mod
        return n.to_bytes(self.item_size, "big")

    def encode_all(self, items: object) -> list[bytes]:
        """Every item encoded, or BadItem for the first bad one (before anything is sent)."""
        size = self.item_size
        return [n.to_bytes(size, "big") for n in self.encode_ints(items)]

    def encode_ints(self, items: object) -> list[int]:
        """Every item's stored form as an integer (what the layouts split by radix), or
        BadItem for the first bad one (before anything is sent). The batch path: bytes of
        the right size skip canonical(), and the spread runs as two list passes."""
        if isinstance(items, (bytes, str)):
            raise _BadItem("pass an iterable of items, not one bytes/str object")
        size, canonical, from_bytes = self.item_size, self.canonical, int.from_bytes
        out = [from_bytes(x if type(x) is bytes and len(x) == size else canonical(x), "big")
               for x in items]  # type: ignore[attr-defined]
        if self.spread:
            mask, mul, half = self._mod - 1, self._mul, self._half
            out = [(n * mul) & mask for n in out]
            out = [n ^ (n >> half) for n in out]
        return out


#: errors that moved to densekv.errors (CHANGELOG.md): the old path warns for one minor release
_MOVED = ("BadItem",)


def __getattr__(name: str) -> type[DensekvError]:
    return _moved(__name__, name, _MOVED)
