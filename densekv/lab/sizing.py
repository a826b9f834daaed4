"""Sizes the lab chooses: default N, checkpoints, the seed's partition counts at this N.

Pure functions (unit-tested without a server). DEFAULT_N was chosen by timing the
default lab on the embedded valkey-9.1 on a 2-core machine (benchmarks/lab_duration.py):
the whole default lab must finish within 3 minutes.
"""

from __future__ import annotations

import math

DEFAULT_N = 100_000

#: Seed 000 followed its layouts up to about 40M sessions (its "extended" chart, where
#: the 65k-partition ZSETs convert near 8.5M and the HASHes near 33M). The lab replays
#: that range at its own N: a seed partition count P becomes P * N / SEED_RANGE.
SEED_RANGE = 40_000_000
SEED_PARTITIONS = {"seed 256": 256, "seed 65k": 65_536, "seed 1M": 1_048_576}


def nearest_power_of_two(x: float) -> int:
    if x <= 1:
        return 1
    low = 1 << int(math.floor(math.log2(x)))
    return low if x / low <= (2 * low) / x else 2 * low


def scaled_partitions(seed_partitions: int, n: int, seed_range: int = SEED_RANGE) -> int:
    """The seed's partition count at this run's N (a power of two, at least 1)."""
    if n < 1 or seed_partitions < 1:
        raise ValueError("n >= 1 and seed_partitions >= 1")
    return nearest_power_of_two(seed_partitions * n / seed_range)


def checkpoints(n: int, per_decade: int = 5, start: int = 1000) -> list[int]:
    """Log steps up to and including n: start, start*10^(1/per_decade), ..., n.

    Starts at n/10 when n is below 10*start, so small runs still get a curve."""
    if n < 1:
        raise ValueError("n >= 1")
    start = max(1, min(start, n // 10))
    points: list[int] = []
    value, factor = float(start), 10 ** (1 / per_decade)
    while value < n:
        points.append(int(round(value)))
        value *= factor
    points.append(n)
    return sorted(set(points))


def sizes_around(limits: list[int], top: int, dense_below: int = 16) -> list[int]:
    """Entry counts for a per-entry curve: every count up to dense_below, then steps of
    about 6%, plus limit-1, limit and limit+1 for each limit (where conversions happen)."""
    if top < 1:
        raise ValueError("top >= 1")
    out = set(range(1, min(dense_below, top) + 1))
    value = float(dense_below)
    while value < top:
        value *= 1.06
        out.add(min(top, int(round(value))))
    for limit in limits:
        for s in (limit - 1, limit, limit + 1):
            if 1 <= s <= top:
                out.add(s)
    out.add(top)
    return sorted(out)
