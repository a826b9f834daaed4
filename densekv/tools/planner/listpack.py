"""What a listpack costs the planner: its bytes from its contents, and their allocation.

The format facts (HEADER, which strings are integers, the size of an entry and of its
back-length) are densekv/listpack.py's, and the allocator's size classes are
densekv/allocator.py's, shared with the set layouts' cost model; this module only adds
them up for the planner's model. These are facts of the encoding, not tunings: what
differs between servers (per-key overhead, what the allocator really hands out) is
*measured* (densekv/tools/planner/model.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from densekv.allocator import alloc_size
from densekv.listpack import HEADER, as_int64, entry_size


def listpack_bytes(entries: Iterable[bytes]) -> int:
    return HEADER + sum(entry_size(e) for e in entries)


def allocated(size: int, allocator: str) -> int:
    """What used_memory counts for an allocation of `size` bytes (`allocator` as the probe
    reports it: "jemalloc-5.3.0", "libc")."""
    return alloc_size(size, allocator)


__all__ = ["HEADER", "allocated", "as_int64", "entry_size", "listpack_bytes"]
