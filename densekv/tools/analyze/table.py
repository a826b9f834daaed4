"""The streaming pattern table: what the scan learns per pattern, in bounded memory.

Per pattern (PatternStats): keys seen, the sum and sum of squares of MEMORY USAGE (for
the estimate and its interval), counts by type and encoding, TTL and size distributions
(fixed buckets), value shapes from the first SHAPE_SAMPLES keys, and a uniform reservoir
of RESERVOIR key names (Algorithm R, fixed seed) for the replay. None of it grows with
the number of keys: a pattern costs a few KB (the reservoir's names), and the table holds
at most MAX_PATTERNS patterns; keys of patterns beyond that go to an overflow pattern
named after their first segment (`prefix:{*}`), then to `{*}`. So the client's memory is
flat in the keyspace size (benchmarks/analyze_speed.py measures it).

The table serializes to JSON (the resume file) and back, names as latin-1 text.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from densekv.tools.analyze.patterns import PLACEHOLDERS, Pattern, Rules, Token, merge_plan, name_of
from densekv.tools.analyze.shapes import Shape

RESERVOIR = 1000  # key names kept per pattern for the replay
SHAPE_SAMPLES = 48  # values read per pattern to learn its shape
MAX_PATTERNS = 400
MAX_OVERFLOW = 100  # `prefix:{*}` patterns beyond MAX_PATTERNS, then one `{*}`
ANY = "{*}"

TTL_BUCKETS = ((60, "<1m"), (3600, "<1h"), (86400, "<1d"), (7 * 86400, "<7d"), (30 * 86400, "<30d"))


def ttl_bucket(pttl: int) -> str:
    if pttl < 0:
        return "none"
    for limit, label in TTL_BUCKETS:
        if pttl < limit * 1000:
            return label
    return ">=30d"


def size_bucket(nbytes: int) -> str:
    """Power-of-two buckets: '<=64', '<=128', ... (MEMORY USAGE bytes)."""
    top = 64
    while nbytes > top and top < 1 << 40:
        top *= 2
    return f"<={top}"


@dataclass
class KeyFacts:
    """One sampled key as the scan saw it."""

    key: bytes
    type: str
    pttl: int
    encoding: str
    memory: int
    node: int = 0


def _bump(counter: dict[str, int], key: str, n: int = 1) -> None:
    counter[key] = counter.get(key, 0) + n


@dataclass
class PatternStats:
    name: str
    glob: str
    tokens: tuple[Token, ...]
    rule: str | None = None
    keys: int = 0
    mem_sum: int = 0
    mem_sq: float = 0.0
    types: dict[str, int] = field(default_factory=dict)
    encodings: dict[str, int] = field(default_factory=dict)
    ttl: dict[str, int] = field(default_factory=dict)
    ttl_sum_s: float = 0.0
    sizes: dict[str, int] = field(default_factory=dict)
    shapes: dict[str, int] = field(default_factory=dict)
    sessions: dict[str, int] = field(default_factory=dict)
    member_sizes: dict[str, int] = field(default_factory=dict)
    member_kinds: dict[str, int] = field(default_factory=dict)
    small_values: dict[str, int] = field(default_factory=dict)  # latin-1 text -> count
    flag_hashes: int = 0
    lengths: int = 0  # sum of Shape.length over shape samples
    shape_samples: int = 0
    shape_pending: int = 0
    id_sizes: dict[str, int] = field(default_factory=dict)  # the variable part's lengths
    reservoir: list[tuple[int, bytes]] = field(default_factory=list)
    names: int = 0  # keys counted by name (the names pass; 0: no names pass)

    # -- what the scan feeds in ----------------------------------------------------------
    @property
    def population(self) -> int:
        """The pattern's keys as far as the scan knows: counted by name, else sampled."""
        return self.names or self.keys

    def count_name(self, node: int, key: bytes, rng: random.Random) -> None:
        """The names pass: one more key of this pattern; the reservoir keeps a uniform
        sample of the names (Algorithm R) for the per-key sample and the replay."""
        self.names += 1
        if len(self.reservoir) < RESERVOIR:
            self.reservoir.append((node, key))
        else:
            j = rng.randrange(self.names)
            if j < RESERVOIR:
                self.reservoir[j] = (node, key)

    def add(self, facts: KeyFacts, rng: random.Random, keep: bool = True) -> None:
        """One sampled key's facts; keep=False: the reservoir holds names already."""
        self.keys += 1
        self.mem_sum += facts.memory
        self.mem_sq += float(facts.memory) ** 2
        _bump(self.types, facts.type)
        _bump(self.encodings, facts.encoding)
        _bump(self.ttl, ttl_bucket(facts.pttl))
        if facts.pttl >= 0:
            self.ttl_sum_s += facts.pttl / 1000
        _bump(self.sizes, size_bucket(facts.memory))
        if not keep:
            return
        if len(self.reservoir) < RESERVOIR:
            self.reservoir.append((facts.node, facts.key))
        else:
            j = rng.randrange(self.keys)
            if j < RESERVOIR:
                self.reservoir[j] = (facts.node, facts.key)

    def wants_shape(self) -> bool:
        return self.shape_samples + self.shape_pending < SHAPE_SAMPLES

    def add_shape(self, shape: Shape, key: bytes) -> None:
        self.shape_samples += 1
        _bump(self.shapes, shape.kind)
        self.lengths += shape.length
        if shape.session:
            _bump(self.sessions, shape.session)
        if shape.member_size is not None:
            _bump(self.member_sizes, str(shape.member_size))
        if shape.member_kind:
            _bump(self.member_kinds, shape.member_kind)
        if shape.small is not None and (shape.small.decode("latin-1") in self.small_values
                                        or len(self.small_values) < 4):
            _bump(self.small_values, shape.small.decode("latin-1"))
        if shape.flag_values:
            self.flag_hashes += 1
        values = self.variable_parts(key)
        if values is not None and len(values) == 1:
            _bump(self.id_sizes, str(len(values[0][1])))

    # -- derived ---------------------------------------------------------------------------
    _regex: re.Pattern[str] | None = field(default=None, repr=False, compare=False)

    def rename(self, name: str, tokens: tuple[Token, ...]) -> None:
        """Become the pattern `name` of `tokens` (a merge): its glob and regex follow."""
        from densekv.tools.analyze.patterns import glob_of

        self.name, self.glob, self.tokens, self._regex = name, glob_of(tokens), tokens, None

    def variable_parts(self, key: bytes) -> list[tuple[str, str]] | None:
        """(placeholder, text) for each placeholder of the pattern in this key."""
        if self.rule is not None:
            return None
        if self._regex is None:
            parts = [("(.+?)" if is_ph else re.escape(text)) for is_ph, text in self.tokens]
            self._regex = re.compile("\\A" + "".join(parts) + "\\Z", re.DOTALL)
        m = self._regex.match(key.decode("utf-8", "surrogateescape"))
        if m is None:
            return None
        names = [text for is_ph, text in self.tokens if is_ph]
        return list(zip(names, m.groups()))

    @property
    def placeholders(self) -> list[str]:
        return [text for is_ph, text in self.tokens if is_ph and text in PLACEHOLDERS]

    @property
    def mem_mean(self) -> float:
        return self.mem_sum / self.keys if self.keys else 0.0

    @property
    def mem_var(self) -> float:
        """Sample variance of MEMORY USAGE within the pattern."""
        if self.keys < 2:
            return 0.0
        return max(0.0, (self.mem_sq - self.mem_sum ** 2 / self.keys) / (self.keys - 1))

    def main(self, counter: dict[str, int]) -> tuple[str | None, float]:
        """(the most common entry, its share) of one of the counters."""
        total = sum(counter.values())
        if not total:
            return None, 0.0
        name, n = max(counter.items(), key=lambda kv: kv[1])
        return name, n / total

    @property
    def ttl_share(self) -> float:
        return 1 - self.ttl.get("none", 0) / self.keys if self.keys else 0.0

    def merge(self, other: PatternStats, rng: random.Random) -> None:
        """Fold another pattern's counts in (reservoirs: a weighted random mix)."""
        total = self.keys + other.keys
        weights = [self.population / max(1, len(self.reservoir))] * len(self.reservoir) + \
            [other.population / max(1, len(other.reservoir))] * len(other.reservoir)
        self.names += other.names
        for name in ("types", "encodings", "ttl", "sizes", "shapes", "sessions", "member_sizes",
                     "member_kinds", "small_values", "id_sizes"):
            mine: dict[str, int] = getattr(self, name)
            for k, v in getattr(other, name).items():
                _bump(mine, k, v)
        pool = self.reservoir + other.reservoir
        if len(pool) > RESERVOIR:
            idx = _weighted_sample(rng, weights, RESERVOIR)
            pool = [pool[i] for i in idx]
        self.reservoir = pool
        self.keys = total
        self.mem_sum += other.mem_sum
        self.mem_sq += other.mem_sq
        self.ttl_sum_s += other.ttl_sum_s
        self.flag_hashes += other.flag_hashes
        self.lengths += other.lengths
        self.shape_samples += other.shape_samples

    # -- serialization -------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if not k.startswith("_") and k != "shape_pending"}
        out["tokens"] = [[bool(p), t] for p, t in self.tokens]
        out["reservoir"] = [[n, k.decode("latin-1")] for n, k in self.reservoir]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PatternStats:
        data = dict(data)
        data["tokens"] = tuple((bool(p), str(t)) for p, t in data["tokens"])
        data["reservoir"] = [(int(n), str(k).encode("latin-1")) for n, k in data["reservoir"]]
        return cls(**data)


def _weighted_sample(rng: random.Random, weights: list[float], k: int) -> list[int]:
    """k distinct indices, drawn with probability proportional to weight (Efraimidis-Spirakis)."""
    keyed = sorted(range(len(weights)), key=lambda i: -math.log(rng.random() or 1e-300) / max(weights[i], 1e-12))
    return keyed[:k]


class PatternTable:
    """Patterns by name, bounded (see the module docstring)."""

    def __init__(self, rules: Rules | None = None, seed: int = 13) -> None:
        self.rules = rules or Rules()
        self.rng = random.Random(seed)
        self.patterns: dict[str, PatternStats] = {}
        self.overflow = 0

    def __len__(self) -> int:
        return len(self.patterns)

    def __iter__(self) -> Iterator[PatternStats]:
        return iter(self.patterns.values())

    def stats_for(self, key: bytes) -> PatternStats:
        name = self.rules.name(key)
        stats = self.patterns.get(name)
        if stats is not None:
            return stats
        pattern = self.rules.pattern(key)
        if len(self.patterns) >= MAX_PATTERNS:
            pattern = self._overflow_pattern(pattern)
            stats = self.patterns.get(pattern.name)
            if stats is not None:
                return stats
        stats = PatternStats(pattern.name, pattern.glob, pattern.tokens, pattern.rule)
        self.patterns[pattern.name] = stats
        return stats

    def _overflow_pattern(self, pattern: Pattern) -> Pattern:
        self.overflow += 1
        head: list[Token] = []
        for is_ph, text in pattern.tokens:
            if is_ph:
                break
            head.append((is_ph, text))
            if text in (":", "/", "|", "."):
                break
        if head and len(self.patterns) < MAX_PATTERNS + MAX_OVERFLOW:
            tokens = tuple(head) + ((True, ANY),)
        else:
            tokens = ((True, ANY),)
        from densekv.tools.analyze.patterns import glob_of

        return Pattern(name_of(tokens), glob_of(tokens), tokens)

    def add(self, facts: KeyFacts) -> PatternStats:
        stats = self.stats_for(facts.key)
        stats.add(facts, self.rng)
        return stats

    def count_name(self, node: int, key: bytes) -> None:
        self.stats_for(key).count_name(node, key, self.rng)

    def merge_similar(self, big: float = 0.005) -> dict[str, str]:
        """Merge small patterns that differ in one word (patterns.merge_plan); old -> new
        name. A pattern with at least `big` of the keys stays itself (`user:{n}` and
        `sess:{n}` are two data sets, however many small `p...:{n}` there are)."""
        total = sum(s.population for s in self.patterns.values())
        plan = merge_plan([s.tokens for s in self.patterns.values()
                           if s.rule is None and s.population < big * total])
        renamed: dict[str, str] = {}
        for old, tokens in plan.items():
            stats = self.patterns.pop(old)
            new = name_of(tokens)
            renamed[old] = new
            target = self.patterns.get(new)
            if target is None:
                stats.rename(new, tokens)
                self.patterns[new] = stats
            else:
                target.merge(stats, self.rng)
        return renamed

    def to_json(self) -> dict[str, Any]:
        return {"patterns": [s.to_json() for s in self.patterns.values()], "overflow": self.overflow,
                "rng": _rng_state(self.rng)}

    @classmethod
    def from_json(cls, data: dict[str, Any], rules: Rules | None = None) -> PatternTable:
        table = cls(rules)
        for item in data.get("patterns", []):
            stats = PatternStats.from_json(item)
            table.patterns[stats.name] = stats
        table.overflow = int(data.get("overflow", 0))
        if data.get("rng"):
            version, internal, gauss = data["rng"]
            table.rng.setstate((version, tuple(internal), gauss))
        return table


def _rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def total_keys(table: Iterable[PatternStats]) -> int:
    return sum(s.keys for s in table)
