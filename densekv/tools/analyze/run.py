"""The whole analysis: scan -> patterns -> recommendation -> replay -> one result dict.

`analyze(Options(url=...))` returns the document that `--json` prints (schema in
report.py). The scan can be stopped (`stop()` returns True, as the CLI's Ctrl-C handler
makes it): the result is then a partial report of what was scanned, without the replay,
and with `--resume FILE` the next run goes on from where this one stopped. The resume
file is written after each batch (at most every RESUME_EVERY seconds, and at the end)
by a write to a temporary file and a rename, so a crash leaves the previous one intact.
It holds the masked pattern table only; the raw key names the scan needs to go on
(reservoirs, the keys a prefix sample took; possibly session tokens) are in `FILE.names`
beside it, mode 0600 (resume_names.py): the resume file can be shared, `FILE.names` not.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from densekv.errors import AnalyzeError
from densekv.tools.analyze.estimate import (
    Estimate,
    bytes_estimate,
    counted_bytes_estimate,
    keys_estimate,
)
from densekv.tools.analyze.patterns import Rules, RulesError
from densekv.tools.analyze.recommend import Choice, choose, command_for, final, namespace_for
from densekv.tools.analyze.resume_names import read_names, write_names
from densekv.tools.analyze.scan import (
    NAMES_LIMIT,
    RateLimiter,
    Scanner,
    ScanState,
    Target,
    explain,
    open_target,
)
from densekv.tools.analyze.table import PatternStats, PatternTable

RESUME_VERSION = 4  # 3: key names sealed in the file (retired); 4: key names in FILE.names
RESUME_EVERY = 0.5  # seconds between resume-file writes
MAX_REPLAYED = 25  # patterns replayed, largest first (the rest: "not measured")


@dataclass
class Options:
    url: str = ""  # the live server; "" with `rdb`
    sample: int | None = 10_000  # None: --full
    rate: float | None = None
    rules: str | None = None
    resume: str | None = None
    replay_keys: int = 1000  # keys per pattern copied for the replay
    replay: bool = True
    scratch: str | None = None  # a server of the matrix to replay on (default: the live one's kind)
    count: int = 500  # SCAN COUNT
    names_limit: int | None = NAMES_LIMIT  # --sample: count every key by name up to this many keys
    seed: int = 13  # the per-pattern sample's draw (another seed, another sample)
    rdb: tuple[str, ...] = ()  # dumps to analyze offline instead of `url` (offline.py)
    db: int = 0  # with `rdb`: the database of the dumps to analyze


Progress = Callable[[ScanState], None]
Note = Callable[[str], None]


def _rules(path: str | None) -> tuple[Rules, str]:
    if path is None:
        return Rules(), ""
    try:
        rules = Rules.load(path)
    except RulesError as exc:
        raise AnalyzeError(str(exc)) from None
    return rules, hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _load_resume(path: str, target: Target, options: Options, digest: str, rules: Rules
                 ) -> tuple[ScanState, PatternTable] | None:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AnalyzeError(f"cannot read the resume file {path}: {exc.strerror}") from None
    try:
        doc = json.loads(text)
        version = doc.get("version")
    except (ValueError, AttributeError):
        version = None
    if version == 3:
        raise AnalyzeError(f"{path} is a resume file of an older densekv (its names sealed with {path}.key): "
                           "remove both to start over")
    if version != RESUME_VERSION:
        raise AnalyzeError(f"{path} is not a densekv analyze resume file (remove it to start over)")
    names = read_names(path, doc.get("names"))
    try:
        doc["state"]["seen"] = names["seen"]
        for item in doc["table"]["patterns"]:
            item["reservoir"] = names["reservoirs"][item["name"]]
        state = ScanState.from_json(doc["state"])
        table = PatternTable.from_json(doc["table"], rules)
    except (ValueError, KeyError, TypeError):
        raise AnalyzeError(f"{path} is not a densekv analyze resume file (remove it to start over)") from None
    state.check_target(target)
    mode = "full" if options.sample is None else "sample"
    if state.mode != mode or state.sample != options.sample or doc.get("rules") != digest:
        raise AnalyzeError(f"{path} was written with other options ({state.mode}"
                           f"{'' if state.sample is None else ' ' + str(state.sample)}, rules "
                           f"{doc.get('rules') or 'none'}): give the same ones, or remove it to start over")
    return state, table


def _save_resume(path: str, state: ScanState, table: PatternTable, digest: str) -> None:
    state_doc, table_doc = state.to_json(), table.to_json()
    names = {"seen": state_doc.pop("seen"),
             "reservoirs": {item["name"]: item.pop("reservoir") for item in table_doc["patterns"]}}
    doc = {"version": RESUME_VERSION, "rules": digest, "state": state_doc, "table": table_doc,
           "names": write_names(path, names)}  # the sidecar's stamp
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh)
    os.replace(tmp, path)


def analyze(options: Options, progress: Progress | None = None, stop: Callable[[], bool] | None = None,
            note: Note | None = None) -> dict[str, Any]:
    """Run the analysis; see the module docstring."""
    if options.sample is not None and options.sample < 1:
        raise AnalyzeError("--sample is a positive number of keys")
    rules, digest = _rules(options.rules)
    if options.rdb:
        return _analyze_dumps(options, rules, digest, progress, stop, note or (lambda _: None))
    target = open_target(options.url)
    try:
        return {**_analyze(target, options, rules, digest, progress, stop, note or (lambda _: None)), "rdb": None}
    finally:
        target.close()


def _analyze_dumps(options: Options, rules: Rules, digest: str, progress: Progress | None,
                   stop: Callable[[], bool] | None, note: Note) -> dict[str, Any]:
    """The same analysis on throwaway servers that loaded the dumps (offline.py)."""
    from densekv.tools.analyze.offline import loaded

    if options.resume:
        raise AnalyzeError("--resume goes on from a live server's SCAN cursors, which a dump loaded afresh does "
                           "not keep: drop --resume with --rdb")
    note("loading the dump" + ("s" if len(options.rdb) > 1 else ""))
    with loaded(options.rdb, options.db) as (target, dumps):
        return {**_analyze(target, options, rules, digest, progress, stop, note), "rdb": dumps}


def _analyze(target: Target, options: Options, rules: Rules, digest: str, progress: Progress | None,
             stop: Callable[[], bool] | None, note: Note) -> dict[str, Any]:
    resumed = _load_resume(options.resume, target, options, digest, rules) if options.resume else None
    state, table = resumed if resumed else (ScanState.start(target, options.sample, options.names_limit,
                                                             options.seed), PatternTable(rules))
    scanner = Scanner(target, table, state, rate=options.rate, count=options.count)
    last_save = [0.0]

    def on_batch(s: ScanState) -> None:
        if options.resume and time.monotonic() - last_save[0] >= RESUME_EVERY:
            _save_resume(options.resume, s, table, digest)
            last_save[0] = time.monotonic()
        if progress is not None:
            progress(s)

    try:
        scanner.run(on_batch, stop)
    except (redis.RedisError, OSError) as exc:
        if options.resume:
            _save_resume(options.resume, state, table, digest)
        err = explain(exc, target.label)
        again = f"; rerun with --resume {options.resume} to go on from there" if options.resume else ""
        if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OSError)) \
                and not isinstance(exc, redis.AuthenticationError):
            raise type(err)(f"the server at {target.label} stopped answering during the scan, after "
                            f"{state.taken:,} keys{again}") from None
        raise type(err)(f"{err} (during the scan, after {state.taken:,} keys){again}") from None
    if options.resume:
        _save_resume(options.resume, state, table, digest)
    if not state.counted:
        table.merge_similar()  # (a names pass merged before drawing its sample)
    return build_result(target, options, state, table, stop, note)


def build_result(target: Target, options: Options, state: ScanState, table: PatternTable,
                 stop: Callable[[], bool] | None, note: Note) -> dict[str, Any]:
    sampled = sum(s.keys for s in table) if state.counted else state.taken
    exact = state.mode == "full" and state.done
    # a stopped full scan is a prefix of SCAN's order, so a uniform sample like --sample
    total = sampled if exact else target.keys
    counted = state.counted and state.phase == "facts"  # every key counted by name
    if counted:
        total = sum(s.names for s in table)
    n = sampled
    rows: list[dict[str, Any]] = []
    estimates: dict[str, tuple[Estimate, Estimate]] = {}
    for stats in table:
        if state.counted and not counted:  # stopped during the names pass: a prefix of SCAN
            keys = keys_estimate(stats.names, state.named, target.keys)
            estimates[stats.name] = (keys, Estimate(0.0, 0.0, 0.0))
            continue
        if counted:
            keys = Estimate(float(stats.names), float(stats.names), float(stats.names))
            mem = counted_bytes_estimate(stats.names, stats.mem_sum, stats.mem_sq, stats.keys)
        else:
            keys = keys_estimate(stats.keys, n, total)
            mem = bytes_estimate(stats.mem_sum, stats.mem_sq, n, total)
        estimates[stats.name] = (keys, mem)
    replayed: dict[str, dict[str, Any]] = {}
    scratch_info: dict[str, Any] | None = None
    complete = not state.interrupted and state.done
    if options.replay and complete:
        scratch_info, replayed = _replay_all(target, options, table, estimates, stop, note)
        if any(r.get("stopped") for r in replayed.values()):
            state.interrupt()
    overheads = [r["as_is"]["overhead_per_key"] for r in replayed.values() if "as_is" in r]
    default_overhead = statistics.median(overheads) if overheads else 0.0
    for stats in table:
        keys, mem = estimates[stats.name]
        rows.append(_row(stats, keys, mem, replayed.get(stats.name), default_overhead, target, options.replay))
    rows.sort(key=lambda r: (-(r["bytes_now"] - (r["bytes_densekv"] if r["bytes_densekv"] is not None
                                                   else r["bytes_now"])), -r["bytes_now"]))
    now_total = sum(r["bytes_now"] for r in rows)
    dk_total = sum(r["bytes_densekv"] if r["bytes_densekv"] is not None else r["bytes_now"] for r in rows)
    return {
        "keys_total": int(total),
        "keys_sampled": int(sampled),
        "mode": state.mode,
        "counted": counted,  # key counts exact: every key counted by name (SCAN only)
        "complete": complete,
        "interrupted": state.interrupted,  # stopped by Ctrl-C (the scan, or the replay)
        "server": {"url": target.label, "flavor": target.flavor, "version": target.version,
                   "cluster": target.cluster, "nodes": [n.addr for n in target.nodes], "db": target.db},
        "scratch": scratch_info,
        "scan": {"seconds": round(state.elapsed, 3), "commands": state.commands, "vanished": state.vanished,
                 "patterns": len(rows), "overflow_keys": table.overflow},
        "bytes_now": int(now_total),
        "bytes_densekv": int(dk_total),
        "saving": (1 - dk_total / now_total) if now_total else 0.0,
        "patterns": rows,
    }


def _replay_all(target: Target, options: Options, table: PatternTable,
                estimates: dict[str, tuple[Estimate, Estimate]], stop: Callable[[], bool] | None,
                note: Note) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    from densekv.tools.analyze.moves import move_for
    from densekv.tools.analyze.replay import (
        ballast_ttl,
        measure_as_is,
        measure_move,
        plan_ballast,
        read_copies,
        scratch_server,
    )

    # every pattern whose keys can be copied is replayed as it is (its per-key overhead,
    # for its types and encodings); those densekv has a layout for, moved too
    todo = [(s, choose(s)) for s in table]
    from densekv.tools.analyze.replay import COPYABLE

    todo = [(s, c) for s, c in todo if c.measurable or set(s.types) & COPYABLE]
    todo.sort(key=lambda sc: (not sc[1].measurable, -estimates[sc[0].name][1].value))
    out: dict[str, dict[str, Any]] = {}
    if not todo:
        return None, out
    limiter = RateLimiter(options.rate)
    with scratch_server(target.flavor, target.version, options.scratch) as scratch:
        info = {"server": scratch.name, "version": scratch.version, "note": scratch.note}
        per_node = target.keys / max(1, len(target.nodes))
        live_ttl = sum(s.ttl_share * estimates[s.name][0].value for s in table) / max(1, len(target.nodes))
        measurable = sum(1 for _, c in todo if c.measurable)
        for i, (stats, choice) in enumerate(todo):
            if stop is not None and stop():
                out[stats.name] = {"skipped": "not measured: stopped (Ctrl-C) during the replay", "stopped": True}
                continue
            if (i >= MAX_REPLAYED) if choice.measurable else (i - measurable >= MAX_REPLAYED):
                out[stats.name] = {"skipped": f"not measured: only the {MAX_REPLAYED} largest patterns are replayed"}
                continue
            note(f"replaying {stats.name} ({choice.kind}) on {scratch.name}")
            keys = estimates[stats.name][0].value
            try:
                copies = read_copies(target, stats, limiter, options.replay_keys)
            except (redis.RedisError, OSError) as exc:
                raise explain(exc, target.label) from None
            if not copies:
                out[stats.name] = {"skipped": "its sampled keys are gone or too big to copy"}
                continue
            scratch.ballast, use = plan_ballast(round(per_node), keys / max(1, len(target.nodes)), len(copies))
            copies = copies[:use]
            scratch.ballast_ttl = ballast_ttl(scratch.ballast, copies, per_node, live_ttl)
            try:
                as_is = measure_as_is(scratch, copies)
                result: dict[str, Any] = {
                    "as_is": {"keys": as_is.keys, "bytes_freed": as_is.freed,
                              "bytes_per_key": round(as_is.per_key, 2), "memory_usage": as_is.memory_usage,
                              "overhead_per_key": round(as_is.overhead, 2), "ballast_keys": scratch.ballast,
                              "ballast_ttl_keys": scratch.ballast_ttl,
                              "memory_usage_vs_live": None if as_is.check is None else round(as_is.check, 4)}}
                if not choice.measurable:
                    out[stats.name] = result
                    continue
                move = move_for(choice, copies, stats, max(1, round(keys)))
                layout = measure_move(scratch, move, copies)
            except Exception as exc:
                if os.environ.get("DENSEKV_DEBUG"):
                    raise
                out[stats.name] = {"skipped": f"replay failed: {type(exc).__name__}: {exc}"}
                continue
            out[stats.name] = {
                **result,
                "densekv": {"layout": layout.description, "kind": layout.kind, "items": layout.items,
                            "stands_for": layout.stands_for, "fixed_bytes": layout.fixed,
                            "fixed_count": move.fixed_count, "bytes": layout.variable,
                            "bytes_per_item": round(layout.per_item, 2), "notes": layout.notes,
                            "expected_children": getattr(move, "expected_children", None)},
                "_layout": layout, "_fixed_count": move.fixed_count, "_per_key_items": layout.stands_for / max(1, keys),
            }
    return info, out


def _row(stats: PatternStats, keys: Estimate, mem: Estimate, replay: dict[str, Any] | None,
         default_overhead: float, target: Target, replay_asked: bool = True) -> dict[str, Any]:
    choice = choose(stats)
    overhead = default_overhead
    calibrated = replay is not None and "as_is" in replay
    if calibrated:
        assert replay is not None
        overhead = float(replay["as_is"]["overhead_per_key"])
    measured = replay is not None and "densekv" in replay
    now = mem.plus(keys.scaled(overhead))
    bytes_dk: float | None = None
    saving: float | None = None
    if measured:
        assert replay is not None
        layout = replay["_layout"]
        items = keys.value * replay["_per_key_items"]
        bytes_dk = layout.fixed * (keys.value if replay["_fixed_count"] > 1 else 1) + layout.per_item * items
        saving = 1 - bytes_dk / now.value if now.value else 0.0
    chosen = final(choice, saving) if measured else choice
    if not measured and choice.measurable:
        why = (replay or {}).get("skipped") or ("not measured (no replay asked)" if not replay_asked else
                                                "not measured (the scan was stopped: rerun to finish it)")
        chosen = Choice(choice.kind, f"{choice.reason}; {why}", choice.detail)
    kept = chosen.kind != "leave"
    detail = dict(chosen.detail)
    if measured and replay is not None and replay["densekv"].get("expected_children"):
        detail["expected_children"] = replay["densekv"]["expected_children"]
    kind, share = stats.main(stats.types)
    enc, _ = stats.main(stats.encodings)
    row: dict[str, Any] = {
        "pattern": stats.name,
        "glob": stats.glob,
        "namespace": namespace_for(stats),  # the densekv name the command (and the replay) uses
        "keys": round(keys.value),
        "keys_interval": keys.as_ints(),
        "bytes_now": round(now.value),
        "bytes_now_interval": now.as_ints(),
        "bytes_densekv": round(bytes_dk) if bytes_dk is not None and kept else
        (round(now.value) if measured else None),
        "saving": round(saving, 4) if saving is not None and kept else (0.0 if measured else None),
        "measured_saving": round(saving, 4) if saving is not None else None,
        "interval": [round(saving * now.low), round(saving * now.high)]
        if saving is not None and kept else [0, 0],
        "recommendation": chosen.kind if kept else "leave as is",
        "reason": chosen.reason,
        "command": command_for(Choice(chosen.kind, chosen.reason, detail), stats, round(keys.value),
                               target.label) if kept and measured else "-",
        "sampled": stats.keys,
        "type": kind, "type_share": round(share, 4), "types": stats.types,
        "encoding": enc, "encodings": stats.encodings,
        "ttl": stats.ttl, "ttl_share": round(stats.ttl_share, 4),
        "sizes": stats.sizes, "memory_usage_mean": round(stats.mem_mean, 2),
        "shapes": stats.shapes, "sessions": stats.sessions,
        "overhead_per_key": round(overhead, 2), "overhead_measured": calibrated,
    }
    if replay is not None:
        row["replay"] = {k: v for k, v in replay.items() if not k.startswith("_")}
    return row
