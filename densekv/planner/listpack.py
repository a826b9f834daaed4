"""What a listpack costs, from its contents: the format facts the planner's model uses.

A listpack is a 6-byte header (total bytes, entry count) and a 1-byte end marker, plus per
entry an encoding (+ data) and a back-length of 1-5 bytes. A string that reads as a
canonical int64 ("0", "-12", not "007" or "+1") is stored as an integer: 1 byte for
0..127, 2 for 13-bit, 3/4/5/9 for 16/24/32/64-bit; other strings take 1, 2 or 5 bytes of
length before the data. The allocation is the listpack's size rounded up to the
allocator's size class (`alloc_size`, shared with the set layouts' cost model).
These are facts of the encoding, not tunings: what differs between servers (per-key
overhead, what the allocator really hands out) is *measured* (densekv/planner/model.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from densekv.sets.layouts import alloc_size

HEADER = 7  # 4 total bytes + 2 entry count + 1 end byte
_INT = re.compile(rb"-?(?:0|[1-9][0-9]{0,18})\Z")


def as_int64(data: bytes) -> int | None:
    """The integer a listpack would store this string as, or None (lpStringToInt64)."""
    if len(data) > 20 or not _INT.match(data) or data == b"-0":
        return None
    value = int(data)
    return value if -(1 << 63) <= value < (1 << 63) else None


def _backlen(size: int) -> int:
    if size <= 127:
        return 1
    if size < 16383:
        return 2
    if size < 2097151:
        return 3
    if size < 268435455:
        return 4
    return 5


def entry_size(data: bytes) -> int:
    """Bytes of one listpack entry holding `data`."""
    value = as_int64(data)
    if value is not None:
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
    else:
        n = len(data)
        size = (1 if n < 64 else 2 if n < 4096 else 5) + n
    return size + _backlen(size)


def listpack_bytes(entries: Iterable[bytes]) -> int:
    return HEADER + sum(entry_size(e) for e in entries)


def allocated(size: int, allocator: str) -> int:
    """What used_memory counts for an allocation of `size` bytes."""
    return alloc_size(size, "libc" if allocator.startswith("libc") else "jemalloc")
