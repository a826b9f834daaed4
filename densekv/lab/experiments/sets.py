"""Experiment 2 (seed 001): check-and-set of 128-bit IDs by layout and partition count.

Seed 001 stored 10M random IDs as flat keys, and in SETs, HASHes and ZSETs over 2^n
partitions from 1 to one per item; it charted bytes per ID, overhead per ID over the
theoretical minimum, and CAS hit and miss throughput, and ended on two ideas it did not
try: binary packing and a Bloom filter. Here, at this run's N (the seed's sweep scaled to
N: partition counts are powers of SWEEP_FACTOR from 1 up to N, plus N itself, plus each
layout's listpack sweet spot - the power of two densekv's rule picks for N):
  flat   one string key per item (CompactSet layout "flat": SET NX GET); capped at
         FLAT_CAP items and measured at P = 1 and P = one per item only (its partitions
         only rename keys)
  set / hash / zset   CompactSet with that layout and partition count (hex members)
  dense  CompactSet "dense" (binary members in listpacks, its own partition count)
  bloom  densekv.sets.bloom.BloomFilter at capacity N, module-free, and native (BF.*)
         where the server has the bloom module; bits per item and the measured
         false-positive rate (import-guarded: the experiment runs without it)
Each configuration: flush (FLUSHALL on a scratch server, FLUSHDB on the --url database),
load N IDs from workloads.ids16 through CompactSet.add_many in fixed chunks (the client
holds one chunk), close the loader's connection, read the Meter's used_memory delta;
then four pipelined CAS phases of single-item commands (the seed's CAS): add of present
IDs (hit), contains of present IDs, contains of absent IDs, add of new IDs (miss), timed
from one Python process in CAS_ROUNDS rounds in which the four phases take turns; a
phase's rate is the median of its rounds' rates (one phase is 10-30 ms of wall time: a
busy machine that stalls the client or the server once hits one round, not the figure;
single timings put configurations with the same server time per add five times apart),
with server usec per call from INFO commandstats deltas summed over the rounds
(never CONFIG RESETSTAT: see observe.py). Every configuration is measured in every run;
the default run on a slow machine takes N = 65,536 or 32,768 (the sweep still reaches
32,768 partitions) and fewer CAS items instead (sizings, job_cost).

Uses CompactSet's core read-only (`_core.add` / `_core.contains` flows, driven 1000 per
round trip by densekv.flows.drive_many, and `_core.layout` for partition key names):
a public `add_flow()` / `partition_keys()` on CompactSet would replace them.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from densekv.flows import drive_many
from densekv.keys import partition_count
from densekv.lab.experiments.base import (
    Context,
    Experiment,
    FigureSpec,
    NotReplayable,
    Output,
    Replay,
    TableSpec,
    record_settings,
)
from densekv.lab.observe import (
    commandstats,
    converted_share,
    encodings,
    sample_partitions,
    stats_delta,
)
from densekv.lab.results import RunRecord, op_stats
from densekv.lab.sizing import Sizing
from densekv.lab.workloads import chunks, ids16

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
#: reference seconds (pace 1, see densekv/lab/pace.py; fitted on valkey 9.1, 2 cores) of
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


# -- the experiment -----------------------------------------------------------------------


class Sets(Experiment):
    kind = "sets"
    title = "Sets: CAS of 128-bit IDs by layout and partition count, dense and Bloom"
    seed = "001"
    budget_s = 45.0

    def run(self, ctx: Context) -> Output:
        from densekv.server.probe import probe
        from densekv.sets.compact import limits_of

        target = ctx.target
        out = Output(self.kind, target.name)
        caps = probe(target.client)
        limits = limits_of(caps)
        opts = ctx.options
        layouts = tuple(opts.get("layouts", (*EXACT, "dense", "bloom")))
        bloom_mod, why = _bloom_module()
        if "bloom" in layouts and bloom_mod is None:
            out.notes.append(f"Bloom filter: not measured - {why}")
            layouts = tuple(x for x in layouts if x != "bloom")
        native = "bloom" in layouts and any(m.lower() in ("bf", "bloom", "rebloom") for m in caps.modules)
        flat_cap = int(opts.get("flat_cap", FLAT_CAP))
        factor = int(opts.get("factor", SWEEP_FACTOR))
        rates = tuple(opts.get("error_rates", BLOOM_RATES))

        def plan(n: int) -> list[Job]:
            jobs = plan_jobs(n, limits, native=native, layouts=layouts, factor=factor, rates=rates,
                             flat_cap=flat_cap)
            if "partitions" in opts:  # tests: an explicit sweep
                wanted = set(opts["partitions"])
                jobs = [j for j in jobs if j.partitions is None or j.partitions in wanted]
            return jobs

        sizing = ctx.budget.fit(sizings(ctx.n, int(opts.get("cas", CAS_SAMPLE))),
                                lambda z: sum(job_cost(j, z.n, z["cas"], z["absent"]) for j in plan(z.n)))
        out.trimmed, n = sizing.trimmed, sizing.n
        jobs = plan(n)
        cas = min(n, int(sizing["cas"]))
        absent = int(opts.get("absent", sizing["absent"]))
        sizes = {j: (min(n, flat_cap) if j.layout == "flat" else n) for j in jobs}
        ctx.progress.start(f"{self.kind} on {target.name}", total=sum(sizes.values()))
        self._warm_up(ctx, n, limits, layouts, caps, native)
        results: list[Result] = []
        failed: list[str] = []
        for job in jobs:
            if job.layout == "bloom":
                try:
                    result = self._bloom(ctx, n, job, caps, absent)
                except Exception as exc:  # noqa: BLE001 - the Bloom filter is being written beside us
                    failed.append(f"{job.label}: {type(exc).__name__}: {exc}")
                    target.clear()
                    continue
            else:
                result = self._exact(ctx, job, sizes[job], n, limits, cas)
            results.append(result)
            record = self._record(ctx, result)
            out.records.append(record)
            ctx.progress.record(record)
        target.clear()
        if failed:
            out.notes.append("failed: " + "; ".join(failed))
        self._describe(out, ctx, n, results, limits, cas, absent, flat_cap, native)
        return out

    # -- measuring ---------------------------------------------------------------------
    def _warm_up(self, ctx: Context, n: int, limits: Any, layouts: tuple[str, ...], caps: Any,
                 native: bool) -> None:
        """Load the scripts and give the Lua VM its working heap before any baseline:
        per server, not per item (on Redis 7.x the Lua heap is inside used_memory)."""
        warm_up(ctx.target.client, n, limits, layouts, caps, native)
        ctx.target.clear()

    def _baseline(self, ctx: Context) -> None:
        """Flush and take the baseline on a fresh connection."""
        ctx.target.client.connection_pool.disconnect()
        self._settle_lua(ctx)
        self._base = ctx.target.meter.reset()

    def _reading(self, ctx: Context) -> int:
        """The data's bytes since the baseline, net of client buffers (Reading.minus)."""
        ctx.target.client.connection_pool.disconnect()
        self._settle_lua(ctx)
        return ctx.target.meter.reading().minus(self._base)

    def _settle_lua(self, ctx: Context) -> None:
        ctx.target.client.eval("collectgarbage('collect') return 0", 0)

    def _exact(self, ctx: Context, job: Job, n: int, run_n: int, limits: Any, cas: int) -> Result:
        from densekv.sets.layouts import FlatKeys

        target = ctx.target
        client = target.client
        self._baseline(ctx)
        s = open_set(client, job, n, limits)
        core = s._core
        layout = core.layout
        load = _timed_load(ctx, client, s.add_many, n, load_chunk(s))
        delta = self._reading(ctx)
        if isinstance(layout, FlatKeys):
            sample = [layout.locate(core.codec.encode(x))[0] for x in ids16(min(n, 64))]
            keys_total = n
            found: dict[str, int] = encodings(client, sample[:ENCODING_SAMPLE])
        else:
            sample = [layout.key(p) for p in sample_partitions(layout.partitions, ENCODING_SAMPLE)]
            keys_total = layout.partitions
            found = encodings(client, sample)
        usage = _memory_usage(client, sample)
        mu = None if usage is None else usage * keys_total / n
        ops = {"load": load, **self._cas(ctx, s, n, cas)}
        notes = [f"{name}: {ops[name]['unexpected']} of {ops[name]['count']} answers were not the expected "
                 f"{ops[name]['expected']}" for name in PHASES if ops[name]["unexpected"]]
        params: dict[str, Any] = {
            "item_size": ITEM_SIZE, "minimum_bytes": MINIMUM,
            "overhead_bytes_per_item": round(delta / n - MINIMUM, 3),
            "items_per_partition": round(n / layout.partitions, 3) if layout.partitioned else None,
            "member_bytes": s.explain().get("member_bytes"),
            "key_example": s.explain().get("key_example"),
        }
        if job.layout == "dense":
            info = s.explain()
            params.update(encoding=info.get("encoding"), predicted_bytes_per_item=info.get("predicted_bytes_per_item"),
                          reason=core.reason)
        if job.layout == "flat" and n < run_n:
            notes.append(f"capped at {n:,} IDs (the run's N is {run_n:,})")
        return Result(job, n, layout.partitions, delta / n, delta, mu, found, ops, params, notes)

    def _cas(self, ctx: Context, s: Any, n: int, cas: int) -> dict[str, dict[str, Any]]:
        """The seed's CAS, one command per item, CAS_BATCH per round trip: present IDs
        (the first `cas` loaded) and absent ones (another stream), in CAS_ROUNDS rounds of
        the four phases in turn. A round's miss phase adds the absent IDs its own contains
        phase has just asked about, never those of a later round (after the memory reading)."""
        client, core, ex = ctx.target.client, s._core, s._ex
        present = list(ids16(cas))
        absent = list(ids16(cas, seed=ABSENT_SEED))
        plans = {"cas_hit": (core.add, present, False), "contains_hit": (core.contains, present, True),
                 "contains_miss": (core.contains, absent, False), "cas_miss": (core.add, absent, True)}
        rounds = max(1, min(CAS_ROUNDS, cas))
        timings: dict[str, list[tuple[int, float]]] = {name: [] for name in PHASES}
        usec: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        per: dict[str, dict[str, dict[str, float]]] = {name: {} for name in PHASES}
        unexpected: dict[str, int] = dict.fromkeys(PHASES, 0)
        for r in range(rounds):
            lo, hi = cas * r // rounds, cas * (r + 1) // rounds
            for name in PHASES:
                make, items, expected = plans[name]
                before = commandstats(client)
                t0 = time.perf_counter()
                answers: list[Any] = []
                for a in range(lo, hi, CAS_BATCH):
                    answers += drive_many([make(x) for x in items[a : min(hi, a + CAS_BATCH)]], ex)
                timings[name].append((hi - lo, time.perf_counter() - t0))
                spent, commands = stats_delta(before, commandstats(client))
                usec[name] += spent
                for command_name, got in commands.items():
                    into = per[name].setdefault(command_name, {"calls": 0, "usec": 0})
                    into["calls"] += got["calls"]
                    into["usec"] += got["usec"]
                unexpected[name] += sum(1 for a in answers if bool(a) is not expected)
        out: dict[str, dict[str, Any]] = {}
        for name in PHASES:
            for got in per[name].values():
                got["usec_per_call"] = round(got["usec"] / got["calls"], 3)
            rates = [count / seconds for count, seconds in timings[name] if seconds > 0]
            stats = op_stats(cas, sum(seconds for _, seconds in timings[name]), usec[name], per[name])
            stats["ops_per_s_total"] = stats["ops_per_s"]
            stats["ops_per_s"] = round(statistics.median(rates), 1) if rates else None
            stats["ops_per_s_rounds"] = [round(x, 1) for x in rates]
            stats["expected"] = plans[name][2]
            stats["unexpected"] = unexpected[name]
            out[name] = stats
        return out

    def _bloom(self, ctx: Context, n: int, job: Job, caps: Any, absent_count: int) -> Result:
        bloom_mod, _ = _bloom_module()
        assert bloom_mod is not None and job.error_rate is not None
        target = ctx.target
        client = target.client
        self._baseline(ctx)
        bf = open_bloom(client, job, n, caps)
        load = _timed_load(ctx, client, bf.add_many, n, LOAD_CHUNK)
        delta = self._reading(ctx)
        stats = bf.stats()
        before = commandstats(client)
        t0 = time.perf_counter()
        false_pos = 0
        for part in chunks(ids16(absent_count, seed=ABSENT_SEED), LOAD_CHUNK):
            false_pos += sum(bf.contains_many(part))
        seconds = time.perf_counter() - t0
        usec, per = stats_delta(before, commandstats(client))
        lookups = op_stats(absent_count, seconds, usec, per)
        checked = min(n, LOAD_CHUNK)
        false_neg = checked - sum(bf.contains_many(list(ids16(checked))))
        f_measured = false_pos / absent_count
        f_formula = stats.get("fp_rate")
        # the information limit needs a measured f; where the sample is too small to
        # resolve it (p * absent < 100), the filter's own formula stands in
        use_measured = false_pos > 0 and job.error_rate * absent_count >= 100
        f_used = f_measured if use_measured else (f_formula if f_formula else job.error_rate)
        theory = -math.log(f_used) / LN2_SQUARED
        bits = 8 * delta / n
        allocated = stats.get("bytes_allocated")
        params = {
            "error_rate": job.error_rate, "capacity": n, "native": job.native,
            "k": stats.get("k"), "m": stats.get("m"), "shards": stats.get("shards"),
            "stages": stats.get("stage_count"), "inserted": stats.get("inserted"),
            "bits_per_item": round(bits, 4),
            "allocated_bits_per_item": None if not allocated else round(8 * allocated / n, 4),
            "absent": absent_count, "false_positives": false_pos, "f_measured": f_measured,
            "f_formula": f_formula, "f_used": "measured" if use_measured else "formula",
            "theory_bits_per_item": round(theory, 4), "ratio": round(bits / theory, 4),
            "false_negatives": false_neg, "false_negatives_checked": checked,
        }
        notes = [] if false_neg == 0 else [f"{false_neg} false negatives among {checked} present items"]
        return Result(job, n, int(stats.get("shards") or 1), delta / n, delta,
                      None if not stats.get("memory_usage") else stats["memory_usage"] / n, {},
                      {"load": load, "contains_miss": lookups}, params, notes)

    def _record(self, ctx: Context, r: Result) -> RunRecord:
        bloom = r.job.layout == "bloom"
        main = r.ops["load"] if bloom else r.ops["cas_miss"]
        point: dict[str, Any] = {"n": r.n, "bytes_per_item": round(r.bytes_per_item, 3),
                                 "used_memory_delta": r.delta,
                                 "memory_usage_bytes_per_item": None if r.memory_usage is None
                                 else round(r.memory_usage, 3)}
        if r.encodings:
            point["encodings"] = {"sample": r.encodings}
        return RunRecord.stamped(
            ctx.target.stamp, kind=self.kind, layout=r.job.layout, partitions=r.partitions, variant=r.job.label,
            n=r.n, bytes_per_item=r.bytes_per_item, used_memory_delta=r.delta,
            memory_usage_bytes_per_item=r.memory_usage, op="load" if bloom else "cas_miss",
            ops_per_s=main["ops_per_s"], server_usec_per_call=main["server_usec_per_call"],
            points=[point], ops=r.ops, params=r.params, notes=r.notes,
        )

    # -- describing ---------------------------------------------------------------------
    def _describe(self, out: Output, ctx: Context, n: int, results: list[Result], limits: Any, cas: int,
                  absent: int, flat_cap: int, native: bool) -> None:
        stamp = ctx.target.stamp
        factor = int(ctx.options.get("factor", SWEEP_FACTOR))
        if n > flat_cap and any(r.job.layout == "flat" for r in results):
            out.method.append(f"flat was measured with {flat_cap:,} IDs, not {n:,}: one key per ID is slow to "
                              "load, and its bytes per ID do not depend on N beyond the main dict's "
                              "power-of-two table.")
        if any(r.job.layout == "bloom" for r in results) and not native:
            out.method.append("Native Bloom filters (RedisBloom's BF.*) are measured where the server has the "
                              "module; this one has not, so only the module-free filter is shown.")
        out.method += [
            (f"N = {n:,} random 16-byte IDs (workloads.ids16, fixed seed; the seed used 10M). The seed swept "
            f"2^n partitions from 1 to one per ID; scaled to this N the sweep is 1, {factor}, {factor}^2, ... "
            f"and {n:,} (one per ID), plus each layout's listpack sweet spot (the power of two densekv's rule "
            f"picks so the fullest partition stays under its listpack limit at N). flat keys: measured at 1 "
            f"partition and one per ID only (partitions only rename its keys), with at most {flat_cap:,} IDs."),
            "Each configuration starts from a flushed "
            + ("server" if stamp.scratch else "database (the lab's own, empty when it started)")
            + ": the IDs are added through CompactSet.add_many in chunks of at least "
            f"{LOAD_CHUNK:,} (bounded client memory), the loader's connection is closed, a Lua garbage "
            "collection is run (EVAL collectgarbage: scripts were loaded and the Lua heap grown by a warm-up "
            "before any baseline), and densekv's Meter reads the used_memory delta once the server is quiet, "
            "less the change in mem_clients_normal (the measuring connection's own buffers, not data). "
            f"Bytes per ID = delta / IDs; overhead per ID = bytes per ID - {MINIMUM} (the ID's own 16 bytes; "
            "the seed's minimum was 32 because it stored hex text). MEMORY USAGE of a sample of partition keys, "
            "scaled to the key count, is a cross-check; OBJECT ENCODING of the sample shows listpack vs "
            "hashtable/skiplist.",
            (f"CAS throughput, after the reading: {cas:,} single-item commands per phase, up to {CAS_BATCH} per "
            "pipelined round trip, from one Python process - add of present IDs (CAS hit), contains of present "
            "IDs, contains of absent IDs, add of new IDs (CAS miss; SETNX-style: SET NX GET, SADD, HSETNX, "
            "ZADD NX; the dense hash of Redis 7.0 adds with HSETNX + HGET, a script only on a low-bit "
            f"collision). Each phase runs in {CAS_ROUNDS} rounds, the four phases taking turns, and its items "
            "per second are the median of its rounds' rates (ops_per_s_rounds in the record): a phase lasts "
            "10-30 ms, so one stall of a busy machine used to decide a configuration's figure (a single "
            "timing put configurations with the same server µs per add five times apart). "
            "These rates are one client's pipelined round trips: mostly the client's own cost, alike for every "
            "layout. The server's cost is the server-µs column = the INFO commandstats usec delta of the phase "
            "/ the items (never CONFIG RESETSTAT). A CAS miss adds a new ID to a set already holding N: dense "
            "and the listpack sweet spots are sized to sit just under the listpack limit at N, so their "
            "misses insert into full listpacks (and convert some), which is why their server µs per miss is "
            "several times their hit's; a set of one partition (a hashtable) or one per ID has no such limit."),
            (f"Bloom filter: densekv.sets.bloom.BloomFilter with capacity N, loaded with the same N IDs "
            f"(add_many in chunks of {LOAD_CHUNK:,}: its add/s is that load's rate; module-free = one Lua call "
            "per shard per ~1,500 GETBIT/SETBIT, native = BF.MADD of 500); contains/s = contains_many of the "
            "absent IDs below (the false-positive count), so it measures misses, which stop at the first "
            "0 bit; benchmarks/bloom_speed.py compares the two modes operation by operation. "
            f"Bits per item = 8 x used_memory delta / N; false-positive rate = hits among "
            f"{absent:,} absent IDs (another fixed-seed stream); the information limit -ln f / ln^2 2 bits per "
            "item is computed with that measured f (with the filter's formula where p x absent < 100 leaves "
            "too few hits to count). Native = RedisBloom's BF.* where the server has the module."),
        ]
        if not results:
            return
        out.figures.append(FigureSpec(
            "bytes-per-id", f"Bytes per 16-byte ID vs partition count, N = {n:,} ({stamp.name} {stamp.version})",
            "used_memory delta / IDs for each layout at each partition count (log scales); dense at its own "
            "partition count (star); Bloom filters as horizontal lines (bytes per item, with the measured "
            "false-positive rate); dashed: the 16-byte minimum; dotted verticals: the partition count at which "
            "the average partition holds exactly the listpack limit of that type (to the right of it the "
            "partitions are listpacks).",
            lambda fig: _plot_bytes(fig, results, limits, n),
        ))
        out.figures.append(FigureSpec(
            "overhead-per-id", "Overhead per ID over the 16-byte minimum (the seed's second chart)",
            "bytes per ID - 16, log scale. Bloom filters are not exact sets and sit below the minimum: they are "
            "on the first chart and in the table.",
            lambda fig: _plot_overhead(fig, results),
        ))
        out.figures.append(FigureSpec(
            "cas-throughput", "CAS hit and miss throughput vs partition count",
            f"Items per second, {cas:,} single-item commands per phase, {CAS_BATCH} per round trip, one Python "
            "client (the client's cost is in these numbers, as in the seed's Ruby driver). Left: add (CAS) of "
            "present IDs (hit, solid) and new IDs (miss, dashed); right: contains of present (solid) and absent "
            "(dashed) IDs. " + dense_miss_sentence(results),
            lambda fig: _plot_rates(fig, results),
        ))
        out.figures.append(FigureSpec(
            "server-usec", "Server microseconds per CAS call vs partition count",
            "INFO commandstats usec delta / calls for the add phases (hit solid, miss dashed): the server's own "
            "cost, without the client.",
            lambda fig: _plot_usec(fig, results),
        ))
        exact = [r for r in results if r.job.layout != "bloom"]
        out.tables.append(TableSpec(
            f"Exact layouts at N = {n:,} on {stamp.name}",
            ["configuration", "partitions", "IDs/partition", "bytes/ID", "overhead/ID", "MEMORY USAGE B/ID",
             "encodings (sample)", "CAS hit/s", "CAS miss/s", "contains hit/s", "contains miss/s",
             "server µs CAS hit", "server µs CAS miss"],
            [[r.job.label, r.partitions, r.params.get("items_per_partition") or "-", round(r.bytes_per_item, 2),
              round(r.bytes_per_item - MINIMUM, 2), None if r.memory_usage is None else round(r.memory_usage, 2),
              ", ".join(f"{k} {v}" for k, v in sorted(r.encodings.items())) or "-",
              r.ops["cas_hit"]["ops_per_s"], r.ops["cas_miss"]["ops_per_s"], r.ops["contains_hit"]["ops_per_s"],
              r.ops["contains_miss"]["ops_per_s"], r.ops["cas_hit"]["server_usec_per_call"],
              r.ops["cas_miss"]["server_usec_per_call"]]
             for r in sorted(exact, key=lambda r: (_ORDER.get(r.job.layout, 9), r.partitions))],
            "IDs/partition: N / partitions (random IDs spread evenly). flat keeps one key per ID whatever its "
            "partition count.",
        ))
        blooms = [r for r in results if r.job.layout == "bloom"]
        if blooms:
            out.tables.append(TableSpec(
                f"Bloom filters at capacity {n:,} on {stamp.name}",
                ["filter", "k", "bits/item (used_memory)", "bytes/item", "bits/item (allocated)",
                 "false positives", "f measured", "f formula", "-ln f / ln²2", "ratio", "false negatives",
                 "add/s", "contains/s"],
                [[r.job.label, r.params["k"] if r.params["k"] is not None else "-", r.params["bits_per_item"],
                  round(r.bytes_per_item, 3), r.params["allocated_bits_per_item"],
                  f"{r.params['false_positives']:,} of {r.params['absent']:,}", f"{r.params['f_measured']:.3g}",
                  "-" if r.params["f_formula"] is None else f"{r.params['f_formula']:.3g}",
                  r.params["theory_bits_per_item"], r.params["ratio"], r.params["false_negatives"],
                  r.ops["load"]["ops_per_s"], r.ops["contains_miss"]["ops_per_s"]] for r in blooms],
                "ratio = bits per item / (-ln f / ln²2), with f measured where the sample resolves it "
                "(f used: " + ", ".join(f"{r.job.label}: {r.params['f_used']}" for r in blooms) + "). "
                "bits/item (allocated) is the filter's own count of the bytes its strings hold. "
                f"add/s: the load (add_many in chunks of {LOAD_CHUNK:,}); contains/s: contains_many of the "
                "absent IDs (misses, which stop at the first 0 bit; present IDs test all k bits and are slower). "
                "Module-free, each bit is one GETBIT/SETBIT from Lua (about 0.25 µs each on an idle server), "
                "which is most of its time: BF.* does the same in C.",
            ))


def dense_miss_sentence(results: list[Result]) -> str:
    """What the dense star on the CAS figure compares, in this run's numbers."""
    dense = next((r for r in results if r.job.layout == "dense"), None)
    others = [r.ops["cas_miss"]["ops_per_s"] for r in results
              if r.job.layout in EXACT and r.ops.get("cas_miss", {}).get("ops_per_s")]
    if dense is None or not others:
        return ""
    miss, hit = dense.ops["cas_miss"], dense.ops["cas_hit"]
    text = (f"dense (star): CAS miss {miss['ops_per_s']:,.0f}/s against {min(others):,.0f}-{max(others):,.0f}/s "
            f"for the exact layouts (median {statistics.median(others):,.0f}/s).")
    if miss.get("server_usec_per_call") and hit.get("server_usec_per_call"):
        text += (f" On the server a dense miss takes {miss['server_usec_per_call']:.2f} µs against "
                 f"{hit['server_usec_per_call']:.2f} µs for a hit: dense sizes its partitions to sit just under "
                 "the listpack limit at N, so every new ID is inserted into a full listpack, a memmove of the "
                 "whole partition (and a conversion when one overflows); a hit only searches it.")
    return text


def warm_up(client: Any, n: int, limits: Any, layouts: tuple[str, ...], caps: Any, native: bool) -> None:
    """The sets experiment's warm-up on `client` (the caller flushes after it): each
    layout's scripts loaded and the Lua heap grown by loads as large as the real ones."""
    from densekv.sets.compact import CompactSet

    half = min(LOAD_CHUNK, n)  # as many items per call as the loads send
    items = list(ids16(2 * half, seed=7))
    for layout in (x for x in ("set", "hash", "zset", "dense") if x in layouts):
        s = CompactSet(client, f"{NAME}-warm-{layout}", layout=layout, expected=n,
                       partitions=1 if layout != "dense" else None, limits=limits)
        s.add_many(items[:half])
        s.contains_many(items[half:])
        drive_many([s._core.add(x) for x in items[:CAS_BATCH]], s._ex)
    bloom_mod, _ = _bloom_module()
    if "bloom" in layouts and bloom_mod is not None:
        for mode in ([False, True] if native else [False]):
            # a failure here is reported when the real filter is measured
            with contextlib.suppress(Exception):
                bf = bloom_mod.BloomFilter(client, f"{BLOOM_NAME}-warm", capacity=half,
                                           error_rate=0.01, native=mode, caps=caps)
                bf.add_many(items[:half])
                bf.contains_many(items[half:])
                bf.delete()


def open_set(client: Any, job: Job, n: int, limits: Any) -> Any:
    """The CompactSet an exact or dense configuration measures."""
    from densekv.sets.compact import CompactSet

    return CompactSet(client, NAME, layout=job.layout, expected=n, item_size=ITEM_SIZE,
                      partitions=job.partitions, limits=limits)


def load_chunk(s: Any) -> int:
    """Items per add_many call of a configuration's load."""
    return max(LOAD_CHUNK, int(s._core.batch_size(None)))


def open_bloom(client: Any, job: Job, n: int, caps: Any) -> Any:
    """The Bloom filter a bloom configuration measures (capacity n)."""
    bloom_mod, why = _bloom_module()
    if bloom_mod is None:
        raise RuntimeError(why)
    return bloom_mod.BloomFilter(client, BLOOM_NAME, capacity=n, error_rate=job.error_rate, native=job.native,
                                 caps=caps)


def replay(record: Mapping[str, Any]) -> Replay:
    """A sets record's load, to run again on a fresh server (benchmarks/lab_check.py).

    warm_up is the experiment's own (every layout of the default run: scripts loaded,
    Lua heap grown); load opens the same CompactSet or BloomFilter (same name, layout,
    partition count, expected N, limits) and adds the record's n IDs from
    workloads.ids16 (default seed) in the same chunks. Call both with the same client."""
    from densekv.server.probe import probe
    from densekv.sets.compact import limits_from_probe, limits_of

    n, layout, params = int(record["n"]), str(record["layout"]), dict(record.get("params") or {})
    if layout == "bloom":
        job = Job("bloom", error_rate=float(params["error_rate"]), native=bool(params["native"]))
    elif layout == "dense":
        job = Job("dense")
    elif layout in EXACT:
        job = Job(layout, int(record["partitions"]))
    else:
        raise NotReplayable(f"unknown sets layout {layout!r}")

    def warm(client: Any) -> None:
        caps = probe(client)
        native = any(m.lower() in ("bf", "bloom", "rebloom") for m in caps.modules)
        if job.native and not native:
            raise NotReplayable("this server has no bloom module (the record used BF.*)")
        warm_up(client, n, limits_of(caps), (*EXACT, "dense", "bloom"), caps, native)

    def load(client: Any) -> None:
        if job.layout == "bloom":
            bf = open_bloom(client, job, n, probe(client))
            for part in chunks(ids16(n), LOAD_CHUNK):
                bf.add_many(part)
            return
        s = open_set(client, job, n, limits_from_probe(client))
        if s._core.layout.partitions != record["partitions"]:
            raise NotReplayable(f"{job.label}: {s._core.layout.partitions} partitions here, "
                                f"{record['partitions']} in the record")
        for part in chunks(ids16(n), load_chunk(s)):
            s.add_many(part)

    return Replay(n, load, warm, record_settings(record))


def _bloom_module() -> tuple[Any, str]:
    """densekv.sets.bloom if it imports cleanly (it is being written beside the lab)."""
    try:
        import densekv.sets.bloom as module
    except Exception as exc:  # noqa: BLE001 - any import failure means "not in this build"
        return None, f"densekv.sets.bloom does not import in this build ({type(exc).__name__}: {exc})"
    return module, ""


def _memory_usage(client: Any, keys: list[bytes]) -> float | None:
    """Mean MEMORY USAGE (SAMPLES 0) over the sampled keys, one round trip; a key that
    does not exist (an empty partition) counts 0."""
    if not keys:
        return None
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0")
    return sum(int(v) for v in pipe.execute(raise_on_error=False) if isinstance(v, int)) / len(keys)


# -- plots (called by the report with a matplotlib Figure) -------------------------------

COLORS = {"flat": "#7f7f7f", "set": "#d62728", "hash": "#2ca02c", "zset": "#1f77b4", "dense": "#9467bd",
          "bloom": "#ff7f0e"}
_ORDER = {name: i for i, name in enumerate((*EXACT, "dense", "bloom"))}
_LIMIT_OF = {"hash": "hash_max_listpack_entries", "set": "set_max_listpack_entries",
             "zset": "zset_max_listpack_entries"}


def _legend_outside(ax: Any) -> None:
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)


def _series(results: list[Result], layout: str) -> list[Result]:
    return sorted((r for r in results if r.job.layout == layout), key=lambda r: r.partitions)


def _converted(r: Result) -> bool:
    share = converted_share(r.encodings)
    return bool(share)


def _plot_bytes(fig: Any, results: list[Result], limits: Any, n: int) -> None:
    ax = fig.add_subplot(1, 1, 1)
    for layout in EXACT:
        rs = _series(results, layout)
        if not rs:
            continue
        color = COLORS[layout]
        ax.plot([r.partitions for r in rs], [r.bytes_per_item for r in rs], "-" if layout != "flat" else "--",
                marker="o", color=color, label=layout)
        limit = getattr(limits, _LIMIT_OF.get(layout, ""), None)
        if limit:
            ax.axvline(n / limit, color=color, linestyle=":", alpha=0.6)
            ax.text(n / limit, 0.99, f"{layout} partitions full ({limit:,} IDs) ", color=color, fontsize=8,
                    rotation=90, va="top", ha="right", transform=ax.get_xaxis_transform())
    for r in _series(results, "dense"):
        ax.scatter([r.partitions], [r.bytes_per_item], marker="*", s=180, color=COLORS["dense"], zorder=5,
                   label=f"dense ({r.params.get('encoding')}, P={r.partitions:,}): {r.bytes_per_item:.1f} B")
    styles = ["-", "-.", ":", (0, (5, 1))]
    for i, r in enumerate(_series(results, "bloom")):
        fp = r.params["false_positives"]
        f = f"f = {r.params['f_measured']:.3g}" if fp else f"0 false positives in {r.params['absent']:,}"
        ax.axhline(r.bytes_per_item, color=COLORS["bloom"], linestyle=styles[i % len(styles)], alpha=0.9,
                   label=f"{r.job.label}: {r.bytes_per_item:.2f} B/item, {f}")
    ax.axhline(MINIMUM, color="black", linestyle="--", linewidth=0.8, label="16 B (the ID itself)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("partitions (keys the IDs are spread over)")
    ax.set_ylabel("bytes per ID (used_memory delta / N)")
    ax.grid(True, which="both", alpha=0.3)
    _legend_outside(ax)


def _plot_overhead(fig: Any, results: list[Result]) -> None:
    ax = fig.add_subplot(1, 1, 1)
    for layout in EXACT:
        rs = _series(results, layout)
        if rs:
            ax.plot([r.partitions for r in rs], [max(0.1, r.bytes_per_item - MINIMUM) for r in rs], marker="o",
                    color=COLORS[layout], linestyle="--" if layout == "flat" else "-", label=layout)
            for r in rs:
                if _converted(r):
                    ax.scatter([r.partitions], [max(0.1, r.bytes_per_item - MINIMUM)], s=90, facecolors="none",
                               edgecolors=COLORS[layout])
    for r in _series(results, "dense"):
        ax.scatter([r.partitions], [max(0.1, r.bytes_per_item - MINIMUM)], marker="*", s=180,
                   color=COLORS["dense"], zorder=5, label=f"dense: {r.bytes_per_item - MINIMUM:.1f} B over 16")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("partitions (rings: sampled partitions not in a listpack)")
    ax.set_ylabel("overhead bytes per ID (bytes per ID - 16)")
    ax.grid(True, which="both", alpha=0.3)
    _legend_outside(ax)


def _plot_rates(fig: Any, results: list[Result]) -> None:
    axes = fig.subplots(1, 2, sharey=True)
    for ax, (hit, miss, title) in zip(axes, (("cas_hit", "cas_miss", "add (CAS)"),
                                             ("contains_hit", "contains_miss", "contains"))):
        for layout in (*EXACT, "dense"):
            rs = _series(results, layout)
            if not rs:
                continue
            xs = [r.partitions for r in rs]
            marker = "*" if layout == "dense" else "o"
            ax.plot(xs, [r.ops[hit]["ops_per_s"] for r in rs], "-", marker=marker, color=COLORS[layout],
                    label=f"{layout} hit")
            ax.plot(xs, [r.ops[miss]["ops_per_s"] for r in rs], "--", marker=marker, color=COLORS[layout],
                    label=f"{layout} miss")
        ax.set_xscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("partitions")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("items per second (one client, pipelined)")
    _legend_outside(axes[1])


def _plot_usec(fig: Any, results: list[Result]) -> None:
    ax = fig.add_subplot(1, 1, 1)
    for layout in (*EXACT, "dense"):
        rs = _series(results, layout)
        if not rs:
            continue
        xs = [r.partitions for r in rs]
        marker = "*" if layout == "dense" else "o"
        for op, ls in (("cas_hit", "-"), ("cas_miss", "--")):
            ys = [r.ops[op]["server_usec_per_call"] for r in rs]
            ax.plot(xs, [y if y is not None else float("nan") for y in ys], ls, marker=marker,
                    color=COLORS[layout], label=f"{layout} {op.replace('cas_', '')}")
    ax.set_xscale("log")
    ax.set_xlabel("partitions")
    ax.set_ylabel("server µs per CAS call (INFO commandstats)")
    ax.grid(True, which="both", alpha=0.3)
    _legend_outside(ax)


EXPERIMENT = Sets()


def _timed_load(ctx: Any, client: Any, add_many: Any, n: int, chunk: int) -> Any:
    """Load n streamed IDs through add_many in chunks: wall time and server time per call."""
    before = commandstats(client)
    t0 = time.perf_counter()
    for part in chunks(ids16(n), chunk):
        add_many(part)
        ctx.progress.advance(len(part))
    load_s = time.perf_counter() - t0
    usec, per = stats_delta(before, commandstats(client))
    return op_stats(n, load_s, usec, per)
