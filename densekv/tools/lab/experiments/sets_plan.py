"""The sets experiment's configurations and sizing (pure, no I/O): which layouts and
partition counts one run measures (plan_jobs: the seed's sweep scaled to N, plus each
layout's listpack sweet spot, dense and the Bloom filters), and how large a run fits the
lab's time budget (sizings, job_cost). densekv/tools/lab/experiments/sets.py runs the jobs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from densekv.keys import partition_count
from densekv.tools.lab.sizing import Sizing

NAME = "lab-set"
BLOOM_NAME = "lab-bloom"
ITEM_SIZE = 16
MINIMUM = 16  # bytes: the theoretical minimum per 16-byte ID (the seed's hex IDs: 32)
SWEEP_FACTOR = 8
FLAT_CAP = 1_000_000
CAS_SAMPLE = 2000  # items per CAS phase
CAS_BATCH = 1000  # single-item commands per round trip
CAS_ROUNDS = 4  # rounds per CAS phase (the four phases take turns round by round)
LOAD_CHUNK = 20_000  # least items per add_many call (bounded client memory)
ENCODING_SAMPLE = 32
ABSENT_SEED = 0xAB5E  # the absent IDs: another stream, never the loaded one
BLOOM_RATES = (0.01, 1e-6)
BLOOM_ABSENT = 100_000
LN2_SQUARED = math.log(2) ** 2
EXACT = ("flat", "set", "hash", "zset")
PHASES = ("cas_hit", "contains_hit", "contains_miss", "cas_miss")


@dataclass(frozen=True)
class Job:
    """One configuration to measure."""

    layout: str  # flat | set | hash | zset | dense | bloom
    partitions: int | None = None  # None: the layout's own choice (dense)
    error_rate: float | None = None  # bloom
    native: bool = False  # bloom

    @property
    def label(self) -> str:
        if self.layout == "bloom":
            return f"bloom p={self.error_rate:g} ({'native' if self.native else 'module-free'})"
        if self.partitions is None:
            return self.layout
        return f"{self.layout} P={self.partitions:,}"


@dataclass
class Result:
    job: Job
    n: int
    partitions: int
    bytes_per_item: float
    delta: int
    memory_usage: float | None
    encodings: dict[str, int] = field(default_factory=dict)
    ops: dict[str, dict[str, Any]] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# -- planning (pure) --------------------------------------------------------------------


def sweep(n: int, factor: int = SWEEP_FACTOR) -> list[int]:
    """Partition counts 1, factor, factor^2, ... below n, and n (one per item)."""
    if n < 1 or factor < 2:
        raise ValueError("n >= 1 and factor >= 2")
    out, p = [], 1
    while p < n:
        out.append(p)
        p *= factor
    return out + [n]


def sweet_spot(layout: str, n: int, limits: Any) -> int | None:
    """The power of two densekv's rule picks so a partition stays in its listpack."""
    limit = {"hash": limits.hash_max_listpack_entries, "zset": limits.zset_max_listpack_entries,
             "set": limits.set_max_listpack_entries}.get(layout)
    return partition_count(n, limit) if limit else None


def plan_jobs(n: int, limits: Any, *, native: bool, layouts: tuple[str, ...], factor: int = SWEEP_FACTOR,
              rates: tuple[float, ...] = BLOOM_RATES, flat_cap: int = FLAT_CAP) -> list[Job]:
    """Every configuration of the story (all of them measured in every run): dense and
    the 1% Bloom filters, then each exact layout at 1 partition, its sweet spot and one
    per item, then the rest of the sweep middle-out, then the smaller error rates."""
    points = sweep(n, factor)
    first: list[Job] = []
    rest: list[Job] = []
    if "dense" in layouts:
        first.append(Job("dense"))
    if "bloom" in layouts:
        for i, p in enumerate(rates):
            modes = [False, True] if native else [False]
            (first if i == 0 else rest).extend(Job("bloom", error_rate=p, native=m) for m in modes)
    bloom_tail, rest = rest, []
    middle = sorted(points[1:-1], key=lambda p: abs(math.log(p) - math.log(math.sqrt(n))))
    flat_tail: list[Job] = []
    for layout in (x for x in EXACT if x in layouts):
        if layout == "flat":  # its partitions only rename keys: 1 and one per ID are enough
            first.append(Job("flat", 1))
            if min(n, flat_cap) > 1:
                flat_tail.append(Job("flat", min(n, flat_cap)))
            continue
        spot = sweet_spot(layout, n, limits)
        coarse = [1] + ([spot] if spot and 1 < spot < n else []) + ([n] if n > 1 else [])
        first += [Job(layout, p) for p in dict.fromkeys(coarse)]
        rest += [Job(layout, p) for p in middle if p not in coarse]
    rest.sort(key=lambda j: middle.index(j.partitions) if j.partitions in middle else -1)
    return first + rest + flat_tail + bloom_tail


# -- sizing (pure) ------------------------------------------------------------------------

#: the sweep's N steps in a trimmed run: 8^5 = 32,768 keeps the sweep's points
#: 1, 8, ..., 4,096 and one partition per ID at 32,768
SWEEP_FLOORS = (65_536, 32_768)
#: reference seconds (pace 1, see densekv/tools/lab/pace.py; fitted on valkey 9.1, 2 cores) of
#: one configuration: FIXED (flush, readings, samples) + LOAD x IDs x the layout's weight
#: (more keys load slower: one key per ID is about 4 times a listpack partition's cost)
#: + CAS x items per phase; a Bloom filter: FIXED + BLOOM_BIT x IDs x k + ABSENT x lookups
COST_FIXED_S = 0.35
COST_LOAD_S = 5e-6
COST_CAS_S = 60e-6
COST_BLOOM_BIT_S = 1.1e-6
COST_ABSENT_S = 3e-6
COST_WEIGHT = {"flat": 5.5, "dense": 2.0}


def sizings(n: int, cas: int = CAS_SAMPLE) -> list[Sizing]:
    """Largest first: the run's N, fewer CAS items, then the sweep's smaller N steps."""
    steps = [n] + [s for s in SWEEP_FLOORS if s < n]
    out = []
    for step in steps:
        for c in dict.fromkeys((cas, cas // 2)):
            trimmed = ([f"N = {step:,} of {n:,}"] if step < n else []) + (
                [f"{c:,} CAS items per phase of {cas:,}"] if c < cas else [])
            out.append(Sizing(step, {"cas": min(step, c), "absent": min(BLOOM_ABSENT, max(10_000, step))},
                              ", ".join(trimmed)))
    return out


def job_cost(job: Job, n: int, cas: int, absent: int) -> float:
    """Reference seconds of one configuration at N = n."""
    if job.layout == "bloom":
        k = max(1.0, -math.log2(job.error_rate or 0.01))
        return COST_FIXED_S + COST_BLOOM_BIT_S * n * k + COST_ABSENT_S * absent
    weight = COST_WEIGHT.get(job.layout) or 1 + 3 * math.sqrt(min(1.0, (job.partitions or 1) / n))
    return COST_FIXED_S + COST_LOAD_S * n * weight + COST_CAS_S * cas
