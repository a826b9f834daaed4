"""What the allocator hands out for a request: the one model of its size classes.

used_memory counts what the allocator hands out, not what was asked for, so every cost
model rounds a request through here (the set layouts' plan_dense, the planner's listpack
model, the Bloom filter's free bits in sets/bloom_math.py):
  jemalloc  (Redis and Valkey builds by default) 8 bytes, then 16-byte steps up to 128,
            then 4 size classes per doubling: 160, 192, 224, 256, 320, ... 1024, 1280, ...
  libc      glibc malloc's heap chunks: usable sizes 16 j + 8, at least 24 (an mmapped
            block, far above any listpack, is whole pages: sets/bloom_math.glibc_usable).
Any other allocator name is modelled as jemalloc here (the Bloom filter, which writes
its rounding rule into its metadata, takes the exact size instead).
"""

from __future__ import annotations


def jemalloc_size_class(request: int) -> int:
    """jemalloc's size class for a request: 16-byte steps to 128, then 4 per doubling."""
    if request <= 0:
        raise ValueError("a request is at least one byte")
    if request <= 8:
        return 8
    if request <= 128:
        return (request + 15) & ~15
    lg = (request - 1).bit_length() - 1  # 2^lg < request <= 2^(lg+1)
    delta = 1 << (lg - 2)
    return (request + delta - 1) & ~(delta - 1)


def libc_heap_size(request: int) -> int:
    """What glibc's heap hands out for a request: 16-byte steps of usable size 16 j + 8."""
    return max(24, ((request + 8 + 15) & ~15) - 8)


def alloc_size(size: int, allocator: str) -> int:
    """What the allocator really hands out (and used_memory counts) for `size` bytes;
    `allocator` as INFO's mem_allocator says it ("jemalloc-5.3.0", "libc")."""
    if allocator.startswith("libc"):
        return libc_heap_size(size)
    return 8 if size <= 8 else jemalloc_size_class(size)


__all__ = ["alloc_size", "jemalloc_size_class", "libc_heap_size"]
