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

The configurations and the sizing are in sets_plan.py (pure), the method text, figures and
tables in sets_report.py; this module measures.

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
from typing import Any

from densekv.errors import NotReplayable
from densekv.flows import drive_many
from densekv.tools.lab.experiments.base import Context, Experiment, Output, Replay, record_settings
from densekv.tools.lab.experiments.sets_plan import (
    ABSENT_SEED,
    BLOOM_NAME,
    BLOOM_RATES,
    CAS_BATCH,
    CAS_ROUNDS,
    CAS_SAMPLE,
    ENCODING_SAMPLE,
    EXACT,
    FLAT_CAP,
    ITEM_SIZE,
    LN2_SQUARED,
    LOAD_CHUNK,
    MINIMUM,
    NAME,
    PHASES,
    SWEEP_FACTOR,
    Job,
    Result,
    job_cost,
    plan_jobs,
    sizings,
)
from densekv.tools.lab.experiments.sets_report import describe
from densekv.tools.lab.observe import (
    commandstats,
    encodings,
    sample_partitions,
    stats_delta,
)
from densekv.tools.lab.results import RunRecord, op_stats
from densekv.tools.lab.workloads import chunks, ids16

__all__ = ["EXACT", "EXPERIMENT", "PHASES", "Job", "Result", "Sets", "job_cost", "plan_jobs", "replay", "sizings",
           "warm_up"]


# -- the experiment -----------------------------------------------------------------------


class Sets(Experiment):
    kind = "sets"
    title = "Sets: CAS of 128-bit IDs by layout and partition count, dense and Bloom"
    seed = "001"
    budget_s = 45.0

    def run(self, ctx: Context) -> Output:
        from densekv.capabilities import probe
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
        out.trim(sizing.trimmed)
        n = sizing.n
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
        ctx.target.disconnect()
        self._settle_lua(ctx)
        self._base = ctx.target.meter.reset()

    def _reading(self, ctx: Context) -> int:
        """The data's bytes since the baseline, net of client buffers (Reading.minus)."""
        ctx.target.disconnect()
        self._settle_lua(ctx)
        return ctx.target.meter.reading().minus(self._base)

    def _settle_lua(self, ctx: Context) -> None:
        for node in ctx.target.masters():  # each master of a cluster has its own Lua heap
            node.eval("collectgarbage('collect') return 0", 0)

    def _exact(self, ctx: Context, job: Job, n: int, run_n: int, limits: Any, cas: int) -> Result:
        from densekv.sets.layouts import FlatKeys

        target = ctx.target
        client = target.client
        self._baseline(ctx)
        s = open_set(client, job, n, limits)
        core = s.core
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
        client, core, ex = ctx.target.client, s.core, s.executor
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
        describe(out, ctx, n, results, limits, cas, absent, flat_cap, native)



def warm_up(client: Any, n: int, limits: Any, layouts: tuple[str, ...], caps: Any, native: bool) -> None:
    """The sets experiment's warm-up on `client` (the caller flushes after it): each
    layout's scripts loaded and the Lua heap grown by loads as large as the real ones."""
    from densekv.sets.compact import CompactSet

    half = min(LOAD_CHUNK, n)  # as many items per call as the loads send
    items = list(ids16(2 * half, seed=7))
    for layout in (x for x in ("set", "hash", "zset", "dense") if x in layouts):
        s = CompactSet(client, f"{NAME}-warm-{layout}", layout=layout, expected=n,
                       partitions=1 if layout != "dense" else None, limits=limits).open()
        s.add_many(items[:half])
        s.contains_many(items[half:])
        drive_many([s.core.add(x) for x in items[:CAS_BATCH]], s.executor)
    bloom_mod, _ = _bloom_module()
    if "bloom" in layouts and bloom_mod is not None:
        for mode in ([False, True] if native else [False]):
            # a failure here is reported when the real filter is measured
            with contextlib.suppress(Exception):
                bf = bloom_mod.BloomFilter(client, f"{BLOOM_NAME}-warm", capacity=half,
                                           error_rate=0.01, native=mode, caps=caps).open()
                bf.add_many(items[:half])
                bf.contains_many(items[half:])
                bf.delete()


def open_set(client: Any, job: Job, n: int, limits: Any) -> Any:
    """The CompactSet an exact or dense configuration measures."""
    from densekv.sets.compact import CompactSet

    return CompactSet(client, NAME, layout=job.layout, expected=n, item_size=ITEM_SIZE,
                      partitions=job.partitions, limits=limits).open()


def load_chunk(s: Any) -> int:
    """Items per add_many call of a configuration's load."""
    return max(LOAD_CHUNK, int(s.core.batch_size(None)))


def open_bloom(client: Any, job: Job, n: int, caps: Any) -> Any:
    """The Bloom filter a bloom configuration measures (capacity n)."""
    bloom_mod, why = _bloom_module()
    if bloom_mod is None:
        raise RuntimeError(why)
    return bloom_mod.BloomFilter(client, BLOOM_NAME, capacity=n, error_rate=job.error_rate, native=job.native,
                                 caps=caps).open()


def replay(record: Mapping[str, Any]) -> Replay:
    """A sets record's load, to run again on a fresh server (benchmarks/lab_check.py).

    warm_up is the experiment's own (every layout of the default run: scripts loaded,
    Lua heap grown); load opens the same CompactSet or BloomFilter (same name, layout,
    partition count, expected N, limits) and adds the record's n IDs from
    workloads.ids16 (default seed) in the same chunks. Call both with the same client."""
    from densekv.capabilities import probe
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
        if s.core.layout.partitions != record["partitions"]:
            raise NotReplayable(f"{job.label}: {s.core.layout.partitions} partitions here, "
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
