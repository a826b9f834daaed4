"""What a densekv Bloom filter keeps in its metadata hash, and what opening one checks.

The metadata hash `{name}:bm:{0}` is written once, by bloom_meta.lua, with the fields of
spec_fields (format 1): kind, v, capacity, error_rate, shards, growth, tightening, rule (the
allocator rounding), native, hash. Every later client reads them back (spec_from_fields),
so all compute the same stage geometry whatever server they talk to, and a request with
other parameters is refused (check_request). Opening also needs two facts of the server
(BloomFacts: its allocator, for the rounding rule, and whether RedisBloom is loaded),
projected from the probe's Capabilities (facts_of; densekv/capabilities.py reads them),
and how bloom_add.lua sets bits there (set_rule: no part of the format, the same bits).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from densekv.capabilities import Capabilities
from densekv.errors import BloomMismatch, BloomParameterError, WrongType
from densekv.sets.bloom_math import EXACT, BloomSpec, allocator_rule, check_parameters, shard_count

KIND = "densekv.bloom"
FORMAT = 1
HASH_NAME = "blake2b-192"
NATIVE_MODULES = ("bf", "bloom", "rebloom")
NATIVE_TYPE = "MBbloom--"

# How bloom_add.lua sets a new item's k bits in the last stage. Both leave the same bits and
# return the old ones; what differs is the server's time per bit from Lua (benchmarks/
# bloom_speed.py --bit-ops, k = 7, 140 items a call; the ratio is BITFIELD's time / SETBIT's,
# measured in one run: redis-7.4 1.06-1.14, redis-7.0 0.84-0.91, valkey-8.0 0.64-0.91,
# valkey-9.1 0.81-0.87).
SET_BITFIELD = "bitfield"  # one BITFIELD SET u1 x 7 (30 arguments: redis.call's cached ones)
SET_SETBIT = "setbit"  # one SETBIT per bit


@dataclass(frozen=True)
class BloomFacts:
    """What opening a filter needs of the server: its allocator and modules."""

    allocator: str
    modules: tuple[str, ...] = ()
    # SET_BITFIELD or SET_SETBIT (set_rule): how fast, not what is stored, so two facts that
    # differ only here describe the same filters (not compared)
    set_bits: str = field(default=SET_BITFIELD, compare=False)

    @property
    def has_bloom_module(self) -> bool:
        return any(m.lower() in NATIVE_MODULES for m in self.modules)


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def set_rule(flavor: str, version: tuple[int, ...]) -> str:
    """SETBIT where it measured cheaper than BITFIELD (Redis 7.4 on), BITFIELD elsewhere."""
    return SET_SETBIT if flavor == "redis" and version >= (7, 4) else SET_BITFIELD


def facts_of(caps: Capabilities) -> BloomFacts:
    """What opening a filter needs of the probe's Capabilities (a pure projection)."""
    return BloomFacts(caps.allocator, caps.modules, set_rule(caps.flavor, caps.version_tuple))


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name or "{" in name or "}" in name:
        raise BloomParameterError(f"a Bloom filter name is a non-empty str without braces, got {name!r}")
    return name


def pairs(reply: Any) -> dict[str, str]:
    if isinstance(reply, dict):
        return {text(k): text(v) for k, v in reply.items()}
    items = [text(x) for x in reply or []]
    return dict(zip(items[::2], items[1::2]))


def spec_fields(spec: BloomSpec, native: bool) -> dict[str, str]:
    return {
        "kind": KIND,
        "v": str(FORMAT),
        "capacity": str(spec.capacity),
        "error_rate": repr(float(spec.error_rate)),
        "shards": str(spec.shards),
        "growth": str(spec.growth),
        "tightening": repr(float(spec.tightening)),
        "rule": spec.rule,
        "native": "1" if native else "0",
        "hash": HASH_NAME,
    }


def spec_from_fields(name: str, fields: dict[str, str]) -> tuple[BloomSpec, bool]:
    if fields.get("kind") != KIND or fields.get("v") != str(FORMAT) or fields.get("hash") != HASH_NAME:
        raise WrongType(f"{name}: the metadata hash is not a densekv Bloom filter of format {FORMAT}")
    spec = BloomSpec(
        capacity=int(fields["capacity"]),
        error_rate=float(fields["error_rate"]),
        shards=int(fields["shards"]),
        growth=int(fields["growth"]),
        tightening=float(fields["tightening"]),
        rule=fields["rule"],
    )
    return spec, fields.get("native") == "1"


@dataclass(frozen=True)
class Request:
    """What the caller asked for; None = take the stored value or the default."""

    capacity: int | None
    error_rate: float | None
    native: bool | None
    shards: int | None = None
    growth: int | None = None
    tightening: float | None = None


def spec_for(request: Request, facts: BloomFacts) -> BloomSpec:
    """The spec of a new filter: shards from the size, rounding from the allocator."""
    assert request.capacity is not None and request.error_rate is not None
    growth = 2 if request.growth is None else request.growth
    tightening = 0.5 if request.tightening is None else request.tightening
    check_parameters(request.capacity, request.error_rate, growth, tightening)
    shards = request.shards or shard_count(request.capacity, float(request.error_rate))
    rule = EXACT if request.native else allocator_rule(facts.allocator)
    return BloomSpec(request.capacity, float(request.error_rate), shards, growth, float(tightening), rule)


def check_request(name: str, request: Request, spec: BloomSpec, native: bool) -> None:
    """A filter that exists must be opened with its own parameters (or none)."""
    asked = {
        "capacity": request.capacity,
        "error_rate": None if request.error_rate is None else float(request.error_rate),
        "native": request.native,
        "shards": request.shards,
        "growth": request.growth,
        "tightening": None if request.tightening is None else float(request.tightening),
    }
    stored = {
        "capacity": spec.capacity,
        "error_rate": spec.error_rate,
        "native": native,
        "shards": spec.shards,
        "growth": spec.growth,
        "tightening": spec.tightening,
    }
    differ = [f"{k}={asked[k]!r} (stored {stored[k]!r})" for k in asked if asked[k] is not None and asked[k] != stored[k]]
    if differ:
        raise BloomMismatch(
            f"Bloom filter {name!r} exists with other parameters: {', '.join(differ)}; "
            "open it with BloomFilter.open(client, name) or choose another name"
        )
