"""The planner's cost model, and its calibration from measured samples. Pure: no I/O.

Bytes of a partitioned layout holding N items in P partitions (each partition one key
per structure: a HASH, or a HASH and a ZSET, ...):

    total = P * E_k[ sum over structures s of (K + alloc(7 + k * e_s)) ] + N * x

  k     items in one partition: Poisson(N/P) for random keys (tokens, IDs), N/P exactly
        for sequential ids (maps); empty partitions have no key and cost nothing
  e_s   listpack bytes per item in structure s: read from the sample's own contents
        (densekv/tools/planner/listpack.py prices every stored field and value), so entry
        widths at the planned partition count are what the server really holds
  alloc the allocator's size class (jemalloc: 4 per doubling; libc: 16-byte steps)
  K     bytes per key beyond its listpack: object header, key name, main-dict entry and
        bucket share, expiry entry - MEASURED
  x     bytes per item beyond the modelled listpacks: per-field TTLs, hashtable
        encodings, out-of-line values, anything the listpack formula misses - MEASURED
K and x are fitted by least squares to used_memory deltas (densekv.tools.measure.Meter) of a sample
loaded at the planned fill, read at two fills (half, then all of the sample), with the
listpack allocations of each reading computed from the keys' contents and subtracted.
So the model is exact at the sample's fill by construction, and what it carries to other
N (and to the whole key space) is the per-key, per-item and size-class arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from densekv.tools.planner.listpack import HEADER, allocated

LISTPACK_ENCODINGS = ("listpack", "listpackex")
MAX_MEAN = 1_000_000  # partitions this full are not listpacks anyway


@dataclass(frozen=True)
class Container:
    """One key of the sample: its type, encoding, items and listpack entry bytes."""

    type: str  # hash | set | zset
    encoding: str
    items: int  # fields or members: a workload item may take more than one (structures_of)
    entry_bytes: int  # sum of entry_size() over everything it stores

    @property
    def listpack(self) -> bool:
        return self.encoding in LISTPACK_ENCODINGS

    def modelled(self, allocator: str) -> int:
        """The bytes the listpack formula accounts for (0 for other encodings)."""
        return allocated(HEADER + self.entry_bytes, allocator) if self.listpack else 0


@dataclass(frozen=True)
class Reading:
    """One used_memory delta of a sample, with what the sample held at that moment."""

    items: int
    delta: int
    containers: tuple[Container, ...]

    def modelled(self, allocator: str) -> int:
        return sum(c.modelled(allocator) for c in self.containers)

    def to_dict(self, allocator: str) -> dict[str, Any]:
        return {"items": self.items, "used_memory_delta": self.delta, "keys": len(self.containers),
                "modelled_listpack_bytes": self.modelled(allocator),
                "encodings": sorted({c.encoding for c in self.containers})}


def fit(readings: Sequence[Reading], allocator: str) -> tuple[float, float]:
    """(K per key, x per item): least squares of delta - listpacks = K * keys + x * items."""
    rows = [(float(len(r.containers)), float(r.items), float(r.delta - r.modelled(allocator))) for r in readings]
    if not rows or all(n == 0 for _, n, _ in rows):
        raise ValueError("a fit needs at least one reading with items")
    skk = sum(k * k for k, _, _ in rows)
    snn = sum(n * n for _, n, _ in rows)
    skn = sum(k * n for k, n, _ in rows)
    sky = sum(k * y for k, _, y in rows)
    sny = sum(n * y for _, n, y in rows)
    det = skk * snn - skn * skn
    if len(rows) < 2 or abs(det) < 1e-9 * max(1.0, skk * snn):
        # keys and items in proportion (one item per key): only their sum is known
        return 0.0, sny / snn
    return (sky * snn - sny * skn) / det, (skk * sny - skn * sky) / det


@dataclass(frozen=True)
class Structure:
    """One key type of every partition and its listpack bytes per item (0: not a listpack)."""

    type: str
    encoding: str
    per_item: float


def structures_of(reading: Reading) -> tuple[Structure, ...]:
    """Per key type of the sample: the encoding most of its keys have, and listpack bytes
    per *workload item* of the keys of that type in that encoding: their entry bytes over
    the reading's items, times the share of the type's fields (or members) those keys hold.
    Not per field: a session whose payload is split keeps a continuation field beside its
    record (densekv/sessions/layouts/partitioned.py), two fields for one item, and
    predict_total multiplies this figure by items, not fields (per field, a sample of
    split sessions was priced at half its listpack bytes: -40% on the Flask-Login profile)."""
    out: list[Structure] = []
    for kind in sorted({c.type for c in reading.containers}):
        mine = [c for c in reading.containers if c.type == kind]
        counts: dict[str, int] = {}
        for c in mine:
            counts[c.encoding] = counts.get(c.encoding, 0) + 1
        enc = max(counts, key=lambda e: counts[e])
        same = [c for c in mine if c.encoding == enc]
        fields, all_fields = sum(c.items for c in same), sum(c.items for c in mine)
        items = reading.items * fields / all_fields if all_fields else 0.0
        per = sum(c.entry_bytes for c in same) / items if items and enc in LISTPACK_ENCODINGS else 0.0
        out.append(Structure(kind, enc, per))
    return tuple(out)


@dataclass(frozen=True)
class Calibration:
    """A fitted model for one layout shape on one server kind (what the cache stores)."""

    key: str
    layout: str
    allocator: str
    per_key: float
    per_item: float
    structures: tuple[Structure, ...]
    sample_items: int
    sample_partitions: int
    readings: tuple[dict[str, Any], ...]
    server: dict[str, Any]
    measured_on: str
    created_at: float
    cached: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["structures"] = [asdict(s) for s in self.structures]
        data["readings"] = list(self.readings)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        values = dict(data)
        values["structures"] = tuple(Structure(**s) for s in data["structures"])
        values["readings"] = tuple(data["readings"])
        return cls(**values)


def calibrate(key: str, layout: str, readings: Sequence[Reading], *, allocator: str, partitions: int,
              server: dict[str, Any], measured_on: str, created_at: float,
              extra: dict[str, Any] | None = None) -> Calibration:
    """Fit K and x to the readings; the structures come from the fullest reading."""
    per_key, per_item = fit(readings, allocator)
    last = max(readings, key=lambda r: r.items)
    return Calibration(
        key=key, layout=layout, allocator=allocator, per_key=round(per_key, 3), per_item=round(per_item, 4),
        structures=structures_of(last), sample_items=last.items, sample_partitions=partitions,
        readings=tuple(r.to_dict(allocator) for r in readings), server=server, measured_on=measured_on,
        created_at=created_at, extra=dict(extra or {}),
    )


# --- prediction ------------------------------------------------------------------------


def poisson(mean: float) -> list[tuple[int, float]]:
    """(k, P(k)) for a Poisson(mean), over the range holding all but ~1e-12 of it."""
    if mean <= 0:
        return [(0, 1.0)]
    sd = math.sqrt(mean)
    lo = max(0, int(mean - 9 * sd - 3))
    hi = int(mean + 9 * sd + 5)
    out = []
    for k in range(lo, hi + 1):
        out.append((k, math.exp(k * math.log(mean) - mean - math.lgamma(k + 1))))
    return out


def fills(items: int, partitions: int, distribution: str) -> list[tuple[int, float]]:
    """(items in a partition, share of partitions) for items spread over partitions."""
    if partitions < 1 or items < 0:
        raise ValueError("partitions >= 1 and items >= 0")
    mean = items / partitions
    if mean > MAX_MEAN:
        raise ValueError(f"{mean:.0f} items per partition is not a listpack layout")
    if distribution == "even":
        lo, extra = divmod(items, partitions)
        out = [(lo, (partitions - extra) / partitions)]
        return out + ([(lo + 1, extra / partitions)] if extra else [])
    if distribution == "poisson":
        return poisson(mean)
    raise ValueError("distribution is 'poisson' or 'even'")


def partition_bytes(cal: Calibration, k: int) -> float:
    """Bytes of one partition holding k items (its keys, listpacks and size classes)."""
    if k <= 0:
        return 0.0
    total = 0.0
    for s in cal.structures:
        total += cal.per_key
        if s.encoding in LISTPACK_ENCODINGS:
            total += allocated(HEADER + round(k * s.per_item), cal.allocator)
    return total


def predict_total(cal: Calibration, items: int, partitions: int, distribution: str) -> float:
    """Predicted used_memory growth for `items` in `partitions` partitions."""
    if items <= 0:
        return 0.0
    per_partition = sum(p * partition_bytes(cal, k) for k, p in fills(items, partitions, distribution))
    return partitions * per_partition + items * cal.per_item


def predict_readings(cal: Calibration, containers: Iterable[Container], items: int) -> float:
    """The model's figure for a sample whose keys are known (used to check a fit)."""
    cs = list(containers)
    return sum(cal.per_key + c.modelled(cal.allocator) for c in cs) + items * cal.per_item
