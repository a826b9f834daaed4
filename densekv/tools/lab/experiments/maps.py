"""Experiment 4 (seed 004, "Zip'em ALL"): plain SET vs hash buckets vs key zipping vs codecs.

Seed 004 stored the same key/value pairs four ways - plain SET, plain SET with zipped
keys, key/value pairs as fields of hashes (the official "hash abstraction"), and each of
those with values compressed - for integers, short strings, HTML pieces and JSON objects,
and compared the memory. Here the same comparison drives densekv.maps.CompactMap:

  case       ids (key allBooksBelongToUser:<id>, the seed's key)   values (workloads.py)
  int_holey  distinct random ids spread over 0..10^8 (holey)        random ints < 2^31
  int_seq    0..n-1                                                 random ints < 2^31
  str8       holey ids                                              8-char strings
  html       0..n-1                                                 HTML-like text, 200-1500 B
  json       0..n-1                                                 JSON objects of one schema

  configuration  what is stored
  plain          SET <key> <value as text>
  plain zipped   SET <zipped key> <value>: key crumbs aliased (allBooksBelongToUser -> b)
                 and the id in base62 (densekv.maps.zipkeys), values as they are
  map <codec>    CompactMap(codec=...): items as fields of listpack hash buckets, every
                 value with its one-byte codec header; codecs int / raw / msgpack (the
                 JSON parsed, stored as msgpack) / zlib / lz4 / zstd with a dictionary
                 trained on other values of the same generator (stored in the server,
                 so its bytes count) / zstd without one

Each configuration starts from a flushed target; the items are streamed in (fixed seeds,
bounded client memory) through one pipelined round trip per LOAD_BATCH items, the loader's
connection is closed, and densekv's Meter reads the used_memory delta. Then OPS gets and
OPS sets (the same values again) of a fixed sample of the keys, BATCH per round trip:
client throughput, and server time per operation from INFO commandstats deltas (never
CONFIG RESETSTAT: observe.py). A codec whose package is missing is skipped with a note.

Item counts per case are fractions of N (text and JSON cost far more to load than
integers, and this experiment has about 12 s of the default lab's 3 minutes): see
SHARES. Every configuration of PLAN is measured in every run; on a slow machine the
default run loads fewer items per case (sizings) rather than leaving one out.
Where the parts live: the cases, configurations and how each stores an item in
maps_cases.py, the figures in maps_plots.py; this module measures and describes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from densekv.tools.lab.experiments.base import Context, Experiment, FigureSpec, Output, TableSpec
from densekv.tools.lab.experiments.maps_cases import (
    ALIASES,
    BATCH,
    CASES,
    ENCODING_SAMPLE,
    LOAD_BATCH,
    MEMORY_SAMPLE,
    NAMESPACE,
    OPS,
    PLAN,
    PREFIX,
    SHARES,
    Config,
    Result,
    as_read,
    codec_available,
    config_cost,
    dataset,
    items_for,
    open_map,
    replay,
    sizings,
    stored_key,
    stored_value,
    warm_up,
)
from densekv.tools.lab.experiments.maps_plots import by_case, plot_bytes, plot_ops
from densekv.tools.lab.observe import commandstats, encodings, stats_delta
from densekv.tools.lab.results import RunRecord, op_stats
from densekv.tools.lab.sizing import Sizing
from densekv.tools.lab.workloads import chunks
from densekv.tools.measure import Point

__all__ = ["CASES", "EXPERIMENT", "NAMESPACE", "PLAN", "Config", "Maps", "config_cost", "dataset",
           "items_for", "replay", "sizings"]


class Maps(Experiment):
    kind = "maps"
    title = "Maps: plain SET vs hash buckets vs key zipping vs codecs"
    seed = "004"
    budget_s = 12.0

    def run(self, ctx: Context) -> Output:
        target = ctx.target
        out = Output(self.kind, target.name)
        cases = tuple(ctx.options.get("cases", CASES))
        wanted = ctx.options.get("configs")  # short names ("map int") or labels ("json · map lz4")
        plan = [c for c in PLAN if c.case in cases and (not wanted or c.short in wanted or c.label in wanted)]
        missing: dict[str, str] = {}
        for c in plan:
            if c.codec and c.codec not in missing and (why := codec_available(c.codec)):
                missing[c.codec] = why
        runnable = [c for c in plan if c.codec not in missing]
        if missing:
            out.notes.append("not measured: " + "; ".join(f"codec {codec} - {why}" for codec, why in missing.items()))
        override = ctx.options.get("items")

        def sizes_at(z: Sizing) -> dict[str, int]:
            return {c: items_for(c, ctx.n, override, z["scale_pct"] / 100) for c in CASES}

        sizing = ctx.budget.fit(sizings(ctx.n, int(ctx.options.get("ops", OPS))),
                                lambda z: sum(config_cost(c, sizes_at(z)[c.case], z["ops"]) for c in runnable))
        sizes, ops = sizes_at(sizing), int(sizing["ops"])
        out.trim(sizing.trimmed)
        ctx.progress.start(f"{self.kind} on {target.name}", total=sum(sizes[c.case] for c in runnable))
        self._warm_up(ctx, zstd="zstd" not in missing)
        results: list[Result] = []
        for config in runnable:
            result = self._measure(ctx, config, sizes[config.case], min(ops, sizes[config.case]))
            results.append(result)
            record = self._record(ctx, result)
            out.records.append(record)
            ctx.progress.record(record)
        target.clear()
        self._describe(out, ctx, results, sizes, ops)
        return out

    # -- measuring -----------------------------------------------------------------------
    def _measure(self, ctx: Context, config: Config, n: int, ops: int) -> Result:
        from densekv.maps.zipkeys import Aliases

        client = ctx.target.client
        result = Result(config, n)
        aliases = Aliases(ALIASES)
        every = max(1, n // ops) if ops else 0
        sample: list[tuple[str, Any]] = []  # the keys the ops phase reads and writes
        the_map: list[Any] = []
        value_bytes = [0]

        def key_of(key: str) -> str:
            return stored_key(config, key, aliases)

        def value_of(v: Any) -> Any:
            return stored_value(config, v)

        def load() -> None:
            m = None
            if config.layout == "map":  # made (and its dictionary trained) after the flush:
                m = self._open_map(ctx, config, n)  # its meta and dictionary count
                the_map.append(m)
            commands = commandstats(client)
            t0 = time.perf_counter()
            pipe_count = 0
            for chunk in chunks(dataset(config.case, n), LOAD_BATCH):
                if m is not None:
                    b = m.batch()
                    for k, v in chunk:
                        b.set(k, value_of(v))
                    b.execute()
                else:
                    pipe = client.pipeline(transaction=False)
                    for k, v in chunk:
                        pipe.set(key_of(k), value_of(v))
                    pipe.execute()
                for k, v in chunk:
                    value_bytes[0] += len(str(v).encode())
                    if every and pipe_count % every == 0 and len(sample) < ops:
                        sample.append((k, v))
                    pipe_count += 1
                ctx.progress.advance(len(chunk))
            seconds = time.perf_counter() - t0
            usec, per = stats_delta(commands, commandstats(client))
            result.ops["load"] = op_stats(n, seconds, _server_usec(usec, per), per)
            ctx.target.disconnect()  # the loader's buffers are not data

        meter = ctx.target.meter
        t_start = time.perf_counter()
        ctx.target.disconnect()  # no buffers of the last phase in the baseline
        base = meter.reset()
        t_reset = time.perf_counter()
        load()
        t_load = time.perf_counter()
        delta = meter.reading().minus(base)  # net of client buffers (Reading.minus)
        t_read = time.perf_counter()
        result.measured(Point(n, delta, delta / n, meter.memory_usage_per_item(n, samples=MEMORY_SAMPLE)))
        t_mu = time.perf_counter()
        result.params["timing"] = {"reset": round(t_reset - t_start, 3), "load": round(t_load - t_reset, 3),
                                   "read": round(t_read - t_load, 3), "memory_usage": round(t_mu - t_read, 3)}
        if config.layout == "map":
            m = the_map[0]
            info = m.explain()
            result.params.update(buckets=info["buckets"], codec=info["codec"],
                                 hash_max_listpack_value=info["hash_max_listpack_value"])
            result.params["bucket_encodings"] = encodings(client, list(_first(m.buckets(), ENCODING_SAMPLE)))
            result.params["out_of_line_keys"] = _count(client, f"{NAMESPACE}:o*".encode())
            if result.params["bucket_encodings"].get("hashtable"):
                result.notes.append("some sampled buckets are hashtables, not listpacks")
        result.params.update(case=config.case, items=n, layout=config.layout, codec_name=config.codec,
                             value_bytes_mean=round(value_bytes[0] / n, 1),
                             key_example=key_of(sample[0][0]) if sample else None)
        t_ops = time.perf_counter()
        self._ops(ctx, config, result, sample, the_map[0] if the_map else None, key_of, value_of)
        result.params["timing"]["ops"] = round(time.perf_counter() - t_ops, 3)
        result.params["timing"]["total"] = round(time.perf_counter() - t_start, 3)
        return result

    def _warm_up(self, ctx: Context, zstd: bool) -> None:
        """The server's first script call starts its Lua engine (about 256 KB of used_memory
        on valkey 9.1) and caches the script, and neither goes with a flush: a one-time cost
        per server that would land on whichever configuration came first. Pay it here."""
        warm_up(ctx.target.client, zstd)
        ctx.target.clear()

    def _open_map(self, ctx: Context, config: Config, n: int) -> Any:
        return open_map(ctx.target.client, config, n)

    def _ops(self, ctx: Context, config: Config, result: Result, sample: list[tuple[str, Any]], m: Any,
             key_of: Callable[[str], str], value_of: Callable[[Any], Any]) -> None:
        client = ctx.target.client
        for op in ("get", "set"):
            before = commandstats(client)
            t0 = time.perf_counter()
            unexpected = 0
            for lo in range(0, len(sample), BATCH):
                part = sample[lo : lo + BATCH]
                if m is not None:
                    b = m.batch()
                    for k, v in part:
                        b.get(k) if op == "get" else b.set(k, value_of(v))
                    got = b.execute()
                else:
                    pipe = client.pipeline(transaction=False)
                    for k, v in part:
                        pipe.get(key_of(k)) if op == "get" else pipe.set(key_of(k), value_of(v))
                    got = pipe.execute()
                if op == "get":
                    unexpected += sum(1 for (k, v), g in zip(part, got) if as_read(g, config) != v)
            seconds = time.perf_counter() - t0
            usec, per = stats_delta(before, commandstats(client))
            stats = op_stats(len(sample), seconds, _server_usec(usec, per), per)
            if op == "get":
                stats["unexpected"] = unexpected
                if unexpected:
                    result.notes.append(f"{unexpected} of {len(sample)} gets read back another value")
            result.ops[op] = stats

    def _record(self, ctx: Context, result: Result) -> RunRecord:
        c, point = result.config, result.point
        assert point is not None
        get = result.ops.get("get", {})
        return RunRecord.stamped(
            ctx.target.stamp, kind=self.kind, layout=c.layout, variant=c.label,
            partitions=result.params.get("buckets"), n=result.n,
            bytes_per_item=round(point.bytes_per_item, 3), used_memory_delta=point.used_memory_delta,
            memory_usage_bytes_per_item=None if point.memory_usage_bytes_per_item is None
            else round(point.memory_usage_bytes_per_item, 3),
            op="get", ops_per_s=get.get("ops_per_s"), server_usec_per_call=get.get("server_usec_per_call"),
            points=[{"n": point.n, "bytes_per_item": round(point.bytes_per_item, 3),
                     "used_memory_delta": point.used_memory_delta,
                     "memory_usage_bytes_per_item": None if point.memory_usage_bytes_per_item is None
                     else round(point.memory_usage_bytes_per_item, 3),
                     **({"encodings": {"bucket": result.params["bucket_encodings"]}}
                        if "bucket_encodings" in result.params else {})}],
            ops=result.ops, params=result.params, notes=result.notes,
        )

    # -- describing --------------------------------------------------------------------
    def _describe(self, out: Output, ctx: Context, results: list[Result], sizes: dict[str, int], ops: int) -> None:
        stamp = ctx.target.stamp
        out.add_method([
            "Seed 004's comparison, on this server: the same key/value pairs stored as plain SET, as plain "
            f"SET with zipped keys ({PREFIX}<id> -> b:#<base62 id>), and as a densekv CompactMap (fields of "
            "listpack hash buckets, every value with a one-byte codec header) with each codec. Keys are the "
            f"seed's ({PREFIX}<id>); data from densekv/tools/lab/workloads.py with fixed seeds: "
            + "; ".join(f"{c.name}: {c.describe}, {sizes[c.name]:,} items" for c in CASES.values()) + ".",
            (f"Fewer items for text and JSON than for integers (N / {SHARES['html']} and N / {SHARES['json']}, "
            f"integers and short strings N / {SHARES['int_holey']}): they cost far more to load, and this "
            f"experiment has about {self.budget_s:.0f} s of the default lab. The maps are sized for the items "
            "they hold (expected = items), so each figure is the steady state at that size."),
            "Each configuration starts from a flushed "
            + ("server" if stamp.scratch else "database")
            + f"; items are streamed in, {LOAD_BATCH} per pipelined round trip, the loader's connection is "
            "closed and densekv's Meter reads the used_memory delta once the server is quiet. Bytes per item "
            "= delta / items, less the change in the measuring connection's own buffers (the map's meta key "
            "and zstd dictionary, stored in the server, are included). The server's one-time Lua start-up "
            "(its first script call, not undone by a flush) is paid before the first configuration.",
            (f"Throughput: {ops:,} gets, then {ops:,} sets of the same values, of a fixed sample of the keys, "
            f"{BATCH} per pipelined round trip (CompactMap.batch() for the maps); every get is checked "
            "against the value written. Server time per operation = INFO commandstats usec delta of the phase "
            "/ operations (an out-of-line map write is MULTI/SET/HSET/EXEC: EXEC's time counts for it, and "
            "the HSETs outside a transaction are added at HSET's mean time)."),
        ])
        if not results:
            return
        out.figures.append(FigureSpec(
            "bytes-per-item", f"Bytes per item by case and configuration ({stamp.name} {stamp.version})",
            "used_memory delta / items; one panel per case; the number on a bar is how many times less than "
            "plain SET of the same case.",
            lambda fig: plot_bytes(fig, results), size=(12, 5.5),
        ))
        out.figures.append(FigureSpec(
            "throughput", "Get and set throughput by case and configuration",
            "Top: operations per second from one Python process (pipelined). Bottom: the server's microseconds "
            "per operation from INFO commandstats. Bars grouped by case.",
            lambda fig: plot_ops(fig, results), size=(12, 7),
        ))
        plain = {r.config.case: r.point.bytes_per_item for r in results
                 if r.config.layout == "plain" and r.point is not None}
        rows = []
        for r in by_case(results):
            assert r.point is not None
            base = plain.get(r.config.case)
            rows.append([r.config.case, r.config.short, r.n, round(r.point.bytes_per_item, 2),
                         round(base / r.point.bytes_per_item, 2) if base and r.point.bytes_per_item > 0 else "-",
                         r.params.get("buckets") or "-", r.ops["get"]["ops_per_s"], r.ops["set"]["ops_per_s"],
                         r.ops["get"]["server_usec_per_call"], r.ops["set"]["server_usec_per_call"]])
        out.tables.append(TableSpec(
            f"Maps on {stamp.name}", ["case", "configuration", "items", "bytes/item", "x less than plain",
                                      "buckets", "get/s", "set/s", "server µs/get", "server µs/set"], rows,
            "x less than plain: plain SET's bytes per item of the same case / this configuration's.",
        ))


def _server_usec(total: float, per: dict[str, dict[str, float]]) -> float:
    """stats_delta's total, plus the HSETs sent outside a transaction when a phase mixes
    out-of-line writes (MULTI/EXEC around SET + HSET) with plain HSETs."""
    if "exec" not in per or "hset" not in per:
        return total
    outside = per["hset"]["calls"] - per["exec"]["calls"]
    return total + max(0.0, outside) * per["hset"]["usec_per_call"]


def _first(it: Iterator[bytes], k: int) -> Iterator[bytes]:
    for i, x in enumerate(it):
        if i >= k:
            return
        yield x


def _count(client: Any, pattern: bytes) -> int:
    return sum(1 for _ in client.scan_iter(match=pattern, count=1000))


EXPERIMENT = Maps()
