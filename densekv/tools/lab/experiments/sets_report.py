"""What the sets experiment says about its results: the method paragraphs, the figures
(bytes per ID, overhead, CAS rates, server µs) and the tables. Pure: it reads the Results
densekv/tools/lab/experiments/sets.py measured and draws on the matplotlib Figure the report
hands it.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import Any

from densekv.tools.lab.experiments.base import Context, FigureSpec, Output, TableSpec
from densekv.tools.lab.experiments.plotting import legend_outside, log_axes
from densekv.tools.lab.experiments.sets_plan import (
    CAS_BATCH,
    CAS_ROUNDS,
    EXACT,
    LOAD_CHUNK,
    MINIMUM,
    SWEEP_FACTOR,
    Result,
)
from densekv.tools.lab.observe import converted_share


def describe(out: Output, ctx: Context, n: int, results: list[Result], limits: Any, cas: int,
             absent: int, flat_cap: int, native: bool) -> None:
    """The experiment's method text, figures and tables, from this run's results."""
    stamp = ctx.target.stamp
    factor = int(ctx.options.get("factor", SWEEP_FACTOR))
    if n > flat_cap and any(r.job.layout == "flat" for r in results):
        out.method.append(f"flat was measured with {flat_cap:,} IDs, not {n:,}: one key per ID is slow to "
                          "load, and its bytes per ID do not depend on N beyond the main dict's "
                          "power-of-two table.")
    if any(r.job.layout == "bloom" for r in results) and not native:
        out.method.append("Native Bloom filters (RedisBloom's BF.*) are measured where the server has the "
                          "module; this one has not, so only the module-free filter is shown.")
    out.add_method([
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
        "per shard per 1,000 GETBIT/SETBIT (bloom_batch.SCRIPT_BITS; a contains call that copies a stage: "
        "1,800 GETBIT-units, bloom_batch.COPY_CALL_BITS), native = BF.MADD of 500); "
        "contains/s = contains_many of the absent IDs below (the false-positive count), so it measures misses, which stop at the first "
        "0 bit; benchmarks/bloom_speed.py compares the two modes operation by operation. "
        f"Bits per item = 8 x used_memory delta / N; false-positive rate = hits among "
        f"{absent:,} absent IDs (another fixed-seed stream); the information limit -ln f / ln^2 2 bits per "
        "item is computed with that measured f (with the filter's formula where p x absent < 100 leaves "
        "too few hits to count). Native = RedisBloom's BF.* where the server has the module."),
    ])
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
            "Module-free, each bit is one GETBIT/SETBIT from Lua (about 0.25-0.35 µs each on an idle server; "
            "BITFIELD costs the same per bit: benchmarks/bloom_speed.py --bit-ops), "
            "which is most of its time: BF.* does the same in C.",
        ))


def commands_per_item(op: dict[str, Any]) -> str:
    """The server commands one item of a phase cost, from its commandstats deltas:
    "SADD x1.00", "HSETNX x1.00 + HGET x1.00", "EVALSHA x1.00 (+ its commands)"."""
    count = op.get("count") or 0
    calls = {name: got.get("calls", 0) for name, got in (op.get("commands") or {}).items()}
    if not count or not calls:
        return "-"
    wrappers = {name for name in calls if name.split("|")[0] in ("evalsha", "eval", "fcall")}
    shown = {name: c for name, c in calls.items() if name in wrappers} or calls
    text = " + ".join(f"{name.upper()} x{c / count:.2f}" for name, c in sorted(shown.items(), key=lambda x: -x[1]))
    return text + (" (+ its commands)" if wrappers else "")


def dense_miss_sentence(results: list[Result]) -> str:
    """What the dense star on the CAS figure compares, in this run's numbers: the same
    harness for every layout (single-item flows, up to CAS_BATCH per pipelined round
    trip, the median of CAS_ROUNDS interleaved rounds), and the commands per item each
    layout's miss cost the server."""
    dense = next((r for r in results if r.job.layout == "dense"), None)
    exact = [r for r in results if r.job.layout in EXACT and r.ops.get("cas_miss", {}).get("ops_per_s")]
    others = [r.ops["cas_miss"]["ops_per_s"] for r in exact]
    if dense is None or not others:
        return ""
    miss, hit = dense.ops["cas_miss"], dense.ops["cas_hit"]
    kinds = sorted({commands_per_item(r.ops["cas_miss"]) for r in exact})
    text = (f"Like for like: every layout's rate here comes from the same harness (one single-item flow per ID, "
            f"up to {CAS_BATCH:,} per pipelined round trip, the median of {CAS_ROUNDS} interleaved rounds). "
            f"Dense (star): CAS miss {miss['ops_per_s']:,.0f}/s ({commands_per_item(miss)} per ID) against "
            f"{min(others):,.0f}-{max(others):,.0f}/s for the exact layouts (median "
            f"{statistics.median(others):,.0f}/s; {', '.join(kinds)} per ID).")
    if miss.get("server_usec_per_call") and hit.get("server_usec_per_call"):
        text += (f" On the server a dense miss takes {miss['server_usec_per_call']:.2f} µs against "
                 f"{hit['server_usec_per_call']:.2f} µs for a hit: dense sizes its partitions to sit just under "
                 "the listpack limit at N, so every new ID is inserted into a full listpack, a memmove of the "
                 "whole partition (and a conversion when one overflows); a hit only searches it.")
    return text


# -- plots (called by the report with a matplotlib Figure) -------------------------------

COLORS = {"flat": "#7f7f7f", "set": "#d62728", "hash": "#2ca02c", "zset": "#1f77b4", "dense": "#9467bd",
          "bloom": "#ff7f0e"}
_ORDER = {name: i for i, name in enumerate((*EXACT, "dense", "bloom"))}
_LIMIT_OF = {"hash": "hash_max_listpack_entries", "set": "set_max_listpack_entries",
             "zset": "zset_max_listpack_entries"}


def _series(results: list[Result], layout: str) -> list[Result]:
    return sorted((r for r in results if r.job.layout == layout), key=lambda r: r.partitions)


def _exact_and_dense(results: list[Result]) -> Iterator[tuple[str, list[Result], list[int], str]]:
    """Each exact layout and dense that has results: (layout, its results by partition
    count, their partition counts, its marker)."""
    for layout in (*EXACT, "dense"):
        rs = _series(results, layout)
        if rs:
            yield layout, rs, [r.partitions for r in rs], "*" if layout == "dense" else "o"


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
    log_axes(ax, "partitions (keys the IDs are spread over)", "bytes per ID (used_memory delta / N)", yscale="log")


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
    log_axes(ax, "partitions (rings: sampled partitions not in a listpack)",
             "overhead bytes per ID (bytes per ID - 16)", yscale="log")


def _plot_rates(fig: Any, results: list[Result]) -> None:
    axes = fig.subplots(1, 2, sharey=True)
    for ax, (hit, miss, title) in zip(axes, (("cas_hit", "cas_miss", "add (CAS)"),
                                             ("contains_hit", "contains_miss", "contains"))):
        for layout, rs, xs, marker in _exact_and_dense(results):
            ax.plot(xs, [r.ops[hit]["ops_per_s"] for r in rs], "-", marker=marker, color=COLORS[layout],
                    label=f"{layout} hit")
            ax.plot(xs, [r.ops[miss]["ops_per_s"] for r in rs], "--", marker=marker, color=COLORS[layout],
                    label=f"{layout} miss")
        log_axes(ax, "partitions", title=title, legend=None)
    axes[0].set_ylabel("items per second (one client, pipelined)")
    legend_outside(axes[1])


def _plot_usec(fig: Any, results: list[Result]) -> None:
    ax = fig.add_subplot(1, 1, 1)
    for layout, rs, xs, marker in _exact_and_dense(results):
        for op, ls in (("cas_hit", "-"), ("cas_miss", "--")):
            ys = [r.ops[op]["server_usec_per_call"] for r in rs]
            ax.plot(xs, [y if y is not None else float("nan") for y in ys], ls, marker=marker,
                    color=COLORS[layout], label=f"{layout} {op.replace('cas_', '')}")
    log_axes(ax, "partitions", "server µs per CAS call (INFO commandstats)")
