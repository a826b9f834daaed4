"""What a container run found, in sentences with the numbers, and its four figures.

Input: the records of harness.run_containers (one per container and N). Each figure
comes with the finding it shows, said in one sentence beside it, in seed 003's terms:
what the seed found, and whether today's machine agrees. A change within FLAT (15%) is
called flat: on a 2-core machine shared with other work, rounds of the same
configuration differ by about that much.

Drawing functions take a matplotlib Figure (the lab's report calls them; matplotlib is
imported by the caller, not here).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

FLAT = 0.15
REDIS_LIKE = ("redis-json", "densekv", "densekv-dense", "memcached")
COLORS = {
    "none": "#7f7f7f", "dict": "#17becf", "memcached": "#bcbd22", "files-flat": "#d62728",
    "files-hashed": "#ff9896", "sqlite-indexed": "#1f77b4", "sqlite-unindexed": "#aec7e8",
    "postgres-indexed": "#9467bd", "postgres-unindexed": "#c5b0d5", "redis-json": "#ff7f0e",
    "densekv": "#2ca02c", "densekv-dense": "#98df8a",
}


def filesystem_of(path: Path) -> str:
    """The file system type holding `path` (from /proc/mounts), or "unknown"."""
    try:
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "unknown"
    real = os.path.realpath(path)
    best = ("", "unknown")
    for parts in mounts:
        inside = len(parts) >= 3 and (real == parts[1] or real.startswith(parts[1].rstrip("/") + "/"))
        if inside and len(parts[1]) >= len(best[0]):
            best = (parts[1], parts[2])
    return best[1]


# -- reading the records ---------------------------------------------------------------


def curves(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """container -> its records in N order (containers in the order first seen)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        out.setdefault(r["container"], []).append(r)
    for rs in out.values():
        rs.sort(key=lambda r: r["n"])
    return out


def _rps(r: dict[str, Any], mix: str = "ro") -> float:
    return float(r[mix]["rps"])


def _cpu(r: dict[str, Any], mix: str = "ro") -> float:
    """CPU µs per request, app worker plus store processes (0 if not measured)."""
    return float(r[mix].get("app_cpu_us", 0) + r[mix].get("store_cpu_us", 0))


def _pct(a: float, b: float) -> float:
    return (b - a) / a * 100 if a else 0.0


def _trend(a: float, b: float) -> str:
    change = _pct(a, b) / 100
    if abs(change) <= FLAT:
        return "flat"
    return "rose" if change > 0 else "fell"


def ceiling(c: dict[str, list[dict[str, Any]]], mix: str = "ro") -> dict[int, float]:
    """N -> req/s of the no-session app in the same rounds: dividing by it takes out what
    the machine did meanwhile (other work on a shared machine moves every container alike)."""
    return {r["n"]: _rps(r, mix) for r in c.get("none", [])}


def _relative(rs: list[dict[str, Any]], top: dict[int, float], mix: str = "ro") -> tuple[float, float] | None:
    ca, cb = top.get(rs[0]["n"]), top.get(rs[-1]["n"])
    if not ca or not cb:
        return None
    return _rps(rs[0], mix) / ca, _rps(rs[-1], mix) / cb


def _fell(rs: list[dict[str, Any]], top: dict[int, float], mix: str = "ro") -> bool:
    rel = _relative(rs, top, mix) or (_rps(rs[0], mix), _rps(rs[-1], mix))
    return _trend(*rel) == "fell"


def _span(rs: list[dict[str, Any]], top: dict[int, float], mix: str = "ro") -> str:
    a, b = _rps(rs[0], mix), _rps(rs[-1], mix)
    text = f"{a:,.0f} -> {b:,.0f} req/s ({_pct(a, b):+.0f}%"
    rel = _relative(rs, top, mix)
    if rel is None:
        return text + f", {_trend(a, b)})"
    return text + f"; {rel[0]:.0%} -> {rel[1]:.0%} of the no-session ceiling: {_trend(*rel)})"


def label_of(rs: list[dict[str, Any]]) -> str:
    return str(rs[0]["label"])


def rps_findings(records: Sequence[dict[str, Any]], filesystem: str) -> list[str]:
    """The seed's three findings about throughput, each in one sentence."""
    c = curves(records)
    if not c:
        return []
    top = max(r["n"] for r in records)
    cap = ceiling(c)
    out = []
    memory = [name for name in ("dict", "memcached", "redis-json", "densekv", "densekv-dense") if name in c]
    if memory:
        parts = [f"{label_of(c[m])} {_span(c[m], cap)}" for m in memory]
        out.append(f"In-memory containers, read-only, from N = 0 to {top:,} stored sessions (seed 003: "
                   f"in-process memory and DRb flat, bar a GC dip): " + "; ".join(parts) + ".")
    if "files-flat" in c:
        hashed = f"; hashed directories {_span(c['files-hashed'], cap)}" if "files-hashed" in c else ""
        verdict = "falls here too" if _fell(c["files-flat"], cap) else "does not fall here"
        out.append(f"File per session in one flat directory {verdict}: {_span(c['files-flat'], cap)} from N = 0 to "
                   f"{top:,} on {filesystem} (seed 003: nearly 10x slower by 126k sessions on NetBSD FFS){hashed}.")
    sql = []
    falls = []
    for engine, label in (("sqlite", "SQLite"), ("postgres", "PostgreSQL")):
        if f"{engine}-unindexed" in c:
            rs = c[f"{engine}-unindexed"]
            falls.append(_fell(rs, cap))
            idx = f" against {_span(c[f'{engine}-indexed'], cap)} with it" if f"{engine}-indexed" in c else ""
            sql.append(f"{label} {_span(rs, cap)} without an index on the session id{idx}")
    if sql:
        verdict = ("falls off as N grows, as in seed 003" if all(falls) else
                   "does not fall off here" if not any(falls) else "falls off here for one engine only")
        out.append(f"Unindexed SQL {verdict} (seed 003: ActiveRecord without an index on sessid fell off, "
                   f"with one it stayed flat to 50k): " + "; ".join(sql) + ".")
    return out


def densekv_findings(records: Sequence[dict[str, Any]]) -> list[str]:
    """The issue's bar for densekv: flat within 10%, within 10% of the dict, fewest bytes."""
    c = curves(records)
    out = []
    for name in ("densekv", "densekv-dense"):
        if name not in c:
            continue
        rs = c[name]
        first, last = _rps(rs[0]), _rps(rs[-1])
        worst = min(rs, key=lambda r: _rps(r) / max(1e-9, first))
        line = (f"{label_of(rs)}: read-only {first:,.0f} req/s at N = {rs[0]['n']:,}, {last:,.0f} at "
                f"N = {rs[-1]['n']:,} ({_pct(first, last):+.0f}%; lowest {_rps(worst):,.0f} at N = {worst['n']:,})")
        rel = _relative(rs, ceiling(c))
        if rel is not None:
            line += f", {rel[0]:.0%} -> {rel[1]:.0%} of the no-session ceiling ({_pct(*rel):+.0f}%)"
        if "dict" in c:
            by_n = {r["n"]: r for r in c["dict"]}
            ratios = [(_rps(r) / _rps(by_n[r["n"]]), r["n"]) for r in rs if r["n"] in by_n and _rps(by_n[r["n"]])]
            if ratios:
                low = min(ratios)
                line += f"; against the in-process dict {min(x for x, _ in ratios):.0%} to " \
                        f"{max(x for x, _ in ratios):.0%} of its req/s (lowest at N = {low[1]:,})"
            cpu = [(_cpu(r), _cpu(by_n[r["n"]])) for r in rs if r["n"] in by_n]
            if cpu and all(a and b for a, b in cpu):
                line += (f"; CPU per read {cpu[0][0]:,.0f} -> {cpu[-1][0]:,.0f} µs against the dict's "
                         f"{cpu[0][1]:,.0f} -> {cpu[-1][1]:,.0f} µs")
        out.append(line + ".")
    return out


def bytes_table(records: Sequence[dict[str, Any]]) -> list[tuple[str, float]]:
    """(label, bytes per session at the largest N measured) for every container with bytes."""
    out = []
    for rs in curves(records).values():
        known = [r for r in rs if r.get("bytes_per_session") is not None]
        if known:
            out.append((label_of(rs), float(known[-1]["bytes_per_session"])))
    return sorted(out, key=lambda t: t[1])


def bytes_finding(records: Sequence[dict[str, Any]]) -> str:
    table = bytes_table(records)
    if not table:
        return ""
    top = max(r["n"] for r in records)
    ranked = ", ".join(f"{label} {b:,.0f}" for label, b in table)
    densekv = [t for t in table if t[0].startswith("densekv")]
    if densekv:
        best = table[0]
        if best[0].startswith("densekv"):
            runner = next((t for t in table if not t[0].startswith("densekv")), None)
            lead = f"{best[0]} stores a session in the fewest bytes, {best[1]:,.0f} B" + (
                f" ({runner[1] / best[1]:.1f}x less than the next, {runner[0]})" if runner else "")
        else:
            lead = f"densekv is not the smallest: {best[0]} takes {best[1]:,.0f} B against {densekv[0][1]:,.0f} B"
    else:
        lead = "densekv was not measured"
    return f"Bytes per stored session at N = {top:,}: {lead}; all, fewest first: {ranked} B."


def housekeeping_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per container, its housekeeping at the largest N where it ran."""
    rows = []
    for rs in curves(records).values():
        done = [r for r in rs if r.get("housekeeping")]
        if done:
            r = done[-1]
            hk = r["housekeeping"]
            rows.append({"label": r["label"], "container": r["container"], "n": r["n"], "seconds": hk["seconds"],
                         "removed": hk["removed"], "expired": hk["expired"], "rps_during": hk["during"]["rps"],
                         "rps_before": r["ro"]["rps"]})
    return rows


def housekeeping_finding(records: Sequence[dict[str, Any]]) -> str:
    rows = housekeeping_rows(records)
    if not rows:
        return ""
    parts = [f"{row['label']} {row['seconds']:.3f} s for {row['removed']:,} (serving {row['rps_during']:,.0f} "
             f"req/s meanwhile, {row['rps_before']:,.0f} before)" for row in rows]
    extra = ""
    if any(row["container"] == "dict" for row in rows):
        extra = " The dict is swept inside the only worker, which serves nothing while it runs."
    n = max(row["n"] for row in rows)
    return (f"Removing the N/2 expired sessions at N = {n:,} while serving (seed 003: nothing removes stale "
            "sessions unless the application does): " + "; ".join(parts) + "; memcached and Redis JSON+SETEX "
            "expire keys themselves." + extra)


# -- figures -------------------------------------------------------------------------------


def _xaxis(ax: Any, ns: list[int]) -> None:
    nonzero = [n for n in ns if n > 0]
    ax.set_xscale("symlog", linthresh=min(nonzero) if nonzero else 1)
    ax.set_xticks(ns)
    ax.set_xticklabels([f"{n:,}" for n in ns], rotation=30, fontsize=7)
    ax.set_xlabel("stored sessions (N)")
    ax.grid(True, which="both", alpha=0.3)


def _draw_per_mix(fig: Any, records: Sequence[dict[str, Any]],
                  value: Callable[[dict[str, Any]], float], ylabel: str, log: bool) -> None:
    """One panel per mix (read-only, read-write): value(record of one mix) per container vs N."""
    c = curves(records)
    ns = sorted({r["n"] for r in records})
    for i, (mix, title) in enumerate((("ro", "read-only"), ("rw", "read-write")), 1):
        ax = fig.add_subplot(1, 2, i)
        for name, rs in c.items():
            ax.plot([r["n"] for r in rs], [value(r[mix]) for r in rs], marker=".", label=label_of(rs),
                    color=COLORS.get(name), linestyle="--" if name == "none" else "-")
        _xaxis(ax, ns)
        if log:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=7)


def draw_rps(fig: Any, records: Sequence[dict[str, Any]]) -> None:
    _draw_per_mix(fig, records, lambda m: m["rps"], "requests per second (median of rounds)", log=False)


def draw_p99(fig: Any, records: Sequence[dict[str, Any]]) -> None:
    _draw_per_mix(fig, records, lambda m: max(m["p99_ms"], 1e-3), "p99 latency, ms (median of rounds)", log=True)


def draw_bytes(fig: Any, records: Sequence[dict[str, Any]]) -> None:
    table = bytes_table(records)
    ax = fig.add_subplot(1, 1, 1)
    labels = [t[0] for t in table]
    values = [t[1] for t in table]
    colors = [COLORS.get(next((rs[0]["container"] for rs in curves(records).values() if label_of(rs) == lab), ""),
                         "#333333") for lab in labels]
    ax.barh(range(len(values)), values, color=colors)
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:,.0f} B", va="center", fontsize=8)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("bytes per stored session (log scale)")
    ax.grid(True, axis="x", which="both", alpha=0.3)


def draw_housekeeping(fig: Any, records: Sequence[dict[str, Any]]) -> None:
    rows = housekeeping_rows(records)
    ax = fig.add_subplot(1, 2, 1)
    labels = [r["label"] for r in rows]
    ax.barh(range(len(rows)), [max(r["seconds"], 1e-4) for r in rows],
            color=[COLORS.get(r["container"], "#333333") for r in rows])
    for i, r in enumerate(rows):
        ax.text(max(r["seconds"], 1e-4), i, f" {r['seconds']:.3f} s", va="center", fontsize=7)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("seconds to remove N/2 expired (log)")
    ax2 = fig.add_subplot(1, 2, 2)
    ys = range(len(rows))
    ax2.barh([y - 0.2 for y in ys], [r["rps_before"] for r in rows], 0.4, label="read-only, before", color="#cccccc")
    ax2.barh([y + 0.2 for y in ys], [r["rps_during"] for r in rows], 0.4, label="during the sweep",
             color=[COLORS.get(r["container"], "#333333") for r in rows])
    ax2.set_yticks(list(ys))
    ax2.set_yticklabels([])
    ax2.set_xlabel("requests per second")
    ax2.legend(fontsize=7)
