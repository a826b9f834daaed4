"""Sizing a compact set: the server's limits, the radix split, and the dense layouts' cost model.

Cost model (plan_dense): a listpack is 7 bytes plus, per entry, an encoding byte + data
+ a back-length byte (densekv/listpack.py); the allocation is rounded up to the
allocator's size class (densekv/allocator.py: jemalloc 4 classes per doubling, libc
malloc 16-byte steps + 8); each partition key costs about KEY_OVERHEAD bytes more, and
8 bytes per main-dict bucket (a power of two >= the key count). Partition sizes are
Poisson around N/P, so the planner takes the expected cost over that distribution, for P
from the smallest count whose mean + 4 sigma fits the listpack limit and where fewer than
1/20 partitions are expected past it, up to 4x that, and picks the cheapest. The dense
layouts report the prediction for their partition count
(explain()["predicted_bytes_per_item"]) so the benchmark can print it beside the
measured figure. default_partitions sizes the seed's layouts (a power of two that keeps
the fullest partition in its listpack).
Pure arithmetic, no I/O: densekv/sets/layouts.py builds the layouts from these numbers,
and the planner (densekv/tools/planner/kinds.py) reuses them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from densekv.allocator import alloc_size
from densekv.keys import partition_count
from densekv.listpack import HEADER, int_entry_size, string_entry_size

#: Bytes a partition key costs beyond its listpack (main-dict entry, object, key name);
#: an estimate used only to rank partition counts (the benchmark measures the truth).
KEY_OVERHEAD = {"jemalloc": 72, "libc": 64}
MAX_PARTITIONS = 1 << 32
#: bytes per item the split hash must save over a listpack set to be chosen: its add is
#: HSETNX + HGET over a ~4x longer listpack (measured on redis-7.4, 1M IDs, commit 38c6b13
#: + this change: 19.68 against 19.76 B/ID, but 6.5 against 1.9 server usec per add),
#: so a near tie goes to the set
HASH_MARGIN = 0.5


@dataclass(frozen=True)
class SetLimits:
    """What the set layouts need to know of the server (from the probe)."""

    hash_max_listpack_entries: int = 128
    hash_max_listpack_value: int = 64
    set_max_listpack_entries: int | None = None  # None: no listpack sets (Redis < 7.2)
    set_max_listpack_value: int | None = None
    zset_max_listpack_entries: int = 128
    zset_max_listpack_value: int = 64
    allocator: str = "jemalloc"
    cluster: bool = False

    @property
    def listpack_sets(self) -> bool:
        return bool(self.set_max_listpack_entries)


# --- radix split ---------------------------------------------------------------------


@dataclass(frozen=True)
class Radix:
    """x <-> (x mod P, x div P) for item_size-byte x; widths of the quotient."""

    partitions: int
    item_size: int

    def __post_init__(self) -> None:
        if not isinstance(self.partitions, int) or not 1 <= self.partitions <= MAX_PARTITIONS:
            raise ValueError(f"partitions is a whole number from 1 to {MAX_PARTITIONS}")

    @cached_property
    def qmax(self) -> int:
        return ((1 << (8 * self.item_size)) - 1) // self.partitions

    @cached_property
    def qbytes(self) -> int:
        return max(1, (self.qmax.bit_length() + 7) // 8)

    @cached_property
    def qhex(self) -> int:
        return max(1, (self.qmax.bit_length() + 3) // 4)

    @cached_property
    def field_split(self) -> tuple[int, int]:
        """(field bytes, low bits) for the split hash: q = field << low | low bits, with
        0 <= low bits <= 7 so the low part is a listpack 7-bit integer (one byte)."""
        bits = max(8, self.qmax.bit_length())
        fbytes = -(-(bits - 7) // 8)
        return fbytes, bits - 8 * fbytes

    def split(self, stored: bytes) -> tuple[int, int]:
        q, p = divmod(int.from_bytes(stored, "big"), self.partitions)
        return p, q

    def join(self, p: int, q: int) -> bytes:
        return (q * self.partitions + p).to_bytes(self.item_size, "big")


# --- cost model ------------------------------------------------------------------------


def _poisson(mean: float) -> list[tuple[int, float]]:
    lo = max(0, int(mean - 7 * math.sqrt(mean) - 2))
    hi = int(mean + 7 * math.sqrt(mean) + 3)
    out = []
    for k in range(lo, hi + 1):
        logp = k * math.log(mean) - mean - math.lgamma(k + 1) if mean > 0 else (0.0 if k == 0 else -1e9)
        out.append((k, math.exp(logp)))
    return out


def predicted_bytes(expected: int, partitions: int, per_item: int, allocator: str) -> float:
    """Expected used_memory per item for `expected` random items in `partitions` listpacks."""
    if expected <= 0:
        return float("nan")
    mean = expected / partitions
    key = KEY_OVERHEAD["libc" if allocator.startswith("libc") else "jemalloc"]
    per_partition = sum(
        p * (alloc_size(HEADER + per_item * k, allocator) + key) for k, p in _poisson(mean) if k
    )
    buckets = 8 * (1 << (partitions - 1).bit_length())  # the main dict's table: a power of two
    return (per_partition * partitions + buckets) / expected


def min_partitions(expected: int, max_entries: int) -> int:
    """Smallest P (any whole number) with mean + 4 sigma of a partition <= max_entries."""
    if expected <= 0:
        return 1
    # solve m + 4 sqrt(m) = Z for m: sqrt(m) = -2 + sqrt(4 + Z)
    root = -2 + math.sqrt(4 + max_entries)
    return max(1, math.ceil(expected / (root * root)))


@dataclass(frozen=True)
class DensePlan:
    """plan_dense's decision, kept for explain()."""

    encoding: str  # "hash" | "set"
    partitions: int
    predicted: dict[str, float]
    reason: str


def overflow_expected(expected: int, partitions: int, limit: int) -> float:
    """Expected number of partitions holding more than `limit` items (Poisson sizes)."""
    mean = expected / partitions
    return partitions * sum(p for k, p in _poisson(mean) if k > limit)


def dense_item_bytes(kind: str, partitions: int, item_size: int) -> int:
    """Listpack bytes per item of the dense layouts at this partition count."""
    radix = Radix(partitions, item_size)
    if kind == "set":
        return string_entry_size(radix.qbytes)
    fbytes, _ = radix.field_split
    return string_entry_size(fbytes) + int_entry_size(0)  # + the low bits: a 7-bit integer


def _best_partitions(
    expected: int, limit: int, per_item: Callable[[int], int], allocator: str
) -> tuple[int, float]:
    low = min_partitions(expected, limit)
    # mean + 4 sigma is not enough over ten thousand partitions: also ask that the expected
    # number of partitions past the limit be under 1/20
    while overflow_expected(expected, low, limit) > 0.05:
        low = int(low * 1.02) + 1
    low = min(low, MAX_PARTITIONS)
    if expected < 10_000:  # too few items for the size classes to matter
        return low, predicted_bytes(expected, low, per_item(low), allocator)
    candidates = sorted({min(MAX_PARTITIONS, int(low * (1 + i / 100))) for i in range(301)})
    scored = [(predicted_bytes(expected, p, per_item(p), allocator), p) for p in candidates]
    cost, p = min(scored)
    return p, cost


def best_dense_partitions(
    expected: int, item_size: int, kind: str, limits: SetLimits
) -> tuple[int, float]:
    """The cheapest partition count for dense `kind` ("hash" | "set") and its predicted
    bytes per item."""
    if kind == "set":
        limit = limits.set_max_listpack_entries or 128
    else:
        limit = limits.hash_max_listpack_entries
    return _best_partitions(expected, limit, lambda p: dense_item_bytes(kind, p, item_size),
                            limits.allocator)


def plan_dense(expected: int, item_size: int, limits: SetLimits) -> DensePlan:
    """Listpack HASH or listpack SET, and the partition count: the cheaper by the model."""
    options: dict[str, tuple[int, float]] = {}
    # field / member width at the lowest P tried (the widest) for the value-length check
    for kind, limit, vlimit in (
        ("hash", limits.hash_max_listpack_entries, limits.hash_max_listpack_value),
        ("set", limits.set_max_listpack_entries or 0, limits.set_max_listpack_value or 0),
    ):
        if limit < 1:
            continue
        radix = Radix(min_partitions(expected, limit), item_size)
        width = radix.field_split[0] + 1 if kind == "hash" else radix.qbytes  # hash: the long form
        if width > vlimit:
            continue
        options[kind] = best_dense_partitions(expected, item_size, kind, limits)
    if not options:
        raise ValueError(
            f"{item_size}-byte items do not fit this server's listpack value limits "
            f"(hash-max-listpack-value {limits.hash_max_listpack_value}): use layout='hash'"
        )
    kind = min(options, key=lambda k: options[k][1])
    if kind == "hash" and "set" in options and options["set"][1] - options["hash"][1] < HASH_MARGIN:
        kind = "set"  # about as small, and its add is one SADD instead of a script
    predicted = {k: round(v[1], 2) for k, v in options.items()}
    if not limits.listpack_sets:
        reason = ("no listpack sets on this server (Redis < 7.2): split binary fields in "
                  "listpack hashes")
    elif kind == "set" and predicted["hash"] < predicted["set"]:
        reason = (f"listpack sets: within {HASH_MARGIN} B/item of the split hash, and one "
                  f"SADD per add instead of a script; predicted {predicted}")
    elif kind == "set":
        reason = (f"listpack sets predicted cheaper here (set-max-listpack-entries "
                  f"{limits.set_max_listpack_entries}); predicted {predicted}")
    else:
        reason = (f"listpack hashes hold more per key here (hash-max-listpack-entries "
                  f"{limits.hash_max_listpack_entries}, set {limits.set_max_listpack_entries}); "
                  f"predicted {predicted}")
    return DensePlan(kind, options[kind][0], predicted, reason)


def default_partitions(name: str, expected: int, limits: SetLimits) -> int:
    """The seed layouts' partition count when none is given: a power of two sized so the
    fullest partition stays in its listpack (flat: 4096, only key names change)."""
    if name == "flat":
        return 4096
    if name == "hash":
        return partition_count(expected, limits.hash_max_listpack_entries)
    if name == "zset":
        return partition_count(expected, limits.zset_max_listpack_entries)
    if limits.listpack_sets:
        return partition_count(expected, limits.set_max_listpack_entries or 128)
    return 256  # no listpack sets of strings on this server: the seed's advice


# What other modules and the tools import from here (tests/unit/test_tools_use_public_names.py)
__all__ = ["KEY_OVERHEAD", "MAX_PARTITIONS", "DensePlan", "Radix", "SetLimits", "best_dense_partitions",
           "default_partitions", "dense_item_bytes", "min_partitions", "overflow_expected", "plan_dense",
           "predicted_bytes"]
