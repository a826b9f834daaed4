"""Experiment 1 (seed 000): bytes per session for every session layout as N grows.

For each layout (and the seed's 256 / 65k / 1M-partition ZSET variants, scaled to this
run's N): flush, then create sessions with SessionStore.create_many (2000 per round
trip, integer identities from workloads.identities, no payload, no identity index - the
seed's setup) up to log-spaced checkpoints; at each checkpoint the Meter reads the
used_memory delta and a fixed sample of partition keys is asked OBJECT ENCODING, so the
points where partitions convert from listpack to hashtable/skiplist are on the curve.
Then the store's own get flow is run for a sample of the created tokens, pipelined 1000
per round trip; server time per operation comes from INFO commandstats deltas.

Only public entry points: the partition key names come from the layout the store
explains (make_layout with its partition count), the pipelined gets are
SessionStore.get_many (the store's own get flow, gathered 1000 per round trip).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from densekv.errors import NotReplayable
from densekv.keys import partition_count
from densekv.sessions.meta import DEFAULT_FILL
from densekv.tools.lab.experiments.base import (
    Context,
    Experiment,
    FigureSpec,
    Output,
    Replay,
    TableSpec,
    record_settings,
)
from densekv.tools.lab.experiments.plotting import log_axes
from densekv.tools.lab.observe import (
    commandstats,
    converted_share,
    encodings,
    sample_partitions,
    stats_delta,
)
from densekv.tools.lab.results import RunRecord, op_stats
from densekv.tools.lab.sizing import (
    SEED_PARTITIONS,
    SEED_RANGE,
    Sizing,
    checkpoints,
    n_steps,
    scaled_partitions,
)
from densekv.tools.lab.workloads import Stream, identities
from densekv.tools.measure import Point

NAMESPACE = "lab"
CREATE_BATCH = 2000
GET_BATCH = 1000
MAX_GETS = 10_000
ENCODING_SAMPLE = 48
MEMORY_SAMPLE = 64  # keys whose MEMORY USAGE is read at the last checkpoint


@dataclass
class Variant:
    label: str
    layout: str
    partitions: int | None = None  # None: the store's own choice for N
    note: str = ""


@dataclass
class VariantResult:
    variant: Variant
    partitions: int | None
    points: list[dict[str, Any]] = field(default_factory=list)
    create: dict[str, Any] = field(default_factory=dict)
    get: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)


#: first in every table: densekv's choice, then the seed's JSON + SETEX baseline
HEADLINE = {"dense": "", "json": "the seed's JSON + SETEX baseline"}
SEED_LAYOUT = "zset"  # the seed's layout, also measured at its partition counts scaled to N


def plan_variants(n: int, field_ttl: bool, hash_limit: int, zset_limit: int,
                  only: tuple[str, ...] | None = None) -> tuple[list[Variant], list[str]]:
    """The layouts to measure (every layout of the registry, sessions/meta.py SPECS, the
    whole story every run) and what this server cannot measure: the HEADLINE first, then
    the seed's layout at the seed's partition counts, then the rest in registry order. A
    zset partition count that two variants share is measured once, under the first label,
    whose record note names both."""
    from densekv.sessions.meta import CAPABILITIES, SPECS, LayoutLimits

    have = {"field_ttl"} if field_ttl else set()
    limits = LayoutLimits(hash_max_listpack_entries=hash_limit, zset_max_listpack_entries=zset_limit)
    notes: list[str] = []
    specs = [s for s in SPECS if not s.missing(have)]
    notes += [f"{s.name}: not measured - this server has no " + ", ".join(CAPABILITIES[c][0] for c in s.missing(have))
              for s in SPECS if s.missing(have)]
    names = [s.name for s in specs]
    out = [Variant(name, name, note=note) for name, note in HEADLINE.items() if name in names]
    seen: dict[int, Variant] = {}
    for label, seed_p in SEED_PARTITIONS.items() if SEED_LAYOUT in names else ():
        p = scaled_partitions(seed_p, n)
        if p in seen:
            seen[p].note += f"; also the seed's {seed_p:,} partitions scaled to this N"
            continue
        seen[p] = Variant(f"{SEED_LAYOUT} {label}", SEED_LAYOUT, p,
                          f"the seed's {seed_p:,} partitions scaled by N/{SEED_RANGE:,} to {p:,}")
        out.append(seen[p])
    for spec in specs:
        if spec.name in HEADLINE:
            continue
        limit = spec.partition_limit(limits)
        if spec.name != SEED_LAYOUT or limit is None:
            out.append(Variant(spec.name, spec.name))
            continue
        auto = partition_count(n, limit, fill=DEFAULT_FILL)
        if auto in seen:
            seen[auto].note += "; also the partition count densekv's rule picks for N"
        else:
            out.append(Variant(spec.name, spec.name, auto, "partitions sized for N by densekv's rule"))
    if only:
        out = [v for v in out if v.layout in only or v.label in only]
    return out, notes


#: Reference cost of one variant (pace 1, see densekv/tools/lab/pace.py; fitted on valkey 9.1,
#: 2 cores): seconds = FIXED + CHECKPOINT x checkpoints + CREATE x sessions + GET x gets
COST_FIXED_S = 0.3
COST_CHECKPOINT_S = 0.2
COST_CREATE_S = 28e-6
COST_GET_S = 40e-6
FLOOR_N = 20_000  # the seed 1M story holds down to here (~40 sessions per partition)


def sizings(n: int, gets: int = MAX_GETS, floor: int = FLOOR_N) -> list[Sizing]:
    """Largest first: N with 5 checkpoints per decade, then 3, then smaller N (gets: a
    quarter of N at most); at the smallest N also 2 checkpoints per decade."""
    out = []
    steps = n_steps(n, min(floor, n))
    for step in steps:
        for per_decade in (5, 3) if step != steps[-1] or len(steps) == 1 else (5, 3, 2):
            trimmed = []
            if step < n:
                trimmed.append(f"N = {step:,} of {n:,}")
            if per_decade < 5:
                trimmed.append(f"{per_decade} checkpoints per decade of 5")
            some = min(step, gets, max(2000, step // 4)) if step < n else min(step, gets)
            if some < min(n, gets):
                trimmed.append(f"{some:,} gets of {min(n, gets):,}")
            out.append(Sizing(step, {"per_decade": per_decade, "gets": some}, ", ".join(trimmed)))
    return out


def variant_cost(sizing: Sizing) -> float:
    """Reference seconds of one variant at this sizing."""
    marks = len(checkpoints(sizing.n, per_decade=sizing["per_decade"]))
    return COST_FIXED_S + COST_CHECKPOINT_S * marks + COST_CREATE_S * sizing.n + COST_GET_S * sizing["gets"]


class Sessions(Experiment):
    kind = "sessions"
    title = "Sessions: bytes per session by layout as N grows"
    seed = "000"
    budget_s = 50.0

    def run(self, ctx: Context) -> Output:
        from densekv.sessions.store import facts_from_probe

        target = ctx.target
        client = target.client
        facts = facts_from_probe(client)
        out = Output(self.kind, target.name)
        opts = ctx.options

        def plan(n: int) -> tuple[list[Variant], list[str]]:
            return plan_variants(n, facts.field_ttl != "none", facts.limits.hash_max_listpack_entries,
                                 facts.limits.zset_max_listpack_entries, opts.get("layouts"))

        sizing = ctx.budget.fit(sizings(ctx.n, int(opts.get("gets", MAX_GETS))),
                                lambda s: len(plan(s.n)[0]) * variant_cost(s))
        n = sizing.n
        out.trim(sizing.trimmed)
        variants, notes = plan(n)
        out.add_notes(notes)
        marks = checkpoints(n, per_decade=int(opts.get("per_decade", sizing["per_decade"])))
        gets = min(n, int(sizing["gets"]))
        ctx.progress.start(f"{self.kind} on {target.name}", total=len(variants) * (n + gets))
        results: list[VariantResult] = []
        for variant in variants:
            result = self._measure(ctx, n, facts, variant, marks, gets)
            results.append(result)
            record = self._record(ctx, result)
            out.records.append(record)
            ctx.progress.record(record)
        target.clear()
        self._describe(out, ctx, n, results, marks, gets, facts)
        return out

    # -- measuring -----------------------------------------------------------------------
    def _measure(self, ctx: Context, n: int, facts: Any, variant: Variant, marks: list[int],
                 gets: int) -> VariantResult:
        from densekv.sessions import SessionStore
        from densekv.sessions.meta import meta_key

        client = ctx.target.client
        # the previous variant's store wrote its metadata again after the meter's flush (a
        # store re-creates what a flush took, sessions/core.py recover): it is not this one's
        client.delete(meta_key(NAMESPACE))
        store = SessionStore(client, namespace=NAMESPACE, layout=variant.layout, expected_sessions=n,
                             index_identities=False, partitions=variant.partitions, facts=facts).open()
        layout = store_layout(store, facts, n)  # key names for the encoding sample
        partitions = layout.partitions or None
        result = VariantResult(variant, partitions, limits={
            "hash_max_listpack_entries": facts.limits.hash_max_listpack_entries,
            "zset_max_listpack_entries": facts.limits.zset_max_listpack_entries,
        })
        sample_keys: dict[str, list[bytes]] = {}
        parts = layout.partitioning()
        for p in sample_partitions(parts.partitions, ENCODING_SAMPLE) if parts is not None else ():
            for kind, key in parts.structures(p).items():  # hash, and zset in the zset layout
                sample_keys.setdefault(kind, []).append(key)

        stream = Stream(identities(n))
        tokens: list[str] = []
        timing: dict[str, Any] = {"seconds": 0.0, "usec": 0.0, "count": 0}  # count stays an int
        commands: dict[str, dict[str, float]] = {}

        def load(start: int, stop: int) -> None:
            before = commandstats(client)
            t0 = time.perf_counter()
            todo = stop - start
            while todo > 0:
                chunk = stream.take(min(CREATE_BATCH, todo))
                made = store.create_many(chunk, batch=CREATE_BATCH)
                if len(tokens) < gets:
                    tokens.extend(made[: gets - len(tokens)])
                todo -= len(chunk)
                ctx.progress.advance(len(chunk))
            timing["seconds"] += time.perf_counter() - t0
            usec, per = stats_delta(before, commandstats(client))
            timing["usec"] += usec
            timing["count"] += stop - start
            for name, v in per.items():
                agg = commands.setdefault(name, {"calls": 0, "usec": 0})
                agg["calls"] += v["calls"]
                agg["usec"] += v["usec"]
            ctx.target.disconnect()  # the loader's buffers are not data

        def on_point(point: Point) -> None:
            entry: dict[str, Any] = {
                "n": point.n,
                "bytes_per_item": round(point.bytes_per_item, 3),
                "used_memory_delta": point.used_memory_delta,
                "memory_usage_bytes_per_item": None if point.memory_usage_bytes_per_item is None
                else round(point.memory_usage_bytes_per_item, 3),
            }
            if sample_keys:
                entry["encodings"] = {kind: encodings(client, keys) for kind, keys in sample_keys.items()}
            result.points.append(entry)

        meter = ctx.target.meter
        ctx.target.disconnect()  # the readings are taken with the loader's connections closed: so is the baseline
        meter.reset()  # the store's metadata, written when it opened, goes with the flush
        done = 0
        for mark in marks:
            load(done, mark)
            done = mark
            delta = meter.delta()
            usage = meter.memory_usage_per_item(mark, samples=MEMORY_SAMPLE) if mark == marks[-1] else None
            on_point(Point(mark, delta, delta / mark, usage))
        for v in commands.values():
            v["usec_per_call"] = round(v["usec"] / v["calls"], 3) if v["calls"] else 0
        result.create = op_stats(timing["count"], timing["seconds"], timing["usec"], commands)
        result.get = self._gets(ctx, store, tokens)
        return result

    def _gets(self, ctx: Context, store: Any, tokens: list[str]) -> dict[str, Any]:
        client = ctx.target.client
        before = commandstats(client)
        t0 = time.perf_counter()
        found = 0
        for i in range(0, len(tokens), GET_BATCH):
            batch = tokens[i : i + GET_BATCH]
            found += sum(1 for s in store.get_many(batch) if s is not None)
            ctx.progress.advance(len(batch))
        seconds = time.perf_counter() - t0
        usec, per = stats_delta(before, commandstats(client))
        stats = op_stats(len(tokens), seconds, usec, per)
        stats["found"] = found
        return stats

    def _record(self, ctx: Context, result: VariantResult) -> RunRecord:
        last = result.points[-1]
        notes = [result.variant.note] if result.variant.note else []
        notes += conversion_notes(result)
        return RunRecord.stamped(
            ctx.target.stamp, kind=self.kind, layout=result.variant.layout, partitions=result.partitions,
            variant=result.variant.label, n=last["n"], bytes_per_item=last["bytes_per_item"],
            used_memory_delta=last["used_memory_delta"],
            memory_usage_bytes_per_item=last["memory_usage_bytes_per_item"],
            op="get", ops_per_s=result.get["ops_per_s"], server_usec_per_call=result.get["server_usec_per_call"],
            points=result.points, ops={"create": result.create, "get": result.get}, notes=notes,
            params={"checkpoints": [p["n"] for p in result.points]},
        )

    # -- describing --------------------------------------------------------------------
    def _describe(self, out: Output, ctx: Context, n: int, results: list[VariantResult], marks: list[int],
                  gets: int, facts: Any) -> None:
        stamp = ctx.target.stamp
        lim = facts.limits
        shared = [r.variant for r in results if "also" in r.variant.note]
        out.add_method([
            (f"Sessions with integer identities (workloads.identities, fixed seed) and no payload were "
            f"created through SessionStore.create_many, {CREATE_BATCH} per pipelined round trip, without "
            f"the identity index (the seed's setup), up to N = {n:,} in {len(marks)} log steps "
            f"({', '.join(f'{m:,}' for m in marks)})."),
            "At each step densekv's Meter read INFO used_memory after the server settled (no lazy free "
            "pending, no rehashing, used_memory still) and divided the delta from the flushed baseline by "
            "the sessions stored; the loader's connection was closed first so its buffers do not count. "
            "Every layout starts from a flushed "
            + ("server." if stamp.scratch else "database (the lab's own, empty when it started).")
            + f" MEMORY USAGE of {MEMORY_SAMPLE} random keys, scaled to the key count, is read at the last "
            "step as a cross-check.",
            (f"Conversion points: at each step OBJECT ENCODING was read for up to {ENCODING_SAMPLE} "
            "partition keys (a fixed sample); a ringed point is one where some of them had left the "
            f"listpack (hash-max-listpack-entries = {lim.hash_max_listpack_entries}, "
            f"zset-max-listpack-entries = {lim.zset_max_listpack_entries} on this server)."),
            (f"The seed's 256 / 65k / 1M-partition variants are scaled to this run: seed 000 followed them "
            f"to about {SEED_RANGE:,} sessions, so each partition count is multiplied by "
            f"N / {SEED_RANGE:,} (nearest power of two). Sessions per partition at this N are then what "
            "the seed had at 40M, and its conversions fall inside this run."
            + "".join(f" {v.label}: {v.partitions:,} partitions ({v.note.split('; ', 1)[1]})." for v in shared)),
            (f"Throughput: create = sessions created per second during the loads (pipelined); get = the "
            f"store's own get() logic for {gets:,} of the created tokens, {GET_BATCH} per pipelined round "
            "trip. Server time per operation = the INFO commandstats usec delta of the phase divided by "
            "the operations (EXEC / EVALSHA time where the layout wraps its commands)."),
        ])
        if not results:
            return
        out.figures.append(FigureSpec(
            "bytes-per-session", f"Bytes per session vs N, every layout ({stamp.name} {stamp.version})",
            "used_memory delta per session at each checkpoint; a ring marks a checkpoint where sampled "
            "partitions had converted out of the listpack encoding.",
            lambda fig: _plot_curves(fig, results, stamp),
        ))
        zsets = [r for r in results if r.variant.layout == "zset"]
        if zsets:
            shown = [r for r in results if r.variant.layout == "zset" or r.variant.label in ("json", "dense")]
            out.figures.append(FigureSpec(
                "zset-partitions", zset_title(zsets, n),
                "Dotted lines: the N at which the average partition of that variant reaches "
                "zset-max-listpack-entries (ZSETs full) and hash-max-listpack-entries (HASHes full); the "
                "percentage beside a ringed point is the share of sampled partitions no longer in a listpack.",
                lambda fig: _plot_zsets(fig, shown, stamp),
            ))
        out.figures.append(FigureSpec(
            "throughput", "Create and get throughput by layout",
            "Left: operations per second from one Python process (pipelined). Right: the server's "
            "microseconds per operation (INFO commandstats), the layout's own cost.",
            lambda fig: _plot_throughput(fig, results),
        ))
        out.tables.append(TableSpec(
            f"Sessions at N = {n:,} on {stamp.name}",
            ["layout", "partitions", "bytes/session", "MEMORY USAGE B/session", "create/s", "get/s",
             "server µs/get", "conversions seen"],
            [[r.variant.label, r.partitions if r.partitions is not None else "-",
              r.points[-1]["bytes_per_item"], r.points[-1]["memory_usage_bytes_per_item"],
              r.create["ops_per_s"], r.get["ops_per_s"], r.get["server_usec_per_call"],
              "; ".join(conversion_notes(r)) or "-"] for r in results],
            "MEMORY USAGE prices keys one by one (a cross-check; it misses the main dict's buckets).",
        ))


def zset_title(zsets: list[VariantResult], n: int) -> str:
    """The zset figure's title, naming the partition counts actually measured."""
    seeds = [r for r in zsets if r.variant.label.startswith("zset seed")]
    parts = " / ".join(f"{r.partitions:,}" for r in seeds if r.partitions)
    names = " / ".join(r.variant.label.removeprefix("zset seed ") for r in seeds)
    title = f"The seed's partitioned HASH + ZSET at {parts} partitions" if seeds else "Partitioned HASH + ZSET"
    if seeds:
        title += f" (its {names} scaled to N = {n:,})"
    return title


def store_layout(store: Any, facts: Any, n: int) -> Any:
    """The layout a store uses (for its key names), rebuilt from what it explains."""
    from densekv.sessions.store import make_layout

    partitions = store.explain().get("partitions")
    return make_layout(store.layout, store.namespace, facts, n, partitions)


def conversion_notes(result: VariantResult) -> list[str]:
    """'zset: first converted at N=... (12% of sampled keys), 100% by N=...'."""
    notes = []
    for kind in ("zset", "hash"):
        first = full = None
        for point in result.points:
            share = converted_share(point.get("encodings", {}).get(kind, {}))
            if share and first is None:
                first = (point["n"], share)
            if share is not None and share >= 0.999 and full is None:
                full = point["n"]
        if first:
            text = f"{kind}: converting from N={first[0]:,} ({first[1]:.0%} of sampled)"
            if full is not None:
                text += f", all by N={full:,}"
            notes.append(text)
    return notes


# -- plots (called by the report with a matplotlib Figure) -----------------------------

COLORS = {"json": "#d62728", "packed": "#ff7f0e", "hash": "#8c564b", "zset": "#1f77b4",
          "dense": "#2ca02c", "fieldttl": "#9467bd"}
SEED_STYLES = {"zset seed 256": ("#17becf", "--"), "zset seed 65k": ("#1f77b4", "-."),
               "zset seed 1M": ("#393b79", ":")}


def _style(r: VariantResult) -> tuple[str, str]:
    return SEED_STYLES.get(r.variant.label, (COLORS.get(r.variant.layout, "#333333"), "-"))


def _conversions(r: VariantResult) -> list[tuple[int, float, float]]:
    out = []
    for p in r.points:
        shares = [converted_share(c) for c in p.get("encodings", {}).values()]
        top = max((s for s in shares if s is not None), default=0.0)
        if top > 0:
            out.append((p["n"], p["bytes_per_item"], top))
    return out


def _label(r: VariantResult) -> str:
    return r.variant.label + (f" (P={r.partitions:,})" if r.partitions else "")


def _plot_curves(fig: Any, results: list[VariantResult], stamp: Any) -> None:
    ax = fig.add_subplot(1, 1, 1)
    for r in results:
        color, ls = _style(r)
        xs = [p["n"] for p in r.points]
        ys = [p["bytes_per_item"] for p in r.points]
        ax.plot(xs, ys, ls, color=color, marker=".", label=_label(r))
        conv = _conversions(r)
        if conv:
            ax.scatter([c[0] for c in conv], [c[1] for c in conv], s=70, facecolors="none", edgecolors=color)
    log_axes(ax, "sessions stored (N)", "bytes per session (used_memory delta / N)",
             title=f"{stamp.flavor} {stamp.version}, {stamp.allocator}")


def _plot_zsets(fig: Any, results: list[VariantResult], stamp: Any) -> None:
    ax = fig.add_subplot(1, 1, 1)
    lo = min(p["n"] for r in results for p in r.points)
    hi = max(p["n"] for r in results for p in r.points)
    for r in results:
        color, ls = _style(r)
        xs = [p["n"] for p in r.points]
        ys = [p["bytes_per_item"] for p in r.points]
        ax.plot(xs, ys, ls, color=color, marker=".", label=_label(r))
        for n, y, share in _conversions(r):
            ax.scatter([n], [y], s=70, facecolors="none", edgecolors=color)
            ax.annotate(f"{share:.0%}", (n, y), textcoords="offset points", xytext=(4, 4), fontsize=8, color=color)
        if r.variant.layout == "zset" and r.partitions:
            for limit_key, what in (("zset_max_listpack_entries", "ZSETs"), ("hash_max_listpack_entries", "HASHes")):
                x = r.partitions * r.limits[limit_key]
                if lo <= x <= hi:
                    ax.axvline(x, color=color, linestyle=":", alpha=0.7)
                    ax.text(x, 0.98, f"P={r.partitions:,}: {what} full ", color=color, fontsize=8, rotation=90,
                            ha="right", va="top", transform=ax.get_xaxis_transform())
    log_axes(ax, "sessions stored (N)", "bytes per session",
             title=f"{stamp.flavor} {stamp.version}: partition count vs listpack limits")


def _plot_throughput(fig: Any, results: list[VariantResult]) -> None:
    rate_ax, usec_ax = fig.subplots(1, 2)
    labels = [r.variant.label for r in results]
    xs = list(range(len(results)))
    for ax, key, unit in ((rate_ax, "ops_per_s", "operations per second (one client, pipelined)"),
                          (usec_ax, "server_usec_per_call", "server µs per operation (commandstats)")):
        for dx, name, color in ((-0.2, "create", "#1f77b4"), (0.2, "get", "#2ca02c")):
            ys = [(r.create if name == "create" else r.get).get(key) or 0 for r in results]
            ax.bar([x + dx for x in xs], ys, 0.4, label=name, color=color)
            if key == "server_usec_per_call":
                for x, y in zip(xs, ys):
                    ax.text(x + dx, y, f"{y:.1f}", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=9)
        ax.set_ylabel(unit)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)


EXPERIMENT = Sessions()


# -- replay (benchmarks/lab_check.py) --------------------------------------------------


REPLAY_PAUSE_S = 0.3  # the lab's time at each checkpoint (settle, MEMORY USAGE sample), estimated


def replay(record: Mapping[str, Any]) -> Replay:
    """A sessions record's load, to run again on a fresh server.

    warm_up opens the same SessionStore the lab opened before its baseline (namespace,
    layout, the variant's partitions, expected N = the record's n, no identity index):
    its metadata script call starts the server's Lua engine, and the caller's flush then
    removes the metadata key, as the lab's did. load creates the same identities
    (workloads.identities, default seed) through create_many, CREATE_BATCH per call.
    Call both with the same client. Tokens are random, so each session's partition
    differs from the lab's run (the spread is the same).

    The store's clock is paced like the lab's run: session i is created at start +
    span x i / n (span = the lab's create seconds, ops.create.seconds) plus REPLAY_PAUSE_S
    for each of the lab's checkpoints passed (its meter readings and samples, whose times
    the record does not keep: an estimate). The fieldttl layout needs it: the server
    groups a hash's field expiries by time, and the same 100k sessions cost from 64 to
    69 B each on valkey 9.1 depending on how many seconds their creation spanned."""
    n = int(record["n"])
    label = str(record.get("variant") or record["layout"])
    span = float(((record.get("ops") or {}).get("create") or {}).get("seconds") or 0.0)
    marks = list((record.get("params") or {}).get("checkpoints") or checkpoints(n))
    stores: list[Any] = []
    clock = {"start": time.time(), "done": 0}

    def paced() -> float:
        done = int(clock["done"])
        passed = sum(1 for m in marks if m <= done)
        return float(clock["start"]) + span * done / max(1, n) + REPLAY_PAUSE_S * passed

    def warm_up(client: Any) -> None:
        from densekv.sessions import SessionStore
        from densekv.sessions.store import facts_from_probe

        facts = facts_from_probe(client)
        variants, _ = plan_variants(n, facts.field_ttl != "none", facts.limits.hash_max_listpack_entries,
                                    facts.limits.zset_max_listpack_entries)
        variant = next((v for v in variants if v.label == label), None)
        if variant is None:
            raise NotReplayable(f"no sessions variant {label!r} at N = {n:,} on this server")
        store = SessionStore(client, namespace=NAMESPACE, layout=variant.layout, expected_sessions=n,
                             index_identities=False, partitions=variant.partitions, facts=facts, clock=paced).open()
        layout = store_layout(store, facts, n)
        partitions = layout.partitions or None
        if partitions != record.get("partitions"):
            raise NotReplayable(f"{label}: {partitions} partitions here, {record.get('partitions')} in the record")
        stores[:] = [store]

    def load(client: Any) -> None:
        if not stores:
            warm_up(client)
        stream = Stream(identities(n))
        clock.update(start=time.time(), done=0)
        while chunk := stream.take(CREATE_BATCH):
            stores[0].create_many(chunk, batch=CREATE_BATCH)
            clock["done"] = int(clock["done"]) + len(chunk)

    return Replay(n, load, warm_up, record_settings(record))
