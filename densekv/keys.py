"""Key naming, hash tags and partition math shared by every kind.

Names: `{namespace}:{kind code}:{{partition}}` - the partition number (or the slot group)
inside braces, so all keys of one partition share a cluster slot and a Lua script may
touch them together. Partition counts are powers of two and a digest's partition is its
top `bits` bits; the rest of the digest is the field, so the partition's bits are not
stored twice.

Sizing rule (documented in the README): the seed used P = N / Z x 1.2. Random assignment
puts about N/P +- sqrt(N/P) items in a partition, so densekv takes the smallest power of
two P with N/P + 4 sqrt(N/P) <= Z: the fullest partition stays under the listpack limit
Z with a wide margin, and sizes stay on powers of two so that repartitioning splits each
partition in two.
"""

from __future__ import annotations

import math


def partition_count(expected: int, max_entries: int, *, minimum: int = 1, fill: int | None = None) -> int:
    """Smallest power of two P >= minimum with mean + 4 sigma of a partition <= max_entries,
    and mean <= fill when given (smaller listpacks: faster lookups, more keys)."""
    if expected < 0 or max_entries < 1 or (fill is not None and fill < 1):
        raise ValueError("expected >= 0, max_entries >= 1 and fill >= 1")
    p = 1
    while p < minimum:
        p *= 2
    while True:
        mean = expected / p
        fits = mean + 4 * math.sqrt(mean) <= max_entries and (fill is None or mean <= fill)
        if fits or p >= 1 << 24:
            return p
        p *= 2


def partition_bits(partitions: int) -> int:
    if partitions < 1 or partitions & (partitions - 1):
        raise ValueError("the partition count is a power of two")
    return partitions.bit_length() - 1


def split_digest(digest: bytes, bits: int) -> tuple[int, bytes]:
    """(partition, field): the top `bits` bits, and the digest without them.

    Whole bytes implied by the partition are dropped; the implied high bits of a partly
    implied byte are zeroed (the field stays unique within its partition).
    """
    top = int.from_bytes(digest[:4], "big")
    partition = top >> (32 - bits) if bits else 0
    skip, rest = divmod(bits, 8)
    field = digest[skip:]
    if rest:
        field = bytes([field[0] & (0xFF >> rest)]) + field[1:]
    return partition, field


def join_digest(partition: int, field: bytes, bits: int) -> bytes:
    """The inverse of split_digest."""
    skip, rest = divmod(bits, 8)
    if not bits:
        return field
    high = partition << (8 * (skip + (1 if rest else 0)) - bits)  # align to byte boundary
    nbytes = skip + (1 if rest else 0)
    head = high.to_bytes(nbytes, "big") if nbytes else b""
    if rest:
        return head[:-1] + bytes([head[-1] | field[0]]) + field[1:]
    return head + field


_GLOB_SPECIAL = frozenset(b"*?[]\\")


def glob_escape(data: bytes) -> bytes:
    """`data` as a literal inside a SCAN/HSCAN MATCH pattern."""
    return b"".join(b"\\" + bytes([c]) if c in _GLOB_SPECIAL else bytes([c]) for c in data)


def tag(namespace: str, code: str, partition: int | str) -> bytes:
    return f"{namespace}:{code}:{{{partition}}}".encode()
