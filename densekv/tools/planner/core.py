"""`plan()`: layout, partition count and config for a workload, with predicted bytes.

Deciding, not doing: the planner measures samples on servers it owns (scratch servers,
or an empty database of the user's), fits the cost model (densekv/tools/planner/model.py) per
candidate layout, predicts the full workload with it and recommends the smallest layout
that works under the server's current config. Config changes are advice only (`config`):
the planner never sets anything on a user's server. Invariants:
  * bad input raises PlannerError before any server is touched;
  * every predicted figure comes from a calibration measured on a server of the planned
    kind (or, for a URL whose database is not empty, an embedded Valkey with the same
    listpack settings - the recommendation says so), cached per server kind, settings
    and layout shape (densekv/tools/planner/cache.py);
  * `verify=True` loads the planned layout (the whole workload up to 1M items, else as
    many full partitions as hold 1M items, scaled) and reports predicted vs measured;
  * the figures beside a configuration are the figures with that configuration: `config`
    holds only what the recommended layout needs, and each piece of `config_advice` (an
    optional change) carries its own layout, partitions, bytes per item and saving;
  * `progress` (optional) hears what the planner is doing and how many of the items it
    will load are loaded, from before the first server is started (the CLI shows it).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from densekv.connect import redact
from densekv.errors import PlannerError
from densekv.sessions.meta import SPECS
from densekv.tools.planner import cache
from densekv.tools.planner.cluster import check_masters, read_ranges, spread
from densekv.tools.planner.kinds import KINDS, Candidate, Workload
from densekv.tools.planner.listpack import entry_size
from densekv.tools.planner.model import Calibration, Container, Reading, calibrate, predict_total
from densekv.tools.planner.payloads import Sampled, read_sample, sampled
from densekv.tools.planner.site import Site, Target, open_target, site

SAMPLE_PARTITIONS = 256  # partitions a calibration sample fills (at most)
SAMPLE_ITEMS = 120_000  # items a calibration sample holds (at most)
MAX_ROUNDS = 3  # a sample under ROUND_ITEMS items is loaded up to this many times
ROUND_ITEMS = 60_000
VERIFY_REPEATS = 3  # --verify loads a workload under ROUND_ITEMS this many times
WARM_ITEMS = 20_000  # items loaded (and flushed) before a baseline: the largest batch a loader sends
#: items the public API loads (and flushes) before --verify's baseline: past AUTO_TRAIN (2000),
#: so that a session store has trained and stored its dictionary once (warm_public)
PUBLIC_WARM_ITEMS = 3000
FULL_VERIFY = 1_000_000  # --verify loads the whole workload up to this many items
WORTH = 0.05  # config advice only for a predicted saving of at least 5%
MAX_ITEMS = 10**10
#: which listpack limit sizes the partitions of each layout (for the raise-the-limit advice)
#: which structures' listpack entry limits bound one partition: the session layouts' from their
#: registry (densekv/sessions/meta.SPECS), the sets' and maps' own
SIZED_BY = {**{s.name: s.sized_by for s in SPECS if s.partitioned},
            "dense-set": ("set",), "dense-hash": ("hash",), "buckets": ("hash",)}


#: progress(what it is doing, items loaded so far, items it will load in all)
ProgressFn = Callable[[str, int, int], None]


class Tracker:
    """Counts the items the planner loads for a `progress` callback (None: silent)."""

    def __init__(self, report: ProgressFn | None) -> None:
        self.report = report
        self.what = ""
        self.done = 0
        self.total = 0

    def _emit(self) -> None:
        if self.report is not None:
            self.report(self.what, self.done, max(self.total, self.done))

    def say(self, what: str) -> None:
        self.what = what
        self._emit()

    def plan_for(self, items: int) -> None:
        """More items to load (told with the next step)."""
        self.total += items

    def advance(self, items: int) -> None:
        self.done += items
        self._emit()

    def skip(self, items: int) -> None:
        """Items planned for but not loaded after all (a cached calibration)."""
        self.total -= items
        self._emit()


SILENT = Tracker(None)
STEP = 10_000  # items per progress step of a load (the loaders batch up to 20,000)


def stepped(load: Callable[[int, int], None], tracker: Tracker) -> Callable[[int, int], None]:
    """`load` over [start, stop) in order, STEP items at a time, each step counted."""
    def run(start: int, stop: int) -> None:
        for a in range(start, stop, STEP):
            b = min(stop, a + STEP)
            load(a, b)
            tracker.advance(b - a)

    return run


def calibration_items(kp: Any, cand: Candidate, wl: Workload) -> int:
    """How many items measure() loads for `cand` (the warm-up and every round)."""
    _, n = _sample(kp, cand, wl, SAMPLE_ITEMS)
    return min(n, WARM_ITEMS) + _rounds(n) * n


def _rounds(n: int) -> int:
    return max(1, min(MAX_ROUNDS, ROUND_ITEMS // max(n, 1)))


@dataclass(frozen=True)
class Recommendation:
    """What `plan()` returns; `to_dict()` is what `densekv plan --json` prints."""

    kind: str
    items: int
    payload: int
    ttl: bool
    layout: str
    partitions: int
    config: dict[str, str]
    predicted_bytes_per_item: float
    predicted_total_bytes: int
    reason: str
    usage: str  # the constructor call, every feature on
    candidates: list[dict[str, Any]]
    calibration: dict[str, Any]
    server: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    config_advice: list[dict[str, Any]] = field(default_factory=list)
    verify: dict[str, Any] | None = None
    #: with masters= or a cluster target: partitions and bytes per master, imbalance
    #: (densekv/tools/planner/cluster.py ClusterSpread.to_dict())
    cluster: dict[str, Any] | None = None
    #: the calls to choose from (`usage` first): {call, bytes_per_item, plus (the bytes the
    #: figure leaves out, or None), loses (what the call turns off, or None)}
    use: list[dict[str, Any]] = field(default_factory=list)
    #: sessions: what the payload priced is (payloads.py to_dict: --payload's incompressible
    #: bytes, or a sample's sessions with the dictionary trained on them)
    payloads: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_input(kind: str, items: Any, payload: Any, ttl: Any, sample: Any = None) -> Workload:
    """The workload asked for (PlannerError for bad input, before any server is touched).
    `sample`: sessions only, a JSON-lines file's path or session dicts (payloads.py)."""
    if kind not in KINDS:
        raise PlannerError(f"unknown kind {kind!r}: choose one of {', '.join(KINDS)}")
    if isinstance(items, bool) or not isinstance(items, int) or not 1 <= items <= MAX_ITEMS:
        raise PlannerError(f"items is a whole number from 1 to {MAX_ITEMS:,}")
    if isinstance(payload, bool) or not isinstance(payload, int) or payload < 0:
        raise PlannerError("payload is a whole number of bytes >= 0")
    sessions = None
    if sample is not None:
        if kind != "sessions":
            raise PlannerError("a sample of sessions (--sample) plans sessions: use --kind sessions")
        if payload:
            raise PlannerError("give --payload or --sample, not both: the sample's sessions are the payload")
        if isinstance(sample, Sampled):
            sessions = sample
        elif isinstance(sample, (str, os.PathLike)):
            sessions = read_sample(sample)
        else:
            sessions = sampled(sample)
    wl = Workload(kind, items, payload, bool(ttl), sessions=sessions)
    KINDS[kind].check(wl)
    return wl


# --- measuring ------------------------------------------------------------------------


def observe(client: Any, skip: set[bytes]) -> tuple[Container, ...]:
    """Type, encoding and listpack entry bytes of every hash/set/zset key not in `skip`."""
    keys = [k for k in client.scan_iter(count=1000) if k not in skip]
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.type(k)
    types = [t.decode() if isinstance(t, bytes) else str(t) for t in pipe.execute()]
    wanted = [(k, t) for k, t in zip(keys, types) if t in ("hash", "set", "zset")]
    pipe = client.pipeline(transaction=False)
    for k, t in wanted:
        pipe.object("encoding", k)
        if t == "hash":
            pipe.hgetall(k)
        elif t == "set":
            pipe.smembers(k)
        else:
            pipe.zrange(k, 0, -1, withscores=True, score_cast_func=bytes)
    replies = pipe.execute()
    out = []
    for i, (_, t) in enumerate(wanted):
        enc, body = replies[2 * i], replies[2 * i + 1]
        enc = enc.decode() if isinstance(enc, bytes) else str(enc)
        if t == "hash":
            entries = [x for kv in body.items() for x in kv]
            items = len(body)
        elif t == "zset":  # (member, score as the server spelled it) pairs
            entries = [x for pair in body for x in pair]
            items = len(body)
        else:
            entries = list(body)
            items = len(entries)
        out.append(Container(t, enc, items, sum(entry_size(bytes(e)) for e in entries)))
    return tuple(out)


def _chosen(partitions: int, want: int) -> list[int]:
    m = max(1, min(partitions, want))
    return sorted({i * partitions // m for i in range(m)})


def _sample(kp: Any, cand: Candidate, wl: Workload, max_items: int) -> tuple[list[int], int]:
    """Which partitions a sample fills and how many items that takes (at the planned fill)."""
    fill = wl.items / cand.partitions
    want = min(SAMPLE_PARTITIONS, max(1, int(max_items / max(fill, 1e-9))))
    chosen = _chosen(cand.partitions, want)
    if hasattr(kp, "sample_size"):
        return chosen, kp.sample_size(cand, wl, chosen)
    return chosen, max(1, round(len(chosen) * fill))


def loader_client(client: Any) -> redis.Redis:
    """A separate connection for loading: the meter reads with its own, and the loader's
    is closed before each reading so its query and reply buffers are not counted. Its
    close() disconnects its pool (a client built on a given pool would leave the socket
    open: on Redis 7.0 that kept ~25 KB of query buffer in used_memory, +20% on a 10k map)."""
    pool = client.connection_pool
    return redis.Redis.from_pool(redis.ConnectionPool(connection_class=pool.connection_class,
                                                      **pool.connection_kwargs))


def closing(load: Callable[[int, int], None], lc: redis.Redis) -> Callable[[int, int], None]:
    def run(start: int, stop: int) -> None:
        load(start, stop)
        lc.connection_pool.disconnect()

    return run


def warm_up(kp: Any, cand: Candidate, wl: Workload, where: Site, chosen: list[int], n: int,
            tracker: Tracker = SILENT) -> None:
    """Load a few items and flush them, so the server's one-time costs (the Lua script
    cache: ~50 KB for three scripts) are paid before the baseline and not spread over
    the sample's keys. FLUSHALL / FLUSHDB keep loaded scripts."""
    where.meter.reset()
    lc = loader_client(where.client)
    try:
        stepped(kp.sample_loader(lc, cand, wl, chosen, n), tracker)(0, min(n, WARM_ITEMS))
        observe(lc, set())  # its big replies, too, leave one-time allocations behind
    finally:
        lc.close()
    where.meter.reset()


def warm_public(kp: Any, cand: Candidate, wl: Workload, where: Site, tracker: Tracker = SILENT) -> None:
    """warm_up through the public API (the path --verify measures), then flush: a session
    store's first load pays ~150 KB that stays after FLUSHALL on valkey-9.1 (its scripts,
    its dictionary's training and storing: +178 KB on a Flask-Login load of 20k sessions
    after the plan-level warm-up alone, +25 KB after this one; measured with MEMORY STATS),
    which the median of 3 hid under ROUND_ITEMS and a single load of 100k counted (-1% to
    -3% on the P0-P3 profiles)."""
    n = min(wl.items, PUBLIC_WARM_ITEMS)
    where.meter.reset()
    lc = loader_client(where.client)
    try:
        kp.load_full(lc, cand, dataclasses.replace(wl, items=n, seed=wl.seed + 7), n)
    finally:
        lc.close()
    tracker.advance(n)
    where.meter.reset()


def measure(kp: Any, cand: Candidate, wl: Workload, where: Site, key: str,
            tracker: Tracker = SILENT) -> Calibration:
    """Load a sample at half and at full planned fill; fit the model to the two readings."""
    chosen, n = _sample(kp, cand, wl, SAMPLE_ITEMS)
    meter = where.meter
    warm_up(kp, cand, wl, where, chosen, n, tracker)
    readings: list[Reading] = []
    # a small sample is loaded several times: the server's own noise (a few dozen KB of
    # client and script allocations that come and go) then averages out in the fit
    for _ in range(_rounds(n)):
        meter.reset()
        lc = loader_client(where.client)
        try:
            load = closing(stepped(kp.sample_loader(lc, cand, wl, chosen, n), tracker), lc)  # may write a metadata key
            lc.connection_pool.disconnect()
            meter.rebase()
            skip = set(where.client.scan_iter(count=1000))
            done = 0
            for stop in sorted({max(1, n // 2), n}):
                load(done, stop)
                done = stop
                delta = meter.delta()
                readings.append(Reading(stop, delta, observe(lc, skip)))  # big replies: not on the meter's connection
                lc.connection_pool.disconnect()
        finally:
            lc.close()
    meter.flush()
    return calibrate(key, cand.layout, readings, allocator=where.server["allocator"],
                     partitions=len(chosen), server=where.server, measured_on=where.measured_on,
                     created_at=time.time(), extra={"planned_partitions": cand.partitions,
                                                    "planned_items": wl.items, "shape": cand.shape})


def calibration_for(kp: Any, cand: Candidate, wl: Workload, target: Target, refresh: bool = False,
                    tracker: Tracker = SILENT) -> Calibration:
    with site(target, cand.options) as where:
        key = cache.cache_key(where.server, cand.layout, cand.shape)
        if not refresh:
            hit = cache.load(key)
            if hit is not None:
                tracker.skip(calibration_items(kp, cand, wl))  # nothing to load
                return hit
        cal = measure(kp, cand, wl, where, key, tracker)
    cache.store(cal)
    return cal


def verify_items(kp: Any, cand: Candidate, wl: Workload) -> int:
    """How many items run_verify() loads (its warm-up and loads)."""
    if wl.items <= FULL_VERIFY:
        return min(_sample(kp, cand, wl, WARM_ITEMS)[1], WARM_ITEMS) + min(wl.items, PUBLIC_WARM_ITEMS) + wl.items * (
            VERIFY_REPEATS if wl.items <= ROUND_ITEMS else 1)
    _, n = _sample(kp, cand, wl, FULL_VERIFY)
    return min(n, WARM_ITEMS) + n


def run_verify(kp: Any, cand: Candidate, wl: Workload, target: Target, predicted: float,
               tracker: Tracker = SILENT) -> dict[str, Any]:
    """Load the planned layout on a server like the target; predicted vs measured."""
    with site(target, cand.options) as where:
        meter = where.meter
        if wl.items <= FULL_VERIFY:
            warm_up(kp, cand, wl, where, *_sample(kp, cand, wl, WARM_ITEMS), tracker=tracker)
            warm_public(kp, cand, wl, where, tracker)
            t0 = time.perf_counter()
            deltas = []
            for _ in range(VERIFY_REPEATS if wl.items <= ROUND_ITEMS else 1):
                meter.reset()
                lc = loader_client(where.client)
                try:
                    kp.load_full(lc, cand, wl, wl.items)
                finally:
                    lc.close()
                tracker.advance(wl.items)
                deltas.append(meter.delta())
            measured = float(sorted(deltas)[len(deltas) // 2])  # the median: see ROUND_ITEMS
            n = wl.items
            how = ("the whole workload, loaded through the public API (after a warm-up through it that "
                   "loads the Lua scripts and trains a dictionary, one-time costs of ~50-180 KB per server"
                   f"{'; the median of 3 loads' if len(deltas) > 1 else ''})")
        else:
            chosen, n = _sample(kp, cand, wl, FULL_VERIFY)
            warm_up(kp, cand, wl, where, chosen, n, tracker)
            t0 = time.perf_counter()
            lc = loader_client(where.client)
            try:
                stepped(kp.sample_loader(lc, cand, wl, chosen, n), tracker)(0, n)
            finally:
                lc.close()
            measured = meter.delta() * wl.items / n
            how = (f"{len(chosen)} of the {cand.partitions} partitions filled as planned ({n:,} items), "
                   f"the delta scaled by N/{n:,}")
        seconds = time.perf_counter() - t0
        meter.flush()
    return {
        "n_loaded": n, "how": how, "measured_on": where.measured_on,
        "measured_total_bytes": int(measured), "measured_bytes_per_item": round(measured / wl.items, 3),
        "predicted_total_bytes": int(predicted), "predicted_bytes_per_item": round(predicted / wl.items, 3),
        "error_pct": round(100 * (predicted - measured) / measured, 2) if measured else None,
        "load_seconds": round(seconds, 2),
    }


# --- deciding --------------------------------------------------------------------------


def _raised(caps: Any, sized_by: tuple[str, ...], value: int) -> Any:
    changes = {f"{s}_max_listpack_entries": value for s in sized_by}
    return dataclasses.replace(caps, **changes)


def entries_advice(kp: Any, wl: Workload, caps: Any, best: Candidate, cal: Calibration,
                   total: float) -> dict[str, Any] | None:
    """Would a larger listpack entry limit save >= WORTH? (the model at the new fill)"""
    sized_by = SIZED_BY.get(best.layout, ("hash",))
    current = min(getattr(caps, f"{s}_max_listpack_entries") or 0 for s in sized_by)
    if current <= 0:
        return None
    found = None
    for value in (current * 2, current * 4):
        if value > 4096:
            break
        alt = [c for c in kp.candidates(wl, _raised(caps, sized_by, value)) if c.layout == best.layout]
        if not alt or alt[0].partitions >= best.partitions:
            continue
        t = predict_total(cal, wl.items, alt[0].partitions, alt[0].distribution)
        if t < total * (1 - WORTH):
            found = {"config": {f"{s}-max-listpack-entries": str(value) for s in sized_by},
                     "partitions": alt[0].partitions, "predicted_bytes_per_item": round(t / wl.items, 3),
                     "saving_pct": round(100 * (1 - t / total), 1),
                     "why": (f"{value} entries per listpack: {alt[0].partitions} partitions instead of "
                             f"{best.partitions}, fewer keys to pay for; each HGET/SISMEMBER then scans a "
                             "longer listpack (more CPU per command)"),
                     "estimate": "the calibrated model at the new fill (not measured at that config)"}
    return found


def cluster_section(kind: str, wl: Workload, best: Candidate, cal: Calibration, total: float, target: Target,
                    caps: Any, masters: int | None, notes: list[str]) -> dict[str, Any] | None:
    """The plan spread over the target's masters (CLUSTER SLOTS) or `masters` (an even split)."""
    ranges = read_ranges(target.client) if caps.cluster or isinstance(target.client, redis.RedisCluster) else None
    if ranges is None and masters is None:
        return None
    if ranges is not None and masters is not None and masters != len(ranges):
        notes.append(f"{target.label} is a cluster of {len(ranges)} masters: the plan is spread over "
                     f"its slots, not over {masters} masters")
    got = spread(kind, best.partitions, total, masters=masters, ranges=ranges,
                 source="even split" if ranges is None else f"CLUSTER SLOTS of {target.label}")
    if got.better_partitions is not None:
        try:
            t = predict_total(cal, wl.items, got.better_partitions, best.distribution)
            cost = f"; predicted {t / wl.items:.2f} B/item there (now {total / wl.items:.2f})"
        except ValueError:
            cost = ""
        how = ("a map's bucket count follows from expected=, it is not an option"
               if kind == "map" else f"partitions={got.better_partitions}")
        got = dataclasses.replace(got, advice=f"{got.advice}{cost} ({how})")
    return got.to_dict()


def optional_advice(scored: list[tuple[float, Candidate]], best: Candidate, total: float,
                    items: int) -> list[dict[str, Any]]:
    """The config changes worth making (a saving of WORTH or more): one per config, with the
    layout that is smallest under it and that layout's own figures (not the figures of the
    recommendation, which are without it), smallest first."""
    better: dict[str, tuple[float, Candidate]] = {}
    for t, c in scored:
        if c.options and c is not best and t < total * (1 - WORTH):
            key = _options_text(c.options)
            if key not in better or t < better[key][0]:
                better[key] = (t, c)
    return [{"config": dict(c.options), "layout": c.layout, "partitions": c.partitions,
             "predicted_bytes_per_item": round(t / items, 3), "predicted_total_bytes": int(t),
             "saving_pct": round(100 * (1 - t / total), 1), "why": c.note,
             "estimate": "measured on a scratch server with that config"}
            for t, c in sorted(better.values(), key=lambda tc: tc[0])]


def use_lines(kp: Any, best: Candidate, wl: Workload, total: float) -> list[dict[str, Any]]:
    """The `use` lines: the call with every feature on (what a user gets by default), then,
    for a feature whose bytes the figures leave out (KINDS' `lighter`), the call with it off
    at the predicted bytes and what that loses. Features stay on unless the user turns them
    off; the plan only says what each costs."""
    per_item = round(total / wl.items, 3)
    lighter = kp.lighter(best, wl)
    heavier = kp.heavier(best, wl) if hasattr(kp, "heavier") else []
    plus = "; ".join(extra for _, _, extra in lighter) or None
    out: list[dict[str, Any]] = [{"call": kp.usage(best, wl), "bytes_per_item": per_item, "plus": plus,
                                  "loses": None}]
    out += [{"call": call, "bytes_per_item": per_item, "plus": None, "loses": loses} for call, loses, _ in lighter]
    # the opt-in features: their bytes on top of the default call's
    out += [{"call": call, "bytes_per_item": per_item, "plus": "; ".join(filter(None, (plus, extra))),
             "loses": None, "adds": adds} for call, adds, extra in heavier]
    return out


def _options_text(options: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in options.items())


def plan(kind: str, items: int, payload: int = 0, ttl: bool = False, *, sample: Any = None, client: Any = None,
         url: str | None = None, server: str | None = None, verify: bool = False,
         layouts: tuple[str, ...] | list[str] | None = None, refresh: bool = False,
         masters: int | None = None, progress: ProgressFn | None = None) -> Recommendation:
    """Recommend a layout, partition count and config for `items` of `kind` (see module doc).

    `payload`: sessions: bytes of incompressible data a session; `sample`: sessions only,
    instead of `payload`: a JSON-lines file of session data (its path) or the session dicts,
    priced as the store frames them, with the dictionary it would train (payloads.py).
    `client` / `url` / `server`: the server planned for (default: the embedded Valkey).
    `layouts`: only these candidate layouts (default: all the kind has here).
    `refresh`: measure again even where the cache holds a calibration.
    `masters`: also spread the plan over that many masters (slots split evenly); a
    cluster target is spread over its own masters (CLUSTER SLOTS) in any case.
    `progress(what, loaded, to_load)`: told what the planner does, from the start."""
    wl = check_input(kind, items, payload, ttl, sample)
    if masters is not None:
        check_masters(masters)
    kp = KINDS[kind]
    if layouts is not None:
        unknown = [name for name in layouts if name not in kp.layouts]
        if unknown or not layouts:
            raise PlannerError(f"layouts for {kind} are {', '.join(kp.layouts)}")
    from densekv.capabilities import probe

    tracker = Tracker(progress)
    tracker.say(f"connecting to {redact(url)}" if url else "probing the given server" if client is not None
                else f"starting {server or 'the embedded server'}")
    with open_target(server=server, url=url, client=client) as target:
        tracker.say(f"probing {target.label}")
        caps = probe(target.client)
        cands = [c for c in kp.candidates(wl, caps) if layouts is None or c.layout in layouts]
        if not cands:
            raise PlannerError(f"none of the layouts asked for can hold {kind} on this server")
        tracker.plan_for(sum(calibration_items(kp, c, wl) for c in cands))
        scored: list[tuple[float, Candidate, Calibration]] = []
        for i, cand in enumerate(cands, 1):
            with_ = f" with {_options_text(cand.options)}" if cand.options else ""
            tracker.say(f"calibrating {cand.layout}{with_} ({i} of {len(cands)})")
            cal = calibration_for(kp, cand, wl, target, refresh, tracker)
            scored.append((predict_total(cal, wl.items, cand.partitions, cand.distribution), cand, cal))
        usable = [s for s in scored if not s[1].options]
        total, best, cal = min(usable or scored, key=lambda s: s[0])
        config = dict(best.options)  # only what the recommended layout needs: the prediction's config
        notes = [best.note] if best.note else []
        advice: list[dict[str, Any]] = []
        if best.options:
            advice.append({"config": dict(best.options), "required": True, "layout": best.layout,
                           "partitions": best.partitions, "predicted_bytes_per_item": round(total / wl.items, 3),
                           "why": best.note})
        advice += optional_advice([(t, c) for t, c, _ in scored], best, total, wl.items)
        more = entries_advice(kp, wl, caps, best, cal, total)
        if more is not None:
            advice.append({**more, "layout": best.layout})
        if cal.measured_on.startswith("measured on an embedded") and not cal.cached:
            notes.append(cal.measured_on)  # a cached model's note names the target it was made for
        if verify:
            tracker.plan_for(verify_items(kp, best, wl))
            tracker.say(f"verifying: loading {best.layout} as planned")
        verified = run_verify(kp, best, wl, target, total, tracker) if verify else None
        spread_ = cluster_section(kind, wl, best, cal, total, target, caps, masters, notes)
        stamp = {"target": target.label, "version": caps.version, "flavor": caps.flavor,
                 "allocator": caps.allocator, "hash_max_listpack_entries": caps.hash_max_listpack_entries,
                 "hash_max_listpack_value": caps.hash_max_listpack_value,
                 "set_max_listpack_entries": caps.set_max_listpack_entries,
                 "zset_max_listpack_entries": caps.zset_max_listpack_entries, "field_ttl": caps.field_ttl}
    others = sorted(scored, key=lambda s: s[0])
    listing = ", ".join(f"{c.layout}{'*' if c.options else ''} {round(t / wl.items, 3):.2f}" for t, c, _ in others)
    starred = sorted({_options_text(c.options) for _, c, _ in others if c.options})
    legend = f"; * with {' or '.join(starred)}, which this server does not have" if starred else ""
    reason = (f"{best.layout} with {best.partitions} partitions is predicted at {round(total / wl.items, 3):.2f} B/item, "
              f"the smallest of: {listing} (B/item{legend}). Model calibrated on "
              f"{cal.server.get('flavor')} {cal.server.get('version')} ({cal.allocator}): "
              f"{cal.per_key:.1f} B per key + listpack bytes per item "
              f"{', '.join(f'{s.type} {s.per_item:.2f}' for s in cal.structures)} + {cal.per_item:.2f} B per item"
              f"{' (from the cache)' if cal.cached else ''}.")
    return Recommendation(
        kind=kind, items=wl.items, payload=wl.payload, ttl=wl.ttl, layout=best.layout,
        partitions=best.partitions, config=config,
        predicted_bytes_per_item=round(total / wl.items, 3), predicted_total_bytes=round(total),
        reason=reason, usage=kp.usage(best, wl), use=use_lines(kp, best, wl, total),
        candidates=[{"layout": c.layout, "partitions": c.partitions, "config": dict(c.options),
                     "predicted_bytes_per_item": round(t / wl.items, 3), "predicted_total_bytes": int(t),
                     "calibration_cached": k.cached} for t, c, k in others],
        calibration=cal.to_dict(), server=stamp, notes=notes, config_advice=advice, verify=verified,
        cluster=spread_, payloads=kp.payloads(wl),
    )
