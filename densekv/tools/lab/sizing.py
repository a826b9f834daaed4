"""Sizes the lab chooses: default N, checkpoints, the seed's partition counts at this N,
and how the default run fits its work to the time it has.

Pure functions (unit-tested without a server). DEFAULT_N was chosen by timing the
default lab on the embedded valkey-9.1 on a 2-core machine (benchmarks/lab_duration.py):
the whole default lab must finish within 3 minutes.

Fitting (the default run only): an experiment lists the sizings it could run, largest
first (`Sizing`: N, checkpoints, repetitions - never which configurations: every sizing
measures the experiment's whole story), with each one's cost on the reference machine;
`fit` takes the first whose cost x pace (densekv/tools/lab/pace.py) fits the experiment's
seconds, or the smallest when none does (a slow machine takes longer, it does not
measure less). `Sizing.trimmed` says in one phrase what the chosen one gave up.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

DEFAULT_N = 100_000

#: Seed 000 followed its layouts up to about 40M sessions (its "extended" chart, where
#: the 65k-partition ZSETs convert near 8.5M and the HASHes near 33M). The lab replays
#: that range at its own N: a seed partition count P becomes P * N / SEED_RANGE.
SEED_RANGE = 40_000_000
SEED_PARTITIONS = {"seed 256": 256, "seed 65k": 65_536, "seed 1M": 1_048_576}


def nearest_power_of_two(x: float) -> int:
    if x <= 1:
        return 1
    low = 1 << math.floor(math.log2(x))
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
        points.append(round(value))
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
        out.add(min(top, round(value)))
    for limit in limits:
        for s in (limit - 1, limit, limit + 1):
            if 1 <= s <= top:
                out.add(s)
    out.add(top)
    return sorted(out)


@dataclass(frozen=True)
class Sizing:
    """One way to size an experiment's work: its N and knobs, and what it trims."""

    n: int
    knobs: dict[str, int] = field(default_factory=dict)  # checkpoints per decade, repetitions, ...
    trimmed: str = ""  # what this sizing gives up against the full one ("" for the full one)

    def __getitem__(self, name: str) -> int:
        return self.knobs[name]


def fit(sizings: Sequence[Sizing], cost: Callable[[Sizing], float], seconds: float | None,
        pace: float) -> tuple[Sizing, float]:
    """The first sizing (largest first) whose reference cost x pace is within `seconds`,
    else the last; with its predicted seconds. No budget (seconds None): the first."""
    if not sizings:
        raise ValueError("no sizing to choose from")
    if seconds is None:
        return sizings[0], cost(sizings[0]) * pace
    for sizing in sizings:
        predicted = cost(sizing) * pace
        if predicted <= seconds:
            return sizing, predicted
    return sizings[-1], cost(sizings[-1]) * pace


#: the N steps a trimmed run may take, as fractions of the full N
N_STEPS = (1.0, 0.6, 0.4, 0.25, 0.15, 0.1)


def n_steps(n: int, floor: int) -> list[int]:
    """N, then smaller round steps down to `floor` (never below it, never above n)."""
    out: list[int] = []
    for share in N_STEPS:
        step = max(floor, round_n(n * share)) if share < 1 else n
        step = min(step, n)
        if step not in out:
            out.append(step)
    return out


def round_n(x: float) -> int:
    """x to two significant digits (60,000 rather than 60,317)."""
    if x < 100:
        return max(1, round(x))
    digits = math.floor(math.log10(x)) - 1
    return int(round(x / 10**digits) * 10**digits)
