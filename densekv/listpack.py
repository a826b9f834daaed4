"""Listpack facts: what an entry of Redis's listpack costs (src/listpack.c), in one place.

A listpack is a 6-byte header (4 bytes of total size, 2 of entry count) and a 1-byte end
marker (HEADER = 7), plus per entry an encoding (+ data) and a back-length:
  * a string that reads as a canonical int64 (as_int64: "0", "-12"; not "007", "+1",
    "-0" or " 1"; lpStringToInt64) is stored as an integer: 1 byte for 0..127, 2 for
    13-bit, 3 / 4 / 5 / 9 for 16 / 24 / 32 / 64-bit (int_entry_size);
  * any other string takes 1, 2 or 5 bytes of encoding (6-bit length below 64 bytes,
    12-bit below 4096, else 32-bit) before its data (string_entry_size);
  * the back-length holds encoding + data size in 7-bit groups (lpEncodeBacklen): 1 byte
    up to 127, 2 below 16383, 3 below 2097151, 4 below 268435455, else 5 (backlen).
Users: the planner's model (densekv/tools/planner/), the set layouts' cost model
(densekv/sets/sizing.py), and every "is this text a listpack integer" test
(codec.is_canonical_int, the map's numeric bucket fields). What the allocator hands out
for a listpack of these bytes is densekv/allocator.py's.
"""

from __future__ import annotations

import re

HEADER = 7  # 4 total bytes + 2 entry count + 1 end byte
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_INT = re.compile(rb"-?(?:0|[1-9][0-9]{0,18})\Z")


def as_int64(data: bytes) -> int | None:
    """The integer a listpack would store this string as, or None (lpStringToInt64): the
    one canonical-int64 rule of densekv."""
    if len(data) > 20 or not _INT.match(data) or data == b"-0":
        return None
    value = int(data)
    return value if INT64_MIN <= value <= INT64_MAX else None


def backlen(size: int) -> int:
    """Bytes of the back-length of an entry whose encoding + data take `size` bytes."""
    if size <= 127:
        return 1
    if size < 16383:
        return 2
    if size < 2097151:
        return 3
    if size < 268435455:
        return 4
    return 5


def int_entry_size(value: int) -> int:
    """Bytes of one listpack entry holding the integer `value` (an int64)."""
    if 0 <= value <= 127:
        size = 1
    elif -4096 <= value <= 4095:
        size = 2
    elif -(1 << 15) <= value < (1 << 15):
        size = 3
    elif -(1 << 23) <= value < (1 << 23):
        size = 4
    elif -(1 << 31) <= value < (1 << 31):
        size = 5
    else:
        size = 9
    return size + backlen(size)


def string_entry_size(n: int) -> int:
    """Bytes of one listpack entry holding an `n`-byte string that is not an integer."""
    size = (1 if n < 64 else 2 if n < 4096 else 5) + n
    return size + backlen(size)


def entry_size(data: bytes) -> int:
    """Bytes of one listpack entry holding `data`."""
    value = as_int64(data)
    return string_entry_size(len(data)) if value is None else int_entry_size(value)


__all__ = ["HEADER", "INT64_MAX", "INT64_MIN", "as_int64", "backlen", "entry_size", "int_entry_size",
           "string_entry_size"]
