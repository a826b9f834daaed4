"""From the sample to the whole keyspace: counts and bytes per pattern, with 95% intervals.

After a names pass (scan.py: every key counted by name, a pattern of N keys, n of them
looked at, drawn uniformly without replacement from its names):
  keys   N, exact (a zero-width interval);
  bytes  N x mean(MEMORY USAGE of the n), interval +- t98(n-1) N sd / sqrt(n) with the
         finite-population correction sqrt((N - n) / (N - 1)), sd never under
         unseen_variance (n keys that all priced alike still miss the rare key of
         another size class); built at 98% so that it holds at least 95% of the time
         on skewed patterns too (t98). tests/behaviour/test_analyze_truth.py counts how
         often it holds the truth over 60 runs of ~40 keys per pattern.
Past the names limit (a prefix of SCAN as the sample),
with n keys sampled uniformly (without replacement) out of K, x of them in a pattern:
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


def allocate(sizes: list[int], budget: int) -> list[int]:
    """Share `budget` sampled keys among strata of these sizes as evenly as they allow
    (water-filling: every stratum gets min(size, cap), the largest cap within the budget,
    the rest of the budget to the largest strata): each pattern's mean is then known about
    as well as any other's, whatever its share of the keyspace."""
    if budget <= 0 or not sizes:
        return [0] * len(sizes)
    if sum(sizes) <= budget:
        return list(sizes)
    lo, hi = 0, max(sizes)
    while lo < hi:  # the largest cap whose total fits
        mid = (lo + hi + 1) // 2
        if sum(min(s, mid) for s in sizes) <= budget:
            lo = mid
        else:
            hi = mid - 1
    out = [min(s, lo) for s in sizes]
    spare = budget - sum(out)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        if spare <= 0:
            break
        if sizes[i] > out[i]:
            out[i] += 1
            spare -= 1
    return out


Z98 = 2.3263478740408408
T98_SMALL = (31.821, 6.965, 4.541, 3.747, 3.365, 3.143, 2.998, 2.896, 2.821, 2.764)  # df 1..10


def t98(n: int) -> float:
    """The two-sided 98% quantile of Student's t with n - 1 degrees of freedom (the table
    up to 10, then a Cornish-Fisher expansion, within 0.5% of the table). The bytes'
    "95% interval" is built at 98%: MEMORY USAGE within a pattern is skewed (a few keys of
    a bigger size class), and a t interval of a skewed mean from ~40 keys held the truth
    only 89-95% of the time at its nominal 95% (tests/behaviour/test_analyze_truth.py)."""
    df = max(1, n - 1)
    if df <= len(T98_SMALL):
        return T98_SMALL[df - 1]
    z = Z98
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def counted_bytes_estimate(count: int, mem_sum: float, mem_sq: float, n: int) -> Estimate:
    """A pattern's total MEMORY USAGE when its keys were counted by name (count, exact)
    and n of them were sampled uniformly without replacement: count x their mean, with
    a t interval and the finite-population correction."""
    if n <= 0 or count <= 0:
        return Estimate(0.0, 0.0, 0.0)
    mean = mem_sum / n
    value = mean * count
    if n >= count or n < 2:
        return Estimate(value, value, value) if n >= count else Estimate(value, 0.0, 2 * value)
    var = max(0.0, (mem_sq - n * mean * mean) / (n - 1), unseen_variance(mean, n))
    half = t98(n) * count * math.sqrt(var / n) * fpc(n, count)
    return Estimate(value, max(0.0, value - half), value + half)


def unseen_variance(mean: float, n: int) -> float:
    """A floor under the sample variance of MEMORY USAGE: n draws that all priced alike
    (or nearly) still leave up to 3/n of the keys unseen (the rule of three) that may sit
    one allocator size class away (jemalloc's classes are 1/4 of a power of two apart, 8 B
    at least). Without it, 40 flags that all priced 72 B gave a zero-width interval while
    5% of the flags price 80 B."""
    if n <= 0 or mean <= 0:
        return 0.0
    step = max(8.0, 2.0 ** (math.floor(math.log2(mean)) - 2))
    share = min(0.5, 3 / n)
    return step * step * share * (1 - share)
