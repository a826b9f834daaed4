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

How long one call may hold the server: each bloom_add / bloom_has call stops before its
next item once it has spent the budget the client gave it (a hard cap in the script,
whatever items the client sends; the rest of its items go in the next round trip), plus a
fixed part per call (the state hash, one STRLEN per stage, HSET). The unit is one bit read
or set by redis.call (0.26-0.45 us a GETBIT on the servers of the matrix); a call that
reads and sets every bit so gets bloom_batch.SCRIPT_BITS = 1,000 (about 0.3 ms at k = 7 on
redis-7.4: add_many's median call 307-315 us in the SLOWLOG of `python benchmarks/
bloom_speed.py --baseline HEAD`). A contains_many call may instead copy a stage into the
script with one GET and test its bits there (bloom_has.lua), where bloom_batch.plan_call
finds that cheaper: many bits read from a small stage (up to ~270 KiB). Such a call gets
COPY_CALL_BITS = 1,800 units, the copy charged a unit per 256 bytes and a bit tested in it
0.3: at most ~0.8 ms by the measured costs (median 0.37-0.55 ms on the four servers at
200k items, p = 1%; the slowest seen 1.01 ms, on redis-7.4 at load average 0.66). Calls
are sized by the bits their items are expected to read: k for a found item, about 2 for
an absent one, weighed by the share the filter's last contains_many found. An add reads
and sets every bit by redis.call, and sets a new item's bits with SETBIT or with BITFIELD
SET u1 x 7, whichever bloom_spec.set_rule found cheaper on the server for a batch (SETBIT
for calls under BITFIELD_MIN_ITEMS items); the same bits either way. The client sends an
add the next stage only when its items may fill the last one (as far as its cached count
knows).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from densekv.errors import (
    BloomFull,
    BloomModuleMissing,
    BloomNotFound,
    BloomParameterError,
    WrongType,
)
from densekv.flows import Flow
from densekv.keys import tag
from densekv.lua import script
from densekv.plan import Plan, command, script_call
from densekv.sets.bloom_batch import (
    LOCAL_READ_UNITS,
    SCRIPT_BITS,
    Batch,
    CallPlan,
    Span,
    cut,
    group_by_shard,
    items_per_call,
    plan_call,
)
from densekv.sets.bloom_math import (
    MAX_STRING_BYTES,
    BloomSpec,
    Hashed,
    Stage,
    check_parameters,
    hash_bytes,
    hash_many,
    items_bytes,
    reduce,
    string_allocation,
)
from densekv.sets.bloom_spec import (
    SET_BITFIELD,
    BloomFacts,
    Request,
    check_name,
    check_request,
    pairs,
    spec_fields,
    spec_for,
    spec_from_fields,
    text,
)

SCRIPT_ITEMS = 500  # items per BF.MADD / BF.MEXISTS call (native: one C command, no Lua)
#: Fewer items than this to a call set their bits with SETBIT whatever bloom_spec.set_rule
#: says: BITFIELD's per-call set-up (its argument table) costs a single add 3-19% more
#: server time on all four servers of the matrix, where a batch call saves 14-17% on
#: valkey-9.1 and redis-7.0 (benchmarks/bloom_speed.py --baseline).
BITFIELD_MIN_ITEMS = 8

R = TypeVar("R")  # a script call's decoded reply (add_many, contains_many)


def _decode_add(reply: Any) -> tuple[int, int, int, bytes]:
    return int(reply[0]), int(reply[1]), int(reply[2]), bytes(reply[3])


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
        self.set_bits = SET_BITFIELD  # how bloom_add.lua sets bits (bloom_spec.set_rule)
        self.stages: list[int] = []  # cached stage count per shard
        self.counts: list[int] = []  # last seen items per shard
        self.lasts: list[int] = []  # last seen items in the last stage per shard
        self._stage_lists: dict[int, list[Stage]] = {}
        # share of the items found by the last contains_many: how many bits a contains
        # is expected to read (plan_call's choice between GETBIT and a copy of a stage)
        self.present_share = 0.5
        self._keys: dict[tuple[int, int], tuple[bytes, ...]] = {}

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
        read = yield [script_call(script("bloom_meta"), [self.meta_key()], [""], decode=pairs)]
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
            made = yield [script_call(script("bloom_meta"), [self.meta_key()], args, decode=pairs)]
            spec, native = spec_from_fields(self.name, made[0])  # another process may have won
            check_request(self.name, self.request, spec, native)
        if native and facts is not None and not facts.has_bloom_module:
            raise BloomModuleMissing(f"Bloom filter {self.name!r} is native but this server has no RedisBloom module")
        self.spec, self.native = spec, native
        if facts is not None:
            self.set_bits = facts.set_bits
        self.stages = [0] * spec.shards
        self.counts = [0] * spec.shards
        self.lasts = [0] * spec.shards
        if native:
            yield [self._plan_reserve(j) for j in range(spec.shards)]

    def _refuse_foreign_keys(self, spec: BloomSpec) -> Flow[None]:
        """Before creating: none of the filter's first keys may exist already."""
        keys = [self.native_key(j) for j in range(spec.shards)] if self.request.native else [
            k for j in range(spec.shards) for k in (self.state_key(j), self.stage_key(j, 0))
        ]
        types = yield [command("TYPE", k, keys=[k], decode=text) for k in keys]
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

    # -- plans ----------------------------------------------------------------------------
    def _stage_list(self, count: int) -> list[Stage]:
        """Stages 0..count-1 (fewer where a stage would pass the string limit)."""
        got = self._stage_lists.get(count)
        if got is None:
            spec = self.opened
            got = []
            for t in range(count):
                try:
                    got.append(spec.stage(t))
                except BloomFull:
                    break
            self._stage_lists[count] = got
        return got

    def _shard_keys(self, shard: int, count: int) -> tuple[bytes, ...]:
        """The state key and the first `count` stage keys of a shard."""
        keys = self._keys.get((shard, count))
        if keys is None:
            keys = (self.state_key(shard), *(self.stage_key(shard, t) for t in range(count)))
            self._keys[(shard, count)] = keys
        return keys

    def _add_stages(self, shard: int, items: int) -> list[Stage]:
        """The stages an add of `items` items to a shard sends: those the shard has (as far
        as this client knows), and the next one if these items may fill the last."""
        made = self.stages[shard]
        if made:
            stages = self._stage_list(made)
            if self.lasts[shard] + items < stages[-1].capacity:
                return stages
        return self._stage_list(made + 1)

    def _plan_add(self, shard: int, stages: list[Stage], walks: bytes, count: int,
                  how: CallPlan | None = None) -> Plan[tuple[int, int, int, bytes]]:
        """One bloom_add call (every bit by redis.call: `how` is not used, see _add_call_plan)."""
        bitfield = self.set_bits == SET_BITFIELD and count >= BITFIELD_MIN_ITEMS
        args: list[int | bytes] = [len(stages), count, SCRIPT_BITS, int(bitfield)]
        for s in stages:
            args += (s.bytes, s.k, s.capacity)
        args.append(walks)
        return script_call(script("bloom_add"), self._shard_keys(shard, len(stages)), args, decode=_decode_add)

    def _plan_has(self, shard: int, stages: list[Stage], walks: bytes, count: int,
                  how: CallPlan | None = None) -> Plan[tuple[int, bytes]]:
        budget, copies = (how.budget, _copies_arg(how)) if how else (SCRIPT_BITS, "")
        args: list[int | str | bytes] = [len(stages), count, budget, copies]
        for s in stages:
            args += (s.bytes, s.k)
        args.append(walks)
        return script_call(script("bloom_has"), self._shard_keys(shard, len(stages)), args, decode=_decode_has)

    def _add_call_plan(self, shard: int, stages: list[Stage], items: int) -> CallPlan:
        """An add reads and sets every bit by redis.call, in calls sized for k bits in every
        stage sent (items_per_call). Its last stage is written, so only full stages could be
        copied, where a new item reads about 2 bits: too few for calls that short, and
        plan_call picks GETBIT for them (a 25k-item filter grown to 2-4 stages). A version
        that copied them measured 1.045x the old code in one growth run of bloom_speed.py
        (--capacity 25000) at load average 5.4, inside that run's noise, so it was dropped."""
        return CallPlan(items_per_call(sum(st.k for st in stages)), SCRIPT_BITS, (0,) * len(stages))

    def _has_call_plan(self, shard: int, stages: list[Stage], items: int) -> CallPlan:
        """A contains reads about 2 bits of a stage that does not hold the item (at most
        half of a stage's bits are set) and k of the one that does, then stops: a found
        item (the last batch's share found) is in stage s in proportion to the items s
        holds, and reads only the stages up to its own."""
        h = self.present_share
        held = [st.capacity for st in stages[:-1]] + [max(1, self.lasts[shard])]
        total = sum(held)
        reads, after = [], total
        for st, n in zip(stages, held):
            after -= n  # found items in later stages also read ~2 bits here
            reads.append(h * (n * st.k + after * min(st.k, 2)) / total + (1 - h) * min(st.k, 2))
        return plan_call(stages, reads, items, len(stages))

    def _seen(self, shard: int, stages: int, count: int | None = None, last: int | None = None) -> None:
        """What a reply says of a shard (never backwards: replies may come out of order)."""
        if stages > self.stages[shard]:
            self.stages[shard] = stages
            self.lasts[shard] = 0
        if count is not None and count >= self.counts[shard]:
            self.counts[shard] = count
            if last is not None and stages == self.stages[shard]:
                self.lasts[shard] = last

    def _check_growth(self, shard: int, sent: list[Stage], stages: int, last: int) -> None:
        """An add stopped because the shard needs a stage that cannot be made: BloomFull."""
        if stages == len(sent) and last >= sent[-1].capacity and len(self._stage_list(stages + 1)) <= stages:
            raise BloomFull(
                f"Bloom filter {self.name!r}: shard {shard} would need stage {stages}, over the "
                f"{MAX_STRING_BYTES}-byte string limit; create it with a larger capacity or more shards"
            )

    # -- flows ------------------------------------------------------------------------
    def add_many(self, items: Sequence[object]) -> Flow[list[bool]]:
        """Add items in order: one script call per shard per SCRIPT_BITS bit calls, all
        calls of a round in one round trip; a call that stops short (budget, a stage to
        make, a stale stage count) has the rest of its items sent in the next round."""

        def stages_of(shard: int, group: list[Span]) -> list[Stage]:
            return self._add_stages(shard, sum(hi - lo for _, lo, hi in group))

        def took(span: Span, sent: list[Stage], reply: tuple[int, int, int, bytes]) -> bytes:
            shard, lo, hi = span
            stages, count, last, flags = reply
            self._seen(shard, stages, count, last)
            if lo + len(flags) < hi:
                self._check_growth(shard, sent, stages, last)
            return flags

        return (yield from self._many(items, "BF.MADD", self._add_one, stages_of, self._add_call_plan,
                                      self._plan_add, took))

    def contains_many(self, items: Sequence[object]) -> Flow[list[bool]]:
        def stages_of(shard: int, group: list[Span]) -> list[Stage]:
            return self._stage_list(max(1, self.stages[shard]))

        def took(span: Span, sent: list[Stage], reply: tuple[int, bytes]) -> bytes:
            stages, flags = reply
            self._seen(span[0], stages)
            return flags

        found = yield from self._many(items, "BF.MEXISTS", self._contains_one, stages_of, self._has_call_plan,
                                      self._plan_has, took)
        if len(found) > 1 and not self.native:
            self.present_share = sum(found) / len(found)
        return found

    def _many(self, items: Sequence[object], verb: str, one: Callable[[bytes], Flow[bool]],
              stages_of: Callable[[int, list[Span]], list[Stage]],
              call_plan: Callable[[int, list[Stage], int], CallPlan],
              plan: Callable[[int, list[Stage], bytes, int, CallPlan], Plan[R]],
              took: Callable[[Span, list[Stage], R], bytes]) -> Flow[list[bool]]:
        """The rounds of add_many / contains_many: `verb` with RedisBloom; one item through
        `one`; else script calls (`plan`) with each shard's `stages_of`, cut to what a call
        carries and reading each stage as `call_plan` says, all of a round in one round
        trip; `took` reads a reply into its flags, and a call that stops short has the rest
        of its span sent in the next round."""
        data = items_bytes(items)
        if not data:
            return []
        if self.native:
            return (yield from self._native_many(verb, data))
        if len(data) == 1:
            return [(yield from one(data[0]))]
        batch = Batch(data, self.opened.shards)
        pending = batch.spans
        while pending:
            calls: list[tuple[Span, list[Stage], CallPlan]] = []
            for shard, group in _by_shard(pending).items():
                stages = stages_of(shard, group)
                how = call_plan(shard, stages, sum(hi - lo for _, lo, hi in group))
                calls += [(part, stages, how) for span in group for part in cut(span, how.items)]
            replies = yield [plan(shard, stages, batch.walks(stages, lo, hi), hi - lo, how)
                             for (shard, lo, hi), stages, how in calls]
            pending = []
            for (span, sent, _), reply in zip(calls, replies):
                flags = took(span, sent, reply)
                shard, lo, hi = span
                batch.put(lo, flags)
                if lo + len(flags) < hi:
                    pending.append((shard, lo + len(flags), hi))
        return batch.results()

    def _add_one(self, data: bytes) -> Flow[bool]:
        """add of one item: one script call, with no batch machinery."""
        hashed = hash_bytes(data)
        shard = hashed[2] % self.opened.shards
        while True:
            stages = self._add_stages(shard, 1)
            walks = _walks_of_one(hashed, stages)
            (stages_now, count, last, flags), = yield [self._plan_add(shard, stages, walks, 1)]
            self._seen(shard, stages_now, count, last)
            if flags:
                return bool(flags == b"1")
            self._check_growth(shard, stages, stages_now, last)

    def _contains_one(self, data: bytes) -> Flow[bool]:
        hashed = hash_bytes(data)
        shard = hashed[2] % self.opened.shards
        while True:
            stages = self._stage_list(max(1, self.stages[shard]))
            (stages_now, flags), = yield [self._plan_has(shard, stages, _walks_of_one(hashed, stages), 1)]
            self._seen(shard, stages_now)
            if flags:
                return bool(flags == b"1")

    def _native_many(self, verb: str, data: list[bytes]) -> Flow[list[bool]]:
        shards = self.opened.shards
        if shards == 1:
            order: list[int] | None = None
            spans: list[Span] = [(0, 0, len(data))]
        else:
            order, spans = group_by_shard(hash_many(data)[2::3], shards)
            data = [data[i] for i in order]
        plans = []
        for shard, lo, hi in spans:
            key = self.native_key(shard)
            for _, a, b in cut((shard, lo, hi), SCRIPT_ITEMS):
                plans.append(command(verb, key, *data[a:b], keys=[key], decode=_flags))
        replies = yield plans
        found = [bool(x) for part in replies for x in part]
        if order is None:
            return found
        out = [False] * len(found)
        for i, flag in zip(order, found):
            out[i] = flag
        return out

    # -- state, stats, delete -----------------------------------------------------------
    def read_states(self) -> Flow[list[tuple[int, int, int]]]:
        """(stages, items, items in the last stage) of every shard, one round trip."""
        spec = self.opened
        replies = yield [
            command("HMGET", self.state_key(j), "t", "n", "c", keys=[self.state_key(j)])
            for j in range(spec.shards)
        ]
        states = [tuple(int(v) if v is not None else 0 for v in r) for r in replies]
        for j, (t, n, c) in enumerate(states):
            self._seen(j, t, n, c)
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
        infos = yield [command("BF.INFO", k, keys=[k], decode=pairs) for k in keys]
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
        self.lasts = [0] * self.opened.shards
        return sum(int(d) for d in deleted)


def theoretical_bits_per_item(f: float) -> float:
    """-ln f / ln^2 2: the bits per item a Bloom filter with false-positive rate f needs."""
    return -math.log(f) / math.log(2) ** 2


def predicted_allocation(spec: BloomSpec) -> int:
    """Bytes the allocator accounts for stage 0 of every shard."""
    stage = spec.stage(0)
    return spec.shards * string_allocation(stage.bytes, spec.rule)


def _copies_arg(how: CallPlan) -> str:
    """The scripts' copies argument: "" when no stage is copied, else the units of a bit
    tested in a copy and of copying each stage (0: read by GETBIT)."""
    if not any(how.copies):
        return ""
    return " ".join(map(str, (LOCAL_READ_UNITS, *how.copies)))


def _by_shard(spans: Sequence[Span]) -> dict[int, list[Span]]:
    out: dict[int, list[Span]] = {}
    for span in spans:
        out.setdefault(span[0], []).append(span)
    return out


_PAIRS = [struct.Struct(f"<{2 * t}I").pack for t in range(9)]  # the walks of one item, by stage count


def _walks_of_one(hashed: Hashed, stages: Sequence[Stage]) -> bytes:
    values = [v for st in stages for v in reduce(hashed, st.bits)]
    if len(stages) < len(_PAIRS):
        return _PAIRS[len(stages)](*values)
    return struct.pack(f"<{len(values)}I", *values)
