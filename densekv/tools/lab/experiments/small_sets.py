"""Experiment 3 (seed 002): the per-entry cost of one HASH vs one SET as it grows.

Seed 002 added 24-letter random strings one at a time to one key and read MEMORY USAGE
after each; the HASH (field -> "1") cost less per entry than the SET until the hash
passed hash-max-ziplist-entries, and raising that limit moved the jump. Here, three
structures grow side by side, each as KEYS keys (32 by default) grown together:
  hash    HSET key <24 letters> 1       (listpack -> hashtable past hash-max-listpack-entries)
  set     SADD key <24 letters>         (listpack -> hashtable past set-max-listpack-entries)
  intset  SADD key <integer>            (intset -> listpack/hashtable past set-max-intset-entries)
At every size on a grid (every count to 16, then ~6% steps, and limit-1/limit/limit+1 for
each limit) the lab reads MEMORY USAGE (SAMPLES 0: every element) and OBJECT ENCODING
of the keys - the seed's method - and at a few sizes the Meter's used_memory delta, the
honest figure the record carries. Each structure starts from a flushed target.

Twice: at the server's limits as they are, and at raised ones (x4). The raised run needs
CONFIG SET: done on a scratch server the lab owns; on a user's server (`--url`) only with
--allow-config (and restored after), otherwise on a scratch server the lab starts, which
the record and the report name.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from densekv.errors import NotReplayable
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
from densekv.tools.lab.observe import commandstats, stats_delta
from densekv.tools.lab.results import RunRecord, op_stats
from densekv.tools.lab.sizing import Sizing, sizes_around
from densekv.tools.lab.target import Target
from densekv.tools.lab.workloads import ints, words24

KEYS = 32
MEMORY_SAMPLE = 8  # keys whose MEMORY USAGE is read at every size
RAISE = 4
#: reference seconds (pace 1, see densekv/tools/lab/pace.py; fitted on valkey 9.1, 2 cores) of
#: one structure at one config: FIXED (flush, meter readings, the grid's MEMORY USAGE
#: reads) + ENTRY x keys x entries; a scratch server for the raised limits costs SCRATCH
COST_FIXED_S = 0.8
COST_ENTRY_S = 6.5e-6
COST_SCRATCH_S = 0.8


def sizings(keys: int = KEYS) -> list[Sizing]:
    """Largest first: `keys` keys per structure, then half, then a quarter (at least 8)."""
    steps = list(dict.fromkeys(max(min(keys, 8), keys // d) for d in (1, 2, 4)))
    return [Sizing(k, {"keys": k}, "" if k == keys else f"{k} keys per structure of {keys}") for k in steps]


def run_cost(keys: int, top: int, structures: int, scratch: int) -> float:
    """Reference seconds of the whole experiment (both configs)."""
    return 2 * structures * (COST_FIXED_S + COST_ENTRY_S * keys * top) + COST_SCRATCH_S * scratch

#: structure -> (command, the CONFIG limits that govern its encoding)
STRUCTURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "hash": ("HSET", ("hash-max-listpack-entries",)),
    "set": ("SADD", ("set-max-listpack-entries",)),
    "intset": ("SADD", ("set-max-intset-entries", "set-max-listpack-entries")),
}


@dataclass
class Series:
    structure: str
    config: str  # "default" | "raised"
    limits: dict[str, int]
    server: str
    sizes: list[int] = field(default_factory=list)
    per_entry: list[float] = field(default_factory=list)  # MEMORY USAGE / entries
    encodings: list[str] = field(default_factory=list)
    meter: list[tuple[int, float]] = field(default_factory=list)  # (entries, used_memory B/entry)
    ops: dict[str, Any] = field(default_factory=dict)


def _limit(target: Target, name: str) -> int | None:
    return target.stamp.listpack.get(name.replace("-", "_"))


def _items(structure: str, keys: int, top: int) -> Iterator[Any]:
    seed = {"hash": 1, "set": 1, "intset": 2}[structure]  # hash and set hold the same strings
    return ints(keys * top, seed) if structure == "intset" else words24(keys * top, seed)


class SmallSets(Experiment):
    kind = "small_sets"
    not_on_cluster = ("it prices single keys (one small structure each; a key lives on one master, so a cluster "
                      "changes nothing it measures) and its raised-limit curves need CONFIG SET, which the lab "
                      "does not do on its cluster")
    title = "Small sets: one HASH vs one SET as it grows past the listpack limits"
    seed = "002"
    budget_s = 12.0

    def run(self, ctx: Context) -> Output:
        target = ctx.target
        out = Output(self.kind, target.name)
        defaults = {name: v for name in ("hash-max-listpack-entries", "set-max-listpack-entries",
                                         "set-max-intset-entries") if (v := _limit(target, name))}
        raised = {k: v * RAISE for k, v in defaults.items()}
        top = int(ctx.options.get("top", 2 * max(raised["hash-max-listpack-entries"],
                                                 raised.get("set-max-intset-entries", 0))))
        structures = [s for s in STRUCTURES if s in ctx.options.get("structures", STRUCTURES)]
        scratch = 0 if target.may_configure else 1
        sizing = ctx.budget.fit(sizings(int(ctx.options.get("keys", KEYS))),
                                lambda z: run_cost(z["keys"], top, len(structures), scratch))
        keys = int(sizing["keys"])
        out.trim(sizing.trimmed)
        ctx.progress.start(f"{self.kind} on {target.name}", total=2 * len(structures) * keys * top)
        series: list[Series] = []
        grids = {"default": sorted(set(defaults.values())), "raised": sorted(set(raised.values()))}
        for config_name, settings in (("default", None), ("raised", raised)):
            if settings is None:
                series += self._config(ctx, target, config_name, structures, keys, top, grids[config_name], out)
                continue
            with target.with_config(settings) as where:
                if where is not target:
                    out.notes.append(
                        f"raised limits: measured on a scratch {where.stamp.name} {where.stamp.version} the lab "
                        "started, not on your server: measuring them there needs --allow-config (CONFIG SET, "
                        "every value restored after)"
                    )
                series += self._config(ctx, where, config_name, structures, keys, top, grids[config_name], out)
        target.clear()
        self._describe(out, ctx, series, keys, top, defaults, raised)
        return out

    def _config(self, ctx: Context, target: Target, config: str, structures: list[str], keys: int,
                top: int, every_limit: list[int], out: Output) -> list[Series]:
        found = []
        for structure in structures:
            limits = {n: v for n in STRUCTURES[structure][1] if (v := _limit(target, n))}
            s = self._grow(ctx, target, structure, config, limits, keys, top, every_limit)
            found.append(s)
            record = self._record(target, s, keys, top, _limit(target, "hash-max-listpack-entries"))
            out.records.append(record)
            ctx.progress.record(record)
        return found

    def _grow(self, ctx: Context, target: Target, structure: str, config: str, limits: dict[str, int],
              keys: int, top: int, every_limit: list[int]) -> Series:
        """One structure grown on `keys` keys to `top` entries; the grid has every count
        around each limit in force (not only this structure's), so the structures can be
        compared at any of them."""
        client = target.client
        cmd = STRUCTURES[structure][0]
        names = [f"lab:ss:{structure}:{i}".encode() for i in range(keys)]
        watched = names[:MEMORY_SAMPLE]
        grid = sizes_around(sorted(set(limits.values()) | set(every_limit)), top)
        meter_at = {s for v in limits.values() for s in (v, v + 1) if s <= top} | {top}
        series = Series(structure, config, limits, target.stamp.name)
        items = _items(structure, keys, top)
        meter = target.meter
        meter.reset()
        seconds, usec, count = 0.0, 0.0, 0
        per_cmd: dict[str, dict[str, float]] = {}
        done = 0
        for size in grid:
            before = commandstats(client)
            t0 = time.perf_counter()
            pipe = client.pipeline(transaction=False)
            for _ in range(size - done):
                for key in names:
                    item = next(items)
                    if cmd == "HSET":
                        pipe.execute_command("HSET", key, item, 1)
                    else:
                        pipe.execute_command("SADD", key, item)
            pipe.execute()
            seconds += time.perf_counter() - t0
            du, per = stats_delta(before, commandstats(client))
            usec += du
            count += (size - done) * keys
            for name, v in per.items():
                agg = per_cmd.setdefault(name, {"calls": 0, "usec": 0})
                agg["calls"] += v["calls"]
                agg["usec"] += v["usec"]
            ctx.progress.advance((size - done) * keys)
            done = size
            pipe = client.pipeline(transaction=False)
            for key in watched:
                pipe.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0")
            pipe.object("encoding", watched[0])
            *usage, encoding = pipe.execute()
            series.sizes.append(size)
            series.per_entry.append(sum(int(u) for u in usage) / len(usage) / size)
            series.encodings.append(encoding.decode() if isinstance(encoding, bytes) else str(encoding))
            if size in meter_at:
                target.disconnect()  # the loader's buffers are not data
                series.meter.append((size, meter.delta() / (keys * size)))
        for v in per_cmd.values():
            v["usec_per_call"] = round(v["usec"] / v["calls"], 3) if v["calls"] else 0
        series.ops = op_stats(count, seconds, usec, per_cmd)
        return series

    def _record(self, target: Target, s: Series, keys: int, top: int, at: int | None = None) -> RunRecord:
        """`at`: the size the terminal row and the summary both show (the HASH listpack
        limit in force, where the seed compares HASH and SET): MEMORY USAGE per entry there."""
        meter = dict(s.meter)
        points = []
        for size, per_entry, enc in zip(s.sizes, s.per_entry, s.encodings):
            points.append({"n": size, "bytes_per_item": None if size not in meter else round(meter[size], 3),
                           "memory_usage_bytes_per_item": round(per_entry, 3), "encodings": {s.structure: {enc: 1}}})
        ops = s.ops
        return RunRecord.stamped(
            target.stamp, kind=self.kind, layout=s.structure, partitions=keys, variant=f"{s.structure} ({s.config} limits)",
            n=keys * top, bytes_per_item=round(meter[top], 3), used_memory_delta=None,
            memory_usage_bytes_per_item=round(s.per_entry[-1], 3), op="add", ops_per_s=ops["ops_per_s"],
            server_usec_per_call=ops["server_usec_per_call"], points=points, ops={"add": ops},
            params={"keys": keys, "entries_per_key": top, "limits": s.limits, "config": s.config,
                    "element": "integer below 2^31" if s.structure == "intset" else "24 random lowercase letters",
                    **({"shown": {"n": at, "bytes_per_item": round(s.per_entry[s.sizes.index(at)], 3),
                                  "label": f"at {at:,}/key, MEMORY USAGE"}} if at in s.sizes else {})},
            notes=[f"encoding {a} -> {b} between {x} and {y} entries" for (x, a), (y, b)
                   in zip(zip(s.sizes, s.encodings), zip(s.sizes[1:], s.encodings[1:])) if a != b],
        )

    def _describe(self, out: Output, ctx: Context, series: list[Series], keys: int, top: int,
                  defaults: dict[str, int], raised: dict[str, int]) -> None:
        stamp = ctx.target.stamp
        out.add_method([
            (f"{keys} keys per structure grown together from 1 to {top:,} entries each: HASH fields and SET "
             "members are 24 random lowercase letters (the seed's entries; workloads.words24, fixed seed), "
             "the HASH value is \"1\"; the intset series adds random integers below 2^31."),
            (f"At every size of the grid (every count to 16, then steps of about 6%, and each limit in force "
             f"-1, +0, +1) MEMORY USAGE (SAMPLES 0) of {MEMORY_SAMPLE} of the keys was read and "
             "divided by the entries per key (the seed's method; it includes each key's own overhead), and "
             "OBJECT ENCODING of one key. At the limits (limit and limit+1) and at the largest size the Meter's "
             "used_memory delta from the flushed start was divided by keys x entries: that is the record's "
             "bytes_per_item and the ringed points on the figure."),
            "Default limits: " + ", ".join(f"{k} = {v}" for k, v in defaults.items()) + f" (as {stamp.name} has them). "
            "Raised limits (x4): " + ", ".join(f"{k} = {v}" for k, v in raised.items()) + ".",
        ])
        if not series:
            return
        out.figures.append(FigureSpec(
            "per-entry", f"Bytes per entry of one HASH vs one SET ({stamp.name} {stamp.version})",
            "Lines: MEMORY USAGE / entries at every size; rings: used_memory delta / entries (the Meter). "
            "Dotted verticals: the limits in force. Left: default limits; right: raised x4.",
            lambda fig: _plot_per_entry(fig, series),
        ))
        out.figures.append(FigureSpec(
            "marginal", "Cost of the next entry (the seed's first derivative)",
            "Change in MEMORY USAGE per added entry between consecutive sizes of the grid; the spikes are "
            "the conversions out of the compact encodings and the hashtable's doublings.",
            lambda fig: _plot_marginal(fig, series),
        ))
        rows = []
        for s in series:
            meter = dict(s.meter)
            for size in sorted(meter):
                rows.append([s.structure, s.config, s.server, size, round(meter[size], 2),
                             s.encodings[s.sizes.index(size)]])
        out.tables.append(TableSpec(
            "Bytes per entry (used_memory delta / entries) at the limits and at the top",
            ["structure", "limits", "server", "entries per key", "bytes/entry", "encoding"], rows,
        ))


_COLORS = {"hash": "#2ca02c", "set": "#d62728", "intset": "#1f77b4"}


def _plot_per_entry(fig: Any, series: list[Series]) -> None:
    configs = [c for c in ("default", "raised") if any(s.config == c for s in series)]
    axes = fig.subplots(1, len(configs), sharey=True, squeeze=False)[0]
    for ax, config in zip(axes, configs):
        drawn: set[int] = set()
        for s in (s for s in series if s.config == config):
            color = _COLORS[s.structure]
            ax.plot(s.sizes, s.per_entry, color=color, label=f"{s.structure}")
            ax.scatter([m[0] for m in s.meter], [m[1] for m in s.meter], s=40, facecolors="none", edgecolors=color)
            for name, limit in s.limits.items():
                if limit not in drawn:
                    drawn.add(limit)
                    ax.axvline(limit, color="#777777", linestyle=":", alpha=0.7)
                    ax.text(limit, 0.98, name.replace("-max-", " ").replace("-entries", " limit "), rotation=90,
                            fontsize=8, va="top", ha="right", transform=ax.get_xaxis_transform())
        log_axes(ax, "entries per key", title=f"{config} limits", legend="inside")
    axes[0].set_ylabel("bytes per entry")


def _plot_marginal(fig: Any, series: list[Series]) -> None:
    configs = [c for c in ("default", "raised") if any(s.config == c for s in series)]
    axes = fig.subplots(1, len(configs), sharey=True, squeeze=False)[0]
    for ax, config in zip(axes, configs):
        for s in (s for s in series if s.config == config):
            totals = [pe * size for pe, size in zip(s.per_entry, s.sizes)]
            xs, ys = [], []
            for (a, ta), (b, tb) in zip(zip(s.sizes, totals), zip(s.sizes[1:], totals[1:])):
                xs.append(b)
                ys.append((tb - ta) / (b - a))
            ax.plot(xs, ys, color=_COLORS[s.structure], label=s.structure, linewidth=0.9)
        log_axes(ax, "entries per key", title=f"{config} limits", yscale="symlog", legend="inside")
    axes[0].set_ylabel("bytes added per entry")


EXPERIMENT = SmallSets()


# -- replay (benchmarks/lab_check.py) --------------------------------------------------

REPLAY_PIPELINE = 1000  # commands per round trip of a replayed load


def replay(record: Mapping[str, Any]) -> Replay:
    """A small_sets record's load, to run again on a fresh server started with the
    record's limits (the raised ones for a raised-limits record).

    The lab grows its keys together, size by size of its grid, with readings in between;
    the replay sends the same commands in the same order (entry j of the stream goes to
    key j mod keys: the grid only decides where the lab paused) in plain pipelines.
    Nothing to warm up: the experiment sends no scripts."""
    params = dict(record.get("params") or {})
    structure = str(record["layout"])
    if structure not in STRUCTURES:
        raise NotReplayable(f"unknown small_sets structure {structure!r}")
    try:
        keys, top = int(params["keys"]), int(params["entries_per_key"])
    except KeyError as exc:
        raise NotReplayable(f"small_sets record without params.{exc.args[0]}") from None
    cmd = STRUCTURES[structure][0]
    names = [f"lab:ss:{structure}:{i}".encode() for i in range(keys)]

    def load(client: Any) -> None:
        items = _items(structure, keys, top)
        pipe = client.pipeline(transaction=False)
        for j in range(keys * top):
            item = next(items)
            if cmd == "HSET":
                pipe.hset(names[j % keys], item, 1)
            else:
                pipe.sadd(names[j % keys], item)
            if len(pipe) >= REPLAY_PIPELINE:
                pipe.execute()
        pipe.execute()

    return Replay(keys * top, load, settings=record_settings(record))
