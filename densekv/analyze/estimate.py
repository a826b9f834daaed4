"""From the sample to the whole keyspace: counts and bytes per pattern, with 95% intervals.

With n keys sampled uniformly (without replacement) out of K, x of them in a pattern:
  keys   K x/n, interval K x Wilson's score interval for x/n, its half-width times the
         finite-population correction sqrt((K - n) / (K - 1));
  bytes  K x mean(y), y_i = MEMORY USAGE of sampled key i if it is in the pattern, else 0;
         interval +- 1.96 K sd(y) / sqrt(n), with the same correction.
A full scan (n = K) gives exact counts and zero-width intervals. The interval of the
saving in bytes is the bytes interval times the measured saving fraction: the replay's
ratio is taken as exact, its own error (a few hundred keys' value sizes) being small
beside the sampling error of a pattern's count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float

    def scaled(self, factor: float) -> Estimate:
        return Estimate(self.value * factor, self.low * factor, self.high * factor)

    def plus(self, other: Estimate) -> Estimate:
        return Estimate(self.value + other.value, self.low + other.low, self.high + other.high)

    def as_ints(self) -> list[int]:
        return [round(self.low), round(self.high)]


def fpc(n: int, total: int) -> float:
    if total <= 1 or n >= total:
        return 0.0
    return math.sqrt((total - n) / (total - 1))


def keys_estimate(x: int, n: int, total: int) -> Estimate:
    """Keys of a pattern seen x times in n sampled keys out of `total`."""
    if n <= 0 or total <= 0:
        return Estimate(float(x), float(x), float(x))
    if n >= total:
        return Estimate(float(x), float(x), float(x))
    p = x / n
    z2 = Z95 * Z95
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = Z95 / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) * fpc(n, total)
    return Estimate(p * total, max(0.0, center - half) * total, min(1.0, center + half) * total)


def bytes_estimate(mem_sum: float, mem_sq: float, n: int, total: int) -> Estimate:
    """Total MEMORY USAGE of a pattern from its sum and sum of squares over the sample."""
    if n <= 0 or total <= 0:
        return Estimate(mem_sum, mem_sum, mem_sum)
    mean = mem_sum / n
    value = mean * total
    if n >= total or n < 2:
        return Estimate(value, value, value)
    var = max(0.0, (mem_sq - n * mean * mean) / (n - 1))
    half = Z95 * total * math.sqrt(var / n) * fpc(n, total)
    return Estimate(value, max(0.0, value - half), value + half)
