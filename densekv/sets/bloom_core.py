"""The Bloom filter's operations as flows of plans: no I/O, shared by the sync and asyncio shells.

A flow is a generator that yields a list of plans (one round trip) and receives their
decoded results, as in densekv/sessions/store.py. Keys (densekv.keys.tag):
  {name}:bm:{0}      the metadata hash: the parameters that fix every stage's geometry
                     (bloom_math.BloomSpec), written once by bloom_meta.lua
  {name}:bs:{j}      shard j's state hash: t (stages made), n (items added), c (items in
                     the last stage), updated by bloom_add.lua in the same script that sets
                     the bits, so the count is exact and atomic with the add even on a
                     cluster (all keys of shard j share the hash tag {j}, one slot)
  {name}:bf{t}:{j}   the bitmap of stage t in shard j: one string, made at its full length
                     (SETRANGE) when the stage starts, so SETBIT never reallocates it
  {name}:bn:{j}      native mode: shard j as a RedisBloom filter (BF.RESERVE'd at open)
Each shard grows on its own: the stage list of the filter is the metadata (geometry of
stage t) plus each shard's t. The client caches t per shard; a script that is handed
fewer stages than the shard has answers "stale" without touching anything and the flow
sends that shard's items again with the right keys (a second round trip, only then).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from densekv.errors import WrongType
from densekv.keys import tag
from densekv.lua import script
from densekv.plan import Plan, command, script_call
from densekv.sets.bloom_errors import (
    BloomFull,
    BloomMismatch,
    BloomModuleMissing,
    BloomNotFound,
    BloomParameterError,
)
from densekv.sets.bloom_math import (
    EXACT,
    MAX_STRING_BYTES,
    BloomSpec,
    Hashed,
    Stage,
    allocator_rule,
    check_parameters,
    hash_bytes,
    item_bytes,
    pack_walks,
    shard_count,
    string_allocation,
)

T = TypeVar("T")
Flow = Generator[list[Plan[Any]], list[Any], T]

KIND = "densekv.bloom"
FORMAT = 1
HASH_NAME = "blake2b-192"
SCRIPT_ITEMS = 500  # items per BF.MADD / BF.MEXISTS call (native: one C command, no Lua)
#: GETBIT/SETBIT calls one script call may make at most (items per call = this // (k x stages)).
#: About 1 us each, so a call stays near 1-2 ms: under the server's slowlog threshold (10 ms),
#: whose entries (~550 bytes each, up to 128) were most of the unexplained memory of the Bloom
#: benchmark on a busy machine, and short enough not to stall other clients.
SCRIPT_BITS = 1500
NATIVE_MODULES = ("bf", "bloom", "rebloom")
NATIVE_TYPE = "MBbloom--"


@dataclass(frozen=True)
class BloomFacts:
    """What opening a filter needs of the server: its allocator and modules."""

    allocator: str
    modules: tuple[str, ...] = ()

    @property
    def has_bloom_module(self) -> bool:
        return any(m.lower() in NATIVE_MODULES for m in self.modules)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def parse_facts(info_memory: Any, module_list: Any) -> BloomFacts:
    """BloomFacts from raw INFO memory and MODULE LIST replies (RESP2 or RESP3)."""
    allocator = "unknown"
    for line in _text(info_memory).splitlines():
        if line.startswith("mem_allocator:"):
            allocator = line.split(":", 1)[1].strip()
    names = []
    for entry in module_list or []:
        if isinstance(entry, dict):
            fields = {_text(k): v for k, v in entry.items()}
        else:
            fields = {_text(k): v for k, v in zip(entry[::2], entry[1::2])}
        names.append(_text(fields.get("name", "?")))
    return BloomFacts(allocator, tuple(sorted(names)))


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name or "{" in name or "}" in name:
        raise BloomParameterError(f"a Bloom filter name is a non-empty str without braces, got {name!r}")
    return name


def _pairs(reply: Any) -> dict[str, str]:
    if isinstance(reply, dict):
        return {_text(k): _text(v) for k, v in reply.items()}
    items = [_text(x) for x in reply or []]
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


def _decode_add(reply: Any) -> tuple[int, int, bytes]:
    return int(reply[0]), int(reply[1]), bytes(reply[2])


def _decode_has(reply: Any) -> tuple[int, bytes]:
    return int(reply[0]), bytes(reply[1])


def _flags(reply: Any) -> list[bool]:
    return [bool(int(x)) for x in reply]


class BloomCore:
    """Keys, plans and flows of one filter. Built unopened; `open()` fills in the spec."""

    def __init__(self, name: str, request: Request) -> None:
        self.name = check_name(name)
        if request.capacity is not None or request.error_rate is not None:
            check_parameters(
                request.capacity,
                request.error_rate,
                2 if request.growth is None else request.growth,
                0.5 if request.tightening is None else request.tightening,
            )
        if request.shards is not None and (
            isinstance(request.shards, bool) or not isinstance(request.shards, int) or request.shards < 1
        ):
            raise BloomParameterError(f"shards is an int >= 1, got {request.shards!r}")
        self.request = request
        self.spec: BloomSpec | None = None
        self.native = False
        self.stages: list[int] = []  # cached stage count per shard
        self.counts: list[int] = []  # last seen items per shard

    # -- keys -----------------------------------------------------------------------
    def meta_key(self) -> bytes:
        return tag(self.name, "bm", 0)

    def state_key(self, shard: int) -> bytes:
        return tag(self.name, "bs", shard)

    def stage_key(self, shard: int, stage: int) -> bytes:
        return tag(self.name, f"bf{stage}", shard)

    def native_key(self, shard: int) -> bytes:
        return tag(self.name, "bn", shard)

    @property
    def opened(self) -> BloomSpec:
        if self.spec is None:
            raise RuntimeError("the filter is not open yet")
        return self.spec

    # -- opening --------------------------------------------------------------------
    def open(self, facts: BloomFacts | None, create: bool) -> Flow[None]:
        """Check the keys, then create the metadata or read (and check against) it."""
        read = yield [script_call(script("bloom_meta"), [self.meta_key()], [""], decode=_pairs)]
        stored = read[0]
        if stored:
            spec, native = spec_from_fields(self.name, stored)
            check_request(self.name, self.request, spec, native)
        else:
            if not create:
                raise BloomNotFound(f"there is no Bloom filter named {self.name!r} on this server")
            assert facts is not None
            native = bool(self.request.native)
            if native and not facts.has_bloom_module:
                raise BloomModuleMissing(
                    "native=True needs the RedisBloom module (BF.* commands) and this server "
                    f"has {', '.join(facts.modules) or 'no modules'}: use native=False"
                )
            spec = spec_for(self.request, facts)
            yield from self._refuse_foreign_keys(spec)
            fields = spec_fields(spec, native)
            args = [x for kv in fields.items() for x in kv]
            made = yield [script_call(script("bloom_meta"), [self.meta_key()], args, decode=_pairs)]
            spec, native = spec_from_fields(self.name, made[0])  # another process may have won
            check_request(self.name, self.request, spec, native)
        if native and facts is not None and not facts.has_bloom_module:
            raise BloomModuleMissing(f"Bloom filter {self.name!r} is native but this server has no RedisBloom module")
        self.spec, self.native = spec, native
        self.stages = [0] * spec.shards
        self.counts = [0] * spec.shards
        if native:
            yield [self._plan_reserve(j) for j in range(spec.shards)]

    def _refuse_foreign_keys(self, spec: BloomSpec) -> Flow[None]:
        """Before creating: none of the filter's first keys may exist already."""
        keys = [self.native_key(j) for j in range(spec.shards)] if self.request.native else [
            k for j in range(spec.shards) for k in (self.state_key(j), self.stage_key(j, 0))
        ]
        types = yield [command("TYPE", k, keys=[k], decode=_text) for k in keys]
        taken = [(k, t) for k, t in zip(keys, types) if t != "none"]
        if taken:
            key, kind = taken[0]
            raise WrongType(
                f"key {key.decode()} already exists ({kind}) where Bloom filter {self.name!r} "
                "would write; densekv left it untouched: choose another name"
            )

    def _plan_reserve(self, shard: int) -> Plan[Any]:
        spec = self.opened
        cap = spec.stage(0).capacity
        return script_call(
            script("bloom_native_reserve"),
            [self.native_key(shard)],
            [repr(spec.error_rate), cap, spec.growth],
        )

    # -- items ------------------------------------------------------------------------
    def hash_all(self, items: Sequence[object]) -> list[Hashed]:
        """Every item converted and hashed before anything is sent (bad input writes nothing)."""
        return [hash_bytes(item_bytes(x)) for x in items]

    def _by_shard(self, hashed: Sequence[Hashed]) -> dict[int, list[int]]:
        shards = self.opened.shards
        groups: dict[int, list[int]] = {}
        for i, h in enumerate(hashed):
            groups.setdefault(h[2] % shards, []).append(i)
        return groups

    def _stage_list(self, count: int) -> list[Stage]:
        spec = self.opened
        out = []
        for t in range(count):
            try:
                stage = spec.stage(t)
            except BloomFull:
                break
            out.append(stage)
        return out

    def _plan_add(self, shard: int, hashed: Sequence[Hashed]) -> Plan[tuple[int, int, bytes]]:
        stages = self._stage_list(self.stages[shard] + 1)
        keys = [self.state_key(shard)] + [self.stage_key(shard, s.index) for s in stages]
        args: list[int | bytes] = [len(stages), len(hashed)]
        for s in stages:
            args += (s.bytes, s.k, s.capacity)
        args.append(pack_walks(hashed, [s.bits for s in stages]))
        return script_call(script("bloom_add"), keys, args, decode=_decode_add)

    def _plan_has(self, shard: int, hashed: Sequence[Hashed]) -> Plan[tuple[int, bytes]]:
        stages = self._stage_list(self.stages[shard])
        keys = [self.state_key(shard)] + [self.stage_key(shard, s.index) for s in stages]
        args: list[int | bytes] = [len(stages), len(hashed)]
        for s in stages:
            args += (s.bytes, s.k)
        args.append(pack_walks(hashed, [s.bits for s in stages]))
        return script_call(script("bloom_has"), keys, args, decode=_decode_has)

    # -- flows ------------------------------------------------------------------------
    def add_many(self, items: Sequence[object]) -> Flow[list[bool]]:
        hashed = self.hash_all(items)
        if not hashed:
            return []
        if self.native:
            return (yield from self._native_many("BF.MADD", items, hashed))
        results = [False] * len(hashed)
        pending = self._by_shard(hashed)
        while pending:
            most = max(self.stages[shard] for shard in pending) + 1
            calls = _script_calls(pending, script_items(sum(st.k for st in self._stage_list(most))))
            replies = yield [self._plan_add(shard, [hashed[i] for i in idx]) for shard, idx in calls]
            again: dict[int, list[int]] = {}
            for (shard, idx), (stages, count, flags) in zip(calls, replies):
                self.stages[shard] = max(self.stages[shard], stages)
                self.counts[shard] = max(self.counts[shard], count)
                for i, flag in zip(idx, flags):
                    results[i] = flag == ord("1")
                rest = idx[len(flags) :]
                if rest:
                    if len(self._stage_list(self.stages[shard] + 1)) <= self.stages[shard]:
                        raise BloomFull(
                            f"Bloom filter {self.name!r}: shard {shard} would need stage "
                            f"{self.stages[shard]}, over the {MAX_STRING_BYTES}-byte string limit; "
                            "create it with a larger capacity or more shards"
                        )
                    again.setdefault(shard, []).extend(rest)
            pending = again
        return results

    def contains_many(self, items: Sequence[object]) -> Flow[list[bool]]:
        hashed = self.hash_all(items)
        if not hashed:
            return []
        if self.native:
            return (yield from self._native_many("BF.MEXISTS", items, hashed))
        results = [False] * len(hashed)
        pending = self._by_shard(hashed)
        while pending:
            most = max(1, max(self.stages[shard] for shard in pending))
            calls = _script_calls(pending, script_items(sum(st.k for st in self._stage_list(most))))
            replies = yield [self._plan_has(shard, [hashed[i] for i in idx]) for shard, idx in calls]
            again: dict[int, list[int]] = {}
            for (shard, idx), (stages, flags) in zip(calls, replies):
                if len(flags) < len(idx):  # stale stage count: ask again with all stages
                    self.stages[shard] = max(self.stages[shard], stages)
                    again.setdefault(shard, []).extend(idx)
                    continue
                for i, flag in zip(idx, flags):
                    results[i] = flag == ord("1")
            pending = again
        return results

    def _native_many(self, verb: str, items: Sequence[object], hashed: Sequence[Hashed]) -> Flow[list[bool]]:
        groups = self._by_shard(hashed)
        data = [item_bytes(x) for x in items]
        plans = []
        order = []
        for shard, idx in groups.items():
            key = self.native_key(shard)
            for lo in range(0, len(idx), SCRIPT_ITEMS):
                part = idx[lo : lo + SCRIPT_ITEMS]
                plans.append(command(verb, key, *[data[i] for i in part], keys=[key], decode=_flags))
                order.append(part)
        replies = yield plans
        results = [False] * len(items)
        for part, flags in zip(order, replies):
            for i, flag in zip(part, flags):
                results[i] = flag
        return results

    # -- state, stats, delete -----------------------------------------------------------
    def read_states(self) -> Flow[list[tuple[int, int, int]]]:
        """(stages, items, items in the last stage) of every shard, one round trip."""
        spec = self.opened
        replies = yield [
            command("HMGET", self.state_key(j), "t", "n", "c", keys=[self.state_key(j)])
            for j in range(spec.shards)
        ]
        states = [tuple(int(v) if v is not None else 0 for v in r) for r in replies]
        for j, (t, n, _) in enumerate(states):
            self.stages[j] = max(self.stages[j], t)
            self.counts[j] = n
        return states  # type: ignore[return-value]

    def _keys_of(self, states: Sequence[tuple[int, int, int]]) -> list[list[bytes]]:
        """Every key of every shard (per shard), the metadata's not included."""
        if self.native:
            return [[self.native_key(j)] for j in range(self.opened.shards)]
        return [[self.state_key(j)] + [self.stage_key(j, t) for t in range(s[0])] for j, s in enumerate(states)]

    def stats(self) -> Flow[dict[str, Any]]:
        spec = self.opened
        if self.native:
            return (yield from self._native_stats())
        states = yield from self.read_states()
        keys = self._keys_of(states)
        flat = [self.meta_key()] + [k for ks in keys for k in ks]
        usage = yield [command("MEMORY", "USAGE", k, "SAMPLES", "0", keys=[k]) for k in flat]
        top = max((s[0] for s in states), default=0)
        stages = []
        allocated = 0
        fp_per_shard = []
        for t in range(max(top, 1)):
            stage = spec.stage(t)
            made = sum(1 for s in states if s[0] > t)
            stages.append({
                "stage": t,
                "capacity": stage.capacity * spec.shards,
                "error_rate": stage.error_rate,
                "bits_per_shard": stage.bits,
                "bytes_per_shard": stage.bytes,
                "k": stage.k,
                "shards_with_stage": made,
            })
            allocated += made * stage.allocation
        for t_count, n, c in states:
            survive = 1.0
            for t in range(t_count):
                stage = spec.stage(t)
                held = stage.capacity if t < t_count - 1 else c
                survive *= 1 - stage.fp_rate(held)
            fp_per_shard.append(1 - survive)
        first = spec.stage(0)
        inserted = sum(s[1] for s in states)
        return {
            "name": self.name,
            "native": False,
            "capacity": spec.capacity,
            "error_rate": spec.error_rate,
            "growth": spec.growth,
            "tightening": spec.tightening,
            "allocator_rule": spec.rule,
            "shards": spec.shards,
            "m": first.bits * spec.shards,
            "k": first.k,
            "stages": stages,
            "stage_count": top,
            "inserted": inserted,
            "bytes_allocated": allocated,
            "memory_usage": sum(int(u or 0) for u in usage),
            "fp_rate": sum(fp_per_shard) / len(fp_per_shard),
            "fp_bound": spec.error_rate if top <= 1 else spec.fp_bound,
            "fp_bound_grown": spec.fp_bound,
            "bits_per_item": (8 * allocated / inserted) if inserted else None,
        }

    def _native_stats(self) -> Flow[dict[str, Any]]:
        spec = self.opened
        keys = [self.native_key(j) for j in range(spec.shards)]
        infos = yield [command("BF.INFO", k, keys=[k], decode=_pairs) for k in keys]
        usage = yield [command("MEMORY", "USAGE", k, "SAMPLES", "0", keys=[k]) for k in [self.meta_key(), *keys]]
        inserted = sum(int(i.get("Number of items inserted", 0)) for i in infos)
        size = sum(int(i.get("Size", 0)) for i in infos)
        return {
            "name": self.name,
            "native": True,
            "capacity": spec.capacity,
            "error_rate": spec.error_rate,
            "growth": spec.growth,
            "shards": spec.shards,
            "stage_count": max(int(i.get("Number of filters", 0)) for i in infos),
            "inserted": inserted,
            "bytes_allocated": size,
            "memory_usage": sum(int(u or 0) for u in usage),
            # RedisBloom tightens from the first filter on (error_rate * 0.5^(i+1)), so
            # its filters together stay under error_rate.
            "fp_bound": spec.error_rate,
            "bits_per_item": (8 * size / inserted) if inserted else None,
        }

    def count(self) -> Flow[int]:
        if self.native:
            st = yield from self._native_stats()
            return int(st["inserted"])
        states = yield from self.read_states()
        return sum(s[1] for s in states)

    def delete(self) -> Flow[int]:
        """Remove every key of the filter (one round trip to read states, one to delete)."""
        states = (yield from self.read_states()) if not self.native else []
        groups = self._keys_of(states)
        plans: list[Plan[Any]] = [command("DEL", *ks, keys=ks) for ks in groups]
        plans.append(command("DEL", self.meta_key(), keys=[self.meta_key()]))
        deleted = yield plans
        self.stages = [0] * self.opened.shards
        self.counts = [0] * self.opened.shards
        return sum(int(d) for d in deleted)


def theoretical_bits_per_item(f: float) -> float:
    """-ln f / ln^2 2: the bits per item a Bloom filter with false-positive rate f needs."""
    return -math.log(f) / math.log(2) ** 2


def predicted_allocation(spec: BloomSpec) -> int:
    """Bytes the allocator accounts for stage 0 of every shard."""
    stage = spec.stage(0)
    return spec.shards * string_allocation(stage.bytes, spec.rule)


def script_items(bit_calls_per_item: int) -> int:
    """Items per script call when each item costs `bit_calls_per_item` GETBIT/SETBIT calls."""
    return max(20, SCRIPT_BITS // max(1, bit_calls_per_item))


def _script_calls(pending: dict[int, list[int]], per_call: int) -> list[tuple[int, list[int]]]:
    """(shard, item indexes) per script call: at most `per_call` items each."""
    return [(shard, idx[lo : lo + per_call])
            for shard, idx in pending.items() for lo in range(0, len(idx), per_call)]
